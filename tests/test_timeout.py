"""--prove-episode-timeout (issue 12): an episode still running after S seconds is stored
with no outcome as episode_timeout, its item fails as a timeout does, and the sweep goes on;
sync alone and in blocks, async, one process and -n 2."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_prove.running import deadline
from pytest_prove.running.endings import EpisodeTimeout
from pytest_prove.store import Store

from .conftest import load

SLEEPER = textwrap.dedent(
    """
    import asyncio
    import os
    import time

    import pytest
    import pytest_prove as prove
    from conftest import SESSION_OVER

    ASYNC = os.environ.get("ASYNC") == "1"
    BUSY = os.environ.get("BUSY") == "1"
    TIMEOUT = float(os.environ.get("DECORATOR_TIMEOUT", "0")) or None


    def sleeps(replicate):
        return replicate % 5 == 0  # two of the ten, whatever the run's salt


    if ASYNC:
        @prove.rollout(replicates=10, failures=["unresolved"], successes=["resolved"],
                       outcomes=["resolved", "unresolved", "escalated"], timeout=TIMEOUT)
        async def test_sleepy(prove_replicate):
            with prove.step("start"):
                pass
            if sleeps(prove_replicate):
                await asyncio.sleep(600)
            return prove.Episode("resolved")
    else:
        @prove.rollout(replicates=10, failures=["unresolved"], successes=["resolved"],
                       outcomes=["resolved", "unresolved", "escalated"], timeout=TIMEOUT)
        def test_sleepy(prove_replicate):
            with prove.step("start"):
                pass
            if sleeps(prove_replicate):
                # One spinner (replicate 0; the other sleeper blocks in C): a spinner costs a
                # core until its deadline, so a second showed nothing more for its CPU.
                if BUSY and prove_replicate == 0:
                    while True:  # pure Python: stopped at the next bytecode
                        pass
                # In C: left running in its thread, until the session ends (or 600 s).
                SESSION_OVER.wait(600)
            return prove.Episode("resolved")
    """
)


#: Set as the session ends: a sync sleeper blocked in C waits on it, so that it is left
#: running in its thread for as long as the session lasts, and not in this process after.
RELEASE_AT_END = textwrap.dedent(
    """
    import threading

    SESSION_OVER = threading.Event()


    def pytest_unconfigure(config):
        SESSION_OVER.set()
    """
)


#: The sleepy project's ini: the design check relaxed for a sweep of ten.
SLEEPY_INI = "[pytest]\nprove_allow_underpowered = true\n"

#: The episode timeout of the sleepy sessions, in seconds.  Short, and safe on a loaded
#: machine: what it stops blocks on an Event that is set only at the session's end (or
#: spins, or sleeps 600 s), so it cannot end in time; what it must not stop does no work (a
#: step and a return: tens of microseconds, read from their records) in a thread woken by a
#: lock, so only the scheduler could keep it past the deadline, and at a load of 10 on two
#: cores a runnable thread waits tens of milliseconds at most (the GIL is handed over every
#: 5 ms, a spinner's too).  Each sync sleeper blocked in C costs it plus GRACE (0.25 s).
TIMEOUT = 0.25


@pytest.fixture
def sleepy(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(SLEEPY_INI)
    pytester.makeconftest(RELEASE_AT_END)
    pytester.makepyfile(test_sleepy=SLEEPER)
    return pytester


def _check(root: Path, result: pytest.RunResult, took: float, after: float = TIMEOUT,
           rollout: str | None = None) -> None:
    """What every session of the sleepy project in ``root`` must show, its timeout ``after``
    seconds (of its rollout ``rollout`` only, if given: a session of several modes)."""
    # Not a speed check: a sleeper sleeps 600 s (a sync one blocked in C until the session's
    # end, at most 600 s), so a session that waited for any of them
    # (instead of storing it as timed out and going on) takes at least that long. The bound
    # is far from both, so a loaded machine cannot fail it.
    assert took < 300, took
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = Store(root / ".prove").load("latest")
    assert run.manifest["status"] == "complete"
    episodes = [r for r in run.episodes if rollout is None or r["rollout"] == rollout]
    assert len(episodes) == 10
    timed = [r for r in episodes if (r["error"] or {}).get("kind") == "episode_timeout"]
    # Decided by the replicate, not the seed: with a random salt, a run whose seeds held no
    # sleeper had none, and passed.
    sleeping = [r for r in episodes if r["replicate"] % 5 == 0]
    assert sorted(r["replicate"] for r in timed) == sorted(r["replicate"] for r in sleeping)
    assert timed, "some replicate should have slept"
    for record in timed:
        assert record["outcome"] is None and record["duration"] >= 0.9 * after
        assert [s["name"] for s in record["steps"]] == ["start"]
    assert all(r["outcome"] == "resolved" for r in episodes if r not in timed)
    text = result.stdout.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert f"{len(timed)} failed" in text or "failed" in text
    result.stdout.fnmatch_lines([f"*Timeout: *still running after {after} s "
                                 "(--prove-episode-timeout)*"])


class _Beside:
    """A session of a sleepy project of its own (in ``root``), started at once in a
    subprocess, so that its timeouts run out while this process runs another session: each
    session waits a second or more on its timers, and several wait them out together.  (Two
    sessions cannot run at once in one process.)  A sync sleeper blocked in C is left running
    in its thread until that session ends (RELEASE_AT_END), and the process ends with it."""

    def __init__(self, root: Path, env: Mapping[str, str], *args: str,
                 ini: str = SLEEPY_INI, files: Mapping[str, str] | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        (root / "tox.ini").write_text(ini)
        (root / "conftest.py").write_text(RELEASE_AT_END)
        for name, text in (files or {"test_sleepy.py": SLEEPER}).items():
            (root / name).write_text(text)
        environ = {**os.environ, **env}
        # As pytester's subprocesses: the project's directory first on the path.
        environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root),
                                                              environ.get("PYTHONPATH")]))
        self.root, self.start = root, time.monotonic()
        with (root / "stdout.txt").open("wb") as out, (root / "stderr.txt").open("wb") as err:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "pytest", f"--basetemp={root / 'basetemp'}",
                 "-p", "no:cacheprovider", *args],
                cwd=root, env=environ, stdin=subprocess.DEVNULL, stdout=out, stderr=err)

    def result(self) -> tuple[pytest.RunResult, float]:
        """The session's result once it has ended (killed after 300 s, which _check fails),
        and the seconds it took."""
        try:
            ret = self.popen.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            ret = self.popen.wait()
        took = time.monotonic() - self.start
        out, err = ((self.root / name).read_text(errors="replace").splitlines()
                    for name in ("stdout.txt", "stderr.txt"))
        return pytest.RunResult(ret, out, err, took), took


def _env(mode: str, decorator_timeout: str = "0") -> dict[str, str]:
    return {"ASYNC": "1" if mode == "async" else "0", "BUSY": "1" if mode == "busy" else "0",
            "DECORATOR_TIMEOUT": decorator_timeout}


@contextmanager
def _scenario(name: str) -> Iterator[None]:
    """Name the scenario whose check failed (several are checked in one test)."""
    try:
        yield
    except AssertionError as failed:
        failed.add_note(f"(scenario {name})")
        raise


#: The modes of the sleeper, each a test file of its own (its mode written in, not read from
#: the environment), and the ways a session runs them: each session runs the three modes'
#: rollouts, one after another (they were nine sessions, a mode and a way each, eight of
#: them a subprocess's start-up of their own: 3.5 s of CPU).
MODES = ("sync", "async", "busy")
HOWS = {"one-process": [], "xdist": ["-n", "2"], "blocks-of-5": ["--prove-concurrency=5"]}


def _sleeper(mode: str) -> str:
    """SLEEPER in ``mode``."""
    return (SLEEPER.replace('os.environ.get("ASYNC") == "1"', str(mode == "async"))
            .replace('os.environ.get("BUSY") == "1"', str(mode == "busy")))


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_sleeping_replicates_time_out_and_the_sweep_goes_on(
        pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every mode in every way (MODES, HOWS) at once: the xdist session in this process,
    the others in subprocesses (_Beside) while it runs, each waiting out its timers (two
    of TIMEOUT a rollout, or fewer at once); each rollout of each session checked on that
    session's output and store."""
    files = {f"test_{mode}.py": _sleeper(mode) for mode in MODES}
    beside = {how: _Beside(tmp_path_factory.mktemp(how), _env("sync"),
                           f"--prove-episode-timeout={TIMEOUT}", *args, files=files)
              for how, args in HOWS.items() if how != "xdist"}
    pytester.makeini(SLEEPY_INI)
    pytester.makeconftest(RELEASE_AT_END)
    pytester.makepyfile(**{name.removesuffix(".py"): text for name, text in files.items()})
    start = time.monotonic()
    # In process: a sync sleeper blocked in C, left running in its thread, ends with the
    # session (it waits for the session's end, RELEASE_AT_END), not 600 s later in this one.
    result = pytester.runpytest("-p", "no:cacheprovider",
                                f"--prove-episode-timeout={TIMEOUT}", *HOWS["xdist"])
    took = time.monotonic() - start
    ended = {how: session.result() for how, session in beside.items()}
    ended["xdist"] = (result, took)
    for how, (result, took) in ended.items():
        root = pytester.path if how == "xdist" else beside[how].root
        for mode in MODES:
            with _scenario(f"{mode}-{how}"):
                _check(root, result, took, rollout=f"test_{mode}.py::test_sleepy")


