"""``pytest-prove regrade``: grade the answers a run kept again, with another grader (or the
same one, several times), into a new run paired with it."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config.values import count
from ..declare.grading import load_grader
from ..report import regrade as regrade_text
from ..review.labels import label_of
from ..review.pairing import RefusalError
from ..review.regrade import regrade
from ..store.regrading import check_new_name, write_regraded
from .base import EXIT_OK, EXIT_REFUSED, Output, command, load_run, store_of


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="the run whose answers to grade (a run name, run id or "
                                    "latest)")
    parser.add_argument("--grader", metavar="MODULE:FUNCTION",
                        help="the grader: function(answer, condition) -> outcome (default: "
                             "the grader the rollout declares)")
    parser.add_argument("--name", required=True, help="name of the new, regraded run")
    parser.add_argument("--times", type=_times, default=1,
                        help="grade each answer this many times and say how often the "
                             "grader agrees with itself (default 1)")


def _times(text: str) -> int:
    value = count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number, 1 or more, got {value}")
    return value


def _declared_grader(manifest: dict[str, object]) -> str | None:
    rollouts = manifest.get("rollouts")
    found = {str((info.get("declaration") or {}).get("grader"))
             for info in (rollouts.values() if isinstance(rollouts, dict) else ())
             if isinstance(info, dict) and (info.get("declaration") or {}).get("grader")}
    return found.pop() if len(found) == 1 else None


@command("regrade", "grade the answers a run kept again, into a new run paired with it",
         _arguments)
def _regrade(args: argparse.Namespace, out: Output) -> int:
    store = store_of(args)
    check_new_name(store, args.name)
    run = load_run(store, args.run)
    name = args.grader or _declared_grader(run.manifest)
    if name is None:
        raise RefusalError(
            f"name the grader: pytest-prove regrade {label_of(run)} --grader "
            "module:function --name NEW (its rollout declares none, or several)")
    grader = load_grader(name, Path(store.root).resolve().parent)
    done = regrade(run, grader, name, times=args.times)
    written = write_regraded(store, run, done.episodes, name=args.name, grader=name,
                             times=args.times, source_label=label_of(run))
    out.answer("regrade", regrade_text.regrade_document(done, written.name),
               regrade_text.regrade_lines(done, written.name))
    # Every episode refused by the grader: the run is kept (nothing is lost), the command
    # says it failed.
    return EXIT_OK if done.graded or not done.errors else EXIT_REFUSED
