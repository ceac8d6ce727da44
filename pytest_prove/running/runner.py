"""Running a block of replicates and turning each ending into a stored record.

A pytest item carries one replicate or a block of them (``--prove-concurrency``).
This module runs a block (inline, in threads, or as asyncio tasks), gives each
replicate a log of its own in a context variable, and checks what it returned
against the declaration.  It knows nothing of pytest: the plugin turns the
results into a passed, failed or skipped item.

Every way a replicate can end is stored once.  Any exception, and any other
BaseException (``sys.exit()``, ``asyncio.CancelledError``, ``GeneratorExit``...),
is an errored episode of kind ``"exception"`` with the exception's type, and the
siblings of its block are stored with it.  Only the user stopping the session
(KeyboardInterrupt, and whatever else the caller names in ``stops``) stores nothing
for the replicate it stopped, so that ``--prove-resume`` runs it again; a block
stopped that way raises :class:`Stopped` with what its other replicates finished.

With a timeout (``--prove-episode-timeout``), the block runs in daemon threads while the
calling thread waits until the deadline: an ``async def`` rollout's tasks are each given
``asyncio.timeout``; a sync replicate still running is sent :class:`EpisodeTimeout`
(raised in its thread at its next Python bytecode) and given a short grace to unwind.  A
replicate that is still running then (blocked in C code, or a loop that never yields) is
left to run on in its daemon thread, and its episode is stored from what it recorded so
far; the caller goes on at once.
"""

from __future__ import annotations

import copy
import ctypes
import inspect
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import copy_context
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, final

from ..declare.capture import CaptureConfig
from ..declare.chaos import ChaosConfig, ChaosLog
from ..declare.episode import Episode, NoOutcome, RolloutContractError
from ..declare.spec import Declaration, Scalar
from ..record import utc_now
from .chaos import injecting
from .recording import EpisodeLog, recording, set_current

__all__ = ["GRACE", "EpisodeTimeout", "Identity", "ReplicateResult", "Stopped", "error_record",
           "run_block"]

#: Seconds a timed-out replicate is given to unwind before it is left running.
GRACE = 0.25


@final
@dataclass(frozen=True, slots=True)
class Identity:
    """Which episode this is: rollout, condition, replicate, and its seed."""

    rollout: str
    condition: dict[str, Scalar]
    condition_key: str
    replicate: int
    seed: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Identity:
        """The inverse of :meth:`to_json` (an identity sent ahead with a report)."""
        return cls(rollout=data["rollout"], condition=dict(data["condition"]),
                   condition_key=data["condition_key"], replicate=int(data["replicate"]),
                   seed=int(data["seed"]))

    def to_json(self) -> dict[str, Any]:
        return {
            "rollout": self.rollout,
            "condition": dict(self.condition),
            "condition_key": self.condition_key,
            "replicate": self.replicate,
            "seed": self.seed,
        }


@final
@dataclass(slots=True)
class ReplicateResult:
    """One replicate's stored record, and what the item must do about it."""

    record: dict[str, Any]
    exception: BaseException | None = None  # the rollout raised: the item fails with it
    contract_error: str | None = None  # it returned something it may not: the item fails
    no_outcome: str | None = None  # prove.NoOutcome: stored with no outcome, item skipped
    timed_out: str | None = None  # stopped by the episode timeout: stored, the item fails
    extra: dict[str, Any] = field(default_factory=dict)


@final
class Stopped(BaseException):
    """The session was stopped in the middle of a block (Ctrl-C, or one of ``stops``).

    ``finished`` holds the results of the replicates that ended before it, in
    replicate order; ``cause`` is what stopped it, to be raised once they are kept.
    """

    def __init__(self, cause: BaseException, finished: list[ReplicateResult]) -> None:
        super().__init__(cause)
        self.cause = cause
        self.finished = finished


@final
class EpisodeTimeout(BaseException):
    """Raised into a rollout still running at its deadline.  A BaseException, so that the
    rollout's own ``except Exception`` does not take it for one of its errors."""


