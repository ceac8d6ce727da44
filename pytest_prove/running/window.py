"""A window of replicates kept in flight across items (``--prove-concurrency=K``).

Each replicate is a :class:`Ticket`.  The :class:`Window` starts queued tickets in order
while fewer than ``size`` run, and starts the next one each time one ends: sync ones on a
kept pool of daemon threads, ``async def`` ones as tasks on one kept event loop in a thread
of its own.  Nothing waits for a block's slowest replicate: the plugin queues the replicates
of the items ahead of the one pytest is on, and each item collects its own tickets when
pytest reaches it (see :mod:`pytest_prove.plugin.window`).

Every ticket ends once, as exactly one of: done (its result, or the stop it raised),
cancelled before it started, or cancelled while it ran (an async one, on Ctrl-C).  A sync
ticket past its timeout is sent :class:`~.endings.EpisodeTimeout` by a watchdog thread, as
:mod:`.deadline` does, and ends as timed out after the grace even if its thread runs on.
This module knows nothing of pytest.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from contextvars import Context, copy_context
from typing import Any, Final, final

from ..declare.capture import CaptureConfig
from ..declare.chaos import ChaosConfig
from ..declare.spec import Declaration
from .cache import active as cache_active
from .chaos import injecting
from .deadline import GRACE, LEFT_RUNNING, _in_user_code, _raise_in
from .endings import EpisodeTimeout, Identity, ReplicateResult, Stopped, new_log, timeout_result
from .recording import EpisodeLog
from .replicates import run_async, run_one

__all__ = ["BLOCKED_LOOP", "CANCELLED", "DONE", "QUEUED", "RUNNING", "Ticket", "Window"]

#: Why the record of an async replicate ended by the watchdog says more than "still running".
BLOCKED_LOOP = ("; its event loop was blocked (a sync call in async code) and it was left "
                "there; later replicates run on a new loop")

QUEUED: Final = 0
RUNNING: Final = 1
DONE: Final = 2
CANCELLED: Final = 3


@final
class Ticket:
    """One replicate for the window: what to call, and once it ended, how."""

    __slots__ = ("call", "capture", "chaos", "context", "deadline", "declaration",
                 "failure", "identity", "is_async", "log", "loop", "owner", "result",
                 "sent", "state", "task", "thread", "timeout", "where")

    def __init__(self, identity: Identity, declaration: Declaration,
                 call: Callable[[Identity], Any], where: Callable[[Identity], str], *,
                 is_async: bool, capture: CaptureConfig | None, chaos: ChaosConfig | None,
                 timeout: float | None, owner: object) -> None:
        self.identity = identity
        self.declaration = declaration
        self.call = call
        self.where = where
        self.is_async = is_async
        self.capture = capture
        self.chaos = chaos
        self.timeout = timeout
        self.owner = owner  # what the plugin groups tickets by (its item)
        self.log: EpisodeLog = new_log(identity, capture, chaos)
        self.context: Context = copy_context()  # the caller's, as a block's threads had
        self.state = QUEUED
        self.result: ReplicateResult | None = None
        self.failure: BaseException | None = None  # a stop (Ctrl-C, pytest.exit) it raised
        self.thread: threading.Thread | None = None
        self.task: Any = None
        self.loop: Any = None  # the event loop an async ticket was started on
        self.deadline: float | None = None
        self.sent = False  # EpisodeTimeout was raised into its thread


@final
class Window:
    """At most ``size`` tickets running at once, the next queued one started as one ends.

    ``blocked(ticket)`` is asked before a queued ticket starts (the token cap reached, its
    condition decided by a sequential look): a blocked ticket is cancelled, never started.
    """

    def __init__(self, stops: tuple[type[BaseException], ...],
                 blocked: Callable[[Ticket], bool] | None = None) -> None:
        self.size = 1
        self.stops = stops
        self.blocked = blocked
        self.lock = threading.Condition()
        self.queue: deque[Ticket] = deque()
        self.running: set[Ticket] = set()
        self.peak = 0  # the most tickets that ran at once
        self.started = 0
        self._idle: list[_Worker] = []
        self._workers: list[_Worker] = []
        self._loop: Any = None
        self._loop_thread: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        self._closed = False
        self._waited: set[Ticket] = set()  # the tickets the item pytest is on waits for
        # The cache of HTTP calls (--prove-cache) answers through the transports' wrappers:
        # on for as long as the window may run a replicate (chaos never runs in a window).
        self._wrapped = contextlib.ExitStack()
        self._wrapped.enter_context(injecting(cache_active()))

    # ---- queueing and starting

    def add(self, tickets: Iterable[Ticket], *, first: bool = False) -> None:
        """Queue ``tickets`` (at the front with ``first``: the item pytest is on) and start
        what the window has room for."""
        with self.lock:
            if first:
                ahead = list(tickets)
                moved = set(ahead)
                if any(t in moved for t in self.queue):  # queued ahead: moved to the front
                    self.queue = deque(t for t in self.queue if t not in moved)
                self.queue.extendleft(reversed(ahead))
            else:
                self.queue.extend(tickets)
            self._pump()

    def queued(self) -> int:
        """How many tickets wait to start (not those cancelled while queued)."""
        with self.lock:
            return sum(t.state == QUEUED for t in self.queue)

    def _pump(self) -> None:
        """Start queued tickets while fewer than ``size`` run (the lock is held)."""
        while len(self.running) < self.size and self.queue and not self._closed:
            ticket = self.queue.popleft()
            if ticket.state != QUEUED:
                continue
            if self.blocked is not None and self.blocked(ticket):
                ticket.state = CANCELLED
                self.lock.notify_all()
                continue
            ticket.state = RUNNING
            ticket.log.started = time.perf_counter()  # its duration counts from here
            self.running.add(ticket)
            self.started += 1
            self.peak = max(self.peak, len(self.running))
            if ticket.timeout is not None:
                ticket.deadline = time.monotonic() + ticket.timeout
                self._watch()
            if ticket.is_async:
                loop = ticket.loop = self._event_loop()
                if self._loop_thread is threading.current_thread():
                    loop.call_soon(self._start_task, ticket)  # a task ended: no wake-up needed
                else:
                    loop.call_soon_threadsafe(self._start_task, ticket)
            else:
                worker = self._idle.pop() if self._idle else self._new_worker()
                worker.give(ticket)

    def _end(self, ticket: Ticket, result: ReplicateResult | None,
             failure: BaseException | None, idle: _Worker | None = None) -> None:
        with self.lock:
            if idle is not None and not self._closed:
                self._idle.append(idle)  # before the pump, which may give it the next one
            if ticket.state != RUNNING:
                return  # already ended by the watchdog (timed out): its thread ran on
            ticket.result, ticket.failure, ticket.state = result, failure, DONE
            self.running.discard(ticket)
            self._pump()
            if ticket in self._waited or len(self.queue) < self.size:
                # Only what the waiting item needs: one of its own, or room to queue more
                # (waking it at every ending took the GIL from the replicates' threads).
                self.lock.notify_all()

    # ---- sync tickets: a kept pool of daemon threads

    def _new_worker(self) -> _Worker:
        worker = _Worker(self)
        self._workers.append(worker)
        return worker

    def _run_sync(self, ticket: Ticket, worker: _Worker) -> None:
        ticket.thread = threading.current_thread()
        result: ReplicateResult | None = None
        failure: BaseException | None = None
        ticket.log.started = time.perf_counter()
        try:
            result = ticket.context.run(run_one, ticket.identity, ticket.declaration,
                                        ticket.call, ticket.where, ticket.capture, self.stops,
                                        ticket.log, ticket.timeout, ticket.chaos)
        except EpisodeTimeout:
            pass  # raised on the way out, after the rollout returned: stored as timed out
        except BaseException as exc:  # noqa: BLE001 - a stop, or the plugin's own error
            failure = exc
        if failure is None and ticket.timeout is not None and (
                result is None or (ticket.sent and result.record["error"] is None)):
            # It caught the timeout and returned late: it was running at its deadline.
            result = timeout_result(ticket.identity, ticket.log, ticket.timeout)
        self._end(ticket, result, failure, idle=worker)

    def _watch(self) -> None:
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watching, daemon=True,
                                              name="prove-window-timeouts")
            self._watchdog.start()

    def _watching(self) -> None:
        """Send EpisodeTimeout to each sync ticket past its deadline (once its thread runs
        user code), and end it as timed out after the grace if it is still running.  An
        async ticket ends at its deadline by its own ``asyncio.timeout``; one still running
        after the grace means its loop is blocked (a sync call in async code): it is ended
        as timed out, and later tickets start on a new loop."""
        while not self._closed:
            now = time.monotonic()
            late: list[Ticket] = []
            with self.lock:
                timed = [t for t in self.running if t.deadline is not None]
            soonest = min((t.deadline for t in timed if t.deadline is not None),
                          default=now + 0.05)
            for ticket in timed:
                assert ticket.deadline is not None
                if now < ticket.deadline:
                    continue
                thread = ticket.thread
                if ticket.is_async:
                    if now >= ticket.deadline + GRACE:
                        late.append(ticket)
                    continue
                if not ticket.sent and thread is not None and _in_user_code(thread):
                    ticket.sent = True
                    _raise_in(thread, EpisodeTimeout)
                if now >= ticket.deadline + GRACE:
                    late.append(ticket)
            for ticket in late:
                assert ticket.timeout is not None
                thread = ticket.thread
                note = LEFT_RUNNING if thread is not None and thread.is_alive() else ""
                if ticket.is_async:
                    note = BLOCKED_LOOP
                    with self.lock:
                        if ticket.loop is self._loop:
                            self._loop = None  # the next async ticket starts on a new loop
                self._end(ticket, timeout_result(ticket.identity, ticket.log, ticket.timeout,
                                                 note=note), None)
            time.sleep(min(0.05, max(0.005, soonest - time.monotonic())))

    # ---- async tickets: one kept event loop

    def _event_loop(self) -> Any:
        if self._loop is None:
            import asyncio

            loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(target=loop.run_forever, daemon=True,
                                                 name="prove-window-loop")
            self._loop_thread.start()
            self._loop = loop
        return self._loop

    def _start_task(self, ticket: Ticket) -> None:
        if ticket.state != RUNNING:
            return
        ticket.task = ticket.loop.create_task(self._run_async(ticket), context=ticket.context)

    async def _run_async(self, ticket: Ticket) -> None:
        result: ReplicateResult | None = None
        failure: BaseException | None = None
        try:
            found = await run_async([ticket.identity], ticket.declaration, ticket.call,
                                    ticket.where, ticket.capture, self.stops, ticket.timeout,
                                    logs=[ticket.log], chaos=ticket.chaos)
            result = found[0]
        except Stopped as stop:
            failure = stop.cause
        except BaseException as exc:  # noqa: BLE001 - the plugin's own error
            failure = exc
        self._end(ticket, result, failure)

    # ---- collecting

    def wait(self, tickets: Sequence[Ticket], *, topup: Callable[[], None] | None = None,
             ) -> list[ReplicateResult]:
        """Wait until every ticket of ``tickets`` ended; their results in order.

        ``topup`` is called while waiting, each time a ticket ends, so that the caller can
        queue more (the items ahead).  A stop among them raises :class:`Stopped` with what
        the others finished; Ctrl-C while waiting cancels what has not started (and async
        tickets still running) and raises :class:`Stopped` the same way.
        """
        try:
            with self.lock:
                self._waited = set(tickets)
                while any(t.state in (QUEUED, RUNNING) for t in tickets):
                    if topup is not None:
                        self.lock.release()
                        try:
                            topup()
                        finally:
                            self.lock.acquire()
                        if not any(t.state in (QUEUED, RUNNING) for t in tickets):
                            break
                    self.lock.wait()
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C, or a signal handler's exception
            self._waited = set()
            self.cancel(tickets, running=True)
            finished = [t.result for t in tickets if t.state == DONE and t.result is not None]
            raise Stopped(exc, finished) from None
        self._waited = set()
        failures = [t.failure for t in tickets if t.failure is not None]
        for failure in failures:
            if not isinstance(failure, self.stops):
                raise failure  # run_one lets only the stops out: the plugin's own error
        if failures:
            raise Stopped(failures[0], [t.result for t in tickets if t.result is not None])
        return [t.result for t in tickets if t.result is not None]

    def cancel(self, tickets: Iterable[Ticket], *, running: bool = False) -> int:
        """Cancel the tickets that have not started (and with ``running``, the async ones
        that run: each ends cancelled, stored by nobody); how many were cancelled."""
        count = 0
        with self.lock:
            for ticket in tickets:
                if ticket.state == QUEUED:
                    ticket.state = CANCELLED
                    count += 1
                elif running and ticket.state == RUNNING and ticket.is_async:
                    task = ticket.task
                    if task is not None:
                        ticket.loop.call_soon_threadsafe(task.cancel)
            self.lock.notify_all()
        return count

    def settle(self, tickets: Sequence[Ticket], *, wait_sync: bool) -> None:
        """Wait for the running tickets of ``tickets`` to end (sync ones only when
        ``wait_sync``: a thread cannot be stopped from outside, and Ctrl-C must not hang)."""
        with self.lock:
            while any(t.state == RUNNING and (wait_sync or t.is_async) for t in tickets):
                self.lock.wait(0.5)

    def close(self) -> None:
        """No ticket starts any more; the loop stops, idle threads end."""
        with self.lock:
            self._closed = True
            for ticket in self.queue:
                if ticket.state == QUEUED:
                    ticket.state = CANCELLED
            self.queue.clear()
            for worker in self._workers:
                worker.give(None)
            self.lock.notify_all()
        loop, thread = self._loop, self._loop_thread
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(1.0)
            if not thread.is_alive():
                loop.close()
        self._wrapped.close()


@final
class _Worker:
    """A daemon thread of the window's kept pool, running one ticket at a time (daemon: a
    replicate left running past its timeout must not hold the interpreter's exit)."""

    __slots__ = ("event", "thread", "ticket", "window")

    def __init__(self, window: Window) -> None:
        self.window = window
        self.ticket: Ticket | None = None
        self.event = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name="prove-replicate")
        self.thread.start()

    def give(self, ticket: Ticket | None) -> None:
        self.ticket = ticket
        self.event.set()

    def _loop(self) -> None:
        window = self.window
        while True:
            self.event.wait()
            self.event.clear()
            ticket = self.ticket
            if ticket is None:
                return
            self.ticket = None
            window._run_sync(ticket, self)
            if window._closed:
                return
