"""Collection: rollouts become items, each with its plan, and the sweep is checked.

Function rollouts (``@prove.rollout`` on a parametrized test, or with ``axes=``) and sweep
specs (``prove_*.toml``) become one item per condition and block of replicates.  After
pytest's own selection, a resumed run drops what it already holds, the design check runs
(before any rollout) and the plan is printed or refused.  The hooks here are re-exported by
:mod:`pytest_prove.plugin`, the module pytest loads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..api import declaration_of
from ..config.paths import relative_to_root
from ..declare.chaos import chaos_differences, chaos_refusal
from ..declare.spec import Declaration, SpecError, condition_key
from . import budget
from .items import SpecFile, block_ids, blocks, function_items
from .settings import Settings
from .state import (
    DESIGN_FAILURE_KEY,
    PLAN_FAILS_KEY,
    PLAN_KEY,
    PLANNED_KEY,
    SELECTED_KEY,
    SETTINGS_KEY,
    SHARD_KEY,
    SHARD_SLICE_KEY,
    SKIPPED_FILES_KEY,
    ItemPlan,
)

__all__ = ["Collection", "pytest_collect_file", "pytest_collection_modifyitems",
           "pytest_generate_tests", "pytest_pycollect_makeitem"]


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".toml":
        return None
    listed = {Path(p).resolve() for p in parent.config.getini("prove_specs")}
    if file_path.name.startswith("prove_") or file_path.resolve() in listed:
        return SpecFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str,
                              obj: object) -> Generator[None, Any, Any]:
    declaration = declaration_of(obj)
    module = getattr(collector, "module", None)
    defined_here = module is not None and getattr(obj, "__module__", None) == module.__name__
    if declaration is not None and declaration.axes is not None and defined_here \
            and callable(obj):
        yield  # let the other implementations see it, then answer for this object
        try:
            return function_items(collector, name, obj, declaration)
        except SpecError as exc:
            raise collector.CollectError(str(exc)) from None
    return (yield)


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
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
    message = (f"{item.nodeid}: the parameter {shown} {why}; parametrize with strings, "
               "finite numbers, booleans or None (and pass ids=... for the names)")
    if item.config.stash[SETTINGS_KEY].is_worker:
        # A worker that raises here is an INTERNALERROR for xdist; one that asks to stop
        # ends the whole session with this message, and no worker runs a test.
        item.session.shouldstop = message
    raise pytest.UsageError(message)


Condition = tuple[dict[str, Any], str]
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
    return _Function(function, declaration, node, rollout_id, settings.declared(declaration),
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
                          for k, v in params.items() if k != "prove_block")
        if any(type(v) not in _PLAIN for k, v in params.items() if k != "prove_block"):
            cache_key = None
    found = None if cache_key is None else seen.get(cache_key)
    if found is None:
        condition = {k: _json_scalar(k, v, item) for k, v in params.items()
                     if k != "prove_block"}
        found = (condition, condition_key(condition))
        if cache_key is not None:
            seen[cache_key] = found
    return found


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every rollout item its plan, and note the whole sweep before any deselection.

    Each step is taken once for what items share: a test function's declaration and node
    id once per function, a condition once per parameter values, its record in the plan
    once per run of items of one condition (collection is the price of a sweep's every
    session, and a per-item step costs a 100,000-item sweep a second or more).
    """
    planned = config.stash[PLANNED_KEY]
    seen: dict[Any, Condition] = {}
    declared: dict[str, dict[str, list[Any]]] = {}  # a test's parametrize lists
    clashes: dict[str, set[str]] = {}
    blocked: dict[str, str] = {}  # fixture -> an item whose block it would get wrong
    settings = config.stash[SETTINGS_KEY]
    functions: dict[tuple[int, str], _Function] = {}
    nodes: dict[tuple[int, str], str] = {}
    per_replicate: dict[int, tuple[object, list[str]]] = {}  # by the items' fixture info
    last: tuple[Any, ...] = ()  # the previous item's (rollout id, node, condition, total)
    for item in items:
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None:
            if not isinstance(item, pytest.Function):
                continue
            obj = item.obj
            function = getattr(obj, "__func__", obj)
            name = item.originalname
            key = (id(item.parent), name if isinstance(name, str) else item.nodeid)
            found = functions.get(key)
            if found is None or found.function is not function:
                found = functions[key] = _function_of(item, function, settings)
            if found.declaration is None or found.declared is None:
                continue
            node = found.node
            callspec = getattr(item, "callspec", None)
            params: Mapping[str, Any] = callspec.params if callspec is not None else {}
            condition, ckey = _condition_of(item, params, seen)
            plan = item.stash[PLAN_KEY] = ItemPlan(
                found.rollout_id, name, found.declared, condition, ckey,
                tuple(params.get("prove_block", (0,))), found.total)
        else:
            node = _node_of(item, nodes)
        if last and last[2] is plan.condition and last[0] == plan.rollout_id \
                and last[1] == node and last[3] == plan.total:
            pass  # the same rollout and condition as the item before: noted with it
        else:
            info = planned.get(plan.rollout_id)
            if info is None:
                info = planned[plan.rollout_id] = {
                    "label": plan.label, "declaration": plan.declaration.to_json(),
                    "conditions": {}, "replicates": plan.total,
                    # Where the rollout lives, so that a gate can tell a test that moved
                    # from one left out of this session's paths (see coverage.py).
                    "node": node, "path": _relative(config, item.path)}
            elif info["node"] != node:
                clashes.setdefault(plan.rollout_id, {info["node"]}).add(node)
            info["declaration"]["replicates"] = plan.total
            info["conditions"][plan.condition_key] = plan.condition
            if plan.condition:
                _note_positions(info, item, plan.condition, declared, node)
            last = (plan.rollout_id, node, plan.condition, plan.total)
        if len(plan.replicates) > 1:
            fixtureinfo = getattr(item, "_fixtureinfo", None)
            cached = per_replicate.get(id(fixtureinfo))
            if cached is None or cached[0] is not fixtureinfo:
                cached = per_replicate[id(fixtureinfo)] = (fixtureinfo,
                                                           _per_replicate_fixtures(item))
            for fixture in cached[1]:
                blocked.setdefault(fixture, item.nodeid)
    shard = config.stash[SETTINGS_KEY].shard
    if shard is not None:
        _slice(config, items, shard)
    if blocked:
        shown = ", ".join(f"{name!r} (used by {node})" for name, node in blocked.items())
        _refuse(config, items, f"fixture {shown} depends on prove_seed or prove_replicate, "
                               "but a block "
                               "of replicates (--prove-concurrency, concurrency=) sets its "
                               "fixtures up once, with its first replicate's seed, so the "
                               "others would not be paired with their twins. Take prove_seed "
                               "in the rollout itself and build what needs it there, or run "
                               "without blocks (a fixture on prove_cfg is fine: a block is "
                               "one condition)")
    if clashes:
        shown = "; ".join(f"{rid!r} by {' and '.join(sorted(nodes))}"
                          for rid, nodes in sorted(clashes.items()))
        _refuse(config, items, f"rollout ids must be unique, and two rollouts share one: "
                               f"{shown}. Their episodes would be stored as one rollout's; "
                               "give each its own id= (or target_id in a spec)")


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


