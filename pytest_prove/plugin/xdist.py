"""Hooks that exist only with pytest-xdist: settings down, plans and crashes up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling  # type: ignore[import-untyped]

from .. import wire
from .session import ProveSession
from .state import DESIGN_NOTE_KEY

__all__ = ["CappedLoadScheduling", "XdistHooks"]


class XdistHooks:
    """Registered on the controller only when xdist is installed."""

    def __init__(self, session: ProveSession) -> None:
        self.session = session

    def pytest_configure_node(self, node: Any) -> None:
        """Every worker seeds with the controller's salt and skips what a resumed run has.

        Only a worker on this machine (a ``popen`` gateway) is told where the token cap's
        flag file appears: a path on the controller's disk means nothing to a worker behind
        ``--tx socket=`` or ``ssh=``.  Every worker is also sent the cap's command on xdist's
        own channel (:func:`budget.tell_workers`), and the scheduler takes back what workers
        have queued (:class:`CappedLoadScheduling`)."""
        settings = self.session.settings
        flag = self.session.budget.flag
        local = bool(getattr(getattr(getattr(node, "gateway", None), "spec", None), "popen",
                             False))
        sequential = self.session.sequential
        wire.to_worker_input(node.workerinput, salt=settings.salt, done=settings.done,
                             cap_flag=None if flag is None or not local else str(flag),
                             replay=settings.replay, chaos=settings.chaos_references,
                             sequential_flag=None if sequential is None or not local
                             else str(sequential.flag), version=_version(),
                             arms=settings.arm_references)

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        output = wire.worker_output(getattr(node, "workeroutput", None))
        plan = output["plan"]
        if plan is not None:
            self.session.run.merge_plan(plan)
        if output["design_failure"]:
            self.session.design_failure = output["design_failure"]
        if output["design_note"]:
            self.session.config.stash[DESIGN_NOTE_KEY] = output["design_note"]

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """With --dist load and a token cap, a scheduler that can take queued items back;
        with --prove-concurrency, one that keeps each worker's queue filled (the window
        runs ahead over the items a worker was given)."""
        window = self.session.settings.concurrency > 1
        if not (self.session.budget.cap or window) or config.getvalue("dist") != "load":
            return None
        scheduler = CappedLoadScheduling(config, log)
        scheduler.prove_fill = window
        return scheduler

    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport,
                               sched: Any) -> None:
        worker = getattr(report, "node", None)
        name = getattr(getattr(worker, "gateway", None), "id", "a worker")
        self.session.on_crash(crashitem, f"{name} crashed while running {crashitem}")


class CappedLoadScheduling(LoadScheduling):  # type: ignore[misc]
    """xdist's load scheduling, which, once the token cap is reached, sends nothing more and
    takes back every item a worker has queued but not started (xdist's own "steal"
    command), so that each worker finishes at most the episode it is running.

    With ``prove_fill`` (``--prove-concurrency``), a worker's queue is filled as for quick
    tests even when its items take long: xdist keeps only two items on a worker whose last
    item took 0.1 s or more, and a worker's window sees only the items it was given."""

    prove_stopped = False
    prove_fill = False

    def prove_stop(self) -> None:
        self.prove_stopped = True
        for node, pending in self.node2pending.items():
            # pending[0] may be running; one steal per item, because a worker refuses a
            # whole request when any item of it has started.
            for index in pending[1:]:
                try:
                    node.send_steal([index])
                except OSError:  # execnet: the worker stopped itself at the cap (its
                    break  # channel is closed): an INTERNALERROR ended the session

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if self.prove_stopped:
            return
        if self.prove_fill and self.pending and not node.shutting_down:
            # Up to half the worker's share of what is left, each time an item ends (xdist
            # waits until fewer than a quarter remain): its window sees that far ahead.
            share = max(2, len(self.pending) // len(self.node2pending) // 2)
            missing = share - len(self.node2pending[node])
            if missing > 0:
                self._send_tests(node, missing)
            return
        super().check_schedule(node, duration=duration)

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        # Taken back after the cap: these never run, so they are not rescheduled either.
        for index in indices:
            if index in self.node2pending.get(node, []):
                self.node2pending[node].remove(index)


def _version() -> str:
    """This pytest-prove's version (read when asked: the package imports this module)."""
    import pytest_prove

    return pytest_prove.__version__
