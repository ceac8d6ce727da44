"""The OpenTelemetry side of capture: a span processor that hands spans to episodes, and its
place in the process's global tracer provider.

Imported only when some collected rollout captures, so that a session without capture
never loads the OpenTelemetry SDK.

**The global provider.**  Frameworks that instrument themselves emit spans through the
global API (``opentelemetry.trace.get_tracer(...)``), so the processor goes where those
spans go: :func:`attach_global` adds it to the global provider when that is an SDK
``TracerProvider`` (the user's, or anything else with ``add_span_processor``), and when
none is set installs an SDK provider of pytest-prove's own, with no exporter.  It is done
once a process, after the first capturing item's fixtures are set up, so that a provider
the user installs in ``conftest.py`` or in a fixture is found.  OpenTelemetry lets a
process set its global provider only once: the one pytest-prove installed stays for the
rest of the process, and a provider the user sets after that is refused by OpenTelemetry
(it logs "Overriding of current TracerProvider is not allowed").

**Taking it out again.**  The SDK has no public way to remove a span processor: the
provider keeps them in a private multi-processor (``_active_span_processor``, a
``SynchronousMultiSpanProcessor`` or ``ConcurrentMultiSpanProcessor``, each with its own
private tuple and lock), and editing that tuple would depend on private names that differ
between the two and between SDK versions, and race with spans in flight.  So the processor
stays in the provider and becomes inert when the session ends (``users`` drops to 0: one
attribute read per span), and a later session in the same process (pytester runs it in
process) takes the same one up again instead of adding another.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Final, final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import (
    ConcurrentMultiSpanProcessor,
    ReadableSpan,
    Span,
    SpanProcessor,
    TracerProvider,
)
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, DEFAULT_ON

from ..running.recording import MAX_SPANS, EpisodeLog, current_log
from .spans import INSTALLED, SDK_DISABLED, YOURS, sdk_disabled, span_record, usage_of_span

__all__ = ["EpisodeSpanProcessor", "attach_global", "private_provider", "refusal", "release",
           "sampling"]
#: Marks the provider pytest-prove installed (it survives pytester dropping this module).
_MARK: Final = "_pytest_prove_installed"


@final
class EpisodeSpanProcessor(SpanProcessor):
    """Gives every span to the episode of its parent span, or else to the episode whose
    context it started in.

    ``on_start`` takes the episode of the span's parent when that is an episode's open span,
    or else reads the running episode's log from its context variable; notes the parent,
    and keeps the log by span id until ``on_end``, so that a span ended from another
    context still reaches the episode that started it.  ``on_end`` stores the span and
    its token usage; which usage counts is decided when the episode ends (see
    ``running.endings._tokens``).  A closed episode (its record made) takes nothing more.

    Spans with token usage that no episode takes are counted in ``lost``: ``"outside"``,
    started while a capturing item runs where no episode's context reached and under no
    episode's span (a thread that did not copy the context), and ``"late"``, ended after
    their episode's record was made; so that the session can say that tokens went
    uncounted, and why.
    """

    def __init__(self) -> None:
        # Weak: a span that never ends must not keep its episode's log alive.
        self._owners: weakref.WeakValueDictionary[tuple[int, int], EpisodeLog] = (
            weakref.WeakValueDictionary())
        #: Spans no episode took while a session captures, until they end: "outside" any
        #: episode, or started "late" in one whose record was made.
        self._strays: dict[tuple[int, int], str] = {}
        self._lock = threading.Lock()
        #: Sessions (capture managers) using it now; with none it does nothing.
        self.users = 0
        #: Capturing items running their episodes now: only then is a span with usage
        #: outside every episode counted as lost (not a plain test's, nor a fixture's).
        self.watching = 0
        self.lost = {"outside": 0, "late": 0}

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self.users:
            return
        context = span.context
        if context is None:
            return
        parent = span.parent
        owner = None
        if parent is not None:
            # Under a span of an episode: it is that episode's, wherever it runs (a thread
            # that did not copy the episode's context, or a worker task that another
            # episode started and that serves them all).
            with self._lock:
                owner = self._owners.get((parent.trace_id, parent.span_id))
        log = owner if owner is not None and not owner.closed else current_log() or owner
        if log is not None and log.capture is None:
            return  # a rollout that does not capture
        key = (context.trace_id, context.span_id)
        if log is None and not self.watching:
            return  # the session's own code, between episodes
        if log is None or log.closed:
            # Started outside every episode while episodes run (in a thread the episode's
            # context did not reach), or after the episode's record was made: counted at
            # its end if it carries usage.
            with self._lock:
                if len(self._strays) < _MAX_STRAYS:  # spans that never end stay here
                    self._strays[key] = "outside" if log is None else "late"
            return
        with self._lock:
            self._owners[key] = log
        log.parents[f"{context.span_id:016x}"] = (None if parent is None
                                                  else f"{parent.span_id:016x}")

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        key = (context.trace_id, context.span_id)
        with self._lock:
            log = self._owners.pop(key, None)
            stray = self._strays.pop(key, None)
        if log is None or log.capture is None or log.closed:
            # Not an episode's, or it ended after its episode's record was made.
            why = "late" if log is not None else stray
            if why is not None and self.users and usage_of_span(
                    span.attributes or {}) is not None:
                with self._lock:
                    self.lost[why] += 1
            return
        usage = usage_of_span(span.attributes or {})
        if usage is not None:
            usage["span"] = f"{context.span_id:016x}"
            log.usage.append(usage)
        if len(log.spans) < MAX_SPANS:
            log.spans.append(span_record(span, log.capture, _wall_start(log)))
        else:
            with self._lock:
                log.spans_dropped += 1

    def shutdown(self) -> None:
        with self._lock:
            self._owners.clear()
            self._strays.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _wall_start(log: EpisodeLog) -> float:
    # EpisodeLog.started is perf_counter time; spans carry wall-clock nanoseconds.
    return time.time() - (time.perf_counter() - log.started)


#: The most spans outside episodes kept track of at once (a span that never ends stays).
_MAX_STRAYS: Final = 100_000

_lock = threading.Lock()
#: The processor added to each provider so far, by a weak reference to that provider.
_attached: list[tuple[Callable[[], object], EpisodeSpanProcessor]] = []


def _name(provider: object) -> str:
    kind = type(provider)
    return f"{kind.__module__}.{kind.__qualname__}"


def _reference(provider: object) -> Callable[[], object]:
    try:
        return weakref.ref(provider)
    except TypeError:  # not weakly referable: kept (a process has one global provider)
        return lambda: provider


def refusal(provider: object) -> str | None:
    """Why spans of ``provider`` cannot reach episodes, or None when they can."""
    if not callable(getattr(provider, "add_span_processor", None)):
        return (f"the global tracer provider is {_name(provider)}, which takes no span "
                "processor (install the OpenTelemetry SDK's TracerProvider, or let "
                "pytest-prove install one)")
    # The SDK's one public switch between its two multi-processors is this constructor
    # argument; the concurrent one calls every processor in a thread pool of its own, where
    # the episode running in the caller's context cannot be read.
    if isinstance(getattr(provider, "_active_span_processor", None),
                  ConcurrentMultiSpanProcessor):
        return (f"the global tracer provider {_name(provider)} runs its span processors in "
                "threads of its own (active_span_processor=ConcurrentMultiSpanProcessor), "
                "where the episode a span belongs to cannot be told; use the SDK's default "
                "(SynchronousMultiSpanProcessor)")
    return None


def sampling(provider: object) -> str | None:
    """The description of ``provider``'s sampler when it may leave spans unrecorded (their
    tokens cannot be counted), or None when it records every span of an episode."""
    sampler = getattr(provider, "sampler", None)
    if not callable(getattr(sampler, "get_description", None)):
        return None
    try:
        description = _description(sampler)
    except Exception:  # noqa: BLE001 - a sampler of the user's own: nothing to say of it
        return None
    return None if description in _RECORDS_ALL else description[:200]


def _description(sampler: Any) -> str:
    return str(sampler.get_description())


#: Samplers that record every span started in an episode (the SDK's default among them: a
#: span of an episode has no remote parent, unless the rollout gives it one).
_RECORDS_ALL: Final = frozenset(_description(s) for s in (ALWAYS_ON, DEFAULT_ON))


def attach_global() -> tuple[str, EpisodeSpanProcessor | None, str | None]:
    """Put the processor in the global tracer provider, installing an SDK provider when none
    is set, and count one more user of it; return how (:data:`INSTALLED`, :data:`YOURS`, or
    why it cannot), the processor (None when it cannot), and the user's provider's sampler
    when it may drop spans."""
    if sdk_disabled():
        return (SDK_DISABLED, None, None)
    with _lock:
        provider: Any = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            # Every span recorded, whatever OTEL_TRACES_SAMPLER says: it has no exporter,
            # and a span it did not record would be tokens not counted.
            own = TracerProvider(sampler=ALWAYS_ON)
            setattr(own, _MARK, True)
            trace.set_tracer_provider(own)
            provider = trace.get_tracer_provider()
        why = refusal(provider)
        if why is not None:
            return (why, None, None)
        _attached[:] = [(ref, p) for ref, p in _attached if ref() is not None]
        processor = next((p for ref, p in _attached if ref() is provider), None)
        if processor is None:
            processor = EpisodeSpanProcessor()
            try:
                provider.add_span_processor(processor)
            except Exception as exc:  # noqa: BLE001 - a provider of another kind may refuse
                return (f"the global tracer provider {_name(provider)} refused a span "
                        f"processor: {type(exc).__name__}: {exc}"[:500], None, None)
            _attached.append((_reference(provider), processor))
        processor.users += 1
    if getattr(provider, _MARK, False):
        return INSTALLED, processor, None
    return YOURS, processor, sampling(provider)


def release(processor: EpisodeSpanProcessor) -> None:
    """One user fewer: with none left the processor does nothing."""
    with _lock:
        processor.users = max(0, processor.users - 1)


def private_provider() -> tuple[TracerProvider, EpisodeSpanProcessor]:
    """A provider of the session's own, for instrumentors when the global provider takes no
    processor: their spans are captured, those through the global API are not."""
    provider = TracerProvider(sampler=ALWAYS_ON)
    processor = EpisodeSpanProcessor()
    processor.users = 1
    provider.add_span_processor(processor)
    return provider, processor
