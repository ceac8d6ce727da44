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
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from ..running.recording import MAX_SPANS, EpisodeLog, current_log
from .spans import INSTALLED, YOURS, span_record, usage_of_span

__all__ = ["EpisodeSpanProcessor", "attach_global", "private_provider", "release"]
#: Marks the provider pytest-prove installed (it survives pytester dropping this module).
_MARK: Final = "_pytest_prove_installed"


@final
class EpisodeSpanProcessor(SpanProcessor):
    """Gives every span to the episode whose context it started in.

    ``on_start`` reads the running episode's log from its context variable (or, in a
    context without one, takes the episode of the span's parent), notes the span's parent,
    and keeps the log by span id until ``on_end``, so that a span ended from another
    context still reaches the episode that started it.  ``on_end`` stores the span and
    its token usage; which usage counts is decided when the episode ends (see
    ``running.runner._tokens``).  A closed episode (its record made) takes nothing more.
    """

    def __init__(self) -> None:
        # Weak: a span that never ends must not keep its episode's log alive.
        self._owners: weakref.WeakValueDictionary[tuple[int, int], EpisodeLog] = (
            weakref.WeakValueDictionary())
        self._lock = threading.Lock()
        #: Sessions (capture managers) using it now; with none it does nothing.
        self.users = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self.users:
            return
        context = span.context
        if context is None:
            return
        parent = span.parent
        log = current_log()
        if log is None and parent is not None:
            # Started where the episode's context did not reach (a thread that did not
            # copy it), under a span of an episode: it is that episode's.
            with self._lock:
                log = self._owners.get((parent.trace_id, parent.span_id))
        if log is None or log.capture is None or log.closed:
            return
        with self._lock:
            self._owners[(context.trace_id, context.span_id)] = log
        log.parents[f"{context.span_id:016x}"] = (None if parent is None
                                                  else f"{parent.span_id:016x}")

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        with self._lock:
            log = self._owners.pop((context.trace_id, context.span_id), None)
        if log is None or log.capture is None or log.closed:
            return  # not an episode's, or it ended after its episode's record was made
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

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _wall_start(log: EpisodeLog) -> float:
    # EpisodeLog.started is perf_counter time; spans carry wall-clock nanoseconds.
    return time.time() - (time.perf_counter() - log.started)


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


def attach_global() -> tuple[str, EpisodeSpanProcessor | None]:
    """Put the processor in the global tracer provider, installing an SDK provider when none
    is set, and count one more user of it; return how (:data:`INSTALLED`, :data:`YOURS`, or
    why it cannot) and the processor (None when it cannot)."""
    with _lock:
        provider: Any = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            own = TracerProvider()
            setattr(own, _MARK, True)
            trace.set_tracer_provider(own)
            provider = trace.get_tracer_provider()
        add = getattr(provider, "add_span_processor", None)
        if not callable(add):
            return (f"the global tracer provider is {_name(provider)}, which takes no span "
                    "processor (install the OpenTelemetry SDK's TracerProvider, or let "
                    "pytest-prove install one)", None)
        _attached[:] = [(ref, p) for ref, p in _attached if ref() is not None]
        processor = next((p for ref, p in _attached if ref() is provider), None)
        if processor is None:
            processor = EpisodeSpanProcessor()
            try:
                add(processor)
            except Exception as exc:  # noqa: BLE001 - a provider of another kind may refuse
                return (f"the global tracer provider {_name(provider)} refused a span "
                        f"processor: {type(exc).__name__}: {exc}"[:500], None)
            _attached.append((_reference(provider), processor))
        processor.users += 1
    return (INSTALLED if getattr(provider, _MARK, False) else YOURS), processor


def release(processor: EpisodeSpanProcessor) -> None:
    """One user fewer: with none left the processor does nothing."""
    with _lock:
        processor.users = max(0, processor.users - 1)


def private_provider() -> tuple[TracerProvider, EpisodeSpanProcessor]:
    """A provider of the session's own, for instrumentors when the global provider takes no
    processor: their spans are captured, those through the global API are not."""
    provider = TracerProvider()
    processor = EpisodeSpanProcessor()
    processor.users = 1
    provider.add_span_processor(processor)
    return provider, processor
