"""Every outcome up to n twins (paired) and two arms of n (unpaired): does the margin
test's bound ever contradict its decision (within the margin with a bound above it, or not
within with a bound at or below)? Issue 36's acceptance asks n <= 30: about five minutes of
CPU, so it runs here; tests/test_printed_numbers.py keeps n = 4 and the audit's case.

Usage: ``python bench/margin_bound_decision.py [--up-to 30] [--margin 0.1]``.
"""

from __future__ import annotations

import argparse
import time

from pytest_prove.stats._margin import margin_test_paired, margin_test_unpaired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--up-to", type=int, default=30)
    parser.add_argument("--margin", type=float, action="append", default=None)
    args = parser.parse_args()
    for margin in args.margin or [0.1]:
        started = time.process_time()
        outcomes, found = 0, []
        for n in range(1, args.up_to + 1):
            for x0 in range(n + 1):
                for x1 in range(n + 1):
                    test = margin_test_unpaired(x0, n, x1, n, margin)
                    outcomes += 1
                    if test.within != (test.bound <= margin):
                        found.append(("unpaired", n, x0, x1, test.p, test.bound))
            for b in range(n + 1):
                for c in range(n + 1 - b):
                    test = margin_test_paired(b, c, n, margin)
                    outcomes += 1
                    if test.within != (test.bound <= margin):
                        found.append(("paired", n, b, c, test.p, test.bound))
        print(f"margin {margin}: {outcomes:,} outcomes at n = 1..{args.up_to} (unpaired and "
              f"paired): {len(found)} whose bound contradicts the decision "
              f"({time.process_time() - started:.0f} s of CPU)")
        for row in found[:20]:
            print("  ", row)


if __name__ == "__main__":
    main()
