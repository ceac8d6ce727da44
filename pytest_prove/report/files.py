"""A report written to a file: its kind chosen by the file's suffix, the file replaced whole
(a reader never sees half a report, and a failed write leaves the old one)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Final

from pytest_prove.review import Review

from .html import render_html
from .json import render_json
from .markdown import render_markdown

__all__ = ["SUFFIXES", "write_report"]

SUFFIXES: Final = (".html", ".md", ".json")


def write_report(path: Path, review: Review, *, x: str | None = None,
                 y: str | None = None) -> Path:
    """Write the report whose kind the suffix names (.html, .md or .json)."""
    suffix = path.suffix.lower()
    if suffix == ".json":
        text = render_json(review)
    elif suffix == ".md":
        text = render_markdown(review, verbose=True)
    elif suffix in (".html", ".htm"):
        text = render_html(review, x=x, y=y)
    else:
        raise ValueError(
            f"report {str(path)!r}: unknown kind {suffix or '(no suffix)'!r}; name the file "
            f"with one of {', '.join(SUFFIXES)}"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path
