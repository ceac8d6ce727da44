"""OpenTelemetry spans per episode, and the token usage they carry.

``[capture]`` in a sweep spec, ``capture=`` on ``@prove.rollout``, or the ini options
``prove_capture_*`` name instrumentors (entry point group ``opentelemetry_instrumentor``).
They are switched on with a tracer provider of this session's own, whose
:class:`EpisodeSpanProcessor` gives each span to the episode that was running when
the span started: it reads the episode's log from its context variable, never from
a global, so replicates running at once in threads or asyncio tasks keep their own.

Stored spans keep no prompt or completion unless ``content = true``, and every stored
value is cut to ``max_observation_bytes``.  Token usage is read from the GenAI
semantic-convention attributes of each span.
"""

from __future__ import annotations

import contextlib
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
    CaptureConfig,
    CaptureError,
    span_record,
    usage_of_span,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["CaptureConfig", "CaptureError", "CaptureManager", "add_options",
           "register", "span_record", "usage_of_span"]

def add_options(parser: pytest.Parser) -> None:
    parser.addini("prove_capture_instrument", "OpenTelemetry instrumentors to switch on for "
                  "every rollout without its own capture (names of opentelemetry_instrumentor "
                  "entry points)", type="args", default=[])
    parser.addini("prove_capture_content", "keep prompts and completions in stored spans",
                  type="bool", default=False)
    parser.addini("prove_capture_max_observation_bytes", "the most bytes of any stored span "
                  "value", default=str(DEFAULT_MAX_BYTES))


def _ini_config(config: pytest.Config) -> CaptureConfig | None:
    names = [str(n) for n in config.getini("prove_capture_instrument")]
    if not names:
        return None
    raw = str(config.getini("prove_capture_max_observation_bytes"))
    try:
        limit = int(raw)
    except ValueError:
        raise pytest.UsageError(f"ini option prove_capture_max_observation_bytes: expected a "
                                f"whole number, got {raw!r}") from None
    try:
        return CaptureConfig.from_mapping(
            {"instrument": names, "content": bool(config.getini("prove_capture_content")),
             "max_observation_bytes": limit}, "ini prove_capture_*")
    except CaptureError as exc:
        raise pytest.UsageError(str(exc)) from None


# ---------------------------------------------------------------------------
# spans to records


# ---------------------------------------------------------------------------
# switching instrumentors on, per process


def _entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


