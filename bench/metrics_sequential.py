"""Metric rows of a sequential run: their false-alarm rate when the looks stop on outcomes.

Under --prove-sequential the looks stop each condition on its outcome rows; its metric rows
are tested once, at the end, on the twins the looks ran (docs/metrics.md, "In a sequential
run"). Nothing about the metric decides when a condition stops, so a metric independent of
the outcome keeps its level exactly; this script measures what a metric tied to the outcome
does. One condition of at most N twins, nothing changed: each twin pair shares a latent
"how hard was this task" (logit slope 1), so twins agree; the outcome fails at rate p; the
metric is either tied to it (0.3 for a failure, 0.8 else, plus noise: a judge that scores
failures low) or independent of it (a score drifting with the task's difficulty). The looks
are taken with ``sequential_design`` and ``decide`` as a session takes them; at the look
that stops the condition (or the last) the metric is tested by ``metric_test`` (paired
signed-rank) at 0.05. The share flagged must stay at most 0.05 + 2 s.e.

Only the public API (``pytest_prove.stats``) is used.

Run: nice -n 19 python bench/metrics_sequential.py [--sims 4000] [--n 220]
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_prove.stats import (
    Pairs,
    RowInput,
    SequentialRow,
    decide,
    metric_test,
    sequential_design,
)


def _rate(p: float, tied: bool, n: int, sims: int, seed: int) -> tuple[float, float]:
    design = sequential_design(n, 1, paired=True, q=0.05, max_mde=0.2)
    rng = np.random.default_rng(seed)
    logit = np.log(p / (1 - p))
    flagged, ran = 0, 0
    for _ in range(sims):
        hard = rng.normal(0, 1, n)
        fail = [rng.random(n) < 1 / (1 + np.exp(-(logit + hard))) for _ in range(2)]
        if tied:
            metric = [np.where(f, 0.3, 0.8) + rng.normal(0, 0.1, n) for f in fail]
        else:
            metric = [0.7 - 0.05 * hard + rng.normal(0, 0.1, n) for _ in range(2)]
        looks: list[RowInput] = []
        stop = design.looks[-1]
        for size in design.looks:
            b, a = fail[0][:size], fail[1][:size]
            both, b_only, a_only = (int(np.sum(b & a)), int(np.sum(b & ~a)),
                                    int(np.sum(~b & a)))
            looks.append(RowInput(condition="c", event="failed", worse_when="rise",
                                  x_before=both + b_only, n_before=size,
                                  x_after=both + a_only, n_after=size,
                                  pairs=Pairs(n=size, both=both, before_only=b_only,
                                              after_only=a_only)))
            _, conditions = decide(design, [SequentialRow("c", "failed", "rise",
                                                          tuple(looks))])
            if conditions[0].state != "open":
                stop = size
                break
        ran += stop
        flagged += metric_test(metric[0][:stop], metric[1][:stop], paired=True).test.p <= 0.05
    return flagged / sims, ran / sims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--n", type=int, default=220, help="the most twins a condition runs")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    bound = 0.05 + 2 * (0.05 * 0.95 / args.sims) ** 0.5
    print(f"one condition of at most {args.n} twins, nothing changed, {args.sims} runs each; "
          f"size should read <= {bound:.4f}")
    print(f"{'failure rate':>12}  {'metric':<22}  {'size':>6}  {'episodes run':>12}  within")
    ok = True
    for p in (0.1, 0.3):
        for tied in (True, False):
            size, ran = _rate(p, tied, args.n, args.sims, args.seed)
            within = size <= bound
            ok = ok and within
            print(f"{p:>12.2f}  {'tied to the outcome' if tied else 'independent of it':<22}  "
                  f"{size:>6.4f}  {ran:>12.0f}  {'yes' if within else 'NO'}")
    print("every cell within its bound" if ok else "a cell is out of its bound")


if __name__ == "__main__":
    main()
