"""Graders and ``pytest-prove regrade``: the agent's answers kept with its episodes, graded
when the rollout names a grader, and graded again later without running the agent."""

from __future__ import annotations

import json
import random
import sys
import textwrap
from pathlib import Path

import pytest

import pytest_prove as prove
from pytest_prove.cli import main
from pytest_prove.declare.spec import SpecError
from pytest_prove.store import Store

from ._helpers_speed import copy_project, saved_project

#: Each answer says the seed's draw; the lenient grader resolves every answer that is not an
#: apology, the strict one only a refund that was issued.
GRADERS = textwrap.dedent(
    """
    import itertools

    _calls = itertools.count()


    def lenient(answer, condition):
        return "unresolved" if answer.startswith("sorry") else "resolved"


    def strict(answer, condition):
        if condition["ticket"] == "refund" and not answer.startswith("refund issued"):
            return "unresolved"
        return lenient(answer, condition)


    def scored(answer, condition):
        return lenient(answer, condition), {"judge": float(len(answer) % 5)}


    def noisy(answer, condition):
        # A judge that changes its mind on every third call it is asked.
        n = next(_calls)
        outcome = lenient(answer, condition)
        if n % 3 == 2:
            outcome = "resolved" if outcome == "unresolved" else "unresolved"
        return outcome, {"judge": float(len(answer) % 5) + (n % 3)}


    def raises(answer, condition):
        if "7" in answer:
            raise KeyError("no rubric for this answer")
        return lenient(answer, condition)


    def number(answer, condition):
        return 3


    def made_up(answer, condition):
        return "escalated"


    NOT_A_FUNCTION = 4
    """
)

AGENT = textwrap.dedent(
    """
    import random

    import pytest
    import pytest_prove as prove


    def answer_of(ticket, seed):
        draw = random.Random(seed).random()
        if draw < 0.15:
            return f"sorry, I cannot help {seed % 10}"
        if draw < 0.5:
            return f"I looked at it {seed % 10}"
        return f"{'refund issued' if ticket == 'refund' else 'password reset'} {seed % 10}"


    @prove.rollout(replicates=30, failures=["unresolved"], successes=["resolved"],
                   GRADING)
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_bot(ticket, prove_seed):
        return prove.Episode(answer=answer_of(ticket, prove_seed))
    """
)


def _project(pytester: pytest.Pytester, grading: str = 'grader="graders:lenient"',
             agent: str = AGENT) -> pytest.Pytester:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(graders=GRADERS, test_bot=agent.replace("GRADING", grading))
    return pytester


