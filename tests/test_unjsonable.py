"""Values JSON cannot hold are refused where they come in, never when they are written.

A parameter that is NaN, infinite or a string with a lone surrogate is refused at
collection, naming the test and the parameter, before any rollout runs; the same
in an episode's ``meta`` is a contract error of that episode, and the session goes on.
"""

from __future__ import annotations

import textwrap

import pytest

from .conftest import INI, load

#: The xdist variant runs ONE worker: what it checks (a value escaped before the worker
#: sends it to the controller) is one process's, and -n 1 goes through the same worker hooks
#: and report channel as -n 2 with one process (0.6-1.5 s of CPU) less: under a second of
#: CPU, not slow.
WORKERS = pytest.mark.parametrize("workers", [
    pytest.param([], id="single"), pytest.param(["-n", "1"], id="xdist")])

#: The refusal of a parameter at collection, in one process and with one worker, each value
#: in a session of its own; with two workers, in one session holding every value (below).
#: A worker used to stop the session (session.shouldstop) after telling the controller its
#: collection was done: the session ended "interrupted", and with one worker now and then in
#: an INTERNALERROR (the controller sent it tests on the closed channel: "OSError: cannot send
#: to <Channel ... closed>", about 1 run in 6).  It now refuses as the design check does: no
#: item, the controller says why, a usage error.
REFUSING_WORKERS = pytest.mark.parametrize("workers", [
    pytest.param([], id="single"), pytest.param(["-n", "1"], id="one-worker")])

#: Each value JSON cannot hold, as a parameter's source, and how its refusal shows it.
UNJSONABLE = {"nan": ('float("nan")', "nan cannot"),
              "inf": ('float("-inf")', "-inf cannot"),
              "surrogate": ('"caf\\ud800"', "'caf\\ud800' cannot"),
              "object": ("object()", "<object object at 0x")}


def _parametrized(pytester: pytest.Pytester, value: str, name: str = "test_r") -> None:
    pytester.makeini(INI)
    pytester.makepyfile(**{name: textwrap.dedent(
        f"""
        import pytest
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        @pytest.mark.parametrize("temp", [0.5, {value}])
        def test_r(temp):
            return prove.Episode("good", meta={{"case_id": "c"}})
        """)})


def _refused(pytester: pytest.Pytester, result: pytest.RunResult, node: str,
             shown: str) -> None:
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert "INTERNALERROR" not in out
    assert f"{node}::test_r[" in out
    assert f"the parameter temp={shown}" in out, out
    assert "passed" not in out
    assert not (pytester.path / ".prove").exists()


@REFUSING_WORKERS
@pytest.mark.parametrize(("value", "shown"), list(UNJSONABLE.values()), ids=list(UNJSONABLE))
def test_a_parameter_json_cannot_hold_is_refused_at_collection(
        pytester: pytest.Pytester, value: str, shown: str, workers: list[str]) -> None:
    _parametrized(pytester, value)
    _refused(pytester, pytester.runpytest(*workers), "test_r.py", shown)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_parameters_json_cannot_hold_are_refused_at_collection_by_two_workers(
        pytester: pytest.Pytester) -> None:
    """Under -n 2, one session holding every value (a module each, collected in this
    order): the refusal names the first item refused, as in one process.  How each value
    shows, through a worker and the controller, is checked under -n 1 above (was one -n 2
    session a value: the same channel, two workers started four times)."""
    for n, (value, _) in enumerate(UNJSONABLE.values()):
        _parametrized(pytester, value, f"test_r{n}")
    _refused(pytester, pytester.runpytest("-n", "2"), "test_r0.py", UNJSONABLE["nan"][1])


def test_an_axis_value_with_a_lone_surrogate_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_axes=textwrap.dedent(
        """
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"],
                       axes={"ticket": ["refund", "caf\\ud800"]})
        def sweep(cfg, seed):
            return prove.Episode("good")
        """))
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error
    result.stdout.fnmatch_lines(["*axis 'ticket'*'caf\\ud800'*lone surrogate*"])
    assert not (pytester.path / ".prove").exists()


def test_an_outcome_with_a_lone_surrogate_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_decl=textwrap.dedent(
        """
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad\\ud800"], successes=["good"])
        def test_decl():
            return prove.Episode("good")
        """))
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*failures*'bad\\ud800'*lone surrogate*"])
    assert not (pytester.path / ".prove").exists()


