"""Running an item's replicates and deciding what the item reports.

The rollout's outcome never fails its item.  The item fails when the rollout
raises (its traceback shown as pytest shows any), ``sys.exit()`` and other
BaseExceptions included, or breaks its contract (a message naming the test, the
value and what was expected); it is skipped when every replicate raised
``prove.NoOutcome`` or called ``pytest.skip()`` (stored with no outcome).  A replicate
stopped by the episode timeout fails its item as a timeout does ("Timeout: ..."), and
the sweep goes on.
Ctrl-C (or ``pytest.exit()``) in a block fails the item and stops the session
after it, so that its report still carries the replicates that finished; the
one interrupted is stored by nobody and runs again on ``--prove-resume``.
"""

from __future__ import annotations

import inspect
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pluggy
import pytest

from ..declare.chaos import ChaosConfig
from ..declare.seeds import derive_seed
from ..running.deadline import fresh_threads
from ..running.runner import Identity, ReplicateResult, Stopped, run_block
from .state import CAPTURE_KEY, PLAN_KEY, RESULTS_KEY, SETTINGS_KEY, ItemPlan

if TYPE_CHECKING:
    from .settings import Settings

IDENTITIES_KEY = pytest.StashKey[list[Identity]]()

__all__ = ["IDENTITIES_KEY", "WINDOW_KEY", "BlockInterrupted", "Windowed", "execute_rollout",
           "identities_of", "plain_failure_report", "started_ahead", "timeout_of"]


class Windowed(Protocol):
    """The session's window of replicates (:mod:`.window`), as this module uses it."""

    interrupted: bool

    def run(self, item: pytest.Item, idents: list[Identity], call: Callable[[Identity], Any],
            *, is_async: bool, loop: Callable[[Any], Any] | None, timeout: float | None,
            where: Callable[[Identity], str]) -> list[ReplicateResult] | None: ...

    def keep_started(self, item: pytest.Item) -> bool: ...

    def drain(self, item: pytest.Item) -> list[dict[str, Any]]: ...


#: The session's window, when it has one (set by :mod:`.window`).
WINDOW_KEY = pytest.StashKey[Windowed]()


def started_ahead(item: pytest.Item) -> bool:
    """Whether replicates of ``item`` were started ahead of it by the window: then the item
    runs, collecting those alone, instead of being skipped (by the token cap, or a
    sequential look that decided its condition), so that every episode that ran is stored."""
    window = item.config.stash.get(WINDOW_KEY, None)
    return window is not None and window.keep_started(item)


class BlockInterrupted(Exception):  # noqa: N818 - it says what happened to the item
    """The session was stopped while this item's block ran; the finished replicates
    are stored with its report, and the session ends after it."""


def identities_of(item: pytest.Item) -> list[Identity]:
    """The episodes an item runs, with their seeds in this run (worked out once per item)."""
    found = item.stash.get(IDENTITIES_KEY, None)
    if found is None:
        found = item.stash[IDENTITIES_KEY] = _identities(item)
    return found


def _to_run(plan: ItemPlan, done: frozenset[tuple[str, str, int]]) -> tuple[int, ...]:
    replicates = plan.replicates
    if done:
        # A resumed run's block runs only the replicates that run is missing (an item it
        # has whole is deselected before it runs).
        replicates = tuple(r for r in replicates
                           if (plan.rollout_id, plan.condition_key, r) not in done) or replicates
    return replicates


def _identities(item: pytest.Item) -> list[Identity]:
    plan = item.stash[PLAN_KEY]
    settings = item.config.stash[SETTINGS_KEY]
    salt = settings.salt
    replicates = _to_run(plan, settings.done)
    if settings.aa:  # --prove-aa: each replicate twice, one right after the other
        replicates = tuple(r for r in replicates for _ in range(2))
    return [
        Identity(
            rollout=plan.rollout_id,
            condition=dict(plan.condition),
            condition_key=plan.condition_key,
            replicate=r,
            seed=derive_seed(salt, plan.rollout_id, plan.condition_key, r),
        )
        for r in replicates
    ]


def _chaos_config(chaos: object) -> ChaosConfig | None:
    """The faults a block injects: its declaration's (None with --prove-chaos off, which
    took them out of the plan's declaration)."""
    return chaos if isinstance(chaos, ChaosConfig) else None


