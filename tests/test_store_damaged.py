"""Hostile files in the store: JSON nested too deeply for Python's parsers, and run folders
that cannot be read (issue 29, finding 6).

A line or a manifest thousands of arrays deep made json.loads and msgspec raise
RecursionError: an INTERNALERROR for the gate, a traceback for ``show``; and one such
run folder broke ``runs``, ``show``, ``prune`` (the command that could remove it) and
``--prove-resume=latest`` for the whole store.  Now each read names the file (and line)
in a StoreError, and a damaged folder is listed as damaged, removed by ``prune``, and
skipped by everything that looks for runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_prove.cli import main
from pytest_prove.store import Store, StoreError

from .conftest import INI

AGENT = """
import pytest_prove as prove

@prove.rollout(replicates=3, failures=["bad"], successes=["good"])
def test_agent(prove_replicate):
    return prove.Episode("bad" if prove_replicate == 1 else "good")
"""

#: 100,000 arrays deep: past any recursion limit of Python's JSON parsers.
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def _store_made() -> dict[str, bytes]:
    """The project's store as the first test of the module made it in this process, by file."""
    return {}


@pytest.fixture
def project(pytester: pytest.Pytester, _store_made: dict[str, bytes]) -> pytest.Pytester:
    """Runs 'first' and 'second', and the baseline 'b' saved from 'first': made by the first
    test that asks for them in this process, and copied into the store of the others (each
    test damages its own copy)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    store = pytester.path / ".prove"
    if _store_made:
        for name, content in _store_made.items():
            (store / name).parent.mkdir(parents=True, exist_ok=True)
            (store / name).write_bytes(content)
        return pytester
    pytester.runpytest("--prove-name=first", "--prove-save-baseline=b").assert_outcomes(
        passed=3)
    pytester.runpytest("--prove-name=second").assert_outcomes(passed=3)
    _store_made.update({str(path.relative_to(store)): path.read_bytes()
                        for path in store.rglob("*") if path.is_file()})
    return pytester


def _cli(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], *args: str
         ) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["--store", str(pytester.path / ".prove"), *args])
    out, err = capsys.readouterr()
    return status, out, err


def _run_dir(pytester: pytest.Pytester, name: str) -> Path:
    return Store(pytester.path / ".prove").load(name).path


# ---- baselines


def _poison_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = text
    path.write_text("\n".join(lines), encoding="utf-8")


@pytest.mark.parametrize(("where", "number", "text", "message"), [
    ("the header", 1, DEEP, r"b\.baseline:1: the first line must be the baseline's header, "
                            r"and it is not JSON \(nested too deeply"),
    ("a condition's line", 2, "@" + DEEP, r"b\.baseline:2: the condition's line is not a JSON "
                                          r"array .*nested too deeply"),
])
def test_nested_json_in_a_baseline_is_refused_by_line(
        project: pytest.Pytester, capsys: pytest.CaptureFixture[str], where: str,
        number: int, text: str, message: str) -> None:
    _poison_line(project.path / ".prove" / "baselines" / "b.baseline", number, text)
    with pytest.raises(StoreError, match=message):
        Store(project.path / ".prove").load_baseline("b")
    # The command line: one line, exit 1.
    status, _, err = _cli(project, capsys, "show", "baseline:b")
    assert status == 1 and err.count("\n") == 1 and "b.baseline:" in err
    # The session: a usage error before any rollout, no INTERNALERROR.
    result = project.runpytest("--prove-baseline=b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.re_match_lines([f"ERROR: .*{message}"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_nested_json_in_a_json_lines_baseline_is_refused_by_line(
        project: pytest.Pytester) -> None:
    store = Store(project.path / ".prove")
    path = store.write_baseline("b", store.load_baseline("b"), compact=False)
    _poison_line(path, 3, '{"rollout": ' + DEEP + "}")
    with pytest.raises(StoreError, match=r"b\.jsonl:3: corrupt line \(nested too deeply"):
        store.load_baseline("b")


# ---- runs


def test_nested_json_in_a_runs_line_is_refused_by_line(project: pytest.Pytester,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    episodes = _run_dir(project, "second") / "episodes.jsonl"
    _poison_line(episodes, 2, '{"rollout": "x", "meta": ' + DEEP + "}")
    with pytest.raises(StoreError, match=r"episodes\.jsonl:2: corrupt line \(nested too deeply"):
        Store(project.path / ".prove").load("second")
    status, _, err = _cli(project, capsys, "show", "second")
    assert status == 1 and err.count("\n") == 1 and "episodes.jsonl:2: " in err
    assert _cli(project, capsys, "show", "first")[0] == 0  # the other run still reads
    # --prove-resume=latest names the line and stops before anything runs.
    result = project.runpytest("--prove-resume=latest")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.re_match_lines([r"ERROR: .*episodes\.jsonl:2: corrupt line \(nested too "
                                  r"deeply"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    # runs reads manifests (a finished run's counts are there), and lists both.
    status, out, _ = _cli(project, capsys, "runs")
    assert status == 0 and "first" in out and "second" in out
    # A killed run's episodes are counted from its lines: it is listed as damaged.
    manifest = episodes.parent / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "ended": None}))
    status, out, _ = _cli(project, capsys, "runs")
    assert status == 0 and "first" in out
    assert "damaged: second: " in out and "episodes.jsonl:2" in out


@pytest.mark.parametrize(("manifest", "why"), [
    (DEEP, "nested too deeply to read"),
    ("{not json", "is not JSON"),
    ('["a list"]', "is not a run's manifest"),
    (None, "holds no manifest.json"),
])
def test_one_damaged_run_folder_never_disables_the_store(
        project: pytest.Pytester, capsys: pytest.CaptureFixture[str], manifest: str | None,
        why: str) -> None:
    runs = project.path / ".prove" / "runs"
    # The newest folder by its name (a run id starts with its time), as a session would
    # have made it, and then damaged.
    poisoned = runs / "29991231T235959Z-dead"
    poisoned.mkdir()
    (poisoned / "episodes.jsonl").write_text("{}\n")
    if manifest is not None:
        (poisoned / "manifest.json").write_text(manifest)
    status, out, _ = _cli(project, capsys, "runs")
    assert status == 0 and "first" in out and "second" in out
    assert f"damaged: 29991231T235959Z-dead: {poisoned}: it" in out and why in out
    assert _cli(project, capsys, "show", "first")[0] == 0
    status, _, err = _cli(project, capsys, "show", "29991231T235959Z-dead")
    assert status == 1 and "the run's folder is damaged" in err and why in err
    # latest is the newest run that reads: resuming it (complete) has nothing to run.
    result = project.runpytest("--prove-resume=latest")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*nothing left to run*"])
    # prune removes it (it is no run), and keeps the runs it was asked to keep.
    status, out, _ = _cli(project, capsys, "prune", "--keep", "5", "--dry-run")
    assert status == 0 and poisoned.exists() and "29991231T235959Z-dead" in out
    status, out, _ = _cli(project, capsys, "prune", "--keep", "5")
    assert status == 0 and not poisoned.exists()
    assert "damaged" in out
    assert {m["name"] for _, m in Store(project.path / ".prove").runs()} == {"first", "second"}


def test_a_damaged_baseline_is_listed_by_runs(project: pytest.Pytester,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _poison_line(project.path / ".prove" / "baselines" / "b.baseline", 2, "@" + DEEP)
    status, out, _ = _cli(project, capsys, "runs")
    assert status == 0 and "first" in out
    assert "damaged: baseline:b: " in out and "b.baseline:2" in out


def test_a_manifest_nested_too_deeply_is_named_by_path(project: pytest.Pytester) -> None:
    directory = _run_dir(project, "second")
    (directory / "manifest.json").write_text(json.dumps({"run_id": "x"})[:-1]
                                             + ', "deep": ' + DEEP + "}")
    with pytest.raises(StoreError, match=r"manifest\.json: corrupt JSON \(nested too deeply"):
        Store(project.path / ".prove").read(directory)
