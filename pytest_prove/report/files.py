"""A report written to a file: its kind chosen by the file's suffix."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pytest_prove.review.context import ReportContext
from pytest_prove.stats import Comparison

from .html import render_html
from .json import render_json
from .markdown import render_markdown

__all__ = ["SUFFIXES", "write_report"]

SUFFIXES: Final = (".html", ".md", ".json")


def write_report(path: Path, comparison: Comparison, context: ReportContext, *,
                 x: str | None = None, y: str | None = None) -> Path:
    """Write the report whose kind the suffix names (.html, .md or .json)."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        text = render_json(comparison, context)
    elif suffix == ".md":
        text = render_markdown(comparison, context, verbose=True)
    elif suffix in (".html", ".htm"):
        text = render_html(comparison, context, x=x, y=y)
    else:
        raise ValueError(
            f"report {str(path)!r}: unknown kind {suffix or '(no suffix)'!r}; name the file "
            f"with one of {', '.join(SUFFIXES)}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