def storable(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate becomes its escape, ``\\ud800``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_record(identity: Identity, kind: str, exc_type: str, message: str,
                 duration: float | None = None) -> dict[str, Any]:
    """The record of an episode that ended without an outcome."""
    return {
        **identity.to_json(),
        "outcome": None,
        "t": None,
        "horizon": None,
        "meta": {},
        "error": {"kind": kind, "type": storable(exc_type),
                  "message": storable(message[:2000])},
        "duration": duration,
        "tokens": None,
        "steps": [],
        "finished": utc_now(),
    }


def _tokens(usage: Sequence[dict[str, Any]],
            parents: Mapping[str, str | None]) -> dict[str, Any] | None:
    """Tokens by model, each model call counted once.

    Of the spans that carry usage, only the innermost count: one with a descendant in the
    episode that carries usage too (a framework's agent span summing its calls, or its chat
    span over the client instrumentor's span of the same call) is left out.  A model whose
    calls were seen on spans is counted from the spans only: a rollout that also reports
    them with prove.usage is not counted twice."""
    if not usage:
        return None
    covered = _covered(usage, parents)
    seen_on_spans = {name for use in usage if use.get("source") == "span"
                     for name in (use["model"], use.get("response_model")) if name}
    by_model: dict[str, dict[str, int]] = {}
    for use in usage:
        if use.get("source") == "span":
            if use.get("span") in covered:
                continue
        elif use["model"] in seen_on_spans:
            continue
        entry = by_model.setdefault(use["model"], {"input": 0, "output": 0, "calls": 0})
        entry["input"] += use["input"]
        entry["output"] += use["output"]
        entry["calls"] += 1
    return {
        "input": sum(m["input"] for m in by_model.values()),
        "output": sum(m["output"] for m in by_model.values()),
        "by_model": by_model,
    }


def _covered(usage: Sequence[dict[str, Any]], parents: Mapping[str, str | None]) -> set[str]:
    """The spans (by id) that have a descendant carrying usage: every ancestor, within the
    episode, of a span that carries usage."""
    covered: set[str] = set()
    for use in usage:
        span = use.get("span")
        parent = parents.get(span) if isinstance(span, str) else None
        for _ in range(len(parents)):  # a chain of parents is never longer (nor circular)
            if parent is None or parent in covered:
                break
            covered.add(parent)
            parent = parents.get(parent)
    return covered


def _close(log: EpisodeLog, record: dict[str, Any], *, running: bool = False) -> None:
    """End the episode's capture: its log takes no more spans, and ``record`` gets its tokens,
    counted now that every span of the episode has ended, and its spans (copied when the
    episode may still be ``running`` in a thread left behind)."""
    log.closed = True
    usage = _snapshot(log.usage) if running else log.usage
    record["tokens"] = _tokens(usage, dict(log.parents)) if usage else None
    spans = _snapshot(log.spans) if running else log.spans
    if spans:
        record["spans"] = spans
    if log.spans_dropped:
        record["spans_dropped"] = log.spans_dropped
    _store_chaos(log, record)


def _store_chaos(log: EpisodeLog, record: dict[str, Any]) -> None:
    """The episode's calls and faults, when its rollout declares chaos."""
    if log.chaos is not None:
        record["chaos"] = log.chaos.to_record()


def _new_log(identity: Identity, capture: CaptureConfig | None,
             chaos: ChaosConfig | None) -> EpisodeLog:
    """A fresh log for ``identity``'s episode, with its own fault stream under chaos."""
    return EpisodeLog(capture=capture,
                      chaos=None if chaos is None else ChaosLog(chaos, identity.seed))


def _describe(exc: BaseException) -> str:
    """``str(exc)``, or what can be said of it when its ``__str__`` itself raises."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not lose the episode
        return f"<{type(exc).__name__} whose str() raised>"


def _traceback(exc: BaseException) -> str:
    try:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__,
                                                  limit=-8))
    except Exception:  # noqa: BLE001 - as in _describe
        text = f"{type(exc).__name__}: {_describe(exc)}"
    return storable(text[-4000:])


def _snapshot(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of steps or spans that a thread left running may still be changing."""
    for _ in range(5):
        try:
            return copy.deepcopy(items)
        except RuntimeError:  # changed while it was copied: try again
            continue
    return []


def timeout_result(identity: Identity, log: EpisodeLog, timeout: float, *,
                   note: str = "") -> ReplicateResult:
    """The record of an episode stopped by its timeout: no outcome, its duration, and the
    steps, tokens and spans it had recorded by then (copied: it may still be running)."""
    duration = round(time.perf_counter() - log.started, 6)
    message = f"still running after {timeout:g} s (--prove-episode-timeout){note}"
    record = error_record(identity, "episode_timeout", "EpisodeTimeout", message, duration)
    record["steps"] = _snapshot(log.steps)
    _close(log, record, running=True)
    return ReplicateResult(record, timed_out=message)


#: Why a replicate's timeout record says more than "still running".
LEFT_RUNNING = ("; it did not stop within the grace and was left running in its thread "
                "(blocked in C code, in library code, or catching the timeout)")
NEVER_STARTED = "; it never started: a sibling blocked the event loop"


def _is_plugin_timeout(exc: BaseException) -> bool:
    """pytest-timeout's signal method stops a test with ``pytest.fail("Timeout (>Ns) from
    pytest-timeout.")``: that episode timed out, as one stopped by our own timeout does."""
    return type(exc).__name__ == "Failed" and _describe(exc).startswith("Timeout") and (
        "pytest-timeout" in _describe(exc))


def _finish(identity: Identity, declaration: Declaration, where: Callable[[Identity], str],
            value: object,
            exc: BaseException | None, log: EpisodeLog,
            timeout: float | None = None) -> ReplicateResult:
    if timeout is not None and isinstance(exc, EpisodeTimeout):
        return timeout_result(identity, log, timeout)
    duration = round(time.perf_counter() - log.started, 6)
    if isinstance(exc, NoOutcome):
        record = error_record(identity, "no_outcome", "NoOutcome", exc.reason, duration)
        record["steps"] = log.steps
        _close(log, record)
        return ReplicateResult(record, no_outcome=exc.reason or "no outcome")
    if exc is not None:
        kind = ("contract" if isinstance(exc, RolloutContractError)
                else "episode_timeout" if _is_plugin_timeout(exc) else "exception")
        message = _describe(exc)
        record = error_record(identity, kind, type(exc).__name__, message, duration)
        record["steps"] = log.steps
        _close(log, record)
        if kind == "contract":
            return ReplicateResult(record, contract_error=f"{where(identity)}: {message}")
        record["error"]["traceback"] = _traceback(exc)
        return ReplicateResult(record, exception=exc)
    problem = _check_return(value, declaration)
    if problem is not None:
        record = error_record(identity, "contract", "RolloutContractError", problem, duration)
        _store_chaos(log, record)
        return ReplicateResult(record, contract_error=f"{where(identity)}: {problem}")
    assert isinstance(value, Episode)
    t = value.t
    if t is None and log.steps:
        t = len(log.steps)
        if value.horizon is not None and t > value.horizon:
            problem = (f"t defaults to the {t} steps recorded, which is beyond horizon="
                       f"{value.horizon}; pass t= or a larger horizon")
            record = error_record(identity, "contract", "RolloutContractError", problem,
                                  duration)
            _store_chaos(log, record)
            return ReplicateResult(record, contract_error=f"{where(identity)}: {problem}")
    record = {
        **identity.to_json(),
        "outcome": value.outcome,
        "t": t,
        "horizon": value.horizon,
        "meta": value.meta,
        "error": None,
        "duration": duration,
        "tokens": None,
        "steps": log.steps,
        "finished": utc_now(),
    }
    _close(log, record)
    return ReplicateResult(record)


def _check_return(value: object, declaration: Declaration) -> str | None:
    if not isinstance(value, Episode):
        shown = f"{value!r:.120}"
        hint = ""
        if isinstance(value, str) and value in declaration.outcomes:
            hint = f"; return prove.Episode({value!r}) instead"
        elif value is None:
            hint = "; did you forget to return the episode?"
        return (f"a rollout must return prove.Episode(outcome, ...), got {shown} "
                f"({type(value).__name__}){hint}")
    if value.outcome not in declaration.outcomes:
        close = [o for o in declaration.outcomes if o.lower() == value.outcome.lower()]
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return (f"outcome {value.outcome!r} is not declared; declared: "
                f"{', '.join(declaration.outcomes)}{hint}")
    return None


def run_block(
    identities: Sequence[Identity],
    declaration: Declaration,
    call: Callable[[Identity], Any],
    *,
    where: Callable[[Identity], str],
    is_async: bool,
    capture: CaptureConfig | None = None,
    stops: tuple[type[BaseException], ...] = (KeyboardInterrupt,),
    timeout: float | None = None,
    loop: Callable[[Any], Any] | None = None,
    chaos: ChaosConfig | None = None,
) -> list[ReplicateResult]:
    """Run every replicate of a block; return their results in replicate order.

    One replicate runs inline, so that a debugger and tracebacks behave as in any
    test; one of ``stops`` raised there propagates as it is.  Several run at once:
    as asyncio tasks for an ``async def`` rollout, in threads otherwise, each in a
    copy of the current context with a log of its own; a stop among them (or
    Ctrl-C while they run) raises :class:`Stopped` with what the others finished.
    With ``timeout`` (seconds), see the module's docstring.  ``loop`` runs an async
    block's coroutine where the caller wants it (pytest-asyncio's runner), instead of in
    a loop of its own; with a timeout the block has a loop of its own in its thread.
    With ``chaos``, the HTTP clients' transports inject its faults while the block runs,
    each replicate from a stream of its own (see :mod:`.chaos`).
    """
    with injecting(chaos is not None):
        return _run_block(identities, declaration, call, where, is_async, capture, stops,
                          timeout, loop, chaos)


def _run_block(identities: Sequence[Identity], declaration: Declaration,
               call: Callable[[Identity], Any], where: Callable[[Identity], str],
               is_async: bool, capture: CaptureConfig | None,
               stops: tuple[type[BaseException], ...], timeout: float | None,
               loop: Callable[[Any], Any] | None,
               chaos: ChaosConfig | None) -> list[ReplicateResult]:
    if timeout is not None:
        return _run_with_deadline(identities, declaration, call, where, is_async, capture,
                                  stops, timeout, chaos)
    if is_async:
        return _run_async_block(identities, declaration, call, where, capture, stops, loop,
                                chaos)
    if len(identities) == 1:
        return [_run_one(identities[0], declaration, call, where, capture, stops,
                         chaos=chaos)]
    from concurrent.futures import ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=len(identities), thread_name_prefix="prove-replicate")
    logs = [_new_log(ident, capture, chaos) for ident in identities]
    futures = [pool.submit(copy_context().run, _run_one, ident, declaration, call, where,
                           capture, stops, log, None, chaos)
               for ident, log in zip(identities, logs, strict=True)]
    try:
        wait(futures)
    except BaseException as exc:  # noqa: BLE001 - a stop, or a signal handler's exception
        # Ctrl-C reaches the main thread, which waits here: keep what finished, and do
        # not wait for threads that cannot be stopped from outside.
        pool.shutdown(wait=False, cancel_futures=True)
        ended = [f.done() and not f.cancelled() and f.exception() is None for f in futures]
        if isinstance(exc, (KeyboardInterrupt, *stops)):
            raise Stopped(exc, [f.result() for f, done in zip(futures, ended, strict=True)
                                if done]) from None
        # Another exception of a signal handler (pytest-timeout's signal method): the
        # replicates still running end with it, as a sync one alone does; those that
        # finished keep their endings (the whole block was lost before).
        return [f.result() if done else _interrupted_result(ident, log, exc)
                for f, done, ident, log in zip(futures, ended, identities, logs, strict=True)]
    pool.shutdown()
    stopped = [e for f in futures if (e := f.exception()) is not None]
    for error in stopped:
        if not isinstance(error, stops):
            raise error  # _run_one lets only the stops out: this is the plugin's own error
    if stopped:
        raise Stopped(stopped[0], [f.result() for f in futures if f.exception() is None])
    return [f.result() for f in futures]


