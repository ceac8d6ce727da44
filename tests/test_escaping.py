"""What a rollout writes is shown as text: never markdown, HTML or terminal control.

A condition value, a case id, a step, a model or an error message reaches the markdown
report, GitHub's step summary and the terminal; there it must read as itself, on one line, at
a bounded length, while the JSON keeps it whole.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_prove.cli import main
from pytest_prove.report._format import plain_text, terminal_text
from pytest_prove.report.markdown import escape, render_markdown
from pytest_prove.report.terminal import format_comparison
from pytest_prove.review import Labels
from pytest_prove.stats import RowInput, compare

from ._helpers_speed import copy_with_baseline, saved_project
from .conftest import reviewed

IMAGE = "![px](http://127.0.0.1:9/p.png)"
BREAKS = "a\rb\n# heading"
ANSI = "\x1b[31mred\x1b[0m"
BIDI = "abc\u202edcba"
LONG = "x" * 100_000

#: An agent whose condition values, case ids, steps, models and errors are hostile text.
HOSTILE_BOT = textwrap.dedent(
    r"""
    import os
    import random

    import pytest
    import pytest_prove as prove

    VALUES = ["![px](http://127.0.0.1:9/p.png)", "a\rb\n# heading", "\x1b[31mred\x1b[0m",
              "abc\u202edcba", "x" * 100_000]
    FAIL = float(os.environ.get("FAIL", "0.05"))


    @prove.rollout(replicates=20, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", VALUES, ids=["image", "breaks", "ansi", "bidi", "long"])
    def test_bot(ticket, prove_seed):
        rng = random.Random(prove_seed)
        with prove.step(ticket):
            prove.usage(ticket, 10, 5)
        if os.environ.get("ERRORS") and rng.random() < 0.1:
            raise RuntimeError(ticket)
        outcome = "unresolved" if rng.random() < FAIL else "resolved"
        return prove.Episode(outcome, meta={"case_id": ticket})
    """
)

#: Characters that end a line somewhere: in a terminal, in Python's splitlines, in markdown.
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"

#: The tags the markdown renderer writes itself.
OWN_TAGS = re.compile(r"</?(sub|code)>")


def _unescaped_pipes(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row))


def _assert_safe_markdown(text: str) -> None:
    assert "![" not in text
    assert "<" not in OWN_TAGS.sub("", text)
    assert not set(LINE_BREAKS[1:]) & set(text)
    assert "\x1b" not in text and "\u202e" not in text
    rows = [line for line in text.split("\n") if line.startswith("|")]
    assert rows, text
    # Every row of a table has its table's columns: none of a rollout's text split a cell.
    tables: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line.startswith("|"):
            tables[-1].append(line)
        elif tables[-1]:
            tables.append([])
    for table in filter(None, tables):
        assert len({_unescaped_pipes(row) for row in table}) == 1, table
    headings = [line for line in text.split("\n") if line.lstrip().startswith("#")]
    assert all(line.startswith("### pytest-prove: ") for line in headings), headings


def _assert_safe_terminal(text: str) -> None:
    assert "\x1b" not in text and "\u202e" not in text
    assert not set(LINE_BREAKS[1:]) & set(text)
    # The longest lines of ours (the verdict, the method) quote a few values of at most 80.
    long = [line[:100] for line in text.split("\n") if len(line) > 600]
    assert not long, long


#: The hostile agent's ini: its design check relaxed.
_INI = "[pytest]\nprove_allow_underpowered = true\n"
#: The project of the module's saved baseline: each condition's 20 replicates run as one block
#: (5 items a session, not 100; the same replicates, seeds and episodes: what is checked is
#: how their text is shown).  _sweeps, whose episodes may raise, runs them an item each.
_PROJECT = {"tox.ini": _INI + "addopts = --prove-concurrency=20\n", "test_bot.py": HOSTILE_BOT}
_KNOBS = ("FAIL", "ERRORS")


def _worse(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
           *worse_args: str) -> pytest.RunResult:
    """The hostile agent's worse run against baseline 'base': its result."""
    monkeypatch.setenv("FAIL", "0.9")
    return pytester.runpytest("-p", "no:cacheprovider", "--prove-baseline", "base",
                              "--prove-name", "worse", *worse_args)


def _sweeps(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
            *worse_args: str) -> pytest.RunResult:
    """A baseline, then a worse run of the hostile agent; the worse run's result.

    The baseline is made on a fixed salt: with ERRORS set, a tenth of the episodes error,
    and on a fresh salt about one baseline in 18 had a condition past --prove-max-errored
    (6 or more of 20), was not saved, and the worse run found no baseline (seen in a loaded
    run of the suite)."""
    pytester.makeini(_INI)
    pytester.makepyfile(test_bot=HOSTILE_BOT)
    saved = pytester.runpytest("-p", "no:cacheprovider", "--prove-salt=escaping",
                               "--prove-save-baseline", "base")
    assert "not saved" not in saved.stdout.str(), saved.stdout.str()
    return _worse(pytester, monkeypatch, *worse_args)


@pytest.fixture(scope="module")
def _saved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The hostile agent's project after saving baseline 'base' on the fixed salt, without
    errors (FAIL and ERRORS unset): the baseline _sweeps saves, saved once for the module in
    this process; each test that reads it works on a copy."""
    with pytest.MonkeyPatch.context() as patch:
        for name in _KNOBS:
            patch.delenv(name, raising=False)
        yield saved_project(tmp_path_factory.mktemp("hostile"), _PROJECT,
                            "--prove-salt=escaping", "--prove-save-baseline", "base")


@pytest.fixture
def hostile(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
            _saved: Path) -> pytest.Pytester:
    """The hostile agent's project with baseline 'base' saved (a copy of :func:`_saved`)."""
    return copy_with_baseline(_saved, pytester, monkeypatch, "base", _KNOBS)


def test_session_report_summary_and_terminal_show_rollout_text_as_text(
        hostile: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester = hostile
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = _worse(pytester, monkeypatch, "--prove-report=r.md")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = "\n".join(result.outlines)
    _assert_safe_terminal(out)
    # One line, its breaks shown as escapes, the text still there.
    assert any("ticket=a\\rb\\n# heading" in line for line in result.outlines), out
    # read_bytes: read_text would turn a stray \r into a line end.
    for path in (pytester.path / "r.md", summary):
        text = path.read_bytes().decode()
        _assert_safe_markdown(text)
        assert "&#33;&#91;px&#93;" in text  # the image reads as its characters


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_command_line_shows_rollout_text_as_text_and_json_keeps_it_whole(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ERRORS", "1")
    _sweeps(pytester, monkeypatch)
    summary = pytester.path / "cli-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    store = ["--store", str(pytester.path / ".prove")]
    capsys.readouterr()
    for args in (["show", "worse", "-v"], ["diff", "base", "worse", "-v"],
                 ["check", "base", "worse"], ["where", "worse"],
                 ["compare", "base", "worse"], ["fix-check", "base", "worse"],
                 ["cost", "worse"], ["cost", "base", "worse"], ["plan", "--from", "worse"],
                 ["flips", "base", "worse", "-v"]):
        code = main([*store, *args])
        out = capsys.readouterr().out
        assert code in (0, 4), (args, out)
        _assert_safe_terminal(out)
    # A refusal that lists the run's conditions (flips --condition names none of them) lists
    # them as text too: it printed them raw, escapes and 100,000 characters included.
    assert main([*store, "flips", "base", "worse", "--condition", "ticket=nothing"]) == 1
    err = capsys.readouterr().err
    assert "no condition 'ticket=nothing' was compared" in err and "\\x1b[31mred" in err
    _assert_safe_terminal(err)
    _assert_safe_markdown(summary.read_bytes().decode())
    assert main([*store, "diff", "base", "worse", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    conditions = {row["condition"] for row in doc["comparison"]["rows"]}
    assert {f"ticket={v}" for v in (IMAGE, BREAKS, ANSI, BIDI, LONG)} == conditions


def test_gate_reasons_show_rollout_text_as_text(
        hostile: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """The gate's reasons name conditions (those no longer collected, those a baseline would
    lose): the summary, -q, the gate's failed report and `check` printed them raw, ESC
    sequences, line breaks and 100,000 characters included.  (Baseline 'base' of the five
    conditions is the module's, saved on a fixed salt; it was saved here on a fresh one.)"""
    pytester = hostile
    pytester.makepyfile(test_bot=HOSTILE_BOT.replace(
        '("ticket", VALUES, ids=["image", "breaks", "ansi", "bidi", "long"])',
        '("ticket", VALUES[:1], ids=["image"])'))
    for quiet in ([], ["-q"]):
        result = pytester.runpytest("-p", "no:cacheprovider", "--prove-baseline", "base",
                                    "--prove-update-baseline", *quiet)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        out = "\n".join(result.outlines)
        assert "4 are no longer collected" in out and "not saved" in out, out[:2000]
        _assert_safe_terminal(out)
        assert "ticket=\\x1b[31mred\\x1b[0m" in out
    capsys.readouterr()
    assert main(["--store", str(pytester.path / ".prove"), "check", "base", "latest"]) == 4
    out = capsys.readouterr().out
    assert "check failed: only 1 of the 5 condition(s)" in out
    _assert_safe_terminal(out)


def test_markdown_escapes_every_field_a_rollout_or_the_store_fills() -> None:
    hostile = f"{IMAGE}|{BREAKS}\u2028<img src=x>`code`\\|*b* _i_ ~s~ {ANSI}"
    comparison = compare([RowInput(f"ticket={hostile}", hostile, "rise", 2, 50, 40, 50),
                          RowInput("ticket=plain", "unresolved", "rise", 5, 50, 6, 50)])
    labels = Labels(before=hostile, after=hostile, cases={f"ticket={hostile}": hostile})
    found = reviewed(comparison, labels, not_run=(hostile, LONG), new=(hostile,),
                     left_out={hostile: 3})
    text = render_markdown(found, verbose=True)
    _assert_safe_markdown(text)
    assert "`" not in text and "*b*" not in text and "_i_" not in text and "~s~" not in text
    assert len(text) < 20_000  # a 100,000-character value is shortened here too
    lines = format_comparison(comparison, before=hostile, after=hostile, verbose=True)
    _assert_safe_terminal("\n".join(lines))


PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None)


@PROPERTY
@given(st.text(max_size=400))
def test_escape_leaves_no_markdown_html_or_line_break(text: str) -> None:
    escaped = escape(text)
    assert not set(LINE_BREAKS) & set(escaped)
    assert "|" not in escaped.replace("\\|", "")
    assert "![" not in escaped and "<" not in escaped and "`" not in escaped
    assert "\\" not in escaped.replace("\\|", "")


@PROPERTY
@given(st.text(max_size=400), st.integers(min_value=1, max_value=120))
def test_terminal_text_is_printable_and_bounded(text: str, limit: int) -> None:
    shown = terminal_text(text, limit)
    assert len(shown) <= limit
    assert shown.isprintable(), ascii(shown)
    if len(text) <= limit and text.isprintable():
        assert shown == text


@PROPERTY
@given(st.text(max_size=400))
def test_plain_text_keeps_its_lines_and_escapes_the_rest(text: str) -> None:
    shown = plain_text(text)
    assert all(line.isprintable() for line in shown.split("\n")), ascii(shown)
    assert shown.count("\n") == text.count("\n")
    if text.isprintable():
        assert shown == text
