"""``--prove-shard K/N``: which slice of the sweep a session runs.

Every rollout item is dealt to one shard by its rollout, condition and block of
replicates alone (:func:`shard_of`), before pytest's own selection, so that the slices are
the same on every machine and their runs merge into the whole sweep
(``pytest-prove merge``).  The other shards' items are left out as a deselection is.
"""

from __future__ import annotations

import hashlib

import pytest

from ..declare.seeds import split_arm
from ..report.plan import shard_line, shard_without_items
from .state import PLAN_KEY, SETTINGS_KEY, SHARD_KEY, SHARD_SLICE_KEY

__all__ = ["keep_own", "plan_line", "shard_of", "slice_sweep"]


def shard_of(rollout_id: str, condition_key: str, block: int, count: int) -> int:
    """The shard (1 .. ``count``) of a condition's ``block``-th block of replicates (block
    ``b`` holds replicates ``b * size`` onwards): the condition's blocks are dealt out in
    turn, from a shard its rollout id and key pick (so that conditions whose blocks do not
    divide evenly do not all leave their extra block to shard 1)."""
    digest = hashlib.blake2b(f"{rollout_id}\x1f{condition_key}".encode(), digest_size=8)
    return (int.from_bytes(digest.digest(), "big") + block) % count + 1


def slice_sweep(config: pytest.Config, items: list[pytest.Item],
                shard: tuple[int, int]) -> str | None:
    """Mark the items of slice K of N, before any selection (so that -k cannot move an item
    to another shard), and keep the slice's replicates for the run's manifest; or why the
    session is refused (no item falls in the slice).

    An item's shard is :func:`shard_of` its rollout, condition and block, and nothing else:
    so the slice is the same on every machine and in every process, whatever else was
    collected (collection order, pytest-randomly, the paths given, ``--lf``, which narrows
    collection itself, and node ids do not change it), and each condition's replicates are
    dealt out across the shards, a block at most apart."""
    index, total = shard
    settings = config.stash[SETTINGS_KEY]
    sizes: dict[tuple[str, int | None], int] = {}  # a rollout's block size
    chosen: dict[str, dict[str, set[int]]] = {}
    items_seen = 0
    for item in items:
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None:
            continue
        items_seen += 1
        concurrency = plan.declaration.concurrency
        size = sizes.get((plan.rollout_id, concurrency))
        if size is None:
            size = sizes[(plan.rollout_id, concurrency)] = max(
                1, settings.concurrency_for(concurrency))
        # The arms of a rollout are dealt by the rollout's own id: every arm of a block
        # falls in the same shard, so that a shard's run holds each replicate's arms whole.
        mine = shard_of(split_arm(plan.rollout_id)[0], plan.condition_key,
                        plan.replicates[0] // size, total) == index
        item.stash[SHARD_KEY] = mine
        if mine:
            chosen.setdefault(plan.rollout_id, {}).setdefault(
                plan.condition_key, set()).update(plan.replicates)
    if items_seen and not chosen:
        return shard_without_items(index, total, items_seen)
    config.stash[SHARD_SLICE_KEY] = {
        "index": index, "count": total,
        "slice": {rid: {key: sorted(reps) for key, reps in sorted(conditions.items())}
                  for rid, conditions in sorted(chosen.items())}}
    return None


def keep_own(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the other shards' items, on purpose, as a deselection is."""
    others = [item for item in items if not item.stash.get(SHARD_KEY, True)]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if item.stash.get(SHARD_KEY, True)]


def plan_line(shard: tuple[int, int], items: list[pytest.Item],
              sweep: list[pytest.Item]) -> str:
    """The plan's line for a shard: how many of the whole sweep's rollout items it runs."""
    mine = sum(1 for item in items if PLAN_KEY in item.stash)
    whole = sum(1 for item in sweep if PLAN_KEY in item.stash)
    return shard_line(shard[0], shard[1], mine, whole)
