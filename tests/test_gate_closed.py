"""The gate fails closed (issue 29): a gate that cannot vouch for every condition fails.

One rollout, two conditions (``case=a``, ``case=b``) of 200 replicates (mostly in blocks of
40), a failure ``bad`` and a success ``good``; the worse agent's ``bad`` rate in ``a`` goes
from 0.2 to 0.5. A provider outage (``OUTAGE``) makes that share of ``a``'s episodes that call
the provider raise ConnectionError: those that end ``good`` (a ``bad`` one gives up before
calling it), or with ``OUTAGE_ALL`` every one. No ini relaxes the design check: 200
replicates pass it.
"""

from __future__ import annotations

import shutil
import textwrap

import pytest

from pytest_prove.cli import main
from pytest_prove.store import Store

AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    SWAP = os.environ.get("SWAP") == "1"
    RATE = {"a": float(os.environ.get("A_BAD", "0.2")), "b": 0.2}
    OUTAGE = float(os.environ.get("OUTAGE", "0"))
    KILL = int(os.environ.get("KILL", "-1"))


    @prove.rollout(replicates=200, failures=["good"] if SWAP else ["bad"],
                   successes=["bad"] if SWAP else ["good"])
    @pytest.mark.parametrize("case", ["a", "b"])
    def test_agent(case, prove_seed, prove_replicate):
        if case == "b" and prove_replicate == KILL:
            pytest.exit("the CI job is killed midway", returncode=3)
        rng = random.Random(prove_seed)
        outcome = "bad" if rng.random() < RATE[case] else "good"
        calls = outcome == "good" or os.environ.get("OUTAGE_ALL") == "1"
        if case == "a" and calls and random.Random(prove_seed ^ 0x5EED).random() < OUTAGE:
            raise ConnectionError("the provider is down")
        return prove.Episode(outcome, meta={"case_id": case})
    """
)


@pytest.fixture
def agent(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(test_agent=AGENT)
    # Blocks of 40 replicates (10 items a session, not 400): the replicates, their seeds and
    # what each episode records are the same; the per-item cost of 400 items is not.  The
    # tests that kill a session at one replicate or select replicates by node id take
    # ``_one_item_a_replicate`` instead.
    pytester.makeini("[pytest]\naddopts = --prove-concurrency=40\n")
    for name in ("SWAP", "A_BAD", "OUTAGE", "OUTAGE_ALL", "KILL"):
        monkeypatch.delenv(name, raising=False)
    return pytester


@pytest.fixture(scope="module")
def _saved_store() -> dict[str, bytes]:
    """The store of the first test that saved the agent's baseline, file by file."""
    return {}


@pytest.fixture
def saved(agent: pytest.Pytester, _saved_store: dict[str, bytes]) -> pytest.Pytester:
    """The agent with baseline 'current' saved from it (``--prove-save-baseline=current``,
    nothing in the environment): saved by the first test of this module that asks for it
    in its process, and copied into the store of the others. The same agent, options and
    environment every time; only the salt a fresh save draws differs, and every test here
    holds on any salt."""
    store = agent.path / ".prove"
    if not _saved_store:
        assert agent.runpytest("--prove-save-baseline=current").ret == pytest.ExitCode.OK
        _saved_store.update({str(path.relative_to(store)): path.read_bytes()
                             for path in store.rglob("*") if path.is_file()})
        assert any(name.startswith("baselines") for name in _saved_store), _saved_store
    else:
        for name, content in _saved_store.items():
            (store / name).parent.mkdir(parents=True, exist_ok=True)
            (store / name).write_bytes(content)
    return agent


def _one_item_a_replicate(agent: pytest.Pytester) -> None:
    """One item a replicate from here on (a baseline saved in blocks has the same seeds)."""
    agent.makeini("[pytest]\n")


def _baseline_file(pytester: pytest.Pytester) -> bytes:
    return (pytester.path / ".prove" / "baselines" / "current.baseline").read_bytes()


def _thin_baseline(agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                   every: bool) -> None:
    """A baseline made from a run during the outage, written through the store's own API
    (as a version of pytest-prove that saved anything complete would have)."""
    monkeypatch.setenv("OUTAGE", "1")
    if every:
        monkeypatch.setenv("OUTAGE_ALL", "1")
    agent.runpytest("--prove-name=outage")
    monkeypatch.delenv("OUTAGE")
    monkeypatch.delenv("OUTAGE_ALL", raising=False)
    store = Store(agent.path / ".prove")
    store.write_baseline("current", store.load("outage"))


