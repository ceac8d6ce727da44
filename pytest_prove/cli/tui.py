"""``pytest-prove tui``: the store in the terminal, driven by the keyboard (usable over ssh).

The app itself is :mod:`.tui_app`, on Textual, an optional extra (``pytest-prove[tui]``):
it is imported only when the command runs, so every other command works without it, and
without it this command says what to install (exit 1).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import ProveError
from .base import EXIT_OK, Output, command, store_of

__all__ = ["TuiError"]

INSTALL = "pip install 'pytest-prove[tui]'"


class TuiError(ProveError):
    """``pytest-prove tui`` cannot start: textual is not installed, or no terminal."""


def _arguments(parser: argparse.ArgumentParser) -> None:
    # Read from the project's ini values, as every comparison of the command line is.
    parser.set_defaults(q=None, max_mde=None, missing=None, margin=None, fail_on=None,
                        max_errored=None, allow_underpowered=None)


@command("tui", "a terminal app over the store: runs, two compared, flipped twins, an "
         "episode (keyboard only: Enter, Escape, q)", _arguments)
def _tui(args: argparse.Namespace, out: Output) -> int:
    try:
        tui_app = importlib.import_module(".tui_app", __package__)
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("textual", "rich"):
            raise
        raise TuiError(f"the terminal app needs textual, an optional extra: {INSTALL} "
                       "(or read the store with pytest-prove runs, diff, flips and "
                       "episode)") from None
    if out.as_json:
        raise TuiError("tui is interactive and writes no JSON: for a document, use "
                       "pytest-prove runs --json or diff A B --json")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise TuiError("tui needs a terminal (its input and output are not one); for "
                       "text, use pytest-prove runs, diff, flips and episode")
    reading = tui_app.Reading(q=args.q, max_mde=args.max_mde, missing=args.missing,
                              margin=args.margin, fail_on=args.fail_on,
                              max_errored=args.max_errored,
                              allow_underpowered=bool(args.allow_underpowered))
    tui_app.TuiApp(store_of(args), reading).run()
    return EXIT_OK
