"""Time the design check, cold (figures printed, nothing asserted).

The pytest plugin calls ``design_check`` at collection time, once per session, so what matters
is the first call for a design: every cache of the statistics engine is emptied before each
one. Wall time and this process's CPU time are both printed (on a shared machine the first
includes waiting for a core). Against a baseline the plugin calls ``rates_design_check``
instead (each test's base rate within its 99% interval from the baseline, and the fewest
replicates at those rates and at any rate): the second table times it on baselines whose
rates are all low (uniform 0..0.1) or spread (uniform 0..1), one baseline of the design's
size drawn per line with a fixed seed. Run: python bench/design.py
"""

from __future__ import annotations

import time

import numpy as np

from pytest_prove.stats import _power, baseline_intervals, design_check, rates_design_check

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
    print(f"\n{'from rates':<11}{'design':<9}{'replicates':>11}{'m':>6}{'wall s':>9}"
          f"{'cpu s':>8}  result")
    rng = np.random.default_rng(20261205)
    for spread in ("low", "spread"):
        for paired in (False, True):
            for n in REPLICATES:
                for m in TESTS:
                    rates = rng.uniform(0.0, 0.1 if spread == "low" else 1.0, m)
                    intervals = baseline_intervals([(int(rng.binomial(n, p)), n)
                                                    for p in rates])
                    _empty_caches()
                    wall, cpu = time.perf_counter(), time.process_time()
                    found = rates_design_check(n, m, intervals, paired=paired)
                    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                    limit = "none" if found.worst_limit is None else f"{found.worst_limit:.3f}"
                    print(f"{spread:<11}{'paired' if paired else 'unpaired':<9}{n:>11,}"
                          f"{m:>6}{wall:>9.3f}{cpu:>8.3f}  worst {limit}, fewest "
                          f"{found.fewest} (any rate {found.fewest_any_rate})")


if __name__ == "__main__":
    main()
