"""Twin agreement of a paired comparison: how often the two episodes of one seed ended alike,
row by row, and what that means for the paired test's power.

Reads only a :class:`~pytest_prove.stats.Comparison` (its paired rows' twins), so any
comparison paired by seed gets it: a run against its baseline, two runs of one salt (an A/A
check, ``pytest-prove aa``), or two arms of one session.  The statistics are in
``stats/_twins.py``; this module picks the rows and the figures a report prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, final

from ..stats import (
    AGREEMENT_LEVEL,
    TWIN_MODEL,
    Agreement,
    Comparison,
    Limit,
    PooledKappa,
    Row,
    agreement,
    design_check,
    pooled_kappa,
    twin_limits,
    twin_replicates,
)

__all__ = ["TwinReview", "TwinRow", "twin_review"]


@final
@dataclass(frozen=True, slots=True)
class TwinRow:
    """One paired row's twins: how many ended alike, b and c, and the limit toward worse
    at the agreement seen (``limit``) beside the independent-twins one (``independent``)."""

    condition: str
    event: str
    agreement: Agreement
    direction: Literal["rise", "fall"]  # toward worse
    limit: Limit
    independent: Limit

    def to_dict(self) -> dict[str, Any]:
        a = self.agreement
        return {"condition": self.condition, "event": self.event, "twins": a.n,
                "alike": a.alike, "agreement": a.rate, "before_only": a.before_only,
                "after_only": a.after_only, "kappa": a.kappa, "toward_worse": self.direction,
                "limit": self.limit.to_dict(), "independent_limit": self.independent.to_dict()}


@final
@dataclass(frozen=True, slots=True)
class TwinReview:
    """Every paired row's twins, the agreement pooled over conditions, and the replicates a
    paired design needs for max_mde at that agreement (its lower bound) and at independence."""

    rows: tuple[TwinRow, ...]
    pooled: PooledKappa
    max_mde: float
    m: int
    replicates_at_agreement: int | None  # at the pooled kappa's upper bound
    replicates_independent: int | None  # kappa = 1: what the design check asks today

    @property
    def twins(self) -> int:
        """Seeds compared (the twins of each condition once)."""
        return self.pooled.twins

    @property
    def alike(self) -> int:
        return self.pooled.twins - self.pooled.discordant

    @property
    def rate(self) -> float:
        return self.alike / self.twins if self.twins else 1.0

    @property
    def lowest(self) -> TwinRow | None:
        """The row whose twins agreed least."""
        return min(self.rows, key=lambda r: (r.agreement.rate, r.condition, r.event),
                   default=None)

    @property
    def weakest(self) -> TwinRow | None:
        """The row with the largest limit toward worse at the agreement seen."""
        numeric = [r for r in self.rows if r.limit.value is not None]
        return max(numeric, key=lambda r: (r.limit.value or 0.0), default=None)

    def to_dict(self) -> dict[str, Any]:
        return {"twins": self.twins, "alike": self.alike, "agreement": self.rate,
                "kappa": self.pooled.kappa, "kappa_upper": self.pooled.upper,
                "level": self.pooled.level, "max_mde": self.max_mde, "m": self.m,
                "replicates_at_agreement": self.replicates_at_agreement,
                "replicates_independent": self.replicates_independent,
                "model": TWIN_MODEL, "rows": [r.to_dict() for r in self.rows]}


def _twin_rows(rows: Sequence[Row], alpha: float, power: float) -> list[TwinRow]:
    """Every paired row's twins, the limits at their agreement computed together for the
    rows of one size and direction (one vectorised bisection)."""
    paired = [(row, agreement(row.pairs.n, row.pairs.both, row.pairs.before_only,
                              row.pairs.after_only))
              for row in rows if row.pairs is not None and row.pairs.n > 0]
    limits: dict[int, Limit] = {}
    groups: dict[tuple[int, str], list[int]] = {}
    for i, (row, found) in enumerate(paired):
        # kappa None: the rates are 0 or 1 in both runs, where the model's discordance is 0
        # at any kappa, so the limit is the independent one. A sequential run's row has no
        # limit of its own (the fixed test's at the look its condition stopped at is not
        # what the procedure detects): none at its agreement either.
        if found.kappa is not None and row.rise.status != "sequential":
            groups.setdefault((found.n, row.worse_when), []).append(i)
    for (n, worse_when), members in groups.items():
        p0 = [paired[i][0].before for i in members]
        kappa = [paired[i][1].kappa or 0.0 for i in members]
        toward: Literal["rise", "fall"] = "rise" if worse_when == "rise" else "fall"
        for i, limit in zip(members, twin_limits(n, p0, kappa=kappa, alpha=alpha,
                                                 power=power, direction=toward), strict=True):
            limits[i] = limit
    found_rows = []
    for i, (row, found) in enumerate(paired):
        direction: Literal["rise", "fall"] = "rise" if row.worse_when == "rise" else "fall"
        independent = row.rise if direction == "rise" else row.fall
        found_rows.append(TwinRow(row.condition, row.event, found, direction,
                                  limits.get(i, independent), independent))
    return found_rows


def twin_review(comparison: Comparison | None) -> TwinReview | None:
    """The twins of ``comparison``'s paired rows, or None when it has none."""
    if comparison is None:
        return None
    rows = tuple(_twin_rows(comparison.rows, comparison.alpha, comparison.power))
    if not rows:
        return None
    # One row a condition (its first): rows of one condition share their twins, and the
    # pooled bound counts each twin once.
    first: dict[str, Agreement] = {}
    for r in rows:
        first.setdefault(r.condition, r.agreement)
    pooled = pooled_kappa(list(first.values()), AGREEMENT_LEVEL)
    kappa = 1.0 if pooled.upper is None else min(pooled.upper, 1.0)
    at_agreement = twin_replicates(comparison.m, kappa=kappa, q=comparison.q,
                                   max_mde=comparison.max_mde, power=comparison.power)
    # At independence, the design check's own figure (the plan's), from one replicate up.
    independent = design_check(1, comparison.m, paired=True, q=comparison.q,
                               max_mde=comparison.max_mde,
                               power=comparison.power).replicates_needed
    return TwinReview(rows, pooled, comparison.max_mde, comparison.m, at_agreement,
                      independent)
