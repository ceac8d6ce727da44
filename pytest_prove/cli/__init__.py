"""The ``pytest-prove`` command: read stored runs without pytest.

Every subcommand is one function registered in :data:`~.base.COMMANDS` by
:func:`~.base.command`; adding one is one decorated function (here, or in :mod:`.drill` for
the drill-down commands)::

    @command("cost", "token use and price of a run", lambda p: p.add_argument("run"))
    def _cost(args: argparse.Namespace, out: Output) -> int: ...

Exit status: 0 done (a check that passed), 1 refused (unknown run, a case check, bad input),
2 bad usage, 4 a check whose verdict failed.

Each command parses, opens the run(s), asks :mod:`pytest_prove.review` and prints what
:mod:`pytest_prove.report` words. This module imports the store, the review and the
renderers; never pytest or the plugin.  What needs the statistics (numpy, scipy: most of a
second of CPU) is imported by the command that uses it, and the modules of the drill-down
commands only when one of theirs runs or ``--help`` lists them all: listing the runs
imports neither (tests/test_polish.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..config.project import fill_defaults, project_settings
from ..config.values import error_rate, fail_on, max_mde, share
from ..errors import ProveError
from ..report import baselines as baselines_text
from ..report import runs as runs_text
from ..report._format import plain_text
from ..review import RefusalError
from ..review.baseline_diff import diff_baselines
from ..review.tallies import stored_runs, tally
from ..store import Run, Store, StoreError, read_baseline
from .base import (
    COMMANDS,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    Command,
    Output,
    command,
    engine_options,
    load_run,
    review_of,
    step_summary,
    store_of,
)

__all__ = ["COMMANDS", "Command", "Output", "all_commands", "command", "load_run", "main"]

# --------------------------------------------------------------------------- runs, show


@command("runs", "list the stored runs and baselines")
def _runs(args: argparse.Namespace, out: Output) -> int:
    store = store_of(args)
    runs, baselines = stored_runs(store, load_run)
    out.answer("runs", {"store": str(store.root), "runs": runs, "baselines": baselines},
               runs_text.runs_lines(store.root, runs, baselines))
    return EXIT_OK


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest or baseline:NAME")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every errored episode")


@command("show", "a run's manifest, tallies and errored episodes", _show_arguments)
def _show(args: argparse.Namespace, out: Output) -> int:
    counted = tally(load_run(store_of(args), args.run))
    out.answer("show", runs_text.show_document(counted),
               runs_text.show_lines(counted, args.verbose))
    return EXIT_OK


# --------------------------------------------------------------------------- diff, check, report


@command("diff", "compare two runs condition by condition", engine_options)
def _diff(args: argparse.Namespace, out: Output) -> int:
    from ..report import verdicts
    from ..report.json import comparison_document

    done = review_of(args)
    out.answer("diff", comparison_document(done),
               verdicts.diff_lines(done, args.verbose))
    step_summary(done)
    return EXIT_OK


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    engine_options(parser)
    parser.add_argument("--fail-on", type=fail_on, default=None,
                        help="verdicts that fail besides the defaults, comma-separated: "
                             "worse and too-small always, not-within with --margin; no-WORD "
                             "leaves one out on purpose (e.g. no-worse), and the output says "
                             "so; default: ini prove_fail_on")
    parser.add_argument("--allow-underpowered", action="store_true", default=None,
                        help="pass a comparison whose rows are too small to tell by design "
                             "(rows that lost twins still fail); default: ini "
                             "prove_allow_underpowered")
    parser.add_argument("--max-errored", type=share, default=None, metavar="F",
                        help="fail a condition more than F of whose episodes in A (the "
                             "baseline) ended without an outcome (with --missing=ignore, in B "
                             "too); default: ini prove_max_errored, else 0.25")
    parser.add_argument("--partial", action="store_true",
                        help="the run is partial on purpose (-k, -m, --lf, a skip): decide on "
                             "the conditions it ran (without it, a run that left conditions "
                             "of A out fails the check)")


@command("check", "compare two runs and exit 4 when the verdict fails", _check_arguments)
def _check(args: argparse.Namespace, out: Output) -> int:
    from ..report import verdicts

    done = review_of(args)
    out.answer("check", verdicts.check_document(done, partial_ok=args.partial),
               verdicts.check_lines(done, args.verbose, partial_ok=args.partial))
    if done.gate.reasons or (verdicts.partial_text(done) is not None and not args.partial):
        return EXIT_FAILED
    step_summary(done)
    return EXIT_FAILED if done.gate.failed else EXIT_OK


@command("aa", "A/A: two runs of one code on one salt, their twins' agreement", engine_options)
def _aa(args: argparse.Namespace, out: Output) -> int:
    from ..report import verdicts
    from ..review import aa

    out.answer("aa", *verdicts.aa_answer(aa.aa_of(review_of(args))))
    return EXIT_OK


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    engine_options(parser, one_is_enough=True)
    parser.add_argument("--out", required=True, type=Path,
                        help="the file to write: .html, .md or .json")
    parser.add_argument("--x", default=None, help="the heat-map's axis across (HTML)")
    parser.add_argument("--y", default=None, help="the heat-map's axis down (HTML)")


@command("report", "write an HTML, markdown or JSON report of two runs (of one run: each "
         "condition's rates with exact intervals)", _report_arguments)
def _report(args: argparse.Namespace, out: Output) -> int:
    from ..report import verdicts
    from ..report.files import write_report
    from ..review.describe import describe

    if args.after is None:
        found = describe(load_run(store_of(args), args.before), events=args.event or None,
                         missing=args.missing)
        found.require_rows()
        path = write_report(args.out, found, x=args.x, y=args.y)
        out.answer("report", {"path": str(path), "kind": "run", "run": found.labels.after,
                              "verdict": None}, verdicts.run_report_lines(found, path))
        return EXIT_OK
    done = review_of(args)
    path = write_report(args.out, done, x=args.x, y=args.y)
    out.answer("report", {"path": str(path), "verdict": verdicts.verdict_word(done)},
               verdicts.report_lines(done, path))
    return EXIT_OK


# --------------------------------------------------------------------------- cost and plan


def _cost_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest, or baseline:NAME")
    parser.add_argument("run2", nargs="?", help="a second run: did the cost per episode change")
    parser.add_argument("--alpha", type=error_rate, default=0.05, help="Holm's q (two runs)")


@command("cost", "tokens in and out, calls and price by model and condition (with a second "
         "run: did the cost per episode change, and the ratio)", _cost_arguments)
def _cost(args: argparse.Namespace, out: Output) -> int:
    from ..report import cost as cost_text
    from ..review import cost

    store = store_of(args)
    runs = [load_run(store, name) for name in (args.run, args.run2) if name]
    costs = [cost.cost_of(run, cost.prices_for(run, Path.cwd())) for run in runs]
    both = cost.compare_costs(costs[0], costs[1]) if len(costs) == 2 else None
    shifts = cost.cost_shifts(costs[0], costs[1], alpha=args.alpha) if both else None
    out.answer("cost", cost_text.costs_document(costs, both, shifts),
               cost_text.format_cost(costs[0]) if both is None else
               cost_text.format_comparison(both, shifts))
    return EXIT_OK


def _plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", help="a sweep spec (prove_*.toml); default: the "
                        "conditions of the --from run")
    parser.add_argument("--from", dest="source", default="latest",
                        help="the earlier run whose per-condition means are used (default: "
                             "latest)")
    parser.add_argument("--replicates", type=int, default=None,
                        help="replicates per condition (default: the spec's, or the run's)")


@command("plan", "expected tokens and price of a sweep, from an earlier run", _plan_arguments)
def _plan(args: argparse.Namespace, out: Output) -> int:
    from ..report import cost as cost_text
    from ..review import cost

    source = load_run(store_of(args), args.source)
    if args.replicates is not None and args.replicates < 1:
        raise RefusalError(f"--replicates must be >= 1, got {args.replicates}")
    planned = cost.planned_sweep(source, Path(args.spec) if args.spec else None,
                                 args.replicates)
    prices = cost.prices_for(source, Path.cwd())
    plan = cost.estimate_plan(source, planned, prices)
    out.answer("plan", cost_text.plan_document(plan),
               cost_text.format_plan(plan, prices))
    return EXIT_OK


# --------------------------------------------------------------------------- prune


def _prune_arguments(parser: argparse.ArgumentParser) -> None:
    from ..config.values import count

    parser.add_argument("--keep", type=count, metavar="N",
                        help="keep the newest N runs; older ones are deleted")
    parser.add_argument("--cache", action="store_true",
                        help="empty the cache of recorded HTTP calls (--prove-cache)")
    parser.add_argument("--named", action="store_true",
                        help="delete older named runs (--prove-name) too; kept by default")
    parser.add_argument("--dry-run", action="store_true",
                        help="delete nothing: list what would go and the bytes it would free")


@command("prune", "delete all but the newest N runs (never a baseline, nor a run being "
         "written; a named run only with --named)", _prune_arguments)
def _prune(args: argparse.Namespace, out: Output) -> int:
    if args.cache and args.keep is not None:
        raise ProveError("prune the runs (--keep N) and the cache (--cache) one at a time")
    if args.cache:
        from ..store.pruning import prune_cache

        root = store_of(args).root
        files, size = prune_cache(root, dry_run=args.dry_run)
        verb = "would remove" if args.dry_run else "removed"
        out.answer("prune", {"store": str(root), "cache_files": files, "cache_bytes": size,
                             "dry_run": args.dry_run},
                   [f"{verb} the cache of HTTP calls in {root}/cache: {files} episode "
                    f"file(s), {runs_text.size_text(size)}" if files else
                    f"nothing to remove: no recorded HTTP calls in {root}/cache"])
        return EXIT_OK
    if args.keep is None:
        print("pytest-prove prune: give --keep N (the newest runs to keep), or --cache to "
              "empty the cache of HTTP calls", file=sys.stderr)
        return EXIT_USAGE
    done = store_of(args).prune(keep=args.keep, named=args.named, dry_run=args.dry_run)
    document = done.to_json()
    out.answer("prune", document, runs_text.prune_lines(document))
    return EXIT_REFUSED if done.failed else EXIT_OK


# --------------------------------------------------------------------------- baselines


def _baseline_of(store: Store, text: str) -> Run:
    """The baseline ``text`` names: a file (``git show main:PATH > old.baseline``), else a
    baseline of the store (``NAME`` or ``baseline:NAME``); checked as every gate checks it."""
    path = Path(text)
    if path.suffix in (".baseline", ".jsonl") and path.is_file():
        return read_baseline(path)
    return store.load_baseline(text.removeprefix("baseline:"))


def _baseline_diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="OLD", help="the baseline before: a name, or a file "
                        "(e.g. git show main:.prove/baselines/NAME.baseline > old.baseline)")
    parser.add_argument("new", metavar="NEW", help="the baseline after: a name or a file")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every replicate whose ending changed")


@command("baseline-diff", "what a change to a baseline does: each condition's rates before "
         "and after, and the replicates whose ending changed", _baseline_diff_arguments)
def _baseline_diff(args: argparse.Namespace, out: Output) -> int:
    store = store_of(args)
    done = diff_baselines(_baseline_of(store, args.old), _baseline_of(store, args.new))
    out.answer("baseline-diff", baselines_text.baseline_diff_document(done),
               baselines_text.baseline_diff_lines(done, args.verbose))
    return EXIT_OK


def _baseline_text_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a baseline file")


@command("baseline-text", "a baseline file as plain text, one line per replicate (git's "
         "textconv for baselines: see docs/commands/baseline-diff.md)", _baseline_text_arguments)
def _baseline_text(args: argparse.Namespace, out: Output) -> int:
    path = Path(args.file)
    try:
        run = read_baseline(path)
    except StoreError as exc:
        # git's textconv shows what it prints: the reason, then the file as it is.
        raw = path.read_bytes().decode("utf-8", "replace") if path.is_file() else ""
        out.lines(baselines_text.baseline_text_lines(None, str(exc), raw))
        return EXIT_OK if path.is_file() else EXIT_REFUSED
    out.lines(baselines_text.baseline_text_lines(run))
    return EXIT_OK


# --------------------------------------------------------------------------- merge


def _merge_arguments(parser: argparse.ArgumentParser) -> None:
    from ..config.values import new_run_name, store_name

    parser.add_argument("runs", nargs="+", metavar="RUN",
                        help="the runs of the shards (pytest --prove-shard=K/N), one per K: "
                             "names or run ids")
    parser.add_argument("--name", type=new_run_name, required=True,
                        help="the name of the merged run (a new name)")
    parser.add_argument("--save-baseline", type=store_name, default=None, metavar="NAME",
                        help="also write the merged run as baseline NAME, when it is complete "
                             "and could serve as one")
    parser.add_argument("--max-errored", type=share, default=None, metavar="F",
                        help="with --save-baseline: the largest share of a condition's "
                             "episodes that may end without an outcome; default: ini "
                             "prove_max_errored, else 0.25")
    parser.add_argument("--q", type=error_rate, default=None,
                        help="with --save-baseline: the error rate of the design check of its "
                             "episodes with an outcome; default: ini prove_q, else 0.05")
    parser.add_argument("--max-mde", type=max_mde, default=None,
                        help="with --save-baseline: the change its conditions must let a later "
                             "gate see; default: ini prove_max_mde, else 0.20")


@command("merge", "join the runs of a sweep's shards (--prove-shard=K/N) into one run",
         _merge_arguments)
def _merge(args: argparse.Namespace, out: Output) -> int:
    from ..store.baselines import save_baseline
    from ..store.merging import merge_runs

    store = store_of(args)
    runs = [load_run(store, name) for name in args.runs]
    run = merge_runs(store, runs, args.name)
    saved = None
    if args.save_baseline is not None:
        from ..review.vouch import thin_baseline

        saved = save_baseline(store, args.save_baseline, run,
                              missing=int(run.manifest.get("missing") or 0),
                              max_errored=args.max_errored,
                              thin=lambda found: thin_baseline(found, q=args.q,
                                                               max_mde=args.max_mde))
    said = None if saved is None else saved.text
    out.answer("merge", runs_text.merge_document(run, said),
               runs_text.merge_lines(run, said))
    return EXIT_REFUSED if saved is not None and not saved.saved else EXIT_OK


# --------------------------------------------------------------------------- main


def build_parser(*, every: bool = True) -> argparse.ArgumentParser:
    """The command line's parser: of every command, or (``every=False``) of those registered
    so far."""
    parser = argparse.ArgumentParser(
        prog="pytest-prove",
        description="Read the runs pytest-prove stored: list them, compare them, report on "
                    "them, and see where failing episodes stop.")
    common = argparse.ArgumentParser(add_help=False)
    # Accepted before or after the subcommand; SUPPRESS keeps the subparser from
    # overwriting a value given before it.
    for each, store, as_json in ((common, argparse.SUPPRESS, argparse.SUPPRESS),
                                 (parser, None, False)):
        each.add_argument("--store", default=store, help="folder of runs and baselines "
                          "(default: ini prove_store, else .prove under the rootdir)")
        each.add_argument("--json", action="store_true", default=as_json,
                          help="write one JSON document instead of text")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for entry in (all_commands() if every else COMMANDS).values():
        child = sub.add_parser(entry.name, help=entry.help, description=entry.help,
                               parents=[common])
        entry.arguments(child)
    return parser


#: The modules that register commands besides this one, imported in this order (``--help``
#: lists their commands after the commands above) when one of their commands runs.
_LATER = ("drill", "grading", "serve", "tui")


def all_commands() -> dict[str, Command]:
    """Every subcommand (:data:`COMMANDS` once the later modules registered theirs)."""
    for name in _LATER:
        importlib.import_module(f".{name}", __package__)
    return COMMANDS


def _command_word(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names (the first word that is neither an option nor the value
    of ``--store``), or None (none: --help, or bad usage)."""
    words = iter(argv)
    for word in words:
        if word == "--":
            return next(words, None)
        if not word.startswith("-"):
            return word
        if len(word) > 3 and "--store".startswith(word.partition("=")[0]) and "=" not in word:
            next(words, None)  # --store VALUE (or an abbreviation argparse accepts)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = list(argv) if argv is not None else sys.argv[1:]
    # A command of a later module, --help, or a word to refuse: every command's parser.
    parser = build_parser(every=_command_word(argv) not in COMMANDS)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    out = Output(as_json=bool(args.json))
    try:
        fill_defaults(args, project_settings())
        return COMMANDS[args.command].run(args, out)
    except (ProveError, ValueError) as exc:
        if out.as_json:
            out.document(args.command, {"error": str(exc)})
        # A message may quote what a rollout wrote (a condition, an outcome): as text.
        print(f"pytest-prove {args.command}: {plain_text(exc)}", file=sys.stderr)
        return EXIT_REFUSED
    except BrokenPipeError:
        # The reader (`| head`) stopped reading: not an error of ours.  Point stdout at
        # devnull so that the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

