"""Absolute targets end to end (issue 32): a condition read against a fixed rate on one run,
no baseline needed. A target met passes; one missed fails naming its condition and target
(one process and -n 2); with a baseline both the comparison and the targets are read, each
its own family; --prove-plan prints the replicates the targets need and the design check
refuses a target design too small to decide; every bad target is refused before anything
runs, naming where it was written and the fix."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET

import pytest

from pytest_prove.declare.targets import TargetError, parse_target, parse_targets

from .conftest import INI


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner sessions' lines are matched whole: a wide terminal keeps them so."""
    monkeypatch.setenv("COLUMNS", "200")


#: A seeded agent: refund tickets stay unresolved 10% of the time, or 80% with BAD=1;
#: password tickets 5% of the time.
AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    BAD = os.environ.get("BAD") == "1"


    @prove.rollout(replicates=int(os.environ.get("AGENT_REPLICATES", "60")),
                   failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        rng = random.Random(prove_seed)
        rate = {"refund": 0.8 if BAD else 0.1, "password": 0.05}[ticket]
        return prove.Episode("unresolved" if rng.random() < rate else "resolved")
    """
)


@pytest.fixture
def agent(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    return pytester


def _runs(pytester: pytest.Pytester) -> list[str]:
    folder = pytester.path / ".prove" / "runs"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("workers", [pytest.param([], id="one-process"),
                                     pytest.param(["-n", "2"], id="xdist",
                                                  marks=pytest.mark.slow)])
def test_a_target_met_passes_and_one_missed_fails_naming_its_condition(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]) -> None:
    # Under xdist the run that meets its target goes through one worker (-n 1: the worker's
    # episodes reach the controller the same way, one worker start less); the run that
    # misses splits each condition's replicates between two.
    met = agent.runpytest("--prove-target=unresolved<=0.4", "--prove-salt=fixed",
                          *(["-n", "1"] if workers else []))
    assert met.ret == pytest.ExitCode.OK, met.stdout.str()
    met.stdout.fnmatch_lines(["targets: meets target: every one of 2 rows*"])
    assert "prove-gate" not in met.stdout.str()

    monkeypatch.setenv("BAD", "1")
    missed = agent.runpytest("--prove-target=unresolved<=0.4", "--prove-salt=fixed",
                             "--junitxml=gate.xml", "--prove-report=run.html", *workers)
    assert missed.ret == pytest.ExitCode.TESTS_FAILED
    out = missed.stdout.str()
    missed.stdout.fnmatch_lines([
        "*test_agent::prove-gate[[]ticket=refund[]]*",
        "misses target: ticket=refund unresolved 0.* (bound 0.*; target at most 0.4)*",
        "targets: misses target: 1 row (ticket=refund unresolved*",
        "*FAILED test_agent.py::test_agent::prove-gate[[]ticket=refund[]]*"])
    assert "prove-gate[ticket=password]" not in out
    # The JUnit report counts the gate's failure, its text the target's row.
    failures = [case for case in ET.parse(agent.path / "gate.xml").iter("testcase")
                if case.find("failure") is not None]
    assert [case.get("name") for case in failures] == ["prove-gate[ticket=refund]"]
    assert "misses target" in (failures[0].find("failure").text or "")  # type: ignore[union-attr]
    # The one-run report holds the target rows, coloured by their word.
    page = (agent.path / "run.html").read_text()
    assert page.count('<tr class="target-misses"><td>ticket=refund</td>') == 1
    assert page.count('<tr class="target-meets"><td>ticket=password</td>') == 1


def test_no_missed_spares_a_missed_target_and_not_met_fails_one_too_small(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAD", "1")
    spared = agent.runpytest("--prove-target=unresolved<=0.4", "--prove-salt=fixed",
                             "--prove-fail-on=no-missed")
    assert spared.ret == pytest.ExitCode.OK
    spared.stdout.fnmatch_lines(["*note: 1 target row misses its target and does not fail "
                                 "this gate: --prove-fail-on leaves missed out (no-missed)*"])
    monkeypatch.delenv("BAD")
    # 6 replicates a condition cannot show 10% to be under 30%: too small to tell, which
    # passes by default and fails when not-met is asked for.
    monkeypatch.setenv("AGENT_REPLICATES", "6")
    open_ = agent.runpytest("--prove-target=unresolved<=0.3", "--prove-salt=fixed")
    assert open_.ret == pytest.ExitCode.OK, open_.stdout.str()
    open_.stdout.fnmatch_lines(["targets: too small to tell: 2 rows*",
                                "*replicates a condition would decide it*"])
    strict = agent.runpytest("--prove-target=unresolved<=0.3", "--prove-salt=fixed",
                             "--prove-fail-on=not-met")
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.stdout.fnmatch_lines(["*prove-gate[[]ticket=refund[]]*",
                                 "too small to tell: ticket=refund unresolved*"])


def test_with_a_baseline_both_the_comparison_and_the_targets_are_read(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert agent.runpytest("--prove-save-baseline=main").ret == pytest.ExitCode.OK
    monkeypatch.setenv("BAD", "1")
    result = agent.runpytest("--prove-baseline=main", "--prove-target=unresolved<=0.4",
                             "--prove-report=r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "worse" in out and "misses target" in out
    assert "the targets are a Holm family of their own at q" in out
    # One report for the condition, the comparison's words and the target's both in it.
    assert out.count("_ test_agent::prove-gate[ticket=refund] _") == 1
    report = json.loads((agent.path / "r.json").read_text())
    words = {(r["condition"], r["word"]) for r in report["targets"]["rows"]}
    assert words == {("ticket=refund", "misses target"), ("ticket=password", "meets target")}
    # The command line reads the targets from the run's manifest, and gates on them alike.
    monkeypatch.chdir(agent.path)
    from pytest_prove.cli import main

    assert main(["check", "baseline:main", "latest", "--fail-on", "no-worse"]) == 4
    said = capsys.readouterr().out
    assert "misses target" in said and "check failed: the verdict is 'worse'" in said
    assert "the targets' 'misses target' of unresolved<=0.4 in ticket=refund" in said
    assert main(["show", "latest"]) == 0
    assert "pass^k (all k tries succeed)" in capsys.readouterr().out
    # the k of a pass^k target joins 1, 2, 4 and 8
    # (whether refund's pass^3, about 0.001 here, is shown to miss 0.01 depends on the salt:
    # spared on purpose, the session passes either way and stores its run)
    assert agent.runpytest("--prove-target=pass^3>=0.01", "--prove-fail-on=no-missed"
                           ).ret == pytest.ExitCode.OK
    capsys.readouterr()  # the session's own lines
    assert main(["show", "latest", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["pass_k"]
    assert [sorted(map(int, c["pass_hat_k"])) for c in shown] == [[1, 2, 3, 4, 8]] * 2


def test_the_plan_prints_the_replicates_the_targets_need(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_REPLICATES", "100")
    result = agent.runpytest("--prove-plan", "--prove-target=unresolved<=0.4",
                             "--prove-target=ticket=refund: pass^8>=0.5",
                             "--prove-target=resolved>=0.6~0.1")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "targets: 5 target rows (each condition and its targets), Holm q 0.05 over them;*",
        "  test_agent unresolved<=0.4: * (distance 0.2); it runs 100: ok",
        "  test_agent ticket=refund: pass^8>=0.5: * (distance 0.2); it runs 100: too few",
        "  test_agent resolved>=0.6~0.1: * (distance 0.1); it runs 100: too few",
        "  --prove-allow-underpowered: the run goes ahead; rows too small to tell do not "
        "fail the gate*"])
    # Without the ini's --prove-allow-underpowered, the plan says the run would stop.
    agent.makeini("[pytest]\n")
    strict = agent.runpytest("--prove-plan", "--prove-target=ticket=refund: pass^8>=0.5",
                             "--prove-max-mde=0.3")
    assert strict.ret == pytest.ExitCode.USAGE_ERROR
    strict.stdout.fnmatch_lines(["*design check failed for the targets*the run would stop "
                                 "here"])


def test_a_target_design_too_small_is_refused_before_anything_runs(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_agent=AGENT)
    monkeypatch.setenv("AGENT_REPLICATES", "130")  # enough for the outcome design check
    result = pytester.runpytest("--prove-target=pass^8>=0.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*design check failed for the targets: test_agent "
                                 "pass^8>=0.5 needs * replicates a condition (distance "
                                 "0.2) and runs 130*"])
    assert _runs(pytester) == []
    allowed = pytester.runpytest("--prove-target=pass^8>=0.5", "--prove-allow-underpowered")
    assert allowed.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert "\ntargets: " in allowed.stdout.str()


@pytest.mark.parametrize(("args", "said"), [
    (["--prove-target=resolved=0.9"], "*--prove-target*target 'resolved=0.9' compares with "
                                      "'='; write EVENT<=RATE or EVENT>=RATE*"),
    (["--prove-target=unresolved<=1.5"], "*--prove-target*rate 1.5, outside [[]0, 1[]]*"),
    (["--prove-target=pass^0>=0.5"], "*--prove-target*pass^0; k counts the tries*"),
    (["--prove-target=resolvd>=0.9"], "*--prove-target: target 'resolvd>=0.9': no selected "
                                      "rollout declares the event 'resolvd'*"),
    (["--prove-target=ticket=nope: resolved>=0.9"], "*holds for a condition that rollout "
                                                    "test_agent does not run*"),
    (["--prove-target=pass^100>=0.5"], "*asks about 100 tries, and test_agent runs 60*"),
    (["--prove-target=resolved>=0.5", "--prove-sequential", "--prove-baseline=main"],
     "*--prove-sequential cannot be used with targets yet*"),
])
def test_a_bad_target_is_refused_before_anything_runs_naming_its_flag(
        agent: pytest.Pytester, args: list[str], said: str) -> None:
    if "--prove-baseline=main" in args:
        assert agent.runpytest("--prove-save-baseline=main").ret == pytest.ExitCode.OK
    before = _runs(agent)
    result = agent.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([said])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert _runs(agent) == before  # nothing ran


def test_a_bad_ini_target_is_refused_naming_the_ini_value_and_line(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI + "prove_targets =\n    resolved>=0.9\n    unresolved <> 0.1\n")
    pytester.makepyfile(test_agent=AGENT)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option prove_targets: line 2 of its value: target "
                                 "'unresolved <> 0.1'*"])
    assert _runs(pytester) == []


def test_ini_targets_are_read_like_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI + "prove_targets =\n    unresolved<=0.4  # the floor\n")
    pytester.makepyfile(test_agent=AGENT)
    result = pytester.runpytest("--prove-salt=fixed")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["targets: meets target: every one of 2 rows*"])


def test_a_decorator_target_on_an_undeclared_event_is_refused_at_its_line(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT.replace(
        'successes=["resolved"])', 'successes=["resolved"], targets={"resolvd": ">= 0.9"})'))
    result = pytester.runpytest()
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*targets=: target 'resolvd>=0.9' names the event 'resolvd', "
                                 "which is not declared*"])
    assert _runs(pytester) == []


METRICS_ONLY = """
import random
import pytest
import pytest_prove as prove

@pytest.mark.parametrize("ticket", ["refund", "password"])
@prove.rollout(metrics={"judge": "higher"}, targets=TARGETS)
def test_scored(ticket, prove_seed):
    return prove.Episode(metrics={"judge": random.Random(prove_seed).random()})
"""


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_a_target_on_a_metric_of_a_rollout_of_metrics_only_names_its_one_event_and_the_fix(
        pytester: pytest.Pytester) -> None:
    """A rollout of metrics only has one event a target can name ('no outcome'): a target
    on its metric is refused naming that and the option that holds a metric instead (the
    message listed the declared outcomes as an empty string)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_scored=METRICS_ONLY.replace("TARGETS", '{"judge": ">= 0.5"}'))
    result = pytester.runpytest()
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines([
        "*target 'judge>=0.5' names the event 'judge', which is not declared (the rollout "
        "declares metrics and no outcomes, so its one event is 'no outcome'; a metric is held "
        "to its baseline by --prove-metric-margin, not by a target)*"])
    assert "declared: ," not in result.stdout.str()
    assert _runs(pytester) == []
    pytester.makepyfile(test_scored=METRICS_ONLY.replace("TARGETS", '{"no outcome": "<= 0.2"}'))
    result = pytester.runpytest("--prove-salt=fixed")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["targets: meets target: every one of 2 rows*"])


