"""What the commands of ``pytest-prove`` print: one function per command, taking the read
side's result objects and returning lines (and, for ``--json``, the document's body).

Every name that came from a rollout or the store goes through
:func:`~pytest_prove.report._format.terminal_text` in the lines; the documents keep them
whole.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_prove.declare.chaos import chaos_text
from pytest_prove.declare.spec import NO_OUTCOME_EVENT, condition_label, quoted_label
from pytest_prove.review import Review
from pytest_prove.review.baseline_diff import BaselineDiff, EventRate, ending_word
from pytest_prove.review.describe import Description
from pytest_prove.review.fixcheck import FixCheckReview
from pytest_prove.review.flips import Flips, Replay, ending_of
from pytest_prove.review.steps import StepComparison, Where
from pytest_prove.review.tallies import RunLine, Tally

from ._format import plain_text, terminal_text
from .json import comparison_document
from .notes import fault_text, set_aside, unfinished
from .terminal import format_comparison

__all__ = [
    "baseline_diff_document",
    "baseline_diff_lines",
    "baseline_text_lines",
    "check_document",
    "check_lines",
    "compare_steps_document",
    "compare_steps_lines",
    "comparison_lines",
    "diff_lines",
    "fix_check_document",
    "fix_check_lines",
    "flips_document",
    "flips_lines",
    "merge_document",
    "merge_lines",
    "partial_text",
    "prune_lines",
    "replay_command",
    "report_lines",
    "run_note_lines",
    "run_report_lines",
    "runs_lines",
    "show_document",
    "show_lines",
    "table",
    "where_document",
    "where_lines",
]


def table(header: Sequence[str], rows: Sequence[Sequence[str]],
          numeric: frozenset[int] = frozenset()) -> list[str]:
    """Columns padded to their widest cell; the ``numeric`` ones right-aligned."""
    widths = [max(len(str(line[i])) for line in [header, *rows]) for i in range(len(header))]
    return ["  ".join((str(c).rjust(w) if i in numeric else str(c).ljust(w))
                      for i, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
            for line in [header, *rows]]


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _hr_limit(value: float | None) -> str:
    """A detectable hazard ratio, rounded away from 1 (never a promise it does not keep)."""
    if value is None:
        return "-"
    scaled = value * 100
    return f"{(math.ceil(scaled) if value >= 1 else math.floor(scaled)) / 100:.2f}"


def _p(value: float) -> str:
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _p_is(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def _left_out(left: dict[str, int]) -> str:
    return "left out: " + ", ".join(f"{n} {k}" for k, n in sorted(left.items()))


# --------------------------------------------------------------------------- diff, check, report


def run_note_lines(review: Review) -> list[str]:
    """What the comparison left aside (not run, new, left out) and how either run is
    unfinished: worded here once, for every front door."""
    lines = [f"{head}: {text}" for head, text in set_aside(review, terminal_text)]
    lines.extend(f"note: {plain_text(note)}" for note in review.notes)
    return lines


def comparison_lines(review: Review, verbose: bool) -> list[str]:
    """The comparison's table and verdict, then the run notes."""
    lines = format_comparison(review.require_comparison(), before=review.labels.before,
                              after=review.labels.after, verbose=verbose)
    return lines + run_note_lines(review)


def diff_lines(review: Review, verbose: bool) -> list[str]:
    comparison = review.require_comparison()
    lines = comparison_lines(review, verbose)
    if comparison.verdict.word == "worse":
        after = shlex.quote(review.labels.after)
        events = [r.event for r in comparison.verdict.worse if r.event != NO_OUTCOME_EVENT]
        if events:
            lines.append(plain_text(f"next: pytest-prove where {after} --event "
                                    f"{shlex.quote(events[0])}"))
        else:  # only missing outcomes rose: the episodes say why they ended
            lines.append(plain_text(f"next: pytest-prove show {after} (its errored and "
                                    "timed-out episodes, with their messages)"))
    return lines


def partial_text(review: Review) -> str | None:
    """How much of the baseline a run left out on purpose (-k, -m, --lf, a skip), or None
    when it ran every condition the baseline holds (or left some out by mistake, which
    fails the gate with its own reason)."""
    coverage = review.coverage
    left = [label for labels in coverage.on_purpose.values() for label in labels]
    if not left or coverage.by_mistake:
        return None
    why = "; ".join(f"{reason}: {', '.join(map(quoted_label, labels[:6]))}"
                    f"{' ...' if len(labels) > 6 else ''}"
                    for reason, labels in coverage.on_purpose.items())
    return (f"{len(left)} of the {coverage.total} condition(s) of {review.labels.before!r} "
            f"were not run ({why})")


