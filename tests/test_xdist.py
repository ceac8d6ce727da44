"""Under xdist, workers run rollouts and only the controller writes the store."""

from __future__ import annotations

import textwrap
from collections import Counter

import pytest

from pytest_prove.store import Run

from .conftest import load

#: Loaded into every process of the inner session: on an xdist worker, any use
#: of the store fails loudly, so a worker that opened it would fail its items.
NO_STORE_ON_WORKERS = textwrap.dedent(
    """
    import pytest_prove.store as store

    def pytest_configure(config):
        if hasattr(config, "workerinput"):
            def refuse(*args, **kwargs):
                raise AssertionError("a worker touched the store")
            for cls in (store.Store, store.RunWriter):
                for name in [n for n in vars(cls) if not n.startswith("__")]:
                    if callable(getattr(cls, name)):
                        setattr(cls, name, refuse)
            store.Store.__init__ = refuse
            store.RunWriter.__init__ = refuse
    """
)


def _stored_exactly_once(run: Run) -> None:
    """Each of the 24 episodes (12 replicates of two conditions) stored once, in a complete
    run."""
    keys = Counter((r["condition_key"], r["replicate"]) for r in run.episodes)
    assert len(keys) == 24
    assert set(keys.values()) == {1}
    # The file itself, not just the de-duplicated reading, holds each once.
    lines = (run.path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 24
    assert run.status == "complete"


#: Written by each process at its session's end: how many reports its terminal keeps
#: that still hold episodes (a worker's report is sent to the controller, then freed).
COUNT_HELD_REPORTS = textwrap.dedent(
    """
    import os

    def pytest_sessionfinish(session):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reports = [r for kept in reporter.stats.values() for r in kept
                   if getattr(r, "when", None) == "call"]
        held = sum(1 for r in reports if "episodes" in (vars(r).get("prove") or {}))
        role = "worker" if hasattr(session.config, "workerinput") else "controller"
        with open(f"held-{role}-{os.getpid()}.txt", "w") as fh:
            fh.write(f"{len(reports)} {held}")
    """
)


@pytest.mark.parametrize("workers", [
    # One worker: what each process keeps is its own; -n 1 has a worker that sends its
    # reports to the controller as two do, with one process less (under a second of CPU).
    "0", "1"])
def test_reports_let_go_of_their_episodes(bot: pytest.Pytester, workers: str) -> None:
    bot.makeconftest(COUNT_HELD_REPORTS)
    dist = ["-n", workers] if workers != "0" else ["-p", "no:xdist"]
    bot.runpytest(*dist, "--prove-replicates", "10").assert_outcomes(passed=20)
    assert len(load(bot).episodes) == 20
    held = {p.name: [int(x) for x in p.read_text().split()]
            for p in bot.path.glob("held-*.txt")}
    roles = {name.split("-")[1] for name in held}
    assert roles == ({"controller", "worker"} if workers != "0" else {"controller"}), held
    # Each process saw its call reports, and none of them still holds its episodes.
    assert sum(seen for name, (seen, _) in held.items() if "worker" not in name) == 20, held
    assert all(kept == 0 for _, kept in held.values()), held


@pytest.mark.slow
def test_without_xdist_the_run_is_the_same(bot: pytest.Pytester) -> None:
    # The workers may not touch the store, and the run under -n 4 stores each replicate
    # once: what test_each_replicate_is_stored_exactly_once checked, with four workers, in a
    # session of its own (and its [2] variant, this run under -n 2 before, in another).
    bot.makeconftest(NO_STORE_ON_WORKERS)
    # 12 replicates, 24 items: several an item for each of 4 workers (a storage rule, no
    # verdict: the runs are compared episode by episode, not by a verdict's power).
    bot.runpytest("-p", "no:xdist", "--prove-replicates", "12",
                  "--prove-save-baseline", "solo").assert_outcomes(passed=24)
    solo = load(bot)
    bot.runpytest("-n", "4", "--prove-baseline", "solo", "--prove-name", "dist",
                  "--prove-replicates", "12").assert_outcomes(passed=24)
    dist = load(bot, "dist")
    _stored_exactly_once(dist)
    strip = lambda run: sorted(  # noqa: E731
        (r["condition_key"], r["replicate"], r["seed"], r["outcome"], r["t"])
        for r in run.episodes)
    assert strip(solo) == strip(dist)
    assert solo.status == dist.status == "complete"


@pytest.mark.slow
def test_a_crashed_worker_stores_its_episode_as_errored(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_crash=textwrap.dedent(
        """
        import os
        import pytest
        import pytest_prove as prove

        @prove.rollout(replicates=4, failures=["bad"], successes=["good"])
        @pytest.mark.parametrize("ticket", ["refund"])
        def test_crash(ticket, prove_replicate):
            if prove_replicate == 2:
                os._exit(3)
            return prove.Episode("good")
        """))
    # One worker: it is replaced as one of two is, and its replacement runs the rest (two
    # cost a worker's start more and showed nothing else).
    result = pytester.runpytest("-n", "1")
    result.assert_outcomes(passed=3, failed=1)
    run = load(pytester)
    crashed = [r for r in run.episodes if r["error"]]
    assert [(r["replicate"], r["error"]["kind"]) for r in crashed] == [(2, "worker_crash")]
    assert run.status == "complete"


#: On the workers only, another pytest-prove version (as a remote host might have).
OTHER_VERSION_ON_WORKERS = textwrap.dedent(
    """
    import pytest

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(config):
        if hasattr(config, "workerinput"):  # not the environment: this session may run
            import pytest_prove             # on a worker of another one

            pytest_prove.__version__ = "0.0.9"
    """
)


def test_a_worker_on_another_pytest_prove_is_refused_before_anything_runs(
        bot: pytest.Pytester) -> None:
    import pytest_prove

    bot.makeconftest(OTHER_VERSION_ON_WORKERS)
    # One worker: the refusal is of each worker alone, and -n 1 has the same hand-off to
    # the controller as -n 2, with one process less.
    result = bot.runpytest("-n", "1", "--prove-replicates", "4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        f"*this xdist worker runs pytest-prove 0.0.9 and the controller pytest-prove "
        f"{pytest_prove.__version__}: *Install the same pytest-prove on every host the "
        f"workers run on (pip install pytest-prove=={pytest_prove.__version__})*"])
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes and "failed" not in outcomes
    assert not (bot.path / ".prove" / "runs").is_dir() or not any(
        (bot.path / ".prove" / "runs").glob("*/episodes.jsonl"))


