"""Absolute targets: is a condition's true rate on the right side of a fixed number?

A target says where the true rate of an event should lie: ``<= t`` (at most t, for an event
to avoid such as *unresolved*) or ``>= t`` (at least t, for one to reach such as *resolved*).
With x events in n independent episodes, each target is tested both ways with the exact
one-sided binomial test at the target:

- *meets*: the null hypothesis is that the target is not met; a small p-value shows the
  rate is on the right side. For ``<= t`` it is P(X <= x) under rate t, for ``>= t`` it is
  P(X >= x).
- *misses*: the null hypothesis is that the target is met; a small p-value shows the rate
  is on the wrong side: P(X >= x) under t for ``<= t``, P(X <= x) for ``>= t``.

The tail sums are exact (no normal approximation), so each test's chance of a wrong claim is
at most its level for every n and every true rate on its null's side, however small n is.

pass^k (tau-bench's reliability measure) is the chance that k independent tries all succeed,
p^k for a success rate p. Since p -> p^k is increasing, the target "pass^k >= t" is the rate
target "p >= t^(1/k)" on the successes, tested exactly as above on all n replicates; the
interval is the Clopper-Pearson interval for p carried through p -> p^k, and the estimate is
the unbiased C(c, k)/C(n, k) (:func:`pass_hat_k`), not the biased plug-in (c/n)^k.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from . import _dist
from ._check import check_power, check_q
from ._intervals import clopper_pearson_interval
from ._multiplicity import holm

__all__ = [
    "Side",
    "TargetTest",
    "holm_targets",
    "pass_at_k",
    "pass_hat_k",
    "target_p_values",
    "target_power",
    "target_replicates",
    "target_test",
]

Side = Literal["<=", ">="]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TargetTest:
    """One target tested on one condition's counts (see the module docstring)."""

    events: int  # episodes ending in the event (for pass^k: the successes)
    n: int  # episodes counted
    k: int  # 1 for a plain rate; k for pass^k
    estimate: float  # events/n for k == 1; the unbiased pass^k estimate otherwise
    low: float  # exact two-sided (1 - 2 alpha) Clopper-Pearson bounds on the quantity
    high: float
    p_meets: float  # H0: the target is not met (small = shown to meet)
    p_misses: float  # H0: the target is met (small = shown to miss)


# --------------------------------------------------------------------------- checks


