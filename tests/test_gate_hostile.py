"""A hostile review of the gate (issue 29, "the gate fails closed"): can a worse agent pass?

One rollout, two conditions (``case=a``, ``case=b``) of 200 replicates (in blocks of 40), a
failure ``bad`` and a success ``good``; the worse agent's ``bad`` rate in ``a`` goes from 0.2
to 0.5. With ``HIDE`` set, the worse agent ends that share of its ``bad`` episodes of ``a``
without an outcome instead (``prove.NoOutcome``, or with ``RAISE`` an exception), so they drop
out of a comparison that ignores missing outcomes.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_prove.cli import main

from ._helpers_speed import copy_with_baseline, saved_project

AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    RATE = {"a": float(os.environ.get("A_BAD", "0.2")), "b": 0.2}
    HIDE = float(os.environ.get("HIDE", "0"))


    @prove.rollout(replicates=200, failures=["bad"], successes=["good"])
    @pytest.mark.parametrize("case", ["a", "b"])
    def test_agent(case, prove_seed):
        outcome = "bad" if random.Random(prove_seed).random() < RATE[case] else "good"
        if case == "a" and outcome == "bad" and random.Random(prove_seed ^ 7).random() < HIDE:
            if os.environ.get("RAISE") == "1":
                raise ConnectionError("the provider is down")
            raise prove.NoOutcome("gave up")
        return prove.Episode(outcome, meta={"case_id": case})
    """
)


#: Blocks of 40 replicates (10 items a session, not 400): the replicates, their seeds and
#: what each episode records are the same; the per-item cost of 400 items is not.
INI = "[pytest]\naddopts = --prove-concurrency=40\n"
_KNOBS = ("A_BAD", "HIDE", "RAISE")


@pytest.fixture(scope="module")
def _saved(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The agent's project after saving baseline 'current' (nothing in the environment):
    saved once for the module, in this process, and copied into each test's project."""
    with pytest.MonkeyPatch.context() as patch:
        for name in _KNOBS:
            patch.delenv(name, raising=False)
        yield saved_project(tmp_path_factory.mktemp("hostile"),
                            {"tox.ini": INI, "test_agent.py": AGENT},
                            "--prove-save-baseline=current")


@pytest.fixture
def agent(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
          _saved: Path) -> pytest.Pytester:
    return copy_with_baseline(_saved, pytester, monkeypatch, "current", _KNOBS)


def test_missing_outcomes_ignored_do_not_hide_a_worse_run(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every 'bad' episode of case=a ends without an outcome (0.46 of them): ignored, what is
    # left of case=a is all 'good', and the gate passed with "no significant change".
    monkeypatch.setenv("A_BAD", "0.5")
    monkeypatch.setenv("HIDE", "1")
    result = agent.runpytest("--prove-baseline=current", "--prove-missing=ignore",
                             "--prove-name=hidden")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*gate failed: condition case=a: * of the 200 episodes of "
                                 "'hidden' ended without an outcome (0.*, more than 0.25)*"
                                 "--prove-missing=ignore leaves them out*"])
    # The share hidden is case=a's 'bad' episodes on the baseline's seeds, whose salt is new
    # each time the module saves it: about 0.5, and 0.625 in one run (over the 0.6 this test
    # once raised the bound to, on purpose, so that check still failed).
    hidden = int(re.search(r"case=a: (\d+) of the 200 episodes of 'hidden'",
                           result.stdout.str()).group(1))  # type: ignore[union-attr]
    # A sequential run stops case=a at its first look, on what was left of it: the same.
    result = agent.runpytest("--prove-baseline=current", "--prove-missing=ignore",
                             "--prove-sequential")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*gate failed: condition case=a: * of the * episodes of * "
                                 "ended without an outcome*"])
    # The same run read again by check, and the same bound raised on purpose.
    assert main(["--store", str(agent.path / ".prove"), "check", "baseline:current", "hidden",
                 "--missing=ignore"]) == 4
    assert main(["--store", str(agent.path / ".prove"), "check", "baseline:current", "hidden",
                 "--missing=ignore", f"--max-errored={(hidden + 1) / 200}"]) == 0
    assert main(["--store", str(agent.path / ".prove"), "check", "baseline:current", "hidden",
                 "--missing=ignore", f"--max-errored={(hidden - 1) / 200}"]) == 4


