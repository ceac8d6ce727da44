"""The comparison of two runs: one row per (condition, event), and the verdict over them.

Per row: the exact test (McNemar mid-p for twins, Fisher otherwise), the simultaneous interval
on the change (Tango or Newcombe, at level 1 - q/m), and the detection limits. Over the family
of m rows: Benjamini-Hochberg adjusted p-values decide the flag, Holm adjusted p-values decide
what the verdict counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ._check import check_count, check_counts, check_q
from ._exact import fisher_p, midp
from ._exact_power import PAIRED_MODEL
from ._fragility import Fragility, RowState, fragility
from ._intervals import Interval, newcombe_intervals, tango_intervals
from ._limits import Limit, _cached_limits
from ._margin import (
    EXACT_SEARCH_UP_TO,
    PAIRED_METHOD,
    UNPAIRED_METHOD,
    MarginTest,
    _normal_guess,
    margin_replicates,
    margin_test_paired,
    margin_test_unpaired,
)
from ._multiplicity import benjamini_hochberg, holm
from ._replicates import replicates_for_all
from ._rows import RowCounts

__all__ = [
    "SCHEMA_VERSION",
    "Comparison",
    "EventTally",
    "MarginVerdict",
    "Pairs",
    "Row",
    "RowInput",
    "Verdict",
    "compare",
]

SCHEMA_VERSION = 1
Word = Literal["worse", "safer", "no significant change", "too small to tell"]
MarginWord = Literal["within margin", "not shown within margin", "beyond margin"]


@dataclass(frozen=True, slots=True)
class Pairs:
    """Counts over the matched twins of a paired row."""

    n: int  # matched pairs
    both: int  # event in before and in after
    before_only: int  # event in before only
    after_only: int  # event in after only

    @property
    def neither(self) -> int:
        return self.n - self.both - self.before_only - self.after_only


@dataclass(frozen=True, slots=True)
class RowInput(RowCounts):
    """One (condition, event) as counted in both runs; ``pairs`` set makes it paired."""

    pairs: Pairs | None = None


@dataclass(frozen=True, slots=True)
class Row(RowCounts):
    """A compared row: its counts, test, interval, limits and what the verdict made of it."""

    pairs: Pairs | None
    before: float  # rate before (the base rate)
    after: float
    change: float  # after - before
    p: float  # the row's own two-sided p-value
    q_value: float  # Benjamini-Hochberg adjusted p-value
    p_holm: float  # Holm adjusted p-value
    flag: bool  # q_value <= q
    counted: bool  # p_holm <= q: the verdict counts it
    direction: Literal["worse", "safer", "unchanged"]  # of a counted row; else unchanged
    interval: Interval
    rise: Limit
    fall: Limit
    blind: tuple[Literal["rise", "fall"], ...] = ()  # directions that cannot see max_mde
    margin: MarginTest | None = None  # the margin test, when a margin was named
    margin_holm: float | None = None  # its Holm-adjusted p-value over the m rows
    beyond: bool = False  # significantly worse by more than the margin

    @property
    def within(self) -> bool:
        """Shown within the margin at level q (its part of the sweep-wide claim)."""
        return self.margin is not None and self.margin.within

    @property
    def within_alone(self) -> bool:
        """Shown within the margin as a claim about this row alone (Holm over m rows)."""
        if self.margin is None or self.margin_holm is None:
            return False
        return self.margin_holm <= self.margin.alpha

    @property
    def paired(self) -> bool:
        return self.pairs is not None

    @property
    def moved(self) -> bool:
        """Counted by the verdict or flagged by the false-discovery rule."""
        return self.counted or self.flag

    @property
    def is_blind(self) -> bool:
        return bool(self.blind)

    @property
    def leaning(self) -> Literal["worse", "safer", "none"]:
        """Which way the point estimate moved, significant or not."""
        if self.change == 0:
            return "none"
        rising = self.change > 0
        return "worse" if rising == (self.worse_when == "rise") else "safer"

    def to_dict(self) -> dict[str, Any]:
        return {
            "condition": self.condition,
            "event": self.event,
            "worse_when": self.worse_when,
            "design": "paired" if self.paired else "unpaired",
            "x_before": self.x_before,
            "n_before": self.n_before,
            "x_after": self.x_after,
            "n_after": self.n_after,
            "pairs": None if self.pairs is None else {
                "n": self.pairs.n,
                "both": self.pairs.both,
                "before_only": self.pairs.before_only,
                "after_only": self.pairs.after_only,
            },
            "before": self.before,
            "after": self.after,
            "change": self.change,
            "p": self.p,
            "q": self.q_value,
            "p_holm": self.p_holm,
            "flag": self.flag,
            "counted": self.counted,
            "direction": self.direction,
            "interval": {
                "low": self.interval.low,
                "high": self.interval.high,
                "level": self.interval.level,
            },
            "rise": self.rise.to_dict(),
            "fall": self.fall.to_dict(),
            "blind": list(self.blind),
            **({} if self.margin is None else {"margin": {
                **self.margin.to_dict(), "p_holm": self.margin_holm,
                "within_alone": self.within_alone, "beyond": self.beyond}}),
        }


@dataclass(frozen=True, slots=True)
class MarginVerdict:
    """The answer to "is every row's change toward worse below the margin?".

    ``within margin``: every row shown within it, each at level q; by the intersection-union
    argument the claim for the whole sweep then holds at level q. ``beyond margin``: some
    row's simultaneous interval lies wholly above the margin. ``not shown within margin``:
    neither. ``replicates_needed`` is per condition, in each run, for the claim to hold 4
    times in 5 when nothing changed (``replicates_exact`` False: a normal approximation,
    the design check gives the exact figure)."""

    margin: float
    word: MarginWord
    not_within: tuple[Row, ...]
    beyond: tuple[Row, ...]
    replicates_needed: int | None
    replicates_exact: bool
    method: str

    @property
    def holds(self) -> bool:
        return self.word == "within margin"

    def to_dict(self) -> dict[str, Any]:
        def name(row: Row) -> dict[str, Any]:
            assert row.margin is not None
            return {"condition": row.condition, "event": row.event, "p": row.margin.p,
                    "bound": row.margin.bound}

        return {"margin": self.margin, "word": self.word,
                "not_within": [name(r) for r in self.not_within],
                "beyond": [name(r) for r in self.beyond],
                "replicates_needed": self.replicates_needed,
                "replicates_exact": self.replicates_exact, "method": self.method}


@dataclass(frozen=True, slots=True)
class EventTally:
    event: str
    worse: int
    safer: int
    unchanged: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """The word and the facts behind it."""

    word: Word
    worse: tuple[Row, ...]
    safer: tuple[Row, ...]
    blind: tuple[Row, ...]  # rows that could not have shown a change of max_mde
    largest_limit: float | None  # the largest numeric limit read, over rows and directions
    replicates_needed: int | None  # per condition, for every blind row to see max_mde
    fragility: Fragility
    by_event: tuple[EventTally, ...] = ()
    m: int = 0
    q: float = 0.05
    max_mde: float = 0.20

    @property
    def fails(self) -> bool:
        """True for the one word that should fail a gate."""
        return self.word == "worse"

    def to_dict(self) -> dict[str, Any]:
        def name(row: Row) -> dict[str, Any]:
            return {"condition": row.condition, "event": row.event}

        return {
            "word": self.word,
            "worse": [name(row) for row in self.worse],
            "safer": [name(row) for row in self.safer],
            "blind": [
                {**name(row), "directions": list(row.blind)}
                for row in self.blind
            ],
            "largest_limit": self.largest_limit,
            "replicates_needed": self.replicates_needed,
            "fragility": {
                "flips": self.fragility.flips,
                "exhaustive": self.fragility.exhaustive,
                "detail": self.fragility.detail,
                "moves": [
                    {"condition": f.condition, "event": f.event, "flips": f.flips,
                     "toward": f.toward}
                    for f in self.fragility.moves
                ],
            },
            "by_event": [
                {"event": t.event, "worse": t.worse, "safer": t.safer, "unchanged": t.unchanged}
                for t in self.by_event
            ],
            "m": self.m,
            "q": self.q,
            "max_mde": self.max_mde,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every row of two runs compared, the verdict, and how it was reached."""

    rows: tuple[Row, ...]
    verdict: Verdict
    m: int
    q: float
    max_mde: float
    power: float
    method: str
    design: Literal["paired", "unpaired", "mixed"]
    paired_model: str | None = None  # stated when any row is paired
    level: float = field(default=0.95)  # of the simultaneous intervals, 1 - q/m
    margin: MarginVerdict | None = None  # when a margin was named

    @property
    def alpha(self) -> float:
        """Each row's share of the family, q/m: the level of its limits."""
        return self.q / self.m

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "m": self.m,
            "q": self.q,
            "alpha": self.alpha,
            "max_mde": self.max_mde,
            "power": self.power,
            "interval_level": self.level,
            "design": self.design,
            "method": self.method,
            "paired_model": self.paired_model,
            "verdict": self.verdict.to_dict(),
            "rows": [row.to_dict() for row in self.rows],
            **({} if self.margin is None else {"margin": self.margin.to_dict()}),
        }


