"""Arms (issue 31, items 1 and 2): a rollout declares arms, each (condition, replicate) runs
once per arm on one seed, adjacent, and the session compares each arm with the reference
arm as a baseline comparison would. Small projects, run in-process; -n 2 where the workers
are the point."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from pytest_prove.review.arms import arms_review
from pytest_prove.store import Store

#: A seeded agent with two versions: ``cheap`` gives up on refunds more often; password
#: tickets are alike. Its arms come from ARMS (comma-separated; none: no arms), its version
#: without arms from VERSION. The draw is the seed's first, so twins share it.
AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    BAD = {"cur": {"refund": 0.15, "password": 0.1},
           "cheap": {"refund": 0.6, "password": 0.1},
           "same": {"refund": 0.15, "password": 0.1}}
    ARMS = [a for a in os.environ.get("ARMS", "").split(",") if a]
    EXTRA = {"arms": ARMS} if ARMS else {}


    # A simulated provider change: every version's refund tickets fail this much more.
    SHIFT = float(os.environ.get("PROVIDER_SHIFT", "0"))


    def outcome(version, ticket, seed):
        draw = random.Random(seed).random()
        rate = BAD[version][ticket] + (SHIFT if ticket == "refund" else 0)
        return prove.Episode("bad" if draw < rate else "ok",
                             meta={"case_id": ticket})


    if ARMS:
        @prove.rollout(replicates=int(os.environ.get("N", "30")), failures=["bad"],
                       successes=["ok"], id="bot", **EXTRA)
        @pytest.mark.parametrize("ticket", ["refund", "password"])
        def test_bot(ticket, prove_seed, prove_arm):
            return outcome(prove_arm, ticket, prove_seed)
    else:
        @prove.rollout(replicates=int(os.environ.get("N", "30")), failures=["bad"],
                       successes=["ok"], id="bot")
        @pytest.mark.parametrize("ticket", ["refund", "password"])
        def test_bot(ticket, prove_seed):
            return outcome(os.environ.get("VERSION", "cur"), ticket, prove_seed)
    """
)


@pytest.fixture
def agent(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_bot=AGENT)
    monkeypatch.setenv("ARMS", "cur,cheap")
    return pytester


def _runs(pytester: pytest.Pytester) -> list[str]:
    runs = pytester.path / ".prove" / "runs"
    return sorted(p.name for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []


def test_items_name_the_arm_adjacent_and_k_selects_one_arm(agent: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("N", "2")
    result = agent.runpytest("--collect-only", "-q")
    ids = [line for line in result.outlines if line.startswith("test_bot.py::")]
    assert ids[:4] == ["test_bot.py::test_bot[refund-r000-cur]",
                       "test_bot.py::test_bot[refund-r000-cheap]",
                       "test_bot.py::test_bot[refund-r001-cur]",
                       "test_bot.py::test_bot[refund-r001-cheap]"]
    assert len(ids) == 8
    result = agent.runpytest("-k", "cheap")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*arms not compared: no episode of arm cur of bot ran*",
                                 "*4 passed, 4 deselected*"])
    stored = Store(agent.path / ".prove").load("latest")
    assert {r["rollout"] for r in stored.episodes} == {"bot@arm:cheap"}


def test_arms_run_interleaved_on_one_seed_and_the_worse_arm_fails_the_gate(
        agent: pytest.Pytester) -> None:
    # A fixed salt: refund's twins that differ (all one way, 0.15 -> 0.6) are about 13.5 of
    # 30, and the gate needs 6 (mid-p 0.5^6 under Holm's 0.025); on a new salt each run
    # fewer came 1.1e-3 of the time (binomial, 30 at 0.45). This salt gives 16.
    result = agent.runpytest("-rf", "--prove-salt=arms-gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "FAILED test_bot.py::test_bot::prove-gate?ticket=refund arm=cheap? - worse: *",
        "*1 failed, 120 passed*"])
    result.stdout.fnmatch_lines(["*arms of bot: cheap compared with the reference arm cur*"])
    assert "ticket=password, arm" not in result.stdout.str()
    run = Store(agent.path / ".prove").load("latest")
    order = [(r["condition"]["ticket"], r["replicate"], r["rollout"]) for r in run.episodes]
    # In one process, the arms of a replicate run one after the other.
    assert order[:4] == [("refund", 0, "bot@arm:cur"), ("refund", 0, "bot@arm:cheap"),
                         ("refund", 1, "bot@arm:cur"), ("refund", 1, "bot@arm:cheap")]
    seeds: dict[tuple[str, int], set[int]] = {}
    for r in run.episodes:
        seeds.setdefault((r["condition_key"], r["replicate"]), set()).add(r["seed"])
    assert len(seeds) == 60 and all(len(s) == 1 for s in seeds.values())
    # The run records its arms and reference.
    declaration = run.manifest["rollouts"]["bot@arm:cheap"]["declaration"]
    assert declaration["arms"] == ["cur", "cheap"] and declaration["reference"] == "cur"
    # The comparison from the stored run alone, as the same objects a baseline's gives.
    review = arms_review(run, q=0.05, max_mde=0.2, events=None, fail_on={"worse"})
    assert review.comparison is not None and review.comparison.verdict.word == "worse"
    assert review.prepared.paired


