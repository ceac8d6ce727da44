"""The ``pytest-prove`` command: read stored runs without pytest.

Every subcommand is one function registered in :data:`COMMANDS` by :func:`command`; adding one
is one decorated function::

    @command("cost", "token use and price of a run", lambda p: p.add_argument("run"))
    def _cost(args: argparse.Namespace, out: Output) -> int: ...

Exit status: 0 done (a check that passed), 1 refused (unknown run, a case check, bad input),
2 bad usage, 4 a check whose verdict failed.

This module imports the store, the statistics and the renderers; never pytest or the plugin.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, TextIO

from .options import fail_on, fraction
from .report._format import terminal_text
from .report.json import REPORT_SCHEMA_VERSION, ReportContext, comparison_document, write_report
from .review.coverage import coverage, run_notes, unfinished_reason
from .review.pairing import CaseMixError, Prepared, declarations_of, prepare, rollout_label
from .spec import SpecError, condition_label
from .stats import Comparison, compare
from .store import Run, Store, StoreError, StoreWarning

__all__ = ["COMMANDS", "Command", "Output", "command", "load_run", "main", "report_context"]

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


class RefusalError(Exception):
    """A request this command cannot answer, with the reason and the fix."""


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

    def document(self, command_name: str, body: dict[str, Any]) -> None:
        if self.as_json:
            doc = {"schema_version": REPORT_SCHEMA_VERSION, "command": command_name, **body}
            print(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False),
                  file=self.stream)


# --------------------------------------------------------------------------- reading runs


def load_run(store: Store, text: str) -> Run:
    """The run or baseline ``text`` names: a run name, a run id, ``latest``,
    ``baseline:NAME``, or a bare NAME found only among the baselines."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if text.startswith("baseline:"):
            run = store.load_baseline(text.removeprefix("baseline:"))
        else:
            try:
                run = store.load(text)
            except StoreError as exc:
                if text != "latest" and text in store.baselines():
                    run = store.load_baseline(text)
                else:
                    known = ", ".join(f"baseline:{b}" for b in store.baselines()) or "none"
                    raise StoreError(f"{exc}; baselines: {known}") from None
    for note in caught:
        print(f"pytest-prove: note: {note.message}", file=sys.stderr)
    return run


def _label_of(run: Run) -> str:
    return f"baseline:{run.name}" if run.is_baseline else run.name


def _keys_and_labels(before: Run, after: Run) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
    """Each condition's row label (as analysis.prepare writes it) and its axis values."""
    records = [r for run in (before, after) for r in run.episodes]
    rollouts = sorted({str(r["rollout"]) for r in records})
    many = len(rollouts) > 1
    found: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for record in records:
        key = (str(record["rollout"]), str(record["condition_key"]))
        if key in found:
            continue
        condition = dict(record.get("condition") or {})
        label = condition_label(condition)
        if many:
            name = rollout_label(after, key[0], rollouts)
            label = f"{name} · {label}"
            condition = {"rollout": name, **condition}
        found[key] = (label, condition)
    return found


def report_context(before: Run, after: Run, prepared: Prepared) -> ReportContext:
    """The context every report of ``after`` against ``before`` shares."""
    labels = _keys_and_labels(before, after)
    cases: dict[str, str] = {}
    for run in (before, after):
        for record in run.episodes:
            case = (record.get("meta") or {}).get("case_id")
            if case is not None:
                label = labels[(str(record["rollout"]), str(record["condition_key"]))][0]
                cases.setdefault(label, str(case))
    return ReportContext(
        before=_label_of(before), after=_label_of(after), paired=prepared.paired,
        not_run=prepared.not_run, new=prepared.new, left_out=dict(prepared.left_out),
        axes={label: axes for label, axes in labels.values()}, cases=cases,
    )


@dataclass(frozen=True, slots=True)
class _Compared:
    before: Run
    after: Run
    prepared: Prepared
    comparison: Comparison
    context: ReportContext


def _compare(args: argparse.Namespace) -> _Compared:
    store = Store(Path(args.store))
    before, after = load_run(store, args.before), load_run(store, args.after)
    events = args.event or None
    prepared = prepare(before, after, events)
    if not prepared.rows:
        raise RefusalError(
            f"runs {_label_of(before)!r} and {_label_of(after)!r} share no condition with an "
            "outcome in both, so there is nothing to compare; compare runs of the same rollout"
        )
    comparison = compare(prepared.rows, q=args.q, max_mde=args.max_mde)
    return _Compared(before, after, prepared, comparison,
                     report_context(before, after, prepared))