def shard_of(rollout_id: str, condition_key: str, block: int, count: int) -> int:
    """The shard (1 .. ``count``) of a condition's ``block``-th block of replicates (block
    ``b`` holds replicates ``b * size`` onwards): the condition's blocks are dealt out in
    turn, from a shard its rollout id and key pick (so that conditions whose blocks do not
    divide evenly do not all leave their extra block to shard 1)."""
    digest = hashlib.blake2b(f"{rollout_id}\x1f{condition_key}".encode(), digest_size=8)
    return (int.from_bytes(digest.digest(), "big") + block) % count + 1


def _slice(config: pytest.Config, items: list[pytest.Item], shard: tuple[int, int]) -> None:
    """Mark the items of slice K of N, before any selection (so that -k cannot move an item
    to another shard), and keep the slice's replicates for the run's manifest.

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
        mine = shard_of(plan.rollout_id, plan.condition_key, plan.replicates[0] // size,
                        total) == index
        item.stash[SHARD_KEY] = mine
        if mine:
            chosen.setdefault(plan.rollout_id, {}).setdefault(
                plan.condition_key, set()).update(plan.replicates)
    if items_seen and not chosen:
        _refuse(config, items, f"--prove-shard={index}/{total}: none of the sweep's "
                               f"{items_seen} rollout item(s) falls in slice {index} of "
                               f"{total} (each condition's blocks of replicates are dealt "
                               "out across the shards, so a condition with fewer blocks "
                               "than shards leaves some shards without it), so its run "
                               "would never exist for pytest-prove merge; cut the sweep "
                               "into fewer shards, or run more replicates")
        return
    config.stash[SHARD_SLICE_KEY] = {
        "index": index, "count": total,
        "slice": {rid: {key: sorted(reps) for key, reps in sorted(conditions.items())}
                  for rid, conditions in sorted(chosen.items())}}


def _refuse(config: pytest.Config, items: list[pytest.Item], message: str) -> None:
    """Stop before anything runs: a usage error, or on an xdist worker (where raising in
    collection would crash it) no item at all and the message for the controller."""
    if not config.stash[SETTINGS_KEY].is_worker:
        raise pytest.UsageError(message)
    config.stash[DESIGN_FAILURE_KEY] = message
    config.hook.pytest_deselected(items=list(items))
    items[:] = []


def _check_chaos(config: pytest.Config, items: list[pytest.Item],
                 selected: Mapping[str, tuple[ItemPlan, set[str]]],
                 settings: Settings) -> bool:
    """Refuse, before anything runs, a run whose rollouts inject other faults than the
    baseline's did, unless --prove-chaos asks for that comparison, or than the run it
    resumes did (docs/chaos.md). Whether it refused."""
    mine = {rid: {"declaration": plan.declaration.to_json()}
            for rid, (plan, _) in selected.items()}
    for name, chaos, strict in settings.chaos_references:
        theirs = {rid: {"declaration": {} if c is None else {"chaos": json.loads(c)}}
                  for rid, c in chaos.items()}
        found = chaos_differences(theirs, mine)
        if not found:
            continue
        if strict:
            shown = "; ".join(f"rollout {rid}: {a} in {name}, {b} now" for rid, a, b in found)
            _refuse(config, items, f"--prove-resume: the faults injected differ ({shown}); a "
                                   "resumed run keeps the chaos it started with: resume it "
                                   "with the same --prove-chaos and declaration, or start a "
                                   "new run")
        else:
            _refuse(config, items, chaos_refusal(found, name, "this run"))
        return True
    return False


def _check_events(config: pytest.Config, items: list[pytest.Item],
                  selected: Mapping[str, tuple[ItemPlan, set[str]]]) -> bool:
    """Refuse a --prove-event that no selected rollout declares, before any rollout runs
    (the comparison refused it only at the end, once the sweep had spent its tokens).
    Whether it refused."""
    asked = list(dict.fromkeys(config.option.prove_event or ()))
    if not asked or not selected:
        return False
    known = sorted({e for plan, _ in selected.values() for e in plan.declaration.events})
    unknown = [e for e in asked if e not in known]
    if not unknown:
        return False
    shown = ", ".join(repr(e) for e in unknown)
    _refuse(config, items, (
        f"--prove-event names {shown}, which no rollout this session runs declares as a "
        f"failure or success; declared: {', '.join(map(repr, known))}. Fix the name, or drop "
        "--prove-event to compare every declared event"))
    return True


class Collection:
    """After pytest's own selection: resume, the design check, and the plan."""

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
            # Other shards' items: left out on purpose, as a deselection is.
            others = [item for item in items if not item.stash.get(SHARD_KEY, True)]
            if others:
                config.hook.pytest_deselected(items=others)
                items[:] = [item for item in items if item.stash.get(SHARD_KEY, True)]
        # What the selection kept, replicate by replicate (-k can pick replicates).
        kept: dict[str, dict[str, list[int]]] = {}
        last: tuple[str, str, list[int]] | None = None
        # The rollouts and conditions the design check counts: those of the items run,
        # noted in the same pass when no resumed run drops any (every shard's otherwise).
        selected: dict[str, tuple[ItemPlan, set[str]]] = {}
        at_once = settings.shard is None and not settings.done
        for item in items:
            plan = item.stash.get(PLAN_KEY, None)
            if plan is None:
                continue
            if last is None or last[0] != plan.rollout_id or last[1] != plan.condition_key:
                last = (plan.rollout_id, plan.condition_key, kept.setdefault(
                    plan.rollout_id, {}).setdefault(plan.condition_key, []))
                if at_once:
                    found = selected.get(plan.rollout_id)
                    if found is None:
                        found = selected[plan.rollout_id] = (plan, set())
                    found[1].add(plan.condition_key)
            last[2].extend(plan.replicates)
        config.stash[SELECTED_KEY] = kept
        if settings.worker_refusal is not None and kept:  # sessions without a rollout run
            _refuse(config, items, settings.worker_refusal)
            return
        if settings.done:
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
        for item in () if at_once else sweep if settings.shard is not None else items:
            plan = item.stash.get(PLAN_KEY, None)
            if plan is not None:
                found = selected.get(plan.rollout_id)
                if found is None:
                    found = selected[plan.rollout_id] = (plan, set())
                found[1].add(plan.condition_key)
        if settings.replay is not None and not settings.plan_only:
            return  # a replay compares nothing: no design to check
        if _check_chaos(config, items, selected, settings):
            return
        if _check_events(config, items, selected):
            return
        if not selected or (config.option.collectonly and not settings.plan_only):
            if settings.plan_only:
                self._print(["pytest-prove plan: no rollout collected"])
                config.hook.pytest_deselected(items=list(items))
                items[:] = []
            return
        m = sum(len(keys) * len(plan.declaration.tested()) for plan, keys in selected.values())
        replicates = min(plan.total for plan, _ in selected.values())
        check = _design_check(config, replicates, m, settings)
        cells = sum(len(keys) for _, keys in selected.values())
        episodes = sum(len(keys) * plan.total for plan, keys in selected.values())
        method = "the paired test" if settings.paired else "Fisher's exact test"
        lines = [
            f"pytest-prove plan: {episodes:,} episodes: {len(selected)} rollout(s), "
            f"{cells} condition(s), {replicates} replicates or more each",
            f"design check: the smallest rise one condition alone would be flagged for is "
            f"{check.shown} at its worst base rate, {check.worst_base_rate:.3f} "
            f"({method}, q {settings.q:g} over {m} tests, 4 times in 5; you accept up to "
            f"{settings.max_mde:.3f})",
        ]
        margin_check = _margin_check(config, replicates, m, settings)
        if margin_check is not None:
            lines.append(margin_check.line)
        from .sequential import declared

        seq_note, sequential_refusal = declared(
            config, settings, {rid: plan.declaration for rid, (plan, _) in selected.items()})
        if seq_note is not None:
            lines.append(seq_note)
        planned = {rid: (keys, plan.total) for rid, (plan, keys) in selected.items()}
        if settings.sequential and sequential_refusal is None:
            seq_lines, sequential_refusal, expected, looks = _sequential_plan(
                settings, selected, replicates, m, cells)
            partial = next((f"{plan.label} [{key}]" for rid, (plan, keys) in selected.items()
                            for key in sorted(keys)
                            if len(set(kept.get(rid, {}).get(key, ()))) < plan.total
                            and kept.get(rid, {}).get(key)), None)
            if partial is not None and sequential_refusal is None:
                sequential_refusal = (
                    f"--prove-sequential reads each condition's first replicates at each look, "
                    f"but the selection (-k, -m, a node id) keeps only some replicates of "
                    f"{partial}; select whole conditions (e.g. -k 'refund'), or drop "
                    "--prove-sequential")
            _in_looks(items, looks)
            lines.extend(seq_lines)
            planned = {rid: (keys, expected) for rid, (_, keys) in selected.items()}
        if settings.shard is not None:
            mine = sum(1 for item in items if PLAN_KEY in item.stash)
            whole = sum(1 for item in sweep if PLAN_KEY in item.stash)
            lines.append(f"shard {settings.shard[0]}/{settings.shard[1]}: this session runs "
                         f"{mine} of these {whole} rollout items; the design check is the "
                         "whole sweep's, since the merged run is what is gated")
        if settings.plan_only:
            lines.extend(budget.plan_lines(config, planned))
            if settings.sequential and config.option.prove_plan_from:
                lines.append("expected cost: of a sequential run, each condition at the "
                             "replicates it is expected to run when nothing changed")
            if sequential_refusal is not None:
                lines.append(f"{sequential_refusal}; the run would stop here")
                config.stash[PLAN_FAILS_KEY] = True
            if not check.ok and not settings.allow_underpowered:
                # The plan is the place to learn this: say it, and exit as the run would.
                needed = (f"{check.replicates_needed} replicates a condition would pass"
                          if check.replicates_needed else "many more replicates are needed")
                lines.append(f"design check fails: one condition alone could not be flagged "
                             f"for a rise of {settings.max_mde:.3f}, the most you accept; "
                             f"{needed} (or a larger --prove-max-mde, fewer conditions or "
                             "events); the run would stop here")
                config.stash[PLAN_FAILS_KEY] = True
            if (margin_check is not None and not margin_check.ok
                    and not settings.allow_underpowered):
                lines.append(f"design check fails for the margin: {margin_check.advice}; "
                             "the run would stop here")
                config.stash[PLAN_FAILS_KEY] = True
            self._print(lines)
            config.hook.pytest_deselected(items=list(items))
            items[:] = []
            return
        if not check.ok and not settings.allow_underpowered:
            needed = (f"Use {check.replicates_needed} replicates a condition"
                      if check.replicates_needed else
                      "Use many more replicates a condition (over the search's ceiling)")
            message = (
                f"design check failed: with {replicates} replicates a condition and {m} tests, "
                f"one condition alone could only be flagged for a rise of "
                f"{check.shown} (at base rate {check.worst_base_rate:.3f}), more "
                f"than the {settings.max_mde:.3f} you accept. {needed} (replicates= or "
                f"--prove-replicates), fewer conditions or events, a larger --prove-max-mde, "
                f"or run anyway with --prove-allow-underpowered")
            _refuse(config, items, message)
            return
        if (margin_check is not None and not margin_check.ok
                and not settings.allow_underpowered):
            _refuse(config, items, (
                f"design check failed for the margin: with {replicates} replicates a "
                f"condition, {margin_check.advice}, fewer conditions or events, a larger "
                "--prove-margin, or run anyway with --prove-allow-underpowered"))
            return
        if sequential_refusal is not None:
            _refuse(config, items, sequential_refusal)

    def _print(self, lines: list[str]) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        for line in lines:
            reporter.write_line(line)