def _table_row(text: str, condition: str) -> str:
    """A condition's row of the comparison's table (its numbers, columns squeezed)."""
    rows = [line for line in text.splitlines()
            if re.match(rf"{re.escape(condition)}\s+bad\s", line)]
    assert rows, text
    return re.sub(r"\s+", " ", rows[-1])


def test_the_arms_comparison_gives_the_two_session_comparisons_figures(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # One salt for both: the two sessions run on the arms' seeds, so the figures agree
    # exactly (not only within sampling).
    arms = agent.runpytest("-v", "--prove-salt=s1")
    assert arms.ret == pytest.ExitCode.TESTS_FAILED
    monkeypatch.delenv("ARMS")
    assert agent.runpytest("--prove-salt=s1", "--prove-save-baseline=cur").ret == 0
    monkeypatch.setenv("VERSION", "cheap")
    two = agent.runpytest("-v", "--prove-baseline=cur")
    assert two.ret == pytest.ExitCode.TESTS_FAILED
    assert _table_row(arms.stdout.str(), "ticket=refund") == _table_row(
        two.stdout.str(), "ticket=refund")
    assert _table_row(arms.stdout.str(), "ticket=password") == _table_row(
        two.stdout.str(), "ticket=password")
    # The verdict line (a failing condition's own text starts "worse:" too, with run names).
    verdict = [line for line in arms.outlines if line.startswith("worse:")
               and "got worse" in line]
    assert verdict and verdict[0] in two.outlines


def test_two_arms_of_the_same_code_pass(agent: pytest.Pytester,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARMS", "cur,same")
    monkeypatch.setenv("N", "150")
    # In blocks of 50 replicates (12 items, not 600): the same replicates, seeds and
    # episodes; what is checked is the verdict.
    result = agent.runpytest("--prove-salt=aa",  # a fixed salt: the same figures every run
                             "--prove-concurrency=50")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["no significant change*"])


@pytest.mark.parametrize(("arms", "expected"), [
    ("cur,2fast", "*arm '2fast' is not a name pytest-prove can use*identifier*"),
    ("cur,cur", "*arms names cur more than once*name the twin arm otherwise*"),
    ("cur", "*arms lists one arm*list two or more*"),
])
def test_bad_arms_are_refused_by_name(agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                      arms: str, expected: str) -> None:
    monkeypatch.setenv("ARMS", arms)
    result = agent.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error, as pytest's own
    result.stdout.fnmatch_lines(["*test_bot.py*", expected])
    assert "Traceback" not in result.stdout.str() and _runs(agent) == []


def test_a_reference_outside_the_arms_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_r="""
        import pytest_prove as prove

        @prove.rollout(failures=["bad"], arms=["a", "b"], reference="c")
        def test_r(prove_seed):
            return prove.Episode("bad")
    """)
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*reference 'c' is not among the arms (a, b)*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_arms_against_a_baseline_either_way_are_refused_before_anything_runs(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARMS")
    assert agent.runpytest("--prove-save-baseline=plain").ret == pytest.ExitCode.OK
    monkeypatch.setenv("ARMS", "cur,cheap")
    held = _runs(agent)
    result = agent.runpytest("--prove-baseline=plain")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bot declares arms (cur, cheap), and baseline 'plain' holds "
                                 "no arm cur of it to check for drift*Drop --prove-baseline="
                                 "plain: the arms are compared with each other*"])
    assert _runs(agent) == held  # nothing written
    # A baseline with arms, read by a rollout without (saved on a fixed salt: that cheap
    # fails the session's gate took 6 or more of refund's 30 twins apart, and a new salt
    # each run gave fewer 1.1e-3 of the time; this one gives 16).
    assert agent.runpytest("--prove-save-baseline=witharms",
                           "--prove-salt=arms-gate").ret == pytest.ExitCode.TESTS_FAILED
    monkeypatch.delenv("ARMS")
    held = _runs(agent)
    result = agent.runpytest("--prove-baseline=witharms")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*baseline 'witharms' holds arms of bot (cur, cheap), and "
                                 "this rollout declares none*"])
    assert _runs(agent) == held


