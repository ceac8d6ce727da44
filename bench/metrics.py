"""Metric rows' false-alarm rate and power, by simulation (issue 30's calibration).

Three metrics an agent reports, each paired (twins on one seed share a latent "how hard was
this task", so they agree more than strangers) and unpaired:

- latency: lognormal, a heavy right tail (lower is better);
- judge: a score on 1-5 with heavy ties (higher is better);
- cost: zero-inflated, 40% of episodes free, the rest gamma (lower is better).

Size: ``--sims`` comparisons of 16 conditions with nothing changed, each row tested as the
comparison tests it (signed-rank paired, rank-sum unpaired), Holm over the 16 at q = 0.05;
the share of comparisons with any row flagged (worse or safer) should be <= q + 2 s.e.

Power: ``--sims`` comparisons, each with a baseline of its own, whose row 0 gets the printed
detection limit (at q/16, from that baseline's own values) added to its after values in the
worse direction; the share in which Holm flags row 0 worse should be >= 0.80 - 2 s.e. (paired
rows, whose limits assume independent twins, read above: their twins agree).

Run: python bench/metrics.py [--sims 2000] [--n 50]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from scipy import special

from pytest_prove.stats import holm, metric_limit, outward_units, rank_sum_test, signed_rank_test

Q = 0.05
ROWS = 16
SEED = 20261204
CORRELATION = 0.7  # between twins' latents, paired

Draw = Callable[[np.random.Generator, np.ndarray], np.ndarray]


def _latency(rng: np.random.Generator, latent: np.ndarray) -> np.ndarray:
    return np.round(np.exp(latent + 0.5 * rng.normal(size=latent.shape)), 3)


_JUDGE_EDGES = np.cumsum([0.05, 0.10, 0.20, 0.35])


def _judge(rng: np.random.Generator, latent: np.ndarray) -> np.ndarray:
    u = special.ndtr((latent + 0.6 * rng.normal(size=latent.shape)) / math.sqrt(1.36))
    return 1.0 + np.searchsorted(_JUDGE_EDGES, u).astype(np.float64)


def _cost(rng: np.random.Generator, latent: np.ndarray) -> np.ndarray:
    free = special.ndtr(latent + 0.5 * rng.normal(size=latent.shape)) < 0.4
    amount = rng.gamma(2.0, 0.01, size=latent.shape) * np.exp(0.3 * latent)
    return np.where(free, 0.0, np.round(amount, 5))


METRICS: dict[str, tuple[Draw, str]] = {
    "latency (lognormal)": (_latency, "lower"),
    "judge (1-5, ties)": (_judge, "higher"),
    "cost (zero-inflated)": (_cost, "lower"),
}


def _latents(rng: np.random.Generator, shape: tuple[int, ...], paired: bool,
             before: np.ndarray | None = None) -> np.ndarray:
    if before is None or not paired:
        return rng.normal(size=shape)
    return CORRELATION * before + math.sqrt(1 - CORRELATION ** 2) * rng.normal(size=shape)


def _row_ps(before: np.ndarray, after: np.ndarray, paired: bool) -> tuple[np.ndarray, ...]:
    tests = [signed_rank_test(a - b) if paired else rank_sum_test(b, a)
             for b, a in zip(before, after, strict=True)]
    return (np.array([t.p for t in tests]), np.array([t.p_up for t in tests]),
            np.array([t.p_down for t in tests]))


def size(draw: Draw, paired: bool, n: int, sims: int, rng: np.random.Generator) -> float:
    flagged = 0
    for _ in range(sims):
        z0 = _latents(rng, (ROWS, n), paired)
        before = draw(rng, z0)
        after = draw(rng, _latents(rng, (ROWS, n), paired, z0))
        p, _, _ = _row_ps(before, after, paired)
        flagged += bool(np.any(holm(p) <= Q))
    return flagged / sims


def power(draw: Draw, better: str, paired: bool, n: int, sims: int,
          rng: np.random.Generator) -> tuple[float, float]:
    """The share of comparisons in which row 0, shifted by the limit printed for its baseline,
    is flagged worse; and the median printed limit relative to the baseline's median. Every
    comparison draws its own baseline (the limit is a power over the runs a design gives)."""
    hits = 0
    relative = []
    for _ in range(sims):
        z0 = _latents(rng, (ROWS, n), paired)
        before = draw(rng, z0)
        limit = metric_limit(before[0], n, paired=paired, better=better,  # type: ignore[arg-type]
                             alpha=Q / ROWS, seed=int(rng.integers(2**32)))
        if limit.value is None:
            continue
        printed = float(outward_units(limit.value))
        if limit.relative is not None:
            relative.append(limit.relative)
        after = draw(rng, _latents(rng, (ROWS, n), paired, z0))
        after[0] += printed
        p, p_up, p_down = _row_ps(before, after, paired)
        worse = p_up[0] <= p_down[0] if better == "lower" else p_down[0] <= p_up[0]
        hits += bool(holm(p)[0] <= Q and worse)
    return hits / sims, float(np.median(relative)) if relative else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument("--n", type=int, default=50, help="replicates per condition")
    args = parser.parse_args()
    rng = np.random.default_rng(SEED)
    se_size = math.sqrt(Q * (1 - Q) / args.sims)
    se_power = math.sqrt(0.8 * 0.2 / args.sims)
    print(f"{ROWS} conditions, {args.n} replicates each, Holm at q = {Q}; "
          f"{args.sims} comparisons per cell")
    print(f"size should read <= {Q + 2 * se_size:.3f}; power >= {0.8 - 2 * se_power:.3f}")
    print(f"{'metric':<22} {'design':<9} {'size':>6} {'power':>6} {'limit/median':>13} "
          f"{'cpu s':>6}")
    for name, (draw, better) in METRICS.items():
        for paired in (True, False):
            started = time.process_time()
            s = size(draw, paired, args.n, args.sims, rng)
            p, rel = power(draw, better, paired, args.n, args.sims, rng)
            print(f"{name:<22} {'paired' if paired else 'unpaired':<9} {s:>6.3f} {p:>6.3f} "
                  f"{rel:>13.3f} {time.process_time() - started:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
