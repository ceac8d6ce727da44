"""Metrics without outcomes, and metrics under --prove-sequential (issue 30's two gaps).

A rollout that only scores its answers declares metrics and no outcomes and returns
``prove.Episode(metrics={...})``: its comparison is its metric rows, which decide the gate,
in one process and under -n 2, and its plan prints their limits. Under --prove-sequential the
looks stop on outcomes, and the metric rows are tested once at the end on every episode the
looks ran, so a metric that got worse still fails the gate."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET

import pytest

from pytest_prove.store import Store


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner sessions' lines are matched whole (see tests/test_metrics_gate.py)."""
    monkeypatch.setenv("COLUMNS", "200")


#: Four conditions that replay their seed: outcomes never change, so every condition stops
#: early; SLOW=1 makes condition "a" 30% slower.
SEQUENTIAL = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    SLOW = os.environ.get("SLOW") == "1"


    @prove.rollout(replicates=220, failures=["unresolved"], successes=["resolved"],
                   metrics={"latency_s": "lower"})
    @pytest.mark.parametrize("ticket", ["a", "b", "c", "d"])
    def test_sweep(ticket, prove_seed):
        rng = random.Random(prove_seed)
        outcome = "unresolved" if rng.random() < 0.1 else "resolved"
        latency = rng.lognormvariate(0.0, 0.5) * (1.3 if SLOW and ticket == "a" else 1.0)
        return prove.Episode(outcome, metrics={"latency_s": latency})
    """
)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_sequential_tests_the_metric_rows_on_the_episodes_the_looks_ran(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before, --prove-sequential dropped the metric rows: a latency 30% longer passed."""
    pytester.makepyfile(test_sweep=SEQUENTIAL)
    base = ["-p", "no:randomly", "--prove-concurrency=55"]
    assert pytester.runpytest(*base, "--prove-save-baseline=base").ret == pytest.ExitCode.OK
    plan = pytester.runpytest(*base, "--prove-plan", "--prove-baseline=base",
                              "--prove-sequential")
    assert plan.ret == pytest.ExitCode.OK, plan.stdout.str()
    plan.stdout.fnmatch_lines([
        "metric 'latency_s' in ticket=a: detection limit +* (*%) *",
        "metric limits of a sequential run: at its maximum episodes; the looks stop on the "
        "outcome rows only*"])
    monkeypatch.setenv("SLOW", "1")
    result = pytester.runpytest(*base, "--prove-baseline=base", "--prove-sequential", "-rf")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*= pytest-prove =*",
        "metrics: worse: latency_s in ticket=a +* (Holm over 4 at q=0.05)",
        "*metric rows are tested once, at the end, on the episodes the looks ran*",
        "sequential: ticket=a: decided at look * of 55 *",
        "FAILED test_sweep.py::test_sweep::prove-gate?ticket=a? - metrics worse in ticket=a: "
        "latency_s +*",
    ])
    # The command line reads the stored sequential run the same way.
    from pytest_prove.cli import main

    monkeypatch.chdir(pytester.path)
    capsys.readouterr()
    assert main(["check", "baseline:base", "latest"]) == 4
    text = capsys.readouterr().out
    assert "metrics: worse: latency_s in ticket=a +" in text, text
    assert "tested once, at the end, on the episodes the looks ran" in text
    monkeypatch.delenv("SLOW")
    same = pytester.runpytest(*base, "--prove-baseline=base", "--prove-sequential")
    assert same.ret == pytest.ExitCode.OK, same.stdout.str()
    same.stdout.fnmatch_lines(["metrics: no significant change in 4 metric row(s) *"])


