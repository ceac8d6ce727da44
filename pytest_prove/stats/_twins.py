"""Twin agreement: how often the two episodes of one seed end alike, and what it does to the
paired test's power.

The paired test (McNemar mid-p) reads only the discordant twins: b before-only and c
after-only. Its exact power is a sum over d = b + c ~ Binomial(n, pb + pc), with the
minority side ~ Binomial(d, its share) inside the rejection region ``_mcnemar_region``
(``_exact_power`` sums the same thing for independent twins). Here the discordance rates pb
and pc are given directly, so any model of the twins can be read.

The model of correlated twins
-----------------------------
Twins with rates p0 (before) and p1 (after) have

    pb = kappa * p0 * (1 - p1),    pc = pb + (p1 - p0),

so that the margins stay p0 and p1 whatever kappa is. ``kappa`` is the *discordance
ratio*: the share of discordant twins over the share independent twins would have at the
same rates (kappa = 1 is the engine's independent-twins model, ``PAIRED_MODEL``; kappa = 0
an agent that replays on a seed, whose only discordant twins are the change itself). With
no change, agreement = 1 - 2 kappa p0 (1 - p0). The model is symmetric under swapping the
runs and counting non-events (pb is unchanged), as the tests are.

Estimating kappa
----------------
From a paired row: kappa = (b + c)/n over p0(1 - p1) + (1 - p0) p1 at the observed rates.
For a design, kappa is pooled over conditions (one row each, so no twin is counted twice),
and its one-sided upper confidence bound is the Clopper-Pearson bound of the pooled
discordant share over the independent share at the observed rates: the design is then
conservative with probability at least ``AGREEMENT_LEVEL`` (0.99) as far as the discordant
count goes.
The observed rates enter as plug-ins (not bounded), and kappa is assumed the same at every
base rate, in every condition and after the change. Those are the assumptions the design
from agreement adds to the exact test; its error rates are otherwise exact.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._check import check_count, check_power, check_probability, check_q
from ._dist import beta_ppf
from ._limits import Limit
from ._regions import _mcnemar_region
from ._replicates import MAX_REPLICATES_PAIRED, _smallest_n
from ._roots import bisect, boundary

__all__ = ["AGREEMENT_LEVEL", "TWIN_MODEL", "Agreement", "PooledKappa", "TwinDesign", "agreement",
           "discordance_power", "pooled_kappa", "twin_design_check", "twin_limit", "twin_limits",
           "twin_power", "twin_replicates"]

Direction = Literal["rise", "fall"]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The one-sided confidence level of the agreement's lower bound a design reads.
AGREEMENT_LEVEL = 0.99

TWIN_MODEL = (
    "twins whose discordance is kappa times that of independent twins at the same rates "
    "(before-only kappa p0 (1 - p1), after-only that plus p1 - p0); kappa from the "
    "observed agreement"
)

_BISECTIONS = 40
#: The most (rate, d) cells one power evaluation holds at once.
_CELLS = 1 << 21


def _power_many(n: int, minority: FloatArray, majority: FloatArray,
                alpha: float) -> FloatArray:
    """:func:`discordance_power` at many (minority, majority) rates at once: the sum over
    d of P(D = d) P(Binomial(d, share) <= bcrit[d]), every d from 0 to n (no window)."""
    total = np.minimum(minority + majority, 1.0)
    if n == 0:
        return np.zeros(total.shape)
    rows = max(1, _CELLS // (n + 1))
    if total.size > rows:  # a block of rows at a time: memory stays near _CELLS numbers
        return np.concatenate([_power_many(n, minority[i:i + rows], majority[i:i + rows],
                                           alpha) for i in range(0, total.size, rows)])
    bcrit = _mcnemar_region(n, alpha)
    d = np.arange(n + 1)
    live = total > 0.0
    p = np.where(live, total, 0.5)[:, None]
    log_choose = (special.gammaln(n + 1.0) - special.gammaln(d + 1.0)
                  - special.gammaln(n - d + 1.0))
    weight = np.exp(log_choose + special.xlogy(d, p) + special.xlog1py(n - d, -p))
    share = np.where(live, minority / np.where(live, total, 1.0), 0.0)[:, None]
    inner = np.where(bcrit < 0, 0.0, special.bdtr(np.maximum(bcrit, 0), d, share))
    power = np.einsum("ij,ij->i", weight, inner)
    return np.asarray(np.where(live, np.clip(power, 0.0, 1.0), 0.0), dtype=np.float64)


def discordance_power(n: int, minority: float, majority: float, alpha: float) -> float:
    """Exact probability that McNemar's mid-p test at level ``alpha`` on n twins rejects
    toward the majority side, when a twin is discordant on the minority side (before-only
    for a rise) with probability ``minority`` and on the majority side with ``majority``."""
    n = check_count("n", n)
    alpha = check_q(alpha, "alpha")
    minority = check_probability(minority, "minority")
    majority = check_probability(majority, "majority")
    if minority + majority > 1.0 + 1e-12:
        raise ValueError(f"minority + majority must be at most 1, got {minority + majority}")
    return float(_power_many(n, np.array([minority]), np.array([majority]), alpha)[0])


def _rates(p0: FloatArray, p1: FloatArray, kappa: float | FloatArray
           ) -> tuple[FloatArray, FloatArray]:
    """(before-only, after-only) under the model, kept within what the margins allow."""
    pb = kappa * p0 * (1.0 - p1)
    pb = np.minimum(np.maximum(pb, np.maximum(0.0, p0 - p1)), np.minimum(p0, 1.0 - p1))
    return pb, pb + p1 - p0


def _twin_power_many(n: int, p0: FloatArray, p1: FloatArray, kappa: float | FloatArray,
                     alpha: float, direction: Direction) -> FloatArray:
    pb, pc = _rates(p0, p1, kappa)
    if direction == "rise":
        return _power_many(n, pb, pc, alpha)
    return _power_many(n, pc, pb, alpha)


def _check_kappa(kappa: float) -> None:
    if not (math.isfinite(kappa) and kappa >= 0.0):
        raise ValueError(f"kappa must be a number >= 0, got {kappa!r}")


def twin_power(n: int, p_before: float, p_after: float, *, kappa: float, alpha: float,
               direction: Direction | None = None) -> float:
    """Exact power of the paired test on n twins from ``p_before`` to ``p_after`` when the
    twins' discordance ratio is ``kappa`` (1: independent twins, as ``detection_power``)."""
    p0 = check_probability(p_before, "p_before")
    p1 = check_probability(p_after, "p_after")
    n = check_count("n", n)
    alpha = check_q(alpha, "alpha")
    _check_kappa(kappa)
    if direction is None:
        direction = "rise" if p1 >= p0 else "fall"
    return float(_twin_power_many(n, np.array([p0]), np.array([p1]), kappa, alpha,
                                  direction)[0])


