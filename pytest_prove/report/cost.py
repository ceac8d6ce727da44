"""The lines and the JSON document of what runs cost (:mod:`pytest_prove.review.cost`
computes the figures); every model and condition shown with
:func:`~pytest_prove.report._format.terminal_text`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pytest_prove.declare.prices import Prices
from pytest_prove.review.cost import (
    CostComparison,
    CostShift,
    CostTest,
    ModelUsage,
    PlanEstimate,
    RunCost,
)

from ._format import money, terminal_text

__all__ = ["cost_document", "cost_test_document", "costs_document", "format_comparison",
           "format_cost", "format_cost_test", "format_plan", "plan_document"]


def _n(value: float) -> str:
    """A count as it is (an int, however large), or a mean rounded to a whole token."""
    return f"{value:,}" if type(value) is int else f"{value:,.0f}"


def _price_note(prices: Prices, unpriced: Sequence[str]) -> list[str]:
    if not prices:
        return ["prices: none declared; declare them per million tokens in ini prove_prices "
                "('MODEL = INPUT OUTPUT') or pyproject [tool.pytest-prove.prices]"]
    lines = [f"prices: per million input/output tokens, from {prices.source}"]
    if unpriced:
        lines.append(f"no price declared for {', '.join(map(terminal_text, unpriced))}; add "
                     f"'{terminal_text(unpriced[0])} = INPUT OUTPUT' to prove_prices")
    return lines


def format_cost(cost: RunCost, *, verbose: bool = False) -> list[str]:
    """The cost of one run: the total first, then by model, by condition, per episode."""
    if not cost.models:
        return [f"run {cost.run!r}: no episode recorded token usage ({cost.episodes} episodes)",
                "next: switch capture on to read your agent's OpenTelemetry GenAI spans "
                "([capture] or capture={} on the rollout, or ini prove_capture = true; name "
                "instrumentors in instrument for clients that do not emit spans themselves), "
                "or report usage with prove.usage(model, input, output)"]
    per = cost.episodes or 1
    lines = [
        f"run {cost.run!r} ({cost.status}): {_n(cost.input)} input and {_n(cost.output)} "
        f"output tokens in {_n(cost.calls)} calls over {cost.episodes} episodes, "
        f"{money(cost.price)}",
        f"per episode: {_n(cost.input / per)} input, {_n(cost.output / per)} output, "
        f"{money(None if cost.price is None else cost.price / per)}",
        "by model:",
    ]
    models = [terminal_text(m.model) for m in cost.models]
    width = max(map(len, models))
    for model, m in zip(models, cost.models, strict=True):
        lines.append(f"  {model:<{width}}  {_n(m.input):>12} in  {_n(m.output):>10} out  "
                     f"{_n(m.calls):>7} calls  {money(m.price)}")
    lines.append("by condition (per episode):")
    multi = len({c.rollout for c in cost.conditions}) > 1
    labels = [terminal_text(f"{c.rollout} {c.label}" if multi else c.label)
              for c in cost.conditions]
    width = max(map(len, labels))
    for label, c in zip(labels, cost.conditions, strict=True):
        n = c.episodes or 1
        lines.append(f"  {label:<{width}}  {_n(c.input / n):>9} in  {_n(c.output / n):>7} out  "
                     f"{money(None if c.price is None else c.price / n)}  ({c.episodes} "
                     "episodes)")
    if cost.with_tokens < cost.episodes:
        lines.append(f"{cost.episodes - cost.with_tokens} episode(s) recorded no tokens")
    lines.extend(_price_note(cost.prices, cost.unpriced))
    return lines


def format_comparison(comparison: CostComparison, test: CostTest | None = None) -> list[str]:
    """Two runs: whether the cost per episode changed, condition by condition (``test``),
    what the second costs relative to the first, then each run's figures."""
    before, after = comparison.before, comparison.after
    lines: list[str] = format_cost_test(test) if test is not None else []
    if lines:
        lines.append("")
    ratio = comparison.median_ratio
    if ratio is None:
        lines.append(f"runs {before.run!r} and {after.run!r} share no episode with tokens, so "
                     "no per-episode ratio")
    else:
        lines.append(f"{after.run!r} uses {ratio:.2f}x the tokens of {before.run!r} per "
                     f"episode (median over {len(comparison.ratios)} shared episodes; "
                     f"{min(comparison.ratios):.2f}x to {max(comparison.ratios):.2f}x)")
    if comparison.price_ratio is not None:
        b, a = before.price, after.price
        assert a is not None and b is not None
        per_b, per_a = b / (before.episodes or 1), a / (after.episodes or 1)
        lines.append(f"price per episode {money(per_b)} -> {money(per_a)} "
                     f"({(per_a - per_b) / per_b:+.0%})" if per_b else
                     f"price per episode {money(per_b)} -> {money(per_a)}")
    for cost in (before, after):
        lines.append("")
        lines.extend(format_cost(cost))
    return lines


