"""--prove-sequential end to end: looks, decided conditions skipped, the verdict and its
reports, in one process and under xdist."""

from __future__ import annotations

import json
import textwrap
from collections import Counter

import pytest

from pytest_prove.cli import main
from pytest_prove.declare.spec import Declaration, SpecError
from pytest_prove.store import Store
from pytest_prove.store.baselines import save_baseline
from tests.conftest import load

#: Four conditions; condition "a" fails at the rate RATE_A says, the others at 0.10. The
#: episode draws its outcome from its seed alone, so a twin on the same seed and rate ends
#: the same way (an agent that replays its seed).  With PACE set (a folder, see PACED), an
#: episode past a look (every 4 replicates) starts only once the controller has read every
#: episode of its condition before that look.
SWEEP = textwrap.dedent(
    """
    import os
    import random
    import time

    import pytest
    import pytest_prove as prove

    RATES = {"a": float(os.environ.get("RATE_A", "0.1")), "b": 0.1, "c": 0.1, "d": 0.1}
    PACE = os.environ.get("PACE")
    LOOK = 4


    @prove.rollout(replicates=int(os.environ.get("REPLICATES", "220")),
                   failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["a", "b", "c", "d"])
    def test_sweep(ticket, prove_seed, prove_replicate):
        rng = random.Random(prove_seed)
        if PACE and prove_replicate >= LOOK:
            before = [os.path.join(PACE, f"{ticket}-r{r:03d}")
                      for r in range(prove_replicate // LOOK * LOOK)]
            for _ in range(12000):  # 120 s at most, then on (the test's counts tell)
                if all(os.path.exists(path) for path in before):
                    break
                time.sleep(0.01)
        return prove.Episode("unresolved" if rng.random() < RATES[ticket] else "resolved")
    """
)

#: The controller's side of PACE: once every hook has read an item's reports (the plugin's
#: included: it stored the episode, took the look it completes, and told the workers what
#: that look decided), a file named by the item's id (``b-r043``) says so.
PACED = textwrap.dedent(
    """
    import os
    import pathlib

    import pytest


    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(report):
        result = yield
        # xdist's controller marks a worker's report with the worker (``node``); the
        # environment cannot tell (this session may run inside a worker of an outer one).
        if report.when == "teardown" and getattr(report, "node", None) is not None:
            pathlib.Path(os.environ["PACE"], report.nodeid.rsplit("[", 1)[1][:-1]).touch()
        return result
    """
)