def _partial_reason(review: Review, partial_ok: bool) -> str | None:
    """The check's reason to fail on a partial run it was not told about."""
    text = partial_text(review)
    if text is None or partial_ok:
        return None
    return (f"run {review.labels.after!r} is partial: {text}, so the verdict would cover only "
            "what ran; run every condition, or pass --partial if it is partial on purpose")


def check_document(review: Review, *, partial_ok: bool = False) -> dict[str, Any]:
    gate = review.gate
    reasons = list(gate.reasons)
    partial = _partial_reason(review, partial_ok)
    if partial is not None:
        reasons.append(partial)
    return {**comparison_document(review),
            "fail_on": sorted(gate.fail_on), "failed": gate.failed or bool(reasons),
            "reasons": reasons, "partial": partial_text(review) is not None,
            "notes": list(gate.notes)}


def check_lines(review: Review, verbose: bool, *, partial_ok: bool = False) -> list[str]:
    gate = review.gate
    lines = comparison_lines(review, verbose)
    reasons = list(gate.reasons)
    partial = _partial_reason(review, partial_ok)
    if partial is not None:
        reasons.append(partial)
    if reasons:
        # The check fails whatever the verdict says (an incomplete merge, conditions not
        # collected or not run): that comes first, so a first line reading "no significant
        # change" is never taken for a pass; the reasons are repeated last, where CI logs
        # are read.
        failed = [f"check failed: {plain_text(r)}" for r in reasons]
        return failed + lines + [f"note: {plain_text(n)}" for n in gate.notes] + failed
    comparison = review.require_comparison()
    word = comparison.verdict.word
    margin = ("" if comparison.margin is None
              else f", the margin's {comparison.margin.word!r}")
    left = partial_text(review)
    if left is not None:
        lines.append(f"partial on purpose (--partial): {plain_text(left)}; they are left out "
                     "of the verdict")
    lines.extend(f"note: {plain_text(n)}" for n in gate.notes)
    lines.append(f"check {'failed' if gate.verdict_failed else 'passed'}: the verdict is "
                 f"{word!r}{margin}; --fail-on {','.join(sorted(gate.fail_on))}")
    return lines


def run_report_lines(found: Description, path: Path) -> list[str]:
    return [f"report of run {terminal_text(found.labels.after)} written to {path}: "
            f"{len(found.rows)} rates with {100 * found.level:g}% exact intervals, nothing "
            "compared", f"next: open {path}"]


def report_lines(review: Review, path: Path) -> list[str]:
    word = review.require_comparison().verdict.word
    return [f"{word}: report of {terminal_text(review.labels.before)} -> "
            f"{terminal_text(review.labels.after)} written to {path}",
            *(f"{head}: {plain_text(text)}" for head, text in unfinished(review)),
            f"next: open {path}"]


# --------------------------------------------------------------------------- runs, show


def runs_lines(root: Path, runs: Sequence[RunLine], baselines: Sequence[RunLine]) -> list[str]:
    if not runs and not baselines:
        return [f"no runs in {root} yet",
                "next: run a sweep, e.g. pytest --prove-save-baseline current"]
    header = ("name", "id", "status", "rollouts", "episodes", "started", "paired with")
    body = [(r["name"], r["run_id"], r["status"], str(r["rollouts"]), str(r["episodes"]),
             r["started"][:19], r["paired_with"] or "-") for r in [*runs, *baselines]]
    damaged = [r for r in [*runs, *baselines] if r.get("damaged")]
    said = [f"damaged: {terminal_text(r['name'])}: {terminal_text(r['damaged'], 300)}"
            for r in damaged]
    if damaged:
        said.append("next: pytest-prove prune deletes damaged run folders; restore a damaged "
                    "baseline with git, or save it again (pytest --prove-save-baseline NAME)")
    return [f"{len(runs)} run(s) and {len(baselines)} baseline(s) in {root}",
            *table(header, body, frozenset({3, 4})), *said,
            "next: pytest-prove show RUN, or pytest-prove diff A B"]


def show_document(t: Tally) -> dict[str, Any]:
    run, m = t.run, t.run.manifest
    return {
        **t.summary, "ended": m.get("ended"), "salt": run.salt, "path": str(run.path),
        "git_commit": m.get("git_commit"), "command_line": m.get("command"),
        "packages": m.get("packages"), "episodes_read": len(run.episodes),
        "outcomes": dict(t.outcomes), "by_condition": {k: dict(v) for k, v in
                                                       t.by_condition.items()},
        "without_outcome": dict(t.without_outcome), "errored": t.errored,
        "rerun": {"episodes": t.rerun, "recovered": t.recovered},
        "notes": list(run.notes),
        "faults": {label: c.to_json() for label, c in (t.faults or {}).items()},
    }