def _run_async_block(identities: Sequence[Identity], declaration: Declaration,
                     call: Callable[[Identity], Any], where: Callable[[Identity], str],
                     capture: CaptureConfig | None, stops: tuple[type[BaseException], ...],
                     loop: Callable[[Any], Any] | None,
                     chaos: ChaosConfig | None) -> list[ReplicateResult]:
    """Run an async block on ``loop`` (or a loop of its own).

    A signal handler's exception (pytest-timeout's signal method) is raised where the loop
    waits, outside every task: the loop stops, and the replicates still running end with
    it, stored as it would have ended them had it reached them (a timeout of
    pytest-timeout's is an ``episode_timeout``, as for a sync rollout).  Before, the loop's
    shutdown cancelled them, the block took that for Ctrl-C, and none of them was stored.
    """
    import asyncio  # imported by the first async rollout, not by every session

    logs = [_new_log(ident, capture, chaos) for ident in identities]
    results: dict[int, ReplicateResult] = {}
    block = _AsyncBlock()
    coroutine = _run_async(identities, declaration, call, where, capture, stops,
                           logs=logs, into=results, chaos=chaos, block=block)
    try:
        if loop is not None:
            return cast("list[ReplicateResult]", loop(coroutine))
        with asyncio.Runner() as runner:
            try:
                return runner.run(coroutine)
            except BaseException as exc:
                block.stop_from_outside(exc)  # before the runner's exit cancels the tasks
                raise
    except BaseException as exc:
        if block.finished:
            raise  # the block's own ending (Stopped, or an error of this module's)
        block.stop_from_outside(exc)
        if isinstance(exc, stops):
            raise Stopped(exc, [results[i] for i in sorted(results)]) from None
        return [results[i] if i in results else _interrupted_result(ident, logs[i], exc)
                for i, ident in enumerate(identities)]


