"""Metrics without outcomes, and metrics under --prove-sequential (issue 30's two gaps).

A rollout that only scores its answers declares metrics and no outcomes and returns
``prove.Episode(metrics={...})``: its comparison is its metric rows, which decide the gate,
in one process and under -n 2, and its plan prints their limits. Under --prove-sequential the
looks stop on outcomes, and the metric rows are tested once at the end on every episode the
looks ran, so a metric that got worse still fails the gate."""

from __future__ import annotations

import textwrap

import pytest


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner sessions' lines are matched whole (see tests/test_metrics_gate.py)."""
    monkeypatch.setenv("COLUMNS", "200")


#: Four conditions that replay their seed: outcomes never change, so every condition stops
#: at its first look; SLOW=1 makes condition "a" 30% slower.
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


def test_sequential_tests_the_metric_rows_on_the_episodes_the_looks_ran(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
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
        "sequential: ticket=a: decided at look 1 of 5 *",
        "FAILED test_sweep.py::test_sweep::prove-gate?ticket=a? - metrics worse in ticket=a: "
        "latency_s +*",
    ])
    monkeypatch.delenv("SLOW")
    same = pytester.runpytest(*base, "--prove-baseline=base", "--prove-sequential")
    assert same.ret == pytest.ExitCode.OK, same.stdout.str()
    same.stdout.fnmatch_lines(["metrics: no significant change in 4 metric row(s) *"])