def test_a_baseline_saved_with_arms_is_checked_for_drift_and_the_gate_reads_the_arms(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # The baseline was recorded under another provider: refund tickets failed 0.45 more
    # often in every arm. Now the provider is back; the arms are the same code.
    monkeypatch.setenv("N", "60")
    # Every session in blocks of 60 replicates (8 items, not 240): the same replicates,
    # seeds and episodes; what is checked is the drift check's and the gate's words.
    agent.makeini("[pytest]\nprove_allow_underpowered = true\n"
                  "addopts = --prove-concurrency=60\n")
    monkeypatch.setenv("ARMS", "cur,same")
    monkeypatch.setenv("PROVIDER_SHIFT", "0.45")
    assert agent.runpytest("--prove-save-baseline=old").ret == pytest.ExitCode.OK
    monkeypatch.setenv("PROVIDER_SHIFT", "0")
    result = agent.runpytest("--prove-baseline=old")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    text = re.sub(r"\s+", " ", result.stdout.str())
    assert "the baseline has drifted: arm cur ran the same code on the same seeds as " \
        "baseline 'old' and differs significantly in ticket=refund (ticket=refund bad" in text
    assert "does not blame it for the drift" in text and "--prove-update-baseline" in text
    assert "prove-gate" not in text
    # The change itself (cheap) is judged by the arms alone, drift or not.
    monkeypatch.setenv("ARMS", "cur,cheap")
    result = agent.runpytest("--prove-baseline=old", "-rf")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*the baseline has drifted: arm cur*",
                                 "FAILED test_bot.py::test_bot::prove-gate?ticket=refund "
                                 "arm=cheap? - worse*"])
    assert "arm=same" not in result.stdout.str()
    monkeypatch.setenv("ARMS", "cur,same")
    monkeypatch.setenv("PROVIDER_SHIFT", "0.45")
    result = agent.runpytest("--prove-baseline=old")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*drift check: arm cur against baseline 'old' on the same "
                                 "seeds: *; the baseline has not been shown to drift*"])
    assert "has drifted" not in result.stdout.str()


