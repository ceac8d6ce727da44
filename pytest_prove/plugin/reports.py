"""A rollout item's reports: what they carry to the controller (:class:`RolloutReports`),
and what the controller keeps of them, sharing what they hold alike
(:class:`ReportProperties`)."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Final, final

import pytest

from .calls import report_of

if TYPE_CHECKING:
    from .session import ProveSession

__all__ = ["ROLLOUT_ONLY", "ReportProperties", "RolloutReports", "SessionReports",
           "without_rollouts"]


@final
class RolloutReports:
    """The ``pytest_runtest_makereport`` wrapper of rollout items (see
    :func:`.calls.report_of`), registered as ``prove_rollout_reports``: an object of its
    own, so that a session whose selection kept no rollout unregisters it (see
    :func:`without_rollouts`)."""

    #: The wrapper itself, not a method delegating to it: three calls an item, each one
    #: generator less.
    pytest_runtest_makereport = staticmethod(pytest.hookimpl(wrapper=True)(report_of))


#: The names of the properties a rollout item's reports carry (see execute.py).
_PROPERTY_NAMES: Final = {name: name for name in
                          ("prove_replicate", "prove_seed", "prove_outcome")}


@final
class ReportProperties:
    """The controller keeps every test report to the end of the session (pytest's terminal
    reporter does): three for each rollout item, each with its own copy of the item's node
    id, location and keywords, and the call and teardown reports each with the item's
    properties (on an xdist controller, lists of tuples of new strings).  Once every plugin
    has seen a report (``--junitxml`` reads the teardown's properties), a rollout item's
    call and teardown reports take the setup report's node id, location and keywords when
    theirs are equal, and share one list of properties, whose names and outcomes are shared
    by all items: about 1.5 KB less an item.  What anyone reads is unchanged.  Called by
    :class:`SessionReports`."""

    #: What a rollout item's three reports hold alike (``_id``: pytest 9's structured id).
    SHARED: Final = ("nodeid", "location", "keywords", "_id")

    def __init__(self) -> None:
        #: Items whose setup was seen and teardown not yet: the setup report, and the
        #: properties the call report shares (None: no call yet, or not a rollout's).
        self._open: dict[str, tuple[pytest.TestReport, list[tuple[str, object]] | None]] = {}
        self._pairs: dict[tuple[str, object], tuple[str, object]] = {}  # shared outcomes

    def share(self, report: pytest.TestReport) -> None:
        when = report.when
        if when == "setup":
            self._open[report.nodeid] = (report, None)
            return
        if when == "call":
            found = self._open.get(report.nodeid)
            shared = self._properties(report.user_properties)
            if found is None or shared is None:
                self._open.pop(report.nodeid, None)  # not a rollout item's
                return
            report.user_properties = shared
            self._open[report.nodeid] = (found[0], shared)
            self._take_from(found[0], report)
        elif when == "teardown":
            found = self._open.pop(report.nodeid, None)
            if found is None or found[1] is None:
                return
            if type(report.user_properties) is list and report.user_properties == found[1]:
                report.user_properties = found[1]
            self._take_from(found[0], report)

    def _properties(self, found: object) -> list[tuple[str, object]] | None:
        """The call report's properties as a list to share, or None when they are not the
        plugin's own alone."""
        names = _PROPERTY_NAMES
        if not found or type(found) is not list:
            return None
        shared: list[tuple[str, object]] = []
        for pair in found:
            if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] in names):
                return None
            name, value = pair
            if (name == "prove_outcome" and isinstance(value, str)
                    and len(self._pairs) < 4096):
                shared.append(self._pairs.setdefault(pair, (names[name], value)))
            else:
                shared.append((names[name], value))
        return shared

    def _take_from(self, setup: pytest.TestReport, report: pytest.TestReport) -> None:
        mine, theirs = report.__dict__, setup.__dict__
        for name in self.SHARED:
            value = theirs.get(name)
            if (value is not None and name in mine and type(mine[name]) is type(value)
                    and mine[name] == value):
                mine[name] = value


@final
class SessionReports:
    """Every report reaches the controller; those of rollout items carry episodes, which
    the session reads (:meth:`.session.ProveSession.on_report`) before any other plugin
    logs the report (the live line and pytest's own line then count its episodes), and
    once every plugin has seen it, what a rollout item's reports hold alike is shared
    (:class:`ReportProperties`).  One hook for both (each hook of a plugin costs every
    report a call), registered apart from the session, as ``prove_session_reports``, so
    that a session whose selection kept no rollout unregisters it (:func:`without_rollouts`)."""

    def __init__(self, session: ProveSession) -> None:
        self.session = session
        self.properties = ReportProperties()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        # Before the others: read after them, a report's episodes reached the live line
        # (and the run) one report late, after pytest had written its next progress.
        self.session.on_report(report)
        try:
            return (yield)
        finally:
            self.properties.share(report)


#: The plugins whose hooks run for each test item (its setup, call and reports) and serve
#: rollout items only: calling the rollout, its reports' data, the controller reading them,
#: sharing what they hold alike, --lf's blocks.
ROLLOUT_ONLY = ("prove_calls", "prove_rollout_reports", "prove_session_reports",
                "prove_lastfailed", "prove_worker_reports",
                "prove_live", "prove_live_outcomes")


def without_rollouts(config: pytest.Config) -> None:
    """A process whose selection kept no rollout item (collected, so one process or an
    xdist worker) unregisters :data:`ROLLOUT_ONLY`: a test that is not a rollout pays
    nothing for the plugin (bench/instructions.py).  (--lf's blocks have nothing to do in
    it either: they read and forget rollout items' ids alone.)"""
    manager = config.pluginmanager
    for name in ROLLOUT_ONLY:
        plugin = manager.get_plugin(name)
        if plugin is not None:
            manager.unregister(plugin, name)