def test_an_outage_run_is_not_saved_as_a_baseline(agent: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # 1(a): 9 in 10 episodes of case=a raise ConnectionError.
    monkeypatch.setenv("OUTAGE", "0.9")
    monkeypatch.setenv("OUTAGE_ALL", "1")
    result = agent.runpytest("--prove-save-baseline=current")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*not saved: baseline 'current' would hold 1 condition(s) "
                                 "where more than 0.25 of the episodes ended without an "
                                 "outcome*case=a*--prove-max-errored*"])
    assert "baseline 'current' saved" not in result.stdout.str()
    assert not (agent.path / ".prove" / "baselines" / "current.baseline").exists()


def test_an_outage_run_does_not_replace_the_baseline(saved: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    agent = saved
    kept = _baseline_file(agent)
    monkeypatch.setenv("OUTAGE", "0.9")
    monkeypatch.setenv("OUTAGE_ALL", "1")
    monkeypatch.setenv("A_BAD", "0.5")
    result = agent.runpytest("--prove-baseline=current", "--prove-update-baseline")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*not saved: baseline 'current' would hold 1 condition(s)*"])
    assert "replaced by" not in result.stdout.str()
    assert _baseline_file(agent) == kept


def test_a_baseline_saved_with_the_bound_widened_says_so(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUTAGE", "0.3")
    monkeypatch.setenv("OUTAGE_ALL", "1")
    result = agent.runpytest("--prove-save-baseline=current", "--prove-max-errored=0.5")
    result.stdout.fnmatch_lines(["*baseline 'current' saved from run *--prove-max-errored 0.5 "
                                 "widened the share of episodes without an outcome a baseline "
                                 "may hold (default 0.25): up to 0.*case=a*"])


def test_a_run_too_thin_for_the_design_check_is_not_saved(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Widened on purpose, yet 20 episodes with an outcome in case=a cannot let a later gate
    # see a change of 0.20: the design check of what is left refuses it.
    monkeypatch.setenv("OUTAGE", "0.9")
    monkeypatch.setenv("OUTAGE_ALL", "1")
    result = agent.runpytest("--prove-save-baseline=current", "--prove-max-errored=0.95")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*not saved: baseline 'current' would be too thin to gate "
                                 "with: 1 condition(s) kept too few episodes with an outcome*"
                                 "case=a*of 200*"])
    assert not (agent.path / ".prove" / "baselines" / "current.baseline").exists()


@pytest.mark.parametrize("every", [False, True], ids=["provider-calls", "every"])
def test_a_thin_baseline_fails_the_gate_of_a_worse_agent(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, every: bool) -> None:
    # 1(a) and 1(d): the baseline lost every episode of case=a that called the provider (its
    # bad rate reads 1.0), or every episode of it; the worse agent's gate read "safer"
    # (bad 1.000 -> 0.5, fewer episodes without an outcome) and passed.
    _thin_baseline(agent, monkeypatch, every)
    monkeypatch.setenv("A_BAD", "0.5")
    result = agent.runpytest("--prove-baseline=current")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["*gate failed: condition case=a: * of the 200 episodes of "
                                 "'baseline:current' ended without an outcome (*, more than "
                                 "0.25)*--prove-max-errored*"])
    if every:
        result.stdout.fnmatch_lines(["*gate failed: condition case=a: none of the 200 twins "
                                     "both runs ran has an outcome in both*events were not "
                                     "compared*"])
        assert "no-too-small" in out  # how to pass such a gate on purpose
    assert "pytest --prove-save-baseline" not in out
    # Said the same by the command line.
    runs = Store(agent.path / ".prove")
    latest = runs.load("latest").name
    code = main(["--store", str(agent.path / ".prove"), "check", "baseline:current", latest])
    assert code == 4