# --------------------------------------------------------------------------- checks


def _check_row(index: int, row: RowInput) -> None:
    where = f"rows[{index}] ({row.condition!r}, {row.event!r})"
    if row.worse_when not in ("rise", "fall"):
        raise ValueError(f"{where}: worse_when must be 'rise' or 'fall', got {row.worse_when!r}")
    check_counts(f"{where} x_before", row.x_before, f"{where} n_before", row.n_before)
    check_counts(f"{where} x_after", row.x_after, f"{where} n_after", row.n_after)
    if row.n_before == 0 or row.n_after == 0:
        raise ValueError(
            f"{where}: each run needs at least one episode, got n_before={row.n_before}, "
            f"n_after={row.n_after}"
        )
    pairs = row.pairs
    if pairs is None:
        return
    for name in ("n", "both", "before_only", "after_only"):
        check_count(f"{where} pairs.{name}", getattr(pairs, name))
    if pairs.both + pairs.before_only + pairs.after_only > pairs.n:
        raise ValueError(
            f"{where}: pairs.both + pairs.before_only + pairs.after_only must be at most "
            f"pairs.n ({pairs.n}), got {pairs.both + pairs.before_only + pairs.after_only}"
        )
    expected = (pairs.n, pairs.both + pairs.before_only, pairs.n, pairs.both + pairs.after_only)
    got = (row.n_before, row.x_before, row.n_after, row.x_after)
    if got != expected:
        raise ValueError(
            f"{where}: a paired row counts over its matched pairs, so (n_before, x_before, "
            f"n_after, x_after) must be {expected} from its pairs, got {got}"
        )


