"""The pytest glue: options, collection, fixtures, the report hand-off and the gate."""

from __future__ import annotations

import argparse
import functools
import inspect
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from . import budget, capture, wire
from .api import declaration_of
from .arguments import relative_to_root, space_form_problem
from .execute import IDENTITIES_KEY, execute_rollout, identities_of
from .items import SpecFile, block_id, blocks, function_items
from .options import fail_on, fraction, positive_int, run_name, store_name
from .runner import Identity
from .seeds import new_salt
from .spec import Declaration, SpecError, condition_key
from .state import (
    PLAN_KEY,
    PLANNED_KEY,
    RESULTS_KEY,
    SELECTED_KEY,
    SETTINGS_KEY,
    SKIPPED_FILES_KEY,
    ItemPlan,
    Settings,
    plan_data,
)
from .store import Store, StoreError

SESSION_NAME = "prove_session"
#: Options that name a file or folder, and every option that takes a value (tests check
#: these against ``pytest --help``): see arguments.py for why their separate form is refused.
PATH_OPTIONS = ("--prove-store", "--prove-report")
VALUE_OPTIONS = (*PATH_OPTIONS, "--prove-name", "--prove-baseline", "--prove-save-baseline",
                 "--prove-resume", "--prove-replicates", "--prove-concurrency", "--prove-event",
                 "--prove-fail-on", "--prove-q", "--prove-max-mde", "--prove-token-cap",
                 "--prove-output-token-cap", "--prove-plan-from")
DESIGN_FAILURE_KEY = pytest.StashKey[str]()


# ---------------------------------------------------------------------------
# options


def _report_path(text: str) -> Path:
    """A report file whose suffix names its kind (--prove-report)."""
    path = Path(text)
    if path.suffix.lower() not in (".html", ".htm", ".md", ".json"):
        raise argparse.ArgumentTypeError(
            f"expected a file ending in .html, .md or .json, got {text!r}")
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prove", "pytest-prove: did this change make the agent fail more?")
    group.addoption("--prove-store", metavar="DIR", default=None,
                    help="folder of runs and baselines (default: ini prove_store, else "
                         ".prove under rootdir)")
    group.addoption("--prove-name", metavar="NAME", type=store_name, default=None,
                    help="name this run (default: its run id)")
    group.addoption("--prove-baseline", metavar="NAME", type=store_name, default=None,
                    help="pair this run with baseline NAME, compare, and fail on a worse verdict")
    group.addoption("--prove-save-baseline", metavar="NAME", type=store_name, default=None,
                    help="write this run as baseline NAME (.prove/baselines/NAME.jsonl) once "
                         "it is complete")
    group.addoption("--prove-update-baseline", action="store_true", default=False,
                    help="replace the --prove-baseline file with this run once it is complete")
    group.addoption("--prove-resume", metavar="RUN", type=run_name, default=None,
                    help="run only the replicates that run RUN is missing, appending to it")
    group.addoption("--prove-plan", action="store_true", default=False,
                    help="collect, print the plan and the design check, and run nothing")
    group.addoption("--prove-replicates", metavar="N", type=positive_int, default=None,
                    help="replicates per condition for every rollout, overriding declarations")
    group.addoption("--prove-concurrency", metavar="K", type=positive_int, default=None,
                    help="run K replicates at once in each item (threads, or asyncio tasks "
                         "for async rollouts)")
    group.addoption("--prove-event", metavar="EVENT", action="append", default=[],
                    help="compare this outcome (repeatable; default: every declared failure "
                         "and success)")
    group.addoption("--prove-fail-on", metavar="WORDS", type=fail_on, default=None,
                    help="verdicts that fail the session: worse (default), too-small, or both "
                         "comma-separated")
    group.addoption("--prove-q", metavar="Q", type=fraction, default=None,
                    help="error rate q for flags (BH) and the verdict (Holm); default 0.05")
    group.addoption("--prove-max-mde", metavar="D", type=fraction, default=None,
                    help="the largest change you accept not being able to see; default 0.20")
    group.addoption("--prove-allow-underpowered", action="store_true", default=None,
                    help="run even when the design check says a condition could not see "
                         "--prove-max-mde")
    group.addoption("--prove-report", metavar="PATH", type=_report_path, default=None,
                    help="write the comparison as a report: .html (self-contained), .md or "
                         ".json")
    parser.addini("prove_store", "folder of runs and baselines (relative to rootdir)",
                  default=".prove")
    parser.addini("prove_specs", "sweep spec files to collect besides prove_*.toml",
                  type="paths", default=[])
    parser.addini("prove_q", "default for --prove-q", default="0.05")
    parser.addini("prove_max_mde", "default for --prove-max-mde", default="0.20")
    parser.addini("prove_fail_on", "default for --prove-fail-on", default="worse")
    parser.addini("prove_allow_underpowered", "default for --prove-allow-underpowered",
                  type="bool", default=False)
    budget.add_options(parser)
    capture.add_options(parser)