def format_plan(plan: PlanEstimate, prices: Prices) -> list[str]:
    """The expected cost of a sweep, with what it rests on."""
    lines = [f"expected cost: {_n(plan.input)} input and {_n(plan.output)} output tokens over "
             f"{plan.episodes:,} episodes, {money(plan.price)} (per-condition means of run "
             f"{plan.source!r})"]
    guessed = [c for c in plan.conditions if not c.measured]
    if guessed:
        lines.append(f"{len(guessed)} condition(s) did not run in {plan.source!r}; their "
                     "rollout's mean stands in")
    if plan.unknown:
        lines.append(f"no episode of {', '.join(map(terminal_text, plan.unknown))} in "
                     f"{plan.source!r}: counted as 0 tokens")
    lines.extend(_price_note(prices, plan.unpriced)[1:] if prices else _price_note(prices, ()))
    return lines


def cost_document(cost: RunCost) -> dict[str, Any]:
    """A run's cost as plain data (``--json``)."""
    def models(items: Sequence[ModelUsage]) -> list[dict[str, Any]]:
        return [{"model": m.model, "input": m.input, "output": m.output, "calls": m.calls,
                 "price": m.price} for m in items]

    return {"run": cost.run, "status": cost.status, "episodes": cost.episodes,
            "input": cost.input, "output": cost.output, "calls": cost.calls,
            "price": cost.price, "models": models(cost.models),
            "conditions": [{"rollout": c.rollout, "condition": c.label,
                            "episodes": c.episodes, "input": c.input, "output": c.output,
                            "price": c.price, "models": models(c.models)}
                           for c in cost.conditions],
            "prices": cost.prices.to_json(), "prices_from": cost.prices.source}


def costs_document(costs: Sequence[RunCost], both: CostComparison | None,
                   test: CostTest | None = None) -> dict[str, Any]:
    """``cost``'s document: one run's cost, or two runs' and their ratios (and, with
    ``test``, whether each condition's cost per episode changed)."""
    if both is None:
        return cost_document(costs[0])
    document: dict[str, Any] = {
        "runs": [cost_document(c) for c in costs], "median_ratio": both.median_ratio,
        "total_ratio": both.total_ratio, "price_ratio": both.price_ratio}
    if test is not None:
        document["test"] = cost_test_document(test)
    return document


# ---------------------------------------------------------------------------
# did the cost per episode change?


def _amount(value: float, unit: str) -> str:
    """A shift with its sign: dollars (to two significant digits below $0.0001) or tokens;
    an interval's open end reads ``unbounded``."""
    if not math.isfinite(value):
        return "unbounded"
    if value == 0.0:
        return "$0" if unit == "price" else "0 tokens"
    sign = "+" if value > 0 else "-"
    if unit == "price":
        return sign + money(abs(value), tiny=True)
    return f"{sign}{abs(value):,.0f} tokens" if abs(value) >= 10 else f"{value:+.1f} tokens"


def _p(value: float) -> str:
    return "p<0.001" if value < 0.001 else f"p={value:.3f}"


