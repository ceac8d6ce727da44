"""Targets in a sequential run: a condition stopped once its target is decided.

The looks and the spending are the comparison's (``_sequential.py``): looks at
n_1 < ... < n_L replicates (:func:`look_schedule`), the share w_j of a row's level spent at
look j (:func:`alpha_shares`, O'Brien-Fleming type). Each direction of a target row gets its
own **sequential p-value** p* = min_j p_j / w_j over the looks taken (:func:`sequential_p`),
p_j being :func:`target_test`'s p-value on the condition's first n_j replicates. With the
true rate at the target, P(p* <= u) <= sum_j P(p_j <= u w_j) <= u (the union bound; the
exact size is printed by bench/targets.py): p* is a valid p-value however the looks are
correlated, so Holm over the rows' p* keeps each direction's family-wise error as in a fixed
run. p* only falls as looks are added, so a row claimed at some look stays claimed: stopping
a condition once its targets are decided never adds a wrong claim.

**The planned maximum.** A row's claim at its direction's level alpha/rows (Holm's first
step) is made at the latest when the last look alone makes it (p_L <= w_L alpha / rows); it
is lost only if the condition stopped earlier on a claim of the other direction, which, at
Holm's most lenient level alpha, has chance at most sum_j P(p_j,other <= w_j alpha). So the
sequential power is at least

    B(N) = P(last look alone claims) - sum_j P(look j claims the other way),

every term an exact binomial sum at the looks of a maximum N. The maximum is the smallest N
from which B(N) >= power at both agents (better and worse by the distance), at every N up
to max_n: a lower bound on the power, so the maximum may be a little larger than needed,
never smaller. It assumes a condition stops only once each of its target rows is decided
(or at the maximum).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from . import _dist
from ._roots import smallest
from ._spending import LOOKS, alpha_shares, look_schedule, obf_spending, sequential_p
from ._targets import (
    Side,
    _check_int,
    _rate_target,
    check_design,
    target_p_values,
    target_power,
    target_test,
)

__all__ = [
    "sequential_target_p",
    "sequential_target_power",
    "sequential_target_replicates",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Claim = Literal["meets", "misses"]


def sequential_target_p(
    events: Sequence[int], looks: Sequence[int], target: float, side: Side,
    shares: Sequence[float], *, k: int = 1,
) -> tuple[float, float]:
    """The sequential (p*_meets, p*_misses) of one target row over the looks taken:
    ``events[j]`` of the condition's first ``looks[j]`` replicates ended in the event (the
    successes, for pass^k), ``shares`` from :func:`alpha_shares` on the whole schedule,
    ``alpha_shares(look_schedule(maximum), q / rows)`` with ``rows`` the target rows.
    Compare each with q after Holm over the rows (:func:`holm` on each direction)."""
    if len(events) != len(looks) or len(looks) > len(shares):
        raise ValueError(
            f"one count of events per look taken, and at most one look per share: got "
            f"{len(events)} counts, {len(looks)} looks and {len(shares)} shares"
        )
    if any(b <= a for a, b in itertools.pairwise(looks)):
        raise ValueError(f"looks must grow, got {list(looks)}")
    rows = [target_test(x, n, target, side, k=k, alpha=0.05)
            for x, n in zip(events, looks, strict=True)]
    return (sequential_p([r.p_meets for r in rows], shares),
            sequential_p([r.p_misses for r in rows], shares))


def _other(claim: Claim) -> Claim:
    return "misses" if claim == "meets" else "meets"


def sequential_target_power(
    maximum: int, target: float, side: Side, true_value: float, *, k: int = 1,
    alpha: float = 0.05, rows: int = 1, looks: int = LOOKS, claim: Claim,
    stop_on_other: bool = True,
) -> float:
    """The exact chance that an agent whose true quantity is ``true_value`` is claimed to
    ``claim`` the target in a sequential run of at most ``maximum`` replicates: the claim
    at look j when p_j <= w_j alpha / rows (Holm's first step), the condition stopped
    (with ``stop_on_other``) when the other direction is claimed at its most lenient level,
    p_j <= w_j alpha. Summed over every path of the counts at the looks (the counts between
    looks are independent binomials), no simulation.

    With ``true_value`` at the target, ``rows`` 1 and ``stop_on_other`` False, this is the
    exact size of the sequential claim, P(p* <= alpha)."""
    schedule = look_schedule(maximum, looks)
    shares = alpha_shares(schedule, alpha / rows)
    p = _rate_target(true_value, k)
    claimed = 0.0
    alive = np.ones(1)
    before = 0
    for n, w in zip(schedule, shares, strict=True):
        alive = np.convolve(alive, _dist.binom_pmf(np.arange(n - before + 1), n - before, p))
        before = n
        meets, misses = target_p_values(n, target, side, k=k)
        mine, theirs = (meets, misses) if claim == "meets" else (misses, meets)
        hit = mine <= w * alpha / rows
        claimed += float(alive[hit].sum())
        alive[hit] = 0.0
        if stop_on_other:
            alive[theirs <= w * alpha] = 0.0
    return claimed


def _schedules(ns: IntArray, looks: int, level: float
               ) -> tuple[list[IntArray], list[FloatArray]]:
    """For maxima ns (each at least ``looks``), the replicates at each look and the share of
    the level spent there, one array per look, as look_schedule and
    alpha_shares(schedule, level) give them (a maximum of at least ``looks`` has them all
    distinct)."""
    sizes = [-(-j * ns // looks) for j in range(1, looks + 1)]
    whole = obf_spending(1.0, level)
    spent = [obf_spending(n / ns, level) / whole for n in sizes]
    shares = [spent[0], *(spent[j] - spent[j - 1] for j in range(1, looks))]
    shares[-1] = 1.0 - np.sum(shares[:-1], axis=0)
    return sizes, shares


def _power_bound(ns: IntArray, target: float, side: Side, true_value: float, k: int,
                 alpha: float, rows: int, looks: int, claim: Claim) -> FloatArray:
    """B(N) of the module docstring at each maximum of ns (each at least ``looks``)."""
    sizes, shares = _schedules(ns, looks, alpha / rows)
    bound = target_power(ns, target, side, true_value, k=k, level=shares[-1] * alpha / rows,
                         claim=claim)
    for n, w in zip(sizes, shares, strict=True):
        bound = bound - target_power(n, target, side, true_value, k=k, level=w * alpha,
                                     claim=_other(claim))
    return np.asarray(bound, dtype=np.float64)


def _sure_from(target: float, good: float, bad: float, k: int, alpha: float, power: float,
               rows: int, looks: int, max_n: int) -> int:
    """A maximum from which B(N) >= power surely holds at every larger N (so the exact scan
    can stop there), by Hoeffding's inequality; max_n if none below it is found.

    From a maximum N_c on, the last look's share is at least w_c = 1 - S((L - 1)/L + 1/N_c)
    (S the spending's shape: look L - 1 is at most (L - 1) N / L + 1 replicates), so the
    last look alone claims with chance at least 1 - exp(-2 g^2 / N), g = N delta - h - 1,
    h = sqrt(N ln(1 / level) / 2) at level w_c alpha / rows (as in ``_hoeffding_n``). The
    other direction's region at any look j lies beyond the target (its level is below 1/2),
    so it is reached with chance at most exp(-2 n_j delta^2) <= exp(-2 N delta^2 / L). Both
    bounds only improve as N grows."""
    rate = _rate_target(target, k)
    deltas = (abs(_rate_target(good, k) - rate), abs(_rate_target(bad, k) - rate))
    if min(deltas) <= 0.0:
        return max_n
    level = alpha / rows
    whole = float(obf_spending(1.0, level))

    def holds(n: int) -> bool:
        late = min(1.0, (looks - 1) / looks + 1.0 / n)
        w = 1.0 - float(obf_spending(late, level)) / whole
        if w <= 0.0:
            return False
        h = math.sqrt(n * math.log(rows / (w * alpha)) / 2.0)
        for delta in deltas:
            g = n * delta - h - 1.0
            other = looks * math.exp(-2.0 * n * delta * delta / looks)
            if g <= 0.0 or 1.0 - math.exp(-2.0 * g * g / n) - other < power:
                return False
        return True

    # holds() turns once, from False to True, as n grows: double, then bisect
    n = max(looks, 2)
    while not holds(n):
        if n >= max_n:
            return max_n
        n *= 2
    return min(max_n, smallest(holds, n // 2, n) if n > max(looks, 2) else n)


@functools.lru_cache(maxsize=256)
def _sequential_replicates(target: float, distance: float, side: Side, k: int, alpha: float,
                           power: float, rows: int, looks: int, max_n: int) -> int | None:
    good, bad = (target + distance, target - distance)
    if side == "<=":
        good, bad = bad, good
    if not (0.0 <= good <= 1.0 and 0.0 <= bad <= 1.0) or max_n < looks:
        return None
    top = _sure_from(target, good, bad, k, alpha, power, rows, looks, max_n)
    ns = np.arange(looks, top + 1, dtype=np.int64)
    ok = ((_power_bound(ns, target, side, good, k, alpha, rows, looks, "meets") >= power)
          & (_power_bound(ns, target, side, bad, k, alpha, rows, looks, "misses") >= power))
    if not ok[-1]:
        return None
    failing = np.flatnonzero(~ok)
    return int(ns[0]) if failing.size == 0 else int(ns[failing[-1]]) + 1


def sequential_target_replicates(
    target: float, distance: float, side: Side, *, k: int = 1, alpha: float = 0.05,
    power: float = 0.80, rows: int = 1, looks: int = LOOKS, max_n: int = 20000,
) -> int | None:
    """The planned maximum of a sequential run for one target: the smallest N from which
    the lower bound B(N) on the power (module docstring) is at least ``power`` for both
    claims, an agent better by ``distance`` shown to meet and one worse shown to miss, at
    every N up to ``max_n`` (a maximum below ``looks`` is not considered). None when max_n
    is not enough or target +- distance leaves [0, 1]. Never below
    :func:`target_replicates` at the same level, and usually within a third above it."""
    t, d, side, k, a, pw, r, top = check_design(target, distance, side, k, alpha, power,
                                                rows, max_n)
    lk = _check_int("looks", looks, 1)
    return _sequential_replicates(t, d, side, k, a, pw, r, lk, top)
