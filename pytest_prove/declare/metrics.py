"""Metrics: numbers an episode reports beside its outcome (a judge's score, a latency), each
with the direction that is better, declared on the decorator, in a sweep spec, in ini or on
the command line, and the built-in ones read from what every episode stores.

A metric's direction is a word, ``"higher"`` or ``"lower"``: which way is better. The
built-in metrics need no word (less is better): ``duration`` (the episode's seconds, as
stored), ``tokens`` (its input and output tokens) and ``cost`` (its tokens priced at the
prices declared in ini ``prove_prices``). They are switched on by name
(``--prove-metrics=duration,cost``, ini ``prove_metrics``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, Literal

from ..errors import ProveError

__all__ = [
    "BUILTIN_METRICS",
    "DIRECTIONS",
    "MEASURED",
    "Better",
    "MetricError",
    "MetricMargin",
    "check_metric_values",
    "directions",
    "episode_cost",
    "merge_directions",
    "parse_metric_list",
    "parse_metric_margins",
]

Better = Literal["higher", "lower"]
DIRECTIONS: Final[tuple[str, ...]] = ("higher", "lower")

#: The outcome stored for every episode of a rollout that declares metrics and no outcomes
#: (``prove.Episode(metrics={...})``): it ended, and its metrics are what is compared. Such a
#: rollout has no outcome rows, so the word is never tested; it is what ``pytest-prove show``
#: counts.
MEASURED: Final = "measured"

#: The metrics every episode already stores, by name, with the direction that is better.
BUILTIN_METRICS: Final[Mapping[str, Better]] = {"duration": "lower", "tokens": "lower",
                                                 "cost": "lower"}

_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


class MetricError(ProveError, ValueError):
    """A metric declared or reported wrongly, with the metric and the fix."""


def _check_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise MetricError(
            f"{where}: metric name {name!r} is not a name; use letters, digits, '_', '.' or "
            "'-', starting with a letter or '_' (e.g. judge, latency_s)")
    return name


def directions(declared: object, where: str) -> tuple[tuple[str, Better], ...]:
    """A ``metrics=`` mapping (or a sweep spec's ``[metrics]`` table) as (name, direction)
    pairs in the order given: ``{"judge": "higher", "latency_s": "lower"}``."""
    if declared is None:
        return ()
    if not isinstance(declared, Mapping):
        raise MetricError(
            f"{where} must map each metric's name to the direction that is better, "
            f'"higher" or "lower", e.g. {{"judge": "higher"}}; got {declared!r:.80}')
    found: list[tuple[str, Better]] = []
    for name, better in declared.items():
        _check_name(name, where)
        if better not in DIRECTIONS:
            raise MetricError(
                f"{where}: metric {name!r} has the direction {better!r}; say which way is "
                'better: "higher" or "lower"')
        found.append((name, better))
    return tuple(found)


def _named_parts(text: str, where: str) -> Iterator[tuple[str, str, str, str]]:
    """The parts of a list such as ``duration, judge=higher`` (commas or spaces between),
    each as (the part, its name, "=" or "", what follows the "="), its name checked."""
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        _check_name(name, where)
        yield part, name, sep, value.strip()


def parse_metric_list(text: str, where: str = "--prove-metrics"
                      ) -> tuple[tuple[str, Better], ...]:
    """``duration,tokens,judge=higher`` (commas or spaces between) as (name, direction)
    pairs: a built-in by its name alone, any other metric with ``=higher`` or ``=lower``."""
    found: dict[str, Better] = {}
    for part, name, sep, word in _named_parts(text, where):
        if not sep:
            if name not in BUILTIN_METRICS:
                raise MetricError(
                    f"{where}: {name!r} is not a built-in metric ({', '.join(BUILTIN_METRICS)})"
                    f"; name a metric of your own with its direction, {name}=higher or "
                    f"{name}=lower")
            better = BUILTIN_METRICS[name]
        elif word in DIRECTIONS:
            better = word  # type: ignore[assignment]
        else:
            raise MetricError(f"{where}: {part!r} gives {name!r} the direction {word!r}; "
                              f"write {name}=higher or {name}=lower")
        if found.get(name, better) != better:
            raise MetricError(f"{where}: metric {name!r} is given both directions, "
                              f"{found[name]} and {better}; keep one")
        found[name] = better
    return tuple(found.items())


def merge_directions(*sources: tuple[str, Iterable[tuple[str, Better]]]
                     ) -> tuple[tuple[str, Better], ...]:
    """Every metric of the ``(where, pairs)`` sources, once: a metric two sources give
    different directions is refused, naming both places and the fix."""
    found: dict[str, tuple[Better, str]] = {}
    for where, pairs in sources:
        for name, better in pairs:
            was = found.get(name)
            if was is not None and was[0] != better:
                raise MetricError(
                    f"metric {name!r} is declared twice with two directions: {was[0]!r} "
                    f"({was[1]}) and {better!r} ({where}); say which is better in one place "
                    "and remove or match the other")
            found.setdefault(name, (better, where))
    return tuple((name, better) for name, (better, _) in found.items())


#: The largest size a metric value may have either way: a score, a latency, a count of
#: tokens or a cost is far below it, and the Hodges-Lehmann shift averages two values, which
#: past it could overflow (1e308 gave an overflow warning and an infinite shift).
MAX_METRIC: Final = 1e15


def check_metric_values(values: object) -> dict[str, float]:
    """An episode's ``metrics=`` as {name: finite number}; anything else is refused,
    naming the metric and what to return instead."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise MetricError(
            f"Episode metrics must be a dict of numbers by metric name, e.g. "
            f'{{"judge": 0.8}}; got {values!r:.80} ({type(values).__name__})')
    found: dict[str, float] = {}
    for name, value in values.items():
        _check_name(name, "Episode metrics")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MetricError(
                f"Episode metric {name!r} must be a number, got {value!r:.80} "
                f"({type(value).__name__}); return a float or an int (a score of a yes/no "
                "judge as 1.0 or 0.0)")
        try:
            number = float(value)
        except OverflowError:  # an int past any float
            number = math.inf
        if not math.isfinite(number):
            raise MetricError(
                f"Episode metric {name!r} must be a finite number, got {value!r:.80}; a "
                "metric that could not be measured is an episode without an outcome: raise "
                "prove.NoOutcome('why') instead")
        if abs(number) > MAX_METRIC:
            raise MetricError(
                f"Episode metric {name!r} is {value!r:.80}, past {MAX_METRIC:.0e} either way, "
                "where sums of two values lose their precision; report it in a larger unit "
                "(seconds rather than nanoseconds, thousands of tokens)")
        found[name] = number
    return found