def _ini_fraction(config: pytest.Config, name: str) -> float:
    raw = str(config.getini(name))
    try:
        return fraction(raw)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {name}: {exc}") from None


# ---------------------------------------------------------------------------
# configure


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "prove_rollout: set by @prove.rollout; do not apply by hand")
    opt = config.option
    q = opt.prove_q or _ini_fraction(config, "prove_q")
    max_mde = opt.prove_max_mde or _ini_fraction(config, "prove_max_mde")
    try:
        fail_words = opt.prove_fail_on or fail_on(str(config.getini("prove_fail_on")))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option prove_fail_on: {exc}") from None
    store_root = Path(opt.prove_store) if opt.prove_store else (
        config.rootpath / str(config.getini("prove_store")))
    if opt.prove_update_baseline and not opt.prove_baseline:
        raise pytest.UsageError(
            "--prove-update-baseline replaces the baseline named by --prove-baseline; "
            "add --prove-baseline NAME (or use --prove-save-baseline NAME for a new one)")
    if opt.prove_plan:
        # The plan is read on one process: no workers are started for it.
        opt.dist = "no"
    settings = Settings(
        store=store_root.resolve(),
        replicates=opt.prove_replicates,
        concurrency=opt.prove_concurrency or 1,
        q=q,
        max_mde=max_mde,
        allow_underpowered=bool(opt.prove_allow_underpowered
                                or config.getini("prove_allow_underpowered")),
        paired=opt.prove_baseline is not None or opt.prove_resume is not None,
        plan_only=opt.prove_plan,
    )
    config.stash[SETTINGS_KEY] = settings
    config.stash[PLANNED_KEY] = {}
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # An xdist worker: the controller decided the salt and what is already done.
        sent = wire.worker_input(workerinput)
        settings.is_worker = True
        settings.salt = sent["salt"]
        settings.done = sent["done"]
        config.pluginmanager.register(_Collection(config), "prove_collection")
        config.pluginmanager.register(_WorkerReports(), "prove_worker_reports")
        budget.register(config, None)
        capture.register(config)
        return

    _refuse_space_form(config)
    from .session import ProveSession

    store = Store(settings.store)
    try:
        baseline = store.load_baseline(opt.prove_baseline) if opt.prove_baseline else None
        resume = store.load(opt.prove_resume) if opt.prove_resume else None
    except StoreError as exc:
        raise pytest.UsageError(str(exc)) from None
    if resume is not None:
        settings.salt = resume.salt
        settings.done = frozenset(_done_keys(resume.episodes))
        if baseline is not None and resume.salt != baseline.salt:
            raise pytest.UsageError(
                f"run {resume.name!r} was not paired with baseline {baseline.name!r} (their "
                "salts differ), so resuming it against that baseline would break the pairing; "
                "drop --prove-baseline or start a new run")
    elif baseline is not None:
        settings.salt = baseline.salt
    else:
        settings.salt = new_salt()
    try:
        session = ProveSession(
            config, settings, store, name=opt.prove_name, baseline=baseline, resume=resume,
            save_baseline=opt.prove_save_baseline, update_baseline=opt.prove_update_baseline,
            events=tuple(opt.prove_event), fail_on=fail_words)
    except StoreError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(session, SESSION_NAME)
    config.pluginmanager.register(_Collection(config), "prove_collection")
    budget.register(config, session)
    capture.register(config, session)
    if config.pluginmanager.hasplugin("xdist"):
        from .xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(session), "prove_xdist")


def _refuse_space_form(config: pytest.Config) -> None:
    """Stop before anything runs when a separate option value may have moved the rootdir."""
    import os
    import shlex

    params = config.invocation_params
    args = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *params.args]
    problem = space_form_problem(args, value_options=VALUE_OPTIONS, path_options=PATH_OPTIONS,
                                 invocation_dir=params.dir)
    if problem is not None:
        raise pytest.UsageError(problem)


