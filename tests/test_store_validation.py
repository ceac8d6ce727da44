"""Damaged or hand-edited store files are refused when read, by file, line and field.

A baseline is loaded in ``pytest_configure``, so a bad one stops the session with a
usage error before any rollout runs, instead of being compared silently or breaking
with a traceback once the sweep is over.

One real sweep is made per module, in process (``inline_session``: pytester's projects live
for one test and every test here starts from the same files); each test damages its own copy.
"""

from __future__ import annotations

import json
import shutil
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from pytest_prove.cli import main
from pytest_prove.store import Store, StoreError, StoreWarning

from .conftest import inline_session

#: Two conditions, three replicates each, every kind of ending: the baseline's episodes
#: are lines 2 to 7, sorted (password r0, r1, r2, refund r0, r1 errored, r2 no outcome).
AGENT = textwrap.dedent(
    """
    import random

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=3, failures=["unresolved"], successes=["resolved"],
                   t_unit="steps")
    @pytest.mark.parametrize("ticket", ["password", "refund"])
    def test_bot(ticket, prove_seed, prove_replicate):
        rng = random.Random(prove_seed)
        with prove.step("read"):
            prove.usage("gpt-test", input=rng.randint(10, 99), output=rng.randint(1, 9))
        if ticket == "refund" and prove_replicate == 1:
            raise RuntimeError("lookup service down")
        if ticket == "refund" and prove_replicate == 2:
            raise prove.NoOutcome("rate limited")
        outcome = "unresolved" if rng.random() < 0.3 else "resolved"
        return prove.Episode(outcome, horizon=5, meta={"case_id": ticket})
    """
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with a run called 'first' and the baseline 'b' saved from it."""
    root = tmp_path_factory.mktemp("validation")
    (root / "pytest.ini").write_text("[pytest]\nprove_allow_underpowered = true\n")
    (root / "test_bot.py").write_text(AGENT)
    code, out = inline_session(
        root, "-p", "no:xdist", "--prove-name", "first", "--prove-save-baseline", "b",
        # Every kind of ending in a baseline: refund's share without an outcome (2 of 3)
        # is far above what a baseline may hold, so the bound is raised on purpose.
        "--prove-max-errored=1")
    assert code == 1, out  # the errored replicate fails
    assert "4 passed, 1 skipped" in out and "1 failed" in out
    # The damage below is done to JSON lines: keep 'b' in format 1 (it is still read), and
    # the baseline as saved, compact, as 'c' (tests/test_store_compact.py damages those).
    store = Store(root / ".prove")
    (root / ".prove" / "baselines" / "b.baseline").rename(
        root / ".prove" / "baselines" / "c.baseline")
    store.write_baseline("b", store.load("first"), compact=False)
    return root


@pytest.fixture
def project(pytester: pytest.Pytester, template: Path) -> Path:
    """This test's own copy of the template project."""
    shutil.copytree(template, pytester.path, dirs_exist_ok=True)
    return pytester.path


@pytest.fixture
def saved(project: Path) -> Path:
    """The baseline file of this test's project."""
    return project / ".prove" / "baselines" / "b.jsonl"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _edit_line(path: Path, number: int, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the JSON object on line ``number`` (from 1) in place, as a person would."""
    lines = _lines(path)
    record = json.loads(lines[number - 1])
    change(record)
    lines[number - 1] = json.dumps(record) + "\n"
    path.write_text("".join(lines), encoding="utf-8")


def _duplicate_line(path: Path) -> None:
    lines = _lines(path)
    lines.insert(3, lines[2])
    path.write_text("".join(lines), encoding="utf-8")


def _replace_line(number: int, text: str) -> Callable[[Path], None]:
    def replace(path: Path) -> None:
        lines = _lines(path)
        lines[number - 1] = text + "\n"
        path.write_text("".join(lines), encoding="utf-8")
    return replace


def _set(number: int, field: str, value: object) -> Callable[[Path], None]:
    return lambda path: _edit_line(path, number, lambda r: r.__setitem__(field, value))


def _change_salt(path: Path) -> None:
    _edit_line(path, 1, lambda h: h["manifest"].__setitem__("salt", "0123456789abcdef"))


#: Each damage, and what the error must say: the file and line, then the field.
DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "duplicated replicate": (_duplicate_line,
                             r"b\.jsonl:4: .*replicate 1 .*also on line 3"),
    "line without outcome": (lambda p: _edit_line(p, 2, lambda r: r.pop("outcome")),
                             r"b\.jsonl:2: the field 'outcome' is missing"),
    "replicate zero": (_set(2, "replicate", "zero"),
                       r'b\.jsonl:2: replicate is "zero" \(a string\), expected an integer >= 0'),
    "condition_key null": (_set(2, "condition_key", None),
                           r"b\.jsonl:2: condition_key is null, expected a non-empty string"),
    "changed salt": (_change_salt,
                     r"b\.jsonl:2: seed \d+ is not the seed of replicate 0 .*salt "
                     r'"0123456789abcdef"'),
    "manifest a list": (lambda p: _edit_line(p, 1, lambda h: h.__setitem__("manifest", [1, 2])),
                        r"b\.jsonl:1: manifest is \[1, 2\] \(an array\), expected an object"),
    "header not an object": (_replace_line(1, "[1, 2]"),
                             r"b\.jsonl:1: the header is \[1, 2\] \(an array\), expected an "
                             r"object"),
}

FIX = "restore the file from version control, or save the baseline again with " \
      "--prove-save-baseline b"


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_baseline_is_refused_by_line(saved: Path, damage: str) -> None:
    change, message = DAMAGE[damage]
    change(saved)
    with pytest.raises(StoreError, match=message) as raised:
        Store(saved.parent.parent).load_baseline("b")
    assert FIX in str(raised.value)


def _runs(project: Path) -> set[str]:
    return {p.name for p in (project / ".prove" / "runs").iterdir()}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_baseline_stops_the_session_before_any_rollout(
        pytester: pytest.Pytester, saved: Path, damage: str) -> None:
    change, message = DAMAGE[damage]
    change(saved)
    before = _runs(pytester.path)
    result = pytester.runpytest("--prove-baseline", "b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.re_match_lines([f"ERROR: .*{message}"])
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert _runs(pytester.path) == before  # no rollout ran, so no run was created


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_baseline_is_refused_by_the_command_line(
        project: Path, saved: Path, damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    change, _ = DAMAGE[damage]
    change(saved)
    store = str(project / ".prove")
    for args in (["show", "baseline:b"], ["check", "baseline:b", "first"]):
        capsys.readouterr()
        assert main(["--store", store, *args]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"pytest-prove {args[0]}: ")
        assert err.count("\n") == 1  # one line, no traceback
        assert "b.jsonl:" in err


def test_a_baseline_cut_short_is_refused_with_the_note(saved: Path) -> None:
    """A baseline is written whole, in one step: a cut tail lost an episode (issue 29)."""
    data = saved.read_bytes()
    saved.write_bytes(data[:-30])
    with pytest.raises(StoreError, match=r"b\.jsonl: the baseline does not hold what its "
                       r"header says: .*holds 2 episode\(s\).*where the plan says 3 .*"
                       r"b\.jsonl: line 7 is truncated"):
        Store(saved.parent.parent).load_baseline("b")


# ---- runs


def _run_dir(project: Path) -> Path:
    return Store(project / ".prove").load("first").path


@pytest.mark.parametrize("manifest, message", [
    ("[1, 2]", r"manifest\.json: the manifest is \[1, 2\] \(an array\), expected an object"),
    ('{"name": "first", "salt": "00"}', r"manifest\.json: the field 'run_id' is missing"),
    ("{not json", r"manifest\.json: corrupt JSON"),
])
def test_damaged_run_manifest_is_refused_by_path(project: Path, manifest: str,
                                                 message: str) -> None:
    directory = _run_dir(project)
    (directory / "manifest.json").write_text(manifest, encoding="utf-8")
    with pytest.raises(StoreError, match=message):
        Store(project / ".prove").read(directory)


def test_damaged_run_line_is_refused_by_line(project: Path) -> None:
    directory = _run_dir(project)
    _edit_line(directory / "episodes.jsonl", 3, lambda r: r.__setitem__("replicate", "zero"))
    with pytest.raises(StoreError, match=r'episodes\.jsonl:3: replicate is "zero" \(a string\)'):
        Store(project / ".prove").read(directory)


RESUMED = """
import os
import pytest
import pytest_prove as prove

@prove.rollout(replicates=3, failures=["unresolved"], successes=["resolved"])
@pytest.mark.parametrize("ticket", ["refund"])
def test_r(ticket, prove_replicate):
    if prove_replicate == 1 and os.environ.get("BROKEN"):
        raise RuntimeError("lookup service down")
    return prove.Episode("resolved")
"""


def test_a_resumed_run_reads_the_replacement_of_an_errored_line(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_r=RESUMED)
    monkeypatch.setenv("BROKEN", "1")
    pytester.runpytest("--prove-name", "cut").assert_outcomes(passed=2, failed=1)
    monkeypatch.delenv("BROKEN")
    pytester.runpytest("--prove-resume", "cut").assert_outcomes(passed=1)
    run = Store(pytester.path / ".prove").load("cut")
    assert len(_lines(run.path / "episodes.jsonl")) == 4  # the errored line is still there
    assert sorted((r["replicate"], r["outcome"]) for r in run.episodes) == [
        (0, "resolved"), (1, "resolved"), (2, "resolved")]



# ---- more damage, one field at a time


def _header(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda path: _edit_line(path, 1, change)


def _episode(number: int, change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    return lambda path: _edit_line(path, number, change)


#: Lines 2 to 4 end with an outcome, line 6 with an exception, line 7 with no outcome.
MORE: list[tuple[str, Callable[[Path], None], str]] = [
    ("format true", _header(lambda h: h.__setitem__("pytest_prove_baseline", True)),
     r"b\.jsonl: the format number is True"),
    ("no manifest", _header(lambda h: h.pop("manifest")),
     r"b\.jsonl:1: the field 'manifest' is missing"),
    ("no salt", _header(lambda h: h["manifest"].pop("salt")),
     r"b\.jsonl:1: the field 'manifest\.salt' is missing"),
    ("rollouts a list", _header(lambda h: h["manifest"].__setitem__("rollouts", [])),
     r"b\.jsonl:1: manifest\.rollouts is \[\] \(an array\), expected an object"),
    ("a rollout a string", _header(lambda h: h["manifest"]["rollouts"].__setitem__("x", "y")),
     r"b\.jsonl:1: manifest\.rollouts\[\"x\"\] is \"y\" \(a string\)"),
    ("replicate true", _episode(2, lambda r: r.__setitem__("replicate", True)),
     r"b\.jsonl:2: replicate is true, expected an integer >= 0"),
    ("replicate -1", _episode(2, lambda r: r.__setitem__("replicate", -1)),
     r"b\.jsonl:2: replicate is -1 \(an integer\)"),
    ("seed a float", _episode(2, lambda r: r.__setitem__("seed", float(r["seed"]))),
     r"b\.jsonl:2: seed is \S+ \(a number\), expected an integer"),
    ("an edited seed", _episode(3, lambda r: r.__setitem__("seed", r["seed"] + 1)),
     r"b\.jsonl:3: seed \d+ is not the seed of replicate 1"),
    ("condition a string", _episode(2, lambda r: r.__setitem__("condition", "refund")),
     r"b\.jsonl:2: condition is \"refund\" \(a string\), expected an object"),
    ("an axis value a list", _episode(2, lambda r: r["condition"].__setitem__("ticket", [])),
     r"b\.jsonl:2: condition\[\"ticket\"\] is \[\] \(an array\), expected an axis value"),
    ("outcome and error", _episode(6, lambda r: r.__setitem__("outcome", "resolved")),
     r"b\.jsonl:6: outcome is \"resolved\" \(a string\), expected null, since the episode "
     r"has an error \(exception\)"),
    ("neither outcome nor error", _episode(2, lambda r: r.__setitem__("outcome", None)),
     r"b\.jsonl:2: outcome is null, expected a non-empty string, since the episode has no "
     r"error"),
    ("an unknown error kind", _episode(7, lambda r: r["error"].__setitem__("kind", "oops")),
     r"b\.jsonl:7: error\.kind is \"oops\" \(a string\), expected one of no_outcome, "),
    ("t beyond horizon", _episode(2, lambda r: r.update(t=9, horizon=5)),
     r"b\.jsonl:2: t is 9 \(an integer\), expected at most horizon \(5\)"),
    ("t NaN", _episode(2, lambda r: r.__setitem__("t", float("nan"))),
     r"b\.jsonl:2: t is NaN \(a number\), expected null or a finite number >= 0"),
    ("meta a list", _episode(2, lambda r: r.__setitem__("meta", [])),
     r"b\.jsonl:2: meta is \[\] \(an array\), expected an object"),
    ("tokens a string", _episode(2, lambda r: r.__setitem__("tokens", "12")),
     r"b\.jsonl:2: tokens is \"12\" \(a string\), expected null or an object"),
    ("steps an object", _episode(2, lambda r: r.__setitem__("steps", {})),
     r"b\.jsonl:2: steps is \{\} \(an object\), expected an array of objects"),
    ("attempts one", _episode(2, lambda r: r.update(attempts=1, earlier=[])),
     r"b\.jsonl:2: attempts is 1 \(an integer\), expected an integer >= 2"),
    ("earlier short of attempts", _episode(2, lambda r: r.update(attempts=3, earlier=[{}])),
     r"b\.jsonl:2: earlier is \[\{\}\] \(an array\), expected an array of 2 object\(s\)"),
    ("a line that is a list", _replace_line(3, "[]"),
     r"b\.jsonl:3: the line is \[\] \(an array\), expected an object"),
]


@pytest.mark.parametrize(("change", "message"), [m[1:] for m in MORE],
                         ids=[m[0] for m in MORE])
def test_each_field_is_checked(saved: Path, change: Callable[[Path], None],
                               message: str) -> None:
    change(saved)
    with pytest.raises(StoreError, match=message):
        Store(saved.parent.parent).load_baseline("b")


def test_files_the_store_writes_pass_every_check(project: Path) -> None:
    store = Store(project / ".prove")
    run, baseline = store.load("first"), store.load_baseline("b")
    assert len(run.episodes) == len(baseline.episodes) == 6
    assert {e["error"]["kind"] for e in baseline.episodes if e["error"]} == {
        "exception", "no_outcome"}
    resaved = store.load_baseline(store.write_baseline("again", baseline, compact=False).stem)
    assert resaved.episodes == baseline.episodes
    # Compact: what it keeps survives being saved again, from either format.
    compact = store.load_baseline("c")
    assert len(compact.episodes) == 6
    for source in (baseline, compact):
        assert store.load_baseline(store.write_baseline("again", source).stem
                                   ).episodes == compact.episodes


# ---- damage at random


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**65) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=5)


@st.composite
def _damage(draw: st.DrawFn, blob: bytes) -> bytes:
    """``blob`` with one to three random injuries, as an editor, a disk or a merge gives."""
    for _ in range(draw(st.integers(1, 3))):
        lines = blob.split(b"\n")
        last = max(len(lines) - 2, 0)  # the index of the last whole line
        what = draw(st.sampled_from(["truncate", "bytes", "swap", "duplicate", "delete",
                                     "field", "drop"]))
        if what == "truncate":
            blob = blob[:draw(st.integers(0, len(blob)))]
        elif what == "bytes" and blob:
            data = bytearray(blob)
            for _ in range(draw(st.integers(1, 4))):
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
            blob = bytes(data)
        elif what in ("swap", "duplicate", "delete"):
            i, j = draw(st.integers(0, last)), draw(st.integers(0, last))
            if what == "swap":
                lines[i], lines[j] = lines[j], lines[i]
            elif what == "duplicate":
                lines.insert(j, lines[i])
            else:
                del lines[i]
            blob = b"\n".join(lines)
        elif what in ("field", "drop"):
            i = draw(st.integers(0, last))
            try:
                root = json.loads(lines[i])
            except ValueError:
                continue
            node = root
            # The field changed may sit a level down (the header's manifest, an error).
            while isinstance(node, dict) and node:
                key = draw(st.sampled_from(sorted(node)))
                if isinstance(node[key], dict) and node[key] and draw(st.booleans()):
                    node = node[key]
                    continue
                if what == "drop":
                    del node[key]
                else:
                    node[key] = draw(_JSON)
                break
            lines[i] = json.dumps(root).encode()
            blob = b"\n".join(lines)
    return blob


def _rewrite(path: Path, data: bytes) -> None:
    """``path`` holds ``data``, as a new file: ext4 flushes a file emptied to be rewritten
    (its guard against a crash losing both versions), 2 ms of waiting a rewrite here."""
    path.unlink()
    path.write_bytes(data)


def test_damage_at_random_is_read_or_refused_by_name(template: Path,
                                                     tmp_path_factory: pytest.TempPathFactory,
                                                     ) -> None:
    root = tmp_path_factory.mktemp("damaged")
    shutil.copytree(template / ".prove", root, dirs_exist_ok=True)
    store = Store(root)
    run_dir = store.load("first").path
    files = {"baseline": root / "baselines" / "b.jsonl",
             "compact": root / "baselines" / "c.baseline",
             "episodes": run_dir / "episodes.jsonl", "manifest": run_dir / "manifest.json"}
    originals = {name: path.read_bytes() for name, path in files.items()}

    @settings(max_examples=300, derandomize=True, database=None, deadline=None)
    @given(st.data())
    def damaged_files_load_or_fail_by_name(data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(files)))
        for name, path in files.items():  # rewritten only if changed
            if path.read_bytes() != originals[name]:
                _rewrite(path, originals[name])
        _rewrite(files[target], data.draw(_damage(originals[target]), label=target))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                run = (Store(root).load_baseline("b") if target == "baseline"
                       else Store(root).load_baseline("c") if target == "compact"
                       else Store(root).read(run_dir))
            except StoreError as exc:
                message = str(exc)
                # A run's changed salt is found on its first episode line: the run's folder.
                assert str(files[target] if target in ("baseline", "compact")
                           else run_dir) in message
                message.encode("utf-8")  # printable: no lone surrogate from the file
                event(f"{target}: refused")
                return
        event(f"{target}: read" + (" without its tail" if run.notes else ""))
        assert all(issubclass(w.category, StoreWarning) for w in caught), caught
        assert all("is truncated" in note for note in run.notes)
        assert len(run.episodes) <= len(originals["baseline"].splitlines())
        if target in ("baseline", "compact"):
            keys = [(e["rollout"], e["condition_key"], e["replicate"]) for e in run.episodes]
            assert len(set(keys)) == len(keys)

    damaged_files_load_or_fail_by_name()
