"""The plugin's state, in one place: the stash keys of this process's settings (the
settings themselves: settings.py), its per-item plans and the plugins it registered."""

from __future__ import annotations

from typing import Any, final

import pytest
from msgspec import Struct

from ..config.paths import session_paths as _paths
from ..declare.capture import CaptureConfig
from ..declare.spec import Declaration, Scalar
from ..wire import PlanData, spans
from .settings import Settings

__all__ = [
    "CAPTURE_KEY",
    "DESIGN_FAILURE_KEY",
    "DESIGN_NOTE_KEY",
    "PLANNED_KEY",
    "PLAN_KEY",
    "REGISTERED_KEY",
    "RESULTS_KEY",
    "SELECTED_KEY",
    "SETTINGS_KEY",
    "SHARD_KEY",
    "SHARD_SLICE_KEY",
    "SKIPPED_FILES_KEY",
    "ItemPlan",
    "disown_all",
    "own",
    "plan_data",
    "session_paths",
]


@final
class ItemPlan(Struct, frozen=True, gc=False):
    """What one item runs: a rollout's condition and its block of replicates.

    A msgspec ``Struct``, not a dataclass: a sweep makes one a collected item (100,000
    for a large one), and a Struct is built in C and never tracked by the cyclic garbage
    collector (it cannot be part of a cycle: it holds strings, numbers, a declaration and
    a condition of scalars), so neither its construction nor every later full collection
    pays for it per item.
    """

    rollout_id: str
    label: str
    declaration: Declaration
    condition: dict[str, Scalar]
    condition_key: str
    replicates: tuple[int, ...]
    total: int  # the rollout's replicates per condition in this session
    #: The arm this item runs ("": the rollout has no arms); its rollout_id is then the
    #: arm's (``declare.seeds.arm_rollout``), and every arm runs on the rollout's seeds.
    arm: str = ""


SETTINGS_KEY = pytest.StashKey[Settings]()
PLAN_KEY = pytest.StashKey[ItemPlan]()
#: The stored records of the replicates an item ran (set by the item, read by its report).
RESULTS_KEY = pytest.StashKey[list[dict[str, Any]]]()
#: Every rollout's plan as collected, before any deselection (rollout id -> its info).
PLANNED_KEY = pytest.StashKey[dict[str, dict[str, Any]]]()
#: The conditions of each rollout that pytest's selection (-k, -m, --lf, ...) kept.
SELECTED_KEY = pytest.StashKey[dict[str, dict[str, list[int]]]]()
#: --prove-shard: whether an item is in this session's slice (set before any selection).
SHARD_KEY = pytest.StashKey[bool]()
#: --prove-shard: {"index": K, "count": N, "slice": {rollout: {condition key: [replicates]}}}.
SHARD_SLICE_KEY = pytest.StashKey[dict[str, Any]]()
#: Set when --prove-plan found a design the run would refuse: the plan then exits 4.
PLAN_FAILS_KEY = pytest.StashKey[bool]()


#: Every plugin object pytest-prove registered, so that it unregisters exactly those.
REGISTERED_KEY = pytest.StashKey[list[tuple[object, str]]]()


def own(config: pytest.Config, plugin: object, name: str) -> None:
    """Register ``plugin`` under ``name`` and remember it, for :func:`disown_all`."""
    config.pluginmanager.register(plugin, name)
    config.stash.setdefault(REGISTERED_KEY, []).append((plugin, name))


def disown_all(config: pytest.Config) -> None:
    """Unregister every plugin :func:`own` registered, last first."""
    registered: list[tuple[object, str]] = config.stash.get(REGISTERED_KEY, [])
    for plugin, name in reversed(registered):
        if config.pluginmanager.is_registered(plugin):
            config.pluginmanager.unregister(plugin, name)
    config.stash[REGISTERED_KEY] = []


#: Why an xdist worker refused to run anything (the design check, clashing ids): the
#: controller reports it and exits as a usage error.
DESIGN_FAILURE_KEY = pytest.StashKey[str]()
#: A design that passes only thanks to the baseline's rates: the summary's note saying so
#: (set by the design check; an xdist worker sends it to the controller).
DESIGN_NOTE_KEY = pytest.StashKey[str]()
#: Modules whose collection was skipped (``pytest.importorskip`` at the top, a module skip).
SKIPPED_FILES_KEY = pytest.StashKey[set[str]]()


def session_paths(config: pytest.Config) -> list[str]:
    """The paths or node ids this session collected from, relative to its rootdir."""
    return _paths(config.args, config.invocation_params.dir, config.rootpath)


def plan_data(config: pytest.Config) -> PlanData:
    """What this process collected and how the user narrowed it, for the run's manifest."""
    import json

    ignored = [*(config.getoption("ignore", None) or []),
               *(config.getoption("ignore_glob", None) or [])]
    paths = session_paths(config)
    skipped: set[str] = config.stash.get(SKIPPED_FILES_KEY, set())
    return PlanData(
        plan=json.loads(json.dumps(config.stash.get(PLANNED_KEY, {}))),
        selected={rid: {key: spans(replicates) for key, replicates in keys.items()}
                  for rid, keys in config.stash.get(SELECTED_KEY, {}).items()},
        paths=paths,
        ignored=_paths([str(p) for p in ignored], config.invocation_params.dir,
                       config.rootpath),
        skipped_files=sorted(skipped),
        narrowed=bool(config.getoption("lf", False)) or any("::" in p for p in paths),
        shard=config.stash.get(SHARD_SLICE_KEY, None),
    )


#: What an item keeps of its episodes' spans (set at its setup, when capture is on).
CAPTURE_KEY = pytest.StashKey[CaptureConfig]()
