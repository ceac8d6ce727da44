"""The verdict first when metric or target rows fail the gate (issues 30 and 32): a session
whose outcome rows moved nothing ("no significant change") but whose metric got worse, or
whose target was missed, fails; the first line of its pytest-prove section says so, and
which part fails, before the outcome rows' own line. So do the markdown report's heading,
the JSON report's ``gate`` and ``pytest-prove check``'s first line. A session whose metric
and target rows fail nothing prints as it did."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from ._helpers_speed import copy_project, saved_project
from .conftest import INI


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner sessions' lines are matched whole: a wide terminal keeps them so."""
    monkeypatch.setenv("COLUMNS", "200")


#: A seeded agent: its outcomes never depend on SLOW, its latency on refund tickets is 30%
#: longer with SLOW=1; refund tickets stay unresolved 10% of the time (60% with BAD=1).
AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    SLOW = os.environ.get("SLOW") == "1"
    BAD = os.environ.get("BAD") == "1"


    @prove.rollout(replicates=120, failures=["unresolved"], successes=["resolved"],
                   metrics={"latency_s": "lower"})
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        rng = random.Random(prove_seed)
        latency = rng.lognormvariate(0.0, 0.5)
        if SLOW and ticket == "refund":
            latency *= 1.3
        rate = {"refund": 0.6 if BAD else 0.1, "password": 0.05}[ticket]
        outcome = "unresolved" if rng.random() < rate else "resolved"
        return prove.Episode(outcome, metrics={"latency_s": latency})
    """
)

#: Every session in blocks of 40 replicates (6 items, not 240): the same replicates, seeds
#: and episodes; what is checked is what the session, its reports and the command line say.
BLOCKS_INI = INI + "addopts = --prove-concurrency=40\n"

_SECTION = re.compile(r"^=+ pytest-prove =+$")


def _first_line(out: str) -> str:
    """The first line of the session's pytest-prove section (a blank line is none)."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if _SECTION.match(line))
    return next(line for line in lines[at + 1:] if line.strip())


@pytest.fixture(scope="module")
def _baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's project after saving baseline 'main': saved once for the module, its store
    copied into each test's project (every test compares against the same baseline)."""
    # A fixed salt: on some salts refund's unresolved rate was not shown to miss 0.02 (the
    # target test then passes, and the missed-target test failed in a clean-clone run).
    return saved_project(tmp_path_factory.mktemp("headline"),
                         {"tox.ini": BLOCKS_INI, "test_agent.py": AGENT},
                         "--prove-save-baseline=main", "--prove-salt=headline-1")


@pytest.fixture
def agent(pytester: pytest.Pytester, _baseline: Path) -> pytest.Pytester:
    copy_project(_baseline, pytester.path)
    return pytester


@pytest.mark.parametrize("quiet", [pytest.param([], id="default"),
                                   pytest.param(["-q"], id="quiet")])
def test_a_worse_metric_beside_unchanged_outcomes_heads_the_section_with_the_gate(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], quiet: list[str]) -> None:
    monkeypatch.setenv("SLOW", "1")
    result = agent.runpytest("--prove-baseline=main", "--prove-report=r.json", *quiet)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert _first_line(out) == ("pytest-prove: gate failed: metrics worse (latency_s in "
                                "ticket=refund); outcome rows: no significant change")
    # the outcome rows' own line follows, unchanged
    lines = out.splitlines()
    at = lines.index(_first_line(out))
    assert lines[at + 1].startswith("no significant change: nothing changed significantly")
    document = json.loads((agent.path / "r.json").read_text())
    assert document["verdict"] == "no significant change"  # the outcome rows' word, as it was
    assert document["gate"] == {
        "failed": True, "failed_on": ["metrics"],
        "headline": "gate failed: metrics worse (latency_s in ticket=refund); outcome rows: "
                    "no significant change"}
    # the command line's report says it first too, and so does its HTML page's heading
    monkeypatch.chdir(agent.path)
    from pytest_prove.cli import main

    capsys.readouterr()
    assert main(["report", "baseline:main", "latest", "--out", "r.html"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0] == ("gate failed: metrics worse (latency_s in ticket=refund); outcome rows: "
                       "no significant change"), said
    assert said[1].startswith("no significant change: report of baseline:main -> ")
    page = (agent.path / "r.html").read_text()
    assert '<h1 class="word-worse">gate failed on metrics</h1>' in page


def test_a_missed_target_beside_unchanged_outcomes_heads_the_section_with_the_gate(
        agent: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # refund's alone: password's 0.05 is shown to miss 0.02 on some salts, and the line names
    # the first row that fails (the test failed when password's did)
    result = agent.runpytest("--prove-baseline=main",
                             "--prove-target=ticket=refund: unresolved<=0.02",
                             "--prove-report=r.md", "-q")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    first = _first_line(out)
    assert first.startswith("pytest-prove: gate failed: target missed (unresolved<=0.02 in "
                            "ticket=refund"), first
    assert first.endswith("; outcome rows: no significant change"), first
    markdown = (agent.path / "r.md").read_text().splitlines()
    assert markdown[0] == "### pytest-prove: gate failed on targets"
    assert markdown[2].startswith("**gate failed: target missed (unresolved&lt;=0.02 in "
                                  "ticket=refund")
    # pytest-prove check says it first too
    monkeypatch.chdir(agent.path)
    from pytest_prove.cli import main

    capsys.readouterr()
    assert main(["check", "baseline:main", "latest"]) == 4
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith("check failed: target missed (unresolved<=0.02 in "
                              "ticket=refund"), said[0]


def test_metric_and_target_rows_that_fail_nothing_leave_the_section_as_it_was(
        agent: pytest.Pytester) -> None:
    result = agent.runpytest("--prove-baseline=main", "--prove-target=unresolved<=0.6",
                             "--prove-report=r.json")
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    assert _first_line(out).startswith("no significant change: nothing changed significantly")
    assert "gate failed" not in out
    gate = json.loads((agent.path / "r.json").read_text())["gate"]
    assert gate["failed"] is False and gate["failed_on"] == []
    assert gate["headline"].startswith("no significant change: ")


def test_outcome_rows_that_fail_the_gate_themselves_keep_their_own_line_first(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOW", "1")
    monkeypatch.setenv("BAD", "1")
    result = agent.runpytest("--prove-baseline=main", "--prove-report=r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert _first_line(out).startswith("worse: 1 condition got worse"), _first_line(out)
    assert "pytest-prove: gate failed: metrics worse" not in out
    gate = json.loads((agent.path / "r.json").read_text())["gate"]
    assert gate["failed_on"] == ["outcomes", "metrics"]
    assert gate["headline"].startswith("worse: 1 condition got worse")


def test_a_session_without_metric_or_target_rows_has_no_gate_line_nor_gate_object(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(BLOCKS_INI)
    pytester.makepyfile(test_agent=AGENT.replace('metrics={"latency_s": "lower"}', "")
                        .replace('metrics={"latency_s": latency}', ""))
    assert pytester.runpytest("--prove-save-baseline=main").ret == pytest.ExitCode.OK
    result = pytester.runpytest("--prove-baseline=main", "--prove-report=r.json", "-q")
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    assert _first_line(out).startswith("no significant change: nothing changed significantly")
    assert "gate failed" not in out
    document = json.loads((pytester.path / "r.json").read_text())
    assert "gate" not in document and "metrics" not in document
