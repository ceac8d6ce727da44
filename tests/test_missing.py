"""Missing outcomes are tested, not dropped; mirror events are tested once; replicates with no
twin are reported (issue 12)."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from .conftest import load

#: Two tickets; FAIL_<TICKET> is the failure rate, and the share of it above HIDE_<TICKET>
#: raises prove.NoOutcome instead (as a harness that maps a timeout or a 429 to "no outcome").
AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=int(os.environ.get("N", "190")), failures=["unresolved"],
                   successes=["resolved"], outcomes=["resolved", "unresolved", "escalated"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        rng = random.Random(prove_seed)
        fail = float(os.environ.get(f"FAIL_{ticket.upper()}", "0.2"))
        hide = float(os.environ.get(f"HIDE_{ticket.upper()}", "1"))
        draw = rng.random()
        if draw < min(fail, hide):
            return prove.Episode("unresolved")
        if draw < fail:
            if os.environ.get("CRASH") == "1":
                raise RuntimeError("the model's API returned 429")
            raise prove.NoOutcome("timed out waiting for the model")
        return prove.Episode("escalated" if draw > 0.97 else "resolved")
    """
)

#: Replicates in blocks of 10 (38 items for 380 replicates): the same replicates, seeds and
#: verdicts at a fraction of the per-item cost; what is tested here is the comparison.
INI = "[pytest]\nprove_allow_underpowered = true\naddopts = --prove-concurrency=10\n"


@pytest.fixture(scope="module")
def _saved_stores() -> dict[str, dict[str, bytes]]:
    """Each baseline's store as first saved in this process, file by file, by replicates."""
    return {}


@pytest.fixture
def agent(pytester: pytest.Pytester, _saved_stores: dict[str, dict[str, bytes]]
          ) -> pytest.Pytester:
    """The agent, with the baseline 'base' saved from it on a fixed salt (the runs paired
    with it take its salt): on a fresh salt, about one run in 470 had more than half of
    refund's 190 episodes (each with a chance of 0.4) end without an outcome when
    test_ignoring_missing_outcomes_is_said raised --prove-max-errored to 0.5, and failed."""
    return _saved(pytester, _saved_stores)


@pytest.fixture
def small_agent(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                _saved_stores: dict[str, dict[str, bytes]]) -> pytest.Pytester:
    """The agent and its baseline with 30 replicates a condition, for the tests where every
    episode of a condition ends without an outcome: 0.000 -> 1.000 needs no power, and each
    crashed episode is a failed test pytest reports (190 of them cost seconds)."""
    monkeypatch.setenv("N", "30")
    return _saved(pytester, _saved_stores)