def _check_int(name: str, value: object, smallest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    as_int = int(value)
    if as_int < smallest:
        raise ValueError(f"{name} must be at least {smallest}, got {as_int}")
    return as_int


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or int(k) < 1:
        raise ValueError(
            f"k must be a whole number of tries, at least 1 (pass^1 is the plain success "
            f"rate), got {k!r}"
        )
    return int(k)


def _check_counts(events: object, n: object, events_name: str = "events") -> tuple[int, int]:
    ni = _check_int("n", n, 1)
    xi = _check_int(events_name, events, 0)
    if xi > ni:
        raise ValueError(f"{events_name} must be between 0 and n ({ni}), got {xi}")
    return xi, ni


def _check_side(side: object) -> Side:
    if side == "<=":
        return "<="
    if side == ">=":
        return ">="
    raise ValueError(
        f"side must be '<=' (the true rate is at most the target) or '>=' (at least), "
        f"got {side!r}"
    )


def _check_target(target: object) -> float:
    if isinstance(target, bool) or not isinstance(target, numbers.Real):
        raise ValueError(f"target must be a number strictly between 0 and 1, got {target!r}")
    t = float(target)
    if not (math.isfinite(t) and 0.0 < t < 1.0):
        raise ValueError(
            f"target must be strictly between 0 and 1, got {target!r}: a target of 0 or 1 "
            f"('<= 0', '>= 1') can never be shown met by any number of episodes, since one "
            f"event more or less is always possible; use a rate such as 0.01 or 0.99"
        )
    return t


def _check_alpha(alpha: object) -> float:
    a = check_q(alpha, "alpha")
    if a >= 0.5:
        raise ValueError(f"alpha must be below 0.5 (the interval is 1 - 2 alpha), got {a!r}")
    return a


def _rate_target(target: float, k: int) -> float:
    """The success-rate target equivalent to a pass^k target: t^(1/k) (t itself for k 1)."""
    return target if k == 1 else float(target ** (1.0 / k))


# --------------------------------------------------------------------------- estimators


def pass_hat_k(successes: int, n: int, k: int) -> float:
    """The unbiased estimate of pass^k = p^k from c successes in n replicates:
    C(c, k) / C(n, k), the share of the k-subsets of the n replicates that are all
    successes (tau-bench's pass^k). Exact: integer binomials, one rounding.

    ValueError if k < 1 or k > n (no k-subset to average over)."""
    k = _check_k(k)
    c, n = _check_counts(successes, n, "successes")
    if k > n:
        raise ValueError(f"pass^{k} needs at least k = {k} replicates, got n = {n}")
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(successes: int, n: int, k: int) -> float:
    """The unbiased estimate of pass@k = 1 - (1 - p)^k (at least one of k tries succeeds)
    from c successes in n replicates: 1 - C(n - c, k) / C(n, k) (Chen et al. 2021).

    ValueError if k < 1 or k > n."""
    k = _check_k(k)
    c, n = _check_counts(successes, n, "successes")
    if k > n:
        raise ValueError(f"pass@{k} needs at least k = {k} replicates, got n = {n}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


# --------------------------------------------------------------------------- the test


def _p_at_most(x: int, n: int, rate: float) -> float:
    """P(X <= x) for X ~ Binomial(n, rate): scipy's regularized incomplete beta."""
    return float(_dist.binom_cdf(x, n, rate))


def _p_at_least(x: int, n: int, rate: float) -> float:
    """P(X >= x) for X ~ Binomial(n, rate)."""
    return float(_dist.binom_sf(x - 1, n, rate))


def target_p_values(n: int, target: float, side: Side, *, k: int = 1
                    ) -> tuple[FloatArray, FloatArray]:
    """(p_meets, p_misses) of :func:`target_test` at every outcome x = 0..n at once (the
    same scipy calls on an array: the same numbers)."""
    k = _check_k(k)
    n = _check_int("n", n, 1)
    side = _check_side(side)
    rate = _rate_target(_check_target(target), k)
    x = np.arange(n + 1)
    at_most = np.asarray(_dist.binom_cdf(x, n, rate), dtype=np.float64)
    at_least = np.asarray(_dist.binom_sf(x - 1, n, rate), dtype=np.float64)
    return (at_most, at_least) if side == "<=" else (at_least, at_most)


def target_test(
    events: int, n: int, target: float, side: Side, *, k: int = 1, alpha: float = 0.05
) -> TargetTest:
    """Test one target on ``events`` out of ``n`` episodes, both ways (module docstring).

    ``target`` and ``side`` are on the quantity: the event's rate when k is 1, pass^k
    (``events`` are then the successes) otherwise, tested as the rate target t^(1/k).
    ``alpha`` sets only the interval, [low, high] at 1 - 2 alpha, each bound one-sided at
    1 - alpha: the target lies below ``low`` exactly when P(X >= x) at it is <= alpha, so
    the bound beside the target tells the same story as the p-values at level alpha.

    ValueError (with the value and what is expected) for k < 1, k > n when k > 1, a target
    not strictly between 0 and 1 (a target of 0 or 1 can never be shown met), n < 1,
    events outside [0, n], or a side other than '<=' and '>='.
    """
    k = _check_k(k)
    x, n = _check_counts(events, n)
    t = _check_target(target)
    side = _check_side(side)
    a = _check_alpha(alpha)
    rate = _rate_target(t, k)
    at_most, at_least = _p_at_most(x, n, rate), _p_at_least(x, n, rate)
    p_meets, p_misses = (at_most, at_least) if side == "<=" else (at_least, at_most)
    # each end leaves alpha on its side: the one-sided bounds at 1 - alpha
    low, high = clopper_pearson_interval(x, n, level=1.0 - 2.0 * a)
    if k == 1:
        estimate = x / n
    else:
        estimate = pass_hat_k(x, n, k)
        low, high = low**k, high**k
    return TargetTest(events=x, n=n, k=k, estimate=estimate, low=low, high=high,
                      p_meets=p_meets, p_misses=p_misses)


def holm_targets(tests: Sequence[TargetTest], *, q: float) -> list[tuple[float, float]]:
    """Holm-adjusted (p_meets, p_misses) of each row, in the rows' order: a row is shown to
    meet its target when its adjusted p_meets is <= q, to miss it when its adjusted
    p_misses is <= q.

    The two directions are two Holm families over the rows, each at q. Why two:

    - Each gate reads one direction. The default gate fails on *misses*: its false failures
      are wrong *misses* claims, whose chance over the whole session Holm keeps at most q
      (any dependence between rows). The strict gate fails on *not shown to meet*: it
      passes wrongly only if some row that does not meet its target is claimed to meet,
      again one family, at most q.
    - In a row, only one of the two null hypotheses is true (the target is met or it is
      not), and the two claims exclude each other (p_meets + p_misses >= 1), so a row
      alone never errs more than q either way.
    - The chance of any wrong word over both directions together is at most 2q by the
      union bound, and close to q in practice: rows at their targets on both sides of
      them, where both families can err, give q + q^2/4 for two rows with continuous
      statistics, and less with the exact (discrete) ones (bench/targets.py prints it: at
      most 0.041 at q = 0.05). One family of 2m hypotheses
      would cap that at q but halve every row's level, costing replicates for no gate's
      benefit.

    ``q`` is checked (strictly between 0 and 1); the adjusted values do not depend on it.
    """
    check_q(q)
    if not tests:
        return []
    meets = holm([row.p_meets for row in tests])
    misses = holm([row.p_misses for row in tests])
    return [(float(a), float(b)) for a, b in zip(meets, misses, strict=True)]


# --------------------------------------------------------------------------- the design


def _first_rejected_high(ns: IntArray, rate: float, level: float | FloatArray) -> IntArray:
    """For each n, the smallest x with P(X >= x) <= level under ``rate`` (n + 1 if none):
    the rejection region {x >= c} of the upper tail, exactly as :func:`target_test`
    decides it (scipy's quantile, then corrected against the very tail sums it uses)."""
    start = np.nan_to_num(np.asarray(_dist.binom_isf(level, ns, rate), dtype=np.float64))
    c: IntArray = np.clip(start.astype(np.int64) + 1, 0, ns + 1)
    for _ in range(64):
        too_low = (c <= ns) & (_dist.binom_sf(c - 1, ns, rate) > level)
        can_drop = (c >= 1) & (_dist.binom_sf(c - 2, ns, rate) <= level)
        if not (too_low.any() or can_drop.any()):
            return c
        c = c + too_low.astype(np.int64) - can_drop.astype(np.int64)
    raise AssertionError("the rejection region's edge did not settle")  # pragma: no cover


def _last_rejected_low(ns: IntArray, rate: float, level: float | FloatArray) -> IntArray:
    """For each n, the largest x with P(X <= x) <= level under ``rate`` (-1 if none)."""
    start = np.nan_to_num(np.asarray(_dist.binom_ppf(level, ns, rate), dtype=np.float64))
    d: IntArray = np.clip(start.astype(np.int64), -1, ns)
    for _ in range(64):
        too_high = (d >= 0) & (_dist.binom_cdf(d, ns, rate) > level)
        can_rise = (d < ns) & (_dist.binom_cdf(d + 1, ns, rate) <= level)
        if not (too_high.any() or can_rise.any()):
            return d
        d = d - too_high.astype(np.int64) + can_rise.astype(np.int64)
    raise AssertionError("the rejection region's edge did not settle")  # pragma: no cover


def target_power(
    ns: IntArray, target: float, side: Side, true_value: float, *, k: int = 1,
    level: float | FloatArray = 0.05, claim: Literal["meets", "misses"],
) -> FloatArray:
    """The exact chance, at each n of ``ns``, that an agent whose true quantity (rate, or
    pass^k) is ``true_value`` is claimed to ``claim`` the target at ``level`` (one level,
    or one per n): the binomial probability of the test's rejection region."""
    rate = _rate_target(target, k)
    p = _rate_target(true_value, k)
    upper = (side == ">=") == (claim == "meets")  # the claim rejects on many events
    if upper:
        c = _first_rejected_high(ns, rate, level)
        return np.asarray(_dist.binom_sf(c - 1, ns, p), dtype=np.float64)
    d = _last_rejected_low(ns, rate, level)
    return np.asarray(np.where(d >= 0, _dist.binom_cdf(d, ns, p), 0.0), dtype=np.float64)


def _hoeffding_n(target: float, good: float, bad: float, k: int, level: float,
                 power: float) -> int:
    """An n from which both claims surely have ``power``, at every larger n too, by
    Hoeffding's inequality on both sides of the test (so the exact scan can stop there).

    For the upper-tail test at rate t, every x >= n t + h with h = sqrt(n ln(1/level) / 2)
    has P(X >= x) <= level, so the region starts at or below n t + h + 1; under a true rate
    t + delta, P(X < n t + h + 1) <= exp(-2 g^2 / n) with g = n delta - h - 1. That is at
    most 1 - power once sqrt(n) delta - A - 1/sqrt(n) >= B (A = sqrt(ln(1/level) / 2),
    B = sqrt(ln(1/(1 - power)) / 2)), and the left side grows with n. The lower tail is the
    mirror image. delta is the smaller distance on the rate's scale (after the k-th root)."""
    rate = _rate_target(target, k)
    delta = min(abs(_rate_target(good, k) - rate), abs(_rate_target(bad, k) - rate))
    if delta <= 0.0:
        return 1 << 62
    ab = math.sqrt(math.log(1.0 / level) / 2.0) + math.sqrt(math.log(1.0 / (1.0 - power)) / 2.0)
    root = (ab + math.sqrt(ab * ab + 4.0 * delta)) / (2.0 * delta)
    return math.ceil(root * root) + 1


@functools.lru_cache(maxsize=256)
def _replicates(target: float, distance: float, side: Side, k: int, level: float,
                power: float, max_n: int) -> int | None:
    good, bad = (target + distance, target - distance)
    if side == "<=":
        good, bad = bad, good
    if not (0.0 <= good <= 1.0 and 0.0 <= bad <= 1.0):
        return None
    # Every n from the Hoeffding bound on holds: the exact scan stops there (or at max_n).
    sure = _hoeffding_n(target, good, bad, k, level, power)
    ns = np.arange(1, min(max_n, sure) + 1, dtype=np.int64)
    meets = target_power(ns, target, side, good, k=k, level=level, claim="meets")
    misses = target_power(ns, target, side, bad, k=k, level=level, claim="misses")
    ok = (meets >= power) & (misses >= power)
    if not ok[-1]:
        return None
    failing = np.flatnonzero(~ok)
    return 1 if failing.size == 0 else int(failing[-1]) + 2


def target_replicates(
    target: float, distance: float, side: Side, *, k: int = 1, alpha: float = 0.05,
    power: float = 0.80, rows: int = 1, max_n: int = 20000,
) -> int | None:
    """The replicates one condition needs for its target to be decided: the smallest n such
    that, at level alpha/rows (Holm's first step over ``rows`` target rows), an agent whose
    true quantity is better than the target by ``distance`` is shown to meet it with
    probability >= ``power``, and one worse by ``distance`` is shown to miss it with
    probability >= ``power`` (exact binomial sums, no approximation).

    Exact power is a sawtooth in n: it can dip below ``power`` at some n after first
    reaching it. The answer is the smallest n from which both powers hold at every n up to
    ``max_n`` (so any n between it and max_n is safe), not the first n that happens to
    reach them. None when max_n replicates are not enough, or when target +- distance
    leaves [0, 1] (no agent can be that much better or worse).
    """
    t, d, side, k, a, pw, r, top = check_design(target, distance, side, k, alpha, power,
                                                rows, max_n)
    return _replicates(t, d, side, k, a / r, pw, top)


def check_design(target: object, distance: object, side: object, k: object, alpha: object,
                 power: object, rows: object, max_n: object
                 ) -> tuple[float, float, Side, int, float, float, int, int]:
    """A design's arguments checked (ValueError naming the bad one): target, distance,
    side, k, alpha, power, rows and max_n, as numbers."""
    kk = _check_k(k)
    t = _check_target(target)
    sd = _check_side(side)
    a = check_q(alpha, "alpha")
    pw = check_power(power)
    r = _check_int("rows", rows, 1)
    top = _check_int("max_n", max_n, 1)
    if isinstance(distance, bool) or not isinstance(distance, numbers.Real):
        raise ValueError(f"distance must be a number between 0 and 1, got {distance!r}")
    d = float(distance)
    if not (math.isfinite(d) and 0.0 < d <= 1.0):
        raise ValueError(f"distance must be above 0 and at most 1, got {distance!r}")
    return t, d, sd, kk, a, pw, r, top
