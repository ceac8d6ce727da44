"""A baseline cut, thinned or edited by hand never lets a worse agent through (issue 29).

Each damage leaves a file that reads: a block cut to its first ten replicates (1b), a
condition's block deleted (1c), the episodes of a condition made errored (1d), an outcome's
digit flipped.  Each is refused when the baseline is loaded, by the session before any
rollout runs (exit 4) and by ``pytest-prove check`` (exit 1), naming the file, what its
header says, what its body holds and the fix.  Before, each was read as a thinner or rosier
baseline, and the gate passed a worse agent.

One real sweep is made per module, in process (``inline_session``: pytester's projects live
for one test, and every test here starts from the same files): baseline 'b' of a sound agent,
and run 'worse' of one whose failures in condition ``a`` rise from 0.2 to 0.5.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pytest_prove.cli import main
from pytest_prove.config.values import DEFAULT_FAIL_ON
from pytest_prove.review import review
from pytest_prove.store import Run, Store, StoreError
from pytest_prove.store.episodes import plain

from .conftest import inline_session

AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=100, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("case", ["a", "b"])
    def test_bot(case, prove_seed):
        rng = random.Random(prove_seed)
        rate = 0.5 if case == "a" and os.environ.get("WORSE") else 0.2
        return prove.Episode("unresolved" if rng.random() < rate else "resolved")
    """
)

REPLICATES = 100


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project with the baseline 'b' of the sound agent and the run 'worse' paired with it."""
    root = tmp_path_factory.mktemp("integrity")
    (root / "pytest.ini").write_text("[pytest]\nprove_allow_underpowered = true\n")
    (root / "test_bot.py").write_text(AGENT)
    code, out = inline_session(root, "-p", "no:xdist", "--prove-save-baseline", "b")
    assert code == 0, out
    code, out = inline_session(root, "-p", "no:xdist", "--prove-baseline", "b",
                               "--prove-name", "worse", env={"WORSE": "1"})
    # The gate is sound on the untouched baseline: the worse agent fails it.
    assert code == 1 and "worse" in out, out
    return root


@pytest.fixture
def project(pytester: pytest.Pytester, template: Path) -> Path:
    """This test's own copy of the template project."""
    shutil.copytree(template, pytester.path, dirs_exist_ok=True)
    return pytester.path


def _baseline(project: Path) -> Path:
    return project / ".prove" / "baselines" / "b.baseline"