def _saved(pytester: pytest.Pytester, stores: dict[str, dict[str, bytes]]) -> pytest.Pytester:
    """The agent, and the baseline saved from it: saved by the first test of the module that
    asks for it (of its size) in this process, and copied into the store of the others (the
    same agent, options and fixed salt: the same episodes)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    store = pytester.path / ".prove"
    saved = stores.get(os.environ.get("N", "190"))
    if saved is not None:
        for name, content in saved.items():
            (store / name).parent.mkdir(parents=True, exist_ok=True)
            (store / name).write_bytes(content)
        return pytester
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-salt=missing",
                                "--prove-save-baseline=base")
    assert result.ret == 0, result.stdout.str()
    assert "not saved" not in result.stdout.str(), result.stdout.str()
    stores[os.environ.get("N", "190")] = {str(path.relative_to(store)): path.read_bytes()
                                          for path in store.rglob("*") if path.is_file()}
    return pytester


def _json(pytester: pytest.Pytester) -> dict:  # type: ignore[type-arg]
    return json.loads((pytester.path / "r.json").read_text())


def test_failures_that_hide_as_missing_outcomes_read_worse(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIL_REFUND", "0.6")
    monkeypatch.setenv("HIDE_REFUND", "0.2")
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base",
                             "--prove-report=r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*worse: 1 condition got worse (ticket=refund: more episodes ended without an "
        "outcome, 0.000 -> 0.*",
        "*without an outcome: * episode(s) (* no outcome (after)); a rise in their share is "
        "tested as the event 'no outcome' of their condition*",
    ])
    assert "ticket=password: more episodes" not in text
    doc = _json(agent)
    rows = {(r["condition"], r["event"]): r for r in doc["comparison"]["rows"]}
    assert rows[("ticket=refund", "no outcome")]["direction"] == "worse"
    assert ("ticket=password", "no outcome") not in rows  # no missing outcome there
    assert doc["missing"] == "test"
    # The same failures recorded as failures are worse too.
    monkeypatch.setenv("HIDE_REFUND", "1")
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*worse: 1 condition got worse (ticket=refund unresolved *"])


def test_ignoring_missing_outcomes_is_said(agent: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAIL_REFUND", "0.6")
    monkeypatch.setenv("HIDE_REFUND", "0.2")
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base",
                             "--prove-missing=ignore")
    # The refund rows compare fewer twins than both runs ran, and with all of them they
    # would have seen 0.20: the gate fails closed, naming them and the fix. More than 0.25
    # of refund's episodes ended without an outcome, which ignored is never tested: that
    # fails too (--prove-max-errored raises the bound).
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*gate failed: condition ticket=refund: * of the 190 episodes "
                                 "of * ended without an outcome (0.*, more than 0.25)*",
                                 "*condition ticket=refund could not have shown "
                                 "a change of 0.20 in *with all of them it would have*"])
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base",
                             "--prove-missing=ignore", "--prove-fail-on=no-too-small",
                             "--prove-max-errored=0.5")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*missing outcomes ignored: * episode(s) without an outcome "
                                 "were left out on request (* no outcome (after))*"])
    assert "no outcome  " not in result.stdout.str()  # no row of that event
    # The ini value says the same, and a bad value is refused at the door.
    agent.makeini(INI + "prove_missing = ignore\nprove_fail_on = no-too-small\n"
                  "prove_max_errored = 0.5\n")
    assert agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base").ret == 0
    agent.makeini(INI + "prove_missing = drop\n")
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option prove_missing: expected one of test, ignore, "
                                 "got 'drop'*"])


def test_a_condition_where_every_episode_errored(small_agent: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    agent = small_agent
    monkeypatch.setenv("FAIL_REFUND", "1")
    monkeypatch.setenv("HIDE_REFUND", "0")
    monkeypatch.setenv("CRASH", "1")
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base")
    text = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "did not run" not in text and "not run:" not in text
    result.stdout.fnmatch_lines(["*worse: * (ticket=refund: more episodes ended without an "
                                 "outcome, 0.000 -> 1.000)*"])
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base",
                             "--prove-missing=ignore")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*gate failed: only 1 of the 2 condition(s) of baseline 'base' were compared; 1 "
        "ended without an outcome in every episode: ticket=refund*",
        "*no outcome: ticket=refund ran 30 episode(s), none had an outcome (not compared: "
        "missing outcomes are ignored)*",
    ])
    assert "did not run" not in result.stdout.str()


def test_replicates_without_a_twin_are_counted(agent: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("N", "300")
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base",
                             "--prove-report=r.json")
    result.stdout.fnmatch_lines(["*unpaired: replicates with no twin in the other run were "
                                 "left out (220 of *); to pair them all, give both runs the "
                                 "same replicates (--prove-replicates*"])
    assert _json(agent)["unpaired"] == {"after": 220}
    assert load(agent).manifest["status"] == "complete"


MIRROR = textwrap.dedent(
    """
    import random

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=60, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["a", "b", "c", "d"])
    def test_mirror(ticket, prove_seed):
        rng = random.Random(prove_seed)
        return prove.Episode("unresolved" if rng.random() < 0.2 else "resolved")
    """
)


def test_a_success_that_mirrors_a_failure_is_one_test(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_mirror=MIRROR)
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-save-baseline=base",
                                "--prove-plan")
    result.stdout.fnmatch_lines(["*design check: *q 0.05 over 4 tests*"])
    assert pytester.runpytest("-p", "no:cacheprovider", "--prove-save-baseline=base").ret == 0
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", "-v",
                                "--prove-report=r.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "*Holm q 0.05 over 4 tests*",
        "*method: *resolved is the complement of unresolved over the declared outcomes, so "
        "it is tested once, as unresolved*",
    ])
    doc = _json(pytester)
    assert {r["event"] for r in doc["comparison"]["rows"]} == {"unresolved"}
    assert doc["comparison"]["m"] == 4 and doc["mirrored"] == {"resolved": "unresolved"}
    # Asked for by name, a success is tested alone.
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-baseline=base",
                                "--prove-event=resolved")
    result.stdout.fnmatch_lines(["*over 4 tests*"])
    assert "complement" not in result.stdout.str()


def test_no_outcome_is_a_reserved_outcome_name(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bad="""
        import pytest_prove as prove

        @prove.rollout(replicates=5, failures=["no outcome"], successes=["ok"])
        def test_r(prove_seed):
            return prove.Episode("ok")
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*failures names 'no outcome', which pytest-prove keeps for "
                                 "episodes that end without an outcome*"])
    assert "Traceback" not in result.stdout.str()


def test_a_run_where_every_episode_errored(small_agent: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    agent = small_agent
    for ticket in ("REFUND", "PASSWORD"):
        monkeypatch.setenv(f"FAIL_{ticket}", "1")
        monkeypatch.setenv(f"HIDE_{ticket}", "0")
    monkeypatch.setenv("CRASH", "1")
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*worse: 2 conditions got worse (ticket=password: more "
                                 "episodes ended without an outcome, 0.000 -> 1.000, "
                                 "ticket=refund: more episodes*"])
    result = agent.runpytest("-p", "no:cacheprovider", "--prove-baseline=base",
                             "--prove-missing=ignore")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    result.stdout.fnmatch_lines(["*gate failed: nothing was compared: none of the 2 "
                                 "condition(s) of baseline 'base' has an outcome in run *; 2 "
                                 "ended without an outcome in every episode*"])
    assert "did not run" not in text and "not in the baseline" not in text


def test_no_outcome_is_refused_as_an_event_at_the_door(pytester: pytest.Pytester) -> None:
    """It used to be refused only after the whole sweep had run."""
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-event=no outcome")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prove-event='no outcome' names no outcome: episodes that "
                                 "end without one are tested anyway*"])
    assert not (pytester.path / ".prove").exists()
