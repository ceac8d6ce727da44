"""The pytest glue's hooks: the options (read in settings.py), collection, fixtures, the report
hand-off and the gate."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Generator
from typing import Any

import pytest

from .. import wire
from ..running.runner import Identity
from ..store import Store, StoreError
from ..traces import capture
from . import budget, heap

# The collection hooks live in collect.py; named here, they are this plugin's hooks.
from .collect import Collection
from .collect import pytest_collect_file as pytest_collect_file
from .collect import pytest_collection_modifyitems as pytest_collection_modifyitems
from .collect import pytest_generate_tests as pytest_generate_tests
from .collect import pytest_pycollect_makeitem as pytest_pycollect_makeitem
from .execute import IDENTITIES_KEY, execute_rollout, identities_of, plain_failure_report
from .salts import choose_salt, remember_failed
from .settings import Settings, add_options
from .state import (
    DESIGN_FAILURE_KEY,
    PLAN_FAILS_KEY,
    PLAN_KEY,
    PLANNED_KEY,
    RESULTS_KEY,
    SELECTED_KEY,
    SESSION_KEY,
    SETTINGS_KEY,
    ItemPlan,
    disown_all,
    own,
    plan_data,
)

SESSION_NAME = "prove_session"
#: The marker's help (``pytest --markers``). Nothing sets the marker: a rollout is known by
#: its declaration. It stays registered so that a suite that applied it by hand still runs
#: under --strict-markers.
MARKER = ("prove_rollout: not set by pytest-prove (@prove.rollout adds no marker), so "
          "-m prove_rollout selects no rollout; select rollouts by path or -k")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
    budget.add_options(parser)
    capture.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    settings = Settings.from_config(config)
    config.stash[SETTINGS_KEY] = settings
    config.stash[PLANNED_KEY] = {}
    heap.install(config)
    own(config, RolloutCalls(), "prove_calls")
    lf = config.pluginmanager.get_plugin("lfplugin")
    if lf is not None:
        from .lastfailed import LastFailedBlocks

        own(config, LastFailedBlocks(lf), "prove_lastfailed")
    if settings.is_worker:
        own(config, Collection(config), "prove_collection")
        own(config, _WorkerReports(), "prove_worker_reports")
        budget.register_worker(config)
        from .sequential import register_worker

        register_worker(config)
        capture.register(config)
        return

    from .session import ProveSession, ReportProperties

    opt = config.option
    store = Store(settings.store)
    start = choose_salt(config, settings, store)
    try:
        session = ProveSession(
            config, settings, store, name=opt.prove_name, baseline=start.baseline,
            resume=start.resume, save_baseline=opt.prove_save_baseline,
            update_baseline=opt.prove_update_baseline, asked=settings.asked(),
            replay=start.replay)
    except StoreError as exc:
        raise pytest.UsageError(str(exc)) from None
    session.last_failed = start.last_failed
    config.stash[SESSION_KEY] = session
    own(config, session, SESSION_NAME)  # by name too: -p no:… style toggles, getplugin
    own(config, Collection(config), "prove_collection")
    own(config, ReportProperties(), "prove_report_properties")
    session.start()
    if config.pluginmanager.hasplugin("xdist"):
        from .xdist import XdistHooks

        own(config, XdistHooks(session), "prove_xdist")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Said before the tests: pytest-timeout's thread method would end this very process."""
    settings = config.stash.get(SETTINGS_KEY, None)
    timeout_plugin = config.pluginmanager.get_plugin("timeout")  # the pytest_timeout module
    read = getattr(timeout_plugin, "get_env_settings", None)
    if (settings is None or settings.is_worker or not callable(read)
            or getattr(config.option, "dist", "no") != "no"):
        return []  # under xdist a worker that ends is replaced, and its item stored as errored
    try:
        found = read(config)
    except (AttributeError, ValueError, pytest.UsageError):
        return []
    if not getattr(found, "timeout", None) or getattr(found, "method", None) != "thread":
        return []
    return ["pytest-prove: pytest-timeout's thread method ends this process at its first "
            "timeout: the session stops there, that episode is not stored and the run is left "
            "incomplete (finish it with --prove-resume=latest). --prove-episode-timeout=S "
            "stores a late episode as timed out and goes on; so does --timeout-method=signal"]


