"""Per-episode state: the steps a rollout records, and the tokens it used.

Everything lives in a context variable, never a global, so replicates that run
at once (threads of a block, asyncio tasks) never see each other's steps.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, final

from ..declare.capture import CaptureConfig
from ..declare.chaos import ChaosLog
from .cache import CacheLog

__all__ = ["MAX_SPANS", "EpisodeLog", "current_log", "recording", "set_current", "step",
           "storable", "usage"]


@final
@dataclass(slots=True, weakref_slot=True)
class EpisodeLog:
    """What one running episode has recorded so far.

    With capture on, the span processor fills ``spans`` (the stored records, at most
    :data:`MAX_SPANS`), ``usage`` (one entry per span that carries token usage, with its
    span id) and ``parents`` (every span started in the episode, by id, and its parent's
    id), from which the episode's tokens are counted when it ends; once ``closed`` (its
    record is made) it takes no more spans.
    """

    steps: list[dict[str, Any]] = field(default_factory=list)
    usage: list[dict[str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    #: What to keep of the episode's OpenTelemetry spans, if any.
    capture: CaptureConfig | None = None
    parents: dict[str, str | None] = field(default_factory=dict)
    #: Spans that ended in the episode but were not stored, past MAX_SPANS.
    spans_dropped: int = 0
    closed: bool = False
    #: Its HTTP calls and the faults injected into them, when its rollout declares chaos.
    chaos: ChaosLog | None = None
    #: Its HTTP calls recorded, or answered from the cache (--prove-cache).
    cache: CacheLog | None = None
    _depth: int = 0


#: The most spans stored with one episode; later ones still count their tokens.
MAX_SPANS: Final = 1000


_current: ContextVar[EpisodeLog | None] = ContextVar("pytest_prove_episode", default=None)


def current_log() -> EpisodeLog | None:
    """The log of the episode running in this context, if any."""
    return _current.get()


def set_current(log: EpisodeLog) -> Callable[[], None]:
    """Make ``log`` the current episode's log; call what it returns to undo that."""
    token = _current.set(log)
    return functools.partial(_current.reset, token)


@contextmanager
def recording(log: EpisodeLog) -> Iterator[EpisodeLog]:
    """Make ``log`` the current episode's log for the duration of the block."""
    token = _current.set(log)
    try:
        yield log
    finally:
        _current.reset(token)


def storable(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate becomes its escape, ``\\ud800``, as
    in a step's name, a span's model name or an exception's message, so that the episode
    crosses from an xdist worker (whose channel takes only UTF-8) and is stored the same as
    in one process."""
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _log_or_error(what: str) -> EpisodeLog:
    log = _current.get()
    if log is None:
        raise RuntimeError(
            f"prove.{what} was called outside a rollout; call it from inside a function "
            "decorated with @prove.rollout (or a sweep spec's target) while it runs"
        )
    return log


@contextmanager
def step(name: str) -> Iterator[None]:
    """Record a named step of the running episode: ``with prove.step("read_case"): ...``.

    Steps are numbered in the order they start; an episode's ``t`` defaults to
    its number of steps.  A step that raises is recorded with the error's type.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"prove.step needs a non-empty string name, got {name!r}")
    log = _log_or_error("step")
    entry: dict[str, Any] = {"name": storable(name)}
    if log._depth:
        entry["depth"] = log._depth
    log.steps.append(entry)
    start = time.perf_counter()
    log._depth += 1
    try:
        yield
    except BaseException as exc:
        entry["error"] = type(exc).__name__
        raise
    finally:
        log._depth -= 1
        entry["duration"] = round(time.perf_counter() - start, 6)


def usage(model: str, input: int, output: int = 0) -> None:  # noqa: A002 - the GenAI word
    """Report token usage of one model call made by the running episode."""
    if not isinstance(model, str) or not model:
        raise TypeError(f"prove.usage needs a model name, got {model!r}")
    for label, value in (("input", input), ("output", output)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TypeError(f"prove.usage {label} tokens must be an int >= 0, got {value!r}")
    _log_or_error("usage").usage.append({"model": storable(model), "input": input,
                                         "output": output, "source": "reported"})
