"""The drill-down of issue 13 (item 4): ``pytest-prove flips`` lists the twins whose outcome
changed (a row's flips are its paired test's discordant pairs), ``--prove-replay=RUN`` runs one
episode again on the seed it had (under --pdb too) and stores nothing, and ``--lf`` after an
unpaired run reruns the failed replicates on the seeds they failed on."""

from __future__ import annotations

import json
import sys
import textwrap
from typing import Any

import pytest

from pytest_prove.cli import main
from pytest_prove.review import review
from pytest_prove.review.flips import Replay, replay_target
from pytest_prove.store import Store

#: A seeded agent whose every choice comes from its seed: a password ticket errors on some
#: seeds, and a refund ticket fails at the rate REFUND_FAIL says.  Each episode logs its
#: ticket, replicate, seed and whether it ran in the main thread (where a debugger stops).
DRILL_BOT = textwrap.dedent(
    """
    import os
    import random
    import threading

    import pytest
    import pytest_prove as prove

    RATES = {"refund": float(os.environ.get("REFUND_FAIL", "0.1")), "password": 0.1}


    @prove.rollout(replicates=40, failures=["unresolved"], successes=["resolved"],
                   concurrency=int(os.environ.get("BOT_BLOCK", "1")),
                   timeout=float(os.environ.get("BOT_TIMEOUT", "0")) or None)
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_bot(ticket, prove_seed, prove_replicate):
        main = threading.current_thread() is threading.main_thread()
        with open("seeds.log", "a") as log:
            log.write(f"{ticket} {prove_replicate} {prove_seed} {main}\\n")
        rng = random.Random(prove_seed)
        if ticket == "password" and rng.random() < 0.2:
            raise RuntimeError("lookup service down")
        return prove.Episode("unresolved" if rng.random() < RATES[ticket] else "resolved")
    """
)


@pytest.fixture
def drill(pytester: pytest.Pytester) -> pytest.Pytester:
    # The password ticket errors on one seed in five on purpose: with 40 replicates its share
    # of errored episodes passes the baseline bound of 0.25 one run in six, which would
    # refuse the baseline these tests save (--prove-max-errored).
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\nprove_max_errored = 0.6\n")
    pytester.makepyfile(test_bot=DRILL_BOT)
    return pytester


