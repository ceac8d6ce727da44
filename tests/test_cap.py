"""--prove-token-cap: the run stops once its episodes reach the cap, and says so."""

from __future__ import annotations

import textwrap

import pytest

# Loaded before pytester's first in-process run: it forgets modules a run imported, and
# numpy (imported by the design check) cannot be imported twice in one process.
import pytest_prove.stats  # noqa: F401

from .conftest import INI, load

#: Every episode uses 100 input and 10 output tokens of "sim-model", and takes 0.1 s (so
#: that xdist workers are still running items when the cap is reached); a session in one
#: process, where no item runs beside another, sets SPEND_NAP=0.
SPENDER = textwrap.dedent(
    """
    import os
    import time

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=60, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund"])
    def test_spend(ticket, prove_seed):
        time.sleep(float(os.environ.get("SPEND_NAP", "0.1")))
        prove.usage("sim-model", input=100, output=10)
        return prove.Episode("resolved", meta={"case_id": ticket})
    """
)


@pytest.fixture
def spender(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI + "prove_prices =\n    sim-model = 2.00 8.00\n")
    pytester.makepyfile(test_spend=SPENDER)
    return pytester


def test_cap_stops_the_sweep_in_one_process(spender: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEND_NAP", "0")  # one process: no item runs beside another
    result = spender.runpytest("-p", "no:xdist", "--prove-token-cap", "1000")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = load(spender)
    # The tenth episode reaches 1,000 input tokens; no episode starts after it.
    assert len(run.episodes) == 10
    assert run.status == "capped"
    assert run.manifest["capped"]["spent"] == {"input": 1000, "output": 100}
    # The items pass; the capped run is one failure pytest counts (prove::gate).
    result.assert_outcomes(passed=10, failed=1)
    result.stdout.fnmatch_lines([
        "*token cap reached: the run used 1,000 input tokens of the 1,000 allowed by "
        "--prove-token-cap 1000*",
        "*tokens: 1,000 input and 100 output in 10 calls (sim-model), $0.0028*",
        "*next: raise the cap, or finish the run later with --prove-resume*",
    ])


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["--prove-concurrency", "3"]], ids=["items", "blocks"])
def test_cap_under_xdist_stops_within_one_item_per_worker(spender: pytest.Pytester,
                                                          extra: list[str]) -> None:
    result = spender.runpytest("-n", "2", "--prove-token-cap", "1000", *extra)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = load(spender)
    assert run.status == "capped"
    spent = sum(r["tokens"]["input"] for r in run.episodes)
    per_item = 100 * (3 if extra else 1)
    # The cap is reached. Once the controller has counted the item that reached it, no
    # item starts: each of the 2 workers finishes at most the one it is running, and with
    # blocks the replicates its window started ahead of it (at most one block, under a cap).
    ahead = per_item if extra else 0
    assert 1000 <= spent < 1000 + per_item + 2 * (per_item + ahead)
    assert len(run.episodes) < 60
    # Items never started are neither stored nor failed; the cap is the one failure.
    assert all(r["error"] is None for r in run.episodes)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1 and "errors" not in outcomes
    result.stdout.fnmatch_lines(["FAILED prove::gate - gate failed: token cap reached*"])
    result.stdout.fnmatch_lines(["*token cap reached: the run used *input tokens of the 1,000*"])


def test_output_cap(spender: pytest.Pytester,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEND_NAP", "0")  # one process: no item runs beside another
    result = spender.runpytest("-p", "no:xdist", "--prove-output-token-cap", "50")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert len(load(spender).episodes) == 5
    result.stdout.fnmatch_lines(["*the run used 50 output tokens of the 50 allowed by "
                                 "--prove-output-token-cap 50*"])


def test_a_run_under_the_cap_completes(spender: pytest.Pytester,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEND_NAP", "0")  # one process: no item runs beside another
    under = spender.runpytest("-p", "no:xdist", "--prove-token-cap", "1000000")
    assert under.ret == pytest.ExitCode.OK
    assert load(spender).status == "complete"


def test_bad_cap_is_a_usage_error(spender: pytest.Pytester) -> None:
    result = spender.runpytest("--prove-token-cap", "lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prove-token-cap: expected a number of tokens, a whole "
                                 "number from 1 to *, got 'lots'*"])
