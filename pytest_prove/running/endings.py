"""How each replicate ended, as the record that is stored for it.

Every way a replicate can end is stored once.  Any exception, and any other
BaseException (``sys.exit()``, ``asyncio.CancelledError``, ``GeneratorExit``...),
is an errored episode of kind ``"exception"`` with the exception's type, and the
siblings of its block are stored with it.  Only the user stopping the session
(KeyboardInterrupt, and whatever else the caller names in ``stops``) stores nothing
for the replicate it stopped, so that ``--prove-resume`` runs it again; a block
stopped that way raises :class:`Stopped` with what its other replicates finished.

Here are the episode's identity, its result, the checks of what a rollout returned, and
the record of each ending: an Episode, ``prove.NoOutcome``, an exception, a broken
contract, a timeout, or something outside the block that stopped it.
"""

from __future__ import annotations

import copy
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, final

from ..declare.capture import CaptureConfig
from ..declare.chaos import ChaosConfig, ChaosLog
from ..declare.episode import Episode, NoOutcome, RolloutContractError
from ..declare.grading import MAX_ANSWER_BYTES, GraderError, answer_size, grade, load_grader
from ..declare.metrics import BUILTIN_METRICS, MEASURED
from ..declare.spec import Declaration, Scalar
from ..record import utc_now
from .cache import CacheLog
from .cache import current_config as current_cache
from .recording import EpisodeLog, storable

__all__ = ["EpisodeTimeout", "Identity", "ReplicateResult", "Stopped", "close_log",
           "error_record", "finish", "interrupted_result", "new_log", "timeout_result"]


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


def close_log(log: EpisodeLog, record: dict[str, Any], *, running: bool = False) -> None:
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
    if log.cache is not None:
        _settle_cache(log.cache, record)


def _settle_cache(cache: CacheLog, record: dict[str, Any]) -> None:
    """Write what the episode recorded; mark a replayed episode, and make one whose call
    the cache did not hold an error naming that call (whatever the agent made of the
    miss: a client may retry it, or wrap it in an error of its own)."""
    problem = cache.flush()
    if problem is not None:
        warnings.warn(problem, stacklevel=1)
    if not cache.config.replaying:
        return
    record["replayed"] = True
    if cache.misses and cache.config.mode == "replay":
        previous = record.get("error")
        record["outcome"] = None
        record.pop("metrics", None)
        record["error"] = {"kind": "contract", "type": "CacheMiss",
                           "message": cache.misses[0]}
        if isinstance(previous, Mapping) and previous.get("traceback"):
            record["error"]["traceback"] = previous["traceback"]


def _store_chaos(log: EpisodeLog, record: dict[str, Any]) -> None:
    """The episode's calls and faults, when its rollout declares chaos."""
    if log.chaos is not None:
        record["chaos"] = log.chaos.to_record()


def new_log(identity: Identity, capture: CaptureConfig | None,
            chaos: ChaosConfig | None) -> EpisodeLog:
    """A fresh log for ``identity``'s episode, with its own fault stream under chaos."""
    cache = current_cache()
    return EpisodeLog(capture=capture,
                      chaos=None if chaos is None else ChaosLog(chaos, identity.seed),
                      cache=None if cache is None else CacheLog.start(
                          cache, identity.rollout, identity.condition_key, identity.seed))


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
    close_log(log, record, running=True)
    return ReplicateResult(record, timed_out=message)



def _is_plugin_timeout(exc: BaseException) -> bool:
    """pytest-timeout's signal method stops a test with ``pytest.fail("Timeout (>Ns) from
    pytest-timeout.")``: that episode timed out, as one stopped by our own timeout does."""
    return type(exc).__name__ == "Failed" and _describe(exc).startswith("Timeout") and (
        "pytest-timeout" in _describe(exc))


def finish(identity: Identity, declaration: Declaration, where: Callable[[Identity], str],
           value: object,
           exc: BaseException | None, log: EpisodeLog,
           timeout: float | None = None) -> ReplicateResult:
    if timeout is not None and isinstance(exc, EpisodeTimeout):
        return timeout_result(identity, log, timeout)
    duration = round(time.perf_counter() - log.started, 6)
    if isinstance(exc, NoOutcome):
        record = error_record(identity, "no_outcome", "NoOutcome", exc.reason, duration)
        record["steps"] = log.steps
        close_log(log, record)
        return ReplicateResult(record, no_outcome=exc.reason or "no outcome")
    if exc is not None:
        kind = ("contract" if isinstance(exc, RolloutContractError)
                else "episode_timeout" if _is_plugin_timeout(exc) else "exception")
        message = _describe(exc)
        record = error_record(identity, kind, type(exc).__name__, message, duration)
        record["steps"] = log.steps
        close_log(log, record)
        if kind == "contract":
            return ReplicateResult(record, contract_error=f"{where(identity)}: {message}")
        record["error"]["traceback"] = _traceback(exc)
        return ReplicateResult(record, exception=exc)
    if declaration.grader is not None and isinstance(value, Episode) \
            and value.outcome is None and value.answer is not None and not value.metrics:
        value, problem = _graded(value, declaration, identity)
    else:
        problem = None
    problem = problem or _check_return(value, declaration)
    if problem is not None:
        record = error_record(identity, "contract", "RolloutContractError", problem, duration)
        if isinstance(value, Episode) and value.answer is not None and (
                declaration.keep_answers or declaration.grader):
            _keep_answer(record, value.answer)  # a regrade may still grade it
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
        "outcome": MEASURED if value.outcome is None else value.outcome,
        "t": t,
        "horizon": value.horizon,
        "meta": value.meta,
        "error": None,
        "duration": duration,
        "tokens": None,
        "steps": log.steps,
        "finished": utc_now(),
    }
    close_log(log, record)
    if declaration.metrics:
        record["metrics"] = _metrics(value, declaration, record)
    if value.answer is not None and (declaration.keep_answers or declaration.grader):
        _keep_answer(record, value.answer)
    return ReplicateResult(record)


