"""Rollouts under the plugins agent repositories use (issue 13, item 5): pytest-asyncio in
auto and strict mode, anyio's marker, pytest-timeout, pytest-rerunfailures and
pytest.skip() inside a rollout; every replicate is stored once, with its kind, and the run
is complete."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from pytest_prove.cli import main
from pytest_prove.store import Store

from .conftest import load

#: These sessions run beside the other plugins a user has installed, as a user's do.
pytestmark = pytest.mark.installed_plugins

pytest.importorskip("pytest_asyncio")
pytest.importorskip("pytest_timeout")
pytest.importorskip("pytest_rerunfailures")

ASYNC = textwrap.dedent(
    """
    import asyncio

    import pytest
    import pytest_asyncio
    import pytest_prove as prove


    @pytest_asyncio.fixture
    async def loop_of_fixture():
        yield asyncio.get_running_loop()


    @prove.rollout(replicates=6, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    {marker}
    async def test_async(prove_seed, loop_of_fixture):
        await asyncio.sleep(0)
        # The rollout runs on the loop its async fixtures were made on.
        same = asyncio.get_running_loop() is loop_of_fixture
        return prove.Episode("resolved" if same else "unresolved")
    """
)


@pytest.mark.parametrize(("workers", "mode"), [
    pytest.param([], "auto", id="one-process-auto"),
    pytest.param([], "strict", id="one-process-strict"),
    # One worker: the rollout's loop is one process's, and -n 1 runs it in a worker as
    # -n 2 does, with one process less (two workers: the xdist-blocks-pytest-asyncio
    # variant of the pytest-timeout test below); under a second of CPU.  Strict mode
    # under xdist: test_async_rollouts_of_pytest_asyncio_and_anyio_under_xdist.
    pytest.param(["-n", "1"], "auto", id="xdist-auto")])
def test_async_rollouts_under_pytest_asyncio(pytester: pytest.Pytester, mode: str,
                                             workers: list[str]) -> None:
    pytester.makeini(f"[pytest]\nprove_allow_underpowered = true\nasyncio_mode = {mode}\n")
    marker = "@pytest.mark.asyncio" if mode == "strict" else ""
    pytester.makepyfile(test_async=ASYNC.replace("{marker}", marker))
    result = pytester.runpytest("-p", "no:cacheprovider", *workers)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    assert [r["outcome"] for r in run.episodes] == ["resolved"] * 6


#: pytest-timeout's timeout (--timeout) in these sessions, in seconds.  What it stops
#: outlasts it whatever the load (a sleep of 30 s, or an Event set only at the session's
#: end); what it must not stop does no work: a replicate's item (setup, call, the record
#: stored, teardown) takes under 10 ms (--durations), the first of a rollout an fsync of the
#: run's manifest more (50 ms at worst seen on a busy shared disk), so the alarm leaves it
#: ten times the worst, which a load of 10 on two cores (a runnable thread waits tens of
#: milliseconds at most) cannot use up.  Not shorter: the fsync is the disk's, not the
#: CPU's.  It was 1 s: each of these sessions waits it out once a rollout, one after the
#: other.
ALARM = 0.5

STOPPED = textwrap.dedent(
    """
    import time

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    def test_stopped(prove_replicate):
        if prove_replicate == 1:
            time.sleep(30)
        if prove_replicate == 2:
            pytest.skip("no data for this case")
        return prove.Episode("resolved")
    """
)


def test_pytest_timeout_and_skip_inside_a_rollout(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_stopped=STOPPED)
    # In process: pytest-timeout's signal method sets its SIGALRM handler around each item
    # and puts the old one back, and this session sets none (tests run in the main thread,
    # under xdist too).
    result = pytester.runpytest("-p", "no:cacheprovider", f"--timeout={ALARM}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 failed, 2 passed, 1 skipped*"])
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    kinds = [(r["error"] or {}).get("kind", "outcome")
             for r in sorted(run.episodes, key=lambda r: r["replicate"])]
    assert kinds == ["outcome", "episode_timeout", "no_outcome", "outcome"]


ASYNC_STOPPED = textwrap.dedent(
    """
    import asyncio

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    async def test_stopped(prove_replicate):
        with prove.step("start"):
            pass
        if prove_replicate == 1:
            await asyncio.sleep(600)
        return prove.Episode("resolved")
    """
)


#: The slow marker for the variant with two xdist workers (a second or more of CPU,
#: bench/suite_time.py); the others take a tenth of that, or under a second with one worker,
#: and wait ALARM for pytest-timeout's alarm.  The xdist variants run one worker (-n 1: the
#: alarm and the replicate it stops are one process's, and a worker sends what it stored to
#: the controller as with two), except xdist-blocks-pytest-asyncio, which keeps two.
XDIST_IS_SLOW = pytest.mark.slow


@pytest.mark.parametrize("args", [
    # These two sessions also run SYNC_BLOCK_STOPPED (was
    # test_pytest_timeout_stops_a_sync_block_and_every_replicate_is_stored[one-process] and
    # [xdist], the same options in sessions of their own).
    pytest.param([], id="one-process"),
    pytest.param(["-n", "1"], id="xdist"),
    pytest.param(["--prove-concurrency=2"], id="blocks"),
    pytest.param(["-o", "asyncio_mode=auto"], id="pytest-asyncio"),
    pytest.param(["-n", "2", "--prove-concurrency=2", "-o", "asyncio_mode=auto"],
                 id="xdist-blocks-pytest-asyncio", marks=XDIST_IS_SLOW),
    pytest.param(["--prove-episode-timeout=600"], id="episode-timeout"),
    pytest.param(["-n", "1", "--prove-episode-timeout=600"], id="xdist-episode-timeout")])
def test_pytest_timeout_stops_an_async_replicate_and_it_is_stored(
        pytester: pytest.Pytester, args: list[str]) -> None:
    """pytest-timeout's signal lands where the event loop waits, outside every task: the
    loop's shutdown cancelled the replicates, the block took that for Ctrl-C, and the
    timed-out replicate (with its block) was not stored ("unhandled exception during
    asyncio.run() shutdown ... Stopped(KeyboardInterrupt())"). It is an episode_timeout, as
    for a sync rollout.  In one process and under -n 1, a sync rollout's block is stopped in
    the same session: the signal lands in the thread that waits for a block's threads, and
    the whole block was lost, the replicate that had finished with it."""
    also = {"test_sync_block": SYNC_BLOCK_STOPPED} if args in ([], ["-n", "1"]) else {}
    result, timed = _replicate_one_timed_out(pytester, ASYNC_STOPPED, args, also)
    text = result.stdout.str()
    assert "asyncio.run() shutdown" not in text and "Stopped" not in text, text
    assert timed["duration"] >= 0.9 * ALARM


def _replicate_one_timed_out(pytester: pytest.Pytester, source: str, args: list[str],
                             also: dict[str, str] | None = None,
                             ) -> tuple[pytest.RunResult, dict[str, Any]]:
    """Run ``source`` (4 replicates, the second outlasting it) under pytest-timeout's ALARM:
    the session fails, the run is complete, only replicate 1 timed out (after its first
    step); that session's result and replicate 1's record.  (ALARM, not less: the other
    replicates must end within their item's alarm, with room for a loaded machine; each
    takes milliseconds.)  Test files ``also`` (module name: source) run in the same session,
    and each rollout's replicates are checked so."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_stopped=source, **(also or {}))
    pytester.makeconftest(RELEASE_AT_END)
    # In process, as test_pytest_timeout_and_skip_inside_a_rollout (the comment there).
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", f"--timeout={ALARM}",
                                *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([f"*Timeout (>{ALARM}s) from pytest-timeout*"])
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    assert {r["rollout"] for r in run.episodes} == {
        f"{name}.py::test_stopped" for name in ("test_stopped", *(also or {}))}
    for rollout in {r["rollout"] for r in run.episodes}:
        episodes = [r for r in run.episodes if r["rollout"] == rollout]
        ended = sorted((r["replicate"], (r["error"] or {}).get("kind", "outcome"))
                       for r in episodes)
        assert ended == [(0, "outcome"), (1, "episode_timeout"), (2, "outcome"),
                         (3, "outcome")], rollout
        timed = next(r for r in episodes if r["replicate"] == 1)
        assert [s["name"] for s in timed["steps"]] == ["start"]
    timed = next(r for r in run.episodes
                 if r["replicate"] == 1 and r["rollout"] == "test_stopped.py::test_stopped")
    return result, dict(timed)


RELEASE_AT_END = textwrap.dedent(
    """
    import threading

    #: Set as the session ends: a replicate that must outlast pytest-timeout's alarm waits
    #: on it, so it outlasts the alarm whatever the load, and the process (which waits for
    #: the block's threads at exit) ends with the session, not seconds later.
    SESSION_OVER = threading.Event()


    def pytest_unconfigure(config):
        SESSION_OVER.set()
    """
)

SYNC_BLOCK_STOPPED = textwrap.dedent(
    """
    from conftest import SESSION_OVER

    import pytest_prove as prove


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"], concurrency=2)
    def test_stopped(prove_replicate):
        with prove.step("start"):
            pass
        if prove_replicate == 1:
            # Outlasts pytest-timeout's alarm (the conftest's comment); bounded, so that a session
            # that waited for the block would end, late, rather than hang.
            SESSION_OVER.wait(120)
        return prove.Episode("resolved")
    """
)


ANYIO = textwrap.dedent(
    """
    import asyncio

    import pytest
    import pytest_prove as prove

    {backend}

    @pytest.fixture
    async def loop_of_fixture():
        yield asyncio.get_running_loop()


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    @pytest.mark.anyio
    @pytest.mark.parametrize("ticket", ["refund"])
    async def test_anyio(ticket, prove_seed, loop_of_fixture):
        await asyncio.sleep(0)
        # The rollout runs in anyio's runner, on the loop its async fixtures were made on.
        same = asyncio.get_running_loop() is loop_of_fixture
        return prove.Episode("resolved" if same else "unresolved")
    """
)
ASYNCIO_ONLY = '@pytest.fixture\ndef anyio_backend():\n    return "asyncio"\n'


@pytest.mark.parametrize(("backend", "args"), [
    pytest.param("default", [], id="one-process-default"),
    pytest.param("fixture", [], id="one-process-fixture"),
    pytest.param("default", ["--prove-concurrency=2"], id="blocks-default"),
    # Under xdist: test_async_rollouts_of_pytest_asyncio_and_anyio_under_xdist.
    pytest.param("fixture", ["--prove-concurrency=2"], id="blocks-fixture")])
def test_async_rollouts_under_anyio_marker(pytester: pytest.Pytester, backend: str,
                                           args: list[str]) -> None:
    """anyio's own pytest_pyfunc_call ran the rollout and dropped its Episode: every item
    passed and nothing was stored."""
    pytest.importorskip("anyio")
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_anyio=ANYIO.replace(
        "{backend}", ASYNCIO_ONLY if backend == "fixture" else ""))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    assert [r["outcome"] for r in run.episodes] == ["resolved"] * 4
    # anyio's default anyio_backend fixture is parametrized: its value is an axis like
    # any parametrize argument; a fixture of one's own that returns "asyncio" is not.
    expected = {"ticket": "refund"} if backend == "fixture" else {
        "anyio_backend": "asyncio", "ticket": "refund"}
    assert all(r["condition"] == expected for r in run.episodes)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_async_rollouts_of_pytest_asyncio_and_anyio_under_xdist(
        pytester: pytest.Pytester) -> None:
    """Under two workers, in one session (they were three, each starting its workers:
    test_async_rollouts_under_pytest_asyncio[xdist-strict] and
    test_async_rollouts_under_anyio_marker[xdist-default] and [xdist-fixture]): a rollout
    marked for pytest-asyncio in strict mode (pytest-asyncio's default, as in the anyio
    variants' sessions), and anyio's marker with its default backend fixture and with one
    of the module's own; each rollout checked as its test did."""
    pytest.importorskip("anyio")
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\nasyncio_mode = strict\n")
    pytester.makepyfile(test_async=ASYNC.replace("{marker}", "@pytest.mark.asyncio"),
                        test_anyio_default=ANYIO.replace("{backend}", ""),
                        test_anyio_fixture=ANYIO.replace("{backend}", ASYNCIO_ONLY))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "-n", "2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    by_rollout: dict[str, list[Any]] = {}
    for record in run.episodes:
        by_rollout.setdefault(record["rollout"], []).append(record)
    assert sorted(by_rollout) == ["test_anyio_default.py::test_anyio",
                                  "test_anyio_fixture.py::test_anyio", "test_async.py::test_async"]
    assert [r["outcome"] for r in by_rollout["test_async.py::test_async"]] == ["resolved"] * 6
    for backend in ("default", "fixture"):
        records = by_rollout[f"test_anyio_{backend}.py::test_anyio"]
        assert [r["outcome"] for r in records] == ["resolved"] * 4
        # As test_async_rollouts_under_anyio_marker says of the condition.
        expected = {"ticket": "refund"} if backend == "fixture" else {
            "anyio_backend": "asyncio", "ticket": "refund"}
        assert all(r["condition"] == expected for r in records)


def test_anyio_rollout_on_another_backend_is_refused(pytester: pytest.Pytester) -> None:
    pytest.importorskip("anyio")
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_trio=textwrap.dedent(
        """
        import pytest
        import pytest_prove as prove

        @pytest.fixture
        def anyio_backend():
            return "trio"

        @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"])
        @pytest.mark.anyio
        async def test_trio(prove_seed):
            return prove.Episode("resolved")
        """))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*pytest-prove runs async rollouts on asyncio*'trio'*"])
    result.stdout.no_fnmatch_line("*Traceback*")


