"""--prove-live: the status line of a sweep while it runs, and each ``-v`` line's outcome."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

# Loaded before pytester's first in-process run: it forgets modules a run imported, and
# numpy (imported by the design check) cannot be imported twice in one process.
import pytest_prove.stats  # noqa: F401
from pytest_prove.plugin import live
from pytest_prove.plugin.live import outcome_tag
from pytest_prove.record import ending

from .conftest import INI, load

#: 2 conditions of 30 replicates; every seventh seed raises (an errored episode), each
#: episode uses 100 input and 10 output tokens of a priced model.
SWEEP = textwrap.dedent(
    """
    import random

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=30, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_live(ticket, prove_seed):
        prove.usage("sim-model", input=100, output=10)
        if prove_seed % 7 == 0:
            raise RuntimeError("the tool broke")
        rng = random.Random(prove_seed)
        return prove.Episode("unresolved" if rng.random() < 0.3 else "resolved")
    """
)

END = re.compile(r"^prove \(end\): (?P<done>[\d,]+)/(?P<planned>[\d,]+) episodes, "
                 r"(?P<errored>[\d,]+) errored, tokens (?P<input>[\d,]+) in, "
                 r"(?P<output>[\d,]+) out \$(?P<price>[\d.,]+), in ", re.MULTILINE)


@pytest.fixture
def sweep(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI + "prove_prices =\n    sim-model = 2.00 8.00\n")
    pytester.makepyfile(test_live=SWEEP)
    return pytester


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _end_equals_store(pytester: pytest.Pytester, output: str) -> None:
    """The last live line's counts are the stored run's."""
    found = END.findall(output)
    assert len(found) == 1, output
    match = END.search(output)
    assert match is not None
    run = load(pytester)
    episodes = list(run.episodes)
    assert _number(match["done"]) == len(episodes) == 60
    assert _number(match["planned"]) == 60
    errored = sum(1 for e in episodes if ending(e) == "errored")
    assert errored > 0
    assert _number(match["errored"]) == errored == run.manifest["counts"]["errored"]
    spent_in = sum(int((e.get("tokens") or {}).get("input") or 0) for e in episodes)
    spent_out = sum(int((e.get("tokens") or {}).get("output") or 0) for e in episodes)
    assert (_number(match["input"]), _number(match["output"])) == (spent_in, spent_out)
    assert float(match["price"]) == pytest.approx(
        (spent_in * 2.00 + spent_out * 8.00) / 1e6, abs=5e-5)


def test_the_end_line_shows_the_stores_counts(sweep: pytest.Pytester) -> None:
    result = sweep.runpytest("-p", "no:xdist", "--prove-live=on")
    _end_equals_store(sweep, result.stdout.str())


def test_auto_writes_nothing_when_the_output_is_not_a_terminal(sweep: pytest.Pytester) -> None:
    # pytester's in-process output is a buffer, not a terminal: auto (the default) is off.
    result = sweep.runpytest("-p", "no:xdist")
    assert "prove" in result.stdout.str()  # the session's own summary
    assert "prove (end)" not in result.stdout.str()
    assert load(sweep).manifest["counts"]["episodes"] == 60


def test_off_and_the_ini_switch_it(sweep: pytest.Pytester) -> None:
    assert "prove (end)" not in sweep.runpytest("-p", "no:xdist", "--prove-live=off").stdout.str()
    sweep.makeini(INI + "prove_live = on\n")
    assert "prove (end)" in sweep.runpytest("-p", "no:xdist").stdout.str()
    # the option wins over the ini
    assert "prove (end)" not in sweep.runpytest("-p", "no:xdist", "--prove-live=off").stdout.str()


def test_without_the_terminal_plugin_the_session_runs(sweep: pytest.Pytester) -> None:
    result = sweep.runpytest("-p", "no:xdist", "-p", "no:terminal", "--prove-live=on")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the errored episodes fail their items
    assert load(sweep).manifest["counts"]["episodes"] == 60


@pytest.mark.parametrize("value", ["yes", ""])
def test_a_bad_value_is_a_named_usage_error(sweep: pytest.Pytester, value: str) -> None:
    result = sweep.runpytest("-p", "no:xdist", f"--prove-live={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--prove-live = {value!r}: not a mode of the live view; "
                                 "use auto, on or off*"])
    assert "INTERNALERROR" not in result.stderr.str() + result.stdout.str()


def test_a_bad_ini_value_is_a_named_usage_error(sweep: pytest.Pytester) -> None:
    sweep.makeini(INI + "prove_live = sometimes\n")
    result = sweep.runpytest("-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*tox.ini prove_live = 'sometimes': not a mode of the live "
                                 "view; use auto, on or off*"])


def _words(output: str) -> dict[str, str]:
    """Each replicate item's ``-v`` word with its outcome, by item id."""
    found = {}
    for line in output.splitlines():
        match = re.search(r"(test_live\.py::test_live\[\w+-r\d+\])", line)
        word = re.search(r"(PASSED|FAILED) \[([^\]]+)\]", line)
        if match and word:
            found[match[1]] = word[2]
    return found