def _shard_lines(m: Mapping[str, Any]) -> list[str]:
    """A shard's slice, or the shards a merged run holds (see docs/scale.md)."""
    shard, merged = m.get("shard"), m.get("merged")
    if isinstance(shard, Mapping):
        size = sum(len(reps) for keys in (shard.get("slice") or {}).values()
                   for reps in keys.values())
        return [f"shard {shard.get('index')}/{shard.get('count')} of its sweep: {size} "
                "replicates in its slice (join the shards with pytest-prove merge)"]
    if isinstance(merged, Mapping):
        count = merged.get("count")
        held = ", ".join(f"{k}/{count} {terminal_text(str((v or {}).get('name')))!r}"
                         for k, v in sorted((merged.get("shards") or {}).items(),
                                            key=lambda kv: int(kv[0])))
        missing = merged.get("missing") or []
        return [f"merged from shards {held}"
                + (f"; missing {', '.join(f'{k}/{count}' for k in missing)}" if missing
                   else "")]
    return []


def show_lines(t: Tally, verbose: bool) -> list[str]:
    run, m = t.run, t.run.manifest
    label = t.summary["name"]
    lines = [
        f"run {label!r} is {run.status}: {len(run.episodes)} episodes, {t.with_outcome} with "
        f"an outcome, {t.without_outcome.get('no_outcome', 0)} with none, "
        f"{len(t.errored)} errored",
        f"id {run.run_id} · started {run.started or '-'} · ended {m.get('ended') or '-'}"
        f" · salt {run.salt or '-'} · paired with {t.summary['paired_with'] or '-'}",
    ]
    if m.get("git_commit"):
        lines.append(f"git commit {m['git_commit']}")
    lines.extend(_shard_lines(m))
    if m.get("command"):
        lines.append("command: " + terminal_text(" ".join(str(c) for c in m["command"]), 400))
    for rollout_id, info in (m.get("rollouts") or {}).items():
        declaration = (info or {}).get("declaration") or {}
        failures = ", ".join(map(terminal_text, declaration.get("failures", []))) or "-"
        successes = ", ".join(map(terminal_text, declaration.get("successes", []))) or "-"
        chaos = declaration.get("chaos")
        lines.append(f"rollout {terminal_text(info.get('label') or rollout_id)}: failures "
                     f"{failures}; successes {successes}; "
                     f"{declaration.get('replicates', '?')} replicates"
                     + ("" if not chaos else f"; chaos: {terminal_text(chaos_text(chaos))}"))
    names = sorted(t.outcomes)
    if t.by_condition:
        body = [(terminal_text(condition), *(str(c.get(n, 0)) for n in names),
                 str(sum(c.values()))) for condition, c in sorted(t.by_condition.items())]
        lines.extend(table(("condition", *map(terminal_text, names), "episodes"), body,
                           frozenset(range(1, len(names) + 2))))
    if t.faults:
        lines.append("faults injected (chaos): " + fault_text(t.faults, terminal_text)
                     .split(". By condition")[0])
        body = [(terminal_text(label), str(c.episodes), str(c.hit), str(c.calls),
                 str(c.faults), ", ".join(f"{k} {n}" for k, n in c.by_kind.items()) or "-")
                for label, c in t.faults.items()]
        lines.extend(table(("condition", "episodes", "with faults", "calls", "faults",
                            "by kind"), body, frozenset(range(1, 5))))
    shown = t.errored if verbose else t.errored[:10]
    for e in shown:
        lines.append(f"errored: {terminal_text(e['condition'])} r{e['replicate']} "
                     f"(seed {e['seed']}, {terminal_text(e['node'] or e['rollout'])}): "
                     f"{terminal_text(e['type'])}: {terminal_text(e['message'], 200)}")
        if e.get("replay"):
            lines.append(f"    replay: {replay_command(Replay(**e['replay']))}")
        if verbose and e.get("traceback"):
            lines.extend(f"    {terminal_text(line, 200)}"
                         for line in str(e["traceback"]).rstrip().splitlines()[-8:])
    if len(shown) < len(t.errored):
        lines.append(f"... and {len(t.errored) - len(shown)} more errored (-v lists them all)")
    if t.rerun:
        lines.append(f"rerun: {t.rerun} episode(s) ran more than once on their seed (a plugin "
                     f"such as pytest-rerunfailures), each counted once by its last attempt; "
                     f"{t.recovered} ended with an outcome after an earlier attempt had none "
                     "(each record's 'earlier' says how)")
    lines.extend(f"note: {note}" for note in run.notes)
    if run.status == "incomplete" and not run.is_baseline:
        lines.append(f"next: finish it with pytest --prove-resume={run.name}")
    elif t.errored:
        lines.append("next: run a replay line with --pdb to stop where the rollout raised")
    else:
        lines.append(f"next: pytest-prove diff BASELINE {label}")
    return lines


# --------------------------------------------------------------------------- where, compare