def _done_keys(episodes: Any) -> set[tuple[str, str, int]]:
    """Replicates a resumed run needs no more: those that ended (errors are run again)."""
    done = set()
    for record in episodes:
        error = record.get("error")
        if error is None or error.get("kind") == "no_outcome":
            done.add((record["rollout"], record["condition_key"], int(record["replicate"])))
    return done


class _WorkerReports:
    """On an xdist worker: once a report has been sent to the controller (and counted
    against the cap), its episodes leave it; the worker's terminal keeps every report."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            wire.take(report, "episodes", "pending")


def pytest_unconfigure(config: pytest.Config) -> None:
    prove = config.pluginmanager.get_plugin(SESSION_NAME)
    if prove is not None:
        prove.run.writer.release()  # a session that ended before its run closed
    for name in (SESSION_NAME, "prove_collection", "prove_xdist", "prove_cap", "prove_capture",
                 "prove_capture_gate", "prove_worker_reports"):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)


# ---------------------------------------------------------------------------
# collection


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
    replicates = settings.replicates or declaration.replicates
    chunks = blocks(replicates, declaration.concurrency or settings.concurrency)
    metafunc.parametrize("prove_block", chunks,
                         ids=[block_id(b, replicates) for b in chunks])


def _json_scalar(name: str, value: object, item: pytest.Item) -> Any:
    """The value a parameter keys its condition by, or a refusal naming the test."""
    from .episode import unstorable

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


def _plan_for_function(item: pytest.Function, declaration: Declaration,
                       seen: dict[Any, Condition]) -> ItemPlan:
    callspec = getattr(item, "callspec", None)
    params = dict(callspec.params) if callspec is not None else {}
    block = params.pop("prove_block", (0,))
    # The replicates of a condition share their parameter values: key them once, when
    # the values are plain scalars that are equal exactly when their conditions are
    # (1, 1.0 and True compare equal, as do 0.0 and -0.0, so types and float reprs are
    # kept; tuples, Decimals and other objects are keyed afresh every time).
    cache_key: tuple[Any, ...] | None = tuple(
        (k, type(v), repr(v) if type(v) is float else v) for k, v in params.items())
    if any(type(v) not in _PLAIN for v in params.values()):
        cache_key = None
    found = None if cache_key is None else seen.get(cache_key)
    if found is None:
        condition = {k: _json_scalar(k, v, item) for k, v in params.items()}
        found = (condition, condition_key(condition))
        if cache_key is not None:
            seen[cache_key] = found
    settings = item.config.stash[SETTINGS_KEY]
    rollout_id = declaration.rollout_id or item.nodeid.split("[", 1)[0]
    return ItemPlan(rollout_id=rollout_id, label=item.originalname, declaration=declaration,
                    condition=found[0], condition_key=found[1], replicates=tuple(block),
                    total=settings.replicates or declaration.replicates)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every rollout item its plan, and note the whole sweep before any deselection."""
    planned = config.stash[PLANNED_KEY]
    seen: dict[Any, Condition] = {}
    clashes: dict[str, set[str]] = {}
    for item in items:
        if isinstance(item, pytest.Function) and PLAN_KEY not in item.stash:
            declaration = declaration_of(item.obj)
            if declaration is None or declaration.axes is not None:
                continue
            item.stash[PLAN_KEY] = _plan_for_function(item, declaration, seen)
            _fill_own_arguments(item)
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None:
            continue
        info = planned.get(plan.rollout_id)
        if info is None:
            info = planned[plan.rollout_id] = {
                "label": plan.label, "declaration": plan.declaration.to_json(),
                "conditions": {}, "replicates": plan.total,
                # Where the rollout lives, so that a gate can tell a test that moved from
                # one left out of this session's paths (see coverage.py).
                "node": item.nodeid.split("[", 1)[0], "path": _relative(config, item.path)}
        elif info["node"] != item.nodeid.split("[", 1)[0]:
            clashes.setdefault(plan.rollout_id, {info["node"]}).add(item.nodeid.split("[", 1)[0])
        info["declaration"]["replicates"] = plan.total
        info["conditions"][plan.condition_key] = plan.condition
    if clashes:
        shown = "; ".join(f"{rid!r} by {' and '.join(sorted(nodes))}"
                          for rid, nodes in sorted(clashes.items()))
        _refuse(config, items, f"rollout ids must be unique, and two rollouts share one: "
                               f"{shown}. Their episodes would be stored as one rollout's; "
                               "give each its own id= (or target_id in a spec)")