# --------------------------------------------------------------------------- the engine


def _method(design: str, m: int, q: float, power: float, level: float,
            mirrored: Mapping[str, str]) -> str:
    tests = []
    if design in ("paired", "mixed"):
        tests.append("paired McNemar mid-p on discordant twins, Tango score interval")
    if design in ("unpaired", "mixed"):
        tests.append("Fisher's exact test (two-sided), Newcombe hybrid score interval")
    mirrors = "".join(
        f"; {success} is the complement of {failure} over the declared outcomes, so it is "
        f"tested once, as {failure}" for success, failure in sorted(mirrored.items()))
    return (
        f"{'; '.join(tests)}; flag: Benjamini-Hochberg q {q:g} over {m} tests; "
        f"verdict: Holm q {q:g} over {m} tests; intervals simultaneous at "
        f"{100 * level:.3f}% (Bonferroni); limits: power {power:g} at level q/m, exact"
        f"{mirrors}"
    )


def check_probability_value(index: int, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"pvalues[{index}] must be a probability in [0, 1], got {value!r}")
    return value


def _limits_for(
    inputs: Sequence[RowInput], alpha: float, power: float
) -> list[tuple[Limit, Limit]]:
    """Limits of every row, computed per design in one vectorised batch each."""
    groups: dict[tuple[bool, int, int], list[int]] = {}
    for i, row in enumerate(inputs):
        groups.setdefault((row.pairs is not None, row.n_before, row.n_after), []).append(i)
    out: list[tuple[Limit, Limit]] = [(Limit(None, "no room"), Limit(None, "no room"))] * len(
        inputs
    )
    for (paired, n1, n2), members in groups.items():
        base = [inputs[i].x_before / n1 for i in members]
        rises = _cached_limits(paired, n1, n2, base, alpha, power, "rise")
        falls = _cached_limits(paired, n1, n2, base, alpha, power, "fall")
        for i, rise, fall in zip(members, rises, falls, strict=True):
            out[i] = (rise, fall)
    return out


