"""Pytest items for rollouts: one item per (condition, block of replicates).

Decorated test functions stay ordinary pytest ``Function`` items (the plugin
adds the replicate parameter); sweep specs and ``@prove.rollout(axes=...)``
functions ``fn(cfg, seed)`` become :class:`RolloutItem` s collected here.
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ..declare.seeds import arm_rollout
from ..declare.spec import Declaration, Scalar, SpecError, condition_key
from ..declare.sweep import SweepSpec, load_spec
from .execute import execute_rollout
from .state import PLAN_KEY, SETTINGS_KEY, ItemPlan

__all__ = [
    "PLAN_KEY",
    "ItemPlan",
    "RolloutItem",
    "SpecFile",
    "block_id",
    "block_ids",
    "blocks",
    "condition_id",
    "function_items",
]


def blocks(replicates: int, concurrency: int) -> list[tuple[int, ...]]:
    """Replicates 0..n-1 cut into blocks of ``concurrency``."""
    size = max(1, concurrency)
    if size == 1:
        return [(r,) for r in range(replicates)]
    return [tuple(range(start, min(start + size, replicates)))
            for start in range(0, replicates, size)]


def block_id(block: tuple[int, ...], replicates: int) -> str:
    """``r017`` for one replicate, ``r016-031`` for a block, zero-padded to the sweep."""
    width = max(3, len(str(max(replicates - 1, 0))))
    if len(block) == 1:
        return f"r{block[0]:0{width}d}"
    return f"r{block[0]:0{width}d}-{block[-1]:0{width}d}"


def block_ids(chunks: list[tuple[int, ...]], replicates: int) -> list[str]:
    """:func:`block_id` of each block, worked out with one format for the sweep (a
    100,000-replicate rollout has as many ids, made at every collection)."""
    width = max(3, len(str(max(replicates - 1, 0))))
    if all(len(block) == 1 for block in chunks):
        return list(map(f"r{{:0{width}d}}".format, (block[0] for block in chunks)))
    return [block_id(block, replicates) for block in chunks]


def condition_id(condition: Mapping[str, Scalar]) -> str:
    """The condition part of an item id: its values joined by '-', as pytest ids are."""
    return "-".join(v if isinstance(v, str) else repr(v) if isinstance(v, float) else str(v)
                    for v in condition.values())


def check_target_signature(fn: Callable[..., Any], where: str) -> None:
    """``fn`` must take ``(cfg, seed)``; say so before any rollout runs."""
    try:
        inspect.signature(fn).bind({}, 0)
    except TypeError:
        raise SpecError(
            f"{where}: the target must be a function fn(cfg, seed); "
            f"{getattr(fn, '__qualname__', fn)!r} has signature {inspect.signature(fn)}"
        ) from None
    except ValueError:
        return


def import_target(spec: SweepSpec) -> Callable[..., Any]:
    """Import ``module:function`` with the spec's own folder first on the import path."""
    module_name, _, attr = spec.target.partition(":")
    folder = str(spec.path.parent.resolve())
    if sys.path[:1] != [folder]:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the spec's to fix
        raise SpecError(
            f"{spec.path}: cannot import target module {module_name!r} "
            f"(searched {folder} first): {type(exc).__name__}: {exc}"
        ) from None
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise SpecError(
            f"{spec.path}: module {module_name!r} has no function {attr!r}; "
            f"target must be 'module:function'"
        )
    return fn  # type: ignore[no-any-return]


#: The most items one rollout may make: every item is a pytest object held in memory
#: (a few KB each), so a sweep past this is refused before it is built, not by MemoryError.
MAX_ITEMS = 1_000_000