#: An agent only scored by a judge (0 to 1): no outcome. DROP=1 lowers the scores of refund
#: answers by 0.1; BAD names a broken return for the contract tests.
SCORED = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    DROP = os.environ.get("DROP") == "1"
    BAD = os.environ.get("BAD", "")


    @prove.rollout(replicates=30, metrics={"judge": "higher"})
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_scored(ticket, prove_seed):
        rng = random.Random(prove_seed)
        judge = min(1.0, max(0.0, rng.gauss(0.7, 0.1)))
        if DROP and ticket == "refund":
            judge -= 0.1
        if BAD == "outcome":
            return prove.Episode("resolved", metrics={"judge": judge})
        if BAD == "mapping":
            return {"judge": judge}
        return prove.Episode(metrics={"judge": judge})
    """
)


@pytest.fixture
def scored(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_scored=SCORED)
    return pytester


@pytest.mark.parametrize("workers", [pytest.param([], id="one-process"),
                                     pytest.param(["-n", "2"], id="xdist",
                                                  marks=pytest.mark.slow)])
def test_a_metrics_only_rollout_is_gated_on_its_metric_rows(
        scored: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], workers: list[str]) -> None:
    """The baseline's run and the changed one are also those of
    _the_plan_prints_the_limits_and_refuses_what_needs_outcomes (in one process) and
    _the_command_line_reads_a_metrics_only_run (under xdist, whose variant is marked slow:
    the command line reads the store the same way whoever wrote it); they were tests of
    their own, each running the same sessions again."""
    # The baseline is saved in one process (a worker's episodes are stored as "measured"
    # too: the run after the change, under -n 2, checks it below).
    saved = scored.runpytest("--prove-save-baseline=main", "-p", "no:xdist")
    assert saved.ret == pytest.ExitCode.OK, saved.stdout.str()
    baseline = Store(scored.path / ".prove").open("baseline:main")
    assert {e["outcome"] for e in baseline.episodes} == {"measured"}
    if not workers:
        _the_plan_prints_the_limits_and_refuses_what_needs_outcomes(scored)
    # Under xdist the unchanged run goes through one worker (-n 1: the worker's metric rows
    # reach the controller the same way, one worker start less); the one after the change
    # splits every condition's replicates between two.  In one process
    # it runs without the ini's allowance: the design check runs before every session, and
    # refuses none here.
    same = scored.runpytest("--prove-baseline=main", *(
        ["-n", "1"] if workers else ["-o", "prove_allow_underpowered=false"]))
    assert same.ret == pytest.ExitCode.OK, same.stdout.str()
    same.stdout.fnmatch_lines(["metrics: no significant change in 2 metric row(s) *"])
    assert "nothing was compared" not in same.stdout.str()
    monkeypatch.setenv("DROP", "1")
    result = scored.runpytest("-rf", "--prove-baseline=main", "--junitxml=j.xml",
                              "--prove-report=r.json", *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*= pytest-prove =*",
        "metrics: worse: judge in ticket=refund -0.1* (Holm over 2 at q=0.05)",
        "FAILED test_scored.py::test_scored::prove-gate?ticket=refund? - metrics worse in "
        "ticket=refund: judge -0.1*",
        "*= 1 failed, 60 passed in *",
    ])
    text = result.stdout.str()
    assert "nothing was compared" not in text and "INTERNALERROR" not in text
    document = json.loads((scored.path / "r.json").read_text(encoding="utf-8"))
    assert document["metrics"]["worse"] == [{"condition": "ticket=refund", "metric": "judge"}]
    suite = ET.parse(scored.path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    changed = Store(scored.path / ".prove").open("latest")
    assert {e["outcome"] for e in changed.episodes} == {"measured"}
    assert len(changed.episodes) == 60
    if workers:
        _the_command_line_reads_a_metrics_only_run(scored, monkeypatch, capsys)


def _the_plan_prints_the_limits_and_refuses_what_needs_outcomes(
        scored: pytest.Pytester) -> None:
    """Was a test of its own; the baseline 'main' is saved (one run in the store)."""
    plan = scored.runpytest("--prove-plan", "--prove-baseline=main")
    assert plan.ret == pytest.ExitCode.OK, plan.stdout.str()
    plan.stdout.fnmatch_lines([
        "pytest-prove plan: 60 episodes: 1 rollout(s), 2 condition(s), 30 replicates *",
        "design check: none on outcomes: the rollouts declare metrics and no outcomes*",
    ])
    plan.stdout.fnmatch_lines_random([
        f"metric 'judge' in ticket={t}: detection limit -* (-*%) *" for t in ("refund",
                                                                               "password")])
    assert "INTERNALERROR" not in plan.stdout.str()
    # Without the ini's allowance the design check runs before every session: none here
    # (the unchanged run of the caller, test_a_metrics_only_rollout_is_gated_on_its_metric_rows
    # [one-process], runs so).
    for option, said in (
            ("--prove-margin=0.1", "*--prove-margin 0.1 is a margin on the outcome rows' "
                                   "rates, and no selected rollout declares outcomes*"
                                   "--prove-metric-margin*"),
            ("--prove-sequential", "*--prove-sequential (or sequential=True) stops each "
                                   "condition on its outcome rows, and test_scored.py::"
                                   "test_scored declare(s) metrics and no outcomes, so there "
                                   "is nothing to stop on; run without --prove-sequential*")):
        refused = scored.runpytest("--prove-baseline=main", option)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR, refused.stdout.str()
        refused.stderr.fnmatch_lines([said])
    # The baseline's run alone: nothing refused (nor the plan) ran.
    assert len(Store(scored.path / ".prove").runs()) == 1


def _the_command_line_reads_a_metrics_only_run(
        scored: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Was a test of its own: the baseline 'main' is saved and the latest run is the one
    after DROP=1, which failed its gate."""
    from pytest_prove.cli import main

    monkeypatch.chdir(scored.path)
    capsys.readouterr()

    def said(*args: str) -> tuple[int, str]:
        code = main(list(args))
        found = capsys.readouterr()
        return code, found.out + found.err

    code, text = said("show", "latest")
    assert code == 0
    assert "rollout test_scored: metrics only, no outcomes: judge (higher is better)" in text
    code, text = said("check", "baseline:main", "latest")
    assert code == 4, text
    assert text.splitlines()[0].endswith("no outcome rows: the rollouts compared declare "
                                         "metrics and no outcomes, so their metric rows are "
                                         "the comparison")
    assert "metrics: worse: judge in ticket=refund -0.1" in text
    assert "check failed: the verdict is 'worse', the metrics' 'worse' of judge in " \
           "ticket=refund" in text
    for kind in ("md", "html", "json"):
        code, text = said("report", "baseline:main", "latest", "--out", f"r.{kind}")
        assert code == 0 and text.startswith("worse: report of baseline:main"), text
    assert "### pytest-prove: worse" in (scored.path / "r.md").read_text(encoding="utf-8")
    page = (scored.path / "r.html").read_text(encoding="utf-8")
    assert '<h1 class="word-worse">worse</h1>' in page and 'data-metric="judge"' in page
    document = json.loads((scored.path / "r.json").read_text(encoding="utf-8"))
    assert document["verdict"] == "worse" and document["comparison"] is None
    for command in (["compare", "baseline:main", "latest"], ["where", "latest"],
                    ["flips", "baseline:main", "latest"]):
        code, text = said(*command)
        assert code == 1, text
        assert "declare metrics and no outcomes" in text and "pytest-prove diff" in text
    code, text = said("check", "baseline:main", "latest", "--margin", "0.1")
    assert code == 1 and "--prove-metric-margin" in text, text
    code, text = said("cost", "baseline:main", "latest")
    assert code == 0 and "Traceback" not in text


