"""Absolute targets (issue 32): exact size, family-wise error under Holm, and power at the
design's replicates (figures printed; exits 1 if a check fails).

1. Size. For each n and each target t on a grid, the true rate is exactly t, and the chance
   that a row is claimed to meet (p_meets <= q) and to miss (p_misses <= q) is the binomial
   probability of the outcomes x = 0..n that :func:`target_test` rejects on: an exact sum,
   no simulation. At the target the target is met, so a *misses* claim is a wrong one; the
   *meets* test's null (not met) has the target as its edge, and its chance of rejecting
   grows towards it, so its value at t is its largest over the null. Both must be <= q.
2. Family-wise error under Holm (:func:`holm_targets`), by simulation with a fixed seed: m
   rows, each at its own target from the grid, each with its true rate at the target; a
   family errs when it makes any wrong claim. "misses" and "meets" are the two Holm
   families on their own (each must be <= q, Holm's guarantee, checked within 2 s.e.);
   "both" puts half the rows at the target (met: a *misses* claim is wrong) and half just
   short of it (not met: a *meets* claim is wrong), the worst case for a wrong word of
   either kind (at most 2q by the union bound; printed, and checked against 2q).
3. Power. For targets, sides, distances, k and rows, :func:`target_replicates` gives n; an
   agent better than the target by the distance must be shown to meet it, and one worse
   shown to miss it, with probability >= 0.80 at level q/rows: exact (binomial sums over
   target_test's own decisions) and simulated (fixed seed; within 2 s.e. of the exact).
   One replicate fewer must fall short (the answer is the smallest that holds).
4. Sequential. For the same designs, :func:`sequential_target_replicates` gives the planned
   maximum of a run in looks (stopped once the target is decided); its exact power (summed
   over every path of the counts at the looks) must be >= 0.80 both ways, its exact size at
   the target <= q, and a simulation of the looks (fixed seed) gives the replicates a
   condition uses on average, better, worse, and at the target.

Run: python bench/targets.py [--quick] [--sims N] [--seed S]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats  # type: ignore[import-untyped]

from pytest_prove.stats import (
    holm_targets,
    sequential_target_power,
    sequential_target_replicates,
    target_replicates,
    target_test,
)
from pytest_prove.stats._sequential import alpha_shares, look_schedule
from pytest_prove.stats._targets import Side, target_p_values

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

Q = 0.05
SIZES = (10, 30, 100, 190, 500)
GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05 .. 0.95
SHOWN = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
FAMILIES = (4, 16)
SEED = 20261205
# (target, side, distance, k, rows) for the power table
DESIGNS: tuple[tuple[float, Side, float, int, int], ...] = (
    (0.10, "<=", 0.10, 1, 1),
    (0.25, "<=", 0.10, 1, 1),
    (0.25, "<=", 0.10, 1, 4),
    (0.90, ">=", 0.05, 1, 1),
    (0.90, ">=", 0.05, 1, 16),
    (0.50, ">=", 0.15, 1, 1),
    (0.50, ">=", 0.20, 8, 1),
    (0.50, ">=", 0.20, 8, 4),
)


def p_values(n: int, target: float, side: Side, k: int = 1) -> tuple[FloatArray, FloatArray]:
    """(p_meets, p_misses) of target_test at every outcome x = 0..n."""
    rows = [target_test(x, n, target, side, k=k) for x in range(n + 1)]
    return (np.array([r.p_meets for r in rows]), np.array([r.p_misses for r in rows]))


def claim_chance(pvalues: FloatArray, n: int, rate: float, level: float) -> float:
    """The exact chance that p <= level when the outcome is Binomial(n, rate)."""
    pmf = stats.binom.pmf(np.arange(n + 1), n, rate)
    return float(pmf[pvalues <= level].sum())


@dataclass(frozen=True)
class Size:
    n: int
    target: float
    side: Side
    k: int
    meets: float  # chance of a meets claim with the true quantity at the target
    misses: float


def sizes(n: int, targets: Sequence[float], k: int = 1, q: float = Q) -> list[Size]:
    out = []
    for t in targets:
        for side in ("<=", ">="):
            meets, misses = p_values(n, t, side, k)
            rate = t ** (1.0 / k)
            out.append(Size(n, t, side, k, claim_chance(meets, n, rate, q),
                            claim_chance(misses, n, rate, q)))
    return out


def holm_reject(p: FloatArray, q: float) -> BoolArray:
    """Holm's step-down decisions for each family (row of ``p``, m p-values) at q."""
    m = p.shape[1]
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    passed = np.logical_and.accumulate(ranked <= q / (m - np.arange(m)), axis=1)
    out = np.zeros_like(passed)
    np.put_along_axis(out, order, passed, axis=1)
    return out


