"""``--lf`` across a change of blocks.

An item's id ends with its block of replicates: ``test[refund-r016-031]`` with
``--prove-concurrency=16``, ``test[refund-r017]`` without it (and ``r0017`` once there are
1,000 replicates or more).  pytest's ``--lf`` matches ids exactly, so after a change of
``--prove-concurrency``, ``concurrency=`` or ``--prove-replicates`` it would find none of
the failures it remembers and run the whole sweep.  This plugin reads the ids pytest
remembers as failed as (rollout and condition, replicates): while collecting, an item whose
replicates overlap a remembered failure of the same rollout and condition is remembered
as failed too, so ``--lf`` keeps it; at the end of the session a remembered id whose
replicates all ran again under other ids is forgotten (their own ids say how they ended).
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any

import pytest

from ..store.tally import ReplicateSet
from .items import RolloutItem
from .state import PLAN_KEY

__all__ = ["LastFailedBlocks", "block_of"]

#: ``<rollout and condition>[<condition>-]r<first>[-<last>]]``: what follows the last
#: ``r<digits>`` is the block, what precedes it names the rollout and its condition.
_BLOCK = re.compile(r"^(?P<head>.*\[(?:.*-)?)r(?P<first>\d+)(?:-(?P<last>\d+))?\]$")


def block_of(nodeid: str) -> tuple[str, range] | None:
    """``("t.py::test[refund-", range(16, 32))`` for ``t.py::test[refund-r016-031]``."""
    found = _BLOCK.match(nodeid)
    if found is None:
        return None
    first = int(found["first"])
    last = int(found["last"]) if found["last"] is not None else first
    return (found["head"], range(first, last + 1)) if last >= first else None


def _is_rollout(item: object) -> bool:
    if isinstance(item, RolloutItem):
        return True
    if isinstance(item, pytest.Function):
        if PLAN_KEY in item.stash:
            return True
        callspec = getattr(item, "callspec", None)
        return callspec is not None and "prove_block" in callspec.params
    return False


class LastFailedBlocks:
    """Registered as ``prove_lastfailed`` when pytest's cache plugin is on."""

    def __init__(self, lf: Any) -> None:
        self.lf = lf  # pytest's LFPlugin: its ``lastfailed`` maps ids to True
        self.ran: dict[str, ReplicateSet] = {}  # head -> replicates reported this session
        #: The ids of those items whose report failed (or was "rerun"): pytest's own
        #: bookkeeping keeps them in its list (one that passed has left it already).
        self.reported: set[str] = set()
        self._blocks: dict[str, list[range]] | None = None

    def _remembered(self) -> dict[str, list[range]]:
        """The failed blocks pytest remembered when the session started, by their head
        (read once: what this plugin adds while collecting changes nothing here)."""
        if self._blocks is None:
            self._blocks = {}
            for nodeid in getattr(self.lf, "lastfailed", None) or {}:
                block = block_of(str(nodeid))
                if block is not None:
                    self._blocks.setdefault(block[0], []).append(block[1])
        return self._blocks

    @pytest.hookimpl(wrapper=True, trylast=True)  # inside --lf's own filter, before it
    def pytest_make_collect_report(self, collector: pytest.Collector,
                                   ) -> Generator[None, pytest.CollectReport,
                                                  pytest.CollectReport]:
        report = yield
        lastfailed = getattr(self.lf, "lastfailed", None)
        if not lastfailed or not report.result:
            return report
        remembered = self._remembered()
        if not remembered:
            return report
        for item in report.result:
            # pytest 9 keys it by the node's structured id, older ones by the string.
            key = getattr(item, "id", item.nodeid)
            if not _is_rollout(item) or key in lastfailed:
                continue
            block = block_of(item.nodeid)
            if block is None:
                continue
            head, replicates = block
            if any(_overlap(replicates, failed) for failed in remembered.get(head, ())):
                lastfailed[key] = True
        return report

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Before any report: what the session started with.  When no remembered failure is
        # a block, nothing here has anything to do: no hook of it runs for each item.
        if not self._remembered():
            session.config.pluginmanager.unregister(self)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self._blocks == {}:
            # No remembered failure is a block: nothing for the session's end to forget
            # (a block that fails in this session is pytest's own to remember).
            return
        # A rollout's call and teardown reports name its replicates among its properties.
        if report.when == "setup" or not any(
                name == "prove_replicate" for name, _ in report.user_properties):
            return
        block = block_of(report.nodeid)
        if block is None:
            return
        if report.when == "call":
            self.ran.setdefault(block[0], ReplicateSet()).update(block[1])
        if report.outcome not in ("passed", "skipped"):
            self.reported.add(report.nodeid)

    @pytest.hookimpl(tryfirst=True)  # before the cache plugin writes what it remembers
    def pytest_sessionfinish(self) -> None:
        lastfailed = getattr(self.lf, "lastfailed", None)
        if not lastfailed or not self.ran:
            return
        for nodeid in list(lastfailed):
            text = str(nodeid)
            if text in self.reported:
                continue  # pytest's own bookkeeping
            block = block_of(text)
            ran = self.ran.get(block[0]) if block is not None else None
            if block is not None and ran is not None and all(r in ran for r in block[1]):
                del lastfailed[nodeid]


def _overlap(a: range, b: range) -> bool:
    return a.start < b.stop and b.start < a.stop
