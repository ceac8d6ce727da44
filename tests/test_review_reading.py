"""A review reads each run's episodes once (review/reading.py): the store's StoredEpisode objects
by their attributes, any other mapping by its keys.  Both must give the review that the
same episodes as plain dicts give, and the counts the episode-by-episode helpers give."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_prove.declare.seeds import derive_seed
from pytest_prove.declare.spec import condition_key
from pytest_prove.record import has_outcome, left_out_reason
from pytest_prove.review import Review, review
from pytest_prove.review.pairing import event_flags, group_episodes
from pytest_prove.store import Run, Store
from pytest_prove.store.episodes import StoredEpisode, plain

SALT = "5eed5eed5eed5eed"
OUTCOMES = ("resolved", "unresolved", "timeout")


def _write(root: Path, run_id: str, worse: bool) -> None:
    keys, lines = [], []
    for c in range(6):
        condition = {"case": f"c{c}", "temperature": 0.5}
        key = condition_key(condition)
        keys.append(key)
        for r in range(12):
            seed = derive_seed(SALT, "support", key, r)
            outcome = OUTCOMES[(seed >> 8) % 3]
            if worse and c % 2 == 0 and outcome == "resolved":
                outcome = "unresolved"
            lines.append(json.dumps({
                "rollout": "support", "condition": condition, "condition_key": key,
                "replicate": r, "seed": seed, "outcome": outcome, "t": 3, "horizon": 9,
                "meta": {"case_id": f"c{c}"}, "error": None}))
    declaration = {"outcomes": list(OUTCOMES), "failures": ["unresolved", "timeout"],
                   "successes": ["resolved"], "replicates": 12, "t_unit": "steps",
                   "axes": None}
    manifest = {"format": 1, "run_id": run_id, "name": run_id[-4:], "salt": SALT,
                "started": "2026-11-29T10:17:03.050857Z", "status": "complete",
                "rollouts": {"support": {"label": "test_support",
                                         "declaration": declaration}},
                "plan": {"support": {"replicates": 12, "conditions": keys}}}
    folder = root / "runs" / run_id
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (folder / "episodes.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Run, Run]:
    _write(tmp_path, "20261129T101703Z-befo", worse=False)
    _write(tmp_path, "20261130T101703Z-aftr", worse=True)
    store = Store(tmp_path)
    return (store.read(store.resolve("20261129T101703Z-befo")),
            store.read(store.resolve("20261130T101703Z-aftr")))


def _mixed(run: Run, shift: int) -> Run:
    """``run`` with some episodes made dicts: errored, without a case, under chaos."""
    out: list[Any] = []
    for i, record in enumerate(run.episodes):
        j = i + shift
        if j % 5 == 0:
            record = plain(record)
        if j % 7 == 0:
            record = dict(plain(record), outcome=None, error={
                "kind": ("exception", "episode_timeout", "no_outcome")[j % 3],
                "message": "boom"})
        if j % 11 == 0:
            record = dict(plain(record), meta=None if j % 2 else {})
        if j % 13 == 0:
            record = dict(plain(record), chaos={"calls": 2, "by_kind": {"timeout": j % 2}})
        out.append(record)
    return dataclasses.replace(run, episodes=tuple(out))


def _plain(run: Run) -> Run:
    return dataclasses.replace(run, episodes=tuple(plain(r) for r in run.episodes))


def _seen(done: Review) -> list[str]:
    return [repr(getattr(done, f.name)) for f in dataclasses.fields(done)
            if f.name not in ("before", "after")]


@pytest.mark.parametrize("missing", ["test", "ignore"])
def test_episodes_and_dicts_review_alike(runs: tuple[Run, Run], missing: str) -> None:
    before, after = runs
    assert all(isinstance(r, StoredEpisode) for r in before.episodes + after.episodes)
    mixed = (_mixed(before, 0), _mixed(after, 3))
    assert any(isinstance(r, StoredEpisode) for r in mixed[1].episodes)
    assert any(not isinstance(r, StoredEpisode) for r in mixed[1].episodes)
    for b, a in ((before, after), mixed):
        as_read = review(b, a, events=None, q=0.05, max_mde=0.5, fail_on={"worse"},
                         missing=missing, chaos_differs=True)  # type: ignore[arg-type]
        as_dicts = review(_plain(b), _plain(a), events=None, q=0.05, max_mde=0.5,
                          fail_on={"worse"}, missing=missing,  # type: ignore[arg-type]
                          chaos_differs=True)
        assert _seen(as_read) == _seen(as_dicts)
    done = review(*mixed, events=None, q=0.05, max_mde=0.5, fail_on={"worse"},
                  chaos_differs=True)
    assert done.prepared.faults  # the chaos of the dicts was counted
    # The counts the episode-by-episode helpers give.
    every, _, left_out = group_episodes(*mixed)
    assert done.prepared.left_out == dict(left_out)
    assert sum(left_out.values()) == sum(
        1 for run in mixed for r in run.episodes if not has_outcome(r))
    assert Counter(left_out_reason(r) for r in mixed[1].episodes if not has_outcome(r))
    for row, key in zip(done.prepared.rows, done.prepared.keys, strict=True):
        arms = every[key]
        b_all, a_all = arms["before"], arms["after"]
        if row.event != "no outcome":
            b_all = {r: rec for r, rec in b_all.items() if has_outcome(rec)}
            a_all = {r: rec for r, rec in a_all.items() if has_outcome(rec)}
        flags_b, flags_a = event_flags(row.event, b_all), event_flags(row.event, a_all)
        twins = set(flags_b) & set(flags_a)
        assert row.n_before == len(twins)
        assert row.x_before == sum(flags_b[r] for r in twins)
        assert row.x_after == sum(flags_a[r] for r in twins)