def test_a_decorator_target_for_one_condition_reads_only_that_condition(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT.replace(
        'successes=["resolved"])',
        'successes=["resolved"], targets={"ticket=refund: unresolved": "<= 0.4"})'))
    monkeypatch.setenv("BAD", "1")
    result = pytester.runpytest("--prove-salt=fixed")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["targets: misses target: 1 row*0 meet, 1 miss*"])


SPEC = textwrap.dedent(
    """
    target = "agent_fn:run"
    replicates = 30

    [declare]
    failures = ["unresolved"]
    successes = ["resolved"]

    [axes.ticket]
    values = ["refund"]

    [targets]
    unresolved = "<= 0.6"
    "pass^2" = "=> 0.5"
    """
)


def test_a_bad_sweep_spec_target_is_refused_naming_the_file_and_line(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(agent_fn="import pytest_prove as prove\n\n\ndef run(cfg, seed):\n"
                                 "    return prove.Episode('resolved')\n")
    pytester.path.joinpath("prove_agent.toml").write_text(SPEC)
    result = pytester.runpytest()
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*prove_agent.toml:14: [[]targets[]]*'pass^2' = '=> 0.5' is "
                                 "not a side and a rate*"])
    pytester.path.joinpath("prove_agent.toml").write_text(SPEC.replace("=> 0.5", ">= 0.5"))
    good = pytester.runpytest("--prove-salt=fixed")
    assert good.ret == pytest.ExitCode.OK, good.stdout.str()
    good.stdout.fnmatch_lines(["targets: meets target: every one of 2 rows*"])


