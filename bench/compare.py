"""Time compare() and its fragility search when rows count (figures printed; identity checked).

Two runs of 1,000 conditions x 4 events x 200 replicates, unpaired and paired, in which 0, 50
or 500 rows are given a worsening of 0.35 (so that about that many rows count and the verdict
is "worse"), and one where 500 rows get safer instead ("safer": the search also tries to make
one row count as worse). For each, the CPU seconds (time.process_time) of compare() with
its caches emptied ("cold") and again ("warm"), then of compare() with the fragility search
as it was before it was made fast (tests/fragility_reference.py, "before"). The two
comparisons must agree to the last field (verdicts, p-values, limits, fragility); the script
exits 1 if they do not. Then it checks the fast search against the reference on many small
random comparisons. Run: python bench/compare.py [--no-before]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import _empty_caches
from pytest_prove.stats import Pairs, RowInput, _compare, compare
from pytest_prove.stats._fragility import fragility as fast_fragility
from tests.fragility_reference import fragility as reference_fragility
from tests.test_stats_fragility_speed import random_states, same

CONDITIONS = 1_000
EVENTS = ("unresolved", "timeout", "error", "resolved")
REPLICATES = 200
SHIFT = 0.35


def rows(paired: bool, moved: int, toward: str = "worse", seed: int = 0) -> list[RowInput]:
    """The bench's two runs; ``moved`` rows (spread over the table) shifted by SHIFT."""
    rng = np.random.default_rng(seed)
    total = CONDITIONS * len(EVENTS)
    chosen = set(rng.choice(total, size=moved, replace=False).tolist()) if moved else set()
    out = []
    for c in range(CONDITIONS):
        for e, event in enumerate(EVENTS):
            p0 = rng.uniform(0.0, 0.5) if event != "resolved" else rng.uniform(0.5, 1.0)
            worse_when = "fall" if event == "resolved" else "rise"
            p1 = p0
            if c * len(EVENTS) + e in chosen:
                up = (worse_when == "rise") == (toward == "worse")
                p1 = min(1.0, p0 + SHIFT) if up else max(0.0, p0 - SHIFT)
            u = rng.random(REPLICATES)
            before = u < p0
            # Twins share their draw, so a paired row's runs agree where the rates allow.
            after = (u < p1) if paired else (rng.random(REPLICATES) < p1)
            pairs = None
            if paired:
                pairs = Pairs(REPLICATES, int((before & after).sum()),
                              int((before & ~after).sum()), int((~before & after).sum()))
            out.append(RowInput(f"case={c}", event, worse_when, int(before.sum()), REPLICATES,
                                int(after.sum()), REPLICATES, pairs))
    return out


def _timed(data: list[RowInput]) -> tuple[float, Any]:
    cpu = time.process_time()
    result = compare(data)
    return time.process_time() - cpu, result


def main() -> int:
    before = "--no-before" not in sys.argv
    failed = False
    cases = [(moved, "worse") for moved in (0, 50, 500)] + [(500, "safer")]
    for paired in (False, True):
        for moved, toward in cases:
            data = rows(paired, moved, toward)
            _empty_caches()
            cold, result = _timed(data)
            warm, _ = _timed(data)
            verdict = result.verdict
            line = (f"{'paired  ' if paired else 'unpaired'} {moved:3d} rows {toward:5s}: "
                    f"{sum(r.counted for r in result.rows):3d} count, {verdict.word!r}, "
                    f"fragility {verdict.fragility.flips}; cpu cold {cold:.2f} s, "
                    f"warm {warm:.2f} s")
            if before:
                _compare.fragility = reference_fragility  # type: ignore[assignment]
                try:
                    old_cpu, old = _timed(data)
                finally:
                    _compare.fragility = fast_fragility
                agree = old.to_dict() == result.to_dict()
                failed |= not agree
                line += f"; before {old_cpu:.2f} s; {'identical' if agree else 'DIFFERENT'}"
            print(line, flush=True)
    rng = np.random.default_rng(2026)
    checked = 0
    cpu = time.process_time()
    while time.process_time() - cpu < 60.0:
        states, word, q = random_states(rng)
        if not same(fast_fragility(states, word, q), reference_fragility(states, word, q)):
            print(f"DIFFERENT on random comparison {checked}: word {word!r}, q {q}, "
                  f"states {states!r}")
            failed = True
            break
        checked += 1
    print(f"random comparisons: {checked} checked against the reference, "
          f"{'a difference found' if failed else 'all identical'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