def timeout_of(item: pytest.Item, is_async: bool) -> float | None:
    """The episode timeout of ``item``'s replicates, in seconds (None: none)."""
    return _timeout(item, item.stash[PLAN_KEY], item.config.stash[SETTINGS_KEY], is_async)


def _timeout(item: pytest.Item, plan: ItemPlan, settings: Settings,
             is_async: bool) -> float | None:
    # A replay keeps only an explicit --prove-episode-timeout: with one, the rollout runs in
    # another thread, where a debugger cannot stop it.
    # The built-in default is a sync rollout's only (under a timeout an async block runs on a
    # loop of its own, not on its fixtures' loop), and not one pytest-timeout's marker
    # bounds. 0 switches the timeout off on purpose.
    if settings.replay is not None:
        timeout = settings.episode_timeout
    else:
        timeout = next((s for s in (settings.episode_timeout, plan.declaration.timeout,
                                    settings.default_timeout) if s is not None), None)
        if timeout is None and not is_async and settings.builtin_timeout is not None \
                and item.get_closest_marker("timeout") is None:
            timeout = settings.builtin_timeout
    return timeout or None


#: What stops a block (and the session after the item): Ctrl-C and ``pytest.exit()``.
_STOPS = (KeyboardInterrupt, pytest.exit.Exception)


def execute_rollout(item: pytest.Item, call: Callable[[Identity], Any], *,
                    is_async: bool, loop: Callable[[Any], Any] | None = None) -> None:
    """Run the item's block, keep its records for the report, and pass, fail or skip."""
    __tracebackhide__ = True  # a failing item shows the rollout's frames, not these
    stash = item.stash
    plan = stash[PLAN_KEY]
    settings = item.config.stash[SETTINGS_KEY]
    idents = stash.get(IDENTITIES_KEY, None)
    if idents is None:
        idents = stash[IDENTITIES_KEY] = _identities(item)
    many = len(idents) > 1
    nodeid = item.nodeid

    def where(ident: Identity) -> str:
        return f"{nodeid} (replicate {ident.replicate})" if many else nodeid

    timeout = _timeout(item, plan, settings, is_async)
    window = item.config.stash.get(WINDOW_KEY, None)

    def block(idents: list[Identity]) -> list[ReplicateResult]:
        declaration = plan.declaration
        return run_block(idents, declaration, call, where=where, is_async=is_async,
                         capture=stash.get(CAPTURE_KEY, None), stops=_STOPS,
                         timeout=timeout, loop=loop, chaos=_chaos_config(declaration.chaos))

    try:
        if settings.aa and many:
            results = _in_turn(idents, block)
        else:
            found = None if window is None else window.run(
                item, idents, call, is_async=is_async, loop=loop, timeout=timeout,
                where=where)
            results = found if found is not None else block(idents)
    except Stopped as stop:
        if window is not None and isinstance(stop.cause, KeyboardInterrupt):
            window.interrupted = True  # replicates running ahead are not waited for
        if not many:
            raise stop.cause from None
        # pytest makes no report for an item that raises KeyboardInterrupt, so the
        # finished replicates would be lost with it: the item fails instead, carrying
        # them, and the session stops after it (on an xdist worker too).
        item.stash[RESULTS_KEY] = [r.record for r in stop.finished]
        what = type(stop.cause).__name__
        item.session.shouldstop = (f"{what} in {item.nodeid}; its {len(stop.finished)} "
                                   f"finished replicates of {len(idents)} are stored")
        raise BlockInterrupted(
            f"{what}: the session stopped while this block ran; {len(stop.finished)} of its "
            f"{len(idents)} replicates finished and are stored, the others run again with "
            "--prove-resume") from stop.cause
    item.stash[RESULTS_KEY] = [r.record for r in results]
    for r in results:
        # Shown by --junitxml (as properties) and -rA: which seed, and how it ended.
        error = r.record["error"]
        item.user_properties += [
            ("prove_replicate", r.record["replicate"]), ("prove_seed", str(r.record["seed"])),
            ("prove_outcome", r.record["outcome"] if error is None else f"none ({error['kind']})")]
    if not many and results[0].record["error"] is None:
        return  # the common case: one replicate, which ended with an outcome
    for r in results:
        if isinstance(r.exception, pytest.skip.Exception):
            # pytest.skip() in a rollout says what prove.NoOutcome says: this episode has
            # no outcome, and the item is skipped.
            error = r.record["error"]
            r.record["error"] = {"kind": "no_outcome", "type": error["type"],
                                 "message": error["message"]}
            r.no_outcome, r.exception = error["message"] or "skipped", None
    raised = [r.exception for r in results if r.exception is not None]
    broken = [r.contract_error for r in results if r.contract_error is not None]
    broken += [f"Timeout: {where(r_ident)}: {r.timed_out}" for r, r_ident
               in zip(results, idents, strict=True) if r.timed_out is not None]
    if raised:
        if len(raised) == 1:
            raise raised[0]
        # BaseExceptionGroup is an ExceptionGroup when every one is an Exception.
        raise BaseExceptionGroup(f"{len(raised)} of {len(idents)} replicates raised", raised)
    if broken:
        pytest.fail("\n".join(broken), pytrace=False)
    skipped = [r.no_outcome for r in results if r.no_outcome is not None]
    if skipped and len(skipped) == len(results):
        pytest.skip(f"no outcome: {skipped[0]}")


