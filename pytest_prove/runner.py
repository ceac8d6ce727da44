"""Running a block of replicates and turning each ending into a stored record.

A pytest item carries one replicate or a block of them (``--prove-concurrency``).
This module runs a block (inline, in threads, or as asyncio tasks), gives each
replicate a log of its own in a context variable, and checks what it returned
against the declaration.  It knows nothing of pytest: the plugin turns the
results into a passed, failed or skipped item.
"""

from __future__ import annotations

import inspect
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from contextvars import copy_context
from dataclasses import dataclass, field
from typing import Any, final

from .episode import Episode, NoOutcome, RolloutContractError
from .recording import EpisodeLog, recording, set_current
from .spec import Declaration, Scalar
from .store import utc_now

__all__ = ["Identity", "ReplicateResult", "error_record", "run_block"]


@final
@dataclass(frozen=True, slots=True)
class Identity:
    """Which episode this is: rollout, condition, replicate, and its seed."""

    rollout: str
    condition: dict[str, Scalar]
    condition_key: str
    replicate: int
    seed: int

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
    exception: Exception | None = None  # the rollout raised: the item fails with it
    contract_error: str | None = None  # it returned something it may not: the item fails
    no_outcome: str | None = None  # prove.NoOutcome: stored with no outcome, item skipped
    extra: dict[str, Any] = field(default_factory=dict)


def error_record(identity: Identity, kind: str, exc_type: str, message: str,
                 duration: float | None = None) -> dict[str, Any]:
    """The record of an episode that ended without an outcome."""
    return {
        **identity.to_json(),
        "outcome": None,
        "t": None,
        "horizon": None,
        "meta": {},
        "error": {"kind": kind, "type": exc_type, "message": message[:2000]},
        "duration": duration,
        "tokens": None,
        "steps": [],
        "finished": utc_now(),
    }


def _tokens(log: EpisodeLog) -> dict[str, Any] | None:
    """Tokens by model.  A model whose calls were seen on spans is counted from the spans
    only: a rollout that also reports them with prove.usage is not counted twice."""
    if not log.usage:
        return None
    seen_on_spans = {name for use in log.usage if use.get("source") == "span"
                     for name in (use["model"], use.get("response_model")) if name}
    by_model: dict[str, dict[str, int]] = {}
    for use in log.usage:
        if use.get("source") != "span" and use["model"] in seen_on_spans:
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


def _finish(identity: Identity, declaration: Declaration, where: Callable[[Identity], str],
            value: object,
            exc: Exception | None, log: EpisodeLog) -> ReplicateResult:
    duration = round(time.perf_counter() - log.started, 6)
    if isinstance(exc, NoOutcome):
        record = error_record(identity, "no_outcome", "NoOutcome", exc.reason, duration)
        record["steps"] = log.steps
        record["tokens"] = _tokens(log)
        if log.spans:
            record["spans"] = log.spans
        return ReplicateResult(record, no_outcome=exc.reason or "no outcome")
    if exc is not None:
        kind = "contract" if isinstance(exc, RolloutContractError) else "exception"
        message = str(exc)
        record = error_record(identity, kind, type(exc).__name__, message, duration)
        record["steps"] = log.steps
        record["tokens"] = _tokens(log)
        if log.spans:
            record["spans"] = log.spans
        if kind == "contract":
            return ReplicateResult(record, contract_error=f"{where(identity)}: {message}")
        record["error"]["traceback"] = "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8)
        )[-4000:]
        return ReplicateResult(record, exception=exc)
    problem = _check_return(value, declaration)
    if problem is not None:
        record = error_record(identity, "contract", "RolloutContractError", problem, duration)
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
            return ReplicateResult(record, contract_error=f"{where(identity)}: {problem}")
    record = {
        **identity.to_json(),
        "outcome": value.outcome,
        "t": t,
        "horizon": value.horizon,
        "meta": value.meta,
        "error": None,
        "duration": duration,
        "tokens": _tokens(log),
        "steps": log.steps,
        "finished": utc_now(),
    }
    if log.spans:
        record["spans"] = log.spans
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
    capture: object | None = None,
) -> list[ReplicateResult]:
    """Run every replicate of a block; return their results in replicate order.

    One replicate runs inline, so that a debugger and tracebacks behave as in any
    test.  Several run at once: as asyncio tasks for an ``async def`` rollout,
    in threads otherwise, each in a copy of the current context with a log of
    its own.
    """
    if is_async:
        import asyncio  # imported by the first async rollout, not by every session

        return asyncio.run(_run_async(identities, declaration, call, where, capture))
    if len(identities) == 1:
        return [_run_one(identities[0], declaration, call, where, capture)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(identities),
                            thread_name_prefix="prove-replicate") as pool:
        futures = [pool.submit(copy_context().run, _run_one, ident, declaration, call, where,
                               capture)
                   for ident in identities]
        return [f.result() for f in futures]


def _run_one(identity: Identity, declaration: Declaration, call: Callable[[Identity], Any],
             where: Callable[[Identity], str], capture: object | None = None) -> ReplicateResult:
    log = EpisodeLog(capture=capture)
    value: object = None
    error: Exception | None = None
    reset = set_current(log)  # not a context manager: this runs once an episode, every one
    try:
        value = call(identity)
        if inspect.isawaitable(value):
            raise RolloutContractError(
                "the rollout returned an awaitable; declare it `async def` so the "
                "plugin awaits it, or return the Episode itself"
            )
    except Exception as exc:  # noqa: BLE001 - every ending of user code is stored
        error = exc
    finally:
        reset()
    return _finish(identity, declaration, where, value, error, log)


async def _run_async(identities: Sequence[Identity], declaration: Declaration,
                     call: Callable[[Identity], Any],
                     where: Callable[[Identity], str],
                     capture: object | None = None) -> list[ReplicateResult]:
    async def one(identity: Identity) -> ReplicateResult:
        # Each task runs in its own copy of the context, so this log is its alone.
        log = EpisodeLog(capture=capture)
        value: object = None
        error: Exception | None = None
        with recording(log):
            try:
                awaitable = call(identity)
                value = await _as_awaitable(awaitable)
            except Exception as exc:  # noqa: BLE001 - every ending of user code is stored
                error = exc
        return _finish(identity, declaration, where, value, error, log)

    import asyncio

    return list(await asyncio.gather(*(one(i) for i in identities)))


async def _as_awaitable(value: Awaitable[Any] | Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