def _blocks(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Each condition's case, and the lines (from, to) of its block, header at 0."""
    starts = [i for i, line in enumerate(lines) if line.startswith("@")]
    found = {}
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        found[json.loads(lines[start][1:])[2]["case"]] = (start, end)
    return found


def _edit(path: Path, change: Callable[[list[str]], None]) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    change(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def cut_to_ten(lines: list[str]) -> None:
    """1b: condition a's block keeps replicates 0 to 9; the header is as saved."""
    start, end = _blocks(lines)["a"]
    del lines[start + 11:end]


def drop_a(lines: list[str]) -> None:
    """1c: condition a's block deleted; the header's plan still lists it."""
    start, end = _blocks(lines)["a"]
    del lines[start:end]


def errored_a(lines: list[str]) -> None:
    """1d: every episode of a made errored (an exception), as a person would edit it."""
    start, end = _blocks(lines)["a"]
    block = json.loads(lines[start][1:])
    block[4].append("exception")
    lines[start] = "@" + json.dumps(block, separators=(",", ":"))
    for i in range(start + 1, end):
        fields = lines[i].split(" ")
        fields[1] = f"!{len(block[4]) - 1}"
        lines[i] = " ".join(fields)


def errored_a_and_counts(lines: list[str]) -> None:
    """1d, done with care: the header's counts changed to agree (only the digest shows it)."""
    errored_a(lines)
    header = json.loads(lines[0])
    counts = header["manifest"]["counts"]
    counts["with_outcome"] -= REPLICATES
    counts["errored"] += REPLICATES
    lines[0] = json.dumps(header)


def worse_a(lines: list[str]) -> None:
    """Every resolved episode of a made unresolved: a baseline that looks worse than it was,
    so a worse agent reads as no worse.  The structure and counts are as saved."""
    start, end = _blocks(lines)["a"]
    table = json.loads(lines[start][1:])[4]
    resolved, unresolved = table.index("resolved"), table.index("unresolved")
    for i in range(start + 1, end):
        fields = lines[i].split(" ")
        if fields[1] == str(resolved):
            fields[1] = str(unresolved)
        lines[i] = " ".join(fields)


#: Each damage, and what the refusal must say of it.
DAMAGE: dict[str, tuple[Callable[[list[str]], None], str]] = {
    "1b block cut to replicates 0-9": (
        cut_to_ten, r"b\.baseline: the baseline does not hold what its header says: case=a of "
                    r"test_bot\.py::test_bot holds 10 episode\(s\) \(replicates up to 9\), where "
                    r"the plan says 100"),
    "1c a condition's block deleted": (
        drop_a, r"b\.baseline: the baseline does not hold what its header says: its plan lists "
                r"2 condition\(s\), and the body lacks 1 of them \(case=a of "),
    "1d every episode of a errored": (
        errored_a, r"b\.baseline: the baseline does not hold what its header says: its counts "
                   r"say with_outcome 200, errored 0, and the body holds with_outcome 100, "
                   r"errored 100"),
    "1d errored, counts made to agree": (
        errored_a_and_counts, r"b\.baseline: edited or damaged since it was saved: its manifest "
                              r"and episodes no longer give the digest in its header"),
    "outcomes flipped to look worse": (
        worse_a, r"b\.baseline: edited or damaged since it was saved"),
}

FIX = "git checkout -- "


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_baseline_stops_the_session_before_any_rollout(
        pytester: pytest.Pytester, project: Path, damage: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    change, message = DAMAGE[damage]
    _edit(_baseline(project), change)
    runs = set((project / ".prove" / "runs").iterdir())
    monkeypatch.setenv("WORSE", "1")
    result = pytester.runpytest("-p", "no:randomly", "--prove-baseline=b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.re_match_lines([f"ERROR: .*{message}"])
    err = result.stderr.str()
    assert FIX in err and "pytest --prove-save-baseline b" in err
    output = result.stdout.str() + err
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert set((project / ".prove" / "runs").iterdir()) == runs  # no rollout ran


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_baseline_is_refused_by_check(project: Path, damage: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    store = str(project / ".prove")
    assert main(["--store", store, "check", "baseline:b", "worse"]) == 4  # sound: worse
    change, message = DAMAGE[damage]
    _edit(_baseline(project), change)
    capsys.readouterr()
    assert main(["--store", store, "check", "baseline:b", "worse"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pytest-prove check: ") and err.count("\n") == 1
    assert __import__("re").search(message, err), err


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_a_plan_of_a_million_conditions_the_body_lacks_is_refused(project: Path) -> None:
    def planned(lines: list[str]) -> None:
        header = json.loads(lines[0])
        plan = header["manifest"]["plan"]["test_bot.py::test_bot"]
        # json.dumps({"case": f"x{i}"}) written out: the same strings, without 1.6 s of CPU
        # spent building them (the refusal itself is what this test is about).
        assert json.dumps({"case": "x7"}) == '{"case": "x7"}'
        plan["conditions"] += [f'{{"case": "x{i}"}}' for i in range(1_000_000)]
        lines[0] = json.dumps(header)

    _edit(_baseline(project), planned)
    with pytest.raises(StoreError, match=r"its plan lists 1000002 condition\(s\), and the body "
                                         r"lacks 1000000 of them \(case=x0 of .* and 999996 "
                                         r"more\)"):
        Store(project / ".prove").load_baseline("b")


# ---- older formats: no digest, so their structure is what is checked


def _older(project: Path, compact: bool) -> Store:
    """The project's baseline 'b' written again as format 2 (compact, no digest) or
    format 1 (JSON lines)."""
    store = Store(project / ".prove")
    path = _baseline(project)
    if compact:
        head, _, body = path.read_bytes().partition(b"\n")
        header = json.loads(head)
        header.pop("digest")
        header["pytest_prove_baseline"] = 2
        path.write_bytes(json.dumps(header).encode() + b"\n" + body)
    else:
        store.write_baseline("b", store.load_baseline("b"), compact=False)
    return store


def _json_lines(change: Callable[[list[str]], None]) -> Callable[[list[str]], None]:
    """The same damage done to a baseline in JSON lines (format 1)."""
    def damage(lines: list[str]) -> None:
        records = [json.loads(line) for line in lines[1:]]
        a = [i for i, r in enumerate(records, 1) if r["condition"]["case"] == "a"]
        if change is cut_to_ten:
            del lines[a[10]:a[-1] + 1]
        elif change is drop_a:
            del lines[a[0]:a[-1] + 1]
        else:
            for i in a:
                record = json.loads(lines[i])
                record.update(outcome=None, error={"kind": "exception", "type": "E"})
                lines[i] = json.dumps(record)
    return damage


@pytest.mark.parametrize("compact", [True, False], ids=["format 2", "format 1"])
@pytest.mark.parametrize("damage", list(DAMAGE)[:3])
def test_older_formats_are_checked_against_their_header(project: Path, damage: str,
                                                        compact: bool) -> None:
    store = _older(project, compact)
    path = store.baseline_file("b")
    assert path is not None
    assert len(store.load_baseline("b").episodes) == 2 * REPLICATES  # sound, it reads
    change, message = DAMAGE[damage]
    _edit(path, change if compact else _json_lines(change))
    suffix = r"b\.baseline" if compact else r"b\.jsonl"
    with pytest.raises(StoreError, match=message.replace(r"b\.baseline", suffix)):
        store.load_baseline("b")


def test_the_digest_survives_crlf_line_ends_and_a_header_written_again(project: Path) -> None:
    """git may check a baseline out with CRLF ends, and a header's keys may be written in
    another order: neither is an edit of what it holds."""
    path = _baseline(project)
    want = [plain(e) for e in Store(project / ".prove").load_baseline("b").episodes]
    head, _, body = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    again = {"manifest": dict(reversed(header["manifest"].items())), **header}
    path.write_bytes((json.dumps(again, indent=None) + "\n").encode()
                     + body.replace(b"\n", b"\r\n"))
    assert [plain(e) for e in Store(project / ".prove").load_baseline("b").episodes] == want


# ---- any edit at random


KINDS = ("cut", "delete lines", "drop block", "digit", "errored", "plan", "counts",
         "swap events", "recount", "whitespace")
#: An edit: its kind, and three numbers that say where and what (taken modulo the sizes
#: they pick from, so that every draw is made before the file is looked at).
EDITS = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 2**32), st.integers(0, 2**32),
                           st.integers(0, 2**32)), min_size=1, max_size=4)


def _edited(lines: list[str], edits: list[tuple[str, int, int, int]]) -> list[str]:
    """``lines`` with ``edits``, of the kinds a person or a merge makes."""
    lines = list(lines)
    for what, x, y, z in edits:
        body = len(lines) - 1
        blocks = [i for i, line in enumerate(lines) if line.startswith("@")]
        if what == "cut":
            text = "\n".join(lines)
            lines = text[:x % (len(text) + 1)].split("\n")
        elif what == "delete lines" and body > 0:
            i = 1 + x % body
            del lines[i:i + 1 + y % 30]
        elif what == "drop block" and blocks:
            start = blocks[x % len(blocks)]
            del lines[start:next((b for b in blocks if b > start), len(lines))]
        elif what == "digit" and body > 0:
            i = 1 + x % body
            spots = [n for n, c in enumerate(lines[i]) if c.isdigit()]
            if spots:
                n = spots[y % len(spots)]
                lines[i] = lines[i][:n] + str(z % 10) + lines[i][n + 1:]
        elif what == "errored" and blocks:
            with contextlib.suppress(KeyError, ValueError, IndexError, TypeError):
                errored_a(lines)
        elif lines and what in ("plan", "counts", "swap events", "recount", "whitespace"):
            try:
                header = json.loads(lines[0])
                _header_edit(what, header["manifest"], lines, x, y)
            except (ValueError, KeyError, TypeError, AttributeError, IndexError):
                continue
            lines[0] = json.dumps(header, indent=None if what != "whitespace" else 1
                                  ).replace("\n", " ")
    return lines


def _header_edit(what: str, manifest: dict[str, Any], lines: list[str], x: int, y: int
                 ) -> None:
    plan, counts, rollouts = manifest["plan"], manifest["counts"], manifest["rollouts"]
    entry = next(iter(plan.values()))
    if what == "plan":
        if x % 2:
            entry["replicates"] = 1 + y % 200
        elif entry["conditions"]:
            entry["conditions"].pop(y % len(entry["conditions"]))
    elif what == "counts":
        counts[sorted(counts)[x % len(counts)]] = y % 401
    elif what == "swap events":
        declaration = next(iter(rollouts.values()))["declaration"]
        declaration["failures"], declaration["successes"] = (declaration["successes"],
                                                             declaration["failures"])
    elif what == "recount":
        # A careful forger: the plan and counts made to agree with the body as it now is.
        held: dict[str, set[int]] = {}
        ended = {"with_outcome": 0, "no_outcome": 0, "errored": 0}
        key = ""
        for line in lines[1:]:
            if line.startswith("@"):
                key = json.loads(line[1:])[1]
                held[key] = set()
            elif line and key:
                held[key].add(int(line.split(" ")[0]))
                ended["errored" if line.split(" ")[1].startswith("!") else "with_outcome"] += 1
        entry["conditions"] = sorted(held)
        entry["replicates"] = max((len(v) for v in held.values()), default=1)
        counts.update(episodes=sum(ended.values()), **ended)


@pytest.fixture(scope="module")
def originals(template: Path) -> tuple[bytes, Run, Run]:
    store = Store(template / ".prove")
    return (_baseline(template).read_bytes(), store.load_baseline("b"), store.load("worse"))


def _gate(before: Run, after: Run) -> bool:
    """Whether the gate fails when ``after`` is reviewed against ``before``."""
    try:
        done = review(before, after, events=None, q=0.05, max_mde=0.2,
                      fail_on=DEFAULT_FAIL_ON)
    except (ValueError, StoreError):
        return True  # refused: the gate does not pass
    return done.gate.failed


def test_the_gate_fails_on_the_untouched_baseline(originals: tuple[bytes, Run, Run]) -> None:
    _, base, worse = originals
    assert _gate(base, worse)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=EDITS)
def test_an_edited_baseline_never_lets_a_worse_agent_pass(
        tmp_path_factory: pytest.TempPathFactory, originals: tuple[bytes, Run, Run],
        edits: list[tuple[str, int, int, int]]) -> None:
    """Acceptance (issue 29): whatever the edits, loading refuses the file, or the gate
    fails the worse agent, or the file is the same baseline (same episodes, manifest)."""
    saved, base, worse = originals
    for what, *_ in edits:
        event(what)
    lines = _edited(saved.decode("utf-8").split("\n")[:-1], edits)
    # One store for every example, its baseline written over each time (nothing caches a
    # baseline read): a folder an example was 300 folders made, and deleted by a later run.
    root = tmp_path_factory.getbasetemp() / "edited"
    (root / "baselines").mkdir(parents=True, exist_ok=True)
    (root / "baselines" / "b.baseline").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            edited = Store(root).load_baseline("b")
        except StoreError as exc:
            assert "b.baseline" in str(exc)
            event("refused when loaded")
            return
    if _gate(edited, worse):
        event("the gate failed")
        return
    assert edited.manifest == base.manifest
    assert [plain(e) for e in edited.episodes] == [plain(e) for e in base.episodes]
