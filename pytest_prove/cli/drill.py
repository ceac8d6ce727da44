"""The drill-down commands: from a verdict to the episodes behind it.  ``where`` and
``compare`` (at which step failing episodes stop), ``flips`` (the twins whose outcome
changed), ``episode`` (one episode whole, or beside its twin) and ``fix-check`` (did an event
get more or less frequent over cases)."""

from __future__ import annotations

import argparse

from ..config.values import error_rate, max_mde, missing_mode
from ..report import drilldown
from ..report import episode as episode_text
from ..review.episode import find_episode, first_difference, twin_of
from ..review.fixcheck import fix_check_runs
from ..review.flips import flips
from ..review.steps import compare_steps, where
from .base import EXIT_OK, Output, command, load_run, one_event, pair_arguments, pair_of, store_of

# --------------------------------------------------------------------------- where, compare


def _where_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest or baseline:NAME")
    one_event(parser)


@command("where", "where failing episodes stop, by step", _where_arguments)
def _where(args: argparse.Namespace, out: Output) -> int:
    found = where(load_run(store_of(args), args.run), args.event)
    out.answer("where", drilldown.where_document(found), drilldown.where_lines(found))
    return EXIT_OK


def _steps_arguments(parser: argparse.ArgumentParser) -> None:
    pair_arguments(parser)
    one_event(parser)
    parser.add_argument("--q", type=error_rate, default=0.05,
                        help="level of the test and of BH over step names; default 0.05")
    parser.add_argument("--max-hr", type=float, default=2.0,
                        help="the largest hazard ratio you accept not being able to see; "
                             "default 2.0")


@command("compare", "do failing episodes stop sooner after the change? (log-rank by step)",
         _steps_arguments)
def _compare_steps(args: argparse.Namespace, out: Output) -> int:
    before, after = pair_of(args)
    done = compare_steps(before, after, args.event, q=args.q, max_hr=args.max_hr)
    out.answer("compare", drilldown.compare_steps_document(done),
               drilldown.compare_steps_lines(done))
    return EXIT_OK


# --------------------------------------------------------------------------- flips


def _flips_arguments(parser: argparse.ArgumentParser) -> None:
    pair_arguments(parser)
    parser.add_argument("--condition", action="append", default=[],
                        help="only this condition, as the comparison labels it "
                             "(ticket=refund; repeatable)")
    parser.add_argument("--event", action="append", default=[],
                        help="only this event's row: a declared outcome, or 'no outcome' "
                             "(repeatable; default: every row the comparison tests)")
    parser.add_argument("--missing", type=missing_mode, default=None,
                        help="episodes without an outcome: test (their row is listed) or "
                             "ignore; default: ini prove_missing, else test")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every changed twin (default: ten a condition)")


@command("flips", "the twins (same seed in both runs) whose outcome changed, and how to "
         "replay each", _flips_arguments)
def _flips(args: argparse.Namespace, out: Output) -> int:
    before, after = pair_of(args)
    found = flips(before, after, conditions=args.condition, events=args.event,
                  missing=args.missing)
    out.answer("flips", drilldown.flips_document(found),
               drilldown.flips_lines(found, args.verbose))
    return EXIT_OK


def _episode_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest or baseline:NAME")
    parser.add_argument("item", help="the episode: its item's id as pytest prints it, or the "
                                     "part in brackets (refund-r017)")
    parser.add_argument("--twin", metavar="RUN2",
                        help="also show its twin (same condition and replicate) in RUN2, side "
                             "by side, and where the two first differ")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="every attribute of every span, and whole tracebacks")


@command("episode", "one stored episode whole (steps, spans, tokens, error, replay), or "
         "beside its twin", _episode_arguments)
def _episode(args: argparse.Namespace, out: Output) -> int:
    found = find_episode(load_run(store_of(args), args.run), args.item)
    if args.twin is None:
        out.answer("episode", episode_text.episode_document(found),
                   episode_text.episode_lines(found, args.verbose))
        return EXIT_OK
    twin = twin_of(found, load_run(store_of(args), args.twin))
    apart = first_difference(found.record, twin.record)
    out.answer("episode", episode_text.episode_document(found, twin, apart),
               episode_text.twins_lines(found, twin, apart, args.verbose))
    return EXIT_OK


# --------------------------------------------------------------------------- fix-check


def _fix_arguments(parser: argparse.ArgumentParser) -> None:
    pair_arguments(parser)
    one_event(parser)
    parser.add_argument("--alpha", type=error_rate, default=0.05,
                        help="level of the test and of BH over cases; default 0.05")
    parser.add_argument("--max-mde", type=max_mde, default=0.20,
                        help="the smallest change a conclusive run must be able to see; "
                             "default 0.20")


@command("fix-check", "did the event get more or less frequent over cases? (exact CMH)",
         _fix_arguments)
def _fix_check(args: argparse.Namespace, out: Output) -> int:
    before, after = pair_of(args)
    done = fix_check_runs(before, after, args.event, alpha=args.alpha, max_mde=args.max_mde)
    out.answer("fix-check", drilldown.fix_check_document(done),
               drilldown.fix_check_lines(done))
    return EXIT_OK