FLAKY = textwrap.dedent(
    """
    import pathlib

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    def test_flaky(prove_replicate):
        prove.usage("sim", input=10, output=1)   # every attempt spends tokens
        # How many times this replicate ran, kept on disk (xdist workers are processes).
        seen = pathlib.Path(f"attempts-{prove_replicate}")
        before = int(seen.read_text()) if seen.exists() else 0
        seen.write_text(str(before + 1))
        if prove_replicate == 1 and before == 0:
            raise ConnectionError("flaky")        # fails once, passes on its rerun
        if prove_replicate == 2:
            raise RuntimeError("always")          # fails on every attempt
        return prove.Episode("resolved")
    """
)


@pytest.mark.parametrize("args", [
    pytest.param([], id="one-process"),
    # One worker: an item's attempts all run in the worker that has it, whatever the
    # number of workers, and reach the controller as with two (a worker's start less).
    pytest.param(["-n", "1"], id="xdist"),
    pytest.param(["--prove-concurrency=2"], id="blocks")])
def test_rerunfailures_stores_each_replicate_once(pytester: pytest.Pytester,
                                                  capsys: pytest.CaptureFixture[str],
                                                  args: list[str]) -> None:
    """A rerun item's replicates are stored once, by their last attempt, with the number
    of attempts and how the earlier ones ended; the session line, show and a saved
    baseline count the same.  Before, every attempt was a line of its own."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_flaky=FLAKY)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly",
                                "--reruns=2", "--prove-save-baseline=b", *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*4 episodes, 3 with an outcome, 0 with none, 1 errored*"])
    run = load(pytester)
    lines = (run.path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 4  # one line a replicate, not one an attempt
    by_replicate = {r["replicate"]: r for r in run.episodes}
    assert sorted(by_replicate) == [0, 1, 2, 3]
    assert by_replicate[1]["outcome"] == "resolved"
    assert by_replicate[1]["attempts"] == 2
    assert by_replicate[1]["earlier"][0]["error"]["type"] == "ConnectionError"
    assert by_replicate[2]["error"]["type"] == "RuntimeError"
    assert by_replicate[2]["attempts"] == 3
    assert [e["error"]["message"] for e in by_replicate[2]["earlier"]] == ["always"] * 2
    # In a block the whole block runs again, so its other replicate has two attempts too.
    again = {0: 2, 3: 3} if args == ["--prove-concurrency=2"] else {0: 1, 3: 1}
    for replicate, attempts in again.items():
        assert by_replicate[replicate].get("attempts", 1) == attempts
        assert by_replicate[replicate]["outcome"] == "resolved"
    # Every attempt's tokens were spent, and are the episode's.
    attempts = {r: by_replicate[r].get("attempts", 1) for r in by_replicate}
    assert {r: by_replicate[r]["tokens"]["input"] for r in by_replicate} == {
        r: 10 * n for r, n in attempts.items()}
    assert by_replicate[2]["tokens"]["by_model"]["sim"] == {"input": 30, "output": 3,
                                                            "calls": 3}
    total = 10 * sum(attempts.values())
    result.stdout.fnmatch_lines([f"tokens: {total} input and {total // 10} output in "
                                 f"{total // 10} calls (sim)*"])
    assert run.manifest["counts"] == {"episodes": 4, "with_outcome": 3, "no_outcome": 0,
                                      "errored": 1}
    baseline = Store(pytester.path / ".prove").load_baseline("b")
    assert sorted(r["replicate"] for r in baseline.episodes) == [0, 1, 2, 3]
    store = str(pytester.path / ".prove")
    assert main(["show", "latest", "--store", store]) == 0
    shown = capsys.readouterr().out
    assert "4 episodes, 3 with an outcome, 0 with none, 1 errored" in shown
    reran = 4 if args == ["--prove-concurrency=2"] else 2
    assert f"rerun: {reran} episode(s) ran more than once" in shown
    assert "1 ended with an outcome after an earlier attempt had none" in shown


def test_rerun_cut_short_keeps_the_attempt_that_ended(pytester: pytest.Pytester) -> None:
    """The session stops (pytest.exit) during a rerun: the attempt that did end is stored,
    as errored, and the run stays incomplete for --prove-resume."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_cut=textwrap.dedent(
        """
        import pathlib

        import pytest
        import pytest_prove as prove


        @prove.rollout(replicates=3, failures=["unresolved"], successes=["resolved"])
        def test_cut(prove_replicate):
            seen = pathlib.Path(f"attempts-{prove_replicate}")
            before = int(seen.read_text()) if seen.exists() else 0
            seen.write_text(str(before + 1))
            if prove_replicate == 1:
                if before == 0:
                    raise RuntimeError("first attempt")
                pytest.exit("stopped during the rerun")
            return prove.Episode("resolved")
        """))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", "--reruns=1")
    result.stdout.fnmatch_lines(["*(incomplete): 2 episodes, 1 with an outcome, 0 with none, "
                                 "1 errored*"])
    run = load(pytester)
    assert [(r["replicate"], (r["error"] or {}).get("message")) for r in run.episodes] == [
        (0, None), (1, "first attempt")]


