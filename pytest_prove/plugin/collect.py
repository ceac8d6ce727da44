"""Collection: rollouts become items, each with its plan, and the selection is settled.

Function rollouts (``@prove.rollout`` on a parametrized test, or with ``axes=``) and sweep
specs (``prove_*.toml``) become one item per condition and block of replicates, and the
whole sweep is noted before any deselection.  After pytest's own selection, a shard keeps
its slice (:mod:`.shards`), a resumed run drops what it already holds, and the checks after
selection (:mod:`.design`) run before any rollout: the plan is printed, or the session
refused.  The hooks here are re-exported by :mod:`pytest_prove.plugin`, the module pytest
loads.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

import pytest

from ..api import declaration_of, declared, listen
from ..config.paths import relative_to_root
from ..declare.seeds import arm_rollout
from ..declare.spec import Declaration, SpecError, condition_key
from ..report import plan as words
from . import shards
from .arms import check_arms
from .design import check_chaos, check_events, decide
from .items import SpecFile, block_ids, blocks, function_items
from .settings import Settings
from .state import (
    DESIGN_FAILURE_KEY,
    PLAN_KEY,
    PLANNED_KEY,
    SELECTED_KEY,
    SETTINGS_KEY,
    SKIPPED_FILES_KEY,
    SPEC_FILES_KEY,
    ItemPlan,
    own,
    rollouts_possible,
)
from .targets import check_targets

__all__ = ["SPEC_FILES_KEY", "AxesItems", "Collection", "TestRollouts", "pytest_collect_file",
           "pytest_collection_modifyitems", "register", "rollouts_possible"]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".toml":
        return None
    listed = {Path(p).resolve() for p in parent.config.getini("prove_specs")}
    if file_path.name.startswith("prove_") or file_path.resolve() in listed:
        parent.config.stash[SPEC_FILES_KEY] = True
        return SpecFile.from_parent(parent, path=file_path)
    return None


@final
class AxesItems:
    """``@prove.rollout(axes=...)`` functions become items (``prove_axes_items``),
    registered once such a function is declared (see :func:`register`)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_pycollect_makeitem(self, collector: pytest.Collector, name: str,
                                  obj: object) -> Generator[None, Any, Any]:
        declaration = declaration_of(obj)
        if declaration is None or declaration.axes is None or not callable(obj):
            return (yield)
        module = getattr(collector, "module", None)
        if module is None or getattr(obj, "__module__", None) != module.__name__:
            return (yield)
        yield  # let the other implementations see it, then answer for this object
        try:
            return function_items(collector, name, obj, declaration)
        except SpecError as exc:
            raise collector.CollectError(str(exc)) from None


@final
class TestRollouts:
    """A rollout test function's items, one per block of replicates (and arm), registered
    as ``prove_test_rollouts`` once such a test is declared (see :func:`register`)."""

    @pytest.hookimpl(trylast=True)
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        declaration = declaration_of(metafunc.function)
        if declaration is None or declaration.axes is not None:
            return
        if "prove_block" not in metafunc.fixturenames:
            return
        settings = metafunc.config.stash[SETTINGS_KEY]
        rollout_id = declaration.rollout_id or metafunc.definition.nodeid.split("[", 1)[0]
        replicates = settings.replicates_for(rollout_id, declaration.replicates)
        chunks = blocks(replicates, settings.concurrency_for(declaration.concurrency))
        metafunc.parametrize("prove_block", chunks, ids=block_ids(chunks, replicates))
        if declaration.arms:
            # Parametrized last, so that it varies fastest: the arms of one replicate are
            # consecutive items (the same seed, run close together; docs/arms.md).
            metafunc.parametrize("prove_arm", declaration.arms, ids=declaration.arms)


def register(config: pytest.Config) -> None:
    """Register the collection hooks of each kind of rollout this process declared, and of
    each kind it declares later (a test module declares its rollouts as pytest imports it,
    before it asks for the module's items): a session of plain tests never calls them."""
    hooks = {"test": (TestRollouts(), "prove_test_rollouts"),
             "axes": (AxesItems(), "prove_axes_items")}

    def on_declared(kind: str) -> None:
        found = hooks.get(kind)
        if found is not None and not config.pluginmanager.is_registered(found[0]):
            own(config, *found)

    for kind in hooks:
        if declared(kind):
            on_declared(kind)
    config.add_cleanup(listen(on_declared))


