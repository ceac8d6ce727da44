"""The ``pytest-prove`` command: read stored runs without pytest.

Every subcommand is one function registered in :data:`COMMANDS` by :func:`command`; adding one
is one decorated function::

    @command("cost", "token use and price of a run", lambda p: p.add_argument("run"))
    def _cost(args: argparse.Namespace, out: Output) -> int: ...

Exit status: 0 done (a check that passed), 1 refused (unknown run, a case check, bad input),
2 bad usage, 4 a check whose verdict failed.

Each command parses, opens the run(s), asks :mod:`pytest_prove.review` and prints what
:mod:`pytest_prove.report` words. This module imports the store, the review and the
renderers; never pytest or the plugin.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from .config.project import fill_defaults, project_settings
from .config.values import error_rate, fail_on, gate_fails_on, margin, max_mde, missing_mode, share
from .errors import ProveError
from .report import baselines as baselines_text
from .report import cost as cost_text
from .report import drilldown, verdicts
from .report import runs as runs_text
from .report._format import REPORT_SCHEMA_VERSION, plain_text
from .report.files import write_report
from .report.json import comparison_document
from .report.markdown import append_step_summary, render_markdown
from .review import RefusalError, Review, cost, review
from .review.baseline_diff import diff_baselines
from .review.describe import describe
from .review.fixcheck import fix_check_runs
from .review.flips import flips
from .review.steps import compare_steps, where
from .review.tallies import stored_runs, tally
from .store import Run, Store, StoreError, read_baseline

__all__ = ["COMMANDS", "Command", "Output", "command", "load_run", "main"]

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


def _store(args: argparse.Namespace) -> Store:
    return Store(Path(args.store))


def _pair_of(args: argparse.Namespace) -> tuple[Run, Run]:
    return load_run(_store(args), args.before), load_run(_store(args), args.after)


def _review(args: argparse.Namespace) -> Review:
    """The review of the two runs the command names, refused when there is nothing to
    compare."""
    before, after = _pair_of(args)
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


def _step_summary(done: Review) -> None:
    append_step_summary(render_markdown(done))


# --------------------------------------------------------------------------- arguments


def _pair(parser: argparse.ArgumentParser, *, one_is_enough: bool = False) -> None:
    parser.add_argument("before", metavar="A", help="the run before the change (or a baseline)"
                        + ("; alone, the one run to describe" if one_is_enough else ""))
    parser.add_argument("after", metavar="B", nargs="?" if one_is_enough else None,
                        help="the run after the change")


def _engine_options(parser: argparse.ArgumentParser, *, one_is_enough: bool = False) -> None:
    _pair(parser, one_is_enough=one_is_enough)
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


def _one_event(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--event", default=None,
                        help="the outcome to follow (default: the one declared failure)")


# --------------------------------------------------------------------------- runs, show


@command("runs", "list the stored runs and baselines")
def _runs(args: argparse.Namespace, out: Output) -> int:
    store = _store(args)
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
    counted = tally(load_run(_store(args), args.run))
    out.answer("show", runs_text.show_document(counted),
               runs_text.show_lines(counted, args.verbose))
    return EXIT_OK


# --------------------------------------------------------------------------- diff, check, report


@command("diff", "compare two runs condition by condition", _engine_options)
def _diff(args: argparse.Namespace, out: Output) -> int:
    done = _review(args)
    out.answer("diff", comparison_document(done),
               verdicts.diff_lines(done, args.verbose))
    _step_summary(done)
    return EXIT_OK


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_options(parser)
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
    done = _review(args)
    out.answer("check", verdicts.check_document(done, partial_ok=args.partial),
               verdicts.check_lines(done, args.verbose, partial_ok=args.partial))
    if done.gate.reasons or (verdicts.partial_text(done) is not None and not args.partial):
        return EXIT_FAILED
    _step_summary(done)
    return EXIT_FAILED if done.gate.failed else EXIT_OK


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_options(parser, one_is_enough=True)
    parser.add_argument("--out", required=True, type=Path,
                        help="the file to write: .html, .md or .json")
    parser.add_argument("--x", default=None, help="the heat-map's axis across (HTML)")
    parser.add_argument("--y", default=None, help="the heat-map's axis down (HTML)")


@command("report", "write an HTML, markdown or JSON report of two runs (of one run: each "
         "condition's rates with exact intervals)", _report_arguments)
def _report(args: argparse.Namespace, out: Output) -> int:
    if args.after is None:
        found = describe(load_run(_store(args), args.before), events=args.event or None,
                         missing=args.missing)
        found.require_rows()
        path = write_report(args.out, found, x=args.x, y=args.y)
        out.answer("report", {"path": str(path), "kind": "run", "run": found.labels.after,
                              "verdict": None}, verdicts.run_report_lines(found, path))
        return EXIT_OK
    done = _review(args)
    path = write_report(args.out, done, x=args.x, y=args.y)
    out.answer("report", {"path": str(path), "verdict": verdicts.verdict_word(done)},
               verdicts.report_lines(done, path))
    return EXIT_OK


# --------------------------------------------------------------------------- where, compare


def _where_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest or baseline:NAME")
    _one_event(parser)


@command("where", "where failing episodes stop, by step", _where_arguments)
def _where(args: argparse.Namespace, out: Output) -> int:
    found = where(load_run(_store(args), args.run), args.event)
    out.answer("where", drilldown.where_document(found), drilldown.where_lines(found))
    return EXIT_OK


def _steps_arguments(parser: argparse.ArgumentParser) -> None:
    _pair(parser)
    _one_event(parser)
    parser.add_argument("--q", type=error_rate, default=0.05,
                        help="level of the test and of BH over step names; default 0.05")
    parser.add_argument("--max-hr", type=float, default=2.0,
                        help="the largest hazard ratio you accept not being able to see; "
                             "default 2.0")


@command("compare", "do failing episodes stop sooner after the change? (log-rank by step)",
         _steps_arguments)
def _compare_steps(args: argparse.Namespace, out: Output) -> int:
    before, after = _pair_of(args)
    done = compare_steps(before, after, args.event, q=args.q, max_hr=args.max_hr)
    out.answer("compare", drilldown.compare_steps_document(done),
               drilldown.compare_steps_lines(done))
    return EXIT_OK


# --------------------------------------------------------------------------- flips


def _flips_arguments(parser: argparse.ArgumentParser) -> None:
    _pair(parser)
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
    before, after = _pair_of(args)
    found = flips(before, after, conditions=args.condition, events=args.event,
                  missing=args.missing)
    out.answer("flips", drilldown.flips_document(found),
               drilldown.flips_lines(found, args.verbose))
    return EXIT_OK


# --------------------------------------------------------------------------- fix-check


def _fix_arguments(parser: argparse.ArgumentParser) -> None:
    _pair(parser)
    _one_event(parser)
    parser.add_argument("--alpha", type=error_rate, default=0.05,
                        help="level of the test and of BH over cases; default 0.05")
    parser.add_argument("--max-mde", type=max_mde, default=0.20,
                        help="the smallest change a conclusive run must be able to see; "
                             "default 0.20")


@command("fix-check", "did the event get more or less frequent over cases? (exact CMH)",
         _fix_arguments)
def _fix_check(args: argparse.Namespace, out: Output) -> int:
    before, after = _pair_of(args)
    done = fix_check_runs(before, after, args.event, alpha=args.alpha, max_mde=args.max_mde)
    out.answer("fix-check", drilldown.fix_check_document(done),
               drilldown.fix_check_lines(done))
    return EXIT_OK


# --------------------------------------------------------------------------- cost and plan


def _cost_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest, or baseline:NAME")
    parser.add_argument("run2", nargs="?", help="a second run: did the cost per episode change")
    parser.add_argument("--alpha", type=error_rate, default=0.05, help="Holm's q (two runs)")


@command("cost", "tokens in and out, calls and price by model and condition (with a second "
         "run: did the cost per episode change, and the ratio)", _cost_arguments)
def _cost(args: argparse.Namespace, out: Output) -> int:
    store = _store(args)
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
    source = load_run(_store(args), args.source)
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
    from .config.values import count

    parser.add_argument("--keep", type=count, required=True, metavar="N",
                        help="keep the newest N runs; older ones are deleted")
    parser.add_argument("--named", action="store_true",
                        help="delete older named runs (--prove-name) too; kept by default")
    parser.add_argument("--dry-run", action="store_true",
                        help="delete nothing: list what would go and the bytes it would free")


@command("prune", "delete all but the newest N runs (never a baseline, nor a run being "
         "written; a named run only with --named)", _prune_arguments)
def _prune(args: argparse.Namespace, out: Output) -> int:
    done = _store(args).prune(keep=args.keep, named=args.named, dry_run=args.dry_run)
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
    store = _store(args)
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
    from .config.values import new_run_name, store_name

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
    from .store.baselines import save_baseline
    from .store.merging import merge_runs

    store = _store(args)
    runs = [load_run(store, name) for name in args.runs]
    run = merge_runs(store, runs, args.name)
    saved = None
    if args.save_baseline is not None:
        from .review.vouch import thin_baseline

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-prove",
        description="Read the runs pytest-prove stored: list them, compare them, report on "
                    "them, and see where failing episodes stop.")
    common = argparse.ArgumentParser(add_help=False)
    # Accepted before or after the subcommand; SUPPRESS keeps the subparser from
    # overwriting a value given before it.
    common.add_argument("--store", default=argparse.SUPPRESS,
                        help="folder of runs and baselines (default: ini prove_store, else "
                             ".prove under the rootdir)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="write one JSON document instead of text")
    parser.add_argument("--store", default=None,
                        help="folder of runs and baselines (default: ini prove_store, else "
                             ".prove under the rootdir)")
    parser.add_argument("--json", action="store_true", default=False,
                        help="write one JSON document instead of text")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for entry in COMMANDS.values():
        child = sub.add_parser(entry.name, help=entry.help, description=entry.help,
                               parents=[common])
        entry.arguments(child)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
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
