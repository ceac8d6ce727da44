"""What a session says before any rollout runs: the plan's lines and the refusals of
collection, of the shards and of the design checks.

The plugin decides (``plugin/collect.py``, ``shard.py``, ``design.py``); these functions
only word what it decided, from plain values and the statistics' frozen results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from ._format import power_text

if TYPE_CHECKING:
    from pytest_prove.review.metrics import PlannedLimit
    from pytest_prove.review.twins import TwinReview
    from pytest_prove.stats import MarginDesignCheck, SequentialDesign

__all__ = [
    "NO_ROLLOUT",
    "SEQUENTIAL_COST",
    "agreement_line",
    "blocked_fixtures",
    "chaos_resumed",
    "design_failed",
    "design_fails_in_plan",
    "limit_shown",
    "margin_advice",
    "margin_failed",
    "margin_fails_in_plan",
    "margin_line",
    "margin_rates_note",
    "margin_without_outcomes",
    "metric_limit_lines",
    "plan_head",
    "plan_head_metrics_only",
    "rates_basis",
    "rates_line",
    "rates_note",
    "sequential_line",
    "sequential_margin_line",
    "sequential_partial",
    "sequential_sizes",
    "sequential_underpowered",
    "shard_line",
    "shard_without_items",
    "shared_rollout_ids",
    "unkeyable_parameter",
    "unknown_events",
    "would_stop",
]

#: The plan when the selection kept no rollout.
NO_ROLLOUT = "pytest-prove plan: no rollout collected"

#: The plan's note on what a sequential run's estimated cost counts.
SEQUENTIAL_COST = ("expected cost: of a sequential run, each condition at the replicates it "
                   "is expected to run when nothing changed")


# -- collection ---------------------------------------------------------------------------

def unkeyable_parameter(nodeid: str, shown: str, why: str) -> str:
    """A test's parameter that cannot key its condition (``why`` says what is wrong)."""
    return (f"{nodeid}: the parameter {shown} {why}; parametrize with strings, "
            "finite numbers, booleans or None (and pass ids=... for the names)")


def blocked_fixtures(blocked: Mapping[str, str]) -> str:
    """Fixtures on a replicate's seed under blocks of replicates (fixture -> an item)."""
    shown = ", ".join(f"{name!r} (used by {node})" for name, node in blocked.items())
    return (f"fixture {shown} depends on prove_seed or prove_replicate, but a block "
            "of replicates (--prove-concurrency, concurrency=) sets its "
            "fixtures up once, with its first replicate's seed, so the "
            "others would not be paired with their twins. Take prove_seed "
            "in the rollout itself and build what needs it there, or run "
            "without blocks (a fixture on prove_cfg is fine: a block is "
            "one condition)")


def shared_rollout_ids(clashes: Mapping[str, set[str]]) -> str:
    """Rollout ids that two or more tests share (rollout id -> their node ids)."""
    shown = "; ".join(f"{rid!r} by {' and '.join(sorted(nodes))}"
                      for rid, nodes in sorted(clashes.items()))
    return (f"rollout ids must be unique, and two rollouts share one: "
            f"{shown}. Their episodes would be stored as one rollout's; "
            "give each its own id= (or target_id in a spec)")


# -- shards ---------------------------------------------------------------------------------

def shard_without_items(index: int, total: int, items_seen: int) -> str:
    return (f"--prove-shard={index}/{total}: none of the sweep's "
            f"{items_seen} rollout item(s) falls in slice {index} of "
            f"{total} (each condition's blocks of replicates are dealt "
            "out across the shards, so a condition with fewer blocks "
            "than shards leaves some shards without it), so its run "
            "would never exist for pytest-prove merge; cut the sweep "
            "into fewer shards, or run more replicates")


def shard_line(index: int, count: int, mine: int, whole: int) -> str:
    return (f"shard {index}/{count}: this session runs {mine} of these {whole} rollout "
            "items; the design check is the whole sweep's, since the merged run is what is "
            "gated")


# -- the checks after selection ------------------------------------------------------------

def chaos_resumed(found: Iterable[tuple[str, str, str]], name: str) -> str:
    """A resumed run whose faults differ from the ones it started with: (rollout id, then,
    now) for each rollout that differs."""
    shown = "; ".join(f"rollout {rid}: {a} in {name}, {b} now" for rid, a, b in found)
    return (f"--prove-resume: the faults injected differ ({shown}); a "
            "resumed run keeps the chaos it started with: resume it "
            "with the same --prove-chaos and declaration, or start a "
            "new run")