def _sequential_plan(settings: Settings, selected: Mapping[str, tuple[ItemPlan, set[str]]],
                     replicates: int, m: int, cells: int
                     ) -> tuple[list[str], str | None, int, tuple[int, ...]]:
    """--prove-sequential: the plan's lines (the maximum and expected episodes), why the
    run is refused (or None), the replicates a condition is expected to run when nothing
    changed, and the looks."""
    from ..stats import sequential_design

    sizes = sorted({plan.total for plan, _ in selected.values()})
    design = sequential_design(replicates, m, paired=True, q=settings.q,
                               max_mde=settings.max_mde)
    lines = [
        f"sequential: at most {replicates * cells:,} episodes ({replicates} a condition, "
        f"looks at {', '.join(map(str, design.looks))}); expected "
        f"{round(design.expected_unchanged) * cells:,} when nothing changed, "
        f"{design.expected_episodes(cells, 1):,.0f} when one condition moves by "
        f"{settings.max_mde:.3f} (power there {design.power_at_max_mde:.2f}, normal "
        f"approximation); {design.method}",
    ]
    refusal: str | None = None
    if len(sizes) > 1:
        refusal = (f"--prove-sequential takes every condition's looks at the same replicates, "
                   f"but the rollouts declare {', '.join(map(str, sizes))} replicates; give "
                   "them one number (replicates= or --prove-replicates N)")
    elif not design.ok and not settings.allow_underpowered:
        needed = (f"use {design.replicates_needed} replicates a condition (the fixed "
                  f"design's {design.fixed}, inflated for the looks)"
                  if design.replicates_needed else "use many more replicates a condition")
        refusal = (f"sequential design check failed: with {replicates} replicates a condition "
                   f"at most and {m} tests, a condition that moved by {settings.max_mde:.3f} "
                   f"would be caught {design.power_at_max_mde:.2f} of the time, less than "
                   f"4 times in 5: stopping early and spending the error over the looks cost "
                   f"power. {needed.capitalize()} (replicates= or --prove-replicates; the "
                   "baseline must hold as many), or run anyway with "
                   "--prove-allow-underpowered")
    return lines, refusal, round(design.expected_unchanged), design.looks


