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
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, final

import pytest

from .. import wire
from ..plugin.state import CAPTURE_KEY, PLAN_KEY, own
from .spans import (
    CONTENT_ENV,
    DEFAULT_MAX_BYTES,
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

__all__ = ["CaptureConfig", "CaptureError", "CaptureManager", "add_options",
           "register", "span_record", "usage_of_span"]

def add_options(parser: pytest.Parser) -> None:
    parser.addini("prove_capture", "capture the OpenTelemetry spans of every rollout without "
                  "a capture of its own (spans through the global API, and those of "
                  "prove_capture_instrument); on by itself when prove_capture_instrument "
                  "names any", type="bool", default=False)
    parser.addini("prove_capture_instrument", "OpenTelemetry instrumentors to switch on for "
                  "every rollout without its own capture (names of opentelemetry_instrumentor "
                  "entry points)", type="args", default=[])
    parser.addini("prove_capture_content", "keep prompts and completions in stored spans",
                  type="bool", default=False)
    parser.addini("prove_capture_max_observation_bytes", "the most bytes of any stored span "
                  "value", default=str(DEFAULT_MAX_BYTES))


def _ini_bool(config: pytest.Config, name: str) -> bool:
    try:
        return bool(config.getini(name))
    except (ValueError, pytest.UsageError) as exc:  # pytest 9 raises the latter, unnamed
        raise pytest.UsageError(f"ini option {name}: expected true or false ({exc})") from None


def _ini_config(config: pytest.Config) -> CaptureConfig | None:
    """The capture of every rollout without its own, from the ini options (checked whether
    capture is on or not); None when the ini leaves capture off."""
    names = [str(n) for n in config.getini("prove_capture_instrument")]
    on = _ini_bool(config, "prove_capture")
    content = _ini_bool(config, "prove_capture_content")
    raw = str(config.getini("prove_capture_max_observation_bytes"))
    try:
        limit = int(raw.strip())
    except ValueError:
        limit = -1
    if limit < 16:
        raise pytest.UsageError(f"ini option prove_capture_max_observation_bytes: expected a "
                                f"whole number >= 16, got {raw!r}")
    try:
        found = CaptureConfig.from_mapping(
            {"instrument": names, "content": content, "max_observation_bytes": limit},
            "ini prove_capture_*")
    except CaptureError as exc:
        raise pytest.UsageError(str(exc)) from None
    return found if on or names else None


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


@final
class CaptureManager:
    """One per process (registered as ``prove_capture``): switches capture on when the first
    item that asks for it is set up, and off at the end of the session.

    On the controller (``run`` given) it also collects what every process reports: where
    spans of the global API go, which instrumentors run and why the others do not.
    """

    def __init__(self, config: pytest.Config, run: Any | None = None) -> None:
        self.config = config
        self.run = run  # the controller's RunRecorder; None on an xdist worker
        self.lines: list[str] = []  # what did not run, for the summary
        self.default = _ini_config(config)
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
        self._announced: set[str] = set()
        self._reported: tuple[object, ...] | None = None

    # ---- every process

    def config_for(self, declaration: Any) -> CaptureConfig | None:
        """A rollout's capture (checked when it was declared), or the ini's."""
        capture = getattr(declaration, "capture", None)
        if capture is None:
            return self.default
        if isinstance(capture, CaptureConfig):
            return capture
        try:
            return CaptureConfig.from_mapping(capture, f"capture of {declaration.rollout_id}")
        except CaptureError as exc:
            raise pytest.UsageError(str(exc)) from None

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

    def _lost(self) -> dict[str, int]:
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

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Any:
        plan = item.stash.get(PLAN_KEY, None)
        config = None if plan is None else self.config_for(plan.declaration)
        if config is None:
            return (yield)
        # Instrumentors before the fixtures (which may build the clients they patch), the
        # global provider after them (which may install the user's).
        self.instrument(config)
        item.stash[CAPTURE_KEY] = config
        try:
            return (yield)
        finally:
            self.attach()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        # While a capturing item runs its episodes, a span with usage started outside every
        # episode is tokens lost (before and after, it is the session's own code's).
        processors = [p for p in (self.processor, self.private)
                      if p is not None and CAPTURE_KEY in item.stash]
        for processor in processors:
            processor.watching += 1
        try:
            return (yield)
        finally:
            for processor in processors:
                processor.watching -= 1

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Any:
        report = yield
        if call.when == "setup" and CAPTURE_KEY in item.stash:
            state = (self.global_api, self.sampler, tuple(sorted(self.active)),
                     tuple(sorted(self.missing.items())))
            if state != self._reported:
                # Sent whenever it changes, so that the controller can tell the user.
                self._reported = state
                status: dict[str, Any] = {"global": self.global_api,
                                          "instrumented": sorted(self.active),
                                          "missing": dict(self.missing)}
                if self.sampler is not None:
                    status["sampler"] = self.sampler
                wire.attach(report, capture=status)
        elif call.when == "call" and CAPTURE_KEY in item.stash:
            lost = self._lost()
            if lost:
                wire.attach(report, capture={"lost": lost})
        return report

    def pytest_sessionfinish(self) -> None:
        self.stop()

    def pytest_unconfigure(self) -> None:
        self.stop()

    # ---- the controller

    def record_status(self, status: Mapping[str, Any]) -> None:
        """What a process reported of its capture (called by the controller's session)."""
        if self.run is None:
            return
        manifest = self.run.writer.manifest.setdefault(
            "capture", {"global": None, "instrumented": [], "missing": {}})
        if status.get("global") is not None:
            manifest["global"] = status["global"]
        if status.get("sampler") is not None:
            manifest["sampler"] = status["sampler"]
        manifest["instrumented"] = sorted(set(manifest["instrumented"])
                                          | set(status.get("instrumented", ())))
        manifest["missing"].update(status.get("missing", {}))
        for why, count in (status.get("lost") or {}).items():
            lost = manifest.setdefault("lost", {})
            lost[why] = lost.get(why, 0) + count
        keys = ([] if status.get("global") is None else [_GLOBAL_KEY]) + (
            [] if status.get("sampler") is None else [_SAMPLER_KEY]) + [
            *status.get("instrumented", ()), *status.get("missing", {})]
        new = {k for k in keys if k not in self._announced}
        if new:
            self._announced.update(new)
            self._write(start_lines(status, new))
        self.lines = end_lines(manifest)

    def _write(self, lines: list[str]) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or not lines:
            return
        reporter.ensure_newline()
        for line in lines:
            reporter.write_line(line)


#: What the controller announced for the spans of the global API, and of its sampler.
_GLOBAL_KEY = " global"
_SAMPLER_KEY = " sampler"


def _global_captured(status: Mapping[str, Any]) -> bool:
    return status.get("global") in (INSTALLED, YOURS)


def start_lines(status: Mapping[str, Any], new: set[str] | None = None) -> list[str]:
    """The lines that say, as a session starts, what capture stores (only what is ``new``
    to the controller, when given)."""

    def fresh(key: str) -> bool:
        return new is None or key in new

    lines = []
    stored = []
    if _global_captured(status) and fresh(_GLOBAL_KEY):
        stored.append("through the global OpenTelemetry API")
    names = [n for n in status.get("instrumented", ()) if fresh(n)]
    if names:
        stored.append(f"of {', '.join(names)}")
    if stored:
        line = f"pytest-prove capture: spans {' and '.join(stored)} stored with each episode"
        if _global_captured(status) and fresh(_GLOBAL_KEY):
            line += (" (in a tracer provider pytest-prove installed: none was set)"
                     if status["global"] == INSTALLED else " (added to your tracer provider)")
        lines.append(line)
    if status.get("global") is not None and not _global_captured(status) and fresh(_GLOBAL_KEY):
        lines.append(f"pytest-prove capture: spans through the global OpenTelemetry API are "
                     f"not captured: {status['global']}; the run goes on without them")
    if status.get("sampler") is not None and fresh(_SAMPLER_KEY):
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


class _CaptureGate:
    """Registers the manager's per-item hooks only when some collected rollout captures:
    a sweep without capture pays nothing per item for the feature, nor imports
    OpenTelemetry."""

    def __init__(self, manager: CaptureManager) -> None:
        self.manager = manager

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        wanted = self.manager.default is not None or any(
            getattr(plan.declaration, "capture", None) is not None
            for plan in (item.stash.get(PLAN_KEY, None) for item in items) if plan is not None)
        if wanted and not config.pluginmanager.is_registered(self.manager):
            own(config, self.manager, "prove_capture")


def register(config: pytest.Config, run: Any | None = None) -> CaptureManager:
    """This process's capture manager (``run``: the controller's recorder, or None on an
    xdist worker), switched on by its gate once a collected rollout asks for capture."""
    manager = CaptureManager(config, run)
    own(config, _CaptureGate(manager), "prove_capture_gate")
    return manager