def twin_limits(n: int, p_before: Sequence[float] | FloatArray, *,
                kappa: float | Sequence[float] | FloatArray, alpha: float,
                power: float = 0.8, direction: Direction = "rise") -> list[Limit]:
    """:func:`twin_limit` at many base rates (each with its own kappa, or one for all) at
    once: one vectorised bisection."""
    p0 = np.asarray(p_before, dtype=np.float64)
    if not isinstance(kappa, float | int):
        kappa = np.asarray(kappa, dtype=np.float64)
    sign = 1.0 if direction == "rise" else -1.0
    room = 1.0 - p0 if direction == "rise" else p0.copy()

    def reaches(change: FloatArray) -> BoolArray:
        p1 = np.clip(p0 + sign * change, 0.0, 1.0)
        return _twin_power_many(n, p0, p1, kappa, alpha, direction) >= power

    seen = reaches(room) & (room > 0.0)
    # every row asked at every step (kappa may be one per row): the rows argument is all
    _, hi = bisect(lambda rows, change: reaches(change), np.zeros(p0.size), room,
                   steps=_BISECTIONS)
    return [Limit(float(h), "ok") if s else
            Limit(None, "no room" if r <= 0.0 else "none detectable")
            for s, r, h in zip(seen, room, hi, strict=True)]


def twin_limit(n: int, p_before: float, *, kappa: float, alpha: float, power: float = 0.8,
               direction: Direction = "rise") -> Limit:
    """The smallest change from ``p_before`` the paired test on n twins flags with
    ``power`` at discordance ratio ``kappa`` (power rises with the change: the majority
    side grows and the minority side shrinks), to room / 2**40 from above."""
    p0 = check_probability(p_before, "p_before")
    power = check_power(power)
    n = check_count("n", n)
    alpha = check_q(alpha, "alpha")
    _check_kappa(kappa)
    return twin_limits(n, np.array([p0]), kappa=kappa, alpha=alpha, power=power,
                       direction=direction)[0]


