"""What runs cost: tokens by model, priced from prices the user declares, and plans.

Pure: it reads :class:`~pytest_prove.store.Run` objects (or their episode records)
and returns result objects; :mod:`pytest_prove.report.cost` turns those into lines.
There is no built-in price list: a price is what the user declared, per model, per
million input and per million output tokens.

Prices are declared in ini (``prove_prices``, one ``MODEL = INPUT OUTPUT`` a line)
or in ``pyproject.toml`` as ``[tool.pytest-prove.prices]``, ``MODEL = [INPUT, OUTPUT]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, final

from ..declare.prices import Price, PriceError, Prices, find_prices, parse_price_lines, price_of
from ..declare.spec import condition_label
from ..stats import MetricTest, holm, metric_test
from ..store import Run
from .labels import label_of

__all__ = [
    "ConditionCost",
    "CostComparison",
    "CostShift",
    "CostTest",
    "ModelUsage",
    "PlanEstimate",
    "Price",
    "PriceError",
    "Prices",
    "RunCost",
    "compare_costs",
    "cost_of",
    "cost_shifts",
    "estimate_plan",
    "find_prices",
    "parse_price_lines",
    "planned_sweep",
    "prices_for",
    "tokens_of",
]


# ---------------------------------------------------------------------------
# usage of stored episodes


@final
@dataclass(frozen=True, slots=True)
class ModelUsage:
    """Tokens of one model: in, out, calls, and their price if one is declared."""

    model: str
    input: int
    output: int
    calls: int
    price: float | None

    @property
    def total(self) -> int:
        return self.input + self.output


class _Totals:
    """Totals over ``models``, shared by a condition's cost and a run's."""

    __slots__ = ()
    models: tuple[ModelUsage, ...]

    @property
    def input(self) -> int:
        return sum(m.input for m in self.models)

    @property
    def output(self) -> int:
        return sum(m.output for m in self.models)

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.models)

    @property
    def price(self) -> float | None:
        return _sum_prices(self.models)


@final
@dataclass(frozen=True, slots=True)
class ConditionCost(_Totals):
    """One condition of one rollout: its episodes and what they used."""

    rollout: str
    condition_key: str
    label: str
    episodes: int
    models: tuple[ModelUsage, ...]



@final
@dataclass(frozen=True, slots=True)
class RunCost(_Totals):
    """What a run used: per model, per condition, and per episode."""

    run: str
    status: str
    episodes: int
    with_tokens: int
    models: tuple[ModelUsage, ...]
    conditions: tuple[ConditionCost, ...]
    per_episode: Mapping[tuple[str, str, int], tuple[int, int]]
    prices: Prices
    unpriced: tuple[str, ...]
    #: each episode's price (0 when it recorded no tokens; None when a model it used has
    #: no price), by the same keys as ``per_episode``
    episode_prices: Mapping[tuple[str, str, int], float | None] = field(default_factory=dict)
    salt: str = ""  # the run's salt: runs that share one ran each replicate on one seed



def _sum_prices(models: Iterable[ModelUsage]) -> float | None:
    prices = [m.price for m in models]
    if not prices or any(p is None for p in prices):
        return None
    return sum(p for p in prices if p is not None)


def tokens_of(record: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """An episode's tokens by model ({} when it recorded none)."""
    tokens = record.get("tokens") or {}
    by_model = tokens.get("by_model") or {}
    return {str(m): {"input": int(u.get("input", 0)), "output": int(u.get("output", 0)),
                     "calls": int(u.get("calls", 0))} for m, u in by_model.items()}


def _models(totals: Mapping[str, Mapping[str, int]], prices: Prices) -> tuple[ModelUsage, ...]:
    out = []
    for model in sorted(totals):
        t = totals[model]
        price = prices.for_model(model)
        out.append(ModelUsage(model, t["input"], t["output"], t["calls"],
                              None if price is None else price.of(t["input"], t["output"])))
    return tuple(out)