def where_document(w: Where) -> dict[str, Any]:
    incidence = w.incidence
    failed = incidence.curve("failed")
    return {
        "run": w.run, "event": w.event, "episodes": len(w.endings),
        "failed": failed.total, "left_out": dict(w.left_out),
        "method": "Aalen-Johansen cumulative incidence by step index; other outcomes and "
                  "timeouts are competing ends, episodes with no outcome are censored; "
                  "bootstrap percentile band resampling cases, B=1000, seed 0",
        "incidence": incidence.to_dict(),
        "by_last_step": [{"step": c.name.removeprefix("step:"), "episodes": c.total,
                          "share": c.incidence[-1], "low": c.low[-1], "high": c.high[-1]}
                         for c in (incidence.curve(n) for n in w.failed_causes)],
    }


def _step_name(cause: str) -> str:
    return terminal_text(cause.partition(":")[2] or cause)


def where_lines(w: Where) -> list[str]:
    incidence = w.incidence
    failed = incidence.curve("failed")
    by_name = [incidence.curve(c) for c in w.failed_causes]
    others = [c for c in incidence.curves if c.name.startswith("ended:") or
              c.name == "timed out"]
    rows = [i for i, d in enumerate(failed.events) if d]
    last = incidence.steps[-1]
    label, event = terminal_text(w.run), terminal_text(w.event)
    lines = []
    if failed.total == 0:
        lines.append(f"none of {len(w.endings)} episodes of {label} ended {event}, so no "
                     "failing episode stopped anywhere")
    else:
        names = sorted(by_name, key=lambda c: -c.total)
        shown = ", ".join(f"{_step_name(c.name)} {c.total}" for c in names[:4])
        lines.append(f"{failed.total} of {len(w.endings)} episodes of {label} ended "
                     f"{event}; by their last step: {shown} (where they stopped, not "
                     "necessarily the cause)")
    lines.append(f"Aalen-Johansen by step index (the number of steps recorded, else t): other "
                 f"outcomes and timeouts compete, no-outcome episodes are censored; 95% band: "
                 f"bootstrap over {incidence.clusters} cases, B = {incidence.bootstrap}, "
                 f"seed = {incidence.seed}")
    if rows:
        body = [(str(incidence.steps[i]), str(incidence.at_risk[i]), str(failed.events[i]),
                 _f(failed.incidence[i]), f"{_f(failed.low[i])} - {_f(failed.high[i])}")
                for i in rows]
        lines.extend(table(("step", "at risk", event, f"share {event} by step", "95% band"),
                           body, frozenset({0, 1, 2, 3})))
        lines.append("")
        names_body = [(_step_name(c.name), str(c.total), _f(c.incidence[-1]),
                       f"{_f(c.low[-1])} - {_f(c.high[-1])}") for c in by_name]
        lines.extend(table(("last step", "episodes", f"share by step {last}", "95% band"),
                           names_body, frozenset({1, 2})))
    if others:
        lines.append("competing ends by step " + str(last) + ": " + ", ".join(
            f"{_step_name(c.name)} {c.total} ({_f(c.incidence[-1])})" for c in others))
    if sum(incidence.censored):
        lines.append(f"censored (no outcome): {sum(incidence.censored)}")
    if w.left_out:
        lines.append(_left_out(w.left_out))
    if w.run.startswith("baseline:"):  # a baseline itself: set a run beside it
        lines.append(f"next: pytest-prove compare {label} RUN --event {event}")
    else:
        lines.append(f"next: pytest-prove compare {terminal_text(w.baseline)} {label} "
                     f"--event {event}")
    return lines


def compare_steps_document(c: StepComparison) -> dict[str, Any]:
    return {
        "before": c.before, "after": c.after, "event": c.event, "word": c.word,
        "strata": c.strata, "logrank": c.test.to_dict(),
        "detectable_hazard_ratio": c.detectable, "max_hr": c.max_hr, "q": c.q,
        "by_step": [t.to_dict() for t in c.by_step],
        "left_out": {"before": dict(c.left_before), "after": dict(c.left_after)},
        "method": "log-rank over step index, stratified by condition; other ends censored at "
                  "their step; Peto's one-step hazard ratio exp((O-E)/V); per step name: "
                  "cause-specific log-rank, Benjamini-Hochberg",
    }


