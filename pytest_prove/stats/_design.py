"""The design check: the worst rise limit over every base rate a design can show, before
anything runs, and the replicates that would bring it within max_mde.

It does not compute a limit at every base rate k/n. Power falls as p0 rises with p1 fixed
(both tests' regions are monotone; checked when built), so p0 + limit(p0) never falls with p0,
and for base rates a <= p0 <= b,

    limit(p0) <= w  whenever  power(b, a + w) >= target.

A candidate worst limit comes from the symmetry power(p0, p1) = power(1 - p1, 1 - p0) (swap
the runs, count non-events): the worst base rate lies near (1 - limit)/2. The bound then clears
whole blocks of base rates in one evaluation each, and any single base rate it cannot clear
has its limit computed. The result is the maximum over every k/n, as a rate-by-rate scan gives
it (tests compare the two). The replicate search checks each size tried at every base rate
the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._check import check_count, check_power, check_q
from ._exact_power import PAIRED_MODEL, _evaluator
from ._limits import _BISECTIONS, _bisect, _cached_limits
from ._replicates import MAX_REPLICATES_PAIRED, MAX_REPLICATES_UNPAIRED, _sees_all, _smallest_n
from ._roots import smallest

__all__ = ["DesignCheck", "design_check"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class DesignCheck:
    """The worst rise limit over base rates for a design, before anything runs."""

    replicates: int
    m: int
    paired: bool
    q: float
    max_mde: float
    power: float
    worst_limit: float | None  # None: some base rate has no detectable rise at all
    worst_base_rate: float
    ok: bool
    replicates_needed: int | None  # None when ok, or when more than the search's ceiling
    method: str


def _scan_rates(n: int, max_mde: float) -> FloatArray:
    """Base rates k/n a condition of n replicates can show, with room for a rise of max_mde.
    (A fall from p0 mirrors a rise from 1 - p0, so these also cover every fall.)"""
    k = np.arange(n + 1)
    rates = k / n
    return np.asarray(rates[rates <= 1.0 - max_mde + 1e-12], dtype=np.float64)


# Designs with at most this many base rates to scan are scanned rate by rate.
_SCAN_ALL = 24
# Bisection steps of the coarse-to-fine search for a candidate worst base rate.
_SEED_BISECTIONS = 12
# A limit found by bisection lies within room / 2**_BISECTIONS above the root: clearing base
# rates at the candidate minus this keeps a rate-by-rate scan's maximum.
_GUARD = 2.0 ** -_BISECTIONS
# Windows of the power sums when clearing blocks: all but 4e-9 of each binomial. The sums
# then fall short of the power by at most that, so a block cleared is cleared; a single rate
# not cleared is looked at again with the full windows.
_CLEAR_TAIL = 20.0
# Blocks tested per evaluation (bounds the memory of very large designs).
_CHUNK = 512


def _worst_rise_scan(
    paired: bool, n: int, alpha: float, power: float, max_mde: float,
    rates: FloatArray | None = None,
) -> tuple[float | None, float]:
    """The worst rise limit by computing the limit at every base rate (``rates``, sorted:
    those of :func:`_scan_rates` unless given)."""
    rates = _scan_rates(n, max_mde) if rates is None else rates
    found = _cached_limits(paired, n, n, [float(r) for r in rates], alpha, power, "rise")
    worst: float = -1.0
    worst_p0 = 0.0
    for p0, limit in zip(rates, found, strict=True):
        if limit.value is None:
            return None, float(p0)
        if limit.value > worst:
            worst, worst_p0 = limit.value, float(p0)
    return worst, worst_p0


def _clear_blocks(
    a: IntArray, b: IntArray, clears: Callable[[IntArray, IntArray], BoolArray],
    on_single: Callable[[IntArray], bool],
) -> bool:
    """Clear the blocks of base rates [a, b], halving every block ``clears`` rejects; single
    rates it rejects go to ``on_single`` (which may stop the search by returning False).
    True when every block was cleared or handed over."""
    while a.size:
        ok = np.concatenate([clears(a[i : i + _CHUNK], b[i : i + _CHUNK])
                             for i in range(0, a.size, _CHUNK)])
        a, b = a[~ok], b[~ok]
        single = a == b
        if single.any() and not on_single(a[single]):
            return False
        a, b = a[~single], b[~single]
        mid = (a + b) // 2
        a, b = np.concatenate((a, mid + 1)), np.concatenate((mid, b))
    return True


def _fitted_blocks(last: int, widths: IntArray) -> tuple[IntArray, IntArray]:
    """Blocks over base rates 0..last, right to left, the one ending at b ``widths[b]`` wide."""
    starts: list[int] = []
    ends: list[int] = []
    b = last
    while b >= 0:
        a = max(0, b - int(widths[b]) + 1)
        starts.append(a)
        ends.append(b)
        b = a - 1
    return np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def _worst_rise(
    paired: bool, n: int, alpha: float, power: float, max_mde: float,
    rates: FloatArray | None = None,
) -> tuple[float | None, float]:
    """The worst rise limit over the base rates k/n with room for max_mde (or over
    ``rates``, sorted and unique, each with room), and where.

    Equal to the rate-by-rate scan (:func:`_worst_rise_scan`; a test compares them): the
    first base rate with no detectable rise if there is one, else the largest limit, at the
    smallest base rate that has it.
    """
    rates = _scan_rates(n, max_mde) if rates is None else rates
    evaluator = _evaluator(paired, n, n, alpha)
    if rates.size <= _SCAN_ALL or not evaluator.monotone:
        return _worst_rise_scan(paired, n, alpha, power, max_mde, rates)
    last = rates.size - 1

    def reaches(k: int) -> bool:
        p0 = rates[k : k + 1]
        at = evaluator.prepare(p0, "rise")(np.clip(p0 + (1.0 - p0), 0.0, 1.0))
        return bool(at[0] >= power)

    if not reaches(last):
        # Power at p1 = 1 falls as p0 rises: bisect for the first rate that cannot reach it.
        return None, float(rates[smallest(lambda k: not reaches(k), -1, last)])

    def limits_at(ks: IntArray, steps: int) -> FloatArray:
        p0 = rates[ks]
        return _bisect(evaluator.prepare(p0, "rise"), p0, 1.0 - p0, 1.0, power, steps)

    # A candidate. Both tests are unchanged by swapping the runs and complementing the
    # outcomes, so power(p0, p1) = power(1 - p1, 1 - p0): the curve of limits is symmetric
    # and a smooth one peaks where p0 + p1 = 1, at p0 = (1 - limit)/2. Rough limits on a
    # coarse grid give the limit; exact ones at the grid rates nearest that point, and at the
    # coarse maximum, give the candidate.
    coarse = np.unique(np.rint(np.linspace(0, last, 17)).astype(np.int64))
    rough = limits_at(coarse, _SEED_BISECTIONS)
    best, worst = int(coarse[int(np.argmax(rough))]), -1.0
    guess = float(rough.max())
    for _ in range(4):
        centre = int(np.searchsorted(rates, (1.0 - guess) / 2.0, side="right")) - 1
        near = np.arange(centre - 2, centre + 4)
        ks = np.unique(np.clip(np.concatenate((near, [best])), 0, last))
        values = limits_at(ks, _BISECTIONS)
        i = int(np.argmax(values))
        if values[i] > worst:
            best, worst = int(ks[i]), float(values[i])
        if guess == worst or not (near[0] < best < near[-1]):
            guess = worst
            continue
        break

    # Then every base rate: cleared in blocks by the bound (with windows left a little
    # narrower: a lower bound on power only makes clearing harder), or its limit computed.
    def clears(a: IntArray, b: IntArray) -> BoolArray:
        p1 = np.minimum(rates[a] + (worst - _GUARD), 1.0)
        return evaluator.prepare(rates[b], "rise", _CLEAR_TAIL)(p1) >= power

    def on_single(ks: IntArray) -> bool:
        nonlocal worst, best
        while ks.size:
            # The likeliest few first: the rest may clear under the new worst.
            top = ks[np.argsort(-limits_at(ks, 20), kind="stable")[:3]] if ks.size > 3 else ks
            for k, value in zip(top, limits_at(top, _BISECTIONS), strict=True):
                if value > worst or (value == worst and k < best):
                    worst, best = float(value), int(k)
            ks = np.setdiff1d(ks, top)
            if ks.size:
                ks = ks[~clears(ks, ks)]
        return True

    # Block [a, b] clears when limit(b) + (b - a)/n <= worst: sized from the limits known so
    # far (interpolated; a block sized too wide only costs a split).
    known = np.concatenate((coarse, ks))
    order = np.argsort(known, kind="stable")
    estimate = np.interp(np.arange(last + 1), known[order],
                         np.concatenate((rough, values))[order])
    widths = 1 + np.floor(0.8 * n * np.maximum(worst - estimate, 0.0)).astype(np.int64)
    _clear_blocks(*_fitted_blocks(last, widths), clears, on_single)
    return worst, float(rates[best])


def _sees_grid(
    paired: bool, n: int, alpha: float, power: float, max_mde: float,
    rates: FloatArray | None = None,
) -> bool:
    """Whether every base rate k/n with room (or of ``rates``, sorted and unique) sees a
    rise of max_mde: power(p0, p0 + max_mde) >= power at each (as :func:`_sees_all` on the
    whole scan), with blocks of base rates cleared at once by the bound
    power(p0, p0 + c) >= power(b, a + c) for a <= p0 <= b."""
    rates = _scan_rates(n, max_mde) if rates is None else rates
    evaluator = _evaluator(paired, n, n, alpha)
    if rates.size <= _SCAN_ALL or not evaluator.monotone:
        return _sees_all(paired, n, rates, alpha, power, max_mde, "rise")
    last = rates.size - 1

    def sees(ks: IntArray) -> bool:
        p0 = rates[ks]
        return bool((evaluator.prepare(p0, "rise")(np.minimum(p0 + max_mde, 1.0))
                     >= power).all())

    # The weakest base rates first (near (1 - max_mde)/2, by the symmetry of power): most
    # sizes that fail, fail there.
    centre = int(np.searchsorted(rates, (1.0 - max_mde) / 2.0, side="right")) - 1
    if not sees(np.unique(np.clip(np.arange(centre - 2, centre + 4), 0, last))):
        return False

    def clears(a: IntArray, b: IntArray) -> BoolArray:
        p1 = np.minimum(rates[a] + max_mde, 1.0)
        return evaluator.prepare(rates[b], "rise", _CLEAR_TAIL)(p1) >= power

    # Blocks sized from rough limits on a coarse grid (a block too wide only costs a split).
    coarse = np.unique(np.rint(np.linspace(0, last, 17)).astype(np.int64))
    p0 = rates[coarse]
    rough = _bisect(evaluator.prepare(p0, "rise"), p0, 1.0 - p0, 1.0, power, _SEED_BISECTIONS)
    estimate = np.interp(np.arange(last + 1), coarse, rough)
    widths = 1 + np.floor(0.8 * n * np.maximum(max_mde - estimate, 0.0)).astype(np.int64)
    return _clear_blocks(*_fitted_blocks(last, widths), clears, sees)


def design_method(paired: bool, m: int, q: float, power: float) -> str:
    if paired:
        test = f"exact McNemar mid-p on twins; model: {PAIRED_MODEL}"
    else:
        test = "Fisher's exact test, two-sided"
    return f"{test}; level q/m = {q:g}/{m}, power {power:g}, exact"


def design_check(
    replicates: int,
    m: int,
    *,
    paired: bool,
    q: float = 0.05,
    max_mde: float = 0.20,
    power: float = 0.8,
) -> DesignCheck:
    """Check a design before it runs: the worst rise limit over base rates must not exceed
    ``max_mde``; if it does, give the replicates per condition that bring it there.

    Base rates considered are every k/replicates a condition can show (k = 0..replicates)
    with room for a rise of max_mde; the worst is found without computing every limit (see
    the module docstring) and equals the rate-by-rate maximum. The replicate search doubles
    from replicates + 1, then bisects, each size checked on its own full set of base rates.
    """
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    q = check_q(q)
    max_mde = check_q(max_mde, "max_mde")
    power = check_power(power)
    return _design_check(n, m, bool(paired), q, max_mde, power)


# A session that compares checks its design (and the paired design at one replicate), and
# the plan, the command line's reports and a long-lived process ask the same designs again:
# the answer depends on these six numbers alone.
@functools.lru_cache(maxsize=256)
def _design_check(n: int, m: int, paired: bool, q: float, max_mde: float,
                  power: float) -> DesignCheck:
    alpha = q / m
    worst, worst_p0 = _worst_rise(paired, n, alpha, power, max_mde)
    ok = worst is not None and worst <= max_mde + 1e-12
    needed: int | None = None
    if not ok:
        ceiling = MAX_REPLICATES_PAIRED if paired else MAX_REPLICATES_UNPAIRED
        needed = _smallest_n(
            lambda size: _sees_grid(paired, size, alpha, power, max_mde), n + 1, ceiling
        )
    return DesignCheck(
        replicates=n,
        m=m,
        paired=paired,
        q=q,
        max_mde=max_mde,
        power=power,
        worst_limit=worst,
        worst_base_rate=worst_p0,
        ok=ok,
        replicates_needed=needed,
        method=design_method(paired, m, q, power),
    )