class _Node:
    """What xdist's load scheduling uses of a worker: the items it was sent."""

    def __init__(self, name: str) -> None:
        self.sent: list[int] = []
        self.shutting_down = False
        self.gateway = type("Gateway", (), {"id": name})()

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def test_with_the_window_each_worker_holds_its_share_of_every_item_left(
        pytester: pytest.Pytester) -> None:
    """Under --prove-concurrency each worker is given its equal share of the items left at
    once, and again as items end, so that its window runs ahead over all of them: with a
    quarter to a half of what was left, a worker near the end held two to five items, and
    its window ran dry while the item pytest was on waited for a slow replicate."""
    from pytest_prove.plugin.xdist import CappedLoadScheduling

    scheduler = CappedLoadScheduling(pytester.parseconfig("--tx", "2*popen"))
    scheduler.prove_fill = True
    nodes = [_Node("gw0"), _Node("gw1")]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, [f"t.py::test[r{i:03d}]" for i in range(40)])
    scheduler.schedule()
    assert [len(node.sent) for node in nodes] == [20, 20]
    assert sorted(nodes[0].sent + nodes[1].sent) == list(range(40))
    for index in nodes[0].sent[:5]:  # the first worker ran five: nothing is left to give
        scheduler.mark_test_complete(nodes[0], index)
    assert [len(node.sent) for node in nodes] == [20, 20]
