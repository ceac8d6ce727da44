"""What a sequential run is made of and records: its design (and the manifest's record of
it, read back), its rows' counts at each look, and the decisions about rows and conditions
(``_sequential.py`` computes them)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ._margin import MarginTest
from ._results import RowInput

__all__ = ["FUTILE", "READABLE", "STOPPED", "VERSION", "ConditionDecision", "RowDecision",
           "SequentialDesign", "SequentialRow", "State", "design_from_dict"]

VERSION = 3
#: The versions whose designs this one reads again (2: unpaired futility on both sides).
READABLE = (2, 3)

State = Literal["worse", "safer", "no change of max_mde", "no worsening of max_mde",
                "within margin", "open", "complete"]
#: The states in which a condition stopped before its last look (decided).
STOPPED: tuple[State, ...] = ("worse", "safer", "no change of max_mde",
                               "no worsening of max_mde", "within margin")
#: The states of a row or condition stopped by the futility rule: paired (and version 2's
#: unpaired designs) rule out a change either way, unpaired a worsening.
FUTILE: tuple[State, ...] = ("no change of max_mde", "no worsening of max_mde")


@dataclass(frozen=True, slots=True)
class SequentialDesign:
    """A sequential sweep's plan: its looks, its boundaries, and what it is expected to
    cost (exact). Replicates are per condition."""

    replicates: int  # the planned maximum (the run's replicates)
    m: int
    paired: bool
    q: float
    max_mde: float
    power: float
    looks: tuple[int, ...]  # replicates per condition at each look
    efficacy: float  # the nominal level a row's smallest p must reach at q/m (Holm's first)
    futility: float  # the futility threshold (log profile likelihood ratio)
    fixed: int | None  # replicates of the fixed design that passes the design check
    replicates_needed: int | None  # the smallest maximum keeping power at max_mde
    ok: bool  # power_at_max_mde >= power
    power_at_max_mde: float  # exact, the smallest over the nuisance values checked
    expected_unchanged: float  # exact expected replicates of an unchanged condition at 0.40
    expected_moved: float  # of a condition that moved by max_mde from 0.40
    method: str
    version: int = VERSION

    @property
    def one_sided(self) -> bool:
        """Whether its futility rule rules out a worsening only (unpaired, from version 3),
        not a change either way (paired, and version 2's unpaired designs)."""
        return not self.paired and self.version >= 3

    @property
    def power_asked(self) -> float:
        """The power at max_mde the check asks: ``power`` (the figure is exact)."""
        return self.power

    def expected_episodes(self, conditions: int, moved: int = 0) -> float:
        """Expected episodes of a sweep of ``conditions`` conditions, ``moved`` of them by
        max_mde and the rest unchanged."""
        return (conditions - moved) * self.expected_unchanged + moved * self.expected_moved

    def to_dict(self) -> dict[str, object]:
        return {
            "version": self.version, "replicates": self.replicates, "m": self.m,
            "paired": self.paired, "q": self.q, "max_mde": self.max_mde, "power": self.power,
            "looks": list(self.looks), "efficacy": self.efficacy, "futility": self.futility,
            "fixed": self.fixed, "replicates_needed": self.replicates_needed, "ok": self.ok,
            "power_at_max_mde": self.power_at_max_mde,
            "expected_unchanged": self.expected_unchanged,
            "expected_moved": self.expected_moved, "method": self.method,
        }


def design_from_dict(data: object) -> SequentialDesign:
    """A design as :meth:`SequentialDesign.to_dict` stored it (a run's manifest); raises
    ValueError naming what is wrong (a design stored by pytest-prove before version 2 of the
    method is refused: its looks were read with another test)."""
    if not isinstance(data, dict):
        raise ValueError(f"a sequential design is a mapping, got {type(data).__name__}")
    version = data.get("version")
    if type(version) is int and version > VERSION:
        raise ValueError(
            f"the run's sequential design was recorded by a newer pytest-prove (method "
            f"version {version}; this one reads {', '.join(map(str, READABLE))}); compare it "
            "with that pytest-prove or a newer one")
    if version is not None and type(version) is not int:
        raise ValueError(f"the sequential design is damaged (version {version!r} is not a "
                         "whole number)")
    if version not in READABLE:  # none (the first method's records), or 1
        raise ValueError(
            "the run's sequential design was recorded by an older pytest-prove (5 looks, "
            "O'Brien-Fleming spending), whose looks this version does not read again; "
            "compare it with the pytest-prove that ran it, or run the sweep again")
    try:
        looks = tuple(int(n) for n in data["looks"])
        m, q = int(data["m"]), float(data["q"])
        design = SequentialDesign(
            replicates=int(data["replicates"]), m=m, paired=bool(data["paired"]), q=q,
            max_mde=float(data["max_mde"]), power=float(data["power"]), looks=looks,
            efficacy=float(data["efficacy"]), futility=float(data["futility"]),
            fixed=None if data.get("fixed") is None else int(data["fixed"]),
            replicates_needed=None if data.get("replicates_needed") is None
            else int(data["replicates_needed"]),
            ok=bool(data.get("ok")), power_at_max_mde=float(data["power_at_max_mde"]),
            expected_unchanged=float(data["expected_unchanged"]),
            expected_moved=float(data["expected_moved"]), method=str(data["method"]),
            version=int(data["version"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the sequential design is damaged ({exc!r})") from None
    if (not looks or list(looks) != sorted(set(looks)) or looks[0] < 1
            or looks[-1] != design.replicates or m < 1 or not 0 < q < 1
            or not 0 < design.efficacy <= 1 or not 0 < design.max_mde < 1
            or not 0 <= design.futility < math.inf):
        raise ValueError("the sequential design is damaged (looks, m, q, max_mde, its level "
                         "or its futility threshold out of range)")
    return design


@dataclass(frozen=True, slots=True)
class SequentialRow:
    """One (condition, event) at each look its condition has taken: ``looks[k]`` holds the
    counts over the condition's first ``design.looks[k]`` replicates (paired: twins), or None
    where the row had nothing to test at that look (a ``no outcome`` row before any episode
    lacked one): its p-value there is 1."""

    condition: str
    event: str
    worse_when: Literal["rise", "fall"]
    looks: tuple[RowInput | None, ...]


@dataclass(frozen=True, slots=True)
class RowDecision:
    condition: str
    event: str
    state: State
    look: int  # 1-based look of the decision, or the last look taken
    p_star: float  # the sequential p-value over the looks taken
    p_holm: float  # Holm-adjusted p* over the m rows
    change: float  # after - before at ``look``
    margin: MarginTest | None = None  # with a margin: its test over the margin looks taken


@dataclass(frozen=True, slots=True)
class ConditionDecision:
    condition: str
    state: State
    look: int  # 1-based look at which it was decided (or the last taken)
    replicates: int  # replicates per condition at that look
    reason: str  # "decided at look 2 of 5: worse (unresolved 0.10 -> 0.60)"