@pytest.fixture(scope="module")
def _first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project _project makes (the lenient grader), after its run 'first': made once for
    the module, in this process, for the tests that regrade it (each works on a copy)."""
    # A fixed salt: the tests that regrade it need an answer with a 7 in it (a seed ending
    # in 7: none of 60 came 0.9^60 = 1.8e-3 of the time on a new salt) and a refund answer
    # "I looked" (none of 30 came 0.65^30 = 2.4e-6 of the time); this salt has 6 and 11.
    return saved_project(tmp_path_factory.mktemp("first"), {
        "tox.ini": "[pytest]\nprove_allow_underpowered = true\n", "graders.py": GRADERS,
        "test_bot.py": AGENT.replace("GRADING", 'grader="graders:lenient"')},
        "--prove-name=first", "--prove-salt=regrade")


@pytest.fixture
def first(pytester: pytest.Pytester, _first: Path) -> pytest.Pytester:
    """This test's copy of the project with run 'first' (the same as _project then a session
    with --prove-name=first)."""
    copy_project(_first, pytester.path)
    return pytester


def _cli(project: pytest.Pytester, capsys: pytest.CaptureFixture[str],
         *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(["--store", str(project.path / ".prove"), *args])
    finally:
        # The command imports the project's graders.py in this process: another test's
        # project has its own (pytester's in-process sessions restore sys.modules, this
        # direct call does not).
        sys.modules.pop("graders", None)
    out, err = capsys.readouterr()
    return code, out, err


def _episodes(project: pytest.Pytester, name: str) -> list[dict[str, object]]:
    return [dict(r) for r in Store(project.path / ".prove").open(name).episodes]


def _answer(ticket: str, seed: int) -> str:
    draw = random.Random(seed).random()
    if draw < 0.15:
        return f"sorry, I cannot help {seed % 10}"
    if draw < 0.5:
        return f"I looked at it {seed % 10}"
    return f"{'refund issued' if ticket == 'refund' else 'password reset'} {seed % 10}"


#: Under xdist ONE worker: what it checks (the grader imported and called where the rollout
#: runs, the answer and its outcome sent to the controller) is one worker's, and -n 1 takes
#: the same worker hooks and channel as -n 2 with one interpreter start less.
@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["one-process", "xdist"])
def test_a_declared_grader_grades_each_answer_and_the_answers_are_kept(
        pytester: pytest.Pytester, workers: list[str]) -> None:
    _project(pytester)
    result = pytester.runpytest("-p", "no:randomly", "--prove-name=first", *workers)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    episodes = _episodes(pytester, "first")
    assert len(episodes) == 60
    for record in episodes:
        ticket = record["condition"]["ticket"]  # type: ignore[index]
        expected = _answer(str(ticket), int(record["seed"]))  # type: ignore[call-overload]
        assert record["answer"] == expected
        assert record["outcome"] == ("unresolved" if expected.startswith("sorry")
                                     else "resolved")


def test_a_grader_that_fails_is_the_episodes_named_error_and_its_answer_is_kept(
        pytester: pytest.Pytester) -> None:
    _project(pytester, 'grader="graders:raises"')
    # A fixed salt: the grader raises on an answer with a 7 in it (a seed ending in 7), and
    # none of 60 came 0.9^60 = 1.8e-3 of the time on a new salt; this salt has 6.
    result = pytester.runpytest("-p", "no:randomly", "--prove-name=first",
                                "--prove-salt=regrade")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*grader graders:raises raised KeyError: 'no rubric for this "
                                 "answer'*"])
    episodes = _episodes(pytester, "first")
    failed = [r for r in episodes if r.get("error")]
    assert failed and all("7" in str(r["answer"]) for r in failed)
    assert all(r["outcome"] in ("resolved", "unresolved") for r in episodes
               if not r.get("error"))


def test_regrade_with_a_stricter_grader_turns_the_expected_episodes_and_diff_names_them(
        first: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester = first
    code, out, err = _cli(pytester, capsys, "regrade", "first", "--grader", "graders:strict",
                          "--name", "strict")
    assert code == 0, err
    before = {(r["condition_key"], r["replicate"]): r for r in _episodes(pytester, "first")}
    after = {(r["condition_key"], r["replicate"]): r for r in _episodes(pytester, "strict")}
    assert before.keys() == after.keys()
    turned = sorted(k for k in before if before[k]["outcome"] != after[k]["outcome"])
    expected = sorted(k for k, r in before.items()
                      if r["condition"] == {"ticket": "refund"}  # type: ignore[comparison-overlap]
                      and str(r["answer"]).startswith("I looked"))
    assert turned == expected and expected
    assert all(before[k]["seed"] == after[k]["seed"] for k in before)
    assert all(after[k]["outcome"] == "unresolved" for k in turned)
    assert f"ticket=refund: 30 graded; resolved -> unresolved {len(expected)}" in out
    assert "ticket=password: 30 graded; no outcome changed" in out
    code, out, _ = _cli(pytester, capsys, "show", "strict")
    assert "regraded from 'first' with graders:strict" in out
    code, out, _ = _cli(pytester, capsys, "flips", "first", "strict")
    assert code == 0
    assert f"{len(expected)} of 60 twins ended differently in strict than in first" in out


def test_a_noisy_judge_graded_three_times_reports_its_agreement_with_itself(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester, 'keep_answers=True, metrics={"judge": "higher"}',
             AGENT.replace("return prove.Episode(answer=answer_of(ticket, prove_seed))",
                           "text = answer_of(ticket, prove_seed)\n"
                           "    return prove.Episode('resolved', answer=text, "
                           "metrics={'judge': 1.0})"))
    # A fixed salt: the judge's score is the answer's length mod 5 (+ the call's noise), and
    # every password answer but an apology is 1 mod 5; with no apology among password's 30
    # (0.85^30 = 7.6e-3 of runs on a new salt) its whole variance was the grader's, and the
    # noise below read 1.0. This salt has 2 apologies there.
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=first",
                              "--prove-salt=regrade").ret == 0
    code, out, err = _cli(pytester, capsys, "regrade", "first", "--grader", "graders:noisy",
                          "--name", "noisy", "--times", "3", "--json")
    assert code == 0, err
    document = json.loads(out)
    for condition in document["conditions"]:
        # The third grading of each answer is flipped: no answer gets one outcome thrice.
        assert condition["agreement"] == 0.0
        # judge = len % 5 + (0, 1, 2): within-answer variance 2/3 of the total's share.
        assert 0.0 < condition["noise"]["judge"] < 1.0
    code, out, _ = _cli(pytester, capsys, "regrade", "first", "--grader", "graders:scored",
                        "--name", "scored", "--times", "2")
    assert "the same outcome every time for 100% of the answers" in out
    assert "judge: 0% of its variance is the grader's own noise" in out  # a steady judge


@pytest.mark.parametrize(("grader", "said"), [
    ("graders:raises", "grader graders:raises raised KeyError: 'no rubric for this answer'"),
    ("graders:number", "grader graders:number returned 3 (int); return an outcome's name"),
    ("graders:made_up", "grader graders:made_up returned the outcome 'escalated', which the "
                        "rollout does not declare"),
])
def test_a_grader_that_raises_or_returns_no_outcome_is_a_named_error_per_episode(
        first: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        grader: str, said: str) -> None:
    pytester = first
    code, out, _ = _cli(pytester, capsys, "regrade", "first", "--grader", grader,
                        "--name", "new")
    assert f"first episode not graded: {said}" in out
    new = _episodes(pytester, "new")
    assert len(new) == 60  # nothing lost: every episode, graded or not
    refused = [r for r in new if r.get("error")]
    assert all(r["error"]["type"] == "GraderError" for r in refused)  # type: ignore[index]
    assert all("answer" in r for r in refused)
    if grader == "graders:raises":
        assert code == 0 and 0 < len(refused) < 60
        assert all("7" in str(r["answer"]) for r in refused)
    else:
        assert code == 1 and len(refused) == 60  # nothing graded: the command failed


def test_regrade_refuses_what_it_cannot_do_with_the_fix(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester, "", AGENT.replace(
        "return prove.Episode(answer=answer_of(ticket, prove_seed))",
        "return prove.Episode('resolved', answer=answer_of(ticket, prove_seed))"))
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=first",
                              "--prove-save-baseline=base").ret == 0
    code, _, err = _cli(pytester, capsys, "regrade", "first", "--grader", "graders:strict",
                        "--name", "x")
    assert code == 1 and "run 'first' kept no answers" in err and "keep_answers=True" in err
    code, _, err = _cli(pytester, capsys, "regrade", "first", "--name", "x")
    assert code == 1 and "name the grader" in err
    code, _, err = _cli(pytester, capsys, "regrade", "base", "--grader", "graders:strict",
                        "--name", "x")
    assert code == 1 and "baseline:base is a baseline, which keeps no answers" in err
    code, _, err = _cli(pytester, capsys, "regrade", "first", "--grader", "nowhere:f",
                        "--name", "x")
    assert code == 1 and "cannot import 'nowhere'" in err
    code, _, err = _cli(pytester, capsys, "regrade", "first", "--grader",
                        "graders:NOT_A_FUNCTION", "--name", "x")
    assert code == 1 and "(int, not a function)" in err
    code, _, err = _cli(pytester, capsys, "regrade", "first", "--grader", "not a name",
                        "--name", "x")
    assert code == 1 and "must name a function as module:function" in err
    code, _, err = _cli(pytester, capsys, "regrade", "first", "--grader", "graders:strict",
                        "--name", "first")
    assert code == 1 and "a run named 'first' is already" in err


def test_an_answer_too_large_to_keep_is_said_and_a_bad_one_refused(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester, "keep_answers=True", AGENT.replace(
        "return prove.Episode(answer=answer_of(ticket, prove_seed))",
        "return prove.Episode('resolved', answer=answer_of(ticket, prove_seed) * 8000)"))
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=first").ret == 0
    stored = _episodes(pytester, "first")
    assert all("answer" not in r and r["answer_bytes"] > 65_536 for r in stored)
    code, _, err = _cli(pytester, capsys, "regrade", "first", "--grader", "graders:strict",
                        "--name", "x")
    assert code == 1 and "kept no answers" in err
    with pytest.raises(prove.RolloutContractError, match="answer must be text or a JSON"):
        prove.Episode("resolved", answer=object())
    with pytest.raises(SpecError, match="grader= must name a function as module:function"):
        prove.rollout(failures=["unresolved"], grader="graders")
