"""The design check from the baseline's rates, end to end (--prove-design-rates).

The agent fails every EVERY-th replicate, so the baseline's rate of one condition is known:
4 of 80 (0.05) or 40 of 80 (0.5). One test (a failure and its mirror success), twins: any
base rate needs 99 replicates; the baseline's 0.05 lets 75 do, so 80 pass only thanks to
it, and the plan and the run's summary say so, while the default (any rate) refuses 80;
at 0.5 the check asks 99 as before.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ._helpers_speed import copy_project
from .conftest import inline_session

AGENT = textwrap.dedent(
    """
    import os

    import pytest_prove as prove


    @prove.rollout(replicates=80, failures=["unresolved"], successes=["resolved"])
    def test_agent(prove_replicate):
        every = int(os.environ["EVERY"])
        return prove.Episode("unresolved" if prove_replicate % every == 0 else "resolved")
    """
)


#: The design check is not relaxed; the 80 replicates run as one block (1 item a session,
#: not 80: the same replicates, seeds and episodes; the design check reads none of that).
INI = "[pytest]\naddopts = --prove-concurrency=80\n"

#: The design from the baseline's rates is asked for (the default reads every rate).
RATES = "--prove-design-rates=baseline"


@pytest.fixture
def agent(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    return pytester


#: saving a baseline has nothing to read rates from: 80 fail the check for any rate
SAVE = ("--prove-save-baseline=base", "--prove-allow-underpowered")


def _baseline(agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, every: int) -> None:
    monkeypatch.setenv("EVERY", str(every))
    saved = agent.runpytest("-p", "no:cacheprovider", *SAVE)
    assert saved.ret == 0, saved.stdout.str()


@pytest.fixture(scope="module")
def _saved_every_20(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's project after saving baseline 'base' with EVERY=20, in this process, once
    for the module's three tests that read it (each works on a copy): the same session
    _baseline runs."""
    root = tmp_path_factory.mktemp("rates20")
    (root / "tox.ini").write_text(INI)
    (root / "test_agent.py").write_text(AGENT)
    code, out = inline_session(root, *SAVE, env={"EVERY": "20"})
    assert code == pytest.ExitCode.OK, out
    return root


@pytest.fixture
def agent20(agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
            _saved_every_20: Path) -> pytest.Pytester:
    """``agent`` with baseline 'base' saved at EVERY=20 (4 of 80 fail: rate 0.05)."""
    monkeypatch.setenv("EVERY", "20")
    copy_project(_saved_every_20, agent.path)
    assert (agent.path / ".prove" / "baselines" / "base.baseline").is_file()
    return agent


@pytest.mark.slow
def test_low_baseline_rates_ask_fewer_replicates_and_say_why(
        agent20: pytest.Pytester) -> None:
    plan = agent20.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", RATES,
                             "--prove-plan")
    assert plan.ret == 0, plan.stdout.str()
    plan.stdout.fnmatch_lines([
        "design check: the smallest rise one condition alone would be flagged for is * at "
        "its worst base rate, 0.149*",
        "design check from baseline 'base''s rates: each of the 1 tests read at base rates "
        "within its exact 99% interval (Clopper-Pearson) from the baseline, not at every "
        "rate from 0 to 1: 75 replicates a condition would do, instead of 99 for any base "
        "rate; these 80 pass only thanks to the baseline's rates*"])
    assert "would stop" not in plan.stdout.str()
    # the run itself passes the check, and its summary says what the design rests on
    run = agent20.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", RATES,
                            "--prove-report=r.json")
    assert run.ret == 0, run.stdout.str()
    run.stdout.fnmatch_lines(["*design from baseline 'base''s rates: 80 replicates a "
                              "condition passed the design check only because*(99 would be "
                              "needed for any base rate)*"])
    assert run.stdout.str().count("design from baseline 'base''s rates") == 1
    notes = json.loads((agent20.path / "r.json").read_text())["notes"]
    assert any(note.startswith("design from baseline 'base''s rates: 80 replicates")
               for note in notes), notes
    # the default reads every base rate: the check refuses 80
    every = agent20.runpytest("-p", "no:cacheprovider", "--prove-baseline=base")
    assert every.ret != 0
    every.stderr.fnmatch_lines(["*design check failed: with 80 replicates a condition and 1 "
                                "tests*Use 99 replicates a condition*"])
    assert "baseline 'base'" not in every.stderr.str() + every.stdout.str()


@pytest.mark.slow
def test_the_margins_design_check_reads_the_baseline_rates_too(
        agent20: pytest.Pytester) -> None:
    plan = agent20.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", RATES,
                             "--prove-plan",
                             "--prove-margin=0.15")
    assert plan.ret == 0, plan.stdout.str()
    plan.stdout.fnmatch_lines(["margin design check: every one of the 1 tests shown within the "
                               "margin 0.15 when nothing changed: 0.82 of the time at base "
                               "rate 0.1*base rates within each row's exact 99% interval "
                               "from the baseline)"])
    every = agent20.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", "--prove-plan",
                              "--prove-margin=0.15")
    assert every.ret != 0
    every.stdout.fnmatch_lines(["*design check fails for the margin: *the run would stop here"])


@pytest.mark.slow
def test_rates_near_a_half_ask_as_many_as_any_rate_and_the_refusal_names_them(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _baseline(agent, monkeypatch, 2)
    plan = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", RATES,
                           "--prove-plan")
    plan.stdout.fnmatch_lines([
        "design check from baseline 'base''s rates: *: 99 replicates a condition would do, "
        "instead of 99 for any base rate; these 80 do not pass even so*",
        "*design check fails: one condition alone could not be flagged for a rise of 0.200, "
        "the most you accept, read at base rates within each test's exact 99% interval from "
        "baseline 'base'; 99 replicates for any base rate; 99 replicates a condition would "
        "pass*the run would stop here"])
    run = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", RATES)
    assert run.ret != 0
    run.stderr.fnmatch_lines(["*design check failed: with 80 replicates a condition and 1 "
                              "tests, one condition alone could only be flagged for a * of "
                              "* (at base rate *, read at base rates within each test's exact "
                              "99% interval from baseline 'base'; 99 replicates for any base "
                              "rate)*Use 99 replicates a condition*"])


def test_a_bad_design_rates_word_is_a_usage_error(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVERY", "20")
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-design-rates=some")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prove-design-rates: expected baseline or any, got "
                                 "'some'*"])
    agent.makeini("[pytest]\nprove_design_rates = maybe\n")
    result = agent.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option prove_design_rates: expected baseline or any*"])


@pytest.mark.slow
def test_under_xdist_the_worker_reads_the_baseline_and_the_summary_says_so(
        agent20: pytest.Pytester) -> None:
    # A worker collects and checks the design: it reads the baseline from the store, and
    # its note reaches the controller's summary. One worker takes that path.
    run = agent20.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", RATES,
                            "-n", "1")
    assert run.ret == 0, run.stdout.str() + run.stderr.str()
    run.stdout.fnmatch_lines(["*design from baseline 'base''s rates: 80 replicates a "
                              "condition passed the design check only because*"])
    half = agent20.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", "-n", "1")
    assert half.ret == pytest.ExitCode.USAGE_ERROR
    half.stdout.fnmatch_lines(["*design check failed: with 80 replicates a condition*"])