def compare_steps_lines(c: StepComparison) -> list[str]:
    test = c.test
    la, lb, event = terminal_text(c.before), terminal_text(c.after), terminal_text(c.event)
    hr = ("none (no information)" if test.hazard_ratio is None else
          f"{test.hazard_ratio:.2f} ({_f(test.hr_low, 2)} to {_f(test.hr_high, 2)}, 95%)")
    lines = [f"{c.word} (log-rank stratified by condition over {c.strata} conditions, "
             f"{_p_is(test.p)}); hazard ratio {lb} against {la}: {hr}"]
    lines.extend(table(("run", "episodes", event, "expected"),
                       [(la, str(test.n_a), str(test.observed_a), f"{test.expected_a:.3f}"),
                        (lb, str(test.n_b), str(test.observed_b), f"{test.expected_b:.3f}")],
                       frozenset({1, 2, 3})))
    lines.append(f"statistic: chi2 = {test.statistic:.3f} on 1 d.f., variance "
                 f"{test.variance:.3f}, {_p_is(test.p)}; could not have detected a hazard "
                 f"ratio below {_hr_limit(c.detectable)} (80% power, level {c.q:g}; you accept "
                 f"{c.max_hr:g})")
    if c.by_step:
        lines.append(f"by last step: cause-specific log-rank, other steps censored; "
                     f"Benjamini-Hochberg at q = {c.q:g}")
        lines.extend(table(
            ("last step", la, lb, "chi2", "p", "q", "flag", "detectable HR"),
            [(terminal_text(t.cause.removeprefix("step:")), str(t.test.observed_a),
              str(t.test.observed_b),
              f"{t.test.statistic:.3f}", _p(t.test.p), _p(t.q),
              "yes" if t.flag else "-", _hr_limit(t.detectable)) for t in c.by_step],
            frozenset({1, 2, 3, 4, 5})))
    lines.append("this asks whether failures come sooner among episodes still going; whether "
                 "they come more often overall is fix-check's question")
    lines.append(f"next: pytest-prove fix-check {la} {lb} --event {event}")
    return lines


# --------------------------------------------------------------------------- fix-check


def fix_check_document(f: FixCheckReview) -> dict[str, Any]:
    return {"before": f.before, "after": f.after, "event": f.event,
            "left_out": dict(f.left_out), **f.result.to_dict(),
            "method": "exact conditional Cochran-Mantel-Haenszel over cases; Mantel-Haenszel "
                      "risk difference, Sato's variance; Fisher per case with "
                      "Benjamini-Hochberg"}


def fix_check_lines(f: FixCheckReview) -> list[str]:
    result = f.result
    la, lb, event = terminal_text(f.before), terminal_text(f.after), terminal_text(f.event)
    cases = len(result.cases)
    share = (f"{result.x_new} of {result.n_new} in {lb} against {result.x_old} of "
             f"{result.n_old} in {la}")
    if result.word in ("worse", "safer"):
        head = f"{result.word}: {event} {share}, over {cases} cases"
    elif result.word == "no significant change":
        head = (f"no significant change: {event} {share}; it could have detected a rise of "
                f"{result.rise} and a fall of {result.fall} (you asked for "
                f"{result.max_mde:.3f})")
    else:
        head = (f"too small to tell: {event} {share}, and this run could not have detected a "
                f"change of {result.max_mde:.3f} (rise {result.rise}, fall {result.fall})")
    lines = [
        head,
        f"exact conditional Cochran-Mantel-Haenszel test over {cases} cases "
        f"({result.informative} informative), two-sided; alpha = {result.alpha:g}",
        f"{lb} {event}: observed {result.observed}, expected {result.expected:.3f}, "
        f"variance {result.variance:.3f}; {_p_is(result.p)}",
        f"difference: {100 * result.risk_difference:+.1f} points, {lb} minus {la} "
        f"({100 * result.rd_low:+.1f} to {100 * result.rd_high:+.1f}, 95%; "
        "Mantel-Haenszel weights, Sato's variance)",
        f"smallest common change it could have detected (80% power): rise "
        f"{result.rise}, fall {result.fall}",
        f"Fisher's exact test per case, Benjamini-Hochberg at q = {result.alpha:g}; "
        f"{sum(c.flag for c in result.cases)} flagged",
    ]
    lines.extend(table(
        ("case", f"{la} {event}/n", f"{lb} {event}/n", "change", "p", "q", "flag"),
        [(terminal_text(c.case.name), f"{c.case.x_old}/{c.case.n_old}",
          f"{c.case.x_new}/{c.case.n_new}",
          f"{100 * c.change:+.1f} pts", _p(c.p), _p(c.q), "yes" if c.flag else "-")
         for c in result.cases], frozenset({1, 2, 3, 4, 5})))
    if f.left_out:
        lines.append(_left_out(f.left_out))
    if result.word == "too small to tell":
        if result.repeats_needed is not None:
            lines.append(f"next: run {result.repeats_needed} repeats per case in each version, "
                         "as two fresh runs, then pytest-prove fix-check on them")
        else:
            lines.append("next: no number of repeats on these cases reaches that size; accept "
                         "a larger --max-mde or add cases")
    else:
        lines.append(f"next: pytest-prove where {lb} --event {event}")
    return lines


# --------------------------------------------------------------------------- flips