def test_timeout_from_the_decorator_and_the_ini(sleepy: pytest.Pytester,
                                                monkeypatch: pytest.MonkeyPatch,
                                                tmp_path_factory: pytest.TempPathFactory
                                                ) -> None:
    """Which timeout applies: the decorator's alone, the ini's alone, and the command line's
    over the decorator's and the ini's.  Sync sleepers blocked in C, which cost no CPU while
    they wait (a busy one spins a core until its deadline: 4 s of CPU here), left running
    until the session's end; one block of ten, so the sleepers time out together.  The
    command line's session in a subprocess (_Beside) while the other two run in this process,
    one after the other (a subprocess each would cost more CPU than the second they save)."""
    # The command line beats both: TIMEOUT where the decorator and the ini say 2 s.
    command_line = _Beside(tmp_path_factory.mktemp("command-line"),
                           _env("sync", decorator_timeout="2"),
                           f"--prove-episode-timeout={TIMEOUT}",
                           "--prove-concurrency=10",
                           ini=SLEEPY_INI + "prove_episode_timeout = 2\n")
    monkeypatch.setenv("DECORATOR_TIMEOUT", str(TIMEOUT))
    start = time.monotonic()
    result = sleepy.runpytest("-p", "no:cacheprovider", "--prove-concurrency=10")
    with _scenario("the decorator's"):
        _check(sleepy.path, result, time.monotonic() - start)
    monkeypatch.delenv("DECORATOR_TIMEOUT")
    sleepy.makeini(SLEEPY_INI + f"prove_episode_timeout = {TIMEOUT}\n")
    start = time.monotonic()
    result = sleepy.runpytest("-p", "no:cacheprovider", "--prove-concurrency=10")
    with _scenario("the ini's"):
        _check(sleepy.path, result, time.monotonic() - start)
    result, took = command_line.result()
    with _scenario("the command line's"):
        result.stdout.fnmatch_lines([f"*still running after {TIMEOUT} s*"])
        result.stdout.no_fnmatch_line("*still running after 2 s*")
        _check(command_line.root, result, took)


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])  # 0: no timeout, on purpose
def test_a_bad_timeout_is_refused_at_the_door(sleepy: pytest.Pytester, value: str) -> None:
    result = sleepy.runpytest("-p", "no:cacheprovider", f"--prove-episode-timeout={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--prove-episode-timeout*expected a number of seconds "
                                 f"above 0, or 0 (none, off) for no timeout, got '{value}'*"])
    sleepy.makeini(f"[pytest]\nprove_episode_timeout = {value}\n")
    result = sleepy.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option prove_episode_timeout: expected a number*"])


