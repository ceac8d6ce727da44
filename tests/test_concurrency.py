"""Blocks of replicates run at once, and their per-episode state never mixes."""

from __future__ import annotations

import json
import re
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


def test_a_fixture_on_prove_cfg_is_fine_in_blocks(pytester: pytest.Pytester) -> None:
    """A block is one condition, so a fixture built on prove_cfg is right for every
    replicate of it: it is not refused, and each episode ran its own condition."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_cfg="""
        import pytest
        import pytest_prove as prove

        @pytest.fixture
        def case(prove_cfg):
            return f"case of {prove_cfg['ticket']}"

        @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"],
                       outcomes=["resolved", "unresolved", "escalated"])
        @pytest.mark.parametrize("ticket", ["refund", "password"])
        def test_cfg(ticket, case, prove_seed):
            assert case == f"case of {ticket}"
            return prove.Episode("resolved", meta={"case_id": case})
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-concurrency=4")
    result.assert_outcomes(passed=2)
    run = load(pytester)
    assert sorted((r["condition"]["ticket"], r["meta"]["case_id"]) for r in run.episodes) == (
        [("password", "case of password")] * 4 + [("refund", "case of refund")] * 4)


def test_prove_fixtures_outside_a_rollout_give_the_plugins_message(
        pytester: pytest.Pytester) -> None:
    """Each of the plugin's own fixtures, asked for by a plain test or by a fixture of one,
    is an error that says what to do, with no traceback (prove_block gave (0,) silently;
    the others raised UsageError with pytest's and the plugin's frames)."""
    pytester.makepyfile(test_plain="""
        import pytest

        @pytest.fixture
        def derived(prove_seed):
            return prove_seed

        def test_cfg(prove_cfg):
            pass

        def test_replicate(prove_replicate):
            pass

        def test_seed(prove_seed):
            pass

        def test_block(prove_block):
            pass

        def test_derived(derived):
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=5)
    for test, name in [("test_cfg", "prove_cfg"), ("test_replicate", "prove_replicate"),
                       ("test_seed", "prove_seed"), ("test_block", "prove_block")]:
        result.stdout.fnmatch_lines([f"test_plain.py::{test} is not a rollout, and {name} is "
                                     "a rollout's own value: decorate the test with "
                                     "@prove.rollout(...), or do not ask for it"])
    result.stdout.fnmatch_lines(["test_plain.py::test_derived is not a rollout, and "
                                 "prove_seed is a rollout's own value (asked for by the "
                                 "fixture derived)*"])
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*pytest_prove/plugin*")


LF = """
    import os
    import pytest
    import pytest_prove as prove

    BAD = {int(x) for x in os.environ.get("BAD", "").split(",") if x}

    @prove.rollout(replicates=8, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_lf(ticket, prove_replicate):
        if ticket == "refund" and prove_replicate in BAD:
            raise RuntimeError("bad")
        return prove.Episode("resolved")
"""


def _lastfailed(pytester: pytest.Pytester) -> list[str]:
    found = pytester.path / ".pytest_cache" / "v" / "cache" / "lastfailed"
    return sorted(json.loads(found.read_text())) if found.exists() else []


@pytest.mark.parametrize("workers", [
    pytest.param([], id="one-process"),
    # a second or more of CPU (bench/suite_time.py)
    pytest.param(["-n", "2"], id="xdist", marks=pytest.mark.slow)])
def test_lf_finds_a_failed_block_after_the_blocks_change(pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         workers: list[str]) -> None:
    """An item's id names its block, so a change of --prove-concurrency changes every id:
    --lf found none of the failures it remembered and ran the whole sweep (16 items).
    Now it runs the replicates of the blocks that failed, under their new ids, and forgets
    the old id once they all ran."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_lf=LF)
    monkeypatch.setenv("BAD", "5")
    result = pytester.runpytest("-p", "no:randomly", "--prove-concurrency=4")
    result.assert_outcomes(passed=3, failed=1)
    assert _lastfailed(pytester) == ["test_lf.py::test_lf[refund-r004-007]"]
    result = pytester.runpytest("-p", "no:randomly", "--lf", "-v", *workers)
    result.assert_outcomes(passed=3, failed=1)
    assert sorted(set(re.findall(r"test_lf\[[^\]]*\]", result.stdout.str()))) == [
        f"test_lf[refund-r00{r}]" for r in (4, 5, 6, 7)]
    assert _lastfailed(pytester) == ["test_lf.py::test_lf[refund-r005]"]
    monkeypatch.setenv("BAD", "")
    # One item is left to run (refund-r004-005): under xdist one worker is all it can use
    # (-n 1, one worker start less); the -n 2 run above split the block's replicates.
    one = ["-n", "1"] if workers else []
    result = pytester.runpytest("-p", "no:randomly", "--lf", "-v",
                                "--prove-concurrency=2", *one)
    result.assert_outcomes(passed=1)
    assert set(re.findall(r"test_lf\[[^\]]*\]", result.stdout.str())) == {
        "test_lf[refund-r004-005]"}
    assert _lastfailed(pytester) == []
