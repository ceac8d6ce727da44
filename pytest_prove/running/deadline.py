"""The episode timeout (``--prove-episode-timeout``): a block run against a deadline.

With a timeout, the block runs in daemon threads while the calling thread waits until the
deadline: an ``async def`` rollout's tasks are each given ``asyncio.timeout``; a sync
replicate still running is sent :class:`~.endings.EpisodeTimeout` (raised in its thread at
its next Python bytecode) and given a short grace to unwind.  A replicate that is still
running then (blocked in C code, or a loop that never yields) is left to run on in its
daemon thread, and its episode is stored from what it recorded so far; the caller goes on
at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import copy_context
from pathlib import Path
from typing import Any

from ..declare.capture import CaptureConfig
from ..declare.chaos import ChaosConfig
from ..declare.spec import Declaration
from .endings import (
    EpisodeTimeout,
    Identity,
    ReplicateResult,
    Stopped,
    interrupted_result,
    new_log,
    timeout_result,
)
from .replicates import run_async, run_one

__all__ = ["GRACE", "LEFT_RUNNING", "NEVER_STARTED", "run_with_deadline"]

#: Seconds a timed-out replicate is given to unwind before it is left running.
GRACE = 0.25
#: Why a replicate's timeout record says more than "still running".
LEFT_RUNNING = ("; it did not stop within the grace and was left running in its thread "
                "(blocked in C code, in library code, or catching the timeout)")
NEVER_STARTED = "; it never started: a sibling blocked the event loop"


def _in_user_code(thread: threading.Thread) -> bool:
    """Whether ``thread`` is running a frame outside the standard library and installed
    packages: the only place an exception may be raised into it without leaving a lock of
    theirs held (logging's, for one, is taken and released around a ``try``)."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return False
    name = frame.f_code.co_filename
    return not name.startswith(_LIBRARY_PATHS) and not name.startswith("<frozen")


_LIBRARY_PATHS = tuple(sorted({path for key in ("stdlib", "platstdlib", "purelib", "platlib")
                               if (path := sysconfig.get_paths().get(key))}
                              | {str(Path(__file__).resolve().parent.parent)}))


def _raise_in(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    """Have ``thread`` raise ``exc_type`` when it next runs Python bytecode (CPython's
    PyThreadState_SetAsyncExc; a thread blocked in C code sees it only once it returns)."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(exc_type))


def _join(threads: Sequence[threading.Thread], until: float) -> None:
    for thread in threads:
        thread.join(min(max(0.0, until - time.monotonic()), threading.TIMEOUT_MAX))


def _stop_late(late: Sequence[threading.Thread], until: float,
               running: Callable[[threading.Thread], bool] | None = None,
               ) -> set[threading.Thread]:
    """Raise EpisodeTimeout into each late thread once it runs user code, polling until
    ``until``; return the threads it was raised into.  ``running(thread)``: whether the
    thread still runs its replicate (default: whether it is alive)."""
    still = running or threading.Thread.is_alive
    sent: set[threading.Thread] = set()
    while time.monotonic() < until:
        waiting = [thread for thread in late if still(thread) and thread not in sent]
        if not waiting:
            break
        for thread in waiting:
            if _in_user_code(thread):
                _raise_in(thread, EpisodeTimeout)
                sent.add(thread)
        time.sleep(0.005)
    if running is None:
        _join(late, until)
    return sent


class _Runner:
    """A kept daemon thread that runs a sync replicate against the deadline: one is made
    when none is idle, and one whose replicate ended in time, sent nothing, goes back to
    wait for the next (a thread started for every replicate cost more than a trivial
    rollout's whole episode).  One that was sent the timeout, or still runs its replicate
    when the caller goes on, ends after it: an exception raised into it late must not
    reach the next replicate."""

    __slots__ = ("done", "ended", "ready", "retired", "task", "thread")

    def __init__(self) -> None:
        self.ready = threading.Lock()  # released: a task (or None: end) was given
        self.ready.acquire()
        self.done = threading.Lock()  # released: the task given ended
        self.done.acquire()
        self.task: Callable[[], object] | None = None
        self.ended = False  # the caller saw the task end
        self.retired = False
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name="prove-replicate")
        self.thread.start()

    def give(self, task: Callable[[], object] | None) -> None:
        self.task = task
        self.ended = False
        self.ready.release()

    def wait(self, until: float) -> bool:
        """Wait for the task to end, no later than ``until``; whether it ended."""
        if not self.ended:
            self.ended = self.done.acquire(
                timeout=min(max(0.0, until - time.monotonic()), threading.TIMEOUT_MAX))
        return self.ended

    def _loop(self) -> None:
        released = True
        try:
            while True:
                self.ready.acquire()
                task, self.task = self.task, None
                if task is None:
                    return
                released = False
                try:
                    task()
                finally:
                    task = None
                    self.done.release()
                    released = True
                if self.retired:
                    return
        except BaseException:  # noqa: BLE001 - a timeout raised into it as it left: it ends
            if not released:
                with contextlib.suppress(RuntimeError):
                    self.done.release()


#: Runners waiting for a replicate (a fork's child has none of its parent's threads).
_IDLE: list[_Runner] = []
os.register_at_fork(after_in_child=_IDLE.clear)


#: Above 0 while every replicate must start on a new thread (--prove-aa, fresh_threads).
_fresh = 0


@contextlib.contextmanager
def fresh_threads() -> Iterator[None]:
    """Within it, each replicate run against the deadline starts on a thread no replicate
    ran on, and that thread ends with it: --prove-aa's twins must meet the same thread, new,
    whatever a rollout keeps per thread (``threading.local``); kept threads gave a twin the
    thread its first, or another replicate, had used."""
    global _fresh
    _fresh += 1
    try:
        yield
    finally:
        _fresh -= 1


def _runner() -> _Runner:
    if _fresh:
        return _Runner()
    try:
        return _IDLE.pop()
    except IndexError:
        return _Runner()


def _release(runners: Sequence[_Runner], sent: set[threading.Thread]) -> None:
    """Runners whose replicate ended in time, sent nothing, wait for the next one; the
    others end after their replicate."""
    for runner in runners:
        if runner.ended and runner.thread not in sent and not _fresh:
            _IDLE.append(runner)
        else:
            runner.retired = True
            runner.give(None)  # taken once its replicate ended, if it is still running


def run_with_deadline(identities: Sequence[Identity], declaration: Declaration,
                      call: Callable[[Identity], Any], where: Callable[[Identity], str],
                      is_async: bool, capture: CaptureConfig | None,
                      stops: tuple[type[BaseException], ...],
                      timeout: float, chaos: ChaosConfig | None) -> list[ReplicateResult]:
    """Run the block in daemon threads and wait no longer than ``timeout`` plus GRACE."""
    if not is_async and len(identities) == 1:
        return [_one_with_deadline(identities[0], declaration, call, where, capture, stops,
                                   timeout, chaos)]
    logs = [new_log(ident, capture, chaos) for ident in identities]
    results: dict[int, ReplicateResult] = {}
    started: set[int] = set()
    failures: list[BaseException] = []  # stops, and errors of the running package's own

    def replicate(index: int) -> None:
        started.add(index)
        try:
            results[index] = run_one(identities[index], declaration, call, where, capture,
                                     stops, logs[index], timeout)
        except EpisodeTimeout:
            # Raised after the rollout returned, on the way out: it did end in time.
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            failures.append(exc)

    def block() -> None:
        import asyncio

        try:
            asyncio.run(run_async(identities, declaration, call, where, capture, stops,
                                  timeout, logs, results, started))
        except Stopped as stop:
            failures.append(stop.cause)
        except BaseException as exc:  # noqa: BLE001 - as in replicate()
            failures.append(exc)

    runners: list[_Runner] = []
    if is_async:
        threads = [threading.Thread(target=copy_context().run, args=(block,), daemon=True,
                                    name="prove-replicates")]
        owner = dict.fromkeys(range(len(identities)), threads[0])
    else:
        runners = [_runner() for _ in identities]
        threads = [runner.thread for runner in runners]
        owner = dict(enumerate(threads))
        of_thread = dict(zip(threads, runners, strict=True))

        def running(thread: threading.Thread) -> bool:
            return not of_thread[thread].wait(0.0)

    interrupted: BaseException | None = None
    sent: set[threading.Thread] = set()
    try:
        if is_async:
            for thread in threads:
                thread.start()
            _join(threads, time.monotonic() + timeout)
            # Its tasks are stopped by their own asyncio.timeout.
            _join([thread for thread in threads if thread.is_alive()],
                  time.monotonic() + GRACE)
        else:
            for i, runner in enumerate(runners):
                runner.give(functools.partial(copy_context().run, replicate, i))
            until = time.monotonic() + timeout
            late = [runner.thread for runner in runners if not runner.wait(until)]
            if late:
                grace = time.monotonic() + GRACE
                sent = _stop_late(late, grace, running)
                for thread in late:
                    of_thread[thread].wait(grace)
    except KeyboardInterrupt as exc:
        _release(runners, sent)
        raise Stopped(exc, [results[i] for i in sorted(results)]) from None
    except BaseException as exc:  # noqa: BLE001 - e.g. pytest-timeout's signal in this thread
        interrupted = exc
    alive = ([thread.is_alive() for thread in threads] if is_async
             else [not runner.ended for runner in runners])
    _release(runners, sent)
    for error in failures:
        if not isinstance(error, stops):
            raise error  # run_one lets only the stops out: this is the plugin's own error
    if failures:
        raise Stopped(failures[0], [results[i] for i in sorted(results)])
    found = []
    for i, ident in enumerate(identities):
        result = results.get(i)
        if interrupted is not None and result is None:
            # Something stopped the waiting itself (a timeout of another plugin): the
            # replicates still running end with it, as they would had it reached them.
            result = interrupted_result(ident, logs[i], interrupted)
        elif result is None or (owner[i] in sent and result.record["error"] is None):
            # Still running, or it caught the timeout and returned late: either way it was
            # running at its deadline, which is what the timeout promises to record.
            note = ("" if result is not None or not alive[0 if is_async else i] else
                    NEVER_STARTED if i not in started else LEFT_RUNNING)
            result = timeout_result(ident, logs[i], timeout, note=note)
        found.append(result)
    return found


def _one_with_deadline(identity: Identity, declaration: Declaration,
                       call: Callable[[Identity], Any], where: Callable[[Identity], str],
                       capture: CaptureConfig | None, stops: tuple[type[BaseException], ...],
                       timeout: float, chaos: ChaosConfig | None) -> ReplicateResult:
    """A block of one sync replicate (an item of K 1, the most common), as
    :func:`run_with_deadline` runs a block, without a block's bookkeeping: it ran for each
    item of a sweep, and cost a rollout item more than pytest's own parametrize did."""
    log = new_log(identity, capture, chaos)
    ended: list[ReplicateResult | BaseException] = []  # its result, or a stop it raised
    started: list[bool] = []

    def replicate() -> None:
        started.append(True)
        try:
            ended.append(run_one(identity, declaration, call, where, capture, stops, log,
                                 timeout))
        except EpisodeTimeout:
            pass  # raised after the rollout returned, on the way out: it did end in time
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            ended.append(exc)

    runner = _runner()
    sent: set[threading.Thread] = set()
    interrupted: BaseException | None = None
    try:
        runner.give(functools.partial(copy_context().run, replicate))
        if not runner.wait(time.monotonic() + timeout):
            grace = time.monotonic() + GRACE
            sent = _stop_late([runner.thread], grace, lambda _: not runner.wait(0.0))
            runner.wait(grace)
    except KeyboardInterrupt as exc:
        _release((runner,), sent)
        raise Stopped(exc, [r for r in ended if isinstance(r, ReplicateResult)]) from None
    except BaseException as exc:  # noqa: BLE001 - e.g. pytest-timeout's signal in this thread
        interrupted = exc
    running = not runner.ended
    _release((runner,), sent)
    result = ended[0] if ended else None
    if isinstance(result, BaseException):
        if not isinstance(result, stops):
            raise result  # run_one lets only the stops out: this is the plugin's own error
        raise Stopped(result, [])
    if interrupted is not None and result is None:
        return interrupted_result(identity, log, interrupted)
    if result is None or (sent and result.record["error"] is None):
        # Still running, or it caught the timeout and returned late (see run_with_deadline).
        note = ("" if result is not None or not running else
                LEFT_RUNNING if started else NEVER_STARTED)
        return timeout_result(identity, log, timeout, note=note)
    return result
