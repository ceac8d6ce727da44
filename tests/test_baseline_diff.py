"""``pytest-prove baseline-diff OLD NEW``: what a change to a baseline does, so that a pull
request's reviewer sees it (issue 29, finding 6); and ``baseline-text``, git's textconv."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_prove.cli import main
from pytest_prove.store import Run, Store
from pytest_prove.store.episodes import plain

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "support_bot" / ".prove"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    """The example's baseline as 'old.baseline' (a file, as git show writes it) and as the
    store's 'current', which the test changes."""
    (tmp_path / ".prove" / "baselines").mkdir(parents=True)
    shutil.copy(EXAMPLE / "baselines" / "current.baseline", tmp_path / "old.baseline")
    shutil.copy(EXAMPLE / "baselines" / "current.baseline",
                tmp_path / ".prove" / "baselines" / "current.baseline")
    monkeypatch.chdir(tmp_path)
    return Store(tmp_path / ".prove")


def _resave(store: Store, change: object = None, **manifest: object) -> set[int]:
    """Save 'current' again with every third resolved refund made unresolved: the
    replicates changed."""
    base = store.load_baseline("current")
    episodes = [plain(e) for e in base.episodes]
    changed = set()
    for e in episodes:
        if (e["condition"]["ticket"] == "refund" and e["outcome"] == "resolved"
                and e["replicate"] % 3 == 0):
            e["outcome"] = "unresolved"
            changed.add(e["replicate"])
    store.write_baseline("current", Run(base.run_id, base.name, {**base.manifest, **manifest},
                                        tuple(episodes), base.path))
    return changed


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def test_a_baseline_made_worse_is_shown_by_condition_event_and_replicate(
        store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    changed = _resave(store)
    status, out, _ = _cli(capsys, "baseline-diff", "old.baseline", "current")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("baseline-diff: 'old' (old.baseline, 600 episodes) -> "
                               "'current' (")
    assert lines[1].startswith(f"1 of 3 condition(s) changed; {len(changed)} replicate(s) "
                               "end otherwise on the same seed")
    first = min(changed)
    assert lines[2].startswith(f"ticket=refund of test_support: 200 -> 200 episodes; "
                               f"{len(changed)} replicate(s) changed: r{first} resolved -> "
                               "unresolved")
    old = Store(EXAMPLE).load_baseline("current")
    refund = [e for e in old.episodes if e["condition"]["ticket"] == "refund"]
    before = sum(e["outcome"] == "unresolved" for e in refund)
    after = before + len(changed)
    row = next(line for line in lines if "unresolved (failure)" in line)
    assert row.split() == ["unresolved", "(failure)", f"{before / 200:.3f}", "->",
                           f"{after / 200:.3f}", f"+{(after - before) / 200:.3f}",
                           str(before), "of", "200", str(after), "of", "200"]
    assert "unchanged: 2 condition(s) hold the same endings" in out
    # JSON: every condition, and every changed replicate.
    status, out, _ = _cli(capsys, "--json", "baseline-diff", "old.baseline", "current")
    doc = json.loads(out)
    assert doc["command"] == "baseline-diff" and doc["changed_replicates"] == len(changed)
    refund_doc = next(c for c in doc["conditions"] if c["label"].startswith("ticket=refund"))
    assert {c["replicate"] for c in refund_doc["changed_replicates"]} == changed


def test_the_same_baseline_has_no_change(store: Store,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _cli(capsys, "baseline-diff", "old.baseline", "baseline:current")
    assert status == 0
    assert out.splitlines()[1] == ("no change: the two baselines hold the same endings in "
                                   "all 3 condition(s)")


def test_a_header_change_and_other_salts_are_said(store: Store,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    base = store.load_baseline("current")
    rollouts = json.loads(json.dumps(base.manifest["rollouts"]))
    declaration = rollouts["support"]["declaration"]
    declaration["failures"], declaration["successes"] = (declaration["successes"],
                                                         declaration["failures"])
    _resave(store, rollouts=rollouts)
    status, out, _ = _cli(capsys, "baseline-diff", "old.baseline", "current")
    assert status == 0
    assert ("header: support: failures ['unresolved', 'timeout'] -> ['resolved']" in out)
    # A baseline of other seeds: rates only, no replicate is read beside its twin.
    base = store.load_baseline("current")
    store.write_baseline("other", Run(base.run_id, base.name,
                                      {**base.manifest, "salt": "0123456789abcdef"},
                                      base.episodes, base.path))
    status, out, _ = _cli(capsys, "baseline-diff", "old.baseline", "other")
    assert status == 0
    assert "header: salt 02c25847222c56d6 -> 0123456789abcdef" in out
    assert "other salts: the episodes ran on other seeds" in out
    assert "replicate(s) changed" not in out and "ticket=refund of test_support" in out


def test_a_baseline_edited_by_hand_is_refused(store: Store,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = store.baselines_dir / "current.baseline"
    lines = path.read_text().splitlines()
    fields = lines[3].split(" ")  # an episode of the first block: its ending's index
    fields[1] = "6" if fields[1] != "6" else "0"
    lines[3] = " ".join(fields)
    path.write_text("\n".join(lines) + "\n")
    status, _, err = _cli(capsys, "baseline-diff", "old.baseline", "current")
    assert status == 1 and "edited or damaged since it was saved" in err
    # baseline-text, as git's textconv, shows why, then the file as it is.
    status, out, _ = _cli(capsys, "baseline-text", str(path))
    assert status == 0
    assert out.startswith("damaged baseline: ") and "edited or damaged" in out.splitlines()[0]
    assert out.splitlines()[1:] == lines


def test_baseline_text_is_a_line_per_replicate(store: Store,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _cli(capsys, "baseline-text", "old.baseline")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("baseline 'old': salt 02c25847222c56d6, 600 episodes")
    assert lines[1] == ("rollout support: outcomes resolved, unresolved, timeout; failures "
                        "unresolved, timeout; successes resolved")
    assert lines[2] == "condition ticket=password of support"
    assert len([x for x in lines if x.startswith("  ticket=")]) == 600
    old = Store(EXAMPLE).load_baseline("current")
    first = next(e for e in old.episodes if e["condition"]["ticket"] == "password"
                 and e["replicate"] == 0)
    assert lines[3] == f"  ticket=password r0: {first['outcome']}"