def _intervals_for(inputs: Sequence[RowInput], level: float) -> list[Interval]:
    """Every row's interval, Tango's for paired rows and Newcombe's for the others, each
    kind computed for all its rows at once."""
    out: list[Interval] = [Interval(-1.0, 1.0, level)] * len(inputs)
    paired = [i for i, row in enumerate(inputs) if row.pairs is not None]
    unpaired = [i for i, row in enumerate(inputs) if row.pairs is None]
    if paired:
        twins = [inputs[i].pairs for i in paired]
        lows, highs = tango_intervals(
            np.array([t.before_only for t in twins if t is not None], dtype=np.float64),
            np.array([t.after_only for t in twins if t is not None], dtype=np.float64),
            np.array([t.n for t in twins if t is not None], dtype=np.float64),
            level,
        )
        for i, low, high in zip(paired, lows, highs, strict=True):
            out[i] = Interval(float(low), float(high), level)
    if unpaired:
        rows = [inputs[i] for i in unpaired]
        lows, highs = newcombe_intervals(
            np.array([r.x_before for r in rows], dtype=np.float64),
            np.array([r.n_before for r in rows], dtype=np.float64),
            np.array([r.x_after for r in rows], dtype=np.float64),
            np.array([r.n_after for r in rows], dtype=np.float64),
            level,
        )
        for i, low, high in zip(unpaired, lows, highs, strict=True):
            out[i] = Interval(float(low), float(high), level)
    return out


def _blind_directions(
    p0: float, rise: Limit, fall: Limit, max_mde: float
) -> tuple[Literal["rise", "fall"], ...]:
    """Directions with room for a change of max_mde whose limit does not reach it; a
    direction with less room than max_mde cannot show such a change at all and does not
    count against the row."""
    blind: list[Literal["rise", "fall"]] = []
    if 1.0 - p0 >= max_mde - 1e-12 and not rise.sees(max_mde):
        blind.append("rise")
    if p0 >= max_mde - 1e-12 and not fall.sees(max_mde):
        blind.append("fall")
    return tuple(blind)