def _refuse(config: pytest.Config, items: list[pytest.Item], message: str) -> None:
    """Stop before anything runs: a usage error, or on an xdist worker (where raising in
    collection would crash it) no item at all and the message for the controller."""
    if not config.stash[SETTINGS_KEY].is_worker:
        raise pytest.UsageError(message)
    config.stash[DESIGN_FAILURE_KEY] = message
    config.hook.pytest_deselected(items=list(items))
    items[:] = []


class _Collection:
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
        # What the selection kept, replicate by replicate (-k can pick replicates).
        kept: dict[str, dict[str, list[int]]] = {}
        for item in items:
            plan = item.stash.get(PLAN_KEY, None)
            if plan is not None:
                kept.setdefault(plan.rollout_id, {}).setdefault(
                    plan.condition_key, []).extend(plan.replicates)
        config.stash[SELECTED_KEY] = kept
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
        selected: dict[str, tuple[ItemPlan, set[str]]] = {}
        for item in items:
            plan = item.stash.get(PLAN_KEY, None)
            if plan is not None:
                selected.setdefault(plan.rollout_id, (plan, set()))[1].add(plan.condition_key)
        if not selected or (config.option.collectonly and not settings.plan_only):
            if settings.plan_only:
                self._print(["pytest-prove plan: no rollout collected"])
                config.hook.pytest_deselected(items=list(items))
                items[:] = []
            return
        m = sum(len(keys) * len(plan.declaration.events) for plan, keys in selected.values())
        replicates = min(plan.total for plan, _ in selected.values())
        check = _design_check(config, replicates, m, settings)
        cells = sum(len(keys) for _, keys in selected.values())
        episodes = sum(len(keys) * plan.total for plan, keys in selected.values())
        method = "the paired test" if settings.paired else "Fisher's exact test"
        lines = [
            f"pytest-prove plan: {episodes:,} episodes: {len(selected)} rollout(s), "
            f"{cells} condition(s), {replicates} replicates or more each",
            f"design check: the smallest rise one condition alone would be flagged for is "
            f"{_limit(check.worst_limit)} at its worst base rate, {check.worst_base_rate:.3f} "
            f"({method}, q {settings.q:g} over {m} tests, 4 times in 5; you accept up to "
            f"{settings.max_mde:.3f})",
        ]
        if settings.plan_only:
            lines.extend(budget.plan_lines(config, {rid: (keys, plan.total)
                                                    for rid, (plan, keys) in selected.items()}))
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
                f"{_limit(check.worst_limit)} (at base rate {check.worst_base_rate:.3f}), more "
                f"than the {settings.max_mde:.3f} you accept. {needed} (replicates= or "
                f"--prove-replicates), fewer conditions or events, a larger --prove-max-mde, "
                f"or run anyway with --prove-allow-underpowered")
            _refuse(config, items, message)

    def _print(self, lines: list[str]) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        for line in lines:
            reporter.write_line(line)


@dataclass(frozen=True, slots=True)
class _Design:
    worst_limit: float | None
    worst_base_rate: float
    ok: bool
    replicates_needed: int | None


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
    from .stats import design_check  # scipy is imported only when a sweep is collected

    check = design_check(replicates, m, paired=settings.paired, q=settings.q,
                         max_mde=settings.max_mde)
    design = _Design(worst_limit=check.worst_limit, worst_base_rate=check.worst_base_rate,
                     ok=check.ok, replicates_needed=check.replicates_needed)
    if cache is not None:
        cache.set(key, {"worst_limit": design.worst_limit,
                        "worst_base_rate": design.worst_base_rate, "ok": design.ok,
                        "replicates_needed": design.replicates_needed})
    return design


def _relative(config: pytest.Config, path: Path) -> str:
    """``path`` relative to the rootdir, with forward slashes (as node ids are)."""
    return relative_to_root(path, config.rootpath)


def _limit(value: float | None) -> str:
    return "none (no change of any size)" if value is None else f"{value:.3f}"


# ---------------------------------------------------------------------------
# fixtures


def _fill_own_arguments(item: pytest.Function) -> None:
    """Give a rollout item the values of the plugin's own arguments up front.

    pytest resolves through its fixture machinery only the arguments an item's
    ``funcargs`` does not hold yet, and that machinery costs more per item than a
    trivial rollout's whole episode.  These values are the plugin's, known once
    the run's salt is: the fixtures below still exist (for ``--fixtures``, and for
    fixtures that depend on them) and give the same values.
    """
    plan: ItemPlan = item.stash[PLAN_KEY]
    names = item.fixturenames
    first = identities_of(item)[0]
    own = {"prove_block": plan.replicates, "prove_seed": first.seed,
           "prove_replicate": first.replicate, "prove_cfg": dict(plan.condition)}
    for name, value in own.items():
        if name in names:
            item.funcargs[name] = value