def _in_looks(items: list[pytest.Item], looks: tuple[int, ...]) -> None:
    """Order the rollout items look by look, and within a look replicate by replicate across
    conditions, so that the looks fill in order: one process runs each look's replicates
    before the next look's, and xdist's load scheduling, which hands each worker a run of
    consecutive items, hands out the first look first. Other items keep their places; the
    order is the same on every worker (xdist requires it)."""
    import bisect

    places = [i for i, item in enumerate(items) if PLAN_KEY in item.stash]
    rollouts = [items[i] for i in places]

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        position, item = pair
        first = item.stash[PLAN_KEY].replicates[0]
        return bisect.bisect_right(looks, first), first, position

    ordered = [item for _, item in sorted(enumerate(rollouts), key=key)]
    for place, item in zip(places, ordered, strict=True):
        items[place] = item


@dataclass(frozen=True, slots=True)
class _MarginDesign:
    ok: bool
    line: str  # the plan's line
    advice: str  # what would pass, when not ok


def _margin_check(config: pytest.Config, replicates: int, m: int,
                  settings: Settings) -> _MarginDesign | None:
    """The margin's design check (--prove-margin), remembered in pytest's cache."""
    if settings.margin is None:
        return None
    key = (f"prove/margin-design/{replicates}-{m}-{int(settings.paired)}-{settings.q}-"
           f"{settings.margin}")
    cache = getattr(config, "cache", None)
    if cache is not None:
        found = cache.get(key, None)
        if isinstance(found, dict):
            try:
                return _MarginDesign(**found)
            except TypeError:
                pass
    from ..stats import margin_design_check

    check = margin_design_check(replicates, m, paired=settings.paired, margin=settings.margin,
                                q=settings.q)
    claim = (f"every one of the {m} tests shown within the margin {settings.margin:g} when "
             f"nothing changed")
    line = (f"margin design check: {claim}: {check.weakest_power ** m:.2f} of the time at "
            f"base rate {check.weakest_base_rate:.3f} ({check.row_power:.4f} asked of each "
            f"test for 0.8 over all {m}; {check.method})")
    if check.replicates_needed is None:
        advice = "more replicates than the search's ceiling are needed for that claim"
    else:
        about = "" if check.replicates_exact else "about "
        advice = (f"the claim that every condition is within {settings.margin:g} would hold "
                  f"only {check.weakest_power ** m:.2f} of the time when nothing changed; "
                  f"use {about}{check.replicates_needed} replicates a condition "
                  "(replicates= or --prove-replicates)")
    design = _MarginDesign(ok=check.ok, line=line, advice=advice)
    if cache is not None:
        cache.set(key, {"ok": design.ok, "line": design.line, "advice": design.advice})
    return design


