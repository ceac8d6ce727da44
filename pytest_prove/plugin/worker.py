"""The xdist worker's side: everything registered only on a worker (the mirror of
:mod:`.xdist`, the controller's side).

A worker runs rollouts and sends their episodes with each test report; it never writes the
store.  Registered here: dropping a report's episodes once they are sent, the token cap's
watch over the worker's own episodes (and the controller's word that the run reached it),
skipping the items of conditions a sequential run has decided, and span capture.  What the
controller tells a worker comes as commands on xdist's own channel (see :mod:`pytest_prove.wire`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, final

import pytest

from .. import wire
from . import capture
from .budget import CapWatch, token_cap_of
from .sequential import Skipper, sequential_possible
from .settings import Settings
from .state import DESIGN_FAILURE_KEY, DESIGN_NOTE_KEY, SETTINGS_KEY, own, plan_data

__all__ = ["WorkerCapWatch", "finish", "register", "take_worker_commands"]


def register(config: pytest.Config) -> None:
    """Register what only an xdist worker runs (called from ``pytest_configure``)."""
    own(config, WorkerReports(), "prove_worker_reports")
    _register_cap(config)
    _register_sequential(config)
    capture.register(config)


def finish(config: pytest.Config) -> None:
    """At the end of a worker's session: its plan, and why it refused the design if it did,
    go to the controller with the worker's output."""
    wire.to_worker_output(config.workeroutput,  # type: ignore[attr-defined]
                          plan=plan_data(config),
                          design_failure=config.stash.get(DESIGN_FAILURE_KEY, None),
                          design_note=config.stash.get(DESIGN_NOTE_KEY, None))


@final
class WorkerReports:
    """On an xdist worker: once a report has been sent to the controller (and counted
    against the cap), its episodes leave it; the worker's terminal keeps every report."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            wire.take(report, "episodes", "pending")


def take_worker_commands(config: pytest.Config, take: Callable[[Any], bool]) -> None:
    """Have xdist's worker offer each command it receives to ``take`` first.

    xdist's worker reads each command with its ``handle_command`` (looked up when its loop
    starts, after this) and ignores a name it does not know.  A command ``take`` returns
    True for is the plugin's own (the token cap's, the sequential looks' decisions); every
    other command goes on to xdist.  Without that worker object (another xdist), nothing is
    taken: the scheduler's taking back of queued items is then what stops the worker."""
    interactor = next((p for p in config.pluginmanager.get_plugins()
                       if type(p).__name__ == "WorkerInteractor"
                       and callable(getattr(p, "handle_command", None))), None)
    if interactor is None:
        return
    handle = interactor.handle_command

    def handle_command(command: Any) -> None:
        if not take(command):
            handle(command)

    interactor.handle_command = handle_command


# ---------------------------------------------------------------------------
# the token cap


@final
class WorkerCapWatch(CapWatch):
    """An xdist worker's watch: counts its own episodes from its reports."""

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        episodes = wire.take(report).get("episodes")
        if episodes:
            self.add(episodes)


def _register_cap(config: pytest.Config) -> None:
    """A watch that stops the worker once its own episodes reach the cap, and skips items
    once the controller says the run's did (its command on xdist's channel, or on the same
    machine its flag file)."""
    cap = token_cap_of(config)
    if not cap:
        return
    sent = wire.worker_input(getattr(config, "workerinput", {}))["cap_flag"]
    watch = WorkerCapWatch(cap, flag=Path(sent) if sent else None)
    own(config, watch, "prove_cap")

    def take(command: Any) -> bool:
        message = wire.cap_message(command)
        if message is None:
            return False
        if watch.message is None:
            watch.message = message
        return True

    take_worker_commands(config, take)


# ---------------------------------------------------------------------------
# sequential runs


@final
class _WorkerSkipper(Skipper):
    """Skips the items of conditions the controller decided: read from its file (same
    machine) or taken from its command."""

    def __init__(self, flag: Path | None, settings: Settings) -> None:
        self.flag = flag
        self.settings = settings
        self.decided = {}
        self.seen: float | None = None

    @property
    def sequential(self) -> bool:
        return self.settings.sequential

    def reason(self, key: str) -> str | None:
        if not self.sequential:  # this worker's collection found the session fixed
            return None
        if self.flag is not None:
            try:
                stamp = self.flag.stat().st_mtime_ns
            except OSError:
                stamp = None
            if stamp is not None and stamp != self.seen:
                with contextlib.suppress(OSError, ValueError):
                    found = json.loads(self.flag.read_text(encoding="utf-8"))
                    if isinstance(found, dict):
                        self.decided.update({str(k): str(v) for k, v in found.items()})
                        self.seen = stamp
        return self.decided.get(key)


def _register_sequential(config: pytest.Config) -> None:
    """In a run that may be sequential: skip items of decided conditions."""
    if not sequential_possible(config):
        return
    sent = wire.worker_input(getattr(config, "workerinput", {}))["sequential_flag"]
    skipper = _WorkerSkipper(Path(sent) if sent else None, config.stash[SETTINGS_KEY])
    own(config, skipper, "prove_sequential")

    def take(command: Any) -> bool:
        decided = wire.decided_message(command)
        if decided is None:
            return False
        skipper.decided.update(decided)
        return True

    take_worker_commands(config, take)