HOSTILE = textwrap.dedent(
    """
    import asyncio
    import logging
    import os
    import time

    import pytest
    import pytest_prove as prove

    MODE = os.environ["MODE"]
    N = int(os.environ.get("N", "20"))
    log = logging.getLogger("agent")


    @prove.rollout(replicates=N, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    def test_hostile(prove_replicate):
        if MODE == "log":  # logging takes a lock inside the standard library
            while True:
                log.warning("thinking %s", prove_replicate)
                logging.getLogger(f"agent.{prove_replicate % 7}")
        if MODE == "swallow":  # catches the timeout and answers late
            try:
                while True:
                    pass
            except BaseException:
                return prove.Episode("resolved")
        return prove.Episode("resolved")
    """
)


def _hostile(pytester: pytest.Pytester, mode: str, n: int, *args: str,
             subprocess: bool = True) -> pytest.RunResult:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_hostile=HOSTILE)
    import os

    os.environ["MODE"], os.environ["N"] = mode, str(n)
    try:
        if not subprocess:
            return pytester.runpytest("-p", "no:cacheprovider", *args)
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=240)
    finally:
        del os.environ["MODE"], os.environ["N"]


def _kinds(pytester: pytest.Pytester) -> list[str]:
    return [(r["error"] or {}).get("kind", "outcome") for r in load(pytester).episodes]