@dataclass(frozen=True)
class Fwer:
    n: int
    m: int
    misses: float  # every row at its target: chance of any misses claim
    meets: float  # every row at its target, as the edge of not met: any meets claim
    both: float  # half met (misses wrong), half just short (meets wrong): any wrong claim
    se: float  # the largest standard error of the three
    holm_checked: int  # families also decided by holm_targets itself, all agreeing


def fwer(n: int, m: int, sims: int, seed: int, q: float = Q, check: int = 200) -> Fwer:
    """Family-wise error of m rows by simulation (see the module docstring); the first
    ``check`` families are also decided by holm_targets and must agree."""
    rng = np.random.default_rng(seed)
    targets = [GRID[(3 * i + 1) % len(GRID)] for i in range(m)]
    sides: list[Side] = [("<=", ">=")[i % 2] for i in range(m)]
    tables = [p_values(n, t, s) for t, s in zip(targets, sides, strict=True)]
    x = np.column_stack([rng.binomial(n, t, size=sims) for t in targets])
    meets = np.column_stack([tab[0][x[:, i]] for i, tab in enumerate(tables)])
    misses = np.column_stack([tab[1][x[:, i]] for i, tab in enumerate(tables)])
    shown_meet, shown_miss = holm_reject(meets, q), holm_reject(misses, q)
    for s in range(min(check, sims)):
        rows = [target_test(int(x[s, i]), n, targets[i], sides[i]) for i in range(m)]
        adjusted = np.array(holm_targets(rows, q=q))
        if not (np.array_equal(adjusted[:, 0] <= q, shown_meet[s])
                and np.array_equal(adjusted[:, 1] <= q, shown_miss[s])):
            raise SystemExit(f"holm_targets disagrees with Holm's step-down rule at n={n} "
                             f"m={m}, family {s}")
    half = np.arange(m) % 2 == 0  # met rows: a misses claim is wrong; others: a meets claim
    rates = np.array([shown_miss.any(axis=1).mean(), shown_meet.any(axis=1).mean(),
                      (shown_miss[:, half].any(axis=1)
                       | shown_meet[:, ~half].any(axis=1)).mean()])
    se = float(np.sqrt(rates * (1 - rates) / sims).max())
    return Fwer(n, m, float(rates[0]), float(rates[1]), float(rates[2]), se,
                min(check, sims))


@dataclass(frozen=True)
class Power:
    target: float
    side: Side
    distance: float
    k: int
    rows: int
    n: int | None
    meets: float  # exact power to show meets at the better agent
    misses: float  # exact power to show misses at the worse agent
    sim_meets: float
    sim_misses: float
    se: float
    below: float  # the smaller of the two exact powers at n - 1


def exact_powers(n: int, target: float, side: Side, distance: float, k: int,
                 level: float) -> tuple[float, float]:
    good, bad = target + distance, target - distance
    if side == "<=":
        good, bad = bad, good
    meets, misses = p_values(n, target, side, k)
    return (claim_chance(meets, n, good ** (1.0 / k), level),
            claim_chance(misses, n, bad ** (1.0 / k), level))


def power(target: float, side: Side, distance: float, k: int, rows: int, sims: int,
          seed: int, q: float = Q) -> Power:
    n = target_replicates(target, distance, side, k=k, alpha=q, rows=rows)
    if n is None:
        return Power(target, side, distance, k, rows, None, *(math.nan,) * 6)
    level = q / rows
    meets, misses = exact_powers(n, target, side, distance, k, level)
    below = min(exact_powers(n - 1, target, side, distance, k, level)) if n > 1 else 0.0
    good, bad = target + distance, target - distance
    if side == "<=":
        good, bad = bad, good
    rng = np.random.default_rng(seed)
    sim = []
    for rate, claim in ((good, "meets"), (bad, "misses")):
        x = rng.binomial(n, rate ** (1.0 / k), size=sims)
        shown = {}
        for value in np.unique(x):
            row = target_test(int(value), n, target, side, k=k)
            shown[int(value)] = (row.p_meets if claim == "meets" else row.p_misses) <= level
        sim.append(float(np.mean([shown[int(v)] for v in x])))
    se = float(math.sqrt(0.8 * 0.2 / sims))
    return Power(target, side, distance, k, rows, n, meets, misses, sim[0], sim[1], se, below)