def _keep_answer(record: dict[str, Any], answer: object) -> None:
    """Store ``answer`` with the episode, or, past :data:`MAX_ANSWER_BYTES`, its size."""
    size = answer_size(answer)
    if size <= MAX_ANSWER_BYTES:
        record["answer"] = answer
    else:
        record["answer_bytes"] = size


def _graded(value: Episode, declaration: Declaration,
            identity: Identity) -> tuple[Episode, str | None]:
    """``value`` with the outcome and metrics its rollout's grader gives its answer, or
    why the grader could not give them."""
    name = str(declaration.grader)
    try:
        function = load_grader(name)
    except GraderError as exc:
        return value, str(exc)
    graded = grade(function, name, value.answer, identity.condition, declaration)
    if graded.error is not None:
        return value, graded.error
    return Episode(graded.outcome, t=value.t, horizon=value.horizon, meta=value.meta,
                   metrics=graded.metrics, answer=value.answer), None


def _metrics(value: Episode, declaration: Declaration,
             record: dict[str, Any]) -> dict[str, float]:
    """The declared metrics' values, in the declaration's order: the built-in ones read from
    the record (its duration, its tokens; its cost is added where it is stored), the others
    as the episode reported them."""
    found: dict[str, float] = {}
    for name in declaration.metric_directions:
        if name == "duration":
            found[name] = float(record["duration"])
        elif name == "tokens":
            tokens = record.get("tokens") or {}
            found[name] = float(int(tokens.get("input") or 0) + int(tokens.get("output") or 0))
        elif name == "cost":
            continue  # priced on the controller, which reads the declared prices
        else:
            found[name] = value.metrics[name]
    return found


def _check_return(value: object, declaration: Declaration) -> str | None:
    only = declaration.metrics_only
    if not isinstance(value, Episode):
        shown = f"{value!r:.120}"
        hint = ""
        if isinstance(value, str) and value in declaration.outcomes:
            hint = f"; return prove.Episode({value!r}) instead"
        elif value is None:
            hint = "; did you forget to return the episode?"
        elif isinstance(value, Mapping) and only:
            hint = f"; return prove.Episode(metrics={shown}) instead"
        return (f"a rollout must return prove.Episode({'metrics={...}' if only else 'outcome, ...'}"
                f"), got {shown} ({type(value).__name__}){hint}")
    if only:
        if value.outcome is not None:
            return (f"the rollout declares metrics and no outcomes, and the episode returned "
                    f"the outcome {value.outcome!r}; return prove.Episode(metrics={{...}}) "
                    "without one, or declare the outcomes (failures=[...], successes=[...])")
        return _check_metrics(value, declaration)
    if value.outcome is None:
        return (f"the episode has no outcome, and the rollout declares the outcomes "
                f"{', '.join(declaration.outcomes)}; return prove.Episode("
                f"{declaration.outcomes[0]!r}, ...), or raise prove.NoOutcome('why') for an "
                "episode that could not end in one")
    if value.outcome not in declaration.outcomes:
        close = [o for o in declaration.outcomes if o.lower() == value.outcome.lower()]
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return (f"outcome {value.outcome!r} is not declared; declared: "
                f"{', '.join(declaration.outcomes)}{hint}")
    return _check_metrics(value, declaration)


def _check_metrics(value: Episode, declaration: Declaration) -> str | None:
    """Why the episode's metrics break the declaration (None: they do not): one reported
    that is built in, one not declared, or one declared and not reported."""
    declared = declaration.metric_directions
    for name in value.metrics:
        if name in BUILTIN_METRICS:
            return (f"metric {name!r} is built in (read from the stored episode), and the "
                    f"episode reported a value for it; give your own metric another name, "
                    f"e.g. {name}_own")
        if name not in declared:
            own = [n for n in declared if n not in BUILTIN_METRICS]
            return (f"metric {name!r} is not declared (declared: {', '.join(own) or 'none'}); "
                    f'declare it with its better direction: metrics={{"{name}": "higher"}} '
                    'or "lower" on @prove.rollout, [metrics] in a sweep spec, or '
                    f"prove_metrics = {name}=higher in ini")
    missing = [n for n in declared if n not in BUILTIN_METRICS and n not in value.metrics]
    if missing:
        first = "" if declaration.metrics_only else "outcome, "
        return (f"metric {missing[0]!r} is declared but the episode did not report it; "
                f"return prove.Episode({first}metrics={{{missing[0]!r}: ...}}) in every "
                "episode, or raise prove.NoOutcome('why') for an episode that could not be "
                "scored")
    return None


def interrupted_result(identity: Identity, log: EpisodeLog,
                       exc: BaseException) -> ReplicateResult:
    """The record of a replicate still running when something outside it (a signal
    handler's exception, another plugin's timeout) stopped its block: it ends as ``exc``
    would have ended it, and pytest-timeout's timeout is an ``episode_timeout``."""
    kind = "episode_timeout" if _is_plugin_timeout(exc) else "exception"
    record = error_record(identity, kind, type(exc).__name__, _describe(exc),
                          round(time.perf_counter() - log.started, 6))
    record["steps"] = _snapshot(log.steps)
    close_log(log, record, running=True)
    return ReplicateResult(record, exception=exc)
