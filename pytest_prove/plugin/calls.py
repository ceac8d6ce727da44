"""The rollout call: the ``prove_*`` fixtures, the call of a rollout test's function for
each replicate of its block, the adapters that run an async rollout in pytest-asyncio's or
anyio's runner, and the hand-off of what the call ran to its test report."""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Callable, Generator
from typing import Any

import pytest

from .. import wire
from ..running.runner import Identity
from .execute import (
    IDENTITIES_KEY,
    WINDOW_KEY,
    execute_rollout,
    identities_of,
    plain_failure_report,
)
from .state import PLAN_KEY, RESULTS_KEY, SETTINGS_KEY, ItemPlan, plan_data

__all__ = ["RolloutCalls", "prove_arm", "prove_block", "prove_cfg", "prove_replicate", "prove_seed",
           "report_of"]


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
def prove_arm(request: pytest.FixtureRequest) -> str:
    """The arm of the running episode (``@prove.rollout(arms=[...])``; docs/arms.md)."""
    plan = _plan_of(request)
    if not plan.arm:
        raise pytest.UsageError(
            f"{request.node.nodeid}: prove_arm names the arm of a rollout that declares arms, "
            "and this one declares none; add arms=[...] to @prove.rollout, or drop prove_arm")
    return plan.arm


@pytest.fixture
def prove_cfg(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The condition of the running episode, as a dict of axis values."""
    return dict(_plan_of(request).condition)


# ---------------------------------------------------------------------------
# running


#: Each rollout function's argument names, for as long as the function lives: a cache that
#: held the function itself (``functools.cache``) kept every session's test modules alive in a
#: process that runs sessions one after another (pytester, ``pytest.main`` in a tool, an IDE),
#: and through each module's loader that session's whole configuration, items and reports.
_ARGNAMES: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _argnames(function: Any) -> tuple[str, ...]:
    """The arguments a rollout test takes by name (read once per function, not per item)."""
    try:
        return _ARGNAMES[function]
    except (KeyError, TypeError):  # TypeError: a callable that takes no weak reference
        pass
    names = tuple(n for n, p in inspect.signature(function).parameters.items()
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    with contextlib.suppress(TypeError):
        _ARGNAMES[function] = names
    return names


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
        if plan.arm and "prove_arm" in names:
            funcargs["prove_arm"] = plan.arm
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
        if is_async and loop is None and pyfuncitem.funcargs.get("anyio_backend"):
            with contextlib.ExitStack() as stack:
                loop = _anyio_loop(pyfuncitem, stack)
                execute_rollout(pyfuncitem, call, is_async=is_async, loop=loop)
            return True
        execute_rollout(pyfuncitem, call, is_async=is_async, loop=loop)  # no stack an item
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
    if original is None or inspect.iscoroutinefunction(function) \
            or not inspect.iscoroutinefunction(original):
        return function, None
    cells = dict(zip(function.__code__.co_freevars,
                     (c.cell_contents for c in function.__closure__ or ()), strict=False))
    runner, context = cells.get("runner"), cells.get("context")
    if runner is None or not callable(getattr(runner, "run", None)):
        return original, None
    return original, lambda coroutine: runner.run(coroutine, context=context)


# ---------------------------------------------------------------------------
# the report


def report_of(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """The ``pytest_runtest_makereport`` wrapper of a rollout item: its report carries the
    episodes it ran (call), and the replicates it is about to run, the plan and the rollout's
    declaration (setup) to the controller (see :mod:`pytest_prove.wire`)."""
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
        stash = item.stash
        results = stash.get(RESULTS_KEY, None)
        if results is None:
            results = []
        else:
            del stash[RESULTS_KEY]
        wire.attach(report, episodes=results)
        try:  # noqa: SIM105 - contextlib.suppress costs three calls an item
            del stash[IDENTITIES_KEY]  # worked out again if the item runs again
        except KeyError:
            pass
    elif report.when == "teardown":
        window = item.config.stash.get(WINDOW_KEY, None)
        ahead = [] if window is None else window.drain(item)
        if ahead:
            wire.attach(report, episodes=ahead)
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