@dataclass(frozen=True)
class Sequential:
    fixed: int | None
    maximum: int | None
    meets: float  # exact sequential power to show meets at the better agent
    misses: float
    size: float  # the larger exact size of the two claims at the target
    used: tuple[float, float, float]  # mean replicates used: better, worse, at the target


def mean_used(maximum: int, target: float, side: Side, true: float, k: int, rows: int,
              sims: int, seed: int, q: float = Q) -> float:
    """Replicates a condition uses on average in a sequential run (simulated): it stops at
    the first look where either direction is claimed (meets at q/rows, misses at q)."""
    looks = look_schedule(maximum)
    shares = alpha_shares(looks, q / rows)
    rng = np.random.default_rng(seed)
    steps = np.diff(np.concatenate(([0], looks)))
    counts = np.cumsum(rng.binomial(steps, true ** (1.0 / k), size=(sims, len(looks))),
                       axis=1)
    tables = [target_p_values(n, target, side, k=k) for n in looks]
    meets = np.minimum.accumulate(np.column_stack(
        [tables[j][0][counts[:, j]] / shares[j] for j in range(len(looks))]), axis=1)
    misses = np.minimum.accumulate(np.column_stack(
        [tables[j][1][counts[:, j]] / shares[j] for j in range(len(looks))]), axis=1)
    stopped = (meets <= q / rows) | (misses <= q)
    at = np.where(stopped.any(axis=1), np.argmax(stopped, axis=1), len(looks) - 1)
    return float(np.asarray(looks)[at].mean())


