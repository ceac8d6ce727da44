"""Detection limits: the smallest change one row alone would be flagged for.

A row's limit is the smallest rise (or fall) from its base rate p0 (its rate before) at which its
own test, at level alpha = q/m, rejects in that direction with probability ``power`` (0.8, "4
times in 5"). Power is computed exactly: the test's rejection region is enumerated once per
design and level, and the probability of landing in it is summed over the binomial outcomes.
Power is a polynomial in the after rate p1, hence continuous, so the limit is the root of
power(p1) = 0.8, bracketed by a scan and polished by Brent's method.

Designs
-------
unpaired (Fisher)
    before ~ Binomial(n1, p0) and after ~ Binomial(n2, p1), independent.
paired (McNemar mid-p)
    n twins; within a twin, before ~ Bernoulli(p0) and after ~ Bernoulli(p1), drawn
    independently given the condition's rates. A twin is before-only with probability
    p0 (1 - p1) and after-only with probability (1 - p0) p1. An agent served by an LLM does not
    replay on a seed, so twins are not copies; if they are positively correlated, discordant
    twins are rarer, the test is more powerful, and this limit errs on the large (safe) side.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats  # type: ignore[import-untyped]

from ._check import check_count, check_counts, check_probability, check_q
from ._exact import fisher_margin_pvalues

__all__ = [
    "PAIRED_MODEL",
    "DesignCheck",
    "Limit",
    "Limits",
    "design_check",
    "detection_power",
    "fall_limit",
    "limits",
    "replicates_for",
    "rise_limit",
]

Direction = Literal["rise", "fall"]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

PAIRED_MODEL = (
    "twins drawn independently given the condition's rates (before ~ Bernoulli(p0), "
    "after ~ Bernoulli(p1)); positively correlated twins only make the test stronger, "
    "so the paired limit is conservative"
)

# Largest design the replicate search will try; beyond it the answer is "more than this".
MAX_REPLICATES_UNPAIRED = 5_000
MAX_REPLICATES_PAIRED = 100_000


@dataclass(frozen=True, slots=True)
class Limit:
    """A detection limit: ``value`` when ``status == "ok"``, else ``None``.

    ``"no room"``: the rate cannot move that way (0 for a fall, 1 for a rise).
    ``"none detectable"``: no change of any size is flagged with the asked power.
    """

    value: float | None
    status: Literal["ok", "no room", "none detectable"]

    def sees(self, change: float) -> bool:
        """True when a change of this size would be flagged with the asked power."""
        return self.value is not None and self.value <= change + 1e-12

    def __str__(self) -> str:
        return f"{self.value:.3f}" if self.value is not None else self.status


@dataclass(frozen=True, slots=True)
class Limits:
    rise: Limit
    fall: Limit


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


# --------------------------------------------------------------------------- regions


@dataclass(frozen=True, slots=True)
class _FisherRegion:
    """Rejection region of the two-sided Fisher test at one level, split by direction.

    For each before count x1, ``up[x1]`` is the smallest after count rejected as a rise
    (n2 + 1 if none) and ``down[x1]`` the largest rejected as a fall (-1 if none). Rows where
    the rejected set is not a tail are kept whole in ``irregular`` (none were seen in practice,
    but the power stays exact if one occurs).
    """

    n1: int
    n2: int
    up: IntArray
    down: IntArray
    irregular_up: tuple[tuple[int, IntArray], ...]
    irregular_down: tuple[tuple[int, IntArray], ...]


@functools.lru_cache(maxsize=32)
def _fisher_region(n1: int, n2: int, alpha: float) -> _FisherRegion:
    up_mask = np.zeros((n1 + 1, n2 + 1), dtype=bool)
    down_mask = np.zeros((n1 + 1, n2 + 1), dtype=bool)
    for total in range(n1 + n2 + 1):
        lo, p = fisher_margin_pvalues(n1, n2, total)
        x1 = np.arange(lo, lo + p.size)
        x2 = total - x1
        rejected = p <= alpha
        # A rise: the after rate x2/n2 above the before rate x1/n1.
        rise = rejected & (x2 * n1 > x1 * n2)
        fall = rejected & (x2 * n1 < x1 * n2)
        up_mask[x1[rise], x2[rise]] = True
        down_mask[x1[fall], x2[fall]] = True
    any_up = up_mask.any(axis=1)
    up = np.where(any_up, np.argmax(up_mask, axis=1), n2 + 1).astype(np.int64)
    any_down = down_mask.any(axis=1)
    down = np.where(any_down, n2 - np.argmax(down_mask[:, ::-1], axis=1), -1).astype(np.int64)
    cols = np.arange(n2 + 1)
    tail_up = cols[None, :] >= up[:, None]
    tail_down = cols[None, :] <= down[:, None]
    irregular_up = tuple(
        (int(i), np.flatnonzero(up_mask[i]).astype(np.int64))
        for i in np.flatnonzero((up_mask != tail_up).any(axis=1))
    )
    irregular_down = tuple(
        (int(i), np.flatnonzero(down_mask[i]).astype(np.int64))
        for i in np.flatnonzero((down_mask != tail_down).any(axis=1))
    )
    return _FisherRegion(n1, n2, up, down, irregular_up, irregular_down)


@functools.lru_cache(maxsize=64)
def _mcnemar_region(n: int, alpha: float) -> IntArray:
    """For d = 0..n discordant twins, the largest minority count b (< d/2) whose mid-p is at
    most alpha, or -1 if none. The mid-p, F(b) + F(b - 1) with F the Binomial(d, 1/2) cdf,
    increases with b, so a vectorised bisection over all d at once finds it."""
    d = np.arange(n + 1, dtype=np.int64)
    lo = np.full(n + 1, -1, dtype=np.int64)  # always "rejected" (virtual)
    hi = (d - 1) // 2 + 1  # never rejected (virtual): b must stay below d/2
    while True:
        active = hi - lo > 1
        if not active.any():
            break
        mid = (lo + hi) // 2
        midp = stats.binom.cdf(mid, d, 0.5) + stats.binom.cdf(mid - 1, d, 0.5)
        ok = active & (midp <= alpha)
        lo = np.where(ok, mid, lo)
        hi = np.where(active & ~ok, mid, hi)
    return lo


# --------------------------------------------------------------------------- power


def _fisher_power_batch(
    region: _FisherRegion, p0: FloatArray, p1: FloatArray, direction: Direction,
    w1: FloatArray | None = None,
) -> FloatArray:
    """Exact power at K pairs of rates (p0[k], p1[k]) at once:
    sum over x1 of P(X1 = x1) P(X2 in the region's row x1). ``w1``, the before arm's
    probabilities, may be passed in when p0 stays fixed over many calls."""
    if w1 is None:
        w1 = stats.binom.pmf(np.arange(region.n1 + 1)[None, :], region.n1, p0[:, None])
    if direction == "rise":
        inner = stats.binom.sf(region.up[None, :] - 1, region.n2, p1[:, None])  # P(X2 >= up)
        irregular = region.irregular_up
    else:
        inner = stats.binom.cdf(region.down[None, :], region.n2, p1[:, None])  # P(X2 <= down)
        irregular = region.irregular_down
    for row, cols in irregular:
        inner[:, row] = stats.binom.pmf(cols[None, :], region.n2, p1[:, None]).sum(axis=1)
    return np.asarray(np.einsum("ij,ij->i", w1, inner), dtype=np.float64)


def _paired_power_batch(
    bcrit: IntArray, p0: FloatArray, p1: FloatArray, direction: Direction
) -> FloatArray:
    """Exact power of the paired test under the independent-twins model.

    A twin is before-only with probability p0 (1 - p1) and after-only with (1 - p0) p1; the
    number of discordant twins d is Binomial(n, their sum), and given d the minority side
    (before-only for a rise) is Binomial(d, its share) and must be at most bcrit[d].
    """
    n = bcrit.size - 1
    p_before_only = p0 * (1.0 - p1)
    p_after_only = (1.0 - p0) * p1
    p_discordant = p_before_only + p_after_only
    minority = p_before_only if direction == "rise" else p_after_only
    safe = np.where(p_discordant > 0.0, p_discordant, 1.0)
    d = np.arange(n + 1)
    weight = stats.binom.pmf(d[None, :], n, p_discordant[:, None])
    inner = stats.binom.cdf(bcrit[None, :], d[None, :], (minority / safe)[:, None])
    power = (weight * inner).sum(axis=1)
    return np.asarray(np.where(p_discordant > 0.0, power, 0.0), dtype=np.float64)


def _power_batch(
    paired: bool, n1: int, n2: int, alpha: float,
    p0: FloatArray, p1: FloatArray, direction: Direction,
) -> FloatArray:
    if paired:
        return _paired_power_batch(_mcnemar_region(n1, alpha), p0, p1, direction)
    return _fisher_power_batch(_fisher_region(n1, n2, alpha), p0, p1, direction)


def detection_power(
    p_before: float,
    p_after: float,
    n_before: int,
    n_after: int | None = None,
    *,
    paired: bool,
    alpha: float,
    direction: Direction | None = None,
) -> float:
    """Exact probability that one row is rejected at level ``alpha`` in ``direction``.

    ``direction`` defaults to the direction of the change (rise when p_after >= p_before).
    """
    p0 = check_probability(p_before, "p_before")
    p1 = check_probability(p_after, "p_after")
    n1, n2 = _design(n_before, n_after, paired)
    alpha = check_q(alpha, "alpha")
    if direction is None:
        direction = "rise" if p1 >= p0 else "fall"
    _check_direction(direction)
    return float(_power_batch(paired, n1, n2, alpha, np.array([p0]), np.array([p1]), direction)[0])


# --------------------------------------------------------------------------- limits

# Bisection steps: the bracket [0, room] shrinks to room / 2**32, far below the 3 decimals shown.
_BISECTIONS = 32
_LimitKey = tuple[bool, int, int, float, float, float, str]
_LIMIT_CACHE: dict[_LimitKey, Limit] = {}
_LIMIT_CACHE_SIZE = 1 << 17


def _limits_batch(
    paired: bool, n1: int, n2: int, p0s: FloatArray, alpha: float, power: float,
    direction: Direction,
) -> list[Limit]:
    """Limits at many base rates of one design at once, by a vectorised bisection on the
    change. Power rises with the change for these tests (each row of the rejection region is
    a tail, so a larger change moves every binomial into it stochastically; a property test
    checks it), so the first crossing of the target power is the only one."""
    sign = 1.0 if direction == "rise" else -1.0
    room = 1.0 - p0s if direction == "rise" else p0s.copy()
    result: list[Limit] = [Limit(None, "no room")] * p0s.size
    live = np.flatnonzero(room > 0.0)
    if live.size == 0:
        return result
    p0 = p0s[live]
    top = room[live]
    if paired:
        bcrit = _mcnemar_region(n1, alpha)

        def power_at(p0: FloatArray, p1: FloatArray) -> FloatArray:
            return _paired_power_batch(bcrit, p0, p1, direction)
    else:
        region = _fisher_region(n1, n2, alpha)
        weights: dict[int, FloatArray] = {}

        def power_at(p0: FloatArray, p1: FloatArray) -> FloatArray:
            # The before arm's probabilities depend on p0 alone: computed once per size.
            if p0.size not in weights:
                weights[p0.size] = stats.binom.pmf(np.arange(n1 + 1)[None, :], n1,
                                                   p0[:, None])
            return _fisher_power_batch(region, p0, p1, direction, weights[p0.size])

    reachable = power_at(p0, np.clip(p0 + sign * top, 0.0, 1.0)) >= power
    for i in live[~reachable]:
        result[int(i)] = Limit(None, "none detectable")
    p0 = p0[reachable]
    lo = np.zeros(p0.size)
    hi = top[reachable].copy()
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        hit = power_at(p0, np.clip(p0 + sign * mid, 0.0, 1.0)) >= power
        hi = np.where(hit, mid, hi)
        lo = np.where(hit, lo, mid)
    for i, value in zip(live[reachable], hi, strict=True):
        result[int(i)] = Limit(float(value), "ok")
    return result


def _cached_limits(
    paired: bool, n1: int, n2: int, p0s: list[float], alpha: float, power: float,
    direction: Direction,
) -> list[Limit]:
    """Limits for base rates of one design, computing only those not seen before (a limit
    depends only on the design, the base rate, alpha, power and direction)."""
    keys = [(paired, n1, n2, p0, alpha, power, direction) for p0 in p0s]
    missing = sorted({key[3] for key in keys if key not in _LIMIT_CACHE})
    if missing:
        if len(_LIMIT_CACHE) + len(missing) > _LIMIT_CACHE_SIZE:
            _LIMIT_CACHE.clear()
        fresh = _limits_batch(paired, n1, n2, np.array(missing), alpha, power, direction)
        for p0, limit in zip(missing, fresh, strict=True):
            _LIMIT_CACHE[(paired, n1, n2, p0, alpha, power, direction)] = limit
    return [_LIMIT_CACHE[key] for key in keys]


def _limit(
    paired: bool, n1: int, n2: int, p0: float, alpha: float, power: float, direction: Direction
) -> Limit:
    return _cached_limits(paired, n1, n2, [p0], alpha, power, direction)[0]


def _design(n_before: object, n_after: object, paired: bool) -> tuple[int, int]:
    n1 = check_count("n_before", n_before)
    n2 = n1 if n_after is None else check_count("n_after", n_after)
    if paired and n2 != n1:
        raise ValueError(
            f"a paired design has one count of twins; got n_before={n1} and n_after={n2}"
        )
    if n1 == 0 or n2 == 0:
        raise ValueError(f"both arms need at least one replicate, got {n1} and {n2}")
    return n1, n2


def _check_direction(direction: str) -> None:
    if direction not in ("rise", "fall"):
        raise ValueError(f"direction must be 'rise' or 'fall', got {direction!r}")


def _check_power(power: object) -> float:
    return check_q(power, "power")


def limits(
    x_before: int,
    n_before: int,
    n_after: int | None = None,
    *,
    paired: bool,
    alpha: float,
    power: float = 0.8,
) -> Limits:
    """Rise and fall limits of one row whose base count is ``x_before`` of ``n_before``.

    ``n_after`` defaults to ``n_before`` (and must equal it when paired: n is the number of
    twins). ``alpha`` is the row's share of the family, q/m.
    """
    x0, n1 = check_counts("x_before", x_before, "n_before", n_before)
    n1, n2 = _design(n1, n_after, paired)
    alpha = check_q(alpha, "alpha")
    power = _check_power(power)
    p0 = x0 / n1
    return Limits(
        _limit(paired, n1, n2, p0, alpha, power, "rise"),
        _limit(paired, n1, n2, p0, alpha, power, "fall"),
    )


def rise_limit(
    x_before: int,
    n_before: int,
    n_after: int | None = None,
    *,
    paired: bool,
    alpha: float,
    power: float = 0.8,
) -> Limit:
    """The smallest rise from x_before/n_before flagged with ``power`` at level ``alpha``."""
    return limits(x_before, n_before, n_after, paired=paired, alpha=alpha, power=power).rise


def fall_limit(
    x_before: int,
    n_before: int,
    n_after: int | None = None,
    *,
    paired: bool,
    alpha: float,
    power: float = 0.8,
) -> Limit:
    """The smallest fall from x_before/n_before flagged with ``power`` at level ``alpha``."""
    return limits(x_before, n_before, n_after, paired=paired, alpha=alpha, power=power).fall


# --------------------------------------------------------------------------- replicates


def _sees_all(
    paired: bool, n: int, p0s: FloatArray, alpha: float, power: float, max_mde: float,
    direction: Direction,
) -> bool:
    """Whether every base rate in p0s has a limit at most max_mde in ``direction`` at n
    replicates: with power rising in the change, that is power(p0 +- max_mde) >= power."""
    if p0s.size == 0:
        return True
    sign = 1.0 if direction == "rise" else -1.0
    p1 = np.clip(p0s + sign * max_mde, 0.0, 1.0)
    return bool((_power_batch(paired, n, n, alpha, p0s, p1, direction) >= power).all())


def _smallest_n(passes: Callable[[int], bool], start: int, ceiling: int) -> int | None:
    """Smallest n in [start, ceiling] with passes(n), by doubling then bisection.

    Exact tests make the limit saw-toothed in n, so "passes" is monotone only up to a few
    replicates; the answer is an n that passes with n - 1 failing, the figure to plan with.
    """
    lo = max(1, start) - 1  # known (or assumed) to fail
    hi = max(1, start)
    while not passes(hi):
        lo = hi
        if hi >= ceiling:
            return None
        hi = min(ceiling, hi * 2)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


def replicates_for(
    p_before: float,
    *,
    paired: bool,
    alpha: float,
    max_mde: float,
    power: float = 0.8,
    directions: tuple[Direction, ...] = ("rise", "fall"),
    start: int = 1,
) -> int | None:
    """Replicates per condition (twins, or each arm) at which a row with base rate
    ``p_before`` has limits at most ``max_mde`` in ``directions``; None above the ceiling."""
    p0 = check_probability(p_before, "p_before")
    alpha = check_q(alpha, "alpha")
    max_mde = check_q(max_mde, "max_mde")
    power = _check_power(power)
    for direction in directions:
        _check_direction(direction)
    return replicates_for_all(
        {direction: [p0] for direction in directions},
        paired=paired, alpha=alpha, max_mde=max_mde, power=power, start=start,
    )


def _normal_guess(
    base_rates: dict[Direction, FloatArray], alpha: float, power: float, max_mde: float
) -> int:
    """Replicates per arm the normal approximation to a two-sample comparison of proportions
    asks for (Fleiss, Levin & Paik 2003, eq. 4.14 without continuity correction), the largest
    over the base rates: only a starting point for the exact search."""
    z_a = float(stats.norm.isf(alpha / 2.0))
    z_b = float(stats.norm.isf(1.0 - power))
    guess = 1.0
    for direction, p0s in base_rates.items():
        sign = 1.0 if direction == "rise" else -1.0
        p1s = np.clip(p0s + sign * max_mde, 0.0, 1.0)
        mean = (p0s + p1s) / 2.0
        n = (z_a * np.sqrt(2 * mean * (1 - mean))
             + z_b * np.sqrt(p0s * (1 - p0s) + p1s * (1 - p1s))) ** 2 / max_mde**2
        if n.size:
            guess = max(guess, float(n.max()))
    return int(np.ceil(guess))


def replicates_for_all(
    base_rates: dict[Direction, list[float]],
    *,
    paired: bool,
    alpha: float,
    max_mde: float,
    power: float = 0.8,
    start: int = 1,
) -> int | None:
    """Replicates per condition at which every listed base rate sees max_mde in its listed
    direction (unchecked inputs; the engine's own entry point). The exact search starts from
    the normal approximation and brackets the answer within a few exact evaluations."""
    ceiling = MAX_REPLICATES_PAIRED if paired else MAX_REPLICATES_UNPAIRED
    arrays = {d: np.array(sorted(set(v)), dtype=np.float64) for d, v in base_rates.items()}

    def passes(n: int) -> bool:
        return all(
            _sees_all(paired, n, p0s, alpha, power, max_mde, direction)
            for direction, p0s in arrays.items()
        )

    known_fail = max(1, start) - 1
    hi = min(ceiling, max(known_fail + 1, _normal_guess(arrays, alpha, power, max_mde)))
    while not passes(hi):
        known_fail = hi
        if hi >= ceiling:
            return None
        hi = min(ceiling, int(hi * 1.25) + 1)
    lo = max(known_fail, int(hi * 0.85))
    if lo > known_fail and passes(lo):
        lo = known_fail
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


# --------------------------------------------------------------------------- design check


def _scan_rates(n: int, max_mde: float) -> FloatArray:
    """Base rates k/n a condition of n replicates can show, with room for a rise of max_mde.
    (A fall from p0 mirrors a rise from 1 - p0, so these also cover every fall.)"""
    k = np.arange(n + 1)
    rates = k / n
    return np.asarray(rates[rates <= 1.0 - max_mde + 1e-12], dtype=np.float64)


def _worst_rise(
    paired: bool, n: int, alpha: float, power: float, max_mde: float
) -> tuple[float | None, float]:
    rates = _scan_rates(n, max_mde)
    found = _cached_limits(paired, n, n, [float(r) for r in rates], alpha, power, "rise")
    worst: float = -1.0
    worst_p0 = 0.0
    for p0, limit in zip(rates, found, strict=True):
        if limit.value is None:
            return None, float(p0)
        if limit.value > worst:
            worst, worst_p0 = limit.value, float(p0)
    return worst, worst_p0


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

    Base rates scanned are every k/replicates a condition can show (k = 0..replicates) with
    room for a rise of max_mde. The replicate search looks near the worst base rate and
    confirms its answer on the full scan.
    """
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    q = check_q(q)
    max_mde = check_q(max_mde, "max_mde")
    power = _check_power(power)
    alpha = q / m
    worst, worst_p0 = _worst_rise(paired, n, alpha, power, max_mde)
    ok = worst is not None and worst <= max_mde + 1e-12
    needed: int | None = None
    if not ok:
        ceiling = MAX_REPLICATES_PAIRED if paired else MAX_REPLICATES_UNPAIRED
        needed = _smallest_n(
            lambda size: _sees_all(
                paired, size, _scan_rates(size, max_mde), alpha, power, max_mde, "rise"
            ),
            n + 1,
            ceiling,
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


