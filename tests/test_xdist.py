"""Under xdist, workers run rollouts and only the controller writes the store."""

from __future__ import annotations

import textwrap
from collections import Counter

import pytest

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


@pytest.mark.parametrize("workers", ["2", "4"])
def test_each_replicate_is_stored_exactly_once(bot: pytest.Pytester, workers: str) -> None:
    bot.makeconftest(NO_STORE_ON_WORKERS)
    result = bot.runpytest("-n", workers, "--prove-replicates", "30")
    result.assert_outcomes(passed=60)
    run = load(bot)
    keys = Counter((r["condition_key"], r["replicate"]) for r in run.episodes)
    assert len(keys) == 60
    assert set(keys.values()) == {1}
    # The file itself, not just the de-duplicated reading, holds each once.
    lines = (run.path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 60
    assert run.status == "complete"


def test_without_xdist_the_run_is_the_same(bot: pytest.Pytester) -> None:
    bot.runpytest("-p", "no:xdist", "--prove-replicates", "30",
                  "--prove-save-baseline", "solo").assert_outcomes(passed=60)
    solo = load(bot)
    bot.runpytest("-n", "2", "--prove-baseline", "solo", "--prove-name", "dist",
                  "--prove-replicates", "30").assert_outcomes(passed=60)
    dist = load(bot, "dist")
    strip = lambda run: sorted(  # noqa: E731
        (r["condition_key"], r["replicate"], r["seed"], r["outcome"], r["t"])
        for r in run.episodes)
    assert strip(solo) == strip(dist)
    assert solo.status == dist.status == "complete"


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
    result = pytester.runpytest("-n", "2")
    result.assert_outcomes(passed=3, failed=1)
    run = load(pytester)
    crashed = [r for r in run.episodes if r["error"]]
    assert [(r["replicate"], r["error"]["kind"]) for r in crashed] == [(2, "worker_crash")]
    assert run.status == "complete"