class _WorkerReports:
    """On an xdist worker: once a report has been sent to the controller (and counted
    against the cap), its episodes leave it; the worker's terminal keeps every report."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        try:
            return (yield)
        finally:
            wire.take(report, "episodes", "pending")


def pytest_plugin_registered(plugin: object) -> None:
    """A session that loads pytester imports the engine (numpy, scipy) at once.

    pytester's in-process runs (``runpytest``, ``inline_run``) drop every module first
    imported inside them, and numpy cannot be imported twice in one process: a second
    in-process session that compared anything stopped with an INTERNALERROR.  Imported
    in the outer session, before any in-process run, the engine stays for all of them.
    """
    if getattr(plugin, "__name__", None) == "_pytest.pytester":
        from .. import stats  # noqa: F401


def pytest_unconfigure(config: pytest.Config) -> None:
    prove = config.stash.get(SESSION_KEY, None)
    if prove is not None:
        prove.run.writer.release()  # held from the first episode until the session ends
        del config.stash[SESSION_KEY]
    disown_all(config)


# ---------------------------------------------------------------------------
# fixtures


def _plan_of(request: pytest.FixtureRequest) -> ItemPlan:
    plan: ItemPlan | None = request.node.stash.get(PLAN_KEY, None)
    if plan is None:
        # The test's error, without a traceback through pytest's and this plugin's frames.
        asked = request.fixturename
        through = [n for n in request.fixturenames if n != asked and not n.startswith("prove_")
                   and asked in _closure_of(request, n)]
        pytest.fail(
            f"{request.node.nodeid} is not a rollout, and {asked} is a rollout's own value"
            + (f" (asked for by the fixture {', '.join(through)})" if through else "")
            + ": decorate the test with @prove.rollout(...), or do not ask for it",
            pytrace=False)
    return plan


def _closure_of(request: pytest.FixtureRequest, name: str) -> set[str]:
    """The fixtures ``name`` depends on, directly or through others."""
    defs = getattr(getattr(request.node, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    seen: set[str] = set()
    todo = [name]
    while todo:
        found = defs.get(todo.pop())
        for arg in getattr(found[-1], "argnames", ()) if found else ():
            if arg not in seen:
                seen.add(arg)
                todo.append(arg)
    return seen


@pytest.fixture
def prove_block(request: pytest.FixtureRequest) -> tuple[int, ...]:
    """The replicates this item runs (set by @prove.rollout; one unless --prove-concurrency)."""
    return _plan_of(request).replicates


@pytest.fixture
def prove_replicate(request: pytest.FixtureRequest) -> int:
    """The replicate number of the running episode."""
    return _plan_of(request).replicates[0]


@pytest.fixture
def prove_seed(request: pytest.FixtureRequest) -> int:
    """The seed of the running episode: seed every random choice of the agent from it."""
    _plan_of(request)  # outside a rollout: the plugin's own message, not a KeyError
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


class RolloutCalls:
    """Calls a rollout test's function for each replicate (registered as ``prove_calls``).

    Registered in ``pytest_configure``, after every plugin pytest loaded from its entry
    point, so that this ``tryfirst`` hook runs before theirs: anyio's own (for
    ``@pytest.mark.anyio``) would otherwise call the rollout once and drop its Episode.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Give a rollout test the values of the plugin's own arguments before its fixtures.

        pytest resolves through its fixture machinery only the arguments an item's
        ``funcargs`` does not hold yet, and that machinery costs more per item than a
        trivial rollout's whole episode.  These values are the plugin's: the fixtures
        above still exist (for ``--fixtures``, and for fixtures that depend on them) and
        give the same ones.  Filled here, not at collection: the seeds are worked out
        once, for the run (collecting a 100,000-item sweep worked out each item's first
        seed a second time, and kept a filled ``funcargs`` per item in memory).
        """
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None or not isinstance(item, pytest.Function):
            return
        names = item.fixturenames
        funcargs = item.funcargs
        if "prove_block" in names:
            funcargs["prove_block"] = plan.replicates
        if "prove_seed" in names or "prove_replicate" in names:
            first = identities_of(item)[0]
            if "prove_seed" in names:
                funcargs["prove_seed"] = first.seed
            if "prove_replicate" in names:
                funcargs["prove_replicate"] = first.replicate
        if "prove_cfg" in names:
            funcargs["prove_cfg"] = dict(plan.condition)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        plan = pyfuncitem.stash.get(PLAN_KEY, None)
        if plan is None:
            return None
        function, loop = _coroutine_of(pyfuncitem.obj)
        base = {n: pyfuncitem.funcargs[n] for n in _argnames(function)
                if n in pyfuncitem.funcargs}

        def call(ident: Identity) -> Any:
            kwargs = dict(base)
            if "prove_seed" in kwargs:
                kwargs["prove_seed"] = ident.seed
            if "prove_replicate" in kwargs:
                kwargs["prove_replicate"] = ident.replicate
            if "prove_cfg" in kwargs:
                kwargs["prove_cfg"] = dict(ident.condition)
            return function(**kwargs)

        is_async = inspect.iscoroutinefunction(function)
        with contextlib.ExitStack() as stack:
            if is_async and loop is None and pyfuncitem.funcargs.get("anyio_backend"):
                loop = _anyio_loop(pyfuncitem, stack)
            execute_rollout(pyfuncitem, call, is_async=is_async, loop=loop)
        return True


def _anyio_loop(item: pytest.Function, stack: contextlib.ExitStack,
                ) -> Callable[[Any], Any] | None:
    """Run an ``@pytest.mark.anyio`` rollout's block in anyio's test runner, where its
    async fixtures were made (None: anyio's plugin is not the one we know)."""
    try:
        from anyio.pytest_plugin import extract_backend_and_options, get_runner
    except ImportError:
        return None
    name, options = extract_backend_and_options(item.funcargs["anyio_backend"])
    if name != "asyncio":
        pytest.fail(f"{item.nodeid}: pytest-prove runs async rollouts on asyncio, and this "
                    f"one asks anyio for the {name!r} backend; give it the asyncio backend "
                    "(an anyio_backend fixture that returns 'asyncio')", pytrace=False)
    runner = stack.enter_context(get_runner(name, options))

    def run(coroutine: Any) -> Any:
        async def block() -> Any:
            return await coroutine

        return runner.run_fixture(block, {})

    return run


def _coroutine_of(function: Any) -> tuple[Any, Callable[[Any], Any] | None]:
    """The rollout to call, and how to run its coroutines (None: a loop of its own).

    pytest-asyncio (auto mode, or its marker) swaps a coroutine test for a sync wrapper
    while the item runs, which drops the returned Episode; the coroutine function is the
    wrapper's ``__wrapped__``, and it is run in pytest-asyncio's own runner, so that the
    async fixtures it made live on the loop the rollout runs on."""
    original = getattr(function, "__wrapped__", None)
    if inspect.iscoroutinefunction(function) or not inspect.iscoroutinefunction(original):
        return function, None
    cells = dict(zip(function.__code__.co_freevars,
                     (c.cell_contents for c in function.__closure__ or ()), strict=False))
    runner, context = cells.get("runner"), cells.get("context")
    if runner is None or not callable(getattr(runner, "run", None)):
        return original, None
    return original, lambda coroutine: runner.run(coroutine, context=context)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    plan = item.stash.get(PLAN_KEY, None)
    try:
        report = yield
    except Exception as exc:
        if plan is None or call.excinfo is None:
            raise
        # pytest could not render the rollout's failure (CPython 3.11's AST constructor can
        # raise SystemError while pytest reads the source of a frame): an INTERNALERROR
        # ended the sweep and lost the episode. It is an ordinary failure, shown plainly.
        report = plain_failure_report(item, call, exc)
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


@pytest.hookimpl(tryfirst=True)  # before junitxml and the --lf cache write what they saw
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return
    _settle_heap(session)
    if settings.is_worker:
        wire.to_worker_output(config.workeroutput,  # type: ignore[attr-defined]
                              plan=plan_data(config),
                              design_failure=config.stash.get(DESIGN_FAILURE_KEY, None))
        return
    prove = config.stash.get(SESSION_KEY, None)
    if prove is None:
        return
    prove.run.merge_plan(plan_data(config))
    prove.finish(session, exitstatus)
    _gate_reports(session, prove)
    if prove.ran_any:  # what --lf will rerun, and on which salt it failed
        remember_failed(config, salt=settings.salt, run=prove.run_label(),
                        ran=prove.ran_items())
    if settings.plan_only and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = (pytest.ExitCode.USAGE_ERROR if config.stash.get(PLAN_FAILS_KEY, False)
                              else pytest.ExitCode.OK)


def _settle_heap(session: pytest.Session) -> None:
    """No test runs any more: pytest's last collections and the interpreter's need not walk
    what the session still holds (see heap.py); sessions without a rollout are left alone."""
    config = session.config
    prove = config.stash.get(SESSION_KEY, None)
    if config.stash.get(SELECTED_KEY, None) or (prove is not None and prove.ran_any):
        heap.settle(config)


def _gate_reports(session: pytest.Session, prove: Any) -> None:
    """A session that fails for pytest-prove's reasons fails as pytest counts failures."""
    outcome = prove.outcome
    if session.exitstatus != pytest.ExitCode.TESTS_FAILED or prove.design_failure is not None:
        if outcome.review is not None and not outcome.failed_gate:
            prove.gate_reports.clear_for_lf(session.config)
        return
    review = outcome.review
    reasons = [r for r in (outcome.refusal, *(review.gate.reasons if review else ()),
                           *(n for n in outcome.notes if n.startswith("not saved")),
                           prove.budget.capped) if r is not None]
    if outcome.failed_gate or reasons:
        prove.gate_reports.emit(session.config, review if outcome.failed_gate else None,
                                reasons)
        prove.gate_reports.close_progress_line(session.config)
    elif review is not None:
        prove.gate_reports.clear_for_lf(session.config)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    prove = config.stash.get(SESSION_KEY, None)
    if prove is None:
        return
    verbosity = config.get_verbosity()
    # -q: the verdict, why the gate failed, and where things were written; -v: every row.
    lines = prove.summary_lines(verbose=verbosity > 0, quiet=verbosity < 0)
    if not lines:
        return
    terminalreporter.section("pytest-prove")
    for line in lines:
        terminalreporter.write_line(line)