SHUFFLE = textwrap.dedent(
    """
    import os
    import random


    def pytest_collection_modifyitems(items):
        # What pytest-randomly does to the order, without it.
        random.Random(os.environ["SHUFFLE"]).shuffle(items)
    """
)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
@pytest.mark.parametrize("how", ["conftest", "pytest-randomly"])
def test_a_shuffled_order_pairs_every_episode_with_its_twin(bot: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            how: str) -> None:
    """Items in another order (pytest-randomly, which also reseeds the global random before
    every item) change nothing stored: each replicate is paired with its twin, on its seed,
    and ends as it did."""
    if how == "pytest-randomly":
        pytest.importorskip("pytest_randomly")
        # One worker: pytest-randomly's reseeding is each process's; the twins spread
        # over two workers are the conftest variant's.
        first, second = ["-p", "randomly", "--randomly-seed=1"], ["-p", "randomly",
                                                                  "--randomly-seed=2",
                                                                  "-n", "1"]
    else:
        bot.makeconftest(SHUFFLE)
        first, second = ["-p", "no:randomly"], ["-p", "no:randomly", "-n", "2"]
    # 10 replicates a condition, 20 items (the bot's 40 showed nothing more: the pairing is
    # each twin's, whatever their number).
    monkeypatch.setenv("BOT_REPLICATES", "10")
    monkeypatch.setenv("SHUFFLE", "1")
    result = bot.runpytest("-p", "no:cacheprovider", *first, "--prove-save-baseline=b")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    before = load(bot, "latest")
    order = [(r["condition_key"], r["replicate"]) for r in before.episodes]
    assert order != sorted(order)  # the items did run out of order
    monkeypatch.setenv("SHUFFLE", "2")
    result = bot.runpytest("-p", "no:cacheprovider", *second, "--prove-baseline=b")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*nothing changed significantly*"])
    result.stdout.no_fnmatch_line("*unpaired*")
    after = load(bot, "latest")
    assert after.run_id != before.run_id
    twins = {(r["condition_key"], r["replicate"]): (r["seed"], r["outcome"], r["t"])
             for r in before.episodes}
    assert len(twins) == 20
    assert {(r["condition_key"], r["replicate"]): (r["seed"], r["outcome"], r["t"])
            for r in after.episodes} == twins