def unknown_events(unknown: Sequence[str], known: Sequence[str]) -> str:
    shown = ", ".join(repr(e) for e in unknown)
    return (f"--prove-event names {shown}, which no rollout this session runs declares as a "
            f"failure or success; declared: {', '.join(map(repr, known))}. Fix the name, or "
            "drop --prove-event to compare every declared event")


def limit_shown(worst_limit: float | None) -> str:
    """The design check's worst detection limit as the plan prints it (rounded up)."""
    if worst_limit is None:
        return "none (no change of any size)"
    from pytest_prove.stats import outward

    return outward(worst_limit)


def plan_head(*, episodes: int, rollouts: int, cells: int, replicates: int, shown: str,
              worst_base_rate: float, paired: bool, q: float, m: int,
              max_mde: float, direction: str = "rise") -> list[str]:
    """The plan's first lines: the sweep's size and what one condition could be flagged for
    (``direction``: a fall when the worst is one, as the baseline's rates can make it)."""
    method = "the paired test" if paired else "Fisher's exact test"
    return [
        f"pytest-prove plan: {episodes:,} episodes: {rollouts} rollout(s), "
        f"{cells} condition(s), {replicates} replicates or more each",
        f"design check: the smallest {direction} one condition alone would be flagged for is "
        f"{shown} at its worst base rate, {worst_base_rate:.3f} "
        f"({method}, q {q:g} over {m} tests, 4 times in 5; you accept up to "
        f"{max_mde:.3f})",
    ]


def agreement_line(before: str, after: str, twins: TwinReview, kappa: float) -> str:
    """The plan's line when the paired design check reads an observed agreement."""
    low = 1.0 - twins.pooled.level
    return (f"design check read at the twins' agreement of {before} -> {after}: they ended "
            f"alike in {100.0 * twins.rate:.0f}% of {twins.twins} seeds; at its one-sided "
            f"{100.0 * twins.pooled.level:.0f}% bound the discordance is {kappa:.2f} of "
            "independent twins' (the check is wrong at most "
            f"{low:g} of the time on that count, given the same agreement at every base "
            "rate and after the change; docs/statistics.md)")


def plan_head_metrics_only(*, episodes: int, rollouts: int, cells: int,
                           replicates: int) -> list[str]:
    """The plan's first lines when every rollout declares metrics and no outcomes: there is
    no outcome row for the design check; the metric rows' limits follow."""
    return [
        f"pytest-prove plan: {episodes:,} episodes: {rollouts} rollout(s), "
        f"{cells} condition(s), {replicates} replicates or more each",
        "design check: none on outcomes: the rollouts declare metrics and no outcomes, so "
        "their metric rows are the comparison (each row's limit below, against a baseline)",
    ]


def margin_without_outcomes(margin: float) -> str:
    return (f"--prove-margin {margin:g} is a margin on the outcome rows' rates, and no "
            "selected rollout declares outcomes (they declare metrics only); give each "
            "metric its margin with --prove-metric-margin (e.g. judge=0.05) instead")


def design_fails_in_plan(replicates_needed: int | None, max_mde: float,
                         basis: str = "") -> str:
    needed = (f"{replicates_needed} replicates a condition would pass"
              if replicates_needed else "many more replicates are needed")
    return would_stop(f"design check fails: one condition alone could not be flagged "
                      f"for a rise of {max_mde:.3f}, the most you accept{basis}; "
                      f"{needed} (or a larger --prove-max-mde, fewer conditions or "
                      "events)")


def design_failed(*, replicates: int, m: int, shown: str, worst_base_rate: float,
                  max_mde: float, replicates_needed: int | None, basis: str = "",
                  direction: str = "rise") -> str:
    """The design check's refusal; ``basis``: what base rates it read, when not every one
    (:func:`rates_basis`)."""
    needed = (f"Use {replicates_needed} replicates a condition"
              if replicates_needed else
              "Use many more replicates a condition (over the search's ceiling)")
    return (f"design check failed: with {replicates} replicates a condition and {m} tests, "
            f"one condition alone could only be flagged for a {direction} of "
            f"{shown} (at base rate {worst_base_rate:.3f}{basis}), more "
            f"than the {max_mde:.3f} you accept. {needed} (replicates= or "
            f"--prove-replicates), fewer conditions or events, a larger --prove-max-mde, "
            f"or run anyway with --prove-allow-underpowered")


