"""What every ``pytest-prove`` command shares: the registry (:data:`COMMANDS`, filled by
:func:`command`), the exit statuses, the :class:`Output` that prints text or JSON, reading a
run (:func:`load_run`), and the arguments several commands take (two runs, the engine's
options).  Imports the store, the review and the renderers; never pytest or the plugin."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from ..config.values import error_rate, gate_fails_on, margin, max_mde, missing_mode
from ..report._format import REPORT_SCHEMA_VERSION
from ..review import Review, review
from ..store import Run, Store

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE", "Command", "Output",
           "command", "engine_options", "load_run", "one_event", "pair_arguments", "pair_of",
           "review_of", "step_summary", "store_of"]

EXIT_OK: Final = 0
EXIT_REFUSED: Final = 1
EXIT_USAGE: Final = 2
EXIT_FAILED: Final = 4

Handler = Callable[[argparse.Namespace, "Output"], int]


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand: its name, a one-line help, its arguments and what it does."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler


#: Every subcommand, in the order ``--help`` lists them.
COMMANDS: dict[str, Command] = {}


def command(name: str, summary: str,
            arguments: Callable[[argparse.ArgumentParser], None] = lambda p: None,
            ) -> Callable[[Handler], Handler]:
    """Register the decorated function as the subcommand ``name``."""
    def register(function: Handler) -> Handler:
        COMMANDS[name] = Command(name, summary, arguments, function)
        return function
    return register


@dataclass(slots=True)
class Output:
    """Where a command writes: lines of text, or one JSON document with ``--json``."""

    as_json: bool
    stream: TextIO = field(default_factory=lambda: sys.stdout)

    def line(self, text: str = "") -> None:
        if not self.as_json:
            print(text, file=self.stream)

    def lines(self, texts: Sequence[str]) -> None:
        for text in texts:
            self.line(text)

    def answer(self, command_name: str, body: dict[str, Any], texts: Sequence[str]) -> None:
        """A command's answer: ``body`` as its JSON document with ``--json``, else ``texts``."""
        self.document(command_name, body)
        self.lines(texts)

    def document(self, command_name: str, body: dict[str, Any]) -> None:
        if self.as_json:
            doc = {"schema_version": REPORT_SCHEMA_VERSION, "command": command_name, **body}
            print(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False),
                  file=self.stream)


# --------------------------------------------------------------------------- reading runs


def load_run(store: Store, text: str) -> Run:
    """``Store.open(text)``, with what was read with a loss (a truncated tail) said on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = store.open(text)
    for note in caught:
        print(f"pytest-prove: note: {note.message}", file=sys.stderr)
    return run


def store_of(args: argparse.Namespace) -> Store:
    return Store(Path(args.store))


def pair_of(args: argparse.Namespace) -> tuple[Run, Run]:
    return load_run(store_of(args), args.before), load_run(store_of(args), args.after)


def review_of(args: argparse.Namespace) -> Review:
    """The review of the two runs the command names, refused when there is nothing to
    compare."""
    before, after = pair_of(args)
    margin_asked = getattr(args, "margin", None)
    done = review(before, after, events=args.event or None, q=args.q, max_mde=args.max_mde,
                  fail_on=gate_fails_on(getattr(args, "fail_on", None),
                                        margin=margin_asked is not None),
                  missing=args.missing, margin=margin_asked, chaos_differs=args.chaos_differs,
                  allow_underpowered=bool(getattr(args, "allow_underpowered", False))
                  and "too-small" not in (getattr(args, "fail_on", None) or ()),
                  max_errored=getattr(args, "max_errored", None))
    done.require_compared()
    return done


def step_summary(done: Review) -> None:
    from ..report.markdown import append_step_summary, render_markdown

    append_step_summary(render_markdown(done))


# --------------------------------------------------------------------------- arguments


def pair_arguments(parser: argparse.ArgumentParser, *, one_is_enough: bool = False) -> None:
    parser.add_argument("before", metavar="A", help="the run before the change (or a baseline)"
                        + ("; alone, the one run to describe" if one_is_enough else ""))
    parser.add_argument("after", metavar="B", nargs="?" if one_is_enough else None,
                        help="the run after the change")


def engine_options(parser: argparse.ArgumentParser, *, one_is_enough: bool = False) -> None:
    pair_arguments(parser, one_is_enough=one_is_enough)
    parser.add_argument("--event", action="append", default=[],
                        help="compare this outcome (repeatable; default: every declared "
                             "failure and success)")
    parser.add_argument("--q", type=error_rate, default=None,
                        help="error rate for flags (BH) and the verdict (Holm); default: "
                             "ini prove_q, else 0.05")
    parser.add_argument("--max-mde", type=max_mde, default=None,
                        help="the largest change you accept not being able to see; default: "
                             "ini prove_max_mde, else 0.20")
    parser.add_argument("--missing", type=missing_mode, default=None,
                        help="episodes without an outcome: test (a rise in their share is "
                             "worse) or ignore (they are infrastructure); default: ini "
                             "prove_missing, else test")
    parser.add_argument("--margin", type=margin, default=None, metavar="D",
                        help="test every condition and event against a non-inferiority "
                             "margin D (0 < D < 1): is its rise toward worse shown to be "
                             "below D? default: ini prove_margin, else no margin")
    parser.add_argument("--chaos-differs", action="store_true",
                        help="compare runs whose rollouts injected different faults (chaos): "
                             "the question whether the agent survives them (refused "
                             "without it)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show every row")


def one_event(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--event", default=None,
                        help="the outcome to follow (default: the one declared failure)")