def _json_scalar(name: str, value: object, item: pytest.Item) -> Any:
    """The value a parameter keys its condition by, or a refusal naming the test."""
    from ..declare.episode import unstorable

    scalar: Any = value
    why: str | None = None
    if not (value is None or isinstance(value, str | int | float | bool)):
        enum_name = getattr(value, "name", None)
        if isinstance(enum_name, str) and type(value).__module__ != "builtins":
            scalar = enum_name
        else:
            scalar = repr(value)
            if " at 0x" in scalar:
                why = "has no stable value to key the condition by"
    shown = f"{name}={value!r:.120}"
    if why is None:
        problem = unstorable(scalar, name)
        if problem is None:
            return scalar
        shown, why = problem[0], f"cannot be stored: {problem[1]}"
    raise _UnkeyableError(words.unkeyable_parameter(item.nodeid, shown, why))


class _UnkeyableError(Exception):
    """A parameter no condition can be keyed by: refused before anything runs."""


Condition = tuple[dict[str, Any], str]
#: The parameters the plugin adds, which are no axis of the condition.
_OWN = frozenset({"prove_block", "prove_arm"})
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _node_of(item: pytest.Item, nodes: dict[tuple[int, str], str]) -> str:
    """The item's node id up to its parameters (``t.py::test``), worked out once for the
    items of one test function (they share their parent and their original name)."""
    name = getattr(item, "originalname", None)
    if not isinstance(name, str):
        return item.nodeid.split("[", 1)[0]
    key = (id(item.parent), name)
    found = nodes.get(key)
    if found is None:
        found = nodes[key] = item.nodeid.split("[", 1)[0]
    return found


@dataclass(slots=True)
class _Function:
    """What the items of one rollout test function share, worked out once for them all
    (a sweep of 100,000 replicates is 100,000 items of one function)."""

    function: object  # the test's function (a method's, for a test in a class)
    declaration: Declaration | None  # None: not a function rollout
    node: str  # its node id up to the parameters: ``t.py::test``
    rollout_id: str = ""
    declared: Declaration | None = None  # as this session runs it (settings.declared)
    total: int = 0


def _function_of(item: pytest.Function, function: object, settings: Settings) -> _Function:
    declaration = declaration_of(function)
    node = item.nodeid.split("[", 1)[0]
    if declaration is None or declaration.axes is not None:
        return _Function(function, None, node)
    rollout_id = declaration.rollout_id or node
    return _Function(function, declaration, node, rollout_id, settings.declared(declaration, node),
                     settings.replicates_for(rollout_id, declaration.replicates))


def _condition_of(item: pytest.Function, params: Mapping[str, Any],
                  seen: dict[Any, Condition]) -> Condition:
    """The condition of a rollout test's item and its key, from its parameters."""
    # The replicates of a condition share their parameter values: key them once, when
    # the values are plain scalars that are equal exactly when their conditions are
    # (1, 1.0 and True compare equal, as do 0.0 and -0.0, so types and float reprs are
    # kept; tuples, Decimals and other objects are keyed afresh every time).
    cache_key: tuple[Any, ...] | None = ()
    if len(params) > 1 or "prove_block" not in params:
        cache_key = tuple((k, type(v), repr(v) if type(v) is float else v)
                          for k, v in params.items() if k not in _OWN)
        if any(type(v) not in _PLAIN for k, v in params.items() if k not in _OWN):
            cache_key = None
    found = None if cache_key is None else seen.get(cache_key)
    if found is None:
        condition = {k: _json_scalar(k, v, item) for k, v in params.items()
                     if k not in _OWN}
        found = (condition, condition_key(condition))
        if cache_key is not None:
            seen[cache_key] = found
    return found


