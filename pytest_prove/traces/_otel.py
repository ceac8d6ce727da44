"""The OpenTelemetry side of capture: a span processor that hands spans to episodes.

Imported only when an instrumentor is switched on, so that a session without
``[capture]`` never loads the OpenTelemetry SDK.
"""

from __future__ import annotations

import threading
import time
from typing import final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ..running.recording import EpisodeLog, current_log
from .spans import CaptureConfig, span_record, usage_of_span

__all__ = ["EpisodeSpanProcessor"]


@final
class EpisodeSpanProcessor(SpanProcessor):
    """Gives every span to the episode whose context it started in.

    ``on_start`` reads the running episode's log from its context variable and keeps it
    by span id until ``on_end``, so that a span ended from another context still
    reaches the episode that started it.
    """

    def __init__(self) -> None:
        self._owners: dict[tuple[int, int], EpisodeLog] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        log = current_log()
        if log is None or not isinstance(log.capture, CaptureConfig) or span.context is None:
            return
        with self._lock:
            self._owners[(span.context.trace_id, span.context.span_id)] = log

    def on_end(self, span: ReadableSpan) -> None:
        log: EpisodeLog | None = None
        if span.context is not None:
            with self._lock:
                log = self._owners.pop((span.context.trace_id, span.context.span_id), None)
        if log is None:
            log = current_log()
        if log is None or not isinstance(log.capture, CaptureConfig):
            return
        attributes = dict(span.attributes or {})
        usage = usage_of_span(attributes)
        if usage is not None:
            log.usage.append(usage)
        log.spans.append(span_record(span, log.capture, _wall_start(log)))

    def shutdown(self) -> None:
        with self._lock:
            self._owners.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _wall_start(log: EpisodeLog) -> float:
    # EpisodeLog.started is perf_counter time; spans carry wall-clock nanoseconds.
    return time.time() - (time.perf_counter() - log.started)