@pytest.mark.parametrize(("text", "event", "side", "rate", "k", "condition"), [
    ("resolved>=0.9", "resolved", ">=", 0.9, 1, ()),
    ("resolved >= 90%", "resolved", ">=", 0.9, 1, ()),
    ("no outcome<=0.05", "no outcome", "<=", 0.05, 1, ()),
    ("pass^8>=0.5", "pass^8", ">=", 0.5, 8, ()),
    ("pass@4 >= 0.99", "pass@4", ">=", 0.99, 4, ()),
    ("ticket=refund, model=mini: resolved>=0.9", "resolved", ">=", 0.9, 1,
     (("ticket", "refund"), ("model", "mini"))),
    # as a condition's label writes it (issue 34 item 5)
    ("ticket=refund model=mini: resolved>=0.9", "resolved", ">=", 0.9, 1,
     (("ticket", "refund"), ("model", "mini"))),
    ("ticket=refund please: resolved>=0.9", "resolved", ">=", 0.9, 1,
     (("ticket", "refund please"),)),
    ("resolved>=0.9~0.05", "resolved", ">=", 0.9, 1, ()),
])
def test_targets_are_parsed_as_written(text: str, event: str, side: str, rate: float, k: int,
                                       condition: tuple[tuple[str, str], ...]) -> None:
    found = parse_target(text)
    assert (found.event, found.side, found.rate, found.k, found.condition) == (
        event, side, rate, k, condition)
    assert parse_target(found.text) == found  # written back, read the same