def _check_words(pytester: pytest.Pytester, words: dict[str, str]) -> None:
    run = load(pytester)
    expected = {}
    for episode in run.episodes:
        error = episode.get("error")
        expected[episode["item"]] = (episode["outcome"] if error is None
                                     else f"none ({error['kind']})")
    assert len(expected) == 60
    assert words == expected


def test_a_block_of_replicates_counts_its_outcomes() -> None:
    properties = [("prove_replicate", 0), ("prove_outcome", "resolved"),
                  ("prove_replicate", 1), ("prove_outcome", "resolved"),
                  ("prove_replicate", 2), ("prove_outcome", "none (exception)")]
    assert outcome_tag(properties) == "2 resolved, 1 none (exception)"
    assert outcome_tag([("prove_outcome", "resolved")]) == "resolved"
    assert outcome_tag([["prove_outcome", "resolved"]]) == "resolved"  # as a worker sends it
    assert outcome_tag([("other", "x")]) is None
    assert outcome_tag([]) is None


#: Runs pytest once for each argument list of RUNS (a JSON list) in this one process, a
#: line MARK between their outputs, the project's modules dropped after each (as an IDE's
#: runner calling pytest.main does).
TERMINAL_RUNS = textwrap.dedent(
    """
    import json
    import os
    import sys

    import pytest

    for i, args in enumerate(json.loads(sys.argv[1])):
        if i:
            print(sys.argv[2], flush=True)
        modules = set(sys.modules)
        pytest.main(["-p", "no:xdist", "-p", "no:cacheprovider", *args])
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(os.getcwd()):
                del sys.modules[name]
    """
)


def _on_a_terminal(pytester: pytest.Pytester, *runs: list[str]) -> list[str]:
    """What pytest prints when its output is a pseudo-terminal, for each list of arguments:
    a subprocess, since only then is the output a terminal (pytester's in-process runs write
    to a buffer); the sessions one after another in that one process (a process each cost
    an interpreter's and the plugin's start-up more)."""
    pty = pytest.importorskip("pty")  # POSIX only
    mark = "=== next session ==="
    leader, follower = pty.openpty()
    env = dict(os.environ, COLUMNS="200")
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", TERMINAL_RUNS, json.dumps(list(runs)), mark],
            cwd=pytester.path, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower,
            env=env)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the pty is closed once the child has exited (Linux: EIO)
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait()
    finally:
        os.close(leader)
    text = re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode("utf-8", "replace"))
    outputs = text.split(mark)
    assert len(outputs) == len(runs), text
    return outputs


@pytest.mark.slow
def test_auto_on_a_terminal_shows_it_and_quiet_hides_it(sweep: pytest.Pytester) -> None:
    shown, quiet = _on_a_terminal(sweep, [], ["-q"])
    assert re.search(r"^prove \(end\): 60/60 episodes", shown, re.MULTILINE), shown
    assert "passed" in quiet  # the session ran and said so
    assert "prove (end)" not in quiet
    assert "prove: " not in quiet


def test_the_short_summary_keeps_pytests_word(sweep: pytest.Pytester) -> None:
    # A fixed salt: the summary needs an item that raised (a seed divisible by 7), and on a
    # new salt each run none of the 60 seeds was, (6/7)^60 = 1e-4 of runs (it happened in a
    # clean-clone CI run); salt 'live' raises on some and passes the others.
    result = sweep.runpytest("-p", "no:xdist", "-v", "-rA", "--prove-salt=live")
    # Each item's verbose line shows its outcome without the live view too (was
    # test_each_verbose_line_shows_its_outcome's session: the same, without -rA).
    _check_words(sweep, _words(result.stdout.str()))
    summary = result.stdout.str().split("short test summary info")[1]
    assert re.search(r"^FAILED test_live\.py::test_live\[\w+-r\d+\] - RuntimeError", summary,
                     re.MULTILINE), summary
    assert re.search(r"^PASSED test_live\.py::test_live\[", summary, re.MULTILINE), summary
    assert "[none (exception)]" not in summary


# [xdist] on one worker: the lines are the controller's, as with two (a worker start less);
# [xdist-v] on two, whose reports interleave above the lines that count them.
@pytest.mark.parametrize("args", [["-n", "1"], ["-n", "2", "-v"], ["-p", "no:xdist"],
                                  ["-p", "no:xdist", "-v"]], ids=["xdist", "xdist-v", "one",
                                                                  "one-v"])