class _Sweep:
    """The whole sweep as collection made it, noted item by item before any deselection.

    Each step is taken once for what items share: a test function's declaration and node
    id once per function, a condition once per parameter values, its record in the plan
    once per run of items of one condition (collection is the price of a sweep's every
    session, and a per-item step costs a 100,000-item sweep a second or more).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = config.stash[SETTINGS_KEY]
        self.planned = config.stash[PLANNED_KEY]
        self.seen: dict[Any, Condition] = {}
        self.declared: dict[str, dict[str, list[Any]]] = {}  # a test's parametrize lists
        self.clashes: dict[str, set[str]] = {}  # a rollout id -> the node ids that use it
        self.blocked: dict[str, str] = {}  # fixture -> an item whose block it would get wrong
        self.functions: dict[tuple[int, str], _Function] = {}
        self.nodes: dict[tuple[int, str], str] = {}
        self.per_replicate: dict[int, tuple[object, list[str]]] = {}  # by fixture info
        #: The previous item's (rollout id, node, condition, total).
        self.last: tuple[Any, ...] = ()

    def note(self, item: pytest.Item) -> None:
        """Give a rollout test's item its plan, and note it in the sweep."""
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None:
            if not isinstance(item, pytest.Function):
                return
            made = self._plan(item)
            if made is None:
                return
            plan, node = made
        else:
            node = _node_of(item, self.nodes)
        last = self.last
        if last and last[2] is plan.condition and last[0] == plan.rollout_id \
                and last[1] == node and last[3] == plan.total:
            pass  # the same rollout and condition as the item before: noted with it
        else:
            self._record(item, plan, node)
            self.last = (plan.rollout_id, node, plan.condition, plan.total)
        if len(plan.replicates) > 1:
            self._block(item)

    def _plan(self, item: pytest.Function) -> tuple[ItemPlan, str] | None:
        """The plan of a rollout test's item (stashed on it) and its node id, or None for a
        test that is no rollout."""
        obj = item.obj
        function = getattr(obj, "__func__", obj)
        name = item.originalname
        key = (id(item.parent), name if isinstance(name, str) else item.nodeid)
        found = self.functions.get(key)
        if found is None or found.function is not function:
            found = self.functions[key] = _function_of(item, function, self.settings)
        if found.declaration is None or found.declared is None:
            return None
        callspec = getattr(item, "callspec", None)
        params: Mapping[str, Any] = callspec.params if callspec is not None else {}
        condition, ckey = _condition_of(item, params, self.seen)
        arm = params.get("prove_arm", "") if found.declaration.arms else ""
        plan = item.stash[PLAN_KEY] = ItemPlan(
            arm_rollout(found.rollout_id, arm) if arm else found.rollout_id, name,
            found.declared, condition, ckey, tuple(params.get("prove_block", (0,))),
            found.total, arm)
        return plan, found.node

    def _record(self, item: pytest.Item, plan: ItemPlan, node: str) -> None:
        """Note the item's rollout and condition in the sweep's plan."""
        info = self.planned.get(plan.rollout_id)
        if info is None:
            info = self.planned[plan.rollout_id] = {
                "label": plan.label, "declaration": plan.declaration.to_json(),
                "conditions": {}, "replicates": plan.total,
                # Where the rollout lives, so that a gate can tell a test that moved
                # from one left out of this session's paths (see coverage.py).
                "node": node, "path": _relative(self.config, item.path)}
        elif info["node"] != node:
            self.clashes.setdefault(plan.rollout_id, {info["node"]}).add(node)
        info["declaration"]["replicates"] = plan.total
        info["conditions"][plan.condition_key] = plan.condition
        if plan.condition:
            _note_positions(info, item, plan.condition, self.declared, node)

    def _block(self, item: pytest.Item) -> None:
        """Note the fixtures a block of replicates would set up with one replicate's seed."""
        fixtureinfo = getattr(item, "_fixtureinfo", None)
        cached = self.per_replicate.get(id(fixtureinfo))
        if cached is None or cached[0] is not fixtureinfo:
            cached = self.per_replicate[id(fixtureinfo)] = (fixtureinfo,
                                                            _per_replicate_fixtures(item))
        for fixture in cached[1]:
            self.blocked.setdefault(fixture, item.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every rollout item its plan, and note the whole sweep before any deselection;
    a shard marks its slice; refuse blocks that would get a fixture's seed wrong, and
    rollout ids that two tests share."""
    sweep = _Sweep(config)
    try:
        if rollouts_possible(config):
            for item in items:
                sweep.note(item)
    except _UnkeyableError as refused:
        # Through _refuse: a worker keeps running with no item, and the controller says
        # why (a worker that asked the session to stop here did so after telling the
        # controller its collection was done, which then sent it tests on a closed
        # channel now and then: an INTERNALERROR).
        _refuse(config, items, str(refused))
        return
    chosen = config.stash[SETTINGS_KEY].shard
    if chosen is not None:
        refusal = shards.slice_sweep(config, items, chosen)
        if refusal is not None:
            _refuse(config, items, refusal)
    if sweep.blocked:
        _refuse(config, items, words.blocked_fixtures(sweep.blocked))
    if sweep.clashes:
        _refuse(config, items, words.shared_rollout_ids(sweep.clashes))


#: What ``pytest.param(...)`` makes: a parametrize entry with its own id or marks.
_PARAMETER_SET: Any = type(pytest.param(None))


def _declared_values(item: pytest.Item) -> dict[str, list[Any]]:
    """Each parametrize argument's values as its markers list them (closest marker first;
    pytest allows an argument in one marker only). Arguments whose values cannot be read
    again (a generator pytest already consumed) are left out."""
    found: dict[str, list[Any]] = {}
    for mark in item.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames")
        values = mark.args[1] if len(mark.args) > 1 else mark.kwargs.get("argvalues")
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        if not isinstance(names, list | tuple) or not isinstance(values, list | tuple):
            continue
        for entry in values:
            if isinstance(entry, _PARAMETER_SET):
                row = tuple(entry.values)
            elif len(names) == 1:
                row = (entry,)
            else:
                row = tuple(entry) if isinstance(entry, list | tuple) else ()
            for name, value in zip(names, row, strict=False):
                found.setdefault(str(name), []).append(value)
    return found


def _same_value(declared: object, used: object) -> bool:
    if declared is used:
        return True
    try:
        return type(declared) is type(used) and bool(declared == used)
    except Exception:  # noqa: BLE001 - a parameter's own __eq__ may raise: not this one
        return False


def _note_positions(info: dict[str, Any], item: pytest.Item, condition: Mapping[str, Any],
                    declared: dict[str, dict[str, list[Any]]], node: str) -> None:
    """Each axis value's place in its parametrize list, so that reports order values as
    the test declared them, whatever order the items run in (``declared`` caches each
    test's lists by its node id)."""
    params = getattr(getattr(item, "callspec", None), "params", None)
    if not isinstance(params, Mapping) or not condition:
        return
    lists = declared.get(node)
    if lists is None:
        lists = declared[node] = _declared_values(item)
    for name, value in condition.items():
        if name not in params or name not in lists:
            continue
        used = params[name]
        position = next((i for i, v in enumerate(lists[name]) if _same_value(v, used)), None)
        if position is not None:
            info.setdefault("axes", {}).setdefault(name, {}).setdefault(str(position), value)


def _per_replicate_fixtures(item: pytest.Item) -> list[str]:
    """The fixtures of ``item`` that depend, directly or through others, on a value that
    differs from replicate to replicate (prove_seed, prove_replicate); prove_cfg is one
    value for a whole block, which is one condition."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", None) or {}
    tainted = {"prove_seed", "prove_replicate"}
    found: list[str] = []
    changed = True
    while changed:
        changed = False
        for name, fixturedefs in defs.items():
            if name in tainted or not fixturedefs:
                continue
            if tainted & set(getattr(fixturedefs[-1], "argnames", ())):
                tainted.add(name)
                found.append(name)
                changed = True
    return found


def _refuse(config: pytest.Config, items: list[pytest.Item], message: str) -> None:
    """Stop before anything runs: a usage error, or on an xdist worker (where raising in
    collection would crash it) no item at all and the message for the controller."""
    if not config.stash[SETTINGS_KEY].is_worker:
        raise pytest.UsageError(message)
    config.stash[DESIGN_FAILURE_KEY] = message
    config.hook.pytest_deselected(items=list(items))
    items[:] = []


#: What the selection kept, replicate by replicate (-k can pick replicates): rollout id ->
#: condition key -> replicates.
Kept = dict[str, dict[str, list[int]]]
#: The rollouts and conditions the design check counts: rollout id -> (a plan, keys).
Selected = dict[str, tuple[ItemPlan, set[str]]]


def _kept(items: list[pytest.Item], at_once: bool) -> tuple[Kept, Selected]:
    """What the selection kept; with ``at_once``, the rollouts and conditions the design
    check counts, noted in the same pass (when no resumed run drops any, and the items are
    the whole sweep's)."""
    kept: Kept = {}
    selected: Selected = {}
    last: tuple[str, str, list[int]] | None = None
    for item in items:
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None:
            continue
        if last is None or last[0] != plan.rollout_id or last[1] != plan.condition_key:
            last = (plan.rollout_id, plan.condition_key, kept.setdefault(
                plan.rollout_id, {}).setdefault(plan.condition_key, []))
            if at_once:
                _select(selected, plan)
        last[2].extend(plan.replicates)
    return kept, selected


def _select(selected: Selected, plan: ItemPlan) -> None:
    found = selected.get(plan.rollout_id)
    if found is None:
        found = selected[plan.rollout_id] = (plan, set())
    found[1].add(plan.condition_key)


def _selected(items: list[pytest.Item]) -> Selected:
    """The rollouts and conditions of ``items``, which the design check counts."""
    selected: Selected = {}
    for item in items:
        plan = item.stash.get(PLAN_KEY, None)
        if plan is not None:
            _select(selected, plan)
    return selected


def _drop_done(config: pytest.Config, items: list[pytest.Item], settings: Settings) -> None:
    """--prove-resume: leave out the items whose every replicate the resumed run holds."""
    keep, drop = [], []
    for item in items:
        plan = item.stash.get(PLAN_KEY, None)
        if plan is not None and all(
                (plan.rollout_id, plan.condition_key, r) in settings.done
                for r in plan.replicates):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class Collection:
    """After pytest's own selection: the shard, resume, the checks, and the plan."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        config.stash[SKIPPED_FILES_KEY] = set()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module skipped as it was collected leaves its rollouts out on purpose."""
        if report.skipped and report.nodeid and "::" not in report.nodeid:
            self.config.stash[SKIPPED_FILES_KEY].add(report.nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        settings = config.stash[SETTINGS_KEY]
        sweep = list(items)  # the design check is the merged sweep's, every shard's items
        if settings.shard is not None:
            shards.keep_own(config, items)
        at_once = settings.shard is None and not settings.done
        kept, selected = _kept(items if rollouts_possible(config) else [], at_once)
        config.stash[SELECTED_KEY] = kept
        if settings.worker_refusal is not None and kept:  # sessions without a rollout run
            _refuse(config, items, settings.worker_refusal)
            return
        if settings.done:
            _drop_done(config, items, settings)
        if not at_once and rollouts_possible(config):
            selected = _selected(sweep if settings.shard is not None else items)
        if settings.replay is not None and not settings.plan_only:
            return  # a replay compares nothing: no design to check
        refusal = (check_chaos(selected, settings)
                   or check_arms(selected, settings)
                   or check_events(config.option.prove_event, selected)
                   or check_targets(selected, settings))
        if refusal is not None:
            _refuse(config, items, refusal)
            return
        if not selected or (config.option.collectonly and not settings.plan_only):
            if settings.plan_only:
                self._print_plan([words.NO_ROLLOUT], items)
            return
        design = decide(config, items, sweep, selected, kept, settings)
        if settings.plan_only:
            self._print_plan([*design.lines, *design.plan_end(config, settings)], items)
            return
        refusal = design.refusal(settings)
        if refusal is not None:
            _refuse(config, items, refusal)

    def _print_plan(self, lines: list[str], items: list[pytest.Item]) -> None:
        """Print the plan, and run nothing (--prove-plan)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            for line in lines:
                reporter.write_line(line)
        self.config.hook.pytest_deselected(items=list(items))
        items[:] = []


def _relative(config: pytest.Config, path: Path) -> str:
    """``path`` relative to the rootdir, with forward slashes (as node ids are)."""
    return relative_to_root(path, config.rootpath)