def test_errored_episodes_ignored_by_check_do_not_hide_a_worse_run(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The session fails on the errors themselves; a CI job that gates with check only reads
    # the stored run, where the errored episodes are left out like any missing outcome.
    monkeypatch.setenv("A_BAD", "0.5")
    monkeypatch.setenv("HIDE", "1")
    monkeypatch.setenv("RAISE", "1")
    agent.runpytest("--prove-baseline=current", "--prove-name=errored")
    capsys.readouterr()
    assert main(["--store", str(agent.path / ".prove"), "check", "baseline:current", "errored",
                 "--missing=ignore"]) == 4
    out = capsys.readouterr().out
    assert "of 'errored' ended without an outcome" in out
    assert "check failed" in out


def test_check_refuses_a_run_against_itself_or_the_baseline_named_second(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # A CI script's slip: the arguments swapped, or one variable given twice. Both read a
    # worse agent as 'safer' or 'no significant change' and passed.
    monkeypatch.setenv("A_BAD", "0.5")
    assert agent.runpytest("--prove-name=worse").ret == pytest.ExitCode.OK  # no gate
    store = str(agent.path / ".prove")
    assert main(["--store", store, "check", "baseline:current", "worse"]) == 4
    capsys.readouterr()
    assert main(["--store", store, "check", "worse", "baseline:current"]) == 4
    out = capsys.readouterr().out
    assert out.startswith("check failed: the new run named, 'baseline:current', is a "
                          "baseline, and the baseline named, 'worse', is a run")
    assert "pytest-prove check baseline:current worse" in out
    for same in (["worse", "worse"], ["current", "baseline:current"]):
        assert main(["--store", store, "check", *same]) == 4
        out = capsys.readouterr().out
        assert "are the same run" in out.splitlines()[0], out
    # A baseline saved from the worse run is the same run too.
    # On current's seeds, so that the two baselines below are twins: on a salt of its own,
    # condition b (unchanged) read "worse" by chance in one CI run.
    from pytest_prove.store import Store

    salt = Store(agent.path / ".prove").load_baseline("current").salt
    assert agent.runpytest(f"--prove-salt={salt}", "--prove-save-baseline=lax",
                           "--prove-name=laxrun").ret == 0
    capsys.readouterr()
    assert main(["--store", store, "check", "baseline:lax", "laxrun"]) == 4
    assert "are the same run" in capsys.readouterr().out
    # Two baselines, either way round, are compared as asked.
    assert main(["--store", store, "check", "baseline:lax", "baseline:current"]) == 0


def test_a_failed_gate_does_not_save_over_the_baseline_it_failed_against(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # --prove-save-baseline naming the baseline the gate read wrote the worse run over it
    # although the gate failed, so the next gate of the same worse agent passed.
    baseline = agent.path / ".prove" / "baselines" / "current.baseline"
    before = baseline.read_bytes()
    monkeypatch.setenv("A_BAD", "0.5")
    result = agent.runpytest("--prove-baseline=current", "--prove-save-baseline=current")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*not saved: baseline 'current' is the one this run was "
                                 "gated against, and the gate failed*--prove-update-baseline*"])
    assert baseline.read_bytes() == before
    # Saved under another name, it is kept as asked; accepted on purpose, it replaces.
    result = agent.runpytest("--prove-baseline=current", "--prove-save-baseline=worse")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert (agent.path / ".prove" / "baselines" / "worse.baseline").is_file()
    result = agent.runpytest("--prove-baseline=current", "--prove-update-baseline")
    assert result.ret == pytest.ExitCode.OK
    assert baseline.read_bytes() != before