@final
class CaptureManager:
    """One per process (registered as ``prove_capture``): switches instrumentors on when
    the first item that asks for them runs, and off at the end of the session.

    On the controller (``session`` given) it also collects what every process
    reports: which instrumentors run and why the others do not.
    """

    def __init__(self, config: pytest.Config, run: Any | None = None) -> None:
        self.config = config
        self.run = run  # the controller's RunRecorder; None on an xdist worker
        self.lines: list[str] = []  # the instrumentors that did not run, for the summary
        self.default = _ini_config(config)
        self.provider: TracerProvider | None = None
        self.active: dict[str, Any] = {}
        self.missing: dict[str, str] = {}
        self._env_set = False
        self._announced: set[str] = set()
        self._reported: tuple[tuple[str, ...], tuple[tuple[str, str], ...]] | None = None

    # ---- every process

    def config_for(self, declaration: Any) -> CaptureConfig | None:
        capture = getattr(declaration, "capture", None)
        if capture is None:
            return self.default
        if isinstance(capture, CaptureConfig):
            return capture
        label = declaration.rollout_id or "the rollout"
        try:
            return CaptureConfig.from_mapping(capture, f"capture of {label}")
        except CaptureError as exc:
            raise pytest.UsageError(str(exc)) from None

    def ensure(self, config: CaptureConfig) -> None:
        names = [n for n in config.instrument if n not in self.active and n not in self.missing]
        if not names:
            return
        if self.provider is None:
            from opentelemetry.sdk.trace import TracerProvider

            from ._otel import EpisodeSpanProcessor

            self.provider = TracerProvider()
            self.provider.add_span_processor(EpisodeSpanProcessor())
        if config.content and CONTENT_ENV not in os.environ:
            os.environ[CONTENT_ENV] = "true"
            self._env_set = True
        points = _entry_points()
        for name in names:
            point = points.get(name)
            if point is None:
                known = ", ".join(sorted(points)) or "none installed"
                self.missing[name] = (f"not installed: no {ENTRY_POINT_GROUP} entry point named "
                                      f"{name!r} (installed: {known})")
                continue
            try:
                instrumentor = point.load()()
                instrumentor.instrument(tracer_provider=self.provider,
                                        raise_exception_on_conflict=True)
            except Exception as exc:  # noqa: BLE001 - any failure is reported, never fatal
                self.missing[name] = f"cannot be switched on: {type(exc).__name__}: {exc}"[:500]
                continue
            self.active[name] = instrumentor

    def stop(self) -> None:
        for instrumentor in self.active.values():
            with contextlib.suppress(Exception):  # switching off must not fail a session
                instrumentor.uninstrument()
        self.active.clear()
        if self.provider is not None:
            self.provider.shutdown()
            self.provider = None
        if self._env_set:
            os.environ.pop(CONTENT_ENV, None)
            self._env_set = False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None:
            return
        config = self.config_for(plan.declaration)
        if config is None or not config.instrument:
            return
        self.ensure(config)
        item.stash[CAPTURE_KEY] = config

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Any:
        report = yield
        if call.when == "setup" and CAPTURE_KEY in item.stash:
            state = (tuple(sorted(self.active)), tuple(sorted(self.missing.items())))
            if state != self._reported:
                # Sent whenever it changes, so that the controller can tell the user.
                self._reported = state
                wire.attach(report, capture={"instrumented": sorted(self.active),
                                             "missing": dict(self.missing)})
        return report

    def pytest_sessionfinish(self) -> None:
        self.stop()

    def pytest_unconfigure(self) -> None:
        self.stop()

    # ---- the controller

    def record_status(self, status: Mapping[str, Any]) -> None:
        """What a process reported of its instrumentors (called by the controller's session)."""
        if self.run is None:
            return
        manifest = self.run.writer.manifest.setdefault(
            "capture", {"instrumented": [], "missing": {}})
        manifest["instrumented"] = sorted(set(manifest["instrumented"])
                                          | set(status["instrumented"]))
        manifest["missing"].update(status["missing"])
        new = [n for n in [*status["instrumented"], *status["missing"]]
               if n not in self._announced]
        if new:
            self._announced.update(new)
            self._write(start_lines(status))
        self.lines = end_lines(manifest)

    def _write(self, lines: list[str]) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        reporter.ensure_newline()
        for line in lines:
            reporter.write_line(line)


def start_lines(status: Mapping[str, Any]) -> list[str]:
    lines = []
    if status["instrumented"]:
        lines.append(f"pytest-prove capture: spans of {', '.join(status['instrumented'])} "
                     "stored with each episode")
    for name, why in status["missing"].items():
        lines.append(f"pytest-prove capture: instrumentor {name!r} is {why}; the run goes "
                     "on without its spans")
    return lines


def end_lines(manifest: Mapping[str, Any]) -> list[str]:
    missing = manifest.get("missing") or {}
    if not missing:
        return []
    return [f"capture: instrumentor {name!r} did not run ({why.split(':')[0]}); "
            f"episodes have no spans from it, see the manifest's capture.missing"
            for name, why in missing.items()]


class _CaptureGate:
    """Registers the manager's per-item hooks only when some collected rollout captures:
    a sweep without ``[capture]`` pays nothing per item for the feature."""

    def __init__(self, manager: CaptureManager) -> None:
        self.manager = manager

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        wanted = bool(self.manager.default and self.manager.default.instrument) or any(
            getattr(plan.declaration, "capture", None)
            for plan in (item.stash.get(PLAN_KEY, None) for item in items) if plan is not None)
        if wanted and not config.pluginmanager.is_registered(self.manager):
            own(config, self.manager, "prove_capture")


def register(config: pytest.Config, run: Any | None = None) -> CaptureManager:
    """This process's capture manager (``run``: the controller's recorder, or None on an
    xdist worker), switched on by its gate once a collected rollout asks for capture."""
    manager = CaptureManager(config, run)
    own(config, _CaptureGate(manager), "prove_capture_gate")
    return manager
