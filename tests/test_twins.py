"""Twin agreement end to end: the session's summary, the reports, ``pytest-prove aa`` (an
A/A check of two runs on one salt) and ``--prove-agreement-from`` (the paired design check
at an observed agreement).

The agent here fails the replicates its environment names (``FAILING``), so every twin's
outcome, and so the counts of twins alike, b and c, are known in advance.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from pytest_prove.cli import main
from pytest_prove.review.twins import twin_review
from pytest_prove.stats import Pairs, RowInput, compare
from pytest_prove.store import Store

from .conftest import INI

#: Fails the replicates FAILING lists (comma-separated), whatever the seed.
AGENT = textwrap.dedent(
    """
    import os

    import pytest_prove as prove


    @prove.rollout(replicates=20, failures=["unresolved"], successes=["resolved"])
    def test_agent(prove_replicate):
        failing = {int(r) for r in os.environ.get("FAILING", "").split(",") if r}
        return prove.Episode("unresolved" if prove_replicate in failing else "resolved")
    """
)


@pytest.fixture
def agent(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    return pytester


def _run(agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, failing: str,
         *args: str) -> pytest.RunResult:
    monkeypatch.setenv("FAILING", failing)
    return agent.runpytest("-p", "no:cacheprovider", *args)


def test_the_summary_and_every_report_say_how_often_twins_ended_alike(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # before fails 0-3, after 2-4: both 2 and 3, before only 0 and 1, after only 4.
    assert _run(agent, monkeypatch, "0,1,2,3", "--prove-save-baseline=base").ret == 0
    result = _run(agent, monkeypatch, "2,3,4", "--prove-baseline=base",
                  "--prove-report=out.json")
    result.stdout.fnmatch_lines([
        "twins ended alike in 85% of 20 seeds (1 condition) (b 2 before only, c 1 after only)",
        "twins: at this agreement the paired test sees a rise of * (independent twins: *); "
        "a paired design sees 0.200 (max_mde) over 1 test with * replicates per condition "
        "at this agreement (its 99% lower bound), * with independent twins",
    ])
    doc = json.loads((agent.path / "out.json").read_text())
    twins = doc["twins"]
    assert (twins["twins"], twins["alike"]) == (20, 17)
    assert twins["agreement"] == pytest.approx(0.85)
    (row,) = twins["rows"]
    assert (row["alike"], row["before_only"], row["after_only"]) == (17, 2, 1)
    # kappa: 3/20 discordant over 0.2 * 0.85 + 0.8 * 0.15 = 0.29 for independent twins
    assert row["kappa"] == pytest.approx(0.15 / 0.29)
    # the keys that were there stay as they were
    assert doc["comparison"]["rows"][0]["pairs"] == {"n": 20, "both": 2, "before_only": 2,
                                                    "after_only": 1}
    assert doc["verdict"] == "too small to tell"
    for suffix, said in ((".md", "**Twins**: twins ended alike in 85% of 20 seeds"),
                         (".html", '<details class="twins"><summary>twins ended alike in '
                                   "85% of 20 seeds")):
        _run(agent, monkeypatch, "2,3,4", "--prove-baseline=base", f"--prove-report=out{suffix}")
        assert said in (agent.path / f"out{suffix}").read_text()


def test_an_unpaired_comparison_has_no_twins(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(agent, monkeypatch, "0,1", "--prove-salt=one", "--prove-name=one").ret == 0
    assert _run(agent, monkeypatch, "0,1", "--prove-salt=two", "--prove-name=two").ret == 0
    store = str(agent.path / ".prove")
    out = agent.path / "diff.json"
    assert main(["--store", store, "report", "one", "two", "--out", str(out)]) == 0
    assert "twins" not in json.loads(out.read_text())


def test_aa_of_a_reproducible_agent_shows_agreement_one_and_no_false_alarm(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a1", "a2"):
        assert _run(agent, monkeypatch, "3,7", "--prove-salt=aa", f"--prove-name={name}").ret == 0
    capsys.readouterr()
    store = str(agent.path / ".prove")
    assert main(["--store", store, "aa", "a1", "a2"]) == 0
    out = capsys.readouterr().out
    assert "A/A: no row reads worse or safer" in out
    assert "twins ended alike in 100% of 20 seeds" in out
    assert "next: let the design check read this agreement: pytest " \
           "--prove-agreement-from=a1,a2" in out
    assert main(["--store", store, "--json", "aa", "a1", "a2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["aa"] == {"worse": 0, "safer": 0}
    assert doc["twins"]["rows"][0]["kappa"] == 0.0


def test_aa_names_the_rows_that_read_worse_as_the_noise_floor(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # "the same code" whose twins disagree on 9 seeds, all one way: a false alarm.
    assert _run(agent, monkeypatch, "", "--prove-salt=aa", "--prove-name=a1").ret == 0
    assert _run(agent, monkeypatch, "1,2,3,4,5,6,7,8,9", "--prove-salt=aa",
                "--prove-name=a2").ret == 0
    capsys.readouterr()
    assert main(["--store", str(agent.path / ".prove"), "aa", "a1", "a2"]) == 0
    out = capsys.readouterr().out
    assert "A/A: 1 row(s) read worse and 0 safer although a1 and a2 ran the same code" in out
    assert "noise floor the gate works against" in out
    assert "twins ended alike in 55% of 20 seeds" in out


def test_aa_refuses_runs_on_different_salts_and_one_run_twice(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(agent, monkeypatch, "1", "--prove-salt=one", "--prove-name=one").ret == 0
    assert _run(agent, monkeypatch, "1", "--prove-salt=two", "--prove-name=two").ret == 0
    assert main(["--store", str(agent.path / ".prove"), "aa", "one", "two"]) == 1
    err = capsys.readouterr().err
    assert "'one' and 'two' ran on different salts" in err
    assert "--prove-salt=WORD, twice" in err
    # one run read against itself agrees with itself whatever the agent does
    assert main(["--store", str(agent.path / ".prove"), "aa", "one", "one"]) == 1
    assert "are the same run" in capsys.readouterr().err


def test_the_design_check_reads_an_observed_agreement(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    half = ",".join(map(str, range(0, 60, 2)))  # every other replicate fails, in both runs
    many = "--prove-replicates=60"
    assert _run(agent, monkeypatch, half, many, "--prove-save-baseline=base").ret == 0
    for name in ("a1", "a2"):
        assert _run(agent, monkeypatch, half, many, "--prove-salt=aa",
                    f"--prove-name={name}").ret == 0
    plain = _run(agent, monkeypatch, half, many, "--prove-baseline=base", "--prove-plan")
    read = _run(agent, monkeypatch, half, many, "--prove-baseline=base", "--prove-plan",
                "--prove-agreement-from=a1,a2")
    read.stdout.fnmatch_lines([
        "design check: the smallest rise one condition alone would be flagged for is * at "
        "its worst base rate*",
        "design check read at the twins' agreement of a1 -> a2: they ended alike in 100% of "
        "60 seeds; at its one-sided 99% bound the discordance is 0.15 of independent twins'*"])

    def shown(result: pytest.RunResult) -> float:
        line = next(x for x in result.outlines if x.startswith("design check: "))
        return float(line.split(" is ")[1].split()[0])

    # 60 seeds alike at a rate of 0.5: the discordance's bound is a tenth of independent
    # twins', and the limit falls well below theirs
    assert shown(read) < 0.8 * shown(plain)
    margin = _run(agent, monkeypatch, half, many, "--prove-baseline=base", "--prove-plan",
                  "--prove-margin=0.15", "--prove-agreement-from=a1,a2")
    margin.stdout.fnmatch_lines(["margin design check: *twins at discordance ratio 0.15 (an "
                                 "observed agreement's bound)*"])


def test_agreement_from_is_refused_by_name_when_it_cannot_be_read(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(agent, monkeypatch, "3", "--prove-save-baseline=base").ret == 0
    assert _run(agent, monkeypatch, "3", "--prove-salt=x", "--prove-name=lone").ret == 0
    missing = _run(agent, monkeypatch, "3", "--prove-baseline=base",
                   "--prove-agreement-from=nosuch")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--prove-agreement-from=nosuch: no run named 'nosuch'*"])
    lone = _run(agent, monkeypatch, "3", "--prove-baseline=base", "--prove-agreement-from=lone")
    assert lone.ret == pytest.ExitCode.USAGE_ERROR
    lone.stderr.fnmatch_lines(["*run 'lone' was not paired with a baseline*"])
    unpaired = _run(agent, monkeypatch, "3", "--prove-agreement-from=lone")
    assert unpaired.ret == pytest.ExitCode.USAGE_ERROR
    unpaired.stderr.fnmatch_lines(["*--prove-agreement-from*this run is not paired*"])
    bad = _run(agent, monkeypatch, "3", "--prove-baseline=base", "--prove-agreement-from=a,b,c")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*expected RUN or A,B*"])


def test_twin_review_counts_a_hand_built_comparison() -> None:
    rows = [RowInput(condition="c1", event="fail", worse_when="rise", x_before=5, n_before=10,
                     x_after=4, n_after=10, pairs=Pairs(n=10, both=3, before_only=2,
                                                        after_only=1)),
            RowInput(condition="c2", event="fail", worse_when="rise", x_before=2, n_before=10,
                     x_after=2, n_after=10, pairs=Pairs(n=10, both=2, before_only=0,
                                                        after_only=0))]
    twins = twin_review(compare(rows, q=0.05, max_mde=0.2))
    assert twins is not None
    assert [(r.condition, r.agreement.alike, r.agreement.discordant) for r in twins.rows] == [
        ("c1", 7, 3), ("c2", 10, 0)]
    assert (twins.twins, twins.alike) == (20, 17)
    assert twins.lowest is not None and twins.lowest.condition == "c1"
    # c2's twins all agree: kappa 0, its limit well under the independent one
    c2 = twins.rows[1]
    assert c2.agreement.kappa == 0.0
    assert c2.limit.value is not None and c2.independent.value is not None
    assert c2.limit.value < c2.independent.value
    unpaired = [RowInput(condition="c1", event="fail", worse_when="rise", x_before=5,
                         n_before=10, x_after=4, n_after=10)]
    assert twin_review(compare(unpaired, q=0.05, max_mde=0.2)) is None



def test_a_sequential_runs_twins_print_no_limit_of_their_own() -> None:
    """A sequential run's rows have no detection limit of their own (the fixed test's at the
    look a condition stopped at is not what the procedure detects); their twins printed one
    all the same: "sees a rise of 0.656" for 12 twins that all agree, and the summary's
    "at this agreement the paired test sees a rise of 0.656". Now they say the design's
    power stands instead, in every renderer."""
    from pytest_prove.report.twins import twin_html, twin_lines, twin_markdown
    from pytest_prove.stats import sequential_design

    rows = [RowInput(condition=f"c{i}", event="fail", worse_when="rise", x_before=x,
                     n_before=12, x_after=x, n_after=12,
                     pairs=Pairs(n=12, both=x, before_only=0, after_only=0))
            for i, x in enumerate((1, 2))]
    method = sequential_design(220, 4, paired=True).method
    sequential = compare(rows, pvalues=[1.0, 1.0], sees=[True, True], m=4, sequential=method)
    twins = twin_review(sequential)
    assert twins is not None
    assert all(r.limit.status == "sequential" and r.limit.value is None for r in twins.rows)
    assert twins.weakest is None
    lines = twin_lines(twins, verbose=True)
    assert not any("sees a rise" in line for line in lines), lines
    assert sum("no limit of its own (a sequential run" in line for line in lines) == 2
    markdown = "\n".join(twin_markdown(twins, str))
    assert "| sequential |" in markdown and "rise sequential" not in markdown
    assert "rise sequential" not in twin_html(twins)
    # The same rows in a fixed comparison keep their limits at the agreement seen.
    fixed = twin_review(compare(rows, q=0.05, max_mde=0.2, m=4))
    assert fixed is not None and fixed.weakest is not None
    assert all(r.limit.value is not None for r in fixed.rows)


#: Fails on every odd call of the process: a replicate's first run fails, its twin (the next
#: call, on the same seed) does not: the "same code" disagrees with itself on every seed.
FLAKY = textwrap.dedent(
    """
    import pytest_prove as prove

    CALLS = [0]


    @prove.rollout(replicates=20, failures=["unresolved"], successes=["resolved"])
    def test_flaky(prove_seed):
        CALLS[0] += 1
        return prove.Episode("unresolved" if CALLS[0] % 2 else "resolved")
    """
)


def test_prove_aa_runs_each_replicate_twice_and_reads_the_twins(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    result = _run(agent, monkeypatch, "3,7", "--prove-aa", "--prove-name=one")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "run 'one' (complete): 20 episodes, 20 with an outcome*",
        "--prove-aa: each replicate ran twice on its seed; the twins are stored as run "
        "'one-aa' (pytest-prove aa one one-aa)",
        "A/A: no row reads worse or safer: one and one-aa ran the same code on the same seeds*",
        "twins ended alike in 100% of 20 seeds (1 condition) (b 0 before only, c 0 after only)",
    ])
    store = str(agent.path / ".prove")
    capsys.readouterr()
    assert main(["--store", store, "--json", "show", "latest"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "one"  # still the latest run
    assert main(["--store", store, "--json", "aa", "one", "one-aa"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["twins"]["twins"], doc["twins"]["alike"]) == (20, 20)


def test_prove_aa_names_a_false_alarm_as_the_noise_floor(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_flaky=FLAKY)
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-aa")
    assert result.ret == 0  # an A/A check measures; it does not gate
    result.stdout.fnmatch_lines([
        "A/A: 0 row(s) read worse and 1 safer although * ran the same code on the same seeds "
        "((one condition) unresolved 1.000 -> 0.000). That is the noise floor the gate works "
        "against*",
        "twins ended alike in 0% of 20 seeds (1 condition) (b 20 before only, c 0 after only)",
    ])


#: Remembers each seed: its first call is unresolved, its twin's resolved; a twin that starts
#: before its first ended raises (an errored episode).
IN_TURN = textwrap.dedent(
    """
    import threading

    import pytest_prove as prove

    LOCK = threading.Lock()
    CALLS = {}
    ENDED = set()


    @prove.rollout(replicates=60, failures=["unresolved"], successes=["resolved"])
    def test_in_turn(prove_seed):
        with LOCK:
            n = CALLS[prove_seed] = CALLS.get(prove_seed, 0) + 1
            if n == 2 and prove_seed not in ENDED:
                raise RuntimeError("the twin started before its first ended")
        try:
            return prove.Episode("unresolved" if n == 1 else "resolved")
        finally:
            with LOCK:
                ENDED.add(prove_seed)
    """
)


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_prove_aa_runs_each_twin_after_its_first(pytester: pytest.Pytester,
                                                 concurrency: str) -> None:
    """The first of each replicate's twins is stored in the session's run, its twin in the
    twins' run, and the twin starts once the first ended ("one right after the other"). Run
    as one block on kept threads, the two ran at once and the one stored first was not
    always the one that called first (1 to 7 of 20 wrong)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_in_turn=IN_TURN)
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-aa", "--prove-name=turn",
                                f"--prove-concurrency={concurrency}")
    assert result.ret == 0, result.stdout.str()
    store = Store(pytester.path / ".prove")
    first, twins = store.load("turn"), store.load("turn-aa")
    assert [(e["outcome"], e["error"]) for e in first.episodes] == [("unresolved", None)] * 60
    assert [(e["outcome"], e["error"]) for e in twins.episodes] == [("resolved", None)] * 60
    assert sorted(int(e["replicate"]) for e in twins.episodes) == list(range(60))