@final
class _AsyncBlock:
    """What an async block shares with the code that runs its loop: its tasks, whether its
    coroutine has ended, and what stopped the loop from outside the block, if anything."""

    __slots__ = ("finished", "outside", "tasks")

    def __init__(self) -> None:
        self.finished = False
        self.outside: BaseException | None = None
        self.tasks: list[Any] = []

    def stop_from_outside(self, exc: BaseException) -> None:
        """Mark the block stopped by ``exc`` and cancel its tasks: whoever runs the loop next
        (the loop's shutdown, or the next test on a shared loop) ends them quietly."""
        if self.finished or self.outside is not None:
            return
        self.outside = exc
        for task in self.tasks:
            task.cancel()


def _interrupted_result(identity: Identity, log: EpisodeLog,
                        exc: BaseException) -> ReplicateResult:
    """The record of a replicate still running when something outside it (a signal
    handler's exception, another plugin's timeout) stopped its block: it ends as ``exc``
    would have ended it, and pytest-timeout's timeout is an ``episode_timeout``."""
    kind = "episode_timeout" if _is_plugin_timeout(exc) else "exception"
    record = error_record(identity, kind, type(exc).__name__, _describe(exc),
                          round(time.perf_counter() - log.started, 6))
    record["steps"] = _snapshot(log.steps)
    _close(log, record, running=True)
    return ReplicateResult(record, exception=exc)


