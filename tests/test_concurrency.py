"""Blocks of replicates run at once, and their per-episode state never mixes."""

from __future__ import annotations

import textwrap

import pytest

from .conftest import INI, load

THREADED = textwrap.dedent(
    """
    import time
    import pytest
    import pytest_prove as prove

    @prove.rollout(replicates=8, failures=["bad"], successes=["good"])
    @pytest.mark.parametrize("ticket", ["refund"])
    def test_threads(ticket, prove_replicate, prove_seed):
        # Each replicate records as many steps as its number + 1, sleeping between them
        # so that the block's threads interleave.
        for i in range(prove_replicate + 1):
            with prove.step(f"r{prove_replicate}-s{i}"):
                time.sleep(0.005)
        prove.usage("m", input=prove_replicate, output=1)
        return prove.Episode("good", meta={"case_id": ticket})
    """
)

ASYNC = textwrap.dedent(
    """
    import asyncio
    import pytest
    import pytest_prove as prove

    @prove.rollout(replicates=8, failures=["bad"], successes=["good"])
    @pytest.mark.parametrize("ticket", ["refund"])
    async def test_tasks(ticket, prove_replicate):
        for i in range(prove_replicate + 1):
            with prove.step(f"r{prove_replicate}-s{i}"):
                await asyncio.sleep(0.005)
        prove.usage("m", input=prove_replicate, output=1)
        return prove.Episode("good", meta={"case_id": ticket})
    """
)


@pytest.mark.parametrize("source", [THREADED, ASYNC], ids=["threads", "asyncio"])
def test_concurrent_replicates_keep_their_own_steps(pytester: pytest.Pytester,
                                                    source: str) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_block=source)
    result = pytester.runpytest("--prove-concurrency", "4", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["*[[]refund-r000-003[]]", "*[[]refund-r004-007[]]"])
    pytester.runpytest("--prove-concurrency", "4").assert_outcomes(passed=2)
    run = load(pytester)
    assert sorted(r["replicate"] for r in run.episodes) == list(range(8))
    for record in run.episodes:
        r = record["replicate"]
        assert [s["name"] for s in record["steps"]] == [f"r{r}-s{i}" for i in range(r + 1)]
        assert record["t"] == r + 1  # t defaults to the number of steps
        assert record["tokens"]["input"] == r


def test_one_raising_replicate_in_a_block_fails_the_item_and_keeps_the_rest(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_block=textwrap.dedent(
        """
        import pytest
        import pytest_prove as prove

        @prove.rollout(replicates=4, failures=["bad"], successes=["good"], concurrency=4)
        def test_block(prove_replicate):
            if prove_replicate == 1:
                raise TimeoutError("upstream timed out")
            return prove.Episode("good")
        """))
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TimeoutError: upstream timed out*"])
    run = load(pytester)
    kinds = {r["replicate"]: (r["error"] or {}).get("kind") for r in run.episodes}
    assert kinds == {0: None, 1: "exception", 2: None, 3: None}


def test_a_fixture_built_on_the_seed_is_refused_in_blocks(pytester: pytest.Pytester) -> None:
    """A block sets its fixtures up once: a fixture built on prove_seed would give every
    replicate the first one's seed (2 of 16 episodes drew from their own), so it is refused
    at collection; without blocks it is fine; a plain test asking for prove_seed gets the
    plugin's own message rather than a KeyError."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_f="""
        import random
        import pytest
        import pytest_prove as prove

        @pytest.fixture
        def rng(prove_seed):
            return random.Random(prove_seed)

        @pytest.fixture
        def agent(rng):
            return rng

        @prove.rollout(replicates=8, failures=["unresolved"], successes=["resolved"],
                       outcomes=["resolved", "unresolved", "escalated"])
        def test_f(agent):
            return prove.Episode("resolved")

        def test_plain(prove_seed):
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-concurrency=4")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*fixture 'rng' (used by test_f.py::test_f*), 'agent' (used "
                                 "by *) depends on prove_seed or prove_replicate, but a block*"])
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=8, errors=1)
    assert "E   KeyError" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*test_plain*@prove.rollout*"])