#: Broken declarations and returns: each a named error.
BROKEN = textwrap.dedent(
    """
    import os

    import pytest
    import pytest_prove as prove

    RETURN = os.environ["RETURN"]


    @prove.rollout(replicates=2, metrics={"judge": "higher"})
    def test_scores(prove_seed):
        if RETURN == "outcome":
            return prove.Episode("resolved", metrics={"judge": 0.5})
        if RETURN == "mapping":
            return {"judge": 0.5}
        return prove.Episode(metrics={"judge": 0.5})


    @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"])
    def test_outcomes(prove_seed):
        if RETURN == "no-outcome":
            return prove.Episode()
        return prove.Episode("resolved")
    """
)


@pytest.mark.parametrize(("returns", "test", "said"), [
    ("outcome", "test_scores", "*the rollout declares metrics and no outcomes, and the episode "
                               "returned the outcome 'resolved'; return prove.Episode(metrics="
                               "{...}) without one, or declare the outcomes*"),
    ("mapping", "test_scores", "*a rollout must return prove.Episode(metrics={...}), got "
                               "{'judge': 0.5} (dict); return prove.Episode(metrics={'judge': "
                               "0.5}) instead"),
    ("no-outcome", "test_outcomes", "*the episode has no outcome, and the rollout declares the "
                                    "outcomes unresolved, resolved; return prove.Episode("
                                    "'unresolved', ...), or raise prove.NoOutcome('why')*"),
], ids=["metrics-only-with-an-outcome", "a-mapping", "an-outcome-rollout-without-one"])
def test_a_broken_return_is_a_named_contract_error_of_its_episode(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, returns: str, test: str,
        said: str) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_broken=BROKEN)
    monkeypatch.setenv("RETURN", returns)
    result = pytester.runpytest("-rf", "-k", test)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"test_broken.py::{test}?r000?: {said.lstrip('*')}"])
    assert "INTERNALERROR" not in result.stdout.str()
    run = Store(pytester.path / ".prove").load("latest")
    assert [e["error"]["kind"] for e in run.episodes] == ["contract", "contract"]