@pytest.fixture
def sweep(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The sweep with its baseline saved (every condition at 0.10), in blocks of 55
    replicates (16 items: quicker; the replicates and seeds are the same)."""
    pytester.makepyfile(test_sweep=SWEEP)
    monkeypatch.delenv("RATE_A", raising=False)
    saved = pytester.runpytest("-p", "no:xdist", "-p", "no:randomly", "--prove-concurrency=55",
                               "--prove-save-baseline=base", "-q")
    assert saved.ret == 0, saved.stdout.str()
    return pytester


def _stored(pytester: pytest.Pytester) -> Counter[str]:
    return Counter(str(r["condition"]["ticket"]) for r in load(pytester).episodes)


@pytest.mark.slow
def test_under_xdist_a_moved_condition_stops_early_and_fails_the_gate(
        sweep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's acceptance: 4 conditions, one moves 0.10 -> 0.60, under -n 2: the
    controller reads a look while the workers run on, and they stop starting the items of a
    condition once told it is decided.  Paced (PACE): an item past a look waits in its
    rollout until the controller has read that look, so each worker runs at most one item of
    a condition after the look that decided it, whatever the load.  (Each episode slept
    50 ms, as an agent's takes seconds, and the counts below held only while the controller
    kept up: 6 s of two workers' waiting a run.)"""
    # The plan (in this process) leaves the design in pytest's cache, where the workers
    # read it instead of one computing it again (test_sequential_design_cache.py shows a
    # worker computing it); this process's controller has it in memory.
    plan = sweep.runpytest("-p", "no:xdist", "--prove-plan", "--prove-baseline=base",
                           "--prove-sequential")
    assert plan.ret == 0, plan.stdout.str()
    plan.stdout.fnmatch_lines(["sequential: at most 880 episodes (220 a condition, a look "
                               "every 4 replicates)*"])
    monkeypatch.setenv("RATE_A", "0.6")
    pace = sweep.path / "pace"
    pace.mkdir()
    monkeypatch.setenv("PACE", str(pace))
    sweep.makeconftest(PACED)
    result = sweep.runpytest("-n", "2", "-p", "no:randomly", "--prove-baseline=base",
                             "--prove-sequential", "-rs", "--prove-report=r.json")
    out = result.stdout.str()
    assert result.ret == 1, out
    result.stdout.fnmatch_lines(["worse: 1 condition got worse (ticket=a unresolved *"
                                 "group-sequential (exact, stopping early)*"])
    stored = _stored(sweep)
    assert stored["a"] < 220 / 2, stored
    # The unchanged conditions replay their twins exactly: a change of 0.20 is ruled out at
    # the third look (12 replicates); the workers may have started a few more meanwhile.
    for ticket in "bcd":
        assert stored[ticket] < 24, stored
    # What the exact recursion predicts of an unchanged condition whose twins agree (no
    # discordant pair): 12 replicates read, every time; the rest were run ahead of the look.
    from pytest_prove.stats import sequential_design
    from pytest_prove.stats._seq_paired import run

    design = sequential_design(220, 4, paired=True)
    predicted = run(design.looks, design.efficacy, 0.2, design.futility, 0.0, 0.0)[2]
    assert predicted == pytest.approx(12.0)
    result.stdout.fnmatch_lines([
        "sequential: 4 of 4 condition(s) decided before their last look; * of 880 planned "
        "episodes read*",
        "sequential: ticket=a: decided at look * of 55 (* replicates): worse (unresolved *",
        "sequential: ticket=b: decided at look 3 of 55 (12 replicates): no change of max_mde "
        "possible",
    ])
    assert "sequential: decided at look" in out  # the skip reason of a stopped item
    manifest = load(sweep).manifest
    assert manifest["status"] == "complete"
    conditions = manifest["sequential"]["conditions"]["test_sweep.py::test_sweep"]
    states = {key: c["state"] for key, c in conditions.items()}
    read = {key: c["replicates"] for key, c in conditions.items()}
    for ticket in "bcd":
        assert read[f'{{"ticket":"{ticket}"}}'] == predicted
        assert stored[ticket] >= predicted  # stored = read + run ahead of the look
    assert states == {'{"ticket":"a"}': "worse", '{"ticket":"b"}': "no change of max_mde",
                      '{"ticket":"c"}': "no change of max_mde",
                      '{"ticket":"d"}': "no change of max_mde"}
    assert manifest["sequential"]["design"]["looks"] == [*range(4, 220, 4), 220]
    document = json.loads((sweep.path / "r.json").read_text())
    lines = document["sequential"]
    assert lines[0]["condition"] is None
    assert lines[0]["decision"].startswith("4 of 4 condition(s) decided before their last")
    assert lines[1]["condition"] == "ticket=a"
    assert lines[1]["decision"].startswith("decided at look ")
    assert "worse (unresolved " in lines[1]["decision"]
    assert document["verdict"] == "worse"
    assert "exact sign test" in document["comparison"]["method"]
    # The command line reads the stored run's looks again, and comes to the same verdict.
    capsys.readouterr()  # what the sessions above printed
    code = main(["--store", str(sweep.path / ".prove"), "--json", "check", "baseline:base",
                 "latest"])
    checked = json.loads(capsys.readouterr().out)
    assert code == 4
    assert checked["verdict"] == "worse"
    assert checked["comparison"]["method"] == document["comparison"]["method"]
    assert checked["sequential"] == document["sequential"]


@pytest.mark.slow  # a session under -n 2
def test_under_xdist_a_margin_on_the_looks_stops_conditions_shown_within(
        sweep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--prove-sequential with --prove-margin 0.1 (refused before this release): each
    condition's rows are tested for "change toward worse >= 0.1" at its margin looks (28,
    56, 84, .. of 220 replicates). Twins that replay their seed are never discordant when
    nothing changed, so each unchanged condition is shown within at 84 replicates (0.9^84 =
    0.00014 under its look's share of q, 0.0018; 0.9^56 = 0.0028 is not), stops there and
    is gated as the fixed margin verdict is; a condition that moved stops as worse (in one
    process). The command line gives the same margin verdict from the stored looks. Paced as
    the test above, so that the counts read do not depend on the load."""
    plan = sweep.runpytest("-p", "no:xdist", "--prove-plan", "--prove-sequential",
                           "--prove-baseline=base", "--prove-margin=0.1")
    assert plan.ret == 4  # 220 replicates are too few for the claim at 0.1 (576 would do)
    plan.stdout.fnmatch_lines([
        "margin design check: *each row at level q = 0.0375 (intersection-union)*",
        "sequential margin 0.1: each test is also tested for a change toward worse of 0.1 "
        "or more at the looks of 28, 56, 84, 112, 140, 168, 196, 220 replicates, q 0.05 "
        "split across them (0.0375 at the last look and 0.00179 at each other; *expected "
        "* episodes when nothing changed (* a condition; exact, twins independent at 0.40)",
        "*design check fails for the margin: *use 576 replicates a condition*"])
    pace = sweep.path / "pace"
    pace.mkdir()
    monkeypatch.setenv("PACE", str(pace))
    sweep.makeconftest(PACED)
    asked = ("-n", "2", "-p", "no:randomly", "--prove-baseline=base", "--prove-sequential",
             "--prove-margin=0.1", "--prove-allow-underpowered")
    same = sweep.runpytest(*asked)
    out = same.stdout.str()
    assert same.ret == 0, out
    same.stdout.fnmatch_lines([
        "within margin 0.1*: every condition's change toward worse is shown to be below *",
        "sequential: 4 of 4 condition(s) decided before their last look; 336 of 880 planned "
        "episodes read*",
        "sequential: ticket=a: decided at look 21 of 55 (84 replicates): within margin 0.100 "
        "(every row)"])
    stored = _stored(sweep)
    assert all(84 <= stored[t] < 84 + 8 for t in "abcd"), stored
    manifest = load(sweep).manifest
    assert manifest["status"] == "complete"
    assert manifest["sequential"]["margin"] == 0.1
    states = {c["state"] for c in
              manifest["sequential"]["conditions"]["test_sweep.py::test_sweep"].values()}
    assert states == {"within margin"}
    capsys.readouterr()
    code = main(["--store", str(sweep.path / ".prove"), "--json", "check", "baseline:base",
                 "latest", "--margin", "0.1"])
    checked = json.loads(capsys.readouterr().out)
    assert code == 0, checked
    assert checked["comparison"]["margin"]["word"] == "within margin"

    # A condition that moved, in one process (no workers to start): the looks and their
    # margin are the controller's under xdist too, as the session above shows.  Not paced:
    # in one process each look is read before the next item starts.
    monkeypatch.delenv("PACE")
    monkeypatch.setenv("RATE_A", "0.6")
    moved = sweep.runpytest("-p", "no:xdist", *asked[2:])
    assert moved.ret == 1, moved.stdout.str()
    # The baseline's salt, and so every twin's seed, is new in each test: ticket=a stops as
    # worse at some early look, before its first margin look (no claim: the data support a
    # margin of 1) or after it, beyond the margin or not shown within it.
    text = moved.stdout.str()
    assert "within margin 0.100: every" not in text
    assert ("not shown within margin 0.100: 1 of 4 tests could not be shown below 0.100: "
            "ticket=a unresolved (the data support a margin of " in text
            or "beyond margin 0.100: 1 test got worse by more than 0.100: ticket=a" in text)
    moved.stdout.fnmatch_lines([
        "worse: 1 condition got worse (ticket=a unresolved *",
        "sequential: ticket=a: decided at look * of 55 (* replicates): worse (unresolved *",
        "sequential: ticket=b: decided at look 21 of 55 (84 replicates): within margin "
        "0.100 (every row)"])
    assert _stored(sweep)["a"] < 84


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_one_process_reports_plan_refusals_and_off(
        sweep: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    one = ("-p", "no:xdist", "-p", "no:randomly")
    # Nothing changed: every condition stops at its first look, and the gate passes.
    same = sweep.runpytest(*one, "--prove-baseline=base", "--prove-sequential")
    assert same.ret == 0, same.stdout.str()
    assert _stored(sweep) == Counter({t: 12 for t in "abcd"})
    # A run that stopped conditions early is no baseline: later runs pair by replicate.
    stopped = load(sweep)
    saved = save_baseline(Store(sweep.path / ".prove"), "x", stopped, missing=0)
    assert not saved.saved
    note = saved.text
    assert note.startswith("not saved: baseline 'x' must hold every replicate"), note
    assert "stopped 4 condition(s) once decided" in note and "ticket=a" in note
    assert "--prove-save-baseline" in note
    assert main(["--store", str(sweep.path / ".prove"), "merge", stopped.name, "--name",
                 "m", "--save-baseline", "x"]) != 0  # merge takes shards only
    assert Store(sweep.path / ".prove").baseline_file("x") is None

    monkeypatch.setenv("RATE_A", "0.6")
    moved = sweep.runpytest(*one, "--prove-baseline=base", "--prove-sequential",
                            "--prove-report=r.md")
    assert moved.ret == 1
    assert _stored(sweep)["a"] < 220 / 2
    text = (sweep.path / "r.md").read_text()  # markdown escapes ( ) and :
    assert "Sequential: ticket=a: decided at look " in text and "&#58; worse &#40;" in text

    plan = sweep.runpytest("--prove-plan", "--prove-sequential", "--prove-baseline=base")
    assert plan.ret == 0, plan.stdout.str()
    plan.stdout.fnmatch_lines([
        "sequential: at most 880 episodes (220 a condition, a look every 4 replicates); "
        "expected * when nothing changed, * when one condition moves by 0.200*"])

    alone = sweep.runpytest(*one, "--prove-sequential")
    assert alone.ret == 4
    alone.stderr.fnmatch_lines(["*--prove-sequential*needs one: add --prove-baseline NAME*"])
    saved = sweep.runpytest(*one, "--prove-sequential", "--prove-baseline=base",
                            "--prove-save-baseline=x")
    assert saved.ret == 4
    saved.stderr.fnmatch_lines(["*cannot be used with --prove-save-baseline*"])
    small = sweep.runpytest(*one, "--prove-sequential", "--prove-baseline=base",
                            "--prove-replicates=150")
    assert small.ret == 4
    small.stderr.fnmatch_lines(["*sequential design check failed*Use 201 replicates*"])

    # A selection of whole conditions is fine (the others are not run, on purpose); one that
    # keeps some replicates of a condition is refused: a look needs its first replicates.
    only_a = sweep.runpytest(*one, "--prove-baseline=base", "--prove-sequential", "-k", "a-")
    assert only_a.ret == 1
    only_a.stdout.fnmatch_lines(["*FAILED*prove-gate?ticket=a?*"])
    only_a.stdout.fnmatch_lines(["worse: 1 condition got worse (ticket=a *over 1 tests"])
    assert "prove::gate" not in only_a.stdout.str()  # not failed as an unfinished run
    resumed = sweep.runpytest(*one, "--prove-resume=latest")
    assert resumed.ret == 4
    resumed.stderr.fnmatch_lines(["*is sequential: its conditions were decided at their looks*"])
    some = sweep.runpytest(*one, "--prove-baseline=base", "--prove-sequential", "-k", "r00")
    assert some.ret == 4
    some.stderr.fnmatch_lines(["*keeps only some replicates of test_sweep*"])

    # Off: every replicate runs (in blocks, to be quick), and nothing sequential shows.
    off = sweep.runpytest(*one, "--prove-baseline=base", "--prove-concurrency=55",
                          "--prove-report=off.json")
    assert off.ret == 1
    assert _stored(sweep) == Counter({t: 220 for t in "abcd"})
    assert "sequential" not in off.stdout.str()
    assert "sequential" not in load(sweep).manifest
    assert "sequential" not in json.loads((sweep.path / "off.json").read_text())

    # ini prove_sequential: taken with a baseline, never in the way of saving one.
    sweep.makeini("[pytest]\nprove_sequential = true\n")
    again = sweep.runpytest(*one, "--prove-save-baseline=again", "--prove-concurrency=55",
                            "-q")
    assert again.ret == 0  # no baseline to compare with: the run is saved whole
    assert sum(_stored(sweep).values()) == 4 * 220
    gated = sweep.runpytest(*one, "--prove-baseline=base")
    assert gated.ret == 1
    assert _stored(sweep)["b"] == 12


@pytest.mark.slow
def test_sequential_declared_on_the_decorator(pytester: pytest.Pytester) -> None:
    """``sequential=True`` on every rollout makes a session with a baseline sequential (here
    under xdist: the controller reads it from the declarations the workers report); the same
    file saves its baseline whole, saying so; a mix is refused, naming the rollouts."""
    pytester.makepyfile(test_sweep=SWEEP.replace(
        'failures=["unresolved"]', 'sequential=True, failures=["unresolved"]'))
    one = ("-p", "no:xdist", "-p", "no:randomly")
    saved = pytester.runpytest(*one, "--prove-concurrency=55", "--prove-save-baseline=base")
    assert saved.ret == 0, saved.stdout.str()
    saved.stdout.fnmatch_lines([
        "*sequential=True (test_sweep.py::test_sweep): every replicate ran, as in a fixed "
        "run: this run saves baseline 'base', and a baseline must hold every replicate*"])
    assert _stored(pytester) == Counter({t: 220 for t in "abcd"})

    # The declarations make the plan sequential too; it leaves the design in pytest's cache
    # for the worker below (which would compute it again otherwise).
    plan = pytester.runpytest(*one, "--prove-plan", "--prove-baseline=base")
    assert plan.ret == 0, plan.stdout.str()
    plan.stdout.fnmatch_lines(["sequential: at most 880 episodes*"])
    # -n 1: the declarations reach the controller from a worker as they do from two (one
    # worker start less; stopping conditions across two workers is the test above's).
    gated = pytester.runpytest("-n", "1", "-p", "no:randomly", "--prove-baseline=base")
    assert gated.ret == 0, gated.stdout.str()
    gated.stdout.fnmatch_lines(["sequential: 4 of 4 condition(s) decided before their last "
                                "look; * of 880 planned episodes read*"])
    assert "every replicate ran" not in gated.stdout.str()
    assert load(pytester).manifest["sequential"]["design"]["looks"][0] == 4

    pytester.makepyfile(test_other=SWEEP.replace("test_sweep", "test_other"))
    mixed = pytester.runpytest(*one, "--prove-baseline=base")
    assert mixed.ret == 4
    mixed.stderr.fnmatch_lines(["*test_sweep.py::test_sweep declare(s) sequential=True but "
                                "test_other.py::test_other do(es) not*--prove-sequential*"])
    forced = pytester.runpytest(*one, "--prove-baseline=base", "--prove-sequential",
                                "--prove-plan", "--prove-allow-underpowered")
    assert forced.ret == 0, forced.stdout.str()
    forced.stdout.fnmatch_lines(["sequential: at most 1,760 episodes*"])
    pytester.makepyfile(test_other=SWEEP.replace("test_sweep", "test_other").replace(
        'failures=["unresolved"]', 'sequential=False, failures=["unresolved"]'))
    refused = pytester.runpytest(*one, "--prove-baseline=base", "--prove-sequential")
    assert refused.ret == 4
    refused.stderr.fnmatch_lines(["*test_other.py::test_other declare(s) sequential=False*"])
    with pytest.raises(SpecError, match=r"sequential must be a boolean .*, got 'yes'"):
        Declaration(failures=("x",), sequential="yes")  # type: ignore[arg-type]
