"""The CI gate: a baseline, a worse agent, the same agent, and a refresh."""

from __future__ import annotations

import pytest

from pytest_prove.store import Store

from .conftest import BOT, load


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_baseline_then_worse_then_same_then_update(bot: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # 120 replicates: at 40 the same agent reads "too small to tell" (a limit of 0.32 for a
    # change of 0.20). Only the worse run is under xdist, with one worker (the controller's
    # gate from a worker's episodes; a baseline saved and compared under xdist, and a failing
    # gate whose replicates two workers split: test_gate_reports.py, test_xdist.py).
    # Every run goes in blocks of 40 replicates (6 items, not 240: the same replicates and
    # seeds, a fraction of the per-item cost, under xdist most of all); what is checked is
    # the gate's verdict and the baseline's refresh.
    blocks = ("--prove-concurrency=40",)
    monkeypatch.setenv("BOT_REPLICATES", "120")
    monkeypatch.setenv("REFUND_FAIL", "0.1")
    bot.runpytest("--prove-save-baseline", "current", *blocks).assert_outcomes(passed=6)
    baseline_file = bot.path / ".prove" / "baselines" / "current.baseline"
    original = baseline_file.read_bytes()

    # A clearly worse agent: refunds fail half the time instead of one in ten.
    monkeypatch.setenv("REFUND_FAIL", "0.5")
    result = bot.runpytest("-n", "1", "--prove-baseline", "current", "--prove-name", "worse",
                           *blocks)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The items pass (a worse agent is a verdict, not a crash); the gate is one failure.
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(["*pytest-prove*", "worse*", "*ticket=refund*unresolved*"])
    assert "ticket=password" not in result.stdout.str().split("worse", 1)[1].splitlines()[0]

    # The same agent as the baseline: nothing moved.
    monkeypatch.setenv("REFUND_FAIL", "0.1")
    result = bot.runpytest("--prove-baseline", "current", "--prove-name", "same", *blocks)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["no significant change*"])

    # An incomplete run (-k) never replaces the baseline.
    monkeypatch.setenv("REFUND_FAIL", "0.5")
    result = bot.runpytest("--prove-baseline", "current", "--prove-update-baseline",
                           "-k", "refund", *blocks)
    result.stdout.fnmatch_lines(["*not saved*incomplete*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert baseline_file.read_bytes() == original

    # A complete run does, and the refresh passes the session.
    result = bot.runpytest("--prove-baseline", "current",
                           "--prove-update-baseline", "--prove-name", "accepted", *blocks)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*baseline 'current' replaced by run 'accepted'*"])
    replaced = Store(bot.path / ".prove").load_baseline("current")
    assert replaced.manifest["name"] == "accepted"
    assert replaced.salt == load(bot, "accepted").salt
    assert len(replaced.episodes) == 240


def test_not_run_conditions_are_reported_and_left_out(bot: pytest.Pytester) -> None:
    bot.runpytest("--prove-save-baseline", "base").assert_outcomes(passed=80)
    result = bot.runpytest("--prove-baseline", "base", "-k", "password")
    result.stdout.fnmatch_lines(["*not run: 1 condition(s)*ticket=refund*"])
    assert result.ret == pytest.ExitCode.OK


def test_fail_on_too_small(bot: pytest.Pytester) -> None:
    # Five replicates cannot see a change of 0.20: the verdict is too small to tell.
    bot.runpytest("--prove-replicates", "5", "--prove-save-baseline", "tiny")
    result = bot.runpytest("--prove-replicates", "5", "--prove-baseline", "tiny")
    result.stdout.fnmatch_lines(["too small to tell*"])
    # The project allows underpowered designs (prove_allow_underpowered): the gate passes
    # and says why; naming too-small on purpose fails it.
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*note: * could not have shown a change of 0.20 *"
                                 "--prove-allow-underpowered*"])
    result = bot.runpytest("--prove-replicates", "5", "--prove-baseline", "tiny",
                           "--prove-fail-on", "worse,too-small")
    assert result.ret == pytest.ExitCode.TESTS_FAILED


# The refusal through xdist's controller needs one worker only (its collection fails the
# design check and the controller reports it): -n 1 takes that path, one worker start less.
# Still slow: the worker imports numpy and scipy to compute the check (1.1 s of CPU).
@pytest.mark.parametrize("workers", [pytest.param([], id="single"),
                                     pytest.param(["-n", "1"], id="xdist",
                                                  marks=pytest.mark.slow)])
def test_design_check_stops_an_underpowered_session(pytester: pytest.Pytester,
                                                     workers: list[str]) -> None:
    pytester.makepyfile(test_bot=BOT)
    result = pytester.runpytest("--prove-replicates", "20", *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # Without xdist pytest prints the usage error; with it, the controller's summary does.
    (result.stdout if workers else result.stderr).fnmatch_lines([
        "*design check failed: with 20 replicates a condition and 2 tests*"
        "Use * replicates a condition*--prove-allow-underpowered*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / ".prove").exists()


def test_plan_prints_and_runs_nothing(bot: pytest.Pytester) -> None:
    # Through xdist's controller (-n 1: the plan is the controller's, one worker is enough).
    result = bot.runpytest("--prove-plan", "-n", "1")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "pytest-prove plan: 80 episodes: 1 rollout(s), 2 condition(s), 40 replicates*",
        "design check: the smallest rise one condition alone would be flagged for is *"])
    assert not (bot.path / ".prove").exists()


def test_no_store_is_created_without_a_rollout(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain(): pass")
    pytester.runpytest().assert_outcomes(passed=1)
    assert not (pytester.path / ".prove").exists()


def test_the_plan_of_a_failing_design_says_so_and_exits_4(bot: pytest.Pytester) -> None:
    bot.makeini("[pytest]\n")
    result = bot.runpytest("-p", "no:cacheprovider", "--prove-plan")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["design check fails: one condition alone could not be flagged "
                                 "for a rise of 0.200, *; * replicates a condition would pass*"])
    result = bot.runpytest("-p", "no:cacheprovider", "--prove-plan", "--prove-replicates=300")
    assert result.ret == pytest.ExitCode.OK
    assert "design check fails" not in result.stdout.str()
