"""OpenTelemetry spans per episode, and the token usage they carry.

Capture is on for a rollout with ``[capture]`` in its sweep spec or ``capture=`` on
``@prove.rollout`` (an empty table too), and for every other rollout when the ini says
``prove_capture = true`` or names instrumentors in ``prove_capture_instrument``.  With
capture on, an episode keeps:

- the spans emitted through the global OpenTelemetry API while it runs (frameworks that
  instrument themselves): pytest-prove adds its span processor to the global SDK
  ``TracerProvider`` the user installed, or installs one for the process when none is set
  (see :mod:`._otel` for how, when, and how it is taken out again);
- the spans of the instrumentors named in ``instrument`` (entry point group
  ``opentelemetry_instrumentor``), switched on with that same global provider, so that one
  rule counts the usage of both.

Each span goes to the episode of its parent span, or else to the episode whose context it
started in: the processor reads the episode's log from its context variable, never from a
global, so replicates running at once in threads or asyncio tasks keep their own.  Token
usage is read from the GenAI semantic-convention attributes (``gen_ai.usage.*``) of each
span and counted once per model call: when the episode ends, a span with usage is left out
when a span below it in the episode has usage too (an agent span summing its calls; a
framework's chat span over the client instrumentor's span of the same call).  Spans with
usage that no episode took are counted and said at the end (the manifest's
``capture.lost``).

Stored spans keep no prompt or completion unless ``content = true``, every stored text
(value, key, name) is cut to ``max_observation_bytes``, and an episode stores at most
``MAX_SPANS`` spans.  The settings are checked where they are declared, before anything
runs.

This module is the OpenTelemetry side, and imports neither pytest nor the plugin: the
pytest side (the ini options, the per-item hooks, the controller's record of what every
process captured) is :mod:`pytest_prove.plugin.capture`.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any

from .spans import (
    CONTENT_ENV,
    ENTRY_POINT_GROUP,
    INSTALLED,
    SDK_DISABLED,
    YOURS,
    CaptureConfig,
    CaptureError,
    sdk_disabled,
    span_record,
    usage_of_span,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from ._otel import EpisodeSpanProcessor

__all__ = ["GLOBAL_KEY", "SAMPLER_KEY", "CaptureConfig", "CaptureError", "SpanCapture",
           "end_lines", "span_record", "start_lines", "usage_of_span"]


# ---------------------------------------------------------------------------
# switching capture on, per process

def _content_value() -> str:
    """The value of OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT that keeps prompts and
    completions on spans for the GenAI utilities installed.

    Instrumentors built on opentelemetry-util-genai with its latest conventions (the only
    ones its 1.x releases support) read a mode, ``SPAN_ONLY``, and take ``true`` for "no
    content"; earlier instrumentors, and the legacy path, read ``true``."""
    try:
        from opentelemetry.util.genai.types import ContentCapturingMode
        from opentelemetry.util.genai.utils import is_experimental_mode
    except ImportError:
        return "true"
    try:
        latest = bool(is_experimental_mode())
    except Exception:  # noqa: BLE001 - a utility that cannot tell is taken for the legacy one
        latest = False
    return "SPAN_ONLY" if latest and hasattr(ContentCapturingMode, "SPAN_ONLY") else "true"


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _not_installed(name: str, points: Mapping[str, object]) -> str:
    close = difflib.get_close_matches(name, list(points), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    known = ", ".join(sorted(points)) or "none installed"
    return (f"not installed: no {ENTRY_POINT_GROUP} entry point named {name!r} (installed: "
            f"{known}){hint}")


class SpanCapture:
    """What one process switched on to capture spans: the instrumentors, the span processor
    in the global provider (or a provider of its own), and what could not be switched on.

    The pytest side (:class:`pytest_prove.plugin.capture.CaptureManager`) switches it on
    when the first item that asks for capture is set up, and off at the end of the session.
    """

    def __init__(self) -> None:
        #: How spans of the global API are captured (_otel.INSTALLED or YOURS), or why not;
        #: None until the first capturing item is set up.
        self.global_api: str | None = None
        self.processor: EpisodeSpanProcessor | None = None
        #: The global provider's sampler, when it may leave spans of episodes unrecorded.
        self.sampler: str | None = None
        #: A provider of this session's own, only when the global one takes no processor.
        self.provider: TracerProvider | None = None
        self.private: EpisodeSpanProcessor | None = None
        #: Spans with usage no episode took (see EpisodeSpanProcessor.lost), as last sent.
        self._lost_sent: dict[str, int] = {}
        self.active: dict[str, Any] = {}
        self.missing: dict[str, str] = {}
        self._env_set = False

    def instrument(self, config: CaptureConfig) -> None:
        """Switch on the instrumentors ``config`` names that are not on yet."""
        names = [n for n in config.instrument if n not in self.active and n not in self.missing]
        if not names:
            return
        if sdk_disabled():
            self.missing.update(dict.fromkeys(names, f"not recording: {SDK_DISABLED}"))
            return
        if config.content and CONTENT_ENV not in os.environ:
            os.environ[CONTENT_ENV] = _content_value()
            self._env_set = True
        provider = self._instrument_provider()
        points = _entry_points()
        for name in names:
            point = points.get(name)
            if point is None:
                self.missing[name] = _not_installed(name, points)
                continue
            try:
                instrumentor = point.load()()
                instrumentor.instrument(tracer_provider=provider,
                                        raise_exception_on_conflict=True)
            except Exception as exc:  # noqa: BLE001 - any failure is reported, never fatal
                self.missing[name] = f"cannot be switched on: {type(exc).__name__}: {exc}"[:500]
                continue
            self.active[name] = instrumentor

    def _instrument_provider(self) -> TracerProvider | None:
        """The provider instrumentors get: None, the global one (installed or not yet, it is
        the one :meth:`attach` puts the processor in), unless the global provider takes no
        processor; then one of this session's own, so that their spans are still kept."""
        from opentelemetry import trace

        from ._otel import private_provider, refusal

        current = trace.get_tracer_provider()
        if isinstance(current, trace.ProxyTracerProvider) or refusal(current) is None:
            return None
        if self.provider is None:
            self.provider, self.private = private_provider()
        return self.provider

    def attach(self) -> None:
        """Capture the spans of the global API, once a session (after the first capturing
        item's fixtures, which may install the user's provider)."""
        if self.global_api is not None:
            return
        from ._otel import attach_global

        self.global_api, self.processor, self.sampler = attach_global()
        if self.processor is not None:
            # Shared with earlier sessions in this process: count from here on.
            self._lost_sent = dict(self.processor.lost)

    def take_lost(self) -> dict[str, int]:
        """Spans with usage no episode took since the last report, by why."""
        now: dict[str, int] = {}
        for processor in (self.processor, self.private):
            if processor is not None:
                for why, count in processor.lost.items():
                    now[why] = now.get(why, 0) + count
        new = {why: count - self._lost_sent.get(why, 0) for why, count in now.items()}
        self._lost_sent = now
        return {why: count for why, count in new.items() if count > 0}

    def stop(self) -> None:
        for instrumentor in self.active.values():
            with contextlib.suppress(Exception):  # switching off must not fail a session
                instrumentor.uninstrument()
        self.active.clear()
        if self.processor is not None:
            from ._otel import release

            release(self.processor)
            self.processor = None
        self.global_api = None
        self.sampler = None
        if self.provider is not None:
            self.provider.shutdown()
            self.provider = None
            self.private = None
        if self._env_set:
            os.environ.pop(CONTENT_ENV, None)
            self._env_set = False


#: What the controller announced for the spans of the global API, and of its sampler.
GLOBAL_KEY = " global"
SAMPLER_KEY = " sampler"


def _global_captured(status: Mapping[str, Any]) -> bool:
    return status.get("global") in (INSTALLED, YOURS)


def start_lines(status: Mapping[str, Any], new: set[str] | None = None) -> list[str]:
    """The lines that say, as a session starts, what capture stores (only what is ``new``
    to the controller, when given)."""

    def fresh(key: str) -> bool:
        return new is None or key in new

    lines = []
    stored = []
    if _global_captured(status) and fresh(GLOBAL_KEY):
        stored.append("through the global OpenTelemetry API")
    names = [n for n in status.get("instrumented", ()) if fresh(n)]
    if names:
        stored.append(f"of {', '.join(names)}")
    if stored:
        line = f"pytest-prove capture: spans {' and '.join(stored)} stored with each episode"
        if _global_captured(status) and fresh(GLOBAL_KEY):
            line += (" (in a tracer provider pytest-prove installed: none was set)"
                     if status["global"] == INSTALLED else " (added to your tracer provider)")
        lines.append(line)
    if status.get("global") is not None and not _global_captured(status) and fresh(GLOBAL_KEY):
        lines.append(f"pytest-prove capture: spans through the global OpenTelemetry API are "
                     f"not captured: {status['global']}; the run goes on without them")
    if status.get("sampler") is not None and fresh(SAMPLER_KEY):
        lines.append(f"pytest-prove capture: your tracer provider's sampler "
                     f"({status['sampler']}) may leave spans unrecorded; their usage is not "
                     "counted (a sampler that records every span: ALWAYS_ON)")
    for name, why in status.get("missing", {}).items():
        if fresh(name):
            lines.append(f"pytest-prove capture: instrumentor {name!r} is {why}; the run goes "
                         "on without its spans")
    return lines


def end_lines(manifest: Mapping[str, Any]) -> list[str]:
    """The summary's lines on what capture could not store."""
    lines = []
    if manifest.get("global") is not None and not _global_captured(manifest):
        lines.append("capture: spans through the global OpenTelemetry API were not captured; "
                     "see the manifest's capture.global")
    missing = manifest.get("missing") or {}
    lines.extend(f"capture: instrumentor {name!r} did not run ({why.split(':')[0]}); "
                 f"episodes have no spans from it, see the manifest's capture.missing"
                 for name, why in missing.items())
    if manifest.get("sampler") is not None:
        lines.append(f"capture: your tracer provider's sampler ({manifest['sampler']}) may have "
                     "left spans unrecorded, and their usage uncounted")
    lost = manifest.get("lost") or {}
    if lost.get("outside"):
        lines.append(f"capture: {lost['outside']} span(s) with token usage were started outside "
                     "any episode (in a thread that did not copy the episode's context? run it "
                     "with contextvars.copy_context().run, or asyncio.to_thread); their own "
                     "usage is counted in no episode")
    if lost.get("late"):
        lines.append(f"capture: {lost['late']} span(s) with token usage ended after their "
                     "episode was recorded (a thread or stream left running); their own usage is "
                     "not counted")
    return lines
