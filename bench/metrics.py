"""Metric rows' false-alarm rate and power, by simulation (issue 30's calibration).

Three metrics an agent reports, each paired (twins on one seed share a latent "how hard was
this task", correlation 0.7, so they agree more than strangers) and unpaired, and paired with
independent twins (correlation 0, the case a paired limit is computed for):

- latency: lognormal, a heavy right tail (lower is better);
- judge: a score on 1-5 with heavy ties (higher is better);
- cost: zero-inflated, about 40% of episodes free, the rest gamma (lower is better).

Size: ``--sims`` comparisons of 16 conditions with nothing changed, each row tested as a
comparison tests it (signed-rank paired, rank-sum unpaired), Holm over the 16 at q = 0.05;
the share of comparisons with any row flagged (worse or safer) should be <= q + 2 s.e.

Power: ``--sims`` comparisons, each with a baseline of its own, whose row 0 gets its printed
detection limit (``metric_limit`` at q/16 from that baseline's own values, rounded outward by
``outward_units`` as printed) added to its after values in the worse direction; the share in
which Holm flags row 0 worse should be >= 0.80 - 2 s.e. Paired limits assume independent
twins, so with twins that agree the power reads above 0.80; the rows "paired r=0" (independent
twins) show the limit where it is computed to hold.

Only the public API (``pytest_prove.stats``) is used. The row tests are computed for all
comparisons at once (numpy over the comparisons, each tie pattern's exact signed-rank null
counted once by ``signed_rank_null`` and reused), which is what made the full table take
minutes instead of most of an hour; every 50th row of every batch is tested again by
``signed_rank_test`` / ``rank_sum_test`` and must give the same three p-values bit for bit,
or the script stops. What is left is one ``metric_limit`` per power comparison.

Run: nice -n 19 python bench/metrics.py [--sims 2000] [--n 50]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special, stats

from pytest_prove.stats import (
    holm,
    metric_limit,
    outward_units,
    rank_sum_test,
    signed_rank_null,
    signed_rank_test,
)

Q = 0.05
ROWS = 16
SEED = 20261204
#: paired with twins that agree (the usual case: one seed, one task), unpaired, and paired
#: with twins no closer than strangers (what a detection limit assumes: it reads there)
DESIGNS: tuple[tuple[float | None, str], ...] = ((0.7, "paired r=0.7"), (None, "unpaired"),
                                                 (0.0, "paired r=0"))
CHECK_EVERY = 50  # every this many rows is tested again by the public functions

FloatArray = npt.NDArray[np.float64]
Draw = Callable[[np.random.Generator, FloatArray], FloatArray]
Better = Literal["higher", "lower"]


def _latency(rng: np.random.Generator, latent: FloatArray) -> FloatArray:
    return np.round(np.exp(latent + 0.5 * rng.normal(size=latent.shape)), 3)


_JUDGE_EDGES = np.cumsum([0.05, 0.10, 0.20, 0.35])


def _judge(rng: np.random.Generator, latent: FloatArray) -> FloatArray:
    u = special.ndtr((latent + 0.6 * rng.normal(size=latent.shape)) / math.sqrt(1.36))
    return 1.0 + np.searchsorted(_JUDGE_EDGES, u).astype(np.float64)


def _cost(rng: np.random.Generator, latent: FloatArray) -> FloatArray:
    free = special.ndtr(latent + 0.5 * rng.normal(size=latent.shape)) < 0.4
    amount = rng.gamma(2.0, 0.01, size=latent.shape) * np.exp(0.3 * latent)
    return np.where(free, 0.0, np.round(amount, 5))


METRICS: dict[str, tuple[Draw, Better, str]] = {
    "latency (lognormal)": (_latency, "lower", "s"),
    "judge (1-5, ties)": (_judge, "higher", "points"),
    "cost (zero-inflated)": (_cost, "lower", "$"),
}


def _latents(rng: np.random.Generator, shape: tuple[int, ...], correlation: float | None,
             before: FloatArray | None = None) -> FloatArray:
    """Each episode's latent; an after run's twin's latent has ``correlation`` with its
    partner's (None: unpaired, no partner)."""
    if before is None or correlation is None:
        return rng.normal(size=shape)
    return correlation * before + math.sqrt(1 - correlation ** 2) * rng.normal(size=shape)


# ---------------------------------------------------------------------------
# the row tests, for many rows at once


