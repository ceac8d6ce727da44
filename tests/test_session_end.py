"""The end of a sweep's session: what is alive is frozen out of the collector's way (heap.py).

No timing here (bench/sweep.py, figure 3, measures it): these tests check that every process of
a sweep's session is frozen through pytest's last collections and the interpreter's exit, that
an in-process session leaves its interpreter unfrozen, that sessions without a rollout are left
alone, and that pytest still reports what the last test's garbage raised as it was finalized.
"""

from __future__ import annotations

import gc
import textwrap

import pytest

#: Each process of the inner session writes how many objects were frozen during pytest's
#: unconfigure, and, on a worker (a process of its own), as the interpreter exits.
#:
#: xdist's controller tears its workers down as soon as each has said it finished, which is
#: before the worker's pytest is done (its terminal summary and unconfigure come after), and
#: execnet interrupts a worker still busy 5 s later: on a loaded machine that was before the
#: worker's unconfigure, and no record of it was written.  So each worker holds a lock from
#: its configure to its last cleanup, and the controller takes every worker's lock before
#: its teardown: it waits for what the test looks at, not for a time (a worker that dies
#: releases its lock too, and the check below fails instead of hanging).
RECORD_FROZEN = textwrap.dedent(
    """
    import atexit, fcntl, gc, glob, os

    import pytest

    HERE = os.path.dirname(os.path.abspath(__file__))  # a worker's exit may be elsewhere

    def _write(when):
        with open(os.path.join(HERE, f"frozen-{when}-{os.getpid()}.txt"), "w") as fh:
            fh.write(str(gc.get_freeze_count()))

    if os.environ.get("PYTEST_XDIST_WORKER"):
        # Registered before the plugin's own exit handler, so it runs after it.
        atexit.register(_write, "exit")

    def pytest_configure(config):
        if hasattr(config, "workerinput"):
            busy = open(os.path.join(HERE, f"busy-{config.workerinput['workerid']}.lock"), "w")
            fcntl.flock(busy, fcntl.LOCK_EX)
            # This conftest's configure runs before the plugins', so this cleanup runs last.
            config.add_cleanup(busy.close)  # closing the file releases the lock

    @pytest.hookimpl(tryfirst=True)  # before xdist's own, which tears the workers down
    def pytest_sessionfinish(session):
        if hasattr(session.config, "workerinput"):
            return
        for path in glob.glob(os.path.join(HERE, "busy-*.lock")):
            with open(path) as busy:
                fcntl.flock(busy, fcntl.LOCK_EX)

    def pytest_unconfigure(config):
        role = "worker" if hasattr(config, "workerinput") else "controller"
        _write(f"unconfigure-{role}")
    """
)

PLAIN = "def test_plain():\n    assert True\n"


def _frozen(pytester: pytest.Pytester, when: str) -> list[int]:
    return [int(p.read_text()) for p in sorted(pytester.path.glob(f"frozen-{when}-*.txt"))]


@pytest.mark.parametrize("dist", [pytest.param(["-n", "2"], marks=pytest.mark.slow),
                                  ["-p", "no:xdist"]])
def test_a_sweep_is_frozen_from_its_end_to_its_exit(bot: pytest.Pytester,
                                                    dist: list[str]) -> None:
    bot.makeconftest(RECORD_FROZEN)
    assert gc.get_freeze_count() == 0
    result = bot.runpytest(*dist, "--prove-replicates", "10")
    result.assert_outcomes(passed=20)
    assert all(n > 0 for n in _frozen(bot, "unconfigure-controller"))
    assert len(_frozen(bot, "unconfigure-controller")) == 1
    if "-n" in dist:
        assert len(_frozen(bot, "unconfigure-worker")) == 2
        assert all(n > 0 for n in _frozen(bot, "unconfigure-worker"))
        assert len(_frozen(bot, "exit")) == 2
        assert all(n > 0 for n in _frozen(bot, "exit"))
    # This session ran in this process (pytester): what it froze is unfrozen again.
    assert gc.get_freeze_count() == 0


# Under xdist one worker is enough here (-n 1: the controller and a worker, each of which
# must leave the heap alone; the freeze of several workers is the sweep's test above).
@pytest.mark.parametrize("dist", [["-n", "1"], ["-p", "no:xdist"]])
def test_a_session_without_rollouts_is_left_alone(pytester: pytest.Pytester,
                                                  dist: list[str]) -> None:
    pytester.makeconftest(RECORD_FROZEN)
    pytester.makepyfile(test_plain=PLAIN)
    result = pytester.runpytest(*dist)
    result.assert_outcomes(passed=1)
    assert _frozen(pytester, "unconfigure-controller") == [0]
    assert _frozen(pytester, "unconfigure-worker") == ([0] if "-n" in dist else [])
    # (No check at the workers' exit here: one that takes xdist's ten seconds to exit, on
    # a loaded machine, is killed before its exit handlers run.)
    assert all(n == 0 for n in _frozen(pytester, "exit"))


#: The last test leaves a cycle whose finalizer raises; the collector is off, so only the
#: session's end finds it.
LOUD_GARBAGE = textwrap.dedent(
    """
    import gc

    class Loud:
        def __del__(self):
            raise RuntimeError("finalized at the session's end")

    def test_zz_leaves_garbage():
        gc.disable()
        loud = Loud()
        loud.me = loud
    """
)


@pytest.mark.slow
def test_the_last_tests_garbage_is_still_finalized_and_reported(
        bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # In a subprocess: pytest reports it as a warning after the session, when this suite's
    # filterwarnings=error would turn it into an error of the outer session.
    bot.makepyfile(test_zz_loud=LOUD_GARBAGE)
    monkeypatch.setenv("BOT_REPLICATES", "10")
    result = bot.runpytest_subprocess("-p", "no:xdist", "-p", "no:randomly")
    result.assert_outcomes(passed=21)
    assert "finalized at the session's end" in result.stdout.str() + result.stderr.str()
