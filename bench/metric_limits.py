"""CPU seconds of one metric row's detection limit (``metric_limit``), as a review computes it
for every metric row: paired and unpaired, at n = 50, 200 and 1000 baseline values (and as
many after), for a long-tailed latency (lognormal) and a tied judge score (1 to 5).

    python bench/metric_limits.py [--sizes 50,200,1000] [--repeat 2] [--kinds latency,judge]

Printed per cell: the CPU seconds of this process per row (the best of ``--repeat``, so a
loaded machine's noise counts less), the limit found, and what a gate of 16 such rows costs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_prove.stats import metric_limit


def baseline(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "latency":
        return rng.lognormal(0.0, 0.5, n)
    return rng.choice([1.0, 2.0, 3.0, 3.0, 4.0, 4.0, 5.0], n)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,1000")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--kinds", default="latency,judge")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'metric':8} {'design':9} {'n':>5} {'cpu s/row':>10} {'16 rows':>8}  limit")
    for kind in args.kinds.split(","):
        better = "lower" if kind == "latency" else "higher"
        for paired in (True, False):
            for n in sizes:
                x = baseline(kind, n, 7 + n)
                best = float("inf")
                for _ in range(args.repeat):
                    start = time.process_time()
                    found = metric_limit(x, n, paired=paired, better=better, alpha=0.05 / 16)
                    best = min(best, time.process_time() - start)
                print(f"{kind:8} {'paired' if paired else 'unpaired':9} {n:>5} {best:>10.3f} "
                      f"{16 * best:>8.2f}  {found.value!r}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
