"""Did a fix change how often an event happens, over cases? The fix-check statistics.

A pure module: numpy and scipy in, frozen result objects out. Each case (stratum) is counted in
both runs (events of ``n`` episodes); repeats of a case are read as separate draws, never
matched by seed.

- The exact conditional Cochran-Mantel-Haenszel test: given each case's margins, the new run's
  events in case i are hypergeometric; their sum T is the statistic and its exact null
  distribution is the convolution of those hypergeometrics. Two-sided p: the probability of
  every total no more likely than the one observed (as R's ``mantelhaen.test(exact=TRUE)``).
- The Mantel-Haenszel risk difference, weights ``n_old n_new / N``, with Sato's (1989)
  variance, which stays consistent when cases are many and sparse, and a Wald interval.
- Fisher's exact test per case with Benjamini-Hochberg over cases.
- Detection limits: the smallest common change on every case (from the old run's rate on each
  case, clipped to [0, 1]) the stratified test would detect 4 times in 5, by the
  continuity-corrected normal approximation to T; and the repeats per case (both runs) at which
  every direction with room for ``max_mde`` could see it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from . import _dist
from ._limits import outward
from ._roots import boundary, smallest

__all__ = ["Case", "CaseTest", "FixCheck", "Limit", "fix_check", "power_at", "repeats_needed"]

Float = NDArray[np.float64]
Word = Literal["worse", "safer", "no significant change", "too small to tell"]

#: The most repeats per case the search for a conclusive design tries.
MAX_REPEATS = 1_000_000


@dataclass(frozen=True, slots=True)
class Case:
    """One case as counted in both runs."""

    name: str
    x_old: int
    n_old: int
    x_new: int
    n_new: int


@dataclass(frozen=True, slots=True)
class CaseTest:
    """Fisher's exact test on one case, and its Benjamini-Hochberg q."""

    case: Case
    change: float  # new rate - old rate
    p: float
    q: float
    flag: bool

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {"case": c.name, "x_old": c.x_old, "n_old": c.n_old, "x_new": c.x_new,
                "n_new": c.n_new, "change": self.change, "p": self.p, "q": self.q,
                "flag": self.flag}


@dataclass(frozen=True, slots=True)
class Limit:
    """The smallest common change detectable in one direction, or why there is none."""

    value: float | None
    status: Literal["ok", "no room", "none detectable"]

    def __str__(self) -> str:
        return outward(self.value) if self.value is not None else self.status

    def sees(self, size: float) -> bool:
        return self.value is not None and self.value <= size + 1e-12


@dataclass(frozen=True, slots=True)
class FixCheck:
    """Everything fix-check concluded, and how."""

    cases: tuple[CaseTest, ...]
    informative: int  # cases with at least one event in either run
    observed: int  # T: the new run's events over the cases
    expected: float  # E[T] under no change, given the margins
    variance: float  # Var[T] under no change
    p: float  # exact conditional CMH, two-sided
    risk_difference: float  # Mantel-Haenszel, new minus old
    rd_low: float
    rd_high: float
    rise: Limit
    fall: Limit
    repeats_needed: int | None  # per case and run for a conclusive run; None: past the search
    word: Word
    worse_when: Literal["rise", "fall"]
    alpha: float
    power: float
    max_mde: float
    level: float

    @property
    def x_old(self) -> int:
        return sum(c.case.x_old for c in self.cases)

    @property
    def n_old(self) -> int:
        return sum(c.case.n_old for c in self.cases)

    @property
    def x_new(self) -> int:
        return sum(c.case.x_new for c in self.cases)

    @property
    def n_new(self) -> int:
        return sum(c.case.n_new for c in self.cases)

    def to_dict(self) -> dict[str, Any]:
        return {
            "word": self.word, "observed": self.observed, "expected": self.expected,
            "variance": self.variance, "p": self.p, "informative": self.informative,
            "risk_difference": self.risk_difference,
            "interval": {"low": self.rd_low, "high": self.rd_high, "level": self.level},
            "rise": {"value": self.rise.value, "status": self.rise.status,
                     "shown": str(self.rise)},
            "fall": {"value": self.fall.value, "status": self.fall.status,
                     "shown": str(self.fall)},
            "repeats_needed": self.repeats_needed, "worse_when": self.worse_when,
            "alpha": self.alpha, "power": self.power, "max_mde": self.max_mde,
            "old": {"events": self.x_old, "episodes": self.n_old},
            "new": {"events": self.x_new, "episodes": self.n_new},
            "cases": [c.to_dict() for c in self.cases],
        }


