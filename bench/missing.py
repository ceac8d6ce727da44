"""Missing outcomes, tested as an event of their own (issue 12): the false-alarm rate when both
runs lose 10% of their outcomes at random, and the power of the ``no outcome`` row at its
printed limit, through the read side's own pairing (``review.pairing.prepare``) and the
engine (``stats.compare``), with fixed seeds.

    python bench/missing.py                 # 2,000 comparisons each, paired and unpaired
    python bench/missing.py --sims 200      # what CI runs (tests/test_missing_simulation.py)

Prints each share with its standard error and the target it must meet.  Each comparison is
counted from arrays of outcomes; the first few also go through ``prepare`` and ``compare``,
which must give the same rows and verdict (8 times less CPU than building every run's
records, for the same shares).
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
    Pairs,
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


CODES = {"resolved": 0, "unresolved": 1, "escalated": 2}


def _outcomes(missing: np.ndarray, fail: np.ndarray, escalated: np.ndarray) -> np.ndarray:
    """Each episode's outcome as a code of :data:`CODES` (-1: no outcome), as ``_run``
    records it."""
    return np.where(missing, -1, np.where(fail, CODES["unresolved"],
                                          np.where(escalated, CODES["escalated"],
                                                   CODES["resolved"])))


def _rows(before: np.ndarray, after: np.ndarray, paired: bool,
          events: tuple[str, ...]) -> list[RowInput]:
    """The rows ``prepare`` makes of two runs of ``_run``, from their outcome codes alone
    (conditions by replicates): per condition each event in ``events``, counted among the
    episodes with an outcome (paired: twins that both have one), and ``no outcome`` among
    every episode.  The first comparisons check it against ``prepare``."""
    rows = []
    for event in events:
        if event == NO_OUTCOME:
            fb, fa = before < 0, after < 0
            vb = va = np.ones(before.shape, dtype=bool)
        else:
            fb, fa = before == CODES[event], after == CODES[event]
            vb, va = before >= 0, after >= 0
        if paired:
            twins = vb & va
            counts = [((fb & fa & twins).sum(1)), ((fb & ~fa & twins).sum(1)),
                      ((~fb & fa & twins).sum(1)), twins.sum(1)]
            for c, (both, b_only, a_only, n) in enumerate(zip(*counts, strict=True)):
                rows.append(RowInput(
                    condition=f"c={c}", event=event,
                    worse_when="fall" if event == "resolved" else "rise",
                    x_before=int(both + b_only), n_before=int(n),
                    x_after=int(both + a_only), n_after=int(n),
                    pairs=Pairs(n=int(n), both=int(both), before_only=int(b_only),
                                after_only=int(a_only))))
        else:
            counts = [(fb & vb).sum(1), vb.sum(1), (fa & va).sum(1), va.sum(1)]
            for c, (xb, nb, xa, na) in enumerate(zip(*counts, strict=True)):
                rows.append(RowInput(
                    condition=f"c={c}", event=event,
                    worse_when="fall" if event == "resolved" else "rise",
                    x_before=int(xb), n_before=int(nb), x_after=int(xa), n_after=int(na)))
    return rows


def _same(rows: list[RowInput], prepared: tuple[RowInput, ...]) -> bool:
    """Whether ``rows`` are the rows ``prepare`` made, in any order."""
    def key(row: RowInput) -> tuple[Any, ...]:
        pairs = row.pairs
        return (row.condition, row.event, row.worse_when, row.x_before, row.n_before,
                row.x_after, row.n_after,
                pairs and (pairs.n, pairs.both, pairs.before_only, pairs.after_only))
    return sorted(map(key, rows)) == sorted(map(key, prepared))


def false_alarms(sims: int, paired: bool, seed: int = 20261202) -> tuple[float, int]:
    """Share of comparisons of two identical agents, each losing 10% of outcomes at random,
    whose verdict is worse or safer; and m.  Counted from arrays of outcomes; the first
    comparisons also go through ``prepare`` (the same rows) and ``compare`` (the same
    verdict)."""
    rng = np.random.default_rng(seed)
    flagged = 0
    m = 0
    rate = np.full(CONDITIONS, MISSING)
    events: tuple[str, ...] = ()
    for i in range(sims):
        arms = _arm(rng, rate), _arm(rng, rate)
        if i < CHECKED:
            before = _run("before", "s" if paired else "a", *arms[0])
            after = _run("after", "s" if paired else "b", *arms[1])
            prepared = prepare(before, after).rows
            events = tuple(dict.fromkeys(r.event for r in prepared))
        rows = _rows(_outcomes(*arms[0]), _outcomes(*arms[1]), paired, events)
        m = len(rows)
        moved = _moved(rows)
        if i < CHECKED:
            assert _same(rows, prepared), i
            word = compare(rows, q=Q).verdict.word
            assert moved == (word in ("worse", "safer")), (i, word)
        flagged += moved
    return flagged / sims, m


def power_at_limit(sims: int, paired: bool, seed: int = 1202) -> tuple[float, str]:
    """Share of comparisons in which condition 0's ``no outcome`` row, its missing share
    raised from 0.10 by its printed rise limit, is flagged by its own test at level q/m (the
    limit's promise: 4 times in 5); and the printed limit.  Counted from arrays of
    outcomes, the first comparisons checked against ``prepare``."""
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
    for i in range(sims):
        arms = _arm(rng, np.full(CONDITIONS, MISSING)), _arm(rng, moved)
        found = _rows(_outcomes(*arms[0])[:1], _outcomes(*arms[1])[:1], paired,
                      (NO_OUTCOME,))[0]
        if i < CHECKED:
            rows = prepare(_run("before", salts[0], *arms[0]),
                           _run("after", salts[1], *arms[1])).rows
            assert _same([found], tuple(r for r in rows if r.event == NO_OUTCOME
                                        and r.condition == "c=0")), i
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
