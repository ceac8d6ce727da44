"""The report files a session writes: ``--prove-report`` (the comparison, or the run alone
when there is no baseline) and GitHub's step summary."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from ..store import Run
from .settings import Settings

if TYPE_CHECKING:  # a session that compares nothing never imports the engine
    from ..review import Review

__all__ = ["write_reports"]


class ProveSession(Protocol):
    """What of the controller's session (:class:`~.session.ProveSession`) this reads."""

    config: pytest.Config
    baseline: Run | None
    asked: Mapping[str, Any]
    settings: Settings

    def ended_run(self) -> Run: ...


class Outcome(Protocol):
    """What of a session's outcome (:class:`~.session.Outcome`) this reads and adds to."""

    review: Review | None
    notes: tuple[str, ...]


def _rel(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


def write_reports(prove: ProveSession, outcome: Outcome) -> None:
    """--prove-report: the comparison, or without a baseline the run on its own (each
    condition's rates with exact intervals); the comparison's summary also goes to
    GitHub's step summary."""
    path = prove.config.getoption("prove_report", None)
    found = outcome.review
    if found is None:
        if path is not None and prove.baseline is None:
            _write_run_report(prove, outcome, Path(path))
        elif path is not None:
            outcome.notes += (f"no report written to {path}: nothing was compared",)
        return
    if found.comparison is None and not found.metrics_only:
        if path is not None:
            outcome.notes += (f"no report written to {path}: nothing was compared",)
        return
    from ..report.files import write_report
    from ..report.markdown import append_step_summary, render_markdown

    if path is not None:
        try:
            written = write_report(Path(path), found)
        except (OSError, ValueError) as exc:
            outcome.notes += (f"report not written to {path}: {exc}",)
        else:
            outcome.notes += (f"report written to {_rel(written)}",)
    append_step_summary(render_markdown(found))


def _write_run_report(prove: ProveSession, outcome: Outcome, path: Path) -> None:
    from ..report.files import write_report
    from ..review.describe import describe

    try:
        found = describe(prove.ended_run(), events=prove.asked.get("events"),
                         missing=prove.asked.get("missing", "test"), q=prove.settings.q,
                         max_mde=prove.settings.max_mde,
                         max_errored=prove.settings.max_errored)
        found.require_rows()
        written = write_report(path, found)
    except (OSError, ValueError) as exc:
        outcome.notes += (f"report not written to {path}: {exc}",)
    else:
        outcome.notes += (f"report of this run alone written to {_rel(written)} (no "
                          "baseline: each condition's rates with exact intervals)",)