def replay_command(replay: Replay) -> str:
    """The command line that replays one episode on its seed (quoted for a POSIX shell)."""
    words = ["pytest", shlex.quote(replay.item)]
    if replay.keyword is not None:
        words += ["-k", shlex.quote(replay.keyword)]
    words.append(f"--prove-replay={shlex.quote(replay.run)}")
    return terminal_text(" ".join(words), 600)


def _ending(record: Mapping[str, Any]) -> str:
    end = ending_of(record)
    if end["error"] is None:
        return terminal_text(str(end["outcome"]))
    error = end["error"]
    detail = ": ".join(str(x) for x in (error.get("type"), error.get("message")) if x)
    return (f"no outcome ({terminal_text(str(error.get('kind')))}"
            f"{': ' + terminal_text(detail, 160) if detail else ''})")


def flips_document(f: Flips) -> dict[str, Any]:
    return {"before": f.before, "after": f.after, "salt": f.salt, "paired": True,
            "twins": f.twins, "twins_unread": f.unread, "conditions": list(f.chosen) or None,
            "events": list(f.events) or None,
            "rows": [r.to_dict() for r in f.rows], "flips": [x.to_dict() for x in f.flips],
            "method": "twins: the episodes of the same condition and replicate, on the same "
                      "seed in both runs; a row's flips are its paired test's discordant "
                      "pairs (before_only = b, after_only = c)"}


def flips_lines(f: Flips, verbose: bool) -> list[str]:
    la, lb = terminal_text(f.before), terminal_text(f.after)
    scope = [*(f"condition {terminal_text(c)}" for c in f.chosen),
             *(f"event {terminal_text(e)}" for e in f.events)]
    where = f" ({'; '.join(scope)})" if scope else ""
    if f.flips:
        head = (f"{len(f.flips)} of {f.twins} twins ended differently in {lb} than in "
                f"{la}{where}")
    else:
        head = f"no twin ended differently in {lb} than in {la}{where}: all {f.twins} alike"
    lines = [head + f"; one salt, {terminal_text(f.salt)}: each twin ran on one seed in both"]
    if f.unread:
        lines.append(f"{f.unread} other twin(s) ended without an outcome in one run or both: "
                     + ("--missing=ignore leaves them out" if f.missing == "ignore" else
                        f"only the '{NO_OUTCOME_EVENT}' row reads them (drop --event, or add "
                        f"--event '{NO_OUTCOME_EVENT}')"))
    lines.extend(table(
        ("condition", "event", "twins", f"only in {la}", f"only in {lb}"),
        [(terminal_text(r.condition), terminal_text(r.event), str(r.twins),
          str(r.before_only), str(r.after_only)) for r in f.rows], frozenset({2, 3, 4})))
    lines.append("a row's 'only in' counts are its paired test's discordant pairs (b and c)")
    by_condition: dict[str, list[Any]] = {}
    for flip in f.flips:
        by_condition.setdefault(flip.condition, []).append(flip)
    for condition, found in by_condition.items():
        shown = found if verbose else found[:10]
        lines.append("")
        lines.append(f"{terminal_text(condition)}: {len(found)} twin(s) changed")
        for flip in shown:
            lines.append(f"  r{flip.replicate}  seed {flip.seed}  {_ending(flip.before)} -> "
                         f"{_ending(flip.after)}")
            if flip.replay is not None:
                lines.append(f"        {replay_command(flip.replay)}")
        if len(shown) < len(found):
            lines.append(f"  ... and {len(found) - len(shown)} more (-v lists them all)")
    if f.flips:
        lines.append("next: run a replay line as it is, or with --pdb to stop where the "
                     "rollout raised (a breakpoint() in the rollout stops there too)")
    else:
        lines.append(f"next: pytest-prove diff {la} {lb}")
    return lines


# --------------------------------------------------------------------------- prune


def size_text(count: int) -> str:
    """Bytes as a person reads them: 980 bytes, 12.4 kB, 3.1 MB (powers of 1000)."""
    if count < 1000:
        return f"{count} byte{'' if count == 1 else 's'}"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if count < scale * 1000 or unit == "GB":
            return f"{count / scale:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def _kept_words(kept: Sequence[dict[str, Any]], keep: int) -> str:
    why = [str(r["kept"]) for r in kept]
    parts = []
    if "newest" in why:
        newest = why.count("newest")
        parts.append("the newest" if newest == keep == 1 else f"the newest {newest}"
                     if newest == keep else f"all {newest} (fewer than {keep})")
    if "named" in why:
        parts.append(f"{why.count('named')} named (--named deletes them too)")
    if "being written" in why:
        parts.append(f"{why.count('being written')} being written by a session")
    if "symbolic link" in why:
        parts.append(f"{why.count('symbolic link')} that are symbolic links")
    return "kept " + ", ".join(parts) if parts else "kept none"


