"""Time the statistics engine on a large comparison (figures printed, nothing asserted).

Two runs of 1,000 conditions x 4 events x 200 replicates, unpaired and then paired, limits
included. Run: python bench/stats.py
"""

from __future__ import annotations

import time

import numpy as np

from pytest_prove.stats import Pairs, RowInput, compare
from pytest_prove.stats._power import _LIMIT_CACHE

CONDITIONS = 1_000
EVENTS = ("unresolved", "timeout", "error", "resolved")
REPLICATES = 200


def rows(paired: bool, seed: int = 0) -> list[RowInput]:
    rng = np.random.default_rng(seed)
    out = []
    for c in range(CONDITIONS):
        for event in EVENTS:
            p0 = rng.uniform(0.0, 0.5) if event != "resolved" else rng.uniform(0.5, 1.0)
            worse_when = "fall" if event == "resolved" else "rise"
            before = rng.random(REPLICATES) < p0
            after = rng.random(REPLICATES) < p0
            pairs = None
            if paired:
                pairs = Pairs(REPLICATES, int((before & after).sum()),
                              int((before & ~after).sum()), int((~before & after).sum()))
            out.append(RowInput(f"case={c}", event, worse_when, int(before.sum()), REPLICATES,
                                int(after.sum()), REPLICATES, pairs))
    return out


def main() -> None:
    for paired in (False, True):
        data = rows(paired)
        _LIMIT_CACHE.clear()
        start = time.perf_counter()
        result = compare(data)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        compare(data)
        warm = time.perf_counter() - start
        label = "paired  " if paired else "unpaired"
        print(f"{label} {len(data)} rows x {REPLICATES} replicates: {cold:.2f} s "
              f"(limits cached: {warm:.2f} s); verdict {result.verdict.word!r}, "
              f"fragility {result.verdict.fragility.flips}")


if __name__ == "__main__":
    main()