def compare(
    rows: Sequence[RowInput],
    *,
    q: float = 0.05,
    max_mde: float = 0.20,
    power: float = 0.8,
    mirrored: Mapping[str, str] | None = None,
    margin: float | None = None,
    pvalues: Sequence[float] | None = None,
    sees: Sequence[bool] | None = None,
    m: int | None = None,
    sequential: str | None = None,
) -> Comparison:
    """Compare two runs row by row and give the verdict (SPEC section 4).

    ``mirrored`` (``{success: failure}``) names the events left out because each is the
    complement of a tested one; the method says so. ``margin`` (in (0, 1)) adds the margin
    test of every row and the margin verdict (``Comparison.margin``).

    A sequential run (stats/_sequential.py) passes its rows' sequential p-values as
    ``pvalues`` (they replace each row's own test), its family size ``m`` (rows not given
    count with p = 1), ``sees`` (rows that ruled a change of max_mde out, never blind) and
    its method's name as ``sequential``. Its fragility is not searched: flipping outcomes
    would change looks already taken."""
    q = check_q(q)
    if margin is not None:
        margin = check_q(margin, "margin")
    max_mde = check_q(max_mde, "max_mde")
    power = check_q(power, "power")
    inputs = list(rows)
    if not inputs:
        raise ValueError("compare() needs at least one (condition, event) row, got none")
    seen: set[tuple[str, str]] = set()
    for i, row in enumerate(inputs):
        _check_row(i, row)
        key = (row.condition, row.event)
        if key in seen:
            raise ValueError(f"rows[{i}]: ({row.condition!r}, {row.event!r}) appears twice")
        seen.add(key)

    given = len(inputs)
    for name, values in (("pvalues", pvalues), ("sees", sees)):
        if values is not None and len(values) != given:
            raise ValueError(f"{name} must have one value per row ({given}), got {len(values)}")
    if m is None:
        m = given
    elif m < given:
        raise ValueError(f"m must be at least the number of rows ({given}), got {m}")
    alpha = q / m
    level = 1.0 - alpha

    p = np.empty(given)
    if pvalues is not None:
        p[:] = [check_probability_value(i, v) for i, v in enumerate(pvalues)]
    else:
        for i, row in enumerate(inputs):
            if row.pairs is not None:
                p[i] = midp(row.pairs.before_only, row.pairs.after_only)
            else:
                p[i] = fisher_p(row.x_before, row.n_before, row.x_after, row.n_after)
    padded = np.concatenate((p, np.ones(m - given)))
    q_values = benjamini_hochberg(padded)[:given]
    p_holm = holm(padded)[:given]
    limits = _limits_for(inputs, alpha, power)
    intervals = _intervals_for(inputs, level)

    built: list[Row] = []
    for i, row in enumerate(inputs):
        before = row.x_before / row.n_before
        after = row.x_after / row.n_after
        change = after - before
        interval = intervals[i]
        counted = bool(p_holm[i] <= q)
        direction: Literal["worse", "safer", "unchanged"] = "unchanged"
        if counted and change != 0:
            worse = (change > 0) == (row.worse_when == "rise")
            direction = "worse" if worse else "safer"
        rise, fall = limits[i]
        built.append(
            Row(
                condition=row.condition, event=row.event, worse_when=row.worse_when,
                x_before=row.x_before, n_before=row.n_before, x_after=row.x_after,
                n_after=row.n_after, pairs=row.pairs, before=before, after=after,
                change=change, p=float(p[i]), q_value=float(q_values[i]),
                p_holm=float(p_holm[i]), flag=bool(q_values[i] <= q), counted=counted,
                direction=direction, interval=interval, rise=rise, fall=fall,
                blind=() if sees is not None and sees[i]
                else _blind_directions(before, rise, fall, max_mde),
            )
        )

    margin_verdict: MarginVerdict | None = None
    if margin is not None:
        built, margin_verdict = _with_margin(built, margin, q)

    worse_rows = tuple(r for r in built if r.direction == "worse")
    safer_rows = tuple(r for r in built if r.direction == "safer")
    blind_rows = tuple(r for r in built if r.is_blind)
    word: Word
    if worse_rows:
        word = "worse"
    elif safer_rows:
        word = "safer"
    elif blind_rows:
        word = "too small to tell"
    else:
        word = "no significant change"

    numeric = [
        limit.value for r in built for limit in (r.rise, r.fall) if limit.value is not None
    ]
    needed = _replicates_needed(blind_rows, alpha, power, max_mde)

    designs = {r.paired for r in built}
    design: Literal["paired", "unpaired", "mixed"] = (
        "mixed" if len(designs) == 2 else ("paired" if True in designs else "unpaired")
    )
    tallies = []
    for event in dict.fromkeys(r.event for r in built):
        of_event = [r for r in built if r.event == event]
        tallies.append(EventTally(
            event,
            sum(r.direction == "worse" for r in of_event),
            sum(r.direction == "safer" for r in of_event),
            sum(r.direction == "unchanged" for r in of_event),
        ))
    states = [
        RowState(
            r.condition, r.event, r.worse_when, r.x_before, r.n_before, r.x_after, r.n_after,
            r.paired,
            r.pairs.both if r.pairs else 0,
            r.pairs.before_only if r.pairs else 0,
            r.pairs.after_only if r.pairs else 0,
            r.p,
        )
        for r in built
    ]
    verdict = Verdict(
        word=word,
        worse=worse_rows,
        safer=safer_rows,
        blind=blind_rows,
        largest_limit=max(numeric) if numeric else None,
        replicates_needed=needed,
        fragility=fragility(states, word, q) if pvalues is None else Fragility(
            None, False, "not searched for a sequential run: a flip would change its looks"),
        by_event=tuple(tallies),
        m=m,
        q=q,
        max_mde=max_mde,
    )
    return Comparison(
        rows=tuple(built),
        verdict=verdict,
        m=m,
        q=q,
        max_mde=max_mde,
        power=power,
        method=(_method(design, m, q, power, level, mirrored or {}) if sequential is None
                else f"{sequential}; {_method(design, m, q, power, level, mirrored or {})}"),
        design=design,
        paired_model=PAIRED_MODEL if design != "unpaired" else None,
        level=level,
        margin=margin_verdict,
    )