def _log_then_spin(handler: logging.Handler, inside: threading.Event,
                   stopped: list[BaseException]) -> None:
    """A rollout's thread: it logs through ``handler`` (which holds logging's lock until
    released), then spins in this file's code, as a rollout does, until stopped."""
    log = logging.getLogger("prove-test-deadline")
    log.propagate = False
    log.addHandler(handler)
    try:
        log.warning("thinking")
        inside.set()
        while True:
            pass
    except EpisodeTimeout as stop:
        stopped.append(stop)
    finally:
        log.removeHandler(handler)


class _HeldHandler(logging.Handler):
    """A handler whose emit waits, logging's handler lock held, until it is released."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.go_on = threading.Event(), threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.entered.set()
        self.go_on.wait()


def test_the_timeout_waits_until_the_rollout_leaves_library_code() -> None:
    """The timeout is raised only into the rollout's own frames: raised inside logging, it
    left logging's lock held and the session hung for good. Here the thread is held inside
    logging (its handler's lock taken) for as long as the test likes, so the rule is checked
    every time rather than by the chance of a timer landing there."""
    stopped: list[BaseException] = []
    handler, inside = _HeldHandler(), threading.Event()
    thread = threading.Thread(target=_log_then_spin, args=(handler, inside, stopped),
                              daemon=True)
    thread.start()
    assert handler.entered.wait(60)
    assert not deadline._in_user_code(thread)
    # However long the deadline polls, it sends nothing into a thread inside logging.
    assert deadline._stop_late([thread], time.monotonic() + 0.2) == set()
    assert thread.is_alive() and handler.lock is not None
    handler.go_on.set()
    assert inside.wait(60)
    assert deadline._stop_late([thread], time.monotonic() + 60) == {thread}
    thread.join(60)
    assert not thread.is_alive()
    assert [type(stop) for stop in stopped] == [EpisodeTimeout]
    # The handler's lock was released on the way out: nothing is left held.
    assert handler.lock.acquire(timeout=60)
    handler.lock.release()


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py), in a subprocess
def test_a_rollout_stopped_while_logging_leaves_no_lock_held(pytester: pytest.Pytester) -> None:
    """End to end, the rule above: every replicate stopped while it logs is stored as timed
    out, and the session ends. (A timeout raised anywhere hung the session only now and then:
    the test above holds the thread inside logging instead of hoping to land there.)"""
    # A subprocess: should the lock be left held again, the session hangs, and only a process
    # of its own can be ended (timeout=240) without hanging this one.
    # One block of 30: the 30 threads log at once and are stopped within one deadline and
    # grace (30 raises, as 30 blocks of one made, and more threads inside logging's locks at
    # each), and no replicate left running spins beside the later ones (30 blocks of one
    # took 10 s of CPU quiet, 55 s loaded).
    result = _hostile(pytester, "log", 30, "--prove-episode-timeout=0.02",
                      "--prove-concurrency=30")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _kinds(pytester) == ["episode_timeout"] * 30


def test_a_rollout_that_catches_the_timeout_is_still_timed_out(pytester: pytest.Pytester) -> None:
    # TIMEOUT, not 0.5 s: the three spin until it, each catching it (a core spun meanwhile).
    result = _hostile(pytester, "swallow", 3, f"--prove-episode-timeout={TIMEOUT}",
                      "--prove-concurrency=3", subprocess=False)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert _kinds(pytester) == ["episode_timeout"] * 3


def test_a_huge_timeout_is_no_timeout_in_effect(pytester: pytest.Pytester) -> None:
    """Above threading.TIMEOUT_MAX, join() raised OverflowError and every item crashed."""
    result = _hostile(pytester, "quick", 4, "--prove-episode-timeout=1e10", subprocess=False)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert _kinds(pytester) == ["outcome"] * 4


#: A project whose conftest stands for another plugin with a SIGALRM timeout (pytest-timeout's
#: signal method does this): its handler is set around each item's call and fails the test.
#: The replicate arms the alarm itself, once it runs, so that it lands while the replicate
#: runs and the thread that waits for it waits, whatever the load (an alarm armed before the
#: call had to outlast the item's start, so it was a whole second); the replicate then blocks
#: on an Event set only at the session's end, so it cannot end before the alarm either.
ALARMED_CONFTEST = textwrap.dedent(
    """
    import signal
    import threading

    import pytest

    SESSION_OVER = threading.Event()


    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(item):
        def alarm(signum, frame):
            pytest.fail("Timeout (another plugin)")
        previous = signal.signal(signal.SIGALRM, alarm)
        try:
            return (yield)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


    def pytest_unconfigure(config):
        SESSION_OVER.set()
    """
)

ALARMED = textwrap.dedent(
    """
    import signal

    import pytest_prove as prove
    from conftest import SESSION_OVER


    @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    def test_alarmed(prove_replicate):
        signal.setitimer(signal.ITIMER_REAL, 0.05)  # delivered to the main thread
        SESSION_OVER.wait(600)
        return prove.Episode("resolved")
    """
)


def test_another_plugins_timeout_keeps_every_episode(pytester: pytest.Pytester) -> None:
    """A SIGALRM timeout of another plugin (ALARMED_CONFTEST) lands in the thread that
    waits: the replicates it stops are stored as it ended them."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makeconftest(ALARMED_CONFTEST)
    pytester.makepyfile(test_alarmed=ALARMED)
    # In process: the handler runs in the main thread, which runs this session (as
    # test_plugins.py's pytest-timeout sessions); each replicate stopped is left blocked in
    # its thread until the session's end (SESSION_OVER).  The episode timeout (5 s) puts
    # the replicate in a thread of its own with this one waiting; it is never reached.
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-episode-timeout=5")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    assert [(r["error"] or {}).get("type") for r in run.episodes] == ["Failed", "Failed"]


def _block(call: object, replicates: int = 1, timeout: float = 60) -> list[object]:
    from pytest_prove.declare.spec import Declaration
    from pytest_prove.running.endings import Identity

    idents = [Identity(rollout="r", condition={}, condition_key="", replicate=n, seed=n)
              for n in range(replicates)]
    return list(deadline.run_with_deadline(
        idents, Declaration(failures=("bad",), successes=("good",)), call,  # type: ignore[arg-type]
        lambda ident: "t.py::test", False, None, (KeyboardInterrupt,), timeout, None))


def test_replicates_under_the_deadline_run_on_kept_threads() -> None:
    """A replicate under the episode timeout runs on a kept thread (starting a thread for
    each cost more than a trivial episode), one a replicate at once; a thread that was sent
    the timeout is not used again, so that an exception raised into it late cannot reach the
    next replicate."""
    import pytest_prove as prove

    seen: list[threading.Thread] = []

    def call(ident: object) -> object:
        seen.append(threading.current_thread())
        return prove.Episode("good")

    for _ in range(3):
        _block(call)
    assert len(set(seen)) == 1 and seen[0] is not threading.current_thread()
    _block(call, replicates=3)
    assert len(set(seen[3:])) == 3  # one thread a replicate of a block, the kept one among them
    assert seen[0] in seen[3:]

    def spins(ident: object) -> object:
        seen.append(threading.current_thread())
        while True:
            time.sleep(0.001)

    late = _block(spins, timeout=0.05)
    assert late[0].record["error"]["kind"] == "episode_timeout"  # type: ignore[attr-defined]
    spun = seen[-1]
    after = _block(call)
    assert seen[-1] is not spun
    assert after[0].record["outcome"] == "good"  # type: ignore[attr-defined]


def test_a_kept_thread_carries_no_context_from_one_replicate_to_the_next() -> None:
    """A replicate on a kept thread runs in a copy of its caller's context: what one set in
    a context variable (the episode's log, an OpenTelemetry span, a user's own) is not seen
    by the next replicate that thread runs, and the caller's value is."""
    import contextvars

    import pytest_prove as prove
    from pytest_prove.running.recording import current_log

    mark: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")
    seen: list[tuple[threading.Thread, str, object]] = []

    def call(ident: object) -> object:
        seen.append((threading.current_thread(), mark.get(), current_log()))
        mark.set(f"left by replicate {ident.replicate}")  # type: ignore[attr-defined]
        return prove.Episode("good")

    token = mark.set("the caller's")
    try:
        for _ in range(3):
            _block(call)
    finally:
        mark.reset(token)
    assert len({thread for thread, _, _ in seen}) == 1  # one kept thread ran all three
    assert [value for _, value, _ in seen] == ["the caller's"] * 3
    logs = [log for _, _, log in seen]
    assert all(log is not None for log in logs) and len({id(log) for log in logs}) == 3