def _run_one(identity: Identity, declaration: Declaration, call: Callable[[Identity], Any],
             where: Callable[[Identity], str], capture: CaptureConfig | None,
             stops: tuple[type[BaseException], ...], log: EpisodeLog | None = None,
             timeout: float | None = None, chaos: ChaosConfig | None = None) -> ReplicateResult:
    log = log if log is not None else _new_log(identity, capture, chaos)
    value: object = None
    error: BaseException | None = None
    reset = set_current(log)  # not a context manager: this runs once an episode, every one
    try:
        value = call(identity)
        if inspect.isawaitable(value):
            raise RolloutContractError(
                "the rollout returned an awaitable; declare it `async def` so the "
                "plugin awaits it, or return the Episode itself"
            )
    except BaseException as exc:
        if isinstance(exc, stops):
            raise
        error = exc  # every other ending of user code is stored
    finally:
        reset()
    return _finish(identity, declaration, where, value, error, log, timeout)


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


def _stop_late(late: Sequence[threading.Thread], until: float) -> set[threading.Thread]:
    """Raise EpisodeTimeout into each late thread once it runs user code, polling until
    ``until``; return the threads it was raised into."""
    sent: set[threading.Thread] = set()
    while time.monotonic() < until:
        waiting = [thread for thread in late if thread.is_alive() and thread not in sent]
        if not waiting:
            break
        for thread in waiting:
            if _in_user_code(thread):
                _raise_in(thread, EpisodeTimeout)
                sent.add(thread)
        time.sleep(0.005)
    _join(late, until)
    return sent