def _cli(project: pytest.Pytester, capsys: pytest.CaptureFixture[str],
         *args: str) -> tuple[int, str, str]:
    capsys.readouterr()  # what in-process pytester sessions printed
    code = main(["--store", str(project.path / ".prove"), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(project: pytest.Pytester, capsys: pytest.CaptureFixture[str],
          *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = _cli(project, capsys, *args, "--json")
    return code, json.loads(out)


def _log(project: pytest.Pytester) -> list[tuple[str, int, int, bool]]:
    """Every episode the rollout ran, in order: (ticket, replicate, seed, in main thread)."""
    path = project.path / "seeds.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(t, int(r), int(s), m == "True") for t, r, s, m in (line.split() for line in lines)]


def _store(project: pytest.Pytester) -> Store:
    return Store(project.path / ".prove")


# --------------------------------------------------------------------------- flips


def test_flips_are_the_discordant_pairs_of_the_paired_test(
        drill: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its runs are also those _flips_narrows_by_condition_and_event_and_refuses_what_it_
    cannot_list reads (a test of its own, which ran the same two sessions again)."""
    drill.runpytest("--prove-save-baseline=base", "--prove-name=first")
    monkeypatch.setenv("REFUND_FAIL", "0.7")
    drill.runpytest("--prove-baseline=base", "--prove-name=worse")
    code, doc = _json(drill, capsys, "flips", "base", "worse")
    assert code == 0
    # Each row's counts are the discordant pairs (b, c) the paired test of that row used.
    store = _store(drill)
    before, after = store.open("baseline:base"), store.open("worse")
    pairs = {(r.condition, r.event): r.pairs for r in review(
        before, after, events=None, q=0.05, max_mde=0.2, fail_on=["worse"]).prepared.rows}
    assert {(r["condition"], r["event"]) for r in doc["rows"]} == set(pairs)
    for row in doc["rows"]:
        paired = pairs[(row["condition"], row["event"])]
        assert paired is not None
        assert (row["twins"], row["before_only"], row["after_only"]) == (
            paired.n, paired.before_only, paired.after_only)
        listed = [f for f in doc["flips"] if f["condition"] == row["condition"]
                  and {"event": row["event"], "had_it": "before"} in f["events"]]
        assert len(listed) == row["before_only"]
        listed = [f for f in doc["flips"] if f["condition"] == row["condition"]
                  and {"event": row["event"], "had_it": "after"} in f["events"]]
        assert len(listed) == row["after_only"]
    refund = next(r for r in doc["rows"] if r["condition"] == "ticket=refund")
    assert refund["after_only"] > 5, "a refund failure rate of 0.7 against 0.1 flips many twins"
    # Each flip is a twin: one condition and replicate, one seed in both runs, two endings.
    seeds = {(r["condition_key"], r["replicate"]): r["seed"] for r in before.episodes}
    for flip in doc["flips"]:
        assert seeds[(flip["condition_key"], flip["replicate"])] == flip["seed"]
        assert flip["before"] != flip["after"]
        ticket = flip["condition"].removeprefix("ticket=")
        assert flip["replay"] == {"run": "worse", "keyword": None,
                                  "item": f"test_bot.py::test_bot[{ticket}-r"
                                          f"{flip['replicate']:03d}]"}
    # The words: the count first, the table, each twin with its seed and its replay line.
    code, out, _ = _cli(drill, capsys, "flips", "base", "worse", "-v")
    lines = out.splitlines()
    assert lines[0].startswith(f"{len(doc['flips'])} of 80 twins ended differently in worse "
                               "than in baseline:base")
    first = doc["flips"][0]
    assert (f"  r{first['replicate']:03d}  seed {first['seed']}  {first['before']['outcome']} -> "
            f"{first['after']['outcome']}") in lines
    assert f"        pytest 'test_bot.py::test_bot[refund-r{first['replicate']:03d}]' " \
           "--prove-replay=worse" in lines
    assert lines[-1].startswith("next: ")
    _flips_narrows_by_condition_and_event_and_refuses_what_it_cannot_list(drill, capsys)


def _flips_narrows_by_condition_and_event_and_refuses_what_it_cannot_list(
        drill: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """Was a test of its own: the baseline 'base' (run 'first') is saved and the run 'worse'
    (REFUND_FAIL=0.7) compared with it."""
    drill.runpytest("--prove-name=fresh")  # no baseline: a salt of its own
    code, doc = _json(drill, capsys, "flips", "base", "worse", "--condition", "ticket=refund")
    assert code == 0
    assert {r["condition"] for r in doc["rows"]} == {"ticket=refund"}
    assert doc["flips"] and all(f["condition"] == "ticket=refund" for f in doc["flips"])
    code, by_event = _json(drill, capsys, "flips", "base", "worse", "--event", "unresolved")
    assert code == 0 and {r["event"] for r in by_event["rows"]} == {"unresolved"}
    # Unknown condition: the error lists the ones there are.
    code, out, err = _cli(drill, capsys, "flips", "base", "worse", "--condition", "ticket=nope")
    assert code == 1 and out == ""
    assert "no condition 'ticket=nope'" in err and "ticket=password, ticket=refund" in err
    code, _, err = _cli(drill, capsys, "flips", "base", "worse", "--event", "escalated")
    assert code == 1 and "'escalated' is not a declared failure or success" in err
    # Runs on different salts have no twins: said plainly, with the fix, exit 1.
    code, out, err = _cli(drill, capsys, "flips", "base", "fresh")
    assert code == 1 and out == ""
    assert "have no twins: their salts differ" in err
    assert "run the later sweep again with --prove-baseline=base" in err
    code, refused = _json(drill, capsys, "flips", "first", "fresh")
    assert code == 1 and "have no twins" in refused["error"]
    assert "save the earlier sweep as a baseline" in refused["error"]


def test_flips_counts_only_the_twins_its_rows_read(
        drill: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Twins that ended without an outcome in one run are read by the 'no outcome' row alone:
    with --missing=ignore (or --event naming another row) the header counted them among the
    twins compared ("1 of 80 twins ended differently") while no row read them."""
    drill.makepyfile(test_bot=DRILL_BOT.replace(
        "    if ticket == \"password\"",
        "    if ticket == \"refund\" and os.environ.get(\"BOOM\") and rng.random() < 0.5:\n"
        "        raise RuntimeError(\"boom\")\n"
        "    if ticket == \"password\""))
    # A fixed salt: BOOM takes half of refund's 40 twins out on their seeds' first draw,
    # and on a new salt 5 or fewer (lost > 5 below) came 6.9e-7 of the time; this salt
    # takes 20.
    drill.runpytest("--prove-save-baseline=base", "--prove-name=first", "--prove-salt=drill")
    monkeypatch.setenv("BOOM", "1")
    drill.runpytest("--prove-baseline=base", "--prove-name=boom")
    store = _store(drill)
    before = {(r["condition_key"], r["replicate"]): r for r in store.open("base").episodes}
    after = {(r["condition_key"], r["replicate"]): r for r in store.open("boom").episodes}
    assert before.keys() == after.keys() and len(before) == 80
    both = sum(1 for k in before if not before[k].get("error") and not after[k].get("error"))
    lost = sum(1 for k in before if not before[k].get("error") and after[k].get("error"))
    assert lost > 5 and both < 80
    code, doc = _json(drill, capsys, "flips", "base", "boom")
    assert code == 0 and doc["twins"] == 80 and doc["twins_unread"] == 0
    for args in (["--missing", "ignore"], ["--event", "unresolved", "--event", "resolved"]):
        code, doc = _json(drill, capsys, "flips", "base", "boom", *args)
        assert code == 0
        # Every twin a row reads, and only those.
        assert doc["twins"] == both, args
        assert doc["twins"] == sum(max(r["twins"] for r in doc["rows"]
                                       if r["condition"] == c)
                                   for c in {r["condition"] for r in doc["rows"]})
        assert doc["twins_unread"] == 80 - both
        assert not any(e["event"] == "no outcome" for f in doc["flips"] for e in f["events"])
        code, out, _ = _cli(drill, capsys, "flips", "base", "boom", *args)
        lines = out.splitlines()
        # Whether any read twin flipped is up to the salt's draw; either way the header
        # counts only the twins the rows read.
        assert (f"of {both} twins ended differently" in lines[0]
                if doc["flips"] else f"all {both} alike" in lines[0]), lines[0]
        assert lines[1].startswith(f"{80 - both} other twin(s) ended without an outcome in "
                                   "one run or both")


# --------------------------------------------------------------------------- replay


def test_show_and_flips_print_a_replay_that_runs_the_episode_on_its_stored_seed(
        drill: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    # A fixed salt: the password ticket errors on one seed in five, and on a new salt
    # none of its 40 did 0.8^40 = 1.3e-4 of the time (this salt errs on 10).
    drill.runpytest("--prove-name=first", "--prove-salt=drill")
    stored = {(r["condition"]["ticket"], r["replicate"]): r for r in
              _store(drill).open("first").episodes}
    code, doc = _json(drill, capsys, "show", "first")
    assert code == 0 and doc["errored"], "some password tickets error on their seed"
    errored = doc["errored"][0]
    item = f"test_bot.py::test_bot[password-r{errored['replicate']:03d}]"
    assert errored["replay"] == {"run": "first", "item": item, "keyword": None}
    _, out, _ = _cli(drill, capsys, "show", "first")
    assert f"    replay: pytest '{item}' --prove-replay=first" in out.splitlines()
    (drill.path / "seeds.log").unlink()
    result = drill.runpytest(item, "--prove-replay=first")
    result.assert_outcomes(failed=1)  # it raises again: the same seed, the same error
    assert _log(drill) == [("password", errored["replicate"], errored["seed"], True)]
    result.stdout.fnmatch_lines([
        "replayed 1 episode(s) of run 'first' on their seeds (salt *): 1 ended as stored; "
        "nothing was stored",
        f"  ticket=password r{errored['replicate']} seed {errored['seed']}: no outcome "
        "(exception: RuntimeError: lookup service down), as stored"])
    # Nothing was stored: the run replayed is still the newest, and the only one.
    assert [m["name"] for _, m in _store(drill).runs()] == ["first"]
    # -k picks several: each replicate gets the seed it had.
    (drill.path / "seeds.log").unlink()
    drill.runpytest("-k", "refund and (r003 or r017)", "--prove-replay=latest")
    assert sorted(_log(drill)) == sorted(
        ("refund", r, stored[("refund", r)]["seed"], True) for r in (3, 17))


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["one-process", "xdist"])
def test_a_replay_of_a_blocked_run_with_a_timeout_runs_each_replicate_in_the_main_thread(
        drill: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]) -> None:
    # Blocks of 4 in threads, each under a timeout: where no debugger can stop.
    monkeypatch.setenv("BOT_BLOCK", "4")
    monkeypatch.setenv("BOT_TIMEOUT", "30")
    # Under xdist the blocked run is stored and replayed through one worker (-n 1: the
    # worker's blocks, the replay's items and salt handed to the worker, the controller's
    # store; the replay ran on two before, one worker start more, where a replayed item is
    # each worker's own; the salt of a stored run taken by two workers:
    # test_lf_after_an_unpaired_run_reruns_the_failures_on_their_seeds[xdist]).
    drill.runpytest("--prove-name=blocked", *workers)
    stored = {(r["condition"]["ticket"], r["replicate"]): r for r in
              _store(drill).open("blocked").episodes}
    assert stored[("refund", 5)]["item"] == "test_bot.py::test_bot[refund-r004-007]"
    # What show and flips print for it: its own replicate's item (a replay runs one an item).
    blocked = _store(drill).open("blocked")
    assert replay_target(blocked, stored[("refund", 5)]) == Replay(
        "blocked", "test_bot.py::test_bot[refund-r005]")
    # An episode stored without its item (an older pytest-prove): the rollout and -k.
    older = {k: v for k, v in stored[("refund", 5)].items() if k != "item"}
    assert replay_target(blocked, older) == Replay("blocked", "test_bot.py::test_bot", "r005")
    assert not any(main for *_, main in _log(drill))
    (drill.path / "seeds.log").unlink()
    result = drill.runpytest("test_bot.py::test_bot[refund-r005]",
                             "test_bot.py::test_bot[password-r031]",
                             "--prove-replay=blocked", *workers)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    result.stdout.fnmatch_lines(["*replayed 2 episode(s) of run 'blocked' on their seeds*"])
    assert sorted(_log(drill)) == sorted(
        (t, r, stored[(t, r)]["seed"], True) for t, r in (("refund", 5), ("password", 31)))
    assert [m["name"] for _, m in _store(drill).runs()] == ["blocked"]


@pytest.mark.slow
def test_a_replay_under_pdb_stops_in_the_rollout_on_its_seed(
        drill: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    # A fixed salt: the password ticket errors on one seed in five, and on a new salt
    # none of its 40 did 0.8^40 = 1.3e-4 of the time (this salt errs on 10).
    drill.runpytest("--prove-name=first", "--prove-salt=drill")
    _, doc = _json(drill, capsys, "show", "first")
    errored = doc["errored"][0]
    # In a subprocess: pdb reads the commands from the process's own stdin, which an
    # in-process session shares with (and cannot be fed past) the outer run's capture.
    result = drill.run(sys.executable, "-m", "pytest", errored["replay"]["item"],
                       "--prove-replay=first", "--pdb", "-p", "no:xdist",
                       stdin=b"p ('seed', prove_seed)\nc\n", timeout=120)
    # The debugger stops where the rollout raised, and its seed is the stored one.
    result.stdout.fnmatch_lines(["*RuntimeError: lookup service down*", "*entering PDB*",
                                 "-> raise RuntimeError(\"lookup service down\")",
                                 f"(Pdb) ('seed', {errored['seed']})"])


def test_replay_refuses_what_it_cannot_do(drill: pytest.Pytester) -> None:
    drill.runpytest("--prove-save-baseline=base", "--prove-name=first")
    result = drill.runpytest("--prove-replay=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prove-replay: no run named 'nope'*first*baseline:base*"])
    result = drill.runpytest("--prove-replay=first", "--prove-baseline=base",
                             "--prove-name=x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prove-replay=first * takes no --prove-baseline or "
                                 "--prove-name; drop them*"])
    result = drill.runpytest("--prove-replay=baseline:../x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    # A baseline replays too.
    result = drill.runpytest("test_bot.py::test_bot[refund-r001]", "--prove-replay=base")
    result.stdout.fnmatch_lines(["replayed 1 episode(s) of run 'baseline:base' *"])
    # A replay compares nothing, so the design check that refuses this small sweep does not
    # stop it; selecting no rollout replays nothing, and says so.
    drill.makeini("[pytest]\n")
    assert drill.runpytest("--prove-name=small").ret == pytest.ExitCode.USAGE_ERROR
    drill.runpytest("test_bot.py::test_bot[refund-r001]",
                    "--prove-replay=first").assert_outcomes(passed=1)
    result = drill.runpytest("-k", "nothing_matches", "--prove-replay=first")
    result.stdout.fnmatch_lines(["replay of run 'first' (salt *): no rollout item ran, so "
                                 "nothing was replayed"])


def test_replay_refuses_a_report(drill: pytest.Pytester) -> None:
    """A replay stores nothing and compares nothing: it used to take --prove-report, write
    no file and say nothing about it."""
    drill.runpytest("--prove-name=first")
    result = drill.runpytest("test_bot.py::test_bot[refund-r001]", "--prove-replay=first",
                             "--prove-report=r.html")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prove-replay=first * takes no --prove-report; drop it*"])
    assert not (drill.path / "r.html").exists()


# --------------------------------------------------------------------------- --lf


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_lf_after_an_unpaired_run_reruns_the_failures_on_their_seeds(
        drill: pytest.Pytester, capsys: pytest.CaptureFixture[str], workers: list[str]) -> None:
    # Under xdist, the --lf rerun goes on two workers (each must take the salt of 'first');
    # the other sessions go through one (-n 1: the same controller/worker path, one worker
    # start less): the stored run, a replay of one item, a run on a salt of its own.
    one = ["-n", "1"] if workers else []
    # A fixed salt: on a fresh one, none of the episodes erred about one run in 7,700
    # (0.8 ** 40), and this test has nothing to rerun.
    drill.runpytest("--prove-name=first", "--prove-salt=lf-drill", *one)
    first = _store(drill).open("first")
    failed = sorted((r["condition"]["ticket"], r["replicate"], r["seed"])
                    for r in first.episodes if r.get("error"))
    assert failed
    (drill.path / "seeds.log").unlink()
    result = drill.runpytest("--lf", "--prove-name=again", *workers)
    # Every failure comes back: it reran on the seed it failed on.
    result.stdout.fnmatch_lines([f"*= {len(failed)} failed*"])
    assert sorted((t, r, s) for t, r, s, _ in _log(drill)) == failed
    result.stdout.fnmatch_lines([f"note: salt {first.salt} taken from run 'first', which "
                                 f"{len(failed)} failed replicate item(s) ran on (--lf/--ff)*"])
    again = _store(drill).open("again")
    assert again.salt == first.salt
    # So the rerun is paired with the run it reruns.
    code, doc = _json(drill, capsys, "flips", "first", "again")
    assert code == 0 and doc["flips"] == []
    # A replay of that narrowed run says which episodes it does not hold.
    passed = next(r for r in first.episodes if not r.get("error"))
    ticket, replicate = passed["condition"]["ticket"], passed["replicate"]
    result = drill.runpytest(f"test_bot.py::test_bot[{ticket}-r{replicate:03d}]",
                             "--prove-replay=again", *one)
    result.stdout.fnmatch_lines([
        "*replayed 1 episode(s) of run 'again' *: 0 ended as stored, 1 not in the run; *",
        f"  ticket={ticket} r{replicate} seed {passed['seed']}: {passed['outcome']}; run "
        "'again' holds no such episode, so this is the seed its salt gives that replicate"])
    # Without --lf the next run draws a salt of its own, as before.
    drill.runpytest("--prove-name=third", *one)
    assert _store(drill).open("third").salt != first.salt


@pytest.mark.slow
def test_lf_takes_the_newest_salt_and_names_the_failures_it_cannot_bring_back(
        drill: pytest.Pytester) -> None:
    drill.makepyfile(test_other=DRILL_BOT.replace("def test_bot(", "def test_other("))
    drill.runpytest("test_bot.py", "--prove-name=one")
    drill.runpytest("test_other.py", "--prove-name=two")
    one, two = _store(drill).open("one"), _store(drill).open("two")
    assert one.salt != two.salt
    failed_two = sum(1 for r in two.episodes if r.get("error"))
    failed_one = sum(1 for r in one.episodes if r.get("error"))
    result = drill.runpytest("--lf")
    result.stdout.fnmatch_lines([
        f"note: salt {two.salt} taken from run 'two', which {failed_two} failed replicate "
        f"item(s) ran on (--lf/--ff): they rerun on the seeds they failed on; failed items "
        f"of other salts ({failed_one} of one) rerun on new seeds, so replay those with "
        "--prove-replay=RUN instead"])
    assert _store(drill).open("latest").salt == two.salt
    # A baseline still decides the salt of a paired run, --lf or not.
    drill.runpytest("--prove-save-baseline=base", "--prove-name=full")
    base = _store(drill).open("baseline:base")
    result = drill.runpytest("--lf", "--prove-baseline=base", "--prove-name=paired")
    assert "taken from run" not in result.stdout.str()
    assert _store(drill).open("paired").salt == base.salt


@pytest.mark.slow
def test_lf_says_so_when_none_of_the_failures_is_collected_any_more(
        drill: pytest.Pytester) -> None:
    """--lf after the sweep was edited: pytest finds none of its failures and runs every item;
    the note said they "rerun on the seeds they failed on", of which none ran."""
    # A fixed salt: the password ticket errors on one seed in five, and on a new salt
    # none of its 40 did 0.8^40 = 1.3e-4 of the time (this salt errs on 10).
    drill.runpytest("--prove-name=first", "--prove-salt=drill")
    first = _store(drill).open("first")
    failed = sum(1 for r in first.episodes if r.get("error"))
    assert failed
    drill.makepyfile(test_bot=DRILL_BOT.replace('["refund", "password"]',
                                                '["refund2", "password2"]'))
    result = drill.runpytest("--lf", "--prove-name=edited")
    result.stdout.fnmatch_lines(["*run-last-failure: *known failures not in selected tests*"])
    result.stdout.fnmatch_lines([
        f"note: salt {first.salt} taken from run 'first' (--lf/--ff), but none of the {failed} "
        "failed replicate item(s) that ran on it was collected this time (were their test or "
        "its parameters changed?), so no failure reran on its seed"])
    assert "they rerun on the seeds they failed on" not in result.stdout.str()