@pytest.mark.parametrize(("declared", "said"), [
    ("unresolved<=0.1", "must map each event"),
    ({"unresolved": 0.1}, "is not a target"),
    ({"unresolved": "0.1"}, "is not a side and a rate"),
    ({"unresolved": "<= 0"}, "exactly 0, which no number of replicates can show met"),
    ({"unresolved": "<= 0.1", " unresolved": "<= 0.2"}, "ask the same of one rate"),
    ({"unresolved": "<= 0.1 ~ 2"}, "write ~D with 0 < D < 1"),
])
def test_bad_declared_targets_are_refused(declared: object, said: str) -> None:
    with pytest.raises(TargetError, match=said.replace("(", r"\(")):
        parse_targets(declared, "targets=")


def test_a_condition_whose_episodes_erred_cannot_be_vouched_for_and_fails_closed(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT.replace(
        "    rng = random.Random(prove_seed)\n",
        "    rng = random.Random(prove_seed)\n"
        "    if ticket == 'refund' and rng.random() < 0.5:\n"
        "        raise RuntimeError('the tool is down')\n"))
    result = pytester.runpytest("--prove-target=unresolved<=0.4", "--prove-salt=fixed")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*gate failed: ticket=refund: target unresolved<=0.4 cannot be vouched for: * of its "
        "60 episodes ended without an outcome, more than --prove-max-errored 0.25 allows*"])
    assert "prove-gate[ticket=password]" not in result.stdout.str()


