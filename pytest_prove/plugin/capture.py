"""Span capture on the pytest side: its ini options, the hooks that switch it on for the
items that ask for it, and the controller's record of what every process captured.

What is switched on, and how spans reach an episode, is the OpenTelemetry side:
:mod:`pytest_prove.traces.capture`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

import pytest

from .. import wire
from ..declare.capture import DEFAULT_MAX_BYTES, CaptureConfig, CaptureError
from ..traces.capture import GLOBAL_KEY, SAMPLER_KEY, SpanCapture, end_lines, start_lines
from .state import CAPTURE_KEY, PLAN_KEY, own, rollouts_possible

__all__ = ["CaptureManager", "add_options", "register"]


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


@final
class CaptureManager(SpanCapture):
    """One per process (registered as ``prove_capture``): switches capture on when the first
    item that asks for it is set up, and off at the end of the session.

    On the controller (``run`` given) it also collects what every process reports: where
    spans of the global API go, which instrumentors run and why the others do not.
    """

    def __init__(self, config: pytest.Config, run: Any | None = None) -> None:
        super().__init__()
        self.config = config
        self.run = run  # the controller's RunRecorder; None on an xdist worker
        self.lines: list[str] = []  # what did not run, for the summary
        self.default = _ini_config(config)
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
            lost = self.take_lost()
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
        keys = ([] if status.get("global") is None else [GLOBAL_KEY]) + (
            [] if status.get("sampler") is None else [SAMPLER_KEY]) + [
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


class _CaptureGate:
    """Registers the manager's per-item hooks only when some collected rollout captures:
    a sweep without capture pays nothing per item for the feature, nor imports
    OpenTelemetry."""

    def __init__(self, manager: CaptureManager) -> None:
        self.manager = manager

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        wanted = self.manager.default is not None or (rollouts_possible(config) and any(
            getattr(plan.declaration, "capture", None) is not None
            for plan in (item.stash.get(PLAN_KEY, None) for item in items) if plan is not None))
        if wanted and not config.pluginmanager.is_registered(self.manager):
            own(config, self.manager, "prove_capture")


def register(config: pytest.Config, run: Any | None = None) -> CaptureManager:
    """This process's capture manager (``run``: the controller's recorder, or None on an
    xdist worker), switched on by its gate once a collected rollout asks for capture."""
    manager = CaptureManager(config, run)
    own(config, _CaptureGate(manager), "prove_capture_gate")
    return manager