HANGS_ONCE = textwrap.dedent(
    """
    import pathlib
    import time

    import pytest_prove as prove


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"])
    def test_hangs(prove_replicate):
        hung = pathlib.Path("hung")
        if prove_replicate == 1 and not hung.exists():
            hung.write_text("once")
            time.sleep(30)
        return prove.Episode("resolved")
    """
)


@pytest.mark.slow  # a subprocess session each (see the comment at the call)
def test_pytest_timeout_thread_method_in_one_process(pytester: pytest.Pytester) -> None:
    """The thread method ends the process at a timeout (os._exit): the session says so
    before the tests, the run is left incomplete, and --prove-resume finishes it."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_hangs=HANGS_ONCE)
    # A subprocess: the thread method ends the process it runs in (os._exit).
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly",
                                           f"--timeout={ALARM}", "--timeout-method=thread")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["pytest-prove: pytest-timeout's thread method ends this "
                                 "process at its first timeout*--prove-resume=latest*"])
    run = load(pytester)
    assert run.manifest["status"] == "incomplete"
    assert [r["replicate"] for r in run.episodes] == [0]
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly",
                                "--prove-resume=latest")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    assert sorted(r["replicate"] for r in run.episodes) == [0, 1, 2, 3]


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_pytest_timeout_thread_method_under_xdist(pytester: pytest.Pytester) -> None:
    """Under xdist the worker that ends is replaced: its replicate is stored once, as a
    crashed worker's, and the sweep goes on."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_hangs=HANGS_ONCE)
    # In process: the thread method ends the worker it fires in, a process of its own.  One
    # worker: it is replaced as one of two is, and its replacement runs the rest (two cost
    # a worker's start more and showed nothing else).
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly",
                                f"--timeout={ALARM}", "--timeout-method=thread", "-n", "1")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.no_fnmatch_line("pytest-prove: pytest-timeout's thread method*")
    result.stdout.fnmatch_lines(["*(complete): 4 episodes, 3 with an outcome, 0 with none, "
                                 "1 errored*"])
    run = load(pytester)
    kinds = {r["replicate"]: (r["error"] or {}).get("kind") for r in run.episodes}
    assert kinds == {0: None, 1: "worker_crash", 2: None, 3: None}