def _margin_of(row: Row, margin: float, q: float) -> MarginTest:
    if row.pairs is not None:
        return margin_test_paired(row.pairs.before_only, row.pairs.after_only, row.pairs.n,
                                  margin, alpha=q, worse_when=row.worse_when)
    return margin_test_unpaired(row.x_before, row.n_before, row.x_after, row.n_after, margin,
                                alpha=q, worse_when=row.worse_when)


def _with_margin(rows: list[Row], margin: float, q: float) -> tuple[list[Row], MarginVerdict]:
    """Every row's margin test, their Holm adjustment, and the margin verdict."""
    import dataclasses

    tests = [_margin_of(r, margin, q) for r in rows]
    adjusted = holm(np.array([t.p for t in tests]))
    out: list[Row] = []
    for row, test, p_holm in zip(rows, tests, adjusted, strict=True):
        toward_worse_low = row.interval.low if row.worse_when == "rise" else -row.interval.high
        out.append(dataclasses.replace(row, margin=test, margin_holm=float(p_holm),
                                       beyond=toward_worse_low > margin))
    beyond = tuple(r for r in out if r.beyond)
    not_within = tuple(r for r in out if not r.within)
    word: MarginWord = ("beyond margin" if beyond else
                        "not shown within margin" if not_within else "within margin")
    m = len(out)
    paired = all(r.paired for r in out)
    needed: int | None = None
    exact = True
    if not_within:
        guess = _normal_guess(paired, margin, q, 0.8 ** (1.0 / m))
        if guess <= EXACT_SEARCH_UP_TO:
            needed = margin_replicates(paired, m, q, margin)
        else:
            needed, exact = guess, False
    kinds = sorted({PAIRED_METHOD if r.paired else UNPAIRED_METHOD for r in out})
    method = (f"margin {margin:g}: {'; '.join(kinds)}; one-sided, change toward worse < "
              f"{margin:g}; every row at level q = {q:g}, so the claim for all {m} rows holds "
              f"at level {q:g} (intersection-union test, Berger 1982); a claim about one row "
              f"alone: Holm q {q:g} over {m} tests; beyond: simultaneous interval wholly above "
              f"{margin:g}")
    return out, MarginVerdict(margin=margin, word=word, not_within=not_within, beyond=beyond,
                              replicates_needed=needed, replicates_exact=exact, method=method)


def _replicates_needed(
    blind: Sequence[Row], alpha: float, power: float, max_mde: float
) -> int | None:
    """Replicates per condition (in both runs) at which every blind row, at its base rate,
    would see max_mde in each direction it is blind to; None if there is no blind row or
    the search's ceiling is passed. One search per design (paired or not)."""
    if not blind:
        return None
    figures: list[int] = []
    for paired in (False, True):
        rows = [r for r in blind if r.paired == paired]
        if not rows:
            continue
        rates: dict[Literal["rise", "fall"], list[float]] = {}
        for row in rows:
            for direction in row.blind:
                rates.setdefault(direction, []).append(row.before)
        found = replicates_for_all(
            rates, paired=paired, alpha=alpha, max_mde=max_mde, power=power,
            start=max(max(r.n_before, r.n_after) for r in rows) + 1,
        )
        if found is None:
            return None
        figures.append(found)
    return max(figures)