def episode_cost(tokens: Mapping[str, object] | None,
                 price: Callable[[str], tuple[float, float] | None]) -> float | None:
    """An episode's cost from its tokens by model, each model's ``price`` (per million input
    and output tokens): 0 without tokens, None when a model it used has no price."""
    if not tokens:
        return 0.0
    by_model = tokens.get("by_model") or {}
    if not isinstance(by_model, Mapping):
        return None
    total = 0.0
    for model, use in by_model.items():
        found = price(str(model))
        if found is None or not isinstance(use, Mapping):
            return None
        total += (int(use.get("input") or 0) * found[0]
                  + int(use.get("output") or 0) * found[1]) / 1e6
    if not by_model and (tokens.get("input") or tokens.get("output")):
        return None  # tokens with no model named: no price applies
    return total


#: A metric's margin: how far the worse way its shift may go and still count as within,
#: in the metric's units, or as a share of the baseline's median when ``relative``.
MetricMargin = tuple[float, bool]


def parse_metric_margins(text: str, where: str = "--prove-metric-margin"
                         ) -> dict[str, MetricMargin]:
    """``latency_s=10%,judge=0.05`` as {name: (size, relative)}: each metric's margin, the
    worst shift accepted the metric's worse way, in its units or as a percentage of the
    baseline's median. A sign may be written (``latency_s=+10%``, ``judge=-0.05``); the
    direction is always the metric's worse one."""
    found: dict[str, MetricMargin] = {}
    for part, name, sep, value in _named_parts(text, where):
        relative = value.endswith("%")
        number = value.removesuffix("%").lstrip("+-")
        try:
            size = float(number) / (100.0 if relative else 1.0)
        except ValueError:
            size = math.nan
        if not sep or not math.isfinite(size) or size <= 0 or (relative and size >= 10):
            raise MetricError(
                f"{where}: {part!r} is not a margin; write NAME=SIZE, the worst shift "
                "accepted the metric's worse way, in its units (judge=0.05) or as a "
                "percentage of the baseline's median below 1000% (latency_s=10%)")
        if name in found:
            raise MetricError(f"{where}: metric {name!r} is given two margins; keep one")
        found[name] = (size, relative)
    return found