def rates_basis(baseline: str, level: float, fewest_any_rate: int | None) -> str:
    """What the design check read, said inside its refusal when it read the baseline's
    rates: each test's interval, and the replicates any base rate would ask."""
    any_rate = ("" if fewest_any_rate is None else
                f"; {fewest_any_rate} replicates for any base rate")
    return (f", read at base rates within each test's exact {100.0 * level:g}% interval "
            f"from baseline {baseline!r}{any_rate}")


def rates_line(*, baseline: str, level: float, m: int, unknown: int, replicates: int,
               fewest: int | None, fewest_any_rate: int | None, ok: bool,
               ok_any_rate: bool) -> str:
    """The plan's line when the design check read the baseline's rates: what it read,
    the replicates it asks against those any base rate asks, and what the estimate costs."""
    def size(n: int | None) -> str:
        return "more than the search's ceiling" if n is None else f"{n}"

    read = (f"design check from baseline {baseline!r}'s rates: each of the {m} tests read "
            f"at base rates within its exact {100.0 * level:g}% interval (Clopper-Pearson) "
            "from the baseline, not at every rate from 0 to 1")
    if unknown:
        read += (f" ({unknown} test(s) the baseline does not hold read at every rate)")
    asked = (f"{size(fewest)} replicates a condition would do, instead of "
             f"{size(fewest_any_rate)} for any base rate")
    if ok and not ok_any_rate:
        verdict = (f"these {replicates} pass only thanks to the baseline's rates: each "
                   f"condition sees max_mde 4 times in 5 when its rate lies in its "
                   f"interval, which holds at least {level:g} of the time each")
    elif ok:
        verdict = f"these {replicates} pass for any base rate too"
    else:
        verdict = f"these {replicates} do not pass even so"
    return (f"{read}: {asked}; {verdict} (the tests and their error rates are unchanged; "
            "--prove-design-rates=any reads every base rate)")


def rates_note(*, baseline: str, level: float, replicates: int,
               fewest_any_rate: int | None) -> str:
    """The summary's note on a design that passed only thanks to the baseline's rates."""
    any_rate = ("more" if fewest_any_rate is None else f"{fewest_any_rate}")
    return (f"design from baseline {baseline!r}'s rates: {replicates} replicates a condition "
            f"passed the design check only because each test's base rate was read within "
            f"its exact {100.0 * level:g}% interval from the baseline ({any_rate} would be "
            f"needed for any base rate); each condition's power at max_mde holds when its "
            f"rate lies there, at least {level:g} of the time each "
            "(--prove-design-rates=any reads every base rate)")


def would_stop(reason: str) -> str:
    """A refusal as the plan words it: the run it plans would stop there."""
    return f"{reason}; the run would stop here"


# -- the margin -------------------------------------------------------------------------------

def margin_line(check: MarginDesignCheck, m: int, margin: float) -> str:
    claim = (f"every one of the {m} tests shown within the margin {margin:g} when "
             f"nothing changed")
    return (f"margin design check: {claim}: {power_text(check.sweep_power)} of the "
            f"time at "
            f"base rate {check.weakest_base_rate:.3f} ({check.row_power:.4f} asked of each "
            f"test for 0.8 over all {m}; {check.method})")


def margin_advice(check: MarginDesignCheck, m: int, margin: float) -> str:
    """What would pass the margin's design check, when it fails."""
    if check.replicates_needed is None:
        return "more replicates than the search's ceiling are needed for that claim"
    needed = (f"{check.replicates_needed} replicates a condition" if check.replicates_exact
              else f"about {check.replicates_needed} replicates a condition (a normal "
              "approximation: designs this large are not searched exactly; check the size "
              "with --prove-plan)")
    return (f"the claim that every condition is within {margin:g} would hold "
            f"only {power_text(check.sweep_power)} of the time when nothing changed; "
            f"use {needed} (replicates= or --prove-replicates)")


def margin_rates_note(*, baseline: str, replicates: int, margin: float) -> str:
    """The summary's note on a margin design that passed only thanks to the baseline's
    rates."""
    return (f"margin design from baseline {baseline!r}'s rates: {replicates} replicates a "
            f"condition let every test be shown within {margin:g} 4 times in 5 only because "
            "each test's base rate was read within its exact 99% interval from the "
            "baseline (any base rate would need more); the claim's power holds when each "
            "rate lies there, at least 0.99 of the time each (--prove-design-rates=any "
            "reads every base rate)")


def margin_fails_in_plan(advice: str) -> str:
    return would_stop(f"design check fails for the margin: {advice}")


