"""Time the statistics engine on a large comparison (figures printed, nothing asserted).

Two runs of 1,000 conditions x 4 events x 200 replicates, unpaired and then paired, limits
included. "Cold" empties every cache of the engine first (limits, regions, power evaluators,
Fisher margins, mid-p rows, the log-factorial table); "warm" repeats the same comparison.
Wall time and this process's CPU time are both printed (on a shared machine the first includes
waiting for a core). Run: python bench/stats.py
"""

from __future__ import annotations

import time

import numpy as np

from pytest_prove.stats import Pairs, RowInput, _exact, _fragility, _power, compare

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


def _empty_caches() -> None:
    """Every cache of the engine emptied: limits, regions, evaluators, margins, mid-p rows,
    the log-factorial table and the fragility search's p-values after flips."""
    _power._LIMIT_CACHE.clear()
    for cached in (_power._fisher_region, _power._mcnemar_region, _power._evaluator,
                   _power._log_choose, _exact._margin, _exact._midp_row,
                   _fragility._best_p_after_cached):
        cached.cache_clear()
    _power._LOG_FACTORIALS[0] = np.zeros(1)


def main() -> None:
    for paired in (False, True):
        data = rows(paired)
        _empty_caches()
        start, cpu = time.perf_counter(), time.process_time()
        result = compare(data)
        cold, cold_cpu = time.perf_counter() - start, time.process_time() - cpu
        start = time.perf_counter()
        compare(data)
        warm = time.perf_counter() - start
        label = "paired  " if paired else "unpaired"
        print(f"{label} {len(data)} rows x {REPLICATES} replicates: cold {cold:.2f} s "
              f"(cpu {cold_cpu:.2f} s), warm {warm:.2f} s; verdict {result.verdict.word!r}, "
              f"fragility {result.verdict.fragility.flips}")


if __name__ == "__main__":
    main()