# --------------------------------------------------------------------------- arguments


def _pair(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("before", metavar="A", help="the run before the change (or a baseline)")
    parser.add_argument("after", metavar="B", help="the run after the change")


def _engine_options(parser: argparse.ArgumentParser) -> None:
    _pair(parser)
    parser.add_argument("--event", action="append", default=[],
                        help="compare this outcome (repeatable; default: every declared "
                             "failure and success)")
    parser.add_argument("--q", type=fraction, default=0.05,
                        help="error rate for flags (BH) and the verdict (Holm); default 0.05")
    parser.add_argument("--max-mde", type=fraction, default=0.20,
                        help="the largest change you accept not being able to see; "
                             "default 0.20")
    parser.add_argument("-v", "--verbose", action="store_true", help="show every row")


def _one_event(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--event", default=None,
                        help="the outcome to follow (default: the one declared failure)")


# --------------------------------------------------------------------------- runs, show


def _manifest_line(manifest: dict[str, Any], name: str, run_id: str,
                   episodes: int | None = None) -> dict[str, Any]:
    counts = manifest.get("counts") or {}
    paired = manifest.get("paired_with") or {}
    return {
        "name": name,
        "run_id": run_id,
        "status": str(manifest.get("status", "incomplete")),
        "rollouts": len(manifest.get("rollouts") or {}),
        "episodes": int(counts.get("episodes", episodes or 0)),
        "started": str(manifest.get("started", "")),
        "paired_with": paired.get("baseline") if isinstance(paired, dict) else None,
    }


def _table(header: Sequence[str], rows: Sequence[Sequence[str]],
           numeric: frozenset[int] = frozenset()) -> list[str]:
    widths = [max(len(str(line[i])) for line in [header, *rows]) for i in range(len(header))]
    return ["  ".join((str(c).rjust(w) if i in numeric else str(c).ljust(w))
                      for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
            for line in [header, *rows]]


@command("runs", "list the stored runs and baselines")
def _runs(args: argparse.Namespace, out: Output) -> int:
    store = Store(Path(args.store))
    runs = []
    for directory, m in store.runs():
        episodes = None
        if m.get("ended") is None:
            # Being written, or its session was killed: the manifest's counts are those of
            # its first episode, so count what its lines hold.
            m = {**m, "counts": None}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", StoreWarning)  # `show RUN` says it
                episodes = len(store.read(directory).episodes)
        runs.append(_manifest_line(m, str(m.get("name", m["run_id"])), str(m["run_id"]),
                                   episodes))
    baselines = []
    for name in store.baselines():
        run = load_run(store, f"baseline:{name}")
        baselines.append(_manifest_line(run.manifest, f"baseline:{name}", run.run_id,
                                        len(run.episodes)))
    out.document("runs", {"store": str(store.root), "runs": runs, "baselines": baselines})
    if not runs and not baselines:
        out.line(f"no runs in {store.root} yet")
        out.line("next: run a sweep, e.g. pytest --prove-save-baseline current")
        return EXIT_OK
    out.line(f"{len(runs)} run(s) and {len(baselines)} baseline(s) in {store.root}")
    header = ("name", "id", "status", "rollouts", "episodes", "started", "paired with")
    body = [(r["name"], r["run_id"], r["status"], str(r["rollouts"]), str(r["episodes"]),
             r["started"][:19], r["paired_with"] or "-") for r in [*runs, *baselines]]
    out.lines(_table(header, body, frozenset({3, 4})))
    out.line("next: pytest-prove show RUN, or pytest-prove diff A B")
    return EXIT_OK


def _show_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest or baseline:NAME")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list every errored episode")


@command("show", "a run's manifest, tallies and errored episodes", _show_arguments)
def _show(args: argparse.Namespace, out: Output) -> int:
    run = load_run(Store(Path(args.store)), args.run)
    m = run.manifest
    outcomes: Counter[str] = Counter()
    by_condition: dict[str, Counter[str]] = defaultdict(Counter)
    errored = []
    left: Counter[str] = Counter()
    for record in run.episodes:
        label = condition_label(record.get("condition") or {})
        error = record.get("error")
        if error is None:
            outcomes[str(record.get("outcome"))] += 1
            by_condition[label][str(record.get("outcome"))] += 1
            continue
        kind = str(error.get("kind", "errored"))
        left[kind] += 1
        if kind != "no_outcome":
            errored.append({"rollout": record.get("rollout"), "condition": label,
                            "replicate": record.get("replicate"), "kind": kind,
                            "type": error.get("type"), "message": error.get("message")})
    summary = _manifest_line(m, _label_of(run), run.run_id, len(run.episodes))
    out.document("show", {
        **summary, "ended": m.get("ended"), "salt": run.salt, "path": str(run.path),
        "git_commit": m.get("git_commit"), "command_line": m.get("command"),
        "packages": m.get("packages"), "episodes_read": len(run.episodes),
        "outcomes": dict(outcomes), "by_condition": {k: dict(v) for k, v in
                                                     by_condition.items()},
        "without_outcome": dict(left), "errored": errored, "notes": list(run.notes),
    })
    with_outcome = sum(outcomes.values())
    out.line(f"run {_label_of(run)!r} is {run.status}: {len(run.episodes)} episodes, "
             f"{with_outcome} with an outcome, {left.get('no_outcome', 0)} with none, "
             f"{len(errored)} errored")
    out.line(f"id {run.run_id} · started {run.started or '-'} · ended {m.get('ended') or '-'}"
             f" · salt {run.salt or '-'} · paired with {summary['paired_with'] or '-'}")
    if m.get("git_commit"):
        out.line(f"git commit {m['git_commit']}")
    if m.get("command"):
        out.line("command: " + terminal_text(" ".join(str(c) for c in m["command"]), 400))
    for rollout_id, info in (m.get("rollouts") or {}).items():
        declaration = (info or {}).get("declaration") or {}
        failures = ", ".join(map(terminal_text, declaration.get("failures", []))) or "-"
        successes = ", ".join(map(terminal_text, declaration.get("successes", []))) or "-"
        out.line(f"rollout {terminal_text(info.get('label') or rollout_id)}: failures "
                 f"{failures}; successes {successes}; "
                 f"{declaration.get('replicates', '?')} replicates")
    names = sorted(outcomes)
    if by_condition:
        body = [(terminal_text(label), *(str(c.get(n, 0)) for n in names), str(sum(c.values())))
                for label, c in sorted(by_condition.items())]
        out.lines(_table(("condition", *map(terminal_text, names), "episodes"), body,
                         frozenset(range(1, len(names) + 2))))
    shown = errored if args.verbose else errored[:10]
    for e in shown:
        out.line(f"errored: {terminal_text(e['condition'])} r{e['replicate']}: "
                 f"{terminal_text(e['type'])}: {terminal_text(e['message'], 200)}")
    if len(shown) < len(errored):
        out.line(f"... and {len(errored) - len(shown)} more errored (-v lists them all)")
    for note in run.notes:
        out.line(f"note: {note}")
    if run.status == "incomplete" and not run.is_baseline:
        out.line(f"next: finish it with pytest --prove-resume={run.name}")
    else:
        out.line(f"next: pytest-prove diff BASELINE {_label_of(run)}")
    return EXIT_OK


# --------------------------------------------------------------------------- diff, check, report


def _comparison_lines(done: _Compared, verbose: bool) -> list[str]:
    from .report.terminal import format_comparison

    lines = format_comparison(done.comparison, before=done.context.before,
                              after=done.context.after, verbose=verbose)
    prepared = done.prepared
    before, after = terminal_text(done.context.before), terminal_text(done.context.after)
    if prepared.not_run:
        lines.append(f"not run: {len(prepared.not_run)} condition(s) of {before} are not in "
                     f"{after}: {', '.join(map(terminal_text, prepared.not_run[:6]))}")
    if prepared.new:
        lines.append(f"new: {len(prepared.new)} condition(s) only in {after}: "
                     f"{', '.join(map(terminal_text, prepared.new[:6]))}")
    if prepared.left_out:
        lines.append("left out of the comparison: " + ", ".join(
            f"{n} {terminal_text(reason)}" for reason, n in sorted(prepared.left_out.items())))
    for run in (done.before, done.after):
        lines.extend(f"note: {note}" for note in run_notes(run))
    return lines


def _step_summary(done: _Compared) -> None:
    from .report.markdown import append_step_summary, render_markdown

    append_step_summary(render_markdown(done.comparison, done.context))


@command("diff", "compare two runs condition by condition", _engine_options)
def _diff(args: argparse.Namespace, out: Output) -> int:
    done = _compare(args)
    out.document("diff", comparison_document(done.comparison, done.context))
    out.lines(_comparison_lines(done, args.verbose))
    if done.comparison.verdict.word == "worse":
        out.line(f"next: pytest-prove where {done.context.after} --event "
                 f"{done.comparison.verdict.worse[0].event}")
    _step_summary(done)
    return EXIT_OK


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_options(parser)
    parser.add_argument("--fail-on", type=fail_on, default=frozenset({"worse"}),
                        help="verdicts that fail: worse (default), too-small, or both "
                             "comma-separated")


@command("check", "compare two runs and exit 4 when the verdict fails", _check_arguments)
def _check(args: argparse.Namespace, out: Output) -> int:
    done = _compare(args)
    word = done.comparison.verdict.word
    failed = ((word == "worse" and "worse" in args.fail_on)
              or (word == "too small to tell" and "too-small" in args.fail_on))
    # A check that compared less than the baseline holds, or a run that did not finish,
    # is never a pass (as the session's gate).
    reasons = [r for r in (coverage(done.before, done.after).failure(
        done.context.before, done.context.after),) if r is not None]
    unfinished = unfinished_reason(done.after)
    if unfinished is not None:
        reasons.append(unfinished)
    out.document("check", {**comparison_document(done.comparison, done.context),
                           "fail_on": sorted(args.fail_on), "failed": failed or bool(reasons),
                           "reasons": reasons})
    out.lines(_comparison_lines(done, args.verbose))
    if reasons:
        out.lines([f"check failed: {r}" for r in reasons])
        return EXIT_FAILED
    out.line(f"check {'failed' if failed else 'passed'}: the verdict is {word!r}; "
             f"--fail-on {','.join(sorted(args.fail_on))}")
    _step_summary(done)
    return EXIT_FAILED if failed else EXIT_OK


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    _engine_options(parser)
    parser.add_argument("--out", required=True, type=Path,
                        help="the file to write: .html, .md or .json")
    parser.add_argument("--x", default=None, help="the heat-map's axis across (HTML)")
    parser.add_argument("--y", default=None, help="the heat-map's axis down (HTML)")


@command("report", "write an HTML, markdown or JSON report of two runs", _report_arguments)
def _report(args: argparse.Namespace, out: Output) -> int:
    done = _compare(args)
    path = write_report(args.out, done.comparison, done.context, x=args.x, y=args.y)
    out.document("report", {"path": str(path), "verdict": done.comparison.verdict.word})
    out.line(f"{done.comparison.verdict.word}: report of {done.context.before} -> "
             f"{done.context.after} written to {path}")
    out.line(f"next: open {path}")
    return EXIT_OK


# --------------------------------------------------------------------------- where, compare


@dataclass(frozen=True, slots=True)
class _Ending:
    step: int
    cause: str | None  # "step:NAME" failed there; "ended:OUTCOME"; "timed out"; None censored
    cluster: str
    stratum: str


_NO_STEP = "(no steps recorded)"


def _event_of(args: argparse.Namespace, *runs: Run) -> tuple[str, Literal["rise", "fall"]]:
    declarations = declarations_of(*runs)
    known: dict[str, Literal["rise", "fall"]] = {}
    for d in declarations.values():
        for outcome in d.outcomes:
            known.setdefault(outcome, "rise")
        for event in d.events:
            known[event] = d.worse_when(event)
    if not declarations:
        for run in runs:
            for r in run.episodes:
                if r.get("outcome") is not None:
                    known.setdefault(str(r["outcome"]), "rise")
    if args.event is None:
        failures = sorted({f for d in declarations.values() for f in d.failures})
        if len(failures) == 1:
            return failures[0], "rise"
        raise RefusalError(f"name the outcome to follow with --event; declared failures: "
                      f"{', '.join(failures) or 'none'}")
    if args.event not in known:
        raise RefusalError(f"--event {args.event!r} is not an outcome of "
                      f"{' or '.join(repr(_label_of(r)) for r in runs)}; outcomes: "
                      f"{', '.join(sorted(known)) or 'none'}")
    return args.event, known[args.event]


def _endings(run: Run, event: str) -> tuple[list[_Ending], Counter[str]]:
    """Where each episode stopped and how; and what was left out, by reason."""
    endings: list[_Ending] = []
    left: Counter[str] = Counter()
    for record in run.episodes:
        error = record.get("error")
        kind = None if error is None else str(error.get("kind", "errored"))
        if kind is not None and kind != "no_outcome" and "timeout" not in kind:
            left["errored"] += 1
            continue
        steps = record.get("steps") or []
        t = record.get("t")
        if steps:
            step = len(steps)
        elif isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t):
            step = round(t)
        else:
            left["no step recorded and no t"] += 1
            continue
        cause: str | None
        if kind is not None and "timeout" in kind:
            cause = "timed out"
        elif kind == "no_outcome":
            cause = None  # stopped with no outcome: censored where it stopped
        elif record.get("outcome") == event:
            cause = "step:" + (str(steps[-1].get("name")) if steps else _NO_STEP)
        else:
            cause = f"ended:{record.get('outcome')}"
        stratum = f"{record['rollout']}\x1f{record['condition_key']}"
        case = (record.get("meta") or {}).get("case_id")
        endings.append(_Ending(step, cause, str(case) if case is not None else stratum,
                               stratum))
    return endings, left


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _p_is(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def _baseline_of(run: Run) -> str:
    paired = run.manifest.get("paired_with") or {}
    name = paired.get("baseline") if isinstance(paired, dict) else None
    return f"baseline:{name}" if name else "BASELINE"


def _where_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest or baseline:NAME")
    _one_event(parser)


@command("where", "where failing episodes stop, by step", _where_arguments)
def _where(args: argparse.Namespace, out: Output) -> int:
    from .stats.steps import aalen_johansen

    run = load_run(Store(Path(args.store)), args.run)
    event, _ = _event_of(args, run)
    endings, left = _endings(run, event)
    if not endings:
        raise RefusalError(f"run {_label_of(run)!r} has no episode that stopped at a step; "
                      "record steps with prove.step or return t")
    failed_causes = sorted({e.cause for e in endings if e.cause and e.cause.startswith("step:")})
    incidence = aalen_johansen([e.step for e in endings], [e.cause for e in endings],
                               [e.cluster for e in endings],
                               groups={"failed": failed_causes}, bootstrap=1000, seed=0)
    failed = incidence.curve("failed")
    by_name = [incidence.curve(c) for c in failed_causes]
    others = [c for c in incidence.curves if c.name.startswith("ended:") or
              c.name == "timed out"]
    rows = [i for i, d in enumerate(failed.events) if d]
    out.document("where", {
        "run": _label_of(run), "event": event, "episodes": len(endings),
        "failed": failed.total, "left_out": dict(left),
        "method": "Aalen-Johansen cumulative incidence by step index; other outcomes and "
                  "timeouts are competing ends, episodes with no outcome are censored; "
                  "bootstrap percentile band resampling cases, B=1000, seed 0",
        "incidence": incidence.to_dict(),
        "by_last_step": [{"step": c.name.removeprefix("step:"), "episodes": c.total,
                          "share": c.incidence[-1], "low": c.low[-1], "high": c.high[-1]}
                         for c in by_name],
    })
    last = incidence.steps[-1]
    # The document keeps the names whole; the text shows them as the terminal can.
    label, event = terminal_text(_label_of(run)), terminal_text(event)

    def step_name(cause: str) -> str:
        return terminal_text(cause.partition(":")[2] or cause)

    if failed.total == 0:
        out.line(f"none of {len(endings)} episodes of {label} ended {event}, so no "
                 "failing episode stopped anywhere")
    else:
        names = sorted(by_name, key=lambda c: -c.total)
        shown = ", ".join(f"{step_name(c.name)} {c.total}" for c in names[:4])
        out.line(f"{failed.total} of {len(endings)} episodes of {label} ended "
                 f"{event}; by their last step: {shown} (where they stopped, not necessarily "
                 "the cause)")
    out.line(f"Aalen-Johansen by step index (the number of steps recorded, else t): other "
             f"outcomes and timeouts compete, no-outcome episodes are censored; 95% band: "
             f"bootstrap over {incidence.clusters} cases, B = {incidence.bootstrap}, seed = "
             f"{incidence.seed}")
    if rows:
        body = [(str(incidence.steps[i]), str(incidence.at_risk[i]), str(failed.events[i]),
                 _f(failed.incidence[i]), f"{_f(failed.low[i])} - {_f(failed.high[i])}")
                for i in rows]
        out.lines(_table(("step", "at risk", event, f"share {event} by step", "95% band"),
                         body, frozenset({0, 1, 2, 3})))
        out.line("")
        names_body = [(step_name(c.name), str(c.total), _f(c.incidence[-1]),
                       f"{_f(c.low[-1])} - {_f(c.high[-1])}") for c in by_name]
        out.lines(_table(("last step", "episodes", f"share by step {last}", "95% band"),
                         names_body,
                         frozenset({1, 2})))
    if others:
        out.line("competing ends by step " + str(last) + ": " + ", ".join(
            f"{step_name(c.name)} {c.total} ({_f(c.incidence[-1])})"
            for c in others))
    if sum(incidence.censored):
        out.line(f"censored (no outcome): {sum(incidence.censored)}")
    if left:
        out.line("left out: " + ", ".join(f"{n} {k}" for k, n in sorted(left.items())))
    out.line(f"next: pytest-prove compare {terminal_text(_baseline_of(run))} {label} --event "
             f"{event}")
    return EXIT_OK


def _steps_arguments(parser: argparse.ArgumentParser) -> None:
    _pair(parser)
    _one_event(parser)
    parser.add_argument("--q", type=fraction, default=0.05,
                        help="level of the test and of BH over step names; default 0.05")
    parser.add_argument("--max-hr", type=float, default=2.0,
                        help="the largest hazard ratio you accept not being able to see; "
                             "default 2.0")


@command("compare", "do failing episodes stop sooner after the change? (log-rank by step)",
         _steps_arguments)
def _compare_steps(args: argparse.Namespace, out: Output) -> int:
    from .stats.steps import detectable_hazard_ratio, logrank, logrank_by_cause

    store = Store(Path(args.store))
    before, after = load_run(store, args.before), load_run(store, args.after)
    event, _ = _event_of(args, before, after)
    a, left_a = _endings(before, event)
    b, left_b = _endings(after, event)
    common = {e.stratum for e in a} & {e.stratum for e in b}
    if not common:
        raise RefusalError(
            f"runs {_label_of(before)!r} and {_label_of(after)!r} share no condition;"
            " compare runs of the same rollout")
    a = [e for e in a if e.stratum in common]
    b = [e for e in b if e.stratum in common]

    def is_event(e: _Ending) -> bool:
        return e.cause is not None and e.cause.startswith("step:")

    test = logrank([e.step for e in a], [is_event(e) for e in a],
                   [e.step for e in b], [is_event(e) for e in b],
                   [e.stratum for e in a], [e.stratum for e in b])
    per_step = logrank_by_cause(
        [e.step for e in a], [e.cause if is_event(e) else None for e in a],
        [e.step for e in b], [e.cause if is_event(e) else None for e in b],
        [e.stratum for e in a], [e.stratum for e in b], q=args.q)
    detectable = detectable_hazard_ratio(test.variance, alpha=args.q)
    if test.p <= args.q and test.hazard_ratio is not None:
        way = "sooner" if test.hazard_ratio > 1 else "later"
        word = f"different: {event} episodes stop {way} in {_label_of(after)}"
    elif detectable is not None and detectable <= args.max_hr:
        word = "no significant change"
    else:
        word = "too small to tell"
    la, lb = _label_of(before), _label_of(after)
    out.document("compare", {
        "before": la, "after": lb, "event": event, "word": word, "strata": len(common),
        "logrank": test.to_dict(), "detectable_hazard_ratio": detectable,
        "max_hr": args.max_hr, "q": args.q,
        "by_step": [t.to_dict() for t in per_step],
        "left_out": {"before": dict(left_a), "after": dict(left_b)},
        "method": "log-rank over step index, stratified by condition; other ends censored at "
                  "their step; Peto's one-step hazard ratio exp((O-E)/V); per step name: "
                  "cause-specific log-rank, Benjamini-Hochberg",
    })
    # The document keeps the names whole; the text shows them as the terminal can.
    la, lb, event = terminal_text(la), terminal_text(lb), terminal_text(event)
    hr = ("none (no information)" if test.hazard_ratio is None else
          f"{test.hazard_ratio:.2f} ({_f(test.hr_low, 2)} to {_f(test.hr_high, 2)}, 95%)")
    out.line(f"{word} (log-rank stratified by condition over {len(common)} conditions, "
             f"{_p_is(test.p)}); hazard ratio {lb} against {la}: {hr}")
    out.lines(_table(("run", "episodes", event, "expected"),
                     [(la, str(test.n_a), str(test.observed_a), f"{test.expected_a:.3f}"),
                      (lb, str(test.n_b), str(test.observed_b), f"{test.expected_b:.3f}")],
                     frozenset({1, 2, 3})))
    out.line(f"statistic: chi2 = {test.statistic:.3f} on 1 d.f., variance {test.variance:.3f},"
             f" {_p_is(test.p)}; could not have detected a hazard ratio below "
             f"{_f(detectable, 2)} (80% power, level {args.q:g}; you accept {args.max_hr:g})")
    if per_step:
        out.line(f"by last step: cause-specific log-rank, other steps censored; "
                 f"Benjamini-Hochberg at q = {args.q:g}")
        out.lines(_table(
            ("last step", la, lb, "chi2", "p", "q", "flag", "detectable HR"),
            [(terminal_text(t.cause.removeprefix("step:")), str(t.test.observed_a),
              str(t.test.observed_b),
              f"{t.test.statistic:.3f}", _p(t.test.p), _p(t.q),
              "yes" if t.flag else "-", _f(t.detectable, 2)) for t in per_step],
            frozenset({1, 2, 3, 4, 5})))
    out.line("this asks whether failures come sooner among episodes still going; whether they "
             "come more often overall is fix-check's question")
    out.line(f"next: pytest-prove fix-check {la} {lb} --event {event}")
    return EXIT_OK


# --------------------------------------------------------------------------- fix-check


def _fix_arguments(parser: argparse.ArgumentParser) -> None:
    _pair(parser)
    _one_event(parser)
    parser.add_argument("--alpha", type=fraction, default=0.05,
                        help="level of the test and of BH over cases; default 0.05")
    parser.add_argument("--max-mde", type=fraction, default=0.20,
                        help="the smallest change a conclusive run must be able to see; "
                             "default 0.20")


@command("fix-check", "did the event get more or less frequent over cases? (exact CMH)",
         _fix_arguments)
def _fix_check(args: argparse.Namespace, out: Output) -> int:
    from .stats.fixcheck import Case, fix_check

    store = Store(Path(args.store))
    before, after = load_run(store, args.before), load_run(store, args.after)
    event, worse_when = _event_of(args, before, after)
    labels = _keys_and_labels(before, after)
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    cases: dict[tuple[str, str], str] = {}
    left: Counter[str] = Counter()
    for offset, run in ((0, before), (2, after)):
        for r in run.episodes:
            key = (str(r["rollout"]), str(r["condition_key"]))
            if r.get("error") is not None or r.get("outcome") is None:
                left["no outcome or errored"] += 1
                continue
            counts[key][offset] += int(r["outcome"] == event)
            counts[key][offset + 1] += 1
            case = (r.get("meta") or {}).get("case_id")
            if case is not None:
                cases.setdefault(key, str(case))
    chosen = [key for key, c in sorted(counts.items()) if c[1] and c[3]]
    if not chosen:
        raise RefusalError(
            f"runs {_label_of(before)!r} and {_label_of(after)!r} share no condition "
            "with an outcome in both; compare runs of the same rollout")

    def name(key: tuple[str, str]) -> str:
        label = labels[key][0]
        return label if key not in cases or cases[key] == label.split("=")[-1] else \
            f"{label} (case {cases[key]})"

    result = fix_check([Case(name(k), counts[k][0], counts[k][1], counts[k][2], counts[k][3])
                        for k in chosen], worse_when=worse_when, alpha=args.alpha,
                       max_mde=args.max_mde)
    la, lb = _label_of(before), _label_of(after)
    out.document("fix-check", {"before": la, "after": lb, "event": event,
                               "left_out": dict(left), **result.to_dict(),
                               "method": "exact conditional Cochran-Mantel-Haenszel over "
                                         "cases; Mantel-Haenszel risk difference, Sato's "
                                         "variance; Fisher per case with Benjamini-Hochberg"})
    # The document keeps the names whole; the text shows them as the terminal can.
    la, lb, event = terminal_text(la), terminal_text(lb), terminal_text(event)
    share = f"{result.x_new} of {result.n_new} in {lb} against {result.x_old} of {result.n_old} "\
            f"in {la}"
    if result.word in ("worse", "safer"):
        head = f"{result.word}: {event} {share}, over {len(chosen)} cases"
    elif result.word == "no significant change":
        head = (f"no significant change: {event} {share}; it could have detected a rise of "
                f"{result.rise} and a fall of {result.fall} (you asked for "
                f"{args.max_mde:.3f})")
    else:
        head = (f"too small to tell: {event} {share}, and this run could not have detected a "
                f"change of {args.max_mde:.3f} (rise {result.rise}, fall {result.fall})")
    out.line(head)
    out.line(f"exact conditional Cochran-Mantel-Haenszel test over {len(chosen)} cases "
             f"({result.informative} informative), two-sided; alpha = {args.alpha:g}")
    out.line(f"{lb} {event}: observed {result.observed}, expected {result.expected:.3f}, "
             f"variance {result.variance:.3f}; {_p_is(result.p)}")
    out.line(f"difference: {100 * result.risk_difference:+.1f} points, {lb} minus {la} "
             f"({100 * result.rd_low:+.1f} to {100 * result.rd_high:+.1f}, 95%; "
             "Mantel-Haenszel weights, Sato's variance)")
    out.line(f"smallest common change it could have detected (80% power): rise "
             f"{result.rise}, fall {result.fall}")
    out.line(f"Fisher's exact test per case, Benjamini-Hochberg at q = {args.alpha:g}; "
             f"{sum(c.flag for c in result.cases)} flagged")
    out.lines(_table(
        ("case", f"{la} {event}/n", f"{lb} {event}/n", "change", "p", "q", "flag"),
        [(terminal_text(c.case.name), f"{c.case.x_old}/{c.case.n_old}",
          f"{c.case.x_new}/{c.case.n_new}",
          f"{100 * c.change:+.1f} pts", _p(c.p), _p(c.q), "yes" if c.flag else "-")
         for c in result.cases], frozenset({1, 2, 3, 4, 5})))
    if left:
        out.line("left out: " + ", ".join(f"{n} {k}" for k, n in sorted(left.items())))
    if result.word == "too small to tell":
        if result.repeats_needed is not None:
            out.line(f"next: run {result.repeats_needed} repeats per case in each version, as "
                     "two fresh runs, then pytest-prove fix-check on them")
        else:
            out.line("next: no number of repeats on these cases reaches that size; accept a "
                     "larger --max-mde or add cases")
    else:
        out.line(f"next: pytest-prove where {lb} --event {event}")
    return EXIT_OK


# --------------------------------------------------------------------------- cost and plan
# The figures and their lines live in cost.py; these only read the runs and print.


def _cost_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run name, run id, latest, or baseline:NAME")
    parser.add_argument("run2", nargs="?", help="a second run: its ratio per episode")


@command("cost", "tokens in and out, calls and price by model and condition (with a second "
         "run: the ratio per episode)", _cost_arguments)
def _cost(args: argparse.Namespace, out: Output) -> int:
    from .report import cost as cost_text
    from .review import cost

    store = Store(Path(args.store))
    runs = [load_run(store, name) for name in (args.run, args.run2) if name]
    costs = [cost.cost_of(run, cost.prices_for(run, Path.cwd())) for run in runs]
    if len(costs) == 2:
        both = cost.compare_costs(costs[0], costs[1])
        out.document("cost", {"runs": [cost_text.cost_document(c) for c in costs],
                              "median_ratio": both.median_ratio,
                              "total_ratio": both.total_ratio,
                              "price_ratio": both.price_ratio})
        out.lines(cost_text.format_comparison(both))
    else:
        out.document("cost", cost_text.cost_document(costs[0]))
        out.lines(cost_text.format_cost(costs[0]))
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
    from .report import cost as cost_text
    from .review import cost
    from .spec import condition_key, load_spec

    source = load_run(Store(Path(args.store)), args.source)
    if args.replicates is not None and args.replicates < 1:
        raise RefusalError(f"--replicates must be >= 1, got {args.replicates}")
    planned: dict[str, tuple[list[str], int]] = {}
    if args.spec:
        spec = load_spec(Path(args.spec))
        keys = [condition_key(c) for c in spec.declaration.conditions()]
        planned[spec.target_id] = (keys, args.replicates or spec.declaration.replicates)
    else:
        for record in source.episodes:
            keys, n = planned.setdefault(str(record["rollout"]), ([], 0))
            if record["condition_key"] not in keys:
                keys.append(str(record["condition_key"]))
            planned[str(record["rollout"])] = (keys, max(n, int(record["replicate"]) + 1))
        if args.replicates:
            planned = {r: (k, args.replicates) for r, (k, _) in planned.items()}
    prices = cost.prices_for(source, Path.cwd())
    plan = cost.estimate_plan(source, planned, prices)
    out.document("plan", {"from": plan.source, "episodes": plan.episodes,
                          "input": plan.input, "output": plan.output, "price": plan.price,
                          "unpriced": list(plan.unpriced)})
    out.lines(cost_text.format_plan(plan, prices))
    return EXIT_OK


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
                        help="folder of runs and baselines (default: .prove)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="write one JSON document instead of text")
    parser.add_argument("--store", default=".prove",
                        help="folder of runs and baselines (default: .prove)")
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
        return COMMANDS[args.command].run(args, out)
    except (StoreError, CaseMixError, SpecError, RefusalError, ValueError) as exc:
        if out.as_json:
            out.document(args.command, {"error": str(exc)})
        print(f"pytest-prove {args.command}: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except BrokenPipeError:
        # The reader (`| head`) stopped reading: not an error of ours.  Point stdout at
        # devnull so that the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