def margin_failed(replicates: int, advice: str) -> str:
    return (f"design check failed for the margin: with {replicates} replicates a "
            f"condition, {advice}, fewer conditions or events, a larger "
            "--prove-margin, or run anyway with --prove-allow-underpowered")


# -- a sequential run ---------------------------------------------------------------------------

def sequential_line(design: SequentialDesign, replicates: int, cells: int,
                    max_mde: float) -> str:
    """The plan's line for --prove-sequential: the maximum and expected episodes."""
    step = design.looks[0]
    return (f"sequential: at most {replicates * cells:,} episodes ({replicates} a condition, "
            f"a look every {step} replicates); expected "
            f"{round(design.expected_unchanged) * cells:,} when nothing changed, "
            f"{design.expected_episodes(cells, 1):,.0f} when one condition moves by "
            f"{max_mde:.3f} (power there {power_text(design.power_at_max_mde)}; all three "
            f"exact); {design.method}")


def sequential_margin_line(sizes: Sequence[int], shares: Sequence[float], q: float,
                           margin: float, expected: float, cells: int) -> str:
    """The plan's line for --prove-sequential with a margin: the looks it is tested at
    (``sizes``, replicates) and each one's share of q, and the expected episodes when
    nothing changed (a condition then stops once shown within, not for futility)."""
    split = (f"{shares[-1] * q:.4g} at the last look and {shares[0] * q:.3g} at each other"
             if len(shares) > 1 else f"{q:g} at the one look")
    return (f"sequential margin {margin:g}: each test is also tested for a change toward "
            f"worse of {margin:g} or more at the looks of {', '.join(map(str, sizes))} "
            f"replicates, q {q:g} split across them ({split}; the margin's design check is "
            f"at the last look's level), and a condition stops once every test is shown "
            f"within (or one is worse), not for futility: expected "
            f"{round(expected) * cells:,} episodes when nothing changed ({round(expected)} "
            f"a condition; exact, twins independent at 0.40)")


def sequential_sizes(sizes: Sequence[int]) -> str:
    return (f"--prove-sequential takes every condition's looks at the same replicates, "
            f"but the rollouts declare {', '.join(map(str, sizes))} replicates; give "
            "them one number (replicates= or --prove-replicates N)")


def sequential_underpowered(design: SequentialDesign, replicates: int, m: int,
                            max_mde: float) -> str:
    needed = (f"use {design.replicates_needed} replicates a condition (the fixed "
              f"design's {design.fixed}, enlarged for the looks)"
              if design.replicates_needed else "use many more replicates a condition")
    return (f"sequential design check failed: with {replicates} replicates a condition "
            f"at most and {m} tests, a condition that moved by {max_mde:.3f} "
            f"would be caught {power_text(design.power_at_max_mde)} of the time (exact, at "
            f"the worst twin agreement), less than the {design.power_asked:g} asked: "
            f"stopping early and looking often cost power. "
            f"{needed.capitalize()} (replicates= or --prove-replicates; the "
            "baseline must hold as many), or run anyway with "
            "--prove-allow-underpowered")


def sequential_partial(partial: str) -> str:
    """A selection that keeps only some replicates of a condition (``partial`` names it)."""
    return (f"--prove-sequential reads each condition's first replicates at each look, "
            f"but the selection (-k, -m, a node id) keeps only some replicates of "
            f"{partial}; select whole conditions (e.g. -k 'refund'), or drop "
            "--prove-sequential")


def metric_limit_lines(found: Sequence[PlannedLimit], baseline: str | None,
                       sequential: bool = False) -> list[str]:
    """The plan's lines on metric rows: each row's detection limit from the baseline's
    values, or why there is none; for a ``sequential`` run, at its maximum episodes."""
    from .metrics import limit_text

    if baseline is None:
        return ["metric limits: none without a baseline (--prove-baseline NAME): they are "
                "read from the baseline's own values"]
    lines = []
    for row in found:
        name = f"metric {row.metric!r} in {row.condition}"
        if row.limit is None:
            lines.append(f"{name}: baseline {baseline!r} holds none of its values, so the gate "
                         "cannot compare it and fails; save the baseline again with the metric "
                         "declared")
        else:
            lines.append(f"{name}: detection limit {limit_text(row.limit)} (the smallest "
                         "shift the worse way flagged 4 times in 5, from the baseline's values)")
    if sequential and found:
        lines.append("metric limits of a sequential run: at its maximum episodes; the looks "
                     "stop on the outcome rows only, and the metric rows are tested once, at "
                     "the end, on the episodes the looks ran, so a condition stopped early "
                     "has a larger limit (the report prints each row's)")
    return lines