IN_PROCESS = textwrap.dedent(
    '''
    import textwrap

    BOT = textwrap.dedent("""
        import random
        import pytest
        import pytest_prove as prove

        @prove.rollout(replicates=30, failures=["unresolved"], successes=["resolved"])
        @pytest.mark.parametrize("ticket", ["refund"])
        def test_bot(ticket, prove_seed):
            rng = random.Random(prove_seed)
            return prove.Episode("unresolved" if rng.random() < 0.2 else "resolved",
                                 meta={"case_id": ticket})
    """)


    def test_two_in_process_sessions(pytester):
        pytester.makeini("[pytest]\\nprove_allow_underpowered = true\\n")
        pytester.makepyfile(test_bot=BOT)
        first = pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=b")
        assert first.ret == 0, first.stdout.str()
        second = pytester.runpytest("-p", "no:randomly", "--prove-baseline=b")
        assert second.ret == 0, second.stdout.str()
        second.stdout.fnmatch_lines(["*nothing changed significantly*"])
        assert "INTERNALERROR" not in second.stdout.str()
    '''
)


@pytest.mark.slow  # a subprocess session each (see the comment at the call)
@pytest.mark.parametrize("load_pytester", ["conftest", "option"])
def test_a_project_runs_two_in_process_sessions_with_pytester(pytester: pytest.Pytester,
                                                              load_pytester: str) -> None:
    """A plugin's own test suite runs rollouts in process with pytester, twice, the second
    comparing with the first: the second stopped with an INTERNALERROR (numpy imported
    inside the first run was dropped, and numpy cannot be imported twice)."""
    pytester.makepyfile(test_inproc=IN_PROCESS)
    if load_pytester == "conftest":
        pytester.makeconftest('pytest_plugins = ["pytester"]\n')
        args: list[str] = []
    else:
        args = ["-p", "pytester"]
    # A fresh process: this suite's own conftest imports the engine up front.
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=1)
