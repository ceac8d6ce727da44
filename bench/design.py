"""Time the design check, cold (figures printed, nothing asserted).

The pytest plugin calls ``design_check`` at collection time, once per session, so what matters
is the first call for a design: every cache of the statistics engine is emptied before each
one. Wall time and this process's CPU time are both printed (on a shared machine the first
includes waiting for a core). Run: python bench/design.py
"""

from __future__ import annotations

import time

import numpy as np

from pytest_prove.stats import _power, design_check

REPLICATES = (50, 190, 1_000, 5_000)
TESTS = (2, 16, 1_000)


def _empty_caches() -> None:
    _power._LIMIT_CACHE.clear()
    _power._fisher_region.cache_clear()
    _power._mcnemar_region.cache_clear()
    _power._evaluator.cache_clear()
    _power._LOG_FACTORIALS[0] = np.zeros(1)


def main() -> None:
    print(f"{'design':<9}{'replicates':>11}{'m':>6}{'wall s':>9}{'cpu s':>8}  result")
    for paired in (False, True):
        for n in REPLICATES:
            for m in TESTS:
                _empty_caches()
                wall, cpu = time.perf_counter(), time.process_time()
                check = design_check(n, m, paired=paired)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                limit = "none" if check.worst_limit is None else f"{check.worst_limit:.3f}"
                verdict = "ok" if check.ok else f"needs {check.replicates_needed}"
                print(f"{'paired' if paired else 'unpaired':<9}{n:>11,}{m:>6}{wall:>9.3f}"
                      f"{cpu:>8.3f}  worst {limit} at {check.worst_base_rate:.3f}, {verdict}")


if __name__ == "__main__":
    main()