def test_a_swapped_declaration_is_refused_with_the_fix(
        saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = saved
    # 2: failures and successes swapped in the decorator gave "safer".
    kept = _baseline_file(agent)
    monkeypatch.setenv("SWAP", "1")
    monkeypatch.setenv("A_BAD", "0.5")
    result = agent.runpytest("--prove-baseline=current", "--prove-name=swapped")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*refused to compare: the declarations differ (test_agent: "
                                 "failures ?'bad'? in baseline:current, ?'good'? in swapped*"
                                 "--prove-update-baseline*"])
    assert "safer" not in result.stdout.str()
    code = main(["--store", str(agent.path / ".prove"), "check", "baseline:current",
                 "swapped"])
    assert code == 1
    # Reviewed and accepted: the baseline is replaced, and nothing is compared.
    result = agent.runpytest("--prove-baseline=current", "--prove-update-baseline")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*not compared: the declarations differ*",
                                 "*baseline 'current' replaced by run *"])
    assert _baseline_file(agent) != kept


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_a_resumed_gate_run_is_gated_against_its_baseline(
        saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = saved
    # 3: a gate run killed midway and resumed without --prove-baseline (a CI retry).
    _one_item_a_replicate(agent)  # the baseline in blocks, its replicates item by item
    monkeypatch.setenv("A_BAD", "0.5")
    monkeypatch.setenv("KILL", "150")
    killed = agent.runpytest("--prove-baseline=current", "--prove-name=gate")
    assert killed.ret == 3
    assert Store(agent.path / ".prove").load("gate").status == "incomplete"
    monkeypatch.delenv("KILL")
    # A copy of this store whose baseline is gone refuses the resume (was a test of its own,
    # test_a_resumed_run_whose_baseline_is_gone_is_refused, which killed the same run again).
    gone = agent.path / "gone"
    shutil.copytree(agent.path / ".prove", gone)
    (gone / "baselines" / "current.baseline").unlink()
    result = agent.runpytest(f"--prove-store={gone}", "--prove-resume=gate")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*run 'gate' was paired with baseline 'current', which this "
                                 "store no longer holds*"])
    result = agent.runpytest("--prove-resume=gate")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["worse*case=a*"])
    assert "--prove-save-baseline" not in result.stdout.str()


@pytest.mark.parametrize("words", ["too-small", "not-within"])
def test_fail_on_adds_and_never_drops_worse(saved: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch,
                                            words: str) -> None:
    agent = saved
    # 4: --prove-fail-on=too-small (or not-within) replaced worse: "worse", and exit 0.
    monkeypatch.setenv("A_BAD", "0.5")
    result = agent.runpytest("--prove-baseline=current", f"--prove-fail-on={words}",
                             "--prove-name=worse")
    result.stdout.fnmatch_lines(["worse*case=a*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    code = main(["--store", str(agent.path / ".prove"), "check", "baseline:current", "worse",
                 f"--fail-on={words}"])
    assert code == 4


def test_leaving_worse_out_is_said(saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    agent = saved
    monkeypatch.setenv("A_BAD", "0.5")
    result = agent.runpytest("--prove-baseline=current", "--prove-fail-on=no-worse",
                             "--prove-name=worse")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["worse*", "*note: a 'worse' verdict does not fail this gate: "
                                 "--prove-fail-on leaves worse out (no-worse), and this "
                                 "verdict is 'worse'*"])
    capsys.readouterr()
    code = main(["--store", str(agent.path / ".prove"), "check", "baseline:current", "worse",
                 "--fail-on=no-worse"])
    assert code == 0
    assert "note: a 'worse' verdict does not fail this gate" in capsys.readouterr().out


def test_too_small_to_tell_fails_unless_allowed(saved: pytest.Pytester) -> None:
    agent = saved
    # Ten twins a condition (-k keeps r000..r009) cannot see 0.20: by design, not lost.
    _one_item_a_replicate(agent)  # the baseline in blocks, its replicates item by item
    result = agent.runpytest("--prove-baseline=current", "-k", "r00")
    result.stdout.fnmatch_lines(["too small to tell*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result = agent.runpytest("--prove-baseline=current", "-k", "r00",
                             "--prove-allow-underpowered")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["too small to tell*", "*note: * row(s) could not have shown a "
                                 "change of 0.20 (*), and the gate does not fail on that: "
                                 "--prove-allow-underpowered*"])


def test_merge_refuses_to_save_an_outage_as_a_baseline(
        agent: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OUTAGE", "0.9")
    monkeypatch.setenv("OUTAGE_ALL", "1")
    for index in (1, 2):
        agent.runpytest(f"--prove-shard={index}/2", "--prove-salt=sweep",
                        f"--prove-name=shard-{index}")
    capsys.readouterr()
    code = main(["--store", str(agent.path / ".prove"), "merge", "shard-1", "shard-2",
                 "--name=whole", "--save-baseline=current"])
    assert code == 1
    assert "not saved: baseline 'current' would hold 1 condition(s) where more than 0.25" \
        in capsys.readouterr().out
    assert not (agent.path / ".prove" / "baselines" / "current.baseline").exists()
