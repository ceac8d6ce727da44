"""``pytest-prove prune`` and the runs folder's .gitignore (issue 13, item 7): the newest N
runs stay, named runs stay unless asked, a run a live session is writing always stays (two
processes), baselines are never touched, and a deletion cut short never leaves a folder
that reads as a run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_prove.cli import main
from pytest_prove.store import Store, pruning
from pytest_prove.store.writer import RUNS_GITIGNORE

from .conftest import INI

#: Replicate 1 waits until the file GO names exists: its session holds the run meanwhile.
WAITING = textwrap.dedent(
    """
    import os
    import pathlib
    import time

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund"])
    def test_wait(ticket, prove_replicate):
        if prove_replicate == 1:
            go = pathlib.Path(os.environ["GO"])
            deadline = time.monotonic() + 120
            while not go.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return prove.Episode("resolved")
    """
)


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeini(INI)
    pytester.makepyfile(test_wait=WAITING)
    go = pytester.path / "go"
    go.touch()
    monkeypatch.setenv("GO", str(go))
    return go


def _sweep(pytester: pytest.Pytester, *args: str) -> None:
    assert pytester.runpytest("-p", "no:cacheprovider", *args).ret == 0


def _prune(store: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int,
                                                                                  dict[str, Any]]:
    capsys.readouterr()
    status = main(["--store", str(store), "--json", "prune", *args])
    return status, json.loads(capsys.readouterr().out)


def _names(store: Store) -> list[str]:
    return [str(m["name"]) for _, m in store.runs()]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_keep_the_newest_named_runs_and_baselines(pytester: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester, monkeypatch)
    _sweep(pytester, "--prove-name=first")  # named, the oldest
    _sweep(pytester, "--prove-save-baseline=base")
    for _ in range(3):
        _sweep(pytester)
    root = pytester.path / ".prove"
    store = Store(root)
    runs = store.runs()
    assert len(runs) == 5
    baseline = (root / "baselines" / "base.baseline").read_bytes()
    # A dry run deletes nothing and says what would go, with its bytes.
    status, doc = _prune(root, capsys, "--keep", "2", "--dry-run")
    assert status == 0 and doc["dry_run"] is True and len(store.runs()) == 5
    doomed = [d for d, m in runs[1:3]]  # the second and third oldest, not the named one
    assert sorted(r["path"] for r in doc["deleted"]) == sorted(map(str, doomed))
    assert doc["bytes_freed"] == sum(_size(d) for d in doomed) > 0
    assert {(r["name"], r["kept"]) for r in doc["kept"]} == {
        ("first", "named"), (runs[3][1]["name"], "newest"), (runs[4][1]["name"], "newest")}
    # The text says the same, verdict first.
    assert main(["--store", str(root), "prune", "--keep", "2", "--dry-run"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith(f"would delete 2 of 5 runs in {root}, freeing ")
    assert "kept the newest 2, 1 named (--named deletes them too)" in text[0]
    assert text[-2] == f"baselines are never deleted: 1 in {root}/baselines (base)"
    # For real: the same two go, and 'latest' is still the newest.
    latest = store.resolve("latest")
    status, doc = _prune(root, capsys, "--keep", "2")
    assert status == 0 and all(not d.exists() for d in doomed)
    assert _names(store) == ["first", runs[3][1]["name"], runs[4][1]["name"]]
    assert store.resolve("latest") == latest
    # --named deletes an older named run too; the baseline file is untouched throughout.
    status, doc = _prune(root, capsys, "--keep", "0", "--named")
    assert status == 0 and store.runs() == [] and len(doc["deleted"]) == 3
    assert (root / "baselines" / "base.baseline").read_bytes() == baseline
    assert main(["--store", str(root), "diff", "baseline:base", "baseline:base"]) == 0


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_a_run_a_live_session_writes_is_never_deleted(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """Two processes: a session waits inside its second replicate, holding its run."""
    go = _project(pytester, monkeypatch)
    _sweep(pytester)
    root = pytester.path / ".prove"
    store = Store(root)
    old = store.runs()[0][0]
    go.unlink()
    live = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                             "-p", "no:randomly", "--prove-name=live"],
                            cwd=pytester.path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while "live" not in _names(store) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "live" in _names(store), "the session never stored its first episode"
        status, doc = _prune(root, capsys, "--keep", "0", "--named")
        assert status == 0
        assert [(r["name"], r["kept"]) for r in doc["kept"]] == [("live", "being written")]
        assert [r["path"] for r in doc["deleted"]] == [str(old)]
        # Had the session taken its lock after prune looked, the deletion itself is refused.
        monkeypatch.setattr(pruning, "being_written", lambda directory: False)
        status, doc = _prune(root, capsys, "--keep", "0", "--named")
        assert status == 0 and doc["deleted"] == []
        assert [(r["name"], r["kept"]) for r in doc["kept"]] == [("live", "being written")]
        monkeypatch.undo()
    finally:
        go.touch()
        out, _ = live.communicate(timeout=300)
    assert live.returncode == 0, out
    run = store.load("live")
    assert run.status == "complete" and len(run.episodes) == 2
    status, doc = _prune(root, capsys, "--keep", "0", "--named")
    assert status == 0 and [r["name"] for r in doc["deleted"]] == ["live"]
    assert store.runs() == []


def test_a_deletion_cut_short_never_reads_as_a_run(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester, monkeypatch)
    _sweep(pytester)
    _sweep(pytester)
    root = pytester.path / ".prove"
    store = Store(root)
    older = store.runs()[0][0]

    def cut_short(path: Any, *args: Any, **kwargs: Any) -> None:
        (Path(path) / "episodes.jsonl").unlink()  # half of it gone, then the crash
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as patch:
        patch.setattr(pruning.shutil, "rmtree", cut_short)
        status, doc = _prune(root, capsys, "--keep", "1")
    assert status == 1 and [f["path"] for f in doc["failed"]] == [str(older)]
    assert doc["failed"][0]["reason"] == "Permission denied"
    # What is left is hidden: no reader lists it, and 'latest' is the newer run.
    assert len(store.runs()) == 1 and not older.exists()
    left = [p for p in (root / "runs").iterdir() if p.name.startswith(pruning.TRASH_PREFIX)]
    assert len(left) == 1 and (left[0] / "manifest.json").is_file()
    assert main(["--store", str(root), "runs"]) == 0
    assert older.name not in capsys.readouterr().out
    # The next prune removes it.
    status, doc = _prune(root, capsys, "--keep", "1")
    assert status == 0 and doc["leftovers"] == 1 and doc["deleted"] == []
    assert not left[0].exists()


def test_bad_keep_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--keep", "-1"], ["--keep", "two"], []):
        assert main(["--store", str(tmp_path), "prune", *args]) == 2
        err = capsys.readouterr().err
        assert "--keep" in err and "Traceback" not in err
    assert main(["--store", str(tmp_path / "none"), "prune", "--keep", "3"]) == 0
    assert capsys.readouterr().out.startswith(f"nothing to delete: no runs in {tmp_path}")


def test_the_runs_folder_is_ignored_by_git_and_baselines_are_not(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(pytester, monkeypatch)
    _sweep(pytester, "--prove-save-baseline=base")
    ignore = pytester.path / ".prove" / "runs" / ".gitignore"
    assert ignore.read_text() == RUNS_GITIGNORE
    # Written when the folder is made, never again: a user's edit stays.
    ignore.write_text("# mine\n")
    _sweep(pytester)
    assert ignore.read_text() == "# mine\n"
    ignore.write_text(RUNS_GITIGNORE)
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(pytester.path)}
    subprocess.run([git, "init", "-q"], cwd=pytester.path, check=True, env=env)
    subprocess.run([git, "add", "."], cwd=pytester.path, check=True, env=env)
    added = subprocess.run([git, "diff", "--cached", "--name-only"], cwd=pytester.path,
                           check=True, env=env, capture_output=True, text=True).stdout.split()
    assert ".prove/baselines/base.baseline" in added
    assert not [name for name in added if name.startswith(".prove/runs/")], added


def test_resuming_a_run_deleted_since_it_was_read_is_refused(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """prune deletes a run between a resume's read and its lock: the resume is refused,
    rather than writing a run of the new episodes alone into a folder filelock made again.
    The refusal leaves no folder behind either (the resume's lock made the deleted run's
    folder again, since filelock makes the lock file's folder; no prune removes one)."""
    from pytest_prove.store import StoreError

    _project(pytester, monkeypatch)
    _sweep(pytester)
    store = Store(pytester.path / ".prove")
    run = store.load("latest")
    assert store.prune(keep=0).deleted
    with pytest.raises(StoreError, match="was deleted after it was read"):
        store.reopen(run)
    assert store.runs() == []
    assert not run.path.exists()
    assert [p.name for p in store.runs_dir.iterdir()] == [".gitignore"]


#: A prune in another process while the session that wrote the run is still finishing (after
#: its run is closed, before its summary reads the run back for the cost line).
PRUNE_AT_THE_END = textwrap.dedent(
    """
    import json
    import subprocess
    import sys

    import pytest


    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(session):
        done = subprocess.run([sys.executable, "-m", "pytest_prove", "--json", "prune",
                               "--keep", "0", "--named"], capture_output=True, text=True)
        with open("prune.json", "w") as fh:
            fh.write(done.stdout)
    """
)

SPENDING = textwrap.dedent(
    """
    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund"])
    def test_spend(ticket):
        prove.usage("small", 100, 10)
        return prove.Episode("resolved")
    """
)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_a_session_holds_its_run_until_it_ends(pytester: pytest.Pytester) -> None:
    """The session reads its run back after closing it (the cost line, a baseline, the
    report): a prune in another process meanwhile used to delete it, and the summary ended in
    a traceback (StoreError: the run's manifest is missing)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_spend=SPENDING)
    pytester.makeconftest(PRUNE_AT_THE_END)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.fnmatch_lines(["run '*' (complete): 2 episodes*", "tokens*"])
    doc = json.loads((pytester.path / "prune.json").read_text())
    assert doc["deleted"] == []
    assert [r["kept"] for r in doc["kept"]] == ["being written"]
    assert len(Store(pytester.path / ".prove").runs()) == 1
    # Once the session is over, its run is an old run like any other.
    assert main(["--store", str(pytester.path / ".prove"), "prune", "--keep", "0"]) == 0
    assert Store(pytester.path / ".prove").runs() == []


def test_a_lock_file_linked_outside_the_store_is_never_opened(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A run folder whose lock file is a symbolic link to a file elsewhere (a copied or
    hostile store): prune opened it to take the run's lock, and filelock 3.x opens with
    O_TRUNC through the link, so even --dry-run emptied the file it pointed at (filelock 4
    refuses the link, and prune failed with 'Too many levels of symbolic links')."""
    _project(pytester, monkeypatch)
    _sweep(pytester)
    root = pytester.path / ".prove"
    run = Store(root).runs()[0][0]
    outside = pytester.path / "precious.txt"
    outside.write_text("not the store's\n")
    lock = run / "episodes.jsonl.lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside)
    for args in (["--dry-run"], []):
        status, doc = _prune(root, capsys, "--keep", "0", *args)
        assert outside.read_text() == "not the store's\n"
        assert status == 0 and doc["deleted"] == [] and doc["failed"] == []
        assert [(r["path"], r["kept"]) for r in doc["kept"]] == [(str(run), "symbolic link")]
    assert run.is_dir() and lock.is_symlink()


def test_a_run_whose_lock_is_held_is_refused_as_a_store_error(tmp_path: Path) -> None:
    """Deleting a run whose session holds its lock raises RunBusyError, which prune catches
    before anything else and keeps the run; it is a StoreError (issue 35: every error of the
    package under ProveError), so that nothing that reaches a user is outside the base."""
    from filelock import FileLock

    from pytest_prove.errors import ProveError
    from pytest_prove.store import StoreError

    runs = tmp_path / "runs"
    directory = runs / "20261204T000000Z-abcd"
    directory.mkdir(parents=True)
    (directory / "manifest.json").write_text(json.dumps({"run_id": directory.name}))
    with FileLock(str(directory / "episodes.jsonl.lock")):
        assert pruning.being_written(directory)
        with pytest.raises(StoreError) as raised:
            pruning.remove_run(runs, directory, directory.name)
    assert type(raised.value) is pruning.RunBusyError and isinstance(raised.value, ProveError)
    assert directory.is_dir()  # kept whole
    assert pruning.remove_run(runs, directory, directory.name) is not None  # lock released
    assert not directory.exists()