PER_THREAD = textwrap.dedent(
    """
    import threading

    import pytest_prove as prove

    LOCAL = threading.local()


    @prove.rollout(replicates=10, failures=["bad"], successes=["good"])
    def test_per_thread(prove_seed):
        # An agent that keeps something per thread (a client, a cache): its second
        # episode on a thread would end otherwise.
        used = getattr(LOCAL, "used", False)
        LOCAL.used = True
        return prove.Episode("bad" if used else "good")
    """
)


@pytest.mark.parametrize("concurrency", ["1", "3"])
def test_prove_aa_twins_each_meet_a_new_thread(pytester: pytest.Pytester,
                                                concurrency: str) -> None:
    """A twin and its first run against the deadline on threads no replicate ran on: on
    kept threads, an agent that keeps state per thread ended 9 of its 10 firsts and all
    its twins otherwise than a new thread would (twins alike in 90%)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_per_thread=PER_THREAD)
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-aa", "--prove-name=fresh",
                                f"--prove-concurrency={concurrency}",
                                "--prove-episode-timeout=60")
    assert result.ret == 0, result.stdout.str()
    store = Store(pytester.path / ".prove")
    for name in ("fresh", "fresh-aa"):
        assert [e["outcome"] for e in store.load(name).episodes] == ["good"] * 10, name
    result.stdout.fnmatch_lines(["twins ended alike in 100% of 10 seeds*"])


def test_prove_aa_is_refused_with_what_cannot_keep_the_twins_apart(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(agent, monkeypatch, "3", "--prove-name=first").ret == 0
    result = _run(agent, monkeypatch, "3", "--prove-aa", "--prove-resume=first")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prove-aa runs every replicate twice*--prove-resume "
                                 "cannot keep them apart*"])


@pytest.mark.slow  # two xdist workers start
def test_prove_aa_under_xdist_with_concurrency_keeps_each_twin_apart(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _run(agent, monkeypatch, "1,2,3", "--prove-aa", "--prove-name=par", "-n", "2",
                  "--prove-concurrency=3")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "run 'par' (complete): 20 episodes, 20 with an outcome*",
        "*the twins are stored as run 'par-aa'*",
        "twins ended alike in 100% of 20 seeds (1 condition) (b 0 before only, c 0 after only)",
    ])
    twins = Store(agent.path / ".prove").load("par-aa")
    assert twins.manifest["status"] == "complete"
    assert sorted(int(r["replicate"]) for r in twins.episodes) == list(range(20))