def test_a_rollout_declaring_neither_outcomes_nor_metrics_is_an_error_naming_the_fix(
        pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_empty="""
        import pytest_prove as prove


        @prove.rollout(replicates=2)
        def test_nothing(prove_seed):
            return prove.Episode()
        """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*test_empty.py*",
        "*a rollout must declare at least one failure or success, e.g. failures=*, or, when "
        'only scores matter, metrics and no outcomes: metrics={"judge": "higher"}*'])
    assert "INTERNALERROR" not in result.stdout.str()


def test_episodes_without_an_outcome_are_tested_beside_the_metric_rows(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollout of metrics only whose new episodes end without one half the time: its twins
    that ended in both are compared on the metric, and its share without one is the row
    'no outcome', which got worse (it was read as a condition none of whose twins had an
    outcome)."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_crash="""
        import os
        import random

        import pytest_prove as prove


        @prove.rollout(replicates=30, metrics={"judge": "higher"})
        def test_crash(prove_seed):
            rng = random.Random(prove_seed)
            # drawn first, so that twins that both end score alike (the crash's own draw
            # moved it, and about 1 run in 20 read the judge 'safer' or 'worse' by chance)
            judge = rng.gauss(0.7, 0.1)
            if os.environ.get("CRASH") == "1" and rng.random() < 0.5:
                raise prove.NoOutcome("the judge was down")
            return prove.Episode(metrics={"judge": judge})
        """)
    # A fixed salt: 'no outcome' reads worse from 5 crashed twins of 30 (mid-p 0.5^5), and
    # on a new salt 4 or fewer crashed 3.0e-5 of the time. This salt crashes 15.
    assert pytester.runpytest("--prove-save-baseline=main",
                              "--prove-salt=crash").ret == pytest.ExitCode.OK
    monkeypatch.setenv("CRASH", "1")
    result = pytester.runpytest("--prove-baseline=main", "-rf")
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    assert "none of the 30 twins" not in text and "gate failed" not in text
    result.stdout.fnmatch_lines([
        "*= pytest-prove =*",
        "worse: 1 condition got worse ((one condition): more episodes ended without an "
        "outcome, 0.000 -> *",
        "metrics: no significant change in 1 metric row(s) *",
        "FAILED test_crash.py::test_crash::prove-gate?(one condition)? - worse: *"])
