"""Hooks that exist only with pytest-xdist: settings down, plans and crashes up."""

from __future__ import annotations

from typing import Any

import pytest

from .session import ProveSession

__all__ = ["XdistHooks"]


class XdistHooks:
    """Registered on the controller only when xdist is installed."""

    def __init__(self, session: ProveSession) -> None:
        self.session = session

    def pytest_configure_node(self, node: Any) -> None:
        """Every worker seeds with the controller's salt and skips what a resumed run has."""
        settings = self.session.settings
        node.workerinput["prove_salt"] = settings.salt
        node.workerinput["prove_done"] = [f"{r}\x1f{k}\x1f{n}" for r, k, n in settings.done]

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        output = getattr(node, "workeroutput", None) or {}
        plan = output.get("prove_plan")
        if plan:
            self.session.merge_plan(plan)

    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport,
                               sched: Any) -> None:
        worker = getattr(report, "node", None)
        name = getattr(getattr(worker, "gateway", None), "id", "a worker")
        self.session.on_crash(crashitem, f"{name} crashed while running {crashitem}")
