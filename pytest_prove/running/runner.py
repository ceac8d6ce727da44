"""Running a block of replicates and turning each ending into a stored record.

A pytest item carries one replicate or a block of them (``--prove-concurrency``).
This module runs a block (inline, in threads, or as asyncio tasks), gives each
replicate a log of its own in a context variable, and checks what it returned
against the declaration.  It knows nothing of pytest: the plugin turns the
results into a passed, failed or skipped item.

How each ending is stored is in :mod:`.endings`; how one replicate, or an async block's
tasks, run is in :mod:`.replicates`; a block run against the episode timeout is in
:mod:`.deadline`.  The names the rest of the package uses are exported from here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import copy_context
from typing import Any

from ..declare.capture import CaptureConfig
from ..declare.chaos import ChaosConfig
from ..declare.spec import Declaration
from .cache import active as cache_active
from .chaos import injecting
from .deadline import run_with_deadline
from .endings import (
    Identity,
    ReplicateResult,
    Stopped,
    error_record,
    interrupted_result,
    new_log,
)
from .replicates import run_async_block, run_one

#: run_block, and what the plugin takes from the running package with it (error_record: the
#: record of an episode whose item failed in setup or whose worker crashed).
__all__ = ["Identity", "ReplicateResult", "Stopped", "error_record", "run_block"]


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
    With ``timeout`` (seconds), see :mod:`.deadline`.  ``loop`` runs an async
    block's coroutine where the caller wants it (pytest-asyncio's runner), instead of in
    a loop of its own; with a timeout the block has a loop of its own in its thread.
    With ``chaos``, the HTTP clients' transports inject its faults while the block runs,
    each replicate from a stream of its own (see :mod:`.chaos`).
    """
    if chaos is None and not cache_active():  # nothing to wrap: no context manager a block
        return _run_block(identities, declaration, call, where, is_async, capture, stops,
                          timeout, loop, chaos)
    with injecting(True):
        return _run_block(identities, declaration, call, where, is_async, capture, stops,
                          timeout, loop, chaos)


def _run_block(identities: Sequence[Identity], declaration: Declaration,
               call: Callable[[Identity], Any], where: Callable[[Identity], str],
               is_async: bool, capture: CaptureConfig | None,
               stops: tuple[type[BaseException], ...], timeout: float | None,
               loop: Callable[[Any], Any] | None,
               chaos: ChaosConfig | None) -> list[ReplicateResult]:
    if timeout is not None:
        return run_with_deadline(identities, declaration, call, where, is_async, capture,
                                 stops, timeout, chaos)
    if is_async:
        return run_async_block(identities, declaration, call, where, capture, stops, loop,
                               chaos)
    if len(identities) == 1:
        return [run_one(identities[0], declaration, call, where, capture, stops,
                        chaos=chaos)]
    from concurrent.futures import ThreadPoolExecutor, wait

    pool = ThreadPoolExecutor(max_workers=len(identities), thread_name_prefix="prove-replicate")
    logs = [new_log(ident, capture, chaos) for ident in identities]
    futures = [pool.submit(copy_context().run, run_one, ident, declaration, call, where,
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
        return [f.result() if done else interrupted_result(ident, log, exc)
                for f, done, ident, log in zip(futures, ended, identities, logs, strict=True)]
    pool.shutdown()
    stopped = [e for f in futures if (e := f.exception()) is not None]
    for error in stopped:
        if not isinstance(error, stops):
            raise error  # run_one lets only the stops out: this is the plugin's own error
    if stopped:
        raise Stopped(stopped[0], [f.result() for f in futures if f.exception() is None])
    return [f.result() for f in futures]
