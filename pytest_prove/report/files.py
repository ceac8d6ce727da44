"""A report written to a file: its kind chosen by the file's suffix, the file replaced whole
(a reader never sees half a report, and a failed write leaves the old one)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

from pytest_prove.review import Review
from pytest_prove.review.describe import Description
from pytest_prove.review.figures import Figures, figures_of

from .html import render_html, render_run_html, worst_first
from .json import render_json, render_run_json
from .markdown import render_markdown, render_run_markdown

__all__ = ["SUFFIXES", "write_report"]

SUFFIXES: Final = (".html", ".md", ".json")


def _figures(done: Review) -> Figures:
    """The step curves and cost the HTML page draws; prices are found from the working
    folder, as ``pytest-prove cost`` finds them."""
    comparison = done.comparison
    order = worst_first(comparison.rows) if comparison is not None else None
    return figures_of(done, Path.cwd(), order=order)


def write_report(path: Path, review: Review | Description, *, x: str | None = None,
                 y: str | None = None) -> Path:
    """Write the report whose kind the suffix names (.html, .md or .json): of a comparison
    (a Review), or of one run on its own (a Description)."""
    suffix = path.suffix.lower()
    renderers: dict[str, Callable[[], str]]
    if isinstance(review, Description):
        found = review
        renderers = {".json": lambda: render_run_json(found),
                     ".md": lambda: render_run_markdown(found),
                     ".html": lambda: render_run_html(found, x=x, y=y)}
    else:
        done = review
        renderers = {".json": lambda: render_json(done),
                     ".md": lambda: render_markdown(done, verbose=True),
                     ".html": lambda: render_html(done, x=x, y=y,
                                                  figures=_figures(done))}
    render = renderers.get(".html" if suffix == ".htm" else suffix)
    if render is None:
        raise ValueError(
            f"report {str(path)!r}: unknown kind {suffix or '(no suffix)'!r}; name the file "
            f"with one of {', '.join(SUFFIXES)}"
        )
    text = render()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        # mkstemp makes the file 0600; a report is read by others as any file written is.
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return path


def _umask() -> int:
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