def _share(value: float | None) -> str:
    if value is None:
        return "of a baseline of 0"
    if value == 0.0:
        return "0%"
    return f"{value:+.0%}" if abs(value) >= 0.01 else f"{value:+.1%}"


def _condition(shift: CostShift, unit: str, multi: bool) -> str:
    t = shift.test
    label = terminal_text(f"{shift.rollout} {shift.label}" if multi else shift.label)
    said = "significant" if shift.verdict != "no significant change" else "not significant"
    interval = f"{t.level:.0%} interval {_amount(t.low, unit)} to {_amount(t.high, unit)}"
    return (f"  {label}: {shift.verdict}, {_share(shift.relative)} ({_amount(t.shift, unit)}, "
            f"{interval}), {said} ({_p(shift.p_holm)}, Holm)")


def format_cost_test(test: CostTest) -> list[str]:
    """Whether each condition's cost per episode changed: the verdict, a line a condition
    (the shift as a share of the baseline's mean, in dollars or tokens, its interval and
    Holm's p), and how it was tested."""
    what = "cost per episode" if test.unit == "price" else "tokens per episode"
    m = len(test.conditions)
    family = f"Holm over {m} condition{'s' if m != 1 else ''} at q={test.alpha:g}"
    if not m:
        lines = [f"{what}: not tested, no condition ran in both runs"]
    elif test.changed:
        up = sum(c.verdict == "costlier" for c in test.changed)
        down = len(test.changed) - up
        words = [f"costlier in {up}"] * bool(up) + [f"cheaper in {down}"] * bool(down)
        lines = [f"{what} changed significantly: {' and '.join(words)} of {m} condition"
                 f"{'s' if m != 1 else ''} ({family})"]
    else:
        lines = [f"{what}: no significant change in {'any of the ' if m > 1 else ''}{m} "
                 f"condition{'s' if m != 1 else ''} ({family})"]
    multi = len({c.rollout for c in test.conditions}) > 1
    lines.extend(_condition(c, test.unit, multi) for c in test.conditions)
    if test.not_compared:
        lines.append("not compared (in one run only, or no twin in the other): "
                     + ", ".join(terminal_text(label) for _, label in test.not_compared))
    how = ("paired on twins (the runs share their salt, so each replicate ran on one seed "
           "before and after): Wilcoxon signed-rank" if test.paired else
           "unpaired (the runs have different salts, so no episode has a twin): "
           "Wilcoxon-Mann-Whitney rank-sum")
    lines.append(f"how: {how} per condition; the shift is the Hodges-Lehmann estimate, its share "
                 "of the baseline's mean per episode; an episode without tokens spent nothing")
    if test.unit == "tokens":
        lines.append("tokens, not price: " + (
            f"no price declared for {', '.join(map(terminal_text, test.unpriced))}"
            if test.unpriced else "no prices declared") + " (declare them in prove_prices to "
            "test the price per episode)")
    return lines


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def cost_test_document(test: CostTest) -> dict[str, Any]:
    """Whether each condition's cost per episode changed, as plain data."""
    return {"unit": test.unit, "paired": test.paired, "alpha": test.alpha,
            "method": "Wilcoxon signed-rank" if test.paired else "Wilcoxon-Mann-Whitney",
            "conditions": [{"rollout": c.rollout, "condition": c.label, "verdict": c.verdict,
                            "shift": _finite(c.test.shift), "low": _finite(c.test.low),
                            "high": _finite(c.test.high), "level": c.test.level,
                            "relative": c.relative, "p": c.test.test.p,
                            "p_holm": c.p_holm, "n_before": c.test.n_before,
                            "n_after": c.test.n_after} for c in test.conditions],
            "not_compared": [{"rollout": r, "condition": label}
                             for r, label in test.not_compared],
            "unpriced": list(test.unpriced)}


def plan_document(plan: PlanEstimate) -> dict[str, Any]:
    """``plan``'s document: the expected tokens and price."""
    return {"from": plan.source, "episodes": plan.episodes, "input": plan.input,
            "output": plan.output, "price": plan.price, "unpriced": list(plan.unpriced)}