def _run_with_deadline(identities: Sequence[Identity], declaration: Declaration,
                       call: Callable[[Identity], Any], where: Callable[[Identity], str],
                       is_async: bool, capture: CaptureConfig | None,
                       stops: tuple[type[BaseException], ...],
                       timeout: float, chaos: ChaosConfig | None) -> list[ReplicateResult]:
    """Run the block in daemon threads and wait no longer than ``timeout`` plus GRACE."""
    logs = [_new_log(ident, capture, chaos) for ident in identities]
    results: dict[int, ReplicateResult] = {}
    started: set[int] = set()
    failures: list[BaseException] = []  # stops, and errors of this module's own

    def replicate(index: int) -> None:
        started.add(index)
        try:
            results[index] = _run_one(identities[index], declaration, call, where, capture,
                                      stops, logs[index], timeout)
        except EpisodeTimeout:
            # Raised after the rollout returned, on the way out: it did end in time.
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            failures.append(exc)

    def block() -> None:
        import asyncio

        try:
            asyncio.run(_run_async(identities, declaration, call, where, capture, stops,
                                   timeout, logs, results, started))
        except Stopped as stop:
            failures.append(stop.cause)
        except BaseException as exc:  # noqa: BLE001 - as in replicate()
            failures.append(exc)

    if is_async:
        threads = [threading.Thread(target=copy_context().run, args=(block,), daemon=True,
                                    name="prove-replicates")]
        owner = dict.fromkeys(range(len(identities)), threads[0])
    else:
        threads = [threading.Thread(target=copy_context().run, args=(replicate, i),
                                    daemon=True, name=f"prove-replicate-{ident.replicate}")
                   for i, ident in enumerate(identities)]
        owner = dict(enumerate(threads))
    interrupted: BaseException | None = None
    sent: set[threading.Thread] = set()
    try:
        for thread in threads:
            thread.start()
        _join(threads, time.monotonic() + timeout)
        late = [thread for thread in threads if thread.is_alive()]
        grace = time.monotonic() + GRACE
        if is_async:  # its tasks are stopped by their own asyncio.timeout
            _join(late, grace)
        else:
            sent = _stop_late(late, grace)
    except KeyboardInterrupt as exc:
        raise Stopped(exc, [results[i] for i in sorted(results)]) from None
    except BaseException as exc:  # noqa: BLE001 - e.g. pytest-timeout's signal in this thread
        interrupted = exc
    for error in failures:
        if not isinstance(error, stops):
            raise error  # _run_one lets only the stops out: this is the plugin's own error
    if failures:
        raise Stopped(failures[0], [results[i] for i in sorted(results)])
    found = []
    for i, ident in enumerate(identities):
        result = results.get(i)
        if interrupted is not None and result is None:
            # Something stopped the waiting itself (a timeout of another plugin): the
            # replicates still running end with it, as they would had it reached them.
            result = _interrupted_result(ident, logs[i], interrupted)
        elif result is None or (owner[i] in sent and result.record["error"] is None):
            # Still running, or it caught the timeout and returned late: either way it was
            # running at its deadline, which is what the timeout promises to record.
            note = ("" if result is not None or not owner[i].is_alive() else
                    NEVER_STARTED if i not in started else LEFT_RUNNING)
            result = timeout_result(ident, logs[i], timeout, note=note)
        found.append(result)
    return found