def prune_lines(doc: dict[str, Any]) -> list[str]:
    """What prune deleted (or would, with --dry-run), what it kept and why, and the bytes."""
    store, total, deleted = doc["store"], int(doc["runs"]), doc["deleted"]
    baselines = doc["baselines"]
    kept = _kept_words(doc["kept"], int(doc["keep"]))
    if not total:
        head = f"nothing to delete: no runs in {store}"
    elif not deleted:
        head = f"nothing to delete: {total} run(s) in {store}, {kept}"
    elif doc["dry_run"]:
        head = (f"would delete {len(deleted)} of {total} runs in {store}, freeing "
                f"{size_text(int(doc['bytes_freed']))}; {kept}")
    else:
        head = (f"deleted {len(deleted)} of {total} runs in {store}, "
                f"{size_text(int(doc['bytes_freed']))} freed; {kept}")
    lines = [head]
    if deleted:
        lines += table(("name", "id", "status", "started", "size"),
                       [(terminal_text(r["name"]), terminal_text(r["run_id"]), r["status"],
                         str(r["started"])[:19], size_text(int(r["bytes"]))) for r in deleted],
                       frozenset({4}))
    if doc["leftovers"]:
        verb = "would also remove" if doc["dry_run"] else "also removed"
        lines.append(f"{verb} {doc['leftovers']} folder(s) an interrupted prune left in "
                     f"{store}/runs")
    for failure in doc["failed"]:
        lines.append(f"not deleted: run {terminal_text(failure['name'])!r} "
                     f"({failure['path']}): {failure['reason']}")
    lines.append(f"baselines are never deleted: {len(baselines)} in {store}/baselines"
                 + (f" ({', '.join(terminal_text(b) for b in baselines[:6])}"
                    f"{' ...' if len(baselines) > 6 else ''})" if baselines else ""))
    if doc["failed"]:
        lines.append("next: make those folders writable (or stop what holds them), then "
                     "prune again")
    elif doc["dry_run"] and (deleted or doc["leftovers"]):
        lines.append("next: the same command without --dry-run deletes them")
    return lines


def merge_document(run: Any, saved: str | None) -> dict[str, Any]:
    """``merge --json``: the merged run, its shards, and what it lacks."""
    merged = run.manifest.get("merged") or {}
    return {"run": run.name, "run_id": run.run_id, "status": run.status, "salt": run.salt,
            "episodes": len(run.episodes), "count": merged.get("count"),
            "shards": merged.get("shards"), "missing": merged.get("missing"),
            "baseline": saved}


def merge_lines(run: Any, saved: str | None) -> list[str]:
    """What ``merge`` did: the verdict on completeness first, the shards, the next step."""
    merged = run.manifest.get("merged") or {}
    count = int(merged.get("count") or 0)
    missing = [int(k) for k in merged.get("missing") or []]
    shards = merged.get("shards") or {}
    name = terminal_text(run.name)
    head = (f"merged {len(shards)} of {count} shards into run {name!r}: "
            f"{len(run.episodes):,} episodes, salt {terminal_text(run.salt)}, ")
    if missing:
        head += ("incomplete: slice(s) " + ", ".join(f"{k}/{count}" for k in missing)
                 + " missing")
    else:
        head += "complete"
    lines = [head]
    for index, info in sorted(shards.items(), key=lambda kv: int(kv[0])):
        lines.append(f"  shard {index}/{count}: run {terminal_text(str(info.get('name')))!r} "
                     f"({terminal_text(str(info.get('run_id')))})")
    if saved is not None:
        lines.append(terminal_text(saved, 1000))
    paired = (run.manifest.get("paired_with") or {}).get("baseline")
    if missing:
        lines.append(f"next: run the missing shard(s) with the same salt, then merge every "
                     f"shard's run again; a check or a baseline of {name!r} is refused "
                     "until then")
    elif paired:
        lines.append(f"next: pytest-prove check baseline:{terminal_text(str(paired))} {name}")
    else:
        lines.append(f"next: pytest-prove show {name}, or compare it: pytest-prove check "
                     f"BASELINE {name}")
    return lines


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _event_row(e: EventRate) -> tuple[str, ...]:
    moved = ""
    if e.rate_before is not None and e.rate_after is not None and e.changed:
        moved = f"{e.rate_after - e.rate_before:+.3f}"
    return (f"    {terminal_text(e.event)} ({e.kind})", _rate(e.rate_before), "->",
            _rate(e.rate_after), moved, f"{e.before} of {e.before_of}",
            f"{e.after} of {e.after_of}")


def _baseline_name(run: Any) -> str:
    return f"{terminal_text(run.name)!r} ({terminal_text(str(run.path), 120)}, " \
           f"{len(run.episodes)} episodes)"


