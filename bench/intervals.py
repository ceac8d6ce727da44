"""The comparison's simultaneous intervals: what they cost a report, how wide they are, and
how often they cover, against the score intervals they replaced (figures printed).

* Time: ``_intervals_for`` (the exact intervals) and ``interval_bounds`` (Newcombe's and
  Tango's, still used by the sequential futility rule) on a report of 64 rows, paired and
  unpaired, best of several repetitions; and ``compare()`` on the same 64 rows.
* Width: the half width of each at 1 - q/m for rows of n episodes (twins) at base rates 0.05
  and 0.40, nothing changed (paired: twins independent given the rate, the expected
  discordant counts).
* Coverage: the least coverage over a grid of true rates, every outcome enumerated, of a
  row at 1 - q/m, and what that gives m rows together (at least 1 - m (1 - coverage)).

Run: python bench/intervals.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from pytest_prove.stats import compare
from pytest_prove.stats._compare import _intervals_for, interval_bounds
from pytest_prove.stats._results import Pairs, RowInput

Q = 0.05


def _rows(m: int, n: int, paired: bool, seed: int = 1) -> list[RowInput]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(m):
        p = rng.uniform(0.02, 0.6)
        before = rng.random(n) < p
        after = rng.random(n) < p
        pairs = (Pairs(n, int((before & after).sum()), int((before & ~after).sum()),
                       int((~before & after).sum())) if paired else None)
        rows.append(RowInput(f"c{i}", "unresolved", "rise", int(before.sum()), n,
                             int(after.sum()), n, pairs=pairs))
    return rows


def _best(call: object, repeat: int) -> float:
    assert callable(call)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def timing(repeat: int) -> None:
    print("time of a report's intervals, 64 rows of 190 (best of", repeat, "runs)")
    level = 1.0 - Q / 64
    for paired in (False, True):
        rows = _rows(64, 190, paired)
        exact = _best(lambda rows=rows: _intervals_for(rows, level), repeat)
        score = _best(lambda rows=rows: interval_bounds(rows, level), repeat)
        whole = _best(lambda rows=rows: compare(rows), max(1, repeat // 5))
        kind = "paired  " if paired else "unpaired"
        print(f"  {kind} exact {1e3 * exact:7.2f} ms   score {1e3 * score:7.2f} ms   "
              f"compare() of the 64 rows {1e3 * whole:8.1f} ms")


def widths() -> None:
    print("half width at 1 - q/m, nothing changed (exact / score)")
    for m in (16, 64):
        level = 1.0 - Q / m
        for n in (50, 190, 500):
            cells = []
            for rate in (0.05, 0.40):
                x = round(rate * n)
                discordant = round(rate * (1.0 - rate) * n)
                unpaired = [RowInput("c", "e", "rise", x, n, x, n)]
                paired = [RowInput("c", "e", "rise", x, n, x, n,
                                   pairs=Pairs(n, x - discordant, discordant, discordant))]
                for rows in (unpaired, paired):
                    exact = _intervals_for(rows, level)[0]
                    low, high = interval_bounds(rows, level)
                    cells.append(f"{(exact.high - exact.low) / 2:.3f}/"
                                 f"{(float(high[0]) - float(low[0])) / 2:.3f}")
            print(f"  m {m:2d} n {n:3d}: unpaired 0.05 {cells[0]}  paired 0.05 {cells[1]}  "
                  f"unpaired 0.40 {cells[2]}  paired 0.40 {cells[3]}")


def coverage(sizes: tuple[int, ...]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package
    from tests.test_printed_numbers import _paired_coverage, _unpaired_coverage

    print("least coverage over the grid of true rates (every outcome enumerated)")
    for m in (16, 64):
        level = 1.0 - Q / m
        for n in sizes:
            for name, (found,) in (("unpaired", _unpaired_coverage(n, (level,))),
                                   ("paired", _paired_coverage(n, (level,)))):
                together = max(0.0, 1.0 - m * (1.0 - found))
                print(f"  m {m:2d} n {n:3d} {name:8s}: a row {found:.5f} (asked {level:.5f}), "
                      f"{m} rows together at least {together:.4f} (asked {1 - Q:.2f})  "
                      f"{'ok' if found >= level - 1e-9 else 'FAILS'}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    timing(5 if quick else 20)
    widths()
    coverage((10, 50) if quick else (10, 50, 190, 500))


if __name__ == "__main__":
    main()