async def _run_async(identities: Sequence[Identity], declaration: Declaration,
                     call: Callable[[Identity], Any],
                     where: Callable[[Identity], str],
                     capture: CaptureConfig | None,
                     stops: tuple[type[BaseException], ...],
                     timeout: float | None = None,
                     logs: Sequence[EpisodeLog] | None = None,
                     into: dict[int, ReplicateResult] | None = None,
                     started: set[int] | None = None,
                     chaos: ChaosConfig | None = None,
                     block: _AsyncBlock | None = None) -> list[ReplicateResult]:
    import asyncio

    tasks: list[asyncio.Task[ReplicateResult | None]] = []
    stopped: list[BaseException] = []

    async def one(index: int, identity: Identity) -> ReplicateResult | None:
        # Each task runs in its own copy of the context, so this log is its alone.
        log = logs[index] if logs is not None else _new_log(identity, capture, chaos)
        log.started = time.perf_counter()
        if started is not None:
            started.add(index)
        value: object = None
        error: BaseException | None = None
        limit = asyncio.timeout(timeout)
        with recording(log):
            try:
                async with limit:
                    awaitable = call(identity)
                    value = await _as_awaitable(awaitable)
            except BaseException as exc:  # noqa: BLE001 - every ending is stored, or a stop
                if timeout is not None and isinstance(exc, TimeoutError) and limit.expired():
                    found = timeout_result(identity, log, timeout)
                    if into is not None:
                        into[index] = found
                    return found
                me = asyncio.current_task()
                # A CancelledError the rollout raised is its own ending; one from this
                # task being cancelled (Ctrl-C, or a sibling's stop) is not.
                if isinstance(exc, stops) or (isinstance(exc, asyncio.CancelledError)
                                              and me is not None and me.cancelling()):
                    stopped.append(exc)
                    for task in tasks:
                        if task is not me:
                            task.cancel()
                    return None
                error = exc  # every other ending of user code is stored
        if timeout is not None and limit.expired():
            # It caught the cancellation and went on: it was running at its deadline.
            found = timeout_result(identity, log, timeout)
        else:
            found = _finish(identity, declaration, where, value, error, log)
        if into is not None:
            into[index] = found
        return found

    tasks.extend(asyncio.create_task(one(n, i)) for n, i in enumerate(identities))
    if block is not None:
        block.tasks.extend(tasks)
    try:
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            # asyncio.run cancels this task on Ctrl-C: stop the replicates, keep what
            # finished.
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            stopped.insert(0, KeyboardInterrupt())
        if block is not None and block.outside is not None:
            # Cancelled because something outside the block stopped its loop: the code
            # that ran the loop stores the replicates from what they recorded.
            return []
        finished = [r for t in tasks if not t.cancelled() and (r := t.result()) is not None]
        if stopped:
            raise Stopped(stopped[0], finished)
        return finished
    finally:
        if block is not None and block.outside is None:
            block.finished = True


async def _as_awaitable(value: Awaitable[Any] | Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