def _add(into: dict[str, dict[str, int]], by_model: Mapping[str, Mapping[str, int]]) -> None:
    for model, use in by_model.items():
        entry = into.setdefault(model, {"input": 0, "output": 0, "calls": 0})
        for key in ("input", "output", "calls"):
            entry[key] += use[key]


def cost_of(run: Run, prices: Prices) -> RunCost:
    """Sum a run's tokens by model and by condition, priced where a price is declared."""
    totals: dict[str, dict[str, int]] = {}
    per_condition: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    counts: dict[tuple[str, str], int] = {}
    labels: dict[tuple[str, str], str] = {}
    per_episode: dict[tuple[str, str, int], tuple[int, int]] = {}
    episode_prices: dict[tuple[str, str, int], float | None] = {}
    with_tokens = 0
    for record in run.episodes:
        key = (str(record["rollout"]), str(record["condition_key"]))
        counts[key] = counts.get(key, 0) + 1
        labels.setdefault(key, condition_label(dict(record.get("condition") or {})))
        by_model = tokens_of(record)
        if by_model:
            with_tokens += 1
        _add(totals, by_model)
        _add(per_condition.setdefault(key, {}), by_model)
        episode = (key[0], key[1], int(record["replicate"]))
        per_episode[episode] = (sum(u["input"] for u in by_model.values()),
                                sum(u["output"] for u in by_model.values()))
        episode_prices[episode] = _sum_prices(_models(by_model, prices)) if by_model else 0.0
    conditions = tuple(
        ConditionCost(rollout=k[0], condition_key=k[1], label=labels[k], episodes=counts[k],
                      models=_models(per_condition.get(k, {}), prices))
        for k in sorted(counts))
    models = _models(totals, prices)
    return RunCost(run=label_of(run), status=run.status, episodes=len(run.episodes),
                   with_tokens=with_tokens, models=models, conditions=conditions,
                   per_episode=per_episode, prices=prices,
                   unpriced=tuple(m.model for m in models if m.price is None),
                   episode_prices=episode_prices, salt=run.salt)


# ---------------------------------------------------------------------------
# two runs


@final
@dataclass(frozen=True, slots=True)
class CostComparison:
    """Two runs' costs side by side, and the ratio per episode on the shared episodes."""

    before: RunCost
    after: RunCost
    shared: int
    ratios: tuple[float, ...]  # after / before, input + output tokens, per shared episode

    @property
    def median_ratio(self) -> float | None:
        if not self.ratios:
            return None
        ordered = sorted(self.ratios)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2

    @property
    def total_ratio(self) -> float | None:
        before = self.before.input + self.before.output
        return None if before == 0 else (self.after.input + self.after.output) / before

    @property
    def price_ratio(self) -> float | None:
        a, b = self.after.price, self.before.price
        return None if a is None or b is None or b == 0 else a / b


def compare_costs(before: RunCost, after: RunCost) -> CostComparison:
    """Match episodes by (rollout, condition, replicate) and take after/before per episode."""
    ratios = []
    shared = 0
    for key, (b_in, b_out) in before.per_episode.items():
        if key not in after.per_episode:
            continue
        shared += 1
        a_in, a_out = after.per_episode[key]
        if b_in + b_out > 0:
            ratios.append((a_in + a_out) / (b_in + b_out))
    return CostComparison(before, after, shared, tuple(ratios))


# ---------------------------------------------------------------------------
# did the cost per episode change?

Verdict = Literal["costlier", "cheaper", "no significant change"]


@final
@dataclass(frozen=True, slots=True)
class CostShift:
    """One condition's cost per episode, after against before: the metric test's shift
    (Hodges-Lehmann, in dollars or tokens) with its interval and p-values, the shift as a
    share of the baseline's mean cost per episode (``relative``: what the bill is made of;
    None when that mean is 0), and its p-value adjusted by Holm over the conditions."""

    rollout: str
    condition_key: str
    label: str
    test: MetricTest
    relative: float | None
    p_holm: float
    alpha: float

    @property
    def verdict(self) -> Verdict:
        if self.p_holm > self.alpha:
            return "no significant change"
        return "costlier" if self.test.test.p_up <= self.test.test.p_down else "cheaper"


