"""Missing outcomes, tested as an event of their own (issue 12): the false-alarm rate when both
runs lose 10% of their outcomes at random, and the power of the ``no outcome`` row at its
printed limit, through the read side's own pairing (``review.pairing.prepare``) and the
engine (``stats.compare``), with fixed seeds.

    python bench/missing.py                 # 2,000 comparisons each, paired and unpaired
    python bench/missing.py --sims 300      # what CI runs (tests/test_missing_simulation.py)

Prints each share with its standard error and the target it must meet.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from pytest_prove.declare.spec import Declaration  # noqa: E402
from pytest_prove.review.pairing import NO_OUTCOME, prepare  # noqa: E402
from pytest_prove.stats import (  # noqa: E402
    RowInput,
    compare,
    fisher_exact_p,
    holm,
    mcnemar_midp,
    outward,
)
from pytest_prove.store import Run  # noqa: E402

N = 190  # replicates a condition
CONDITIONS = 16
MISSING = 0.10
FAIL = 0.20
Q = 0.05
CHECKED = 5  # comparisons also passed through compare(), to tie the rule to the engine
ROLLOUT = "test_agent.py::test_agent"
DECLARATION = Declaration(failures=("unresolved",), successes=("resolved",),
                          outcomes=("resolved", "unresolved", "escalated")).to_json()


def _run(name: str, salt: str, missing: np.ndarray, fail: np.ndarray,
         escalated: np.ndarray) -> Run:
    """A run held in memory: ``missing``, ``fail`` and ``escalated`` are (conditions, N)."""
    episodes: list[dict[str, Any]] = []
    for c in range(missing.shape[0]):
        for r in range(missing.shape[1]):
            record: dict[str, Any] = {"rollout": ROLLOUT, "condition_key": f"c{c:02d}",
                                      "condition": {"c": c}, "replicate": r}
            if missing[c, r]:
                record["outcome"] = None
                record["error"] = {"kind": "no_outcome", "type": "NoOutcome", "message": ""}
            else:
                record["outcome"] = ("unresolved" if fail[c, r]
                                     else "escalated" if escalated[c, r] else "resolved")
                record["error"] = None
            episodes.append(record)
    manifest = {"name": name, "salt": salt, "status": "complete",
                "rollouts": {ROLLOUT: {"declaration": DECLARATION, "label": "test_agent"}}}
    return Run(run_id=name, name=name, manifest=manifest, episodes=tuple(episodes),
               path=Path(name))


def _arm(rng: np.random.Generator, missing: np.ndarray) -> tuple[np.ndarray, ...]:
    shape = (CONDITIONS, N)
    return (rng.random(shape) < missing[:, None], rng.random(shape) < FAIL,
            rng.random(shape) < 0.05)


def _p_values(rows: list[RowInput]) -> np.ndarray:
    """Each row's own p-value, as the engine computes it."""
    return np.array([mcnemar_midp(r.pairs.before_only, r.pairs.after_only) if r.pairs
                     else fisher_exact_p(r.x_before, r.n_before, r.x_after, r.n_after)
                     for r in rows])


def _moved(rows: list[RowInput]) -> bool:
    """Whether the verdict is worse or safer: some row's Holm-adjusted p-value is at most q
    and its rate changed (the engine's rule; the first comparisons check it against
    ``compare``)."""
    adjusted = holm(_p_values(rows))
    return any(p <= Q and r.x_after / r.n_after != r.x_before / r.n_before
               for p, r in zip(adjusted, rows, strict=True))


def false_alarms(sims: int, paired: bool, seed: int = 20261202) -> tuple[float, int]:
    """Share of comparisons of two identical agents, each losing 10% of outcomes at random,
    whose verdict is worse or safer; and m."""
    rng = np.random.default_rng(seed)
    flagged = 0
    m = 0
    rate = np.full(CONDITIONS, MISSING)
    for i in range(sims):
        before = _run("before", "s" if paired else "a", *_arm(rng, rate))
        after = _run("after", "s" if paired else "b", *_arm(rng, rate))
        rows = list(prepare(before, after).rows)
        m = len(rows)
        moved = _moved(rows)
        if i < CHECKED:
            word = compare(rows, q=Q).verdict.word
            assert moved == (word in ("worse", "safer")), (i, word)
        flagged += moved
    return flagged / sims, m


def power_at_limit(sims: int, paired: bool, seed: int = 1202) -> tuple[float, str]:
    """Share of comparisons in which condition 0's ``no outcome`` row, its missing share
    raised from 0.10 by its printed rise limit, is flagged by its own test at level q/m (the
    limit's promise: 4 times in 5); and the printed limit."""
    rng = np.random.default_rng(seed)
    # The limit the engine prints for that row when its base rate is 19/190 = 0.10.
    base = np.zeros((CONDITIONS, N), dtype=bool)
    base[:, : round(MISSING * N)] = True
    salts = ("s", "s") if paired else ("a", "b")
    probe = compare(prepare(_run("b", salts[0], base, ~base, base & False),
                            _run("a", salts[1], base, ~base, base & False)).rows, q=Q)
    row = next(r for r in probe.rows if r.event == NO_OUTCOME and r.condition == "c=0")
    shown = str(row.rise)
    alpha = Q / probe.m
    moved = np.full(CONDITIONS, MISSING)
    moved[0] = MISSING + float(shown)
    hits = 0
    for _ in range(sims):
        before = _run("before", salts[0], *_arm(rng, np.full(CONDITIONS, MISSING)))
        after = _run("after", salts[1], *_arm(rng, moved))
        rows = prepare(before, after).rows
        found = next(r for r in rows if r.event == NO_OUTCOME and r.condition == "c=0")
        p = _p_values([found])[0]
        hits += p <= alpha and found.x_after / found.n_after > found.x_before / found.n_before
    return hits / sims, shown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=2000)
    args = parser.parse_args(argv)
    se = math.sqrt(0.05 * 0.95 / args.sims)
    ok = True
    for paired in (True, False):
        design = "paired" if paired else "unpaired"
        start = time.process_time()
        share, m = false_alarms(args.sims, paired)
        good = share <= 0.05 + 2 * se
        ok &= good
        print(f"{design:8s} false alarms  {share:.4f} of {args.sims} (m = {m}; target <= "
              f"{0.05 + 2 * se:.4f}) {'ok' if good else 'MISSED'}  "
              f"[{time.process_time() - start:.0f} s CPU]")
        start = time.process_time()
        power, shown = power_at_limit(args.sims, paired)
        pse = math.sqrt(0.8 * 0.2 / args.sims)
        good = abs(power - 0.8) <= max(0.04, 2 * pse) and power >= 0.8 - 2 * pse
        ok &= good
        print(f"{design:8s} power at the printed limit {shown} (from {MISSING:.2f}): "
              f"{power:.4f} (target 0.80 +- 0.04) {'ok' if good else 'MISSED'}  "
              f"[{time.process_time() - start:.0f} s CPU]")
    print(f"outward() of the limits: {outward(0.0594)} for 0.0594")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