#: A value JSON cannot hold in one episode's meta, and how the contract error says it.
BAD_META = {
    "nan": ('{"x": float("nan")}', "meta[[]'x'[]]=nan is not: JSON holds no NaN*"),
    "surrogate": ('{"case_id": "c", "s": ["ok", "\\ud800"]}',
                  "meta[[]'s'[]][[]1[]]='\\ud800' is not: it holds a lone surrogate*")}


def _meta_project(pytester: pytest.Pytester, meta: str, name: str = "test_meta") -> None:
    pytester.makeini(INI)
    pytester.makepyfile(**{name: textwrap.dedent(
        f"""
        import pytest
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        @pytest.mark.parametrize("ticket", ["refund", "password"])
        def test_meta(ticket, prove_replicate):
            if ticket == "refund" and prove_replicate == 1:
                return prove.Episode("good", meta={meta})
            return prove.Episode("good", meta={{"case_id": ticket}})
        """)})


def _contract_errors(pytester: pytest.Pytester) -> list[tuple[str, str]]:
    run = load(pytester)
    errors = [r["error"] for r in run.episodes if r["error"] is not None]
    return [(e["kind"], e["type"]) for e in errors]


@pytest.mark.parametrize(("meta", "message"), list(BAD_META.values()), ids=list(BAD_META))
def test_meta_json_cannot_hold_is_a_contract_error_of_its_episode(
        pytester: pytest.Pytester, meta: str, message: str) -> None:
    _meta_project(pytester, meta)
    result = pytester.runpytest()
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([f"*test_meta.py::test_meta[[]refund-r001[]]: Episode meta must "
                                 f"be JSON-serialisable, and {message}",
                                 "*run '*' (complete): 4 episodes, 3 with an outcome*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _contract_errors(pytester) == [("contract", "RolloutContractError")]


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_meta_json_cannot_hold_is_a_contract_error_of_its_episode_under_two_workers(
        pytester: pytest.Pytester) -> None:
    """Two workers: the items of one run split between them, their episodes (two of them
    contract errors, one a value) counted together by the controller; one session for both
    values (was one -n 2 session a value)."""
    for n, (meta, _) in enumerate(BAD_META.values()):
        _meta_project(pytester, meta, f"test_meta{n}")
    result = pytester.runpytest("-n", "2")
    result.assert_outcomes(passed=6, failed=2)
    for n, (_, message) in enumerate(BAD_META.values()):
        result.stdout.fnmatch_lines([f"*test_meta{n}.py::test_meta[[]refund-r001[]]: Episode "
                                     f"meta must be JSON-serialisable, and {message}"])
    result.stdout.fnmatch_lines(["*run '*' (complete): 8 episodes, 6 with an outcome*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _contract_errors(pytester) == [("contract", "RolloutContractError")] * 2


def test_an_exception_message_with_a_lone_surrogate_is_stored(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_msg=textwrap.dedent(
        """
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        def test_msg(prove_replicate):
            if prove_replicate == 0:
                raise ValueError("upstream said caf\\ud800")
            return prove.Episode("good", meta={"case_id": "c"})
        """))
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*run '*' (complete): 2 episodes*"])
    run = load(pytester)
    errors = [r["error"] for r in run.episodes if r["error"] is not None]
    assert [e["message"] for e in errors] == ["upstream said caf\\ud800"]
    assert "caf\\ud800" in errors[0]["traceback"]


@WORKERS
def test_a_step_or_model_name_with_a_lone_surrogate_is_stored_escaped(
        pytester: pytest.Pytester, workers: list[str]) -> None:
    """Bug: prove.step and prove.usage took a name with a lone surrogate as it was; under
    xdist the worker could not send the episode (its channel takes only UTF-8) and the
    session ended in an INTERNALERROR. The name is kept as its escape, as a span's model
    name is, the same in one process and under xdist."""
    pytester.makeini(INI)
    pytester.makepyfile(test_names=textwrap.dedent(
        """
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        def test_names():
            with prove.step("look caf\\ud800"):
                prove.usage("m\\udc80", input=9, output=4)
            return prove.Episode("good")
        """))
    result = pytester.runpytest("-p", "no:randomly", *workers)
    result.assert_outcomes(passed=2)
    run = load(pytester)
    assert [[s["name"] for s in r["steps"]] for r in run.episodes] == [
        ["look caf\\ud800"]] * 2
    assert [dict(r["tokens"]["by_model"]) for r in run.episodes] == [
        {"m\\udc80": {"input": 9, "output": 4, "calls": 1}}] * 2
