"""What a comparison of two runs returns: its rows, its verdict, and the margin's verdict.

Frozen records, each with the ``to_dict`` every report and the JSON output print; the
engine that fills them is ``_compare``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ._fragility import Fragility
from ._intervals import Interval
from ._limits import Limit
from ._margin import MarginTest
from ._rows import RowCounts

__all__ = [
    "SCHEMA_VERSION",
    "Comparison",
    "EventTally",
    "MarginVerdict",
    "MarginWord",
    "Pairs",
    "Row",
    "RowInput",
    "Verdict",
    "Word",
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