def _plan_of(request: pytest.FixtureRequest) -> ItemPlan:
    plan: ItemPlan | None = request.node.stash.get(PLAN_KEY, None)
    if plan is None:
        raise pytest.UsageError(
            f"{request.node.nodeid}: prove_* fixtures are for rollouts; decorate the test "
            "with @prove.rollout(...)")
    return plan


@pytest.fixture
def prove_block() -> tuple[int, ...]:
    """The replicates this item runs (set by @prove.rollout; one unless --prove-concurrency)."""
    return (0,)


@pytest.fixture
def prove_replicate(request: pytest.FixtureRequest) -> int:
    """The replicate number of the running episode."""
    return _plan_of(request).replicates[0]


@pytest.fixture
def prove_seed(request: pytest.FixtureRequest) -> int:
    """The seed of the running episode: seed every random choice of the agent from it."""
    return identities_of(request.node)[0].seed


@pytest.fixture
def prove_cfg(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The condition of the running episode, as a dict of axis values."""
    return dict(_plan_of(request).condition)


# ---------------------------------------------------------------------------
# running


@functools.cache
def _argnames(function: Any) -> tuple[str, ...]:
    """The arguments a rollout test takes by name (read once per function, not per item)."""
    return tuple(n for n, p in inspect.signature(function).parameters.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    plan = pyfuncitem.stash.get(PLAN_KEY, None)
    if plan is None:
        return None
    function = pyfuncitem.obj
    base = {n: pyfuncitem.funcargs[n] for n in _argnames(function) if n in pyfuncitem.funcargs}

    def call(ident: Identity) -> Any:
        kwargs = dict(base)
        if "prove_seed" in kwargs:
            kwargs["prove_seed"] = ident.seed
        if "prove_replicate" in kwargs:
            kwargs["prove_replicate"] = ident.replicate
        if "prove_cfg" in kwargs:
            kwargs["prove_cfg"] = dict(ident.condition)
        return function(**kwargs)

    execute_rollout(pyfuncitem, call, is_async=inspect.iscoroutinefunction(function))
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    plan = item.stash.get(PLAN_KEY, None)
    if plan is None:
        return report
    if report.when == "call":
        # Taken off the item: the controller stores them, and nothing keeps them after.
        wire.attach(report, episodes=item.stash.get(RESULTS_KEY, []))
        if RESULTS_KEY in item.stash:
            del item.stash[RESULTS_KEY]
        if IDENTITIES_KEY in item.stash:  # worked out again if the item runs again
            del item.stash[IDENTITIES_KEY]
    elif report.when == "setup":
        settings = item.config.stash[SETTINGS_KEY]
        if settings.is_worker or report.failed or report.skipped:
            # A worker sends them ahead, so that the controller can store these replicates
            # as errored if it dies; a failed setup ends them here, a skipped one leaves
            # them out on purpose.
            wire.attach(report, pending=[i.to_json() for i in identities_of(item)])
        if settings.is_worker and not settings.plan_sent:
            # The controller of an xdist session collects nothing: it learns the sweep's
            # plan from the first report of each worker, so that a run killed midway still
            # knows what it was meant to hold.
            settings.plan_sent = True
            wire.attach(report, plan=plan_data(item.config))
        if plan.rollout_id not in settings.announced:
            settings.announced.add(plan.rollout_id)
            wire.attach(report, rollout=wire.RolloutData(
                id=plan.rollout_id, label=plan.label, declaration=plan.declaration.to_json()))
    return report


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return
    if settings.is_worker:
        wire.to_worker_output(config.workeroutput,  # type: ignore[attr-defined]
                              plan=plan_data(config),
                              design_failure=config.stash.get(DESIGN_FAILURE_KEY, None))
        return
    prove = config.pluginmanager.get_plugin(SESSION_NAME)
    if prove is None:
        return
    prove.merge_plan(plan_data(config))
    prove.finish(session, exitstatus)
    if settings.plan_only and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    prove = config.pluginmanager.get_plugin(SESSION_NAME)
    if prove is None:
        return
    lines = prove.summary_lines(verbose=config.get_verbosity() > 0)
    if not lines:
        return
    terminalreporter.section("pytest-prove")
    for line in lines:
        terminalreporter.write_line(line)