def sequential(target: float, side: Side, distance: float, k: int, rows: int, sims: int,
               seed: int, q: float = Q) -> Sequential:
    fixed = target_replicates(target, distance, side, k=k, alpha=q, rows=rows)
    n = sequential_target_replicates(target, distance, side, k=k, alpha=q, rows=rows)
    if n is None:
        return Sequential(fixed, None, math.nan, math.nan, math.nan, (math.nan,) * 3)
    good, bad = target + distance, target - distance
    if side == "<=":
        good, bad = bad, good
    meets = sequential_target_power(n, target, side, good, k=k, alpha=q, rows=rows,
                                    claim="meets")
    misses = sequential_target_power(n, target, side, bad, k=k, alpha=q, rows=rows,
                                     claim="misses")
    size = max(sequential_target_power(n, target, side, target, k=k, alpha=q, claim=c,
                                       stop_on_other=False) for c in ("meets", "misses"))
    used = tuple(mean_used(n, target, side, v, k, rows, sims, seed + i)
                 for i, v in enumerate((good, bad, target)))
    return Sequential(fixed, n, meets, misses, size, (used[0], used[1], used[2]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 10, 30 and 100 only")
    parser.add_argument("--sims", type=int, default=20000, help="families per FWER cell")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    chosen = SIZES[:3] if args.quick else SIZES
    failed: list[str] = []
    start = time.perf_counter()

    print(f"1. Exact size at the target, q = {Q} (targets {GRID[0]} to {GRID[-1]} by 0.05; "
          f"the shown targets, then the largest over the grid)")
    print(f"{'n':>5}{'k':>3}{'target':>8}{'<= meets':>11}{'<= misses':>11}"
          f"{'>= meets':>11}{'>= misses':>11}")
    for k, ns in ((1, chosen), (8, tuple(n for n in chosen if n >= 30))):
        for n in ns:
            found = sizes(n, GRID, k)
            by = {(s.target, s.side): s for s in found}
            for t in SHOWN:
                lo, hi = by[(t, "<=")], by[(t, ">=")]
                print(f"{n:>5}{k:>3}{t:>8}{lo.meets:>11.5f}{lo.misses:>11.5f}"
                      f"{hi.meets:>11.5f}{hi.misses:>11.5f}")
            worst = max(found, key=lambda s: max(s.meets, s.misses))
            top = max(worst.meets, worst.misses)
            print(f"{n:>5}{k:>3}{'max':>8}  largest {top:.5f} at target {worst.side} "
                  f"{worst.target}")
            if top > Q:
                failed.append(f"size {top} > q at n={n} k={k} target {worst.side} "
                              f"{worst.target}")

    print(f"\n2. Family-wise error under Holm, q = {Q}, {args.sims} families per cell "
          f"(seed {args.seed})")
    print(f"{'n':>5}{'m':>4}{'misses':>9}{'meets':>9}{'both':>9}{'s.e.':>8}{'checked':>9}")
    for n in chosen:
        for m in FAMILIES:
            f = fwer(n, m, args.sims, args.seed + 1000 * n + m)
            print(f"{n:>5}{m:>4}{f.misses:>9.4f}{f.meets:>9.4f}{f.both:>9.4f}"
                  f"{f.se:>8.4f}{f.holm_checked:>9}")
            for name, value, limit in (("misses", f.misses, Q), ("meets", f.meets, Q),
                                       ("both", f.both, 2 * Q)):
                if value > limit + 2 * f.se:
                    failed.append(f"FWER {name} {value} > {limit} + 2 s.e. at n={n} m={m}")

    sims = max(2000, args.sims // 5)
    print(f"\n3. Power at the design's replicates (power 0.80 at level q/rows; "
          f"{sims} simulated runs each)")
    print(f"{'target':>10}{'distance':>9}{'rows':>5}{'n':>6}{'meets':>8}{'misses':>8}"
          f"{'sim meets':>10}{'sim misses':>11}{'s.e.':>7}{'at n-1':>8}")
    for i, (t, side, d, k, rows) in enumerate(DESIGNS):
        p = power(t, side, d, k, rows, sims, args.seed + i)
        label = f"{'pass^' + str(k) if k > 1 else 'rate'}{side}{t:g}"
        if p.n is None:
            print(f"{label:>10}{d:>9}{rows:>5}{'none':>6}")
            failed.append(f"no design for {label} distance {d}")
            continue
        print(f"{label:>10}{d:>9}{rows:>5}{p.n:>6}{p.meets:>8.4f}{p.misses:>8.4f}"
              f"{p.sim_meets:>10.4f}{p.sim_misses:>11.4f}{p.se:>7.4f}{p.below:>8.4f}")
        if min(p.meets, p.misses) < 0.8:
            failed.append(f"exact power below 0.80 for {label} distance {d} rows {rows}")
        if min(p.sim_meets, p.sim_misses) < 0.8 - 2 * p.se:
            failed.append(f"simulated power below 0.80 - 2 s.e. for {label} rows {rows}")
        if p.below >= 0.8:
            failed.append(f"{label} distance {d} rows {rows}: n - 1 would do")

    print(f"\n4. Sequential runs: the planned maximum, its exact power and size, and the mean "
          f"replicates used ({sims} simulated runs each)")
    print(f"{'target':>10}{'distance':>9}{'rows':>5}{'fixed':>6}{'max':>6}{'meets':>8}"
          f"{'misses':>8}{'size':>8}{'used: better':>14}{'worse':>7}{'at target':>10}")
    for i, (t, side, d, k, rows) in enumerate(DESIGNS):
        sq = sequential(t, side, d, k, rows, sims, args.seed + 100 + 10 * i)
        label = f"{'pass^' + str(k) if k > 1 else 'rate'}{side}{t:g}"
        if sq.maximum is None:
            print(f"{label:>10}{d:>9}{rows:>5}{sq.fixed!s:>6}{'none':>6}")
            failed.append(f"no sequential design for {label} distance {d}")
            continue
        print(f"{label:>10}{d:>9}{rows:>5}{sq.fixed!s:>6}{sq.maximum:>6}{sq.meets:>8.4f}"
              f"{sq.misses:>8.4f}{sq.size:>8.4f}{sq.used[0]:>14.1f}{sq.used[1]:>7.1f}"
              f"{sq.used[2]:>10.1f}")
        if min(sq.meets, sq.misses) < 0.8:
            failed.append(f"sequential power below 0.80 for {label} distance {d} rows {rows}")
        if sq.size > Q:
            failed.append(f"sequential size {sq.size} > q for {label}")

    print(f"\n{time.perf_counter() - start:.1f} s")
    for line in failed:
        print(f"FAILED: {line}")
    print("all checks hold" if not failed else f"{len(failed)} check(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