def baseline_diff_lines(d: BaselineDiff, verbose: bool = False) -> list[str]:
    """What a change to a baseline does, condition by condition: the changed ones first
    (each event's rate before and after, the replicates that now end otherwise), then how
    many did not change."""
    changed = d.changed
    lines = [f"baseline-diff: {_baseline_name(d.old)} -> {_baseline_name(d.new)}"]
    if not changed and not d.header:
        lines.append(f"no change: the two baselines hold the same endings in all "
                     f"{len(d.conditions)} condition(s)")
        return lines
    pairing = ("same salt: each replicate is read beside its twin on the same seed"
               if d.same_salt else
               "other salts: the episodes ran on other seeds, so only rates are compared")
    lines.append(f"{len(changed)} of {len(d.conditions)} condition(s) changed"
                 + (f"; {d.flips} replicate(s) end otherwise on the same seed"
                    if d.same_salt else "") + f" ({pairing})")
    for said in d.header:
        lines.append(f"header: {terminal_text(said, 200)}")
    for change in changed:
        what = [f"{change.episodes_before} -> {change.episodes_after} episodes"]
        if change.episodes_before == 0:
            what = [f"new: {change.episodes_after} episodes"]
        elif change.episodes_after == 0:
            what = [f"removed: it had {change.episodes_before} episodes"]
        if change.flipped:
            shown = change.flipped if verbose else change.flipped[:6]
            listed = ", ".join(f"r{r} {terminal_text(b, 30)} -> {terminal_text(a, 30)}"
                               for r, b, a in shown)
            more = len(change.flipped) - len(shown)
            what.append(f"{len(change.flipped)} replicate(s) changed: {listed}"
                        + (f" and {more} more (-v lists them)" if more else ""))
        lines.append(f"{terminal_text(change.label, 120)}: {'; '.join(what)}")
        rows = [_event_row(e) for e in change.events
                if e.changed or change.episodes_before == 0 or change.episodes_after == 0]
        lines += table(("", "before", "", "after", "change", "before (n)", "after (n)"), rows,
                       frozenset({1, 3, 4, 5, 6}))[1:]
    same = len(d.conditions) - len(changed)
    if same:
        lines.append(f"unchanged: {same} condition(s) hold the same endings")
    lines.append("a failure rate that rose (or a success rate that fell) in the baseline "
                 "makes later gates easier to pass; next: check that the new baseline was "
                 "saved from a complete run of the agent as merged (pytest "
                 "--prove-save-baseline NAME)")
    return lines


def baseline_diff_document(d: BaselineDiff) -> dict[str, Any]:
    """``baseline-diff --json``: every condition of either baseline, changed or not."""
    return {"old": {"name": d.old.name, "path": str(d.old.path), "salt": d.old.salt,
                    "episodes": len(d.old.episodes)},
            "new": {"name": d.new.name, "path": str(d.new.path), "salt": d.new.salt,
                    "episodes": len(d.new.episodes)},
            "same_salt": d.same_salt, "header": list(d.header),
            "changed": len(d.changed), "changed_replicates": d.flips,
            "conditions": [c.to_json() for c in d.conditions]}


def baseline_text_lines(run: Any, refused: str | None = None, raw: str = "") -> list[str]:
    """A baseline as plain text, one line per replicate (``git diff`` shows an outcome that
    changed as one line): its header's gist, then each condition's endings.  A file that
    is refused: the reason, then its raw lines."""
    if refused is not None:
        return [f"damaged baseline: {terminal_text(refused, 400)}", *raw.splitlines()]
    m = run.manifest
    lines = [f"baseline {terminal_text(run.name)!r}: salt {terminal_text(run.salt)}, "
             f"{len(run.episodes)} episodes, saved {m.get('saved', '-')} from run "
             f"{terminal_text(str(m.get('run_id', '-')))}"]
    for rollout, info in sorted((m.get("rollouts") or {}).items()):
        declaration = info.get("declaration") or {} if isinstance(info, Mapping) else {}
        lines.append(f"rollout {terminal_text(rollout)}: outcomes "
                     f"{', '.join(map(str, declaration.get('outcomes') or ()))}; failures "
                     f"{', '.join(map(str, declaration.get('failures') or ()))}; successes "
                     f"{', '.join(map(str, declaration.get('successes') or ()))}")
    last = None
    for record in sorted(run.episodes, key=lambda r: (str(r["rollout"]),
                                                      str(r["condition_key"]),
                                                      int(r["replicate"]))):
        condition = (str(record["rollout"]), str(record["condition_key"]))
        label = terminal_text(condition_label_of(record), 120)
        if condition != last:
            last = condition
            lines.append(f"condition {label} of {terminal_text(condition[0])}")
        lines.append(f"  {label} r{record['replicate']}: {terminal_text(ending_word(record))}")
    return lines


def condition_label_of(record: Mapping[str, Any]) -> str:
    """An episode's condition as a person reads it."""
    return condition_label(dict(record.get("condition") or {}))