def _check(cases: Sequence[Case]) -> None:
    if not cases:
        raise ValueError("fix_check() needs at least one case counted in both runs, got none")
    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            raise ValueError(f"case {case.name!r} appears twice")
        seen.add(case.name)
        for x, n, arm in ((case.x_old, case.n_old, "old"), (case.x_new, case.n_new, "new")):
            if n < 1 or not 0 <= x <= n:
                raise ValueError(
                    f"case {case.name!r}: the {arm} run needs 0 <= events <= episodes and at "
                    f"least one episode, got {x} of {n}"
                )


def _sps() -> Any:
    """scipy.stats, imported on the first fix check (0.7 s: not in every session)."""
    from scipy import stats  # type: ignore[import-untyped, unused-ignore]

    return stats


def _exact_cmh(cases: Sequence[Case]) -> tuple[float, float, float]:
    """E[T], Var[T] and the exact two-sided p of T = sum of the new run's events."""
    dist = np.array([1.0])
    low_total = 0
    expected = variance = 0.0
    for c in cases:
        total, events = c.n_old + c.n_new, c.x_old + c.x_new
        lo, hi = max(0, events - c.n_old), min(events, c.n_new)
        support = np.arange(lo, hi + 1)
        pmf = _sps().hypergeom.pmf(support, total, events, c.n_new)
        dist = np.convolve(dist, pmf)
        low_total += lo
        expected += c.n_new * events / total
        if total > 1:
            variance += (c.n_old * c.n_new * events * (total - events)
                         / (total * total * (total - 1)))
    observed = sum(c.x_new for c in cases)
    at = dist[observed - low_total]
    # The relative tolerance R uses, so that ties in probability count as equally likely.
    p = float(min(1.0, dist[dist <= at * (1 + 1e-7)].sum()))
    return expected, variance, p


def _mh_risk_difference(cases: Sequence[Case], level: float) -> tuple[float, float, float]:
    """Mantel-Haenszel risk difference (new - old) and its Wald interval, Sato's variance."""
    weights = p_sum = q_sum = estimate = 0.0
    for c in cases:
        total = c.n_old + c.n_new
        w = c.n_old * c.n_new / total
        weights += w
        estimate += w * (c.x_new / c.n_new - c.x_old / c.n_old)
        # Sato (1989), Biometrics 45:1323, with 1 = new and 0 = old.
        p_sum += (c.n_new ** 2 * c.x_old - c.n_old ** 2 * c.x_new
                  + c.n_new * c.n_old * (c.n_old - c.n_new) / 2) / total ** 2
        q_sum += (c.x_new * (c.n_old - c.x_old) + c.x_old * (c.n_new - c.x_new)) / (2 * total)
    rd = estimate / weights
    variance = max(0.0, (rd * p_sum + q_sum) / weights ** 2)
    half = float(_dist.norm_ppf(0.5 + level / 2)) * float(np.sqrt(variance))
    return rd, max(-1.0, rd - half), min(1.0, rd + half)


def power_at(delta: float, base: Float, n_old: Float, n_new: Float, alpha: float) -> float:
    """Power of the stratified test against a common change ``delta`` on every case.

    Each case moves from its base rate ``p0`` to ``clip(p0 + delta)``. The score
    ``sum (n_old x_new - n_new x_old) / N`` has mean ``sum w (p1 - p0)`` and, under the
    alternative, variance ``sum (n_old^2 n_new p1 q1 + n_new^2 n_old p0 q0) / N^2``; the test
    rejects beyond ``0.5 + z sqrt(V0)`` (continuity-corrected), V0 at the pooled rates.
    """
    p1 = np.clip(base + delta, 0.0, 1.0)
    total = n_old + n_new
    mean = float(np.sum(n_old * n_new / total * (p1 - base)))
    pooled = (n_old * base + n_new * p1) / total
    v0 = float(np.sum(n_old * n_new * pooled * (1 - pooled) / total))
    v1 = float(np.sum((n_old ** 2 * n_new * p1 * (1 - p1) + n_new ** 2 * n_old * base
                       * (1 - base)) / total ** 2))
    if v1 <= 0:
        return 1.0 if abs(mean) > 0.5 and v0 == 0 else 0.0
    z = float(_dist.norm_ppf(1 - alpha / 2))
    return float(_dist.norm_cdf((abs(mean) - 0.5 - z * np.sqrt(v0)) / np.sqrt(v1)))