@dataclass(frozen=True, slots=True)
class _Design:
    worst_limit: float | None
    worst_base_rate: float
    ok: bool
    replicates_needed: int | None
    #: The worst limit as printed (rounded up), kept so that a cached check prints it
    #: without importing the engine (numpy, scipy): about 2.5 s a session.
    shown: str


def _design_check(config: pytest.Config, replicates: int, m: int, settings: Settings) -> _Design:
    """The engine's design check, remembered in pytest's cache: it depends on sizes alone."""
    key = f"prove/design/{replicates}-{m}-{int(settings.paired)}-{settings.q}-{settings.max_mde}"
    cache = getattr(config, "cache", None)
    if cache is not None:
        found = cache.get(key, None)
        if isinstance(found, dict):
            try:
                return _Design(**found)
            except TypeError:
                pass
    from ..stats import design_check  # scipy is imported only when a sweep is collected

    check = design_check(replicates, m, paired=settings.paired, q=settings.q,
                         max_mde=settings.max_mde)
    from ..stats import outward

    design = _Design(worst_limit=check.worst_limit, worst_base_rate=check.worst_base_rate,
                     ok=check.ok, replicates_needed=check.replicates_needed,
                     shown="none (no change of any size)" if check.worst_limit is None
                     else outward(check.worst_limit))
    if cache is not None:
        cache.set(key, {"worst_limit": design.worst_limit,
                        "worst_base_rate": design.worst_base_rate, "ok": design.ok,
                        "replicates_needed": design.replicates_needed, "shown": design.shown})
    return design


def _relative(config: pytest.Config, path: Path) -> str:
    """``path`` relative to the rootdir, with forward slashes (as node ids are)."""
    return relative_to_root(path, config.rootpath)