class SignedRankNulls:
    """``signed_rank_test``'s exact p-values for many rows of differences: the midranks of
    every row at once, and each tie pattern's null distribution counted once."""

    def __init__(self) -> None:
        self._nulls: dict[bytes, FloatArray] = {}

    def __len__(self) -> int:
        return len(self._nulls)

    def ps(self, d: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        rows, n = d.shape
        nonzero = d != 0.0
        zeros = n - nonzero.sum(axis=1, keepdims=True)
        # zeros rank below every nonzero |d|; a nonzero's rank among the nonzero ones is its
        # rank less the zeros (an integer shift, so the midranks are exactly those of the
        # nonzero values alone, as signed_rank_test ranks them)
        ranks = stats.rankdata(np.where(nonzero, np.abs(d), -1.0), axis=1) - zeros
        weights = np.rint(2.0 * ranks).astype(np.int64)
        observed = np.where(d > 0.0, weights, 0).sum(axis=1)
        p_up = np.ones(rows)
        p_down = np.ones(rows)
        for i in range(rows):
            w = weights[i][nonzero[i]]
            if w.size == 0:
                continue
            total = int(w.sum())
            if w.size * total > 40_000_000:  # signed_rank_test approximates: let it
                test = signed_rank_test(d[i])
                p_up[i], p_down[i] = test.p_up, test.p_down
                continue
            # The null is a distribution of sums, the same whatever order the weights come
            # in: exact while its counts fit a float's 53 bits (up to 53 nonzero pairs), and
            # the checks against signed_rank_test say so for the rows sampled.
            key = np.sort(w).tobytes()
            dist = self._nulls.get(key)
            if dist is None:
                dist = self._nulls[key] = signed_rank_null(np.sort(w))
            p_up[i] = float(min(1.0, dist[observed[i]:].sum()))
            p_down[i] = float(min(1.0, dist[:observed[i] + 1].sum()))
        return np.minimum(1.0, 2.0 * np.minimum(p_up, p_down)), p_up, p_down


def rank_sum_ps(before: FloatArray, after: FloatArray,
                ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``rank_sum_test``'s p-values for many rows: scipy's Mann-Whitney U along the rows, by
    the method ``rank_sum_test`` gets from scipy's "auto" at these sizes (asymptotic)."""
    if before.shape[1] <= 8 or after.shape[1] <= 8:
        raise ValueError("rows of 8 or fewer values may be tested exactly: use rank_sum_test")
    up = stats.mannwhitneyu(after, before, alternative="greater", method="asymptotic",
                            axis=1).pvalue
    down = stats.mannwhitneyu(after, before, alternative="less", method="asymptotic",
                              axis=1).pvalue
    return np.minimum(1.0, 2.0 * np.minimum(up, down)), up, down


def row_ps(before: FloatArray, after: FloatArray, paired: bool, nulls: SignedRankNulls,
           ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The p-values (two-sided, after larger, after smaller) of every row of comparisons by
    rows by replicates, each exactly what the public test gives (checked on a sample)."""
    sims, rows, n = before.shape
    flat_before = before.reshape(sims * rows, n)
    flat_after = after.reshape(sims * rows, n)
    ps = (nulls.ps(flat_after - flat_before) if paired else
          rank_sum_ps(flat_before, flat_after))
    for i in range(0, sims * rows, CHECK_EVERY):
        test = (signed_rank_test(flat_after[i] - flat_before[i]) if paired else
                rank_sum_test(flat_before[i], flat_after[i]))
        mine = (ps[0][i], ps[1][i], ps[2][i])
        if (test.p, test.p_up, test.p_down) != mine:
            raise SystemExit(f"row {i}: the batch gave p-values {mine}, the public test "
                             f"{(test.p, test.p_up, test.p_down)}")
    p, up, down = ps
    return p.reshape(sims, rows), up.reshape(sims, rows), down.reshape(sims, rows)


# ---------------------------------------------------------------------------
# the simulation


@dataclass(frozen=True)
class Cell:
    size: float
    power: float
    relative: float  # median printed limit / the baseline's median
    limit: str  # median printed limit, in the metric's units
    no_limit: int  # power comparisons whose baseline gave no limit (counted as misses)
    cpu: float


def size(draw: Draw, correlation: float | None, n: int, sims: int, rng: np.random.Generator,
         nulls: SignedRankNulls) -> float:
    """The share of ``sims`` comparisons of ROWS unchanged conditions with any row flagged
    (paired unless ``correlation`` is None)."""
    z0 = _latents(rng, (sims, ROWS, n), correlation)
    before = draw(rng, z0)
    after = draw(rng, _latents(rng, (sims, ROWS, n), correlation, z0))
    p, _, _ = row_ps(before, after, correlation is not None, nulls)
    return float(np.mean([bool(np.any(holm(row) <= Q)) for row in p]))


def _on_grid(values: FloatArray) -> bool:
    """Whether metric_limit takes ``values`` for a metric on a grid (few values, repeated)."""
    distinct = len(np.unique(values))
    return distinct <= 20 and distinct < len(values)


def _moved_on_grid(before: FloatArray, after: FloatArray, shift: float, towards: int,
                   rng: np.random.Generator) -> FloatArray:
    """``after`` changed as a metric on a grid changes, by a mean of ``shift`` on
    ``before``'s values: each value moves floor(t) grid values ``towards`` (+1: up) and one
    more with chance t - floor(t), stopping at the grid's end (the grid: every value either
    run holds), t found so that the mean shift of ``before`` would be ``shift``."""
    grid = np.unique(np.concatenate([before, after]))
    last = len(grid) - 1

    def mean_shift(t: float) -> float:
        whole, part = math.floor(t), t - math.floor(t)
        codes = np.searchsorted(grid, before)
        low = grid[np.clip(codes + towards * whole, 0, last)] - before
        high = grid[np.clip(codes + towards * (whole + 1), 0, last)] - before
        return abs(float((1 - part) * np.mean(low) + part * np.mean(high)))

    lo, hi = 0.0, float(last)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_shift(mid) < shift else (lo, mid)
    t = hi
    codes = np.searchsorted(grid, after)
    steps = math.floor(t) + (rng.random(len(after)) < t - math.floor(t))
    moved: FloatArray = grid[np.clip(codes + towards * steps, 0, last)]
    return moved


def power(draw: Draw, better: Better, correlation: float | None, n: int, sims: int,
          rng: np.random.Generator, nulls: SignedRankNulls,
          ) -> tuple[float, float, float, int]:
    """The share of comparisons in which row 0, shifted by the limit printed for its own
    baseline, is flagged worse by Holm over the ROWS; the median printed limit (relative to
    the baseline's median, and in units); how many baselines gave no limit."""
    paired = correlation is not None
    z0 = _latents(rng, (sims, ROWS, n), correlation)
    before = draw(rng, z0)
    after = draw(rng, _latents(rng, (sims, ROWS, n), correlation, z0))
    shifted = np.zeros(sims, dtype=bool)
    printed = np.zeros(sims)
    relative = []
    for s in range(sims):
        limit = metric_limit(before[s, 0], n, paired=paired, better=better, alpha=Q / ROWS,
                             seed=int(rng.integers(2**32)))
        if limit.value is None:
            continue
        printed[s] = float(outward_units(limit.value))
        shifted[s] = True
        if limit.relative is not None:
            relative.append(abs(printed[s]) / abs(float(np.median(before[s, 0]))))
    towards = 1 if better == "lower" else -1
    for s in np.flatnonzero(shifted):
        if _on_grid(before[s, 0]):
            after[s, 0, :] = _moved_on_grid(before[s, 0], after[s, 0, :], abs(printed[s]),
                                            towards, rng)
        else:
            after[s, 0, :] += printed[s]
    p, p_up, p_down = row_ps(before, after, paired, nulls)
    worse = p_up[:, 0] <= p_down[:, 0] if better == "lower" else p_down[:, 0] <= p_up[:, 0]
    hits = [shifted[s] and worse[s] and holm(p[s])[0] <= Q for s in range(sims)]
    median = float(np.median(printed[shifted])) if shifted.any() else math.nan
    return (float(np.mean(hits)), float(np.median(relative)) if relative else math.nan,
            median, int(sims - shifted.sum()))


def cell(name: str, correlation: float | None, n: int, sims: int,
         rng: np.random.Generator) -> Cell:
    draw, better, _ = METRICS[name]
    nulls = SignedRankNulls()
    started = time.process_time()
    s = size(draw, correlation, n, sims, rng, nulls)
    p, relative, median, none = power(draw, better, correlation, n, sims, rng, nulls)
    return Cell(s, p, relative, outward_units(median) if math.isfinite(median) else "-", none,
                time.process_time() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000, help="comparisons per cell")
    parser.add_argument("--n", type=int, default=50, help="replicates per condition")
    parser.add_argument("--metric", action="append", choices=list(METRICS),
                        help="only this metric's cells (again for more; default: every one)")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    size_top = Q + 2 * math.sqrt(Q * (1 - Q) / args.sims)
    power_bottom = 0.8 - 2 * math.sqrt(0.8 * 0.2 / args.sims)
    print(f"{ROWS} conditions, {args.n} replicates each, Holm at q = {Q}; "
          f"{args.sims} comparisons per cell, seed {SEED}")
    print(f"size should read <= {size_top:.3f}; power at the printed limit >= "
          f"{power_bottom:.3f}")
    print(f"{'metric':<22} {'design':<13} {'size':>6} {'power':>6} {'limit':>12} "
          f"{'limit/median':>13} {'cpu s':>6}  within")
    failed = []
    for name in args.metric or METRICS:
        for correlation, design in DESIGNS:
            c = cell(name, correlation, args.n, args.sims, rng)
            ok = c.size <= size_top and c.power >= power_bottom
            if not ok:
                failed.append(f"{name} {design}")
            unit = METRICS[name][2]
            limit = (f"{c.limit} {unit}" if unit != "$" else
                     f"-${c.limit[1:]}" if c.limit.startswith("-") else f"${c.limit}")
            print(f"{name:<22} {design:<13} {c.size:>6.3f} {c.power:>6.3f} {limit:>12} "
                  f"{c.relative:>13.3f} {c.cpu:>6.1f}  {'yes' if ok else 'NO'}"
                  + (f" (no limit from {c.no_limit} of {args.sims} baselines: missed)"
                     if c.no_limit else ""),
                  flush=True)
    print("every cell within its bounds" if not failed else
          f"outside the bounds: {', '.join(failed)}")


if __name__ == "__main__":
    main()