def _in_turn(idents: list[Identity],
             block: Callable[[list[Identity]], list[ReplicateResult]],
             ) -> list[ReplicateResult]:
    """--prove-aa: the first of each replicate's twins (the even places of ``idents``), then
    their twins once every first ended; the results in the order of ``idents``.

    Run as one block, the two ran at once and the one that called the rollout first was
    up to the threads: with kept threads, 1 to 7 of 20 twins of an agent that keeps state
    between episodes were the second call stored as the first (test_twins.py). Each
    replicate starts on a new thread (under the deadline), so that a twin never meets a
    thread its first, or another replicate, ran on: with kept threads an agent that keeps
    state per thread answered its twins differently (9 of 10 at K 1)."""
    firsts, twins = idents[0::2], idents[1::2]
    with fresh_threads():
        done = block(firsts)
        try:
            again = block(twins)
        except Stopped as stop:
            raise Stopped(stop.cause, [*done, *stop.finished]) from None
    return [result for pair in zip(done, again, strict=True) for result in pair]


def plain_failure_report(item: pytest.Item, call: pytest.CallInfo[None],
                         error: Exception) -> pytest.TestReport:
    """The failed report of a rollout item whose failure pytest could not render (``error``
    was raised while it did): the exception as Python prints it, with a line saying why.
    Its first line is the exception, which the short test summary shows."""
    excinfo, when = call.excinfo, call.when
    assert excinfo is not None and when != "collect"
    text = (f"{_plain(excinfo.value)}\n(pytest-prove: pytest could not render this failure: "
            f"{_plain(error)}; Python's rendering follows)\n{_plain_traceback(excinfo.value)}")
    sections = [(f"Captured {key} {stage}", content)
                for stage, key, content in getattr(item, "_report_sections", ())]
    return pytest.TestReport(item.nodeid, item.location, dict.fromkeys(item.keywords, 1),
                             "failed", text, when, sections, call.duration, call.start,
                             call.stop, user_properties=item.user_properties)


def _plain(exc: BaseException) -> str:
    """``Type: message``, whatever its ``__str__`` does."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - a broken __str__ must not lose the report
        return f"{type(exc).__name__} (whose str() raised)"


#: Folders whose frames lead to a rollout's own: pytest's, pluggy's and this package's.
_MACHINERY = tuple(f"{folder}{os.sep}" for folder in (
    Path(inspect.getfile(pytest.Item)).resolve().parent,
    Path(inspect.getfile(pluggy.PluginManager)).resolve().parent,
    Path(__file__).resolve().parent.parent))


def _plain_traceback(exc: BaseException) -> str:
    """The traceback from the first frame of the user's code on, as Python prints it."""
    try:
        tb = exc.__traceback__
        while (tb is not None and tb.tb_next is not None
               and tb.tb_frame.f_code.co_filename.startswith(_MACHINERY)):
            tb = tb.tb_next
        return "".join(traceback.format_exception(type(exc), exc, tb)).rstrip("\n")
    except Exception:  # noqa: BLE001 - as in _plain
        return _plain(exc)
