"""Running replicates: one sync replicate in the calling thread, or an ``async def``
rollout's block as asyncio tasks on an event loop, each with a log of its own in a context
variable, each ending made its record (:mod:`.endings`)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast, final

from ..declare.capture import CaptureConfig
from ..declare.chaos import ChaosConfig
from ..declare.episode import RolloutContractError
from ..declare.spec import Declaration
from .endings import (
    Identity,
    ReplicateResult,
    Stopped,
    finish,
    interrupted_result,
    new_log,
    timeout_result,
)
from .recording import EpisodeLog, recording, set_current

__all__ = ["AsyncBlock", "run_async", "run_async_block", "run_one"]


def run_async_block(identities: Sequence[Identity], declaration: Declaration,
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

    logs = [new_log(ident, capture, chaos) for ident in identities]
    results: dict[int, ReplicateResult] = {}
    block = AsyncBlock()
    coroutine = run_async(identities, declaration, call, where, capture, stops,
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
            raise  # the block's own ending (Stopped, or an error of the running package's)
        block.stop_from_outside(exc)
        if isinstance(exc, stops):
            raise Stopped(exc, [results[i] for i in sorted(results)]) from None
        return [results[i] if i in results else interrupted_result(ident, logs[i], exc)
                for i, ident in enumerate(identities)]


@final
class AsyncBlock:
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


def run_one(identity: Identity, declaration: Declaration, call: Callable[[Identity], Any],
            where: Callable[[Identity], str], capture: CaptureConfig | None,
            stops: tuple[type[BaseException], ...], log: EpisodeLog | None = None,
            timeout: float | None = None, chaos: ChaosConfig | None = None) -> ReplicateResult:
    log = log if log is not None else new_log(identity, capture, chaos)
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
    return finish(identity, declaration, where, value, error, log, timeout)


async def run_async(identities: Sequence[Identity], declaration: Declaration,
                    call: Callable[[Identity], Any],
                    where: Callable[[Identity], str],
                    capture: CaptureConfig | None,
                    stops: tuple[type[BaseException], ...],
                    timeout: float | None = None,
                    logs: Sequence[EpisodeLog] | None = None,
                    into: dict[int, ReplicateResult] | None = None,
                    started: set[int] | None = None,
                    chaos: ChaosConfig | None = None,
                    block: AsyncBlock | None = None) -> list[ReplicateResult]:
    import asyncio

    tasks: list[asyncio.Task[ReplicateResult | None]] = []
    stopped: list[BaseException] = []

    async def one(index: int, identity: Identity) -> ReplicateResult | None:
        # Each task runs in its own copy of the context, so this log is its alone.
        log = logs[index] if logs is not None else new_log(identity, capture, chaos)
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
            found = finish(identity, declaration, where, value, error, log)
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