def test_an_arm_left_out_against_a_baseline_fails_closed(agent: pytest.Pytester,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    # --prove-baseline asks for a verdict; with one arm left out by -k nothing was compared,
    # so the session must not pass (it used to say "arms not compared" and exit 0).
    monkeypatch.setenv("N", "6")
    monkeypatch.setenv("ARMS", "cur,same")
    assert agent.runpytest("--prove-save-baseline=both").ret == pytest.ExitCode.OK
    for kept in ("same", "cur"):
        result = agent.runpytest("-k", kept, "--prove-baseline=both")
        assert result.ret == pytest.ExitCode.TESTS_FAILED, (kept, result.stdout.str())
        text = re.sub(r"\s+", " ", result.stdout.str() + result.stderr.str())
        left_out = "same" if kept == "cur" else "cur"
        assert (f"no verdict: --prove-baseline=both asks whether the change made things "
                f"worse, and the change is judged between the arms, but no episode of arm "
                f"{left_out} of bot ran in this session") in text, text
        assert "Run every arm" in text and "drop --prove-baseline=both" in text
    # Without a baseline no verdict was asked for: one arm alone runs and is said.
    result = agent.runpytest("-k", "same")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*arms not compared: no episode of arm cur of bot ran*"])


def test_a_resumed_run_whose_arms_differ_is_refused(agent: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert agent.runpytest("-k", "refund", "--prove-name=part").ret \
        == pytest.ExitCode.TESTS_FAILED
    part = Store(agent.path / ".prove").load("part")
    for arms, shown in (("cur,cheap,same", "[cur, cheap, same]"), ("", "none")):
        monkeypatch.setenv("ARMS", arms)
        result = agent.runpytest("--prove-resume=part")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert (f"run 'part' was run with the arms [cur, cheap] of bot, and the rollout now "
                f"declares {shown}:") in result.stderr.str()
    again = Store(agent.path / ".prove").load("part")
    assert len(again.episodes) == len(part.episodes) == 60 and len(_runs(agent)) == 1
    # With its own arms it resumes: the password replicates of both arms run.
    monkeypatch.setenv("ARMS", "cur,cheap")
    result = agent.runpytest("--prove-resume=part")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    done = Store(agent.path / ".prove").load("part")
    assert len(done.episodes) == 120


@pytest.mark.slow  # two workers (bench/suite_time.py)
def test_under_two_workers_each_replicates_arms_are_stored_once(
        agent: pytest.Pytester) -> None:
    result = agent.runpytest("-n", "2", "-p", "xdist")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*prove-gate?ticket=refund arm=cheap?*"])
    run = Store(agent.path / ".prove").load("latest")
    keys = [(r["rollout"], r["condition_key"], r["replicate"]) for r in run.episodes]
    assert len(keys) == len(set(keys)) == 120
    for arm in ("cur", "cheap"):
        assert sum(1 for k in keys if k[0] == f"bot@arm:{arm}") == 60


def test_a_sweep_spec_declares_arms_and_the_target_reads_its_arm(
        pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(agent="""
        import random

        import pytest_prove as prove

        def run(cfg, seed):
            rate = {"a": 0.1, "b": 0.1}[cfg["arm"]]
            return prove.Episode("bad" if random.Random(seed).random() < rate else "ok")
    """)
    pytester.path.joinpath("prove_agent.toml").write_text(textwrap.dedent("""
        target = "agent:run"
        replicates = 20
        arms = ["a", "b"]
        reference = "b"
        [declare]
        failures = ["bad"]
        successes = ["ok"]
        [axes.ticket]
        values = ["refund"]
    """))
    result = pytester.runpytest("--collect-only", "-q")
    assert "prove_agent.toml::agent:run[refund-r000-a]" in result.stdout.str()
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*arms of agent:run: a compared with the reference arm b*"])
    pytester.path.joinpath("prove_agent.toml").write_text(
        pytester.path.joinpath("prove_agent.toml").read_text().replace('["a", "b"]', '"a"'))
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*prove_agent.toml:4: arms must be an array of names*"])


def test_a_shard_holds_every_arm_of_its_replicates(agent: pytest.Pytester) -> None:
    for index in (1, 2):
        agent.runpytest(f"--prove-shard={index}/2", "--prove-salt=s", f"--prove-name=s{index}")
    for index in (1, 2):
        run = Store(agent.path / ".prove").load(f"s{index}")
        held: dict[tuple[str, int], set[str]] = {}
        for r in run.episodes:
            held.setdefault((r["condition_key"], r["replicate"]), set()).add(r["rollout"])
        assert held and all(v == {"bot@arm:cur", "bot@arm:cheap"} for v in held.values())
    # The shards' runs merged are gated on their arms, named as RUN:ARM.
    from pytest_prove.cli import main

    store = str(agent.path / ".prove")
    assert main(["--store", store, "merge", "s1", "s2", "--name=whole"]) == 0
    assert main(["--store", store, "check", "whole:cur", "whole:cheap"]) == 4
    assert main(["--store", store, "check", "whole:cur", "whole:cur"]) == 4  # the same run


def test_prove_arm_outside_arms_says_so(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_p="""
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad"], successes=["ok"])
        def test_p(prove_seed, prove_arm):
            return prove.Episode("ok")
    """)
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*prove_arm names the arm of a rollout that declares arms*"])
    assert json.dumps(result.ret.value) != "0"


def test_reports_junit_and_the_command_line_read_the_arms(agent: pytest.Pytester) -> None:
    from pytest_prove.cli import main

    result = agent.runpytest("--prove-report=r.json", "--junitxml=j.xml", "--prove-name=ab")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    report = json.loads((agent.path / "r.json").read_text())
    assert report["verdict"] == "worse"
    assert report["before"].endswith(":cur") and report["after"].endswith(":cheap")
    junit = (agent.path / "j.xml").read_text()
    assert 'name="prove-gate[ticket=refund arm=cheap]"' in junit
    # RUN:ARM names one arm as a run of its own: two arms read as a run and its baseline.
    store = str(agent.path / ".prove")
    assert main(["--store", store, "report", "ab:cur", "ab:cheap", "--out",
                 str(agent.path / "r.md")]) == 0
    text = (agent.path / "r.md").read_text()
    assert "ab&#58;cur" in text and "ab&#58;cheap" in text and "ticket=refund" in text
    assert main(["--store", store, "check", "ab:cur", "ab:cheap"]) == 4
    assert main(["--store", store, "show", "ab:cheap"]) == 0
    assert main(["--store", store, "check", "ab:cur", "ab:nope"]) == 1


def test_lf_reruns_both_arms_of_the_condition_that_failed(agent: pytest.Pytester) -> None:
    first = agent.runpytest()
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    result = agent.runpytest("--lf")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*prove-gate?ticket=refund arm=cheap?*",
                                 "*1 failed, 60 passed*"])
    run = Store(agent.path / ".prove").load("latest")
    assert {(r["rollout"], r["condition"]["ticket"]) for r in run.episodes} == {
        ("bot@arm:cur", "refund"), ("bot@arm:cheap", "refund")}
