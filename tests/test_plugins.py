"""Rollouts under the plugins agent repositories use (issue 13, item 5): pytest-asyncio in
auto and strict mode, pytest-timeout, and pytest.skip() inside a rollout; every replicate
is stored once, with its kind, and the run is complete."""

from __future__ import annotations

import textwrap

import pytest

from .conftest import load

pytest.importorskip("pytest_asyncio")
pytest.importorskip("pytest_timeout")

ASYNC = textwrap.dedent(
    """
    import asyncio

    import pytest
    import pytest_asyncio
    import pytest_prove as prove


    @pytest_asyncio.fixture
    async def loop_of_fixture():
        yield asyncio.get_running_loop()


    @prove.rollout(replicates=6, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    {marker}
    async def test_async(prove_seed, loop_of_fixture):
        await asyncio.sleep(0)
        # The rollout runs on the loop its async fixtures were made on.
        same = asyncio.get_running_loop() is loop_of_fixture
        return prove.Episode("resolved" if same else "unresolved")
    """
)


@pytest.mark.parametrize("mode", ["auto", "strict"])
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_async_rollouts_under_pytest_asyncio(pytester: pytest.Pytester, mode: str,
                                             workers: list[str]) -> None:
    pytester.makeini(f"[pytest]\nprove_allow_underpowered = true\nasyncio_mode = {mode}\n")
    marker = "@pytest.mark.asyncio" if mode == "strict" else ""
    pytester.makepyfile(test_async=ASYNC.replace("{marker}", marker))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *workers)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    assert [r["outcome"] for r in run.episodes] == ["resolved"] * 6


STOPPED = textwrap.dedent(
    """
    import time

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    def test_stopped(prove_replicate):
        if prove_replicate == 1:
            time.sleep(30)
        if prove_replicate == 2:
            pytest.skip("no data for this case")
        return prove.Episode("resolved")
    """
)


def test_pytest_timeout_and_skip_inside_a_rollout(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_stopped=STOPPED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--timeout=1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 failed, 2 passed, 1 skipped*"])
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    kinds = [(r["error"] or {}).get("kind", "outcome") for r in run.episodes]
    assert kinds == ["outcome", "episode_timeout", "no_outcome", "outcome"]
