"""What the commands that look into a verdict print: ``where`` (where failing episodes
stop), ``compare`` (do they stop sooner: the log-rank by step), ``fix-check`` (did an event
get more or less frequent over cases) and ``flips`` (the twins whose outcome changed).

Every name that came from a rollout or the store goes through
:func:`~pytest_prove.report._format.terminal_text` in the lines; the documents keep them
whole.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from pytest_prove.declare.spec import NO_OUTCOME_EVENT
from pytest_prove.review.fixcheck import FixCheckReview
from pytest_prove.review.flips import Flips
from pytest_prove.review.steps import StepComparison, Where

from ._format import q_text, table, terminal_text
from .replay import ending_text, replay_command

__all__ = ["compare_steps_document", "compare_steps_lines", "fix_check_document",
           "fix_check_lines", "flips_document", "flips_lines", "where_document", "where_lines"]


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _hr_limit(value: float | None) -> str:
    """A detectable hazard ratio, rounded away from 1 (never a promise it does not keep)."""
    if value is None:
        return "-"
    scaled = value * 100
    return f"{(math.ceil(scaled) if value >= 1 else math.floor(scaled)) / 100:.2f}"


def _p_is(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def _left_out(left: dict[str, int]) -> str:
    return "left out: " + ", ".join(f"{n} {k}" for k, n in sorted(left.items()))


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
              f"{t.test.statistic:.3f}", q_text(t.test.p), q_text(t.q),
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
          f"{100 * c.change:+.1f} pts", q_text(c.p), q_text(c.q), "yes" if c.flag else "-")
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


def flips_document(f: Flips) -> dict[str, Any]:
    return {"before": f.before, "after": f.after, "salt": f.salt, "paired": True,
            "twins": f.twins, "twins_unread": f.unread, "conditions": list(f.chosen) or None,
            "events": list(f.events) or None,
            "rows": [r.to_dict() for r in f.rows], "flips": [x.to_dict() for x in f.flips],
            "method": "twins: the episodes of the same condition and replicate, on the same "
                      "seed in both runs; a row's flips are its paired test's discordant "
                      "pairs (before_only = b, after_only = c)"}


#: The replicate at the end of an item's id (``...-r004]``) or a replay's keyword.
_REPLICATE_ID = re.compile(r"(r\d+)\]?$")


def _replicate_id(flip: Any) -> str:
    """The replicate as the twin's item names it (``r004``), so that the line and the
    replay command below it read alike."""
    if flip.replay is not None:
        found = _REPLICATE_ID.search(flip.replay.keyword or flip.replay.item)
        if found is not None:
            return found.group(1)
    return f"r{int(flip.replicate):03d}"


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
            lines.append(f"  {_replicate_id(flip)}  seed {flip.seed}  "
                         f"{ending_text(flip.before)} -> {ending_text(flip.after)}")
            if flip.replay is not None:
                lines.append(f"        {replay_command(flip.replay)}")
        if len(shown) < len(found):
            lines.append(f"  ... and {len(found) - len(shown)} more (-v lists them all)")
    if f.flips:
        first = f.flips[0]
        item = first.replay.item if first.replay is not None and first.replay.keyword is None \
            else f"{first.condition_key}-r{first.replicate:03d}"
        lines.append(f"read a pair side by side: pytest-prove episode {shlex.quote(f.before)} "
                     f"{shlex.quote(terminal_text(item, 200))} --twin {shlex.quote(f.after)}")
        lines.append("next: run a replay line as it is, or with --pdb to stop where the "
                     "rollout raised (a breakpoint() in the rollout stops there too)")
    else:
        lines.append(f"next: pytest-prove diff {la} {lb}")
    return lines