@final
@dataclass(frozen=True, slots=True)
class CostTest:
    """Whether each condition's cost per episode changed between two runs: its price per
    episode (``unit`` "price") when every model both runs used has a price, else its tokens
    per episode (input and output; ``unpriced`` names the models without a price, empty when
    no price is declared at all). Paired on twins when the runs share a salt (Wilcoxon
    signed-rank), else unpaired (rank-sum); Holm over the conditions at ``alpha``. An episode
    that recorded no tokens counts as one that spent nothing, as in the runs' per-episode
    figures."""

    paired: bool
    unit: Literal["price", "tokens"]
    alpha: float
    conditions: tuple[CostShift, ...]
    not_compared: tuple[tuple[str, str], ...]  # (rollout, label) of conditions one run lacks
    unpriced: tuple[str, ...]

    @property
    def changed(self) -> tuple[CostShift, ...]:
        return tuple(c for c in self.conditions if c.verdict != "no significant change")


def cost_shifts(before: RunCost, after: RunCost, *, alpha: float = 0.05,
                level: float = 0.95) -> CostTest | None:
    """Test each condition's cost per episode, ``after`` against ``before`` (see
    :class:`CostTest`); None when neither run recorded any tokens."""
    if not before.models and not after.models:
        return None
    unpriced = tuple(sorted(set(before.unpriced) | set(after.unpriced)))
    priced = bool(before.prices) and bool(after.prices) and not unpriced
    if not before.prices and not after.prices:
        unpriced = ()  # no price declared at all, which the renderer says as such
    paired = bool(before.salt) and before.salt == after.salt

    def value(cost: RunCost, episode: tuple[str, str, int]) -> float:
        if priced:
            return cost.episode_prices.get(episode) or 0.0
        used = cost.per_episode[episode]
        return float(used[0] + used[1])

    labels = {(c.rollout, c.condition_key): c.label
              for cost in (before, after) for c in cost.conditions}
    values: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    if paired:
        for episode in sorted(before.per_episode.keys() & after.per_episode.keys()):
            pair = values.setdefault(episode[:2], ([], []))
            pair[0].append(value(before, episode))
            pair[1].append(value(after, episode))
    else:
        for side, cost in enumerate((before, after)):
            for episode in sorted(cost.per_episode):
                values.setdefault(episode[:2], ([], []))[side].append(value(cost, episode))
    compared = sorted(k for k, (b, a) in values.items() if b and a)
    tests = [metric_test(values[k][0], values[k][1], paired=paired, level=level)
             for k in compared]
    means = [sum(values[k][0]) / len(values[k][0]) for k in compared]
    adjusted = [float(q) for q in holm([t.test.p for t in tests])]
    return CostTest(
        paired=paired, unit="price" if priced else "tokens", alpha=alpha,
        conditions=tuple(CostShift(k[0], k[1], labels[k], t, t.shift / m if m else None, q,
                                   alpha)
                         for k, t, m, q in zip(compared, tests, means, adjusted, strict=True)),
        not_compared=tuple((k[0], labels[k]) for k in sorted(labels) if k not in compared),
        unpriced=unpriced)


# ---------------------------------------------------------------------------
# a plan from an earlier run


@final
@dataclass(frozen=True, slots=True)
class PlannedCondition:
    rollout: str
    condition_key: str
    replicates: int
    input: float  # expected tokens over the planned replicates
    output: float
    price: float | None
    measured: bool  # False: the earlier run did not run it; its rollout's mean stands in


@final
@dataclass(frozen=True, slots=True)
class PlanEstimate:
    """Expected tokens and price of a sweep, from per-condition means of an earlier run."""

    source: str
    episodes: int
    input: float
    output: float
    price: float | None
    conditions: tuple[PlannedCondition, ...]
    unpriced: tuple[str, ...]
    unknown: tuple[str, ...]  # rollouts the earlier run has no episode of