def _check_size(declaration: Declaration, replicates: int, concurrency: int,
                label: str) -> None:
    conditions = math.prod(len(a.values) for a in declaration.axes or ())
    per_condition = -(-replicates // max(1, concurrency))
    items = conditions * per_condition
    if items > MAX_ITEMS:
        raise SpecError(
            f"{label}: {conditions:,} conditions x {per_condition:,} items each = {items:,} "
            f"items, more than the {MAX_ITEMS:,} one rollout may make (each is a pytest item "
            "in memory). Use fewer axis values or replicates, or run several replicates an "
            "item with --prove-concurrency=K"
        )


class _RolloutSource:
    """What :class:`SpecFile` and :class:`RolloutCollector` share: items for every cell."""

    def _items(self, parent: pytest.Collector, fn: Callable[..., Any], declaration: Declaration,
               rollout_id: str, label: str, replicates: int,
               concurrency: int) -> Iterator[RolloutItem]:
        _check_size(declaration, replicates, concurrency, label)
        declaration = parent.config.stash[SETTINGS_KEY].declared(declaration, label)
        for condition in declaration.conditions():
            key = condition_key(condition)
            cid = condition_id(condition)
            for block in blocks(replicates, concurrency):
                bid = block_id(block, replicates)
                name = f"{label}[{cid}-{bid}]" if cid else f"{label}[{bid}]"
                # One item per arm, consecutive: the arms of a replicate run close together.
                for arm in declaration.arms or ("",):
                    plan = ItemPlan(rollout_id=arm_rollout(rollout_id, arm) if arm
                                    else rollout_id, label=label, declaration=declaration,
                                    condition=condition, condition_key=key, replicates=block,
                                    total=replicates, arm=arm)
                    yield RolloutItem.from_parent(
                        parent, name=f"{name[:-1]}-{arm}]" if arm else name, fn=fn, plan=plan)


class SpecFile(pytest.File, _RolloutSource):
    """A ``prove_*.toml`` sweep spec, collected as one item per cell and block."""

    def collect(self) -> Iterator[pytest.Item]:
        try:
            spec = load_spec(self.path)
            fn = import_target(spec)
            check_target_signature(fn, str(self.path))
        except SpecError as exc:
            raise self.CollectError(str(exc)) from None
        settings = self.config.stash[SETTINGS_KEY]
        replicates = settings.replicates_for(spec.target_id, spec.declaration.replicates)
        concurrency = settings.concurrency_for(spec.declaration.concurrency)
        try:
            _check_size(spec.declaration, replicates, concurrency, str(self.path))
        except SpecError as exc:
            raise self.CollectError(str(exc)) from None
        yield from self._items(self, fn, spec.declaration, spec.target_id, spec.target_id,
                               replicates, concurrency)


def function_items(parent: pytest.Collector, name: str, fn: Callable[..., Any],
                   declaration: Declaration) -> list[RolloutItem]:
    """The items of a ``@prove.rollout(axes=...)`` function ``fn(cfg, seed)`` in a module.

    They hang off the module, so their ids read ``module.py::fn[refund-r017]``.
    """
    check_target_signature(fn, f"{parent.nodeid}::{name}")
    settings = parent.config.stash[SETTINGS_KEY]
    rollout_id = declaration.rollout_id or f"{parent.nodeid}::{name}"
    replicates = settings.replicates_for(rollout_id, declaration.replicates)
    return list(_RolloutSource()._items(parent, fn, declaration, rollout_id, name, replicates,
                                        settings.concurrency_for(declaration.concurrency)))


class RolloutItem(pytest.Item):
    """One (condition, block) of a ``fn(cfg, seed)`` rollout."""

    def __init__(self, *, fn: Callable[..., Any], plan: ItemPlan, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fn = fn
        self.stash[PLAN_KEY] = plan

    def runtest(self) -> None:
        plan = self.stash[PLAN_KEY]
        fn = self.fn
        cfg: dict[str, Any] = dict(plan.condition)
        if plan.arm:
            cfg["arm"] = plan.arm
        execute_rollout(self, lambda ident: fn(dict(cfg), ident.seed),
                        is_async=inspect.iscoroutinefunction(fn))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> Any:
        return super().repr_failure(excinfo, style=style)