@dataclass(frozen=True, slots=True)
class Agreement:
    """How often the twins of one paired row ended alike, and its discordance ratio."""

    n: int  # twins
    alike: int  # both with the event, or both without
    both: int  # both with the event
    before_only: int  # b: the event in the before twin only
    after_only: int  # c: in the after twin only
    kappa: float | None  # discordant share over the independent one; None: both rates 0 or 1

    @property
    def rate(self) -> float:
        return self.alike / self.n if self.n else 1.0

    @property
    def before(self) -> float:
        """The event's rate in the before twins."""
        return (self.both + self.before_only) / self.n if self.n else 0.0

    @property
    def after(self) -> float:
        return (self.both + self.after_only) / self.n if self.n else 0.0

    @property
    def discordant(self) -> int:
        return self.before_only + self.after_only

    def low(self, level: float = AGREEMENT_LEVEL) -> float:
        """One-sided lower confidence bound of the agreement (Clopper-Pearson)."""
        return 1.0 - _upper(self.discordant, self.n, level)


def _independent_share(p0: float, p1: float) -> float:
    return p0 * (1.0 - p1) + (1.0 - p0) * p1


def _upper(x: int, n: int, level: float) -> float:
    """One-sided Clopper-Pearson upper bound of a binomial share."""
    if n == 0 or x >= n:
        return 1.0
    return float(beta_ppf(level, x + 1, n - x))


def agreement(n: int, both: int, before_only: int, after_only: int) -> Agreement:
    """The agreement of n twins: ``both`` with the event in each, b and c in one only."""
    n = check_count("n", n)
    for name, value in (("both", both), ("before_only", before_only),
                        ("after_only", after_only)):
        check_count(name, value)
    if both + before_only + after_only > n:
        raise ValueError(f"both + before_only + after_only must be at most n = {n}, got "
                         f"{both + before_only + after_only}")
    p0 = (both + before_only) / n if n else 0.0
    p1 = (both + after_only) / n if n else 0.0
    independent = _independent_share(p0, p1)
    kappa = (before_only + after_only) / n / independent if n and independent > 0 else None
    return Agreement(n, n - before_only - after_only, both, before_only, after_only, kappa)


@dataclass(frozen=True, slots=True)
class PooledKappa:
    """The discordance ratio pooled over conditions, and its one-sided upper bound."""

    kappa: float | None  # None: no condition had room to disagree
    upper: float | None
    level: float
    twins: int
    discordant: int


def pooled_kappa(found: Sequence[Agreement], level: float = AGREEMENT_LEVEL) -> PooledKappa:
    """kappa pooled over ``found`` (one Agreement per condition: rows of one condition
    share their twins), with the upper bound the design reads: the Clopper-Pearson upper
    bound of the discordant share over the share independent twins would have at the
    observed rates (plug-ins)."""
    level = check_probability(level, "level")
    twins = sum(a.n for a in found)
    discordant = sum(a.discordant for a in found)
    expected = sum(a.n * _independent_share(a.before, a.after) for a in found)
    if twins == 0 or expected <= 0.0:
        return PooledKappa(None, None, level, twins, discordant)
    share = expected / twins
    return PooledKappa(discordant / expected, _upper(discordant, twins, level) / share,
                       level, twins, discordant)



#: Base rates a design is checked at: this many, evenly from 0 to 1 - max_mde, and the one
#: where the model is most discordant.
_GRID = 201


def _grid(change: float) -> list[float]:
    top = 1.0 - change
    return sorted({top * k / (_GRID - 1) for k in range(_GRID)} | {top / 2.0})


def _weakest(n: int, kappa: float, change: float, alpha: float) -> float:
    """The least power of a rise of ``change`` over the base rates of :func:`_grid`. (The
    model is most discordant at p0 = (1 - change)/2, and power is least there in every case
    the tests try; the grid makes the check hold without relying on it.)"""
    p0 = np.array(_grid(change))
    return float(_twin_power_many(n, p0, np.minimum(p0 + change, 1.0), kappa, alpha,
                                  "rise").min())