def _means(records: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    totals: dict[str, dict[str, int]] = {}
    for record in records:
        _add(totals, tokens_of(record))
    n = len(records)
    return {m: (t["input"] / n, t["output"] / n) for m, t in totals.items()} if n else {}


def estimate_plan(source: Run, planned: Mapping[str, tuple[Iterable[str], int]],
                  prices: Prices) -> PlanEstimate:
    """Tokens and price of running ``planned`` ({rollout: (condition keys, replicates)}).

    Each condition is expected to use what its episodes used on average in ``source``
    (episodes that ended with an error included: they were paid for too); a condition
    ``source`` did not run takes its rollout's mean over every condition.
    """
    by_condition: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    by_rollout: dict[str, list[Mapping[str, Any]]] = {}
    for record in source.episodes:
        by_condition.setdefault((str(record["rollout"]), str(record["condition_key"])),
                                []).append(record)
        by_rollout.setdefault(str(record["rollout"]), []).append(record)
    rows: list[PlannedCondition] = []
    unpriced: set[str] = set()
    unknown: list[str] = []
    for rollout, (keys, replicates) in planned.items():
        if rollout not in by_rollout:
            unknown.append(rollout)
        for key in keys:
            records = by_condition.get((rollout, key))
            measured = records is not None
            means = _means(records if records is not None else by_rollout.get(rollout, []))
            price: float | None = 0.0
            for model, (mean_in, mean_out) in means.items():
                p = prices.for_model(model)
                if p is None:
                    unpriced.add(model)
                    price = None
                elif price is not None:
                    price += p.of(mean_in, mean_out) * replicates
            rows.append(PlannedCondition(
                rollout, key, replicates,
                input=sum(m[0] for m in means.values()) * replicates,
                output=sum(m[1] for m in means.values()) * replicates,
                price=price, measured=measured))
    prices_known = [r.price for r in rows]
    return PlanEstimate(
        source=source.name, episodes=sum(r.replicates for r in rows),
        input=sum(r.input for r in rows), output=sum(r.output for r in rows),
        price=None if any(p is None for p in prices_known) else sum(
            p for p in prices_known if p is not None),
        conditions=tuple(rows), unpriced=tuple(sorted(unpriced)), unknown=tuple(unknown))


def planned_sweep(source: Run, spec: Path | None, replicates: int | None,
                  ) -> dict[str, tuple[list[str], int]]:
    """What a sweep would run, {rollout: (condition keys, replicates)}: the spec's
    conditions, else those ``source`` ran; ``replicates`` overrides either's."""
    from ..declare.spec import condition_key
    from ..declare.sweep import load_spec

    planned: dict[str, tuple[list[str], int]] = {}
    if spec is not None:
        loaded = load_spec(spec)
        keys = [condition_key(c) for c in loaded.declaration.conditions()]
        planned[loaded.target_id] = (keys, replicates or loaded.declaration.replicates)
        return planned
    for record in source.episodes:
        keys, n = planned.setdefault(str(record["rollout"]), ([], 0))
        if record["condition_key"] not in keys:
            keys.append(str(record["condition_key"]))
        planned[str(record["rollout"])] = (keys, max(n, int(record["replicate"]) + 1))
    if replicates:
        planned = {r: (k, replicates) for r, (k, _) in planned.items()}
    return planned


def prices_for(run: Run, start: Path) -> Prices:
    """The prices declared in the configuration nearest ``start``, else those ``run`` was
    priced with when it ran (its manifest keeps them)."""
    found = find_prices(start)
    if found:
        return found
    stored = run.manifest.get("prices") or {}
    return Prices({m: price_of(m, v, f"run {run.name!r}") for m, v in stored.items()},
                  f"the manifest of run {run.name!r}" if stored else None)
