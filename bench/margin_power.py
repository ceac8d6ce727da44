"""The margin design check against simulation (figures printed).

For each design (paired or not) and m rows, the design check gives the replicates per
condition at which, when nothing changed, every row is shown within the margin with
probability 0.8 (each row with 0.8 ** (1 / m)), and the weakest base rate. Here 2,000
comparisons of m independent rows are drawn at that base rate with nothing changed (paired:
twins independent given the rate), each row is tested exactly as the comparison tests it
(its outcome in the test's rejection region at level q), and the share of comparisons in
which every row is within the margin is printed. It should read 0.80 +- 0.04.

Run: python bench/margin_power.py [--margin D] [--sims N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytest_prove.stats._margin_design import _quick_region, margin_design_check, margin_replicates

Q = 0.05
TESTS = (1, 16)
SEED = 20261202


def simulate(paired: bool, n: int, m: int, margin: float, base: float, sims: int,
             seed: int, q: float = Q) -> float:
    """The share of ``sims`` comparisons of m rows, nothing changed at rate ``base``, in
    which every row is shown within the margin."""
    counts = _quick_region(paired, n, margin, q)
    rng = np.random.default_rng(seed)
    if paired:
        pi = base * (1.0 - base)  # a twin is before-only (or after-only) this often
        draws = rng.multinomial(n, [pi, pi, 1.0 - 2.0 * pi], size=(sims, m))
        first, second = draws[..., 0], draws[..., 1]
    else:
        first = rng.binomial(n, base, size=(sims, m))
        second = rng.binomial(n, base, size=(sims, m))
    within = second < counts[first]
    return float(within.all(axis=1).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--sims", type=int, default=2_000)
    args = parser.parse_args()
    print(f"margin {args.margin}, q = {Q}, {args.sims:,} comparisons each, nothing changed")
    print(f"{'design':<9}{'m':>4}{'replicates':>11}{'base rate':>10}{'row power':>10}"
          f"{'exact sweep':>12}{'simulated':>10}{'s':>7}")
    for paired in (False, True):
        for m in TESTS:
            start = time.perf_counter()
            n = margin_replicates(paired, m, Q, args.margin)
            assert n is not None
            check = margin_design_check(n, m, paired=paired, margin=args.margin, q=Q)
            share = simulate(paired, n, m, args.margin, check.weakest_base_rate, args.sims,
                             SEED + m + 7 * paired)
            took = time.perf_counter() - start
            print(f"{'paired' if paired else 'unpaired':<9}{m:>4}{n:>11,}"
                  f"{check.weakest_base_rate:>10.4f}{check.weakest_power:>10.4f}"
                  f"{check.weakest_power ** m:>12.4f}{share:>10.4f}{took:>7.1f}")


if __name__ == "__main__":
    main()