def _limit(direction: Literal["rise", "fall"], base: Float, n_old: Float, n_new: Float,
           alpha: float, power: float) -> Limit:
    sign = 1.0 if direction == "rise" else -1.0
    room = float(1.0 - base.min()) if direction == "rise" else float(base.max())
    if room <= 0:
        return Limit(None, "no room")
    if power_at(sign * room, base, n_old, n_new, alpha) < power:
        return Limit(None, "none detectable")
    high = boundary(lambda change: power_at(sign * change, base, n_old, n_new, alpha) >= power,
                    0.0, room, steps=50)
    return Limit(high, "ok")


def repeats_needed(base: Sequence[float], *, max_mde: float, alpha: float = 0.05,
                   power: float = 0.8) -> int | None:
    """Repeats per case, in each run, at which every direction with room for ``max_mde``
    would be detected with ``power``; None when even :data:`MAX_REPEATS` would not do."""
    rates = np.asarray(base, dtype=np.float64)
    directions = [d for d, room in ((1.0, 1.0 - rates.min()), (-1.0, rates.max()))
                  if room >= max_mde - 1e-12]
    if not directions:
        return None

    def enough(n: int) -> bool:
        size = np.full(rates.size, float(n))
        return all(power_at(d * max_mde, rates, size, size, alpha) >= power
                   for d in directions)

    high = 2
    while not enough(high):
        high *= 2
        if high > MAX_REPEATS:
            return None
    return smallest(enough, high // 2, high)


def fix_check(
    cases: Sequence[Case],
    *,
    worse_when: Literal["rise", "fall"] = "rise",
    alpha: float = 0.05,
    power: float = 0.8,
    max_mde: float = 0.20,
    level: float = 0.95,
) -> FixCheck:
    """Compare the old and new runs' event rates over cases (see the module's docstring)."""
    _check(cases)
    for name, value in (("alpha", alpha), ("power", power), ("max_mde", max_mde),
                        ("level", level)):
        if not 0 < value < 1:
            raise ValueError(f"{name} must be in (0, 1), got {value}")
    if worse_when not in ("rise", "fall"):
        raise ValueError(f"worse_when must be 'rise' or 'fall', got {worse_when!r}")
    expected, variance, p = _exact_cmh(cases)
    rd, low, high = _mh_risk_difference(cases, level)
    fisher = [float(_sps().fisher_exact([[c.x_new, c.n_new - c.x_new],
                                       [c.x_old, c.n_old - c.x_old]])[1]) for c in cases]
    qs = np.atleast_1d(_sps().false_discovery_control(fisher, method="bh"))
    tests = tuple(
        CaseTest(case=c, change=c.x_new / c.n_new - c.x_old / c.n_old, p=pv, q=float(qv),
                 flag=bool(qv <= alpha))
        for c, pv, qv in zip(cases, fisher, qs, strict=True)
    )
    base = np.array([c.x_old / c.n_old for c in cases])
    n_old = np.array([float(c.n_old) for c in cases])
    n_new = np.array([float(c.n_new) for c in cases])
    rise = _limit("rise", base, n_old, n_new, alpha, power)
    fall = _limit("fall", base, n_old, n_new, alpha, power)
    observed = sum(c.x_new for c in cases)
    word: Word
    if p <= alpha and rd != 0:
        word = "worse" if (rd > 0) == (worse_when == "rise") else "safer"
    else:
        blind = [lim for lim, room in ((rise, 1.0 - base.min()), (fall, base.max()))
                 if room >= max_mde - 1e-12 and not lim.sees(max_mde)]
        word = "too small to tell" if blind else "no significant change"
    needed = (repeats_needed(base.tolist(), max_mde=max_mde, alpha=alpha, power=power)
              if word == "too small to tell" else None)
    return FixCheck(
        cases=tests, informative=sum(1 for c in cases if c.x_old + c.x_new > 0),
        observed=observed, expected=expected, variance=variance, p=p, risk_difference=rd,
        rd_low=low, rd_high=high, rise=rise, fall=fall, repeats_needed=needed, word=word,
        worse_when=worse_when, alpha=alpha, power=power, max_mde=max_mde, level=level,
    )