def test_every_line_is_a_line_of_its_own(sweep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                         args: list[str]) -> None:
    """Each live line on a line of its own, and the end line's counts the store's (under
    xdist: was test_the_end_line_shows_the_stores_counts_under_xdist, a session of its own at
    the default interval).  With -v, the same sessions also show each item's outcome on its
    verbose line (were test_each_verbose_line_shows_its_outcome and its _under_xdist twin,
    sessions of their own without the live view; in one process without it:
    test_the_short_summary_keeps_pytests_word) and each live line counts the items
    reported above it (was test_each_line_counts_the_items_reported_above_it[one-v] and
    [xdist-v], the very same sessions)."""
    monkeypatch.setattr(live, "INTERVAL", 0.0)  # a line after every episode
    result = sweep.runpytest(*args, "--prove-live=on")
    output = result.stdout.str()
    assert "INTERNALERROR" not in output
    lines = output.splitlines()
    around = [(lines[i - 1], lines[i + 1]) for i, line in enumerate(lines)
              if line.startswith("prove: ")]
    assert around and all(before and after for before, after in around), output  # no blank
    # xdist writes its dots without pytest's file prefix: each line still starts a line.
    assert not re.search(r"[.F]prove( \(end\))?: ", output), output
    shown = [_number(m) for m in re.findall(r"^prove: ([\d,]+)/60 episodes", output,
                                            re.MULTILINE)]
    after = output.split("prove: ")[1].split("\n")[1]
    assert re.search(r"^(test_live\.py|\[gw\d\]|[.F])", after), output  # pytest's next line
    assert len(shown) >= 10, output
    assert shown == sorted(shown) and shown[-1] <= 60
    _end_equals_store(sweep, output)
    if "-v" in args:
        _check_words(sweep, _words(output))
        _each_line_counts_the_items_reported_above_it(output)
        if "-n" not in args:
            result.stdout.fnmatch_lines(["*test_live.py::test_live[[]refund-r000[]] * [[]*[]]*"])


def test_the_store_counts_each_rollouts_episodes() -> None:
    from pytest_prove.store.tally import Endings

    states = Endings()
    for r in range(5):
        states.put("a", "k1", r, "with_outcome")
    states.put("a", "k2", 90_000, "errored")  # far ahead: kept aside, still counted
    states.put("b", "k1", 0, "no_outcome")
    states.put("a", "k1", 0, "errored")  # a replaced line counts once
    assert states.by_rollout() == {"a": 6, "b": 1}
    assert states.in_condition("a", "k1") == 5
    assert states.in_condition("a", "k2") == 1
    assert states.in_condition("c", "k1") == 0


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_sequential_conditions_decided_are_shown(pytester: pytest.Pytester) -> None:
    from .test_sequential import SWEEP as SEQUENTIAL

    pytester.makepyfile(test_sweep=SEQUENTIAL)
    one = ("-p", "no:xdist", "-p", "no:randomly")
    saved = pytester.runpytest(*one, "--prove-concurrency=55", "--prove-save-baseline=base",
                               "-q")
    assert saved.ret == 0, saved.stdout.str()
    same = pytester.runpytest(*one, "--prove-baseline=base", "--prove-sequential",
                              "--prove-live=on")
    # Nothing changed and the twins replay their seed: each condition stops at its third
    # look (12 replicates of 220: no discordant twin in 12 rules out a change of 0.2 by a
    # likelihood ratio of 1.25^12 = e^2.7), and the end line counts what ran as planned.
    same.stdout.fnmatch_lines(["prove (end): 48/48 episodes, 0 errored, "
                               "4 of 4 conditions decided, in *"])
    assert len(list(load(pytester).episodes)) == 48


def test_an_outcome_reaches_the_terminal_as_text() -> None:
    assert outcome_tag([("prove_outcome", "bad\x1b[31m\u202e")]) == "bad\\x1b[31m\\u202e"


def _each_line_counts_the_items_reported_above_it(output: str) -> None:
    """The session reads a report's episodes before pytest (and the live line) log it: a
    line counts every item whose outcome pytest wrote above it, its own included (read
    after them, the counts were one report late).  ``output``: a -v session's, a live line
    after every episode."""
    reported = failed = 0
    checked = 0
    for line in output.splitlines():
        if re.search(r"test_live\.py::test_live\[\w+-r\d+\]", line) and \
                re.search(r" (PASSED|FAILED) ", line):
            reported += 1
            failed += " FAILED " in line
        found = re.match(r"^prove: ([\d,]+)/60 episodes, ([\d,]+) errored", line)
        if found:
            assert (_number(found[1]), _number(found[2])) == (reported, failed), output
            checked += 1
    assert failed > 0 and checked >= 10, output