@pytest.mark.slow
# In one process only. Its [xdist] variant (-n 1) is merged away: a target missed under
# xdist fails naming its condition and no other, read from a worker's episodes, is
# test_a_target_met_passes_and_one_missed_fails_naming_its_condition[xdist]'s (the same
# assertions on a smaller project, -n 1 and -n 2); the example's 600 items through a worker
# were 2 s of CPU and 5 s of wall a run.
def test_the_bundled_example_meets_its_target_and_the_terse_prompt_misses_it_on_refund(
        example: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's acceptance: no baseline, the default prompt passes, the terse one fails
    naming ticket=refund (its refunds stay unresolved about 38.5% of the time, 0.25
    allowed). On a fixed salt: at 200 replicates the terse refunds are shown to miss about
    98 times in 100, and the careful ones (18.3%) shown to meet about 1 time in 2."""
    args = ["-p", "no:randomly", "--prove-target=unresolved<=0.25", "--prove-salt=s2"]
    careful = example.runpytest(*args)
    assert careful.ret == pytest.ExitCode.OK, careful.stdout.str()
    careful.stdout.fnmatch_lines(["targets: *; * meet, 0 miss, *"])
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "terse")
    terse = example.runpytest(*args)
    assert terse.ret == pytest.ExitCode.TESTS_FAILED
    terse.stdout.fnmatch_lines(["FAILED *test_support.py::test_support::prove-gate"
                                "[[]ticket=refund[]]*"])
    assert "prove-gate[ticket=password]" not in terse.stdout.str()
    assert "prove-gate[ticket=shipping]" not in terse.stdout.str()
    planned = example.runpytest("--prove-plan", "--prove-target=unresolved<=0.25")
    planned.stdout.fnmatch_lines(["  test_support unresolved<=0.25: * (distance 0.2); it "
                                  "runs 200: ok"])


def _a_worse_comparison_fails_the_gate_when_every_target_is_met(
        agent: pytest.Pytester) -> None:
    """Was a test of its own, which saved the same baseline: 'main' is saved and BAD=1."""
    # The targets' gate passing must not overwrite the comparison's failure (it did: the
    # session set its gate from the targets alone after the comparison had failed it).
    result = agent.runpytest("--prove-baseline=main", "--prove-target=unresolved<=0.99",
                             "--prove-fail-on=worse,missed", "-rf")
    out = result.stdout.str()
    assert "worse" in out and "misses target" not in out, out
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    result.stdout.fnmatch_lines(["FAILED *prove-gate?ticket=refund? - worse*"])


def test_targets_are_gated_in_an_aa_session(agent: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # --prove-aa used to skip the targets' gate: a missed target passed unread.
    monkeypatch.setenv("BAD", "1")
    result = agent.runpytest("--prove-aa", "--prove-target=unresolved<=0.2", "-rf")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*A/A: *", "FAILED *prove-gate?ticket=refund? - *target*"])


def test_updating_the_baseline_accepts_the_change_but_not_a_missed_target(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    assert agent.runpytest("--prove-save-baseline=main").ret == pytest.ExitCode.OK
    monkeypatch.setenv("BAD", "1")
    _a_worse_comparison_fails_the_gate_when_every_target_is_met(agent)
    # The worse run accepted as the new baseline on purpose: the comparison no longer fails.
    accepted = agent.runpytest("--prove-baseline=main", "--prove-update-baseline")
    assert accepted.ret == pytest.ExitCode.OK, accepted.stdout.str()
    # A target it misses is another claim: accepting the baseline does not spare it.
    result = agent.runpytest("--prove-baseline=main", "--prove-update-baseline",
                             "--prove-target=unresolved<=0.2", "-rf")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED *prove-gate?ticket=refund? - *target*"])