@dataclass(frozen=True, slots=True)
class TwinDesign:
    """The paired design check at a discordance ratio: whether a rise of max_mde is seen
    with the asked power at every base rate, and the replicates that would see it."""

    replicates: int
    m: int
    q: float
    max_mde: float
    power: float
    kappa: float
    power_at_worst: float  # at the configured replicates, the weakest base rate
    ok: bool
    replicates_needed: int | None  # at this kappa; None above the search's ceiling
    worst_limit: float | None  # the rise limit at the weakest base rate; None: none seen
    worst_base_rate: float


def twin_replicates(m: int, *, kappa: float, q: float = 0.05, max_mde: float = 0.20,
                    power: float = 0.8, start: int = 1) -> int | None:
    """Twins per condition at which every base rate sees a rise (or, by symmetry, a fall)
    of ``max_mde`` with ``power`` at level q/m, at discordance ratio ``kappa``."""
    return _twin_replicates(check_count("m", m), float(kappa), check_q(q),
                            check_q(max_mde, "max_mde"), check_power(power), start)


@functools.lru_cache(maxsize=256)  # a function of these numbers alone, asked again and again
def _twin_replicates(m: int, kappa: float, q: float, max_mde: float, power: float,
                     start: int) -> int | None:
    alpha = q / m
    centre = np.array([(1.0 - max_mde) / 2.0])

    def at_centre(n: int) -> bool:
        return bool(_twin_power_many(n, centre, centre + max_mde, kappa, alpha,
                                     "rise")[0] >= power)

    def everywhere(n: int) -> bool:
        return _weakest(n, kappa, max_mde, alpha) >= power

    # The weakest base rate first (one rate: fast at any size), then the whole grid at the
    # size found, searching on from there in the rare case another rate is weaker.
    found = _smallest_n(at_centre, start, MAX_REPLICATES_PAIRED)
    if found is None or everywhere(found):
        return found
    return _smallest_n(everywhere, found + 1, MAX_REPLICATES_PAIRED)


def _worst_limit(n: int, kappa: float, alpha: float, power: float,
                 change: float) -> tuple[float | None, float]:
    """The largest rise limit over base rates with room for ``change``, and where: the
    first base rate from which no rise is seen (power at p1 = 1 falls as p0 rises: pb is 0
    there and the after-only share 1 - p0 shrinks), else the limit where the model is most
    discordant for it, p0 = (1 - limit)/2, found in a few rounds."""
    top = 1.0 - change

    def seen(p0: float) -> bool:
        return twin_power(n, p0, 1.0, kappa=kappa, alpha=alpha, direction="rise") >= power

    if not seen(top):
        if not seen(0.0):
            return None, 0.0
        # the first p0 not seen lies in (0, top]
        return None, boundary(lambda p0: not seen(p0), 0.0, top, steps=_BISECTIONS)
    base = top / 2.0
    worst = 0.0
    for _ in range(6):
        found = twin_limit(n, base, kappa=kappa, alpha=alpha, power=power)
        worst = found.value if found.value is not None else 1.0 - base
        moved = min(max((1.0 - worst) / 2.0, 0.0), top)
        if abs(moved - base) < 1e-4:
            break
        base = moved
    return worst, base


def twin_design_check(replicates: int, m: int, *, kappa: float, q: float = 0.05,
                      max_mde: float = 0.20, power: float = 0.8) -> TwinDesign:
    """The paired design check read at discordance ratio ``kappa`` (for a design, its
    upper bound: :func:`pooled_kappa`). With kappa = 1 it asks what the independent-twins
    check asks, at base rates on a fine grid rather than the k/n a run can show."""
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    _check_kappa(kappa)
    q, max_mde, power = check_q(q), check_q(max_mde, "max_mde"), check_power(power)
    at = _weakest(n, kappa, max_mde, q / m)
    ok = at >= power
    needed = None if ok else twin_replicates(m, kappa=kappa, q=q, max_mde=max_mde,
                                             power=power, start=n + 1)
    worst, base = _worst_limit(n, kappa, q / m, power, max_mde)
    return TwinDesign(n, m, q, max_mde, power, kappa, at, ok, needed, worst, base)
