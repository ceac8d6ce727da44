"""The window of replicates on the pytest side (``--prove-concurrency=K``, K > 1).

An item with K > 1 runs its replicates through the session's one
:class:`~pytest_prove.running.window.Window` (one kept pool of threads, or one kept event
loop), not a block of its own: K replicates are kept in flight at all times.  While pytest
is on an item, the window also starts the replicates of the items ahead of it, in the order
pytest will run them (in one process, ``session.items``; on an xdist worker, the items the
scheduler has given it so far), and each item collects its own when pytest reaches it, so
its report says its own outcome and carries its own episodes.

An item's replicates run ahead only when nothing pytest does at its setup could change
them: a rollout of the sweep-spec kind, or a test function whose arguments are the
``prove_*`` values and its direct parameters alone (no fixture of its own but session
fixtures already made, no marker but ``parametrize`` and ``usefixtures``), with the same K,
no chaos, and the capture of the item pytest is on (or none).  Any other item is still run
through the window when pytest reaches it, and the look ahead stops there.  With
pytest-timeout bounding a test, a debugger, a replay, ``--prove-aa``, chaos, or a rollout
run on pytest-asyncio's or anyio's loop, an item runs its block as before.

What stays exact:

- a replicate started ahead is stored once, with its own item's report; the token cap and a
  sequential look that decides a condition start no more replicates ahead, and an item with
  replicates already started is not skipped: it collects those (they are counted and
  stored) and runs no others;
- when the session stops (``-x``, ``--maxfail``, the token cap, Ctrl-C), what was queued
  ahead never starts; what runs is waited for (async ones are cancelled on Ctrl-C, sync ones
  then left running) and what finished is stored with the stopping item's teardown report,
  each episode naming its own item; the summary says how many;
- under xdist the worksteal scheduler cannot take an item whose replicates started.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterator
from typing import Any, final

import pytest

from ..running.endings import Identity, ReplicateResult
from ..running.window import DONE, QUEUED, RUNNING, Ticket, Window
from .calls import _argnames, _coroutine_of
from .execute import IDENTITIES_KEY, WINDOW_KEY, _chaos_config, identities_of, timeout_of
from .items import RolloutItem
from .sequential import decided_key
from .state import CAPTURE_KEY, PLAN_KEY, SETTINGS_KEY, own

__all__ = ["Windowing", "register"]

#: The plugin's own arguments, whose values come from the replicate's identity.
_PROVE = frozenset({"prove_seed", "prove_replicate", "prove_cfg", "prove_block"})
#: How far the window runs ahead: at most this many times K replicates not yet collected.
HELD = 32
#: An item's own answer to "may it run ahead" (its K, or 0 for never).
_AHEAD_KEY = pytest.StashKey[int]()


def register(config: pytest.Config) -> None:
    """Register the window (called from ``pytest_configure``) unless no item could use it."""
    settings = config.stash[SETTINGS_KEY]
    if settings.replay is not None or settings.builtin_timeout is None or settings.aa:
        # A replay runs one replicate an item, for a debugger; no built-in timeout means a
        # debugger or pytest-timeout, which bound the item, not its replicates; --prove-aa
        # runs each twin after its first (execute._in_turn), which a window would not wait
        # for (and its tickets are told apart by replicate, which twins share).
        return
    own(config, Windowing(config), "prove_window")


@final
class Windowing:
    """The session's window and the items whose tickets it holds (``prove_window``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = config.stash[SETTINGS_KEY]
        self.window = Window((KeyboardInterrupt, pytest.exit.Exception), self._blocked)
        self.tickets: dict[pytest.Item, list[Ticket]] = {}
        self.current: pytest.Item | None = None
        self.interrupted = False
        self.notes: list[str] = []
        self._position: dict[int, int] | None = None
        # Under a token cap the controller counts an episode once its item reports it: the
        # window runs at most one block (K) ahead, so that at most that much is spent beyond
        # what it has counted.
        option = config.option
        capped = (getattr(option, "prove_token_cap", None) is not None
                  or getattr(option, "prove_output_token_cap", None) is not None)
        self.held = 1 if capped else HELD
        self._interactor: Any = None
        config.stash[WINDOW_KEY] = self
        if hasattr(config, "workerinput"):
            self._guard_steal()

    # ---- the item pytest is on

    def run(self, item: pytest.Item, idents: list[Identity], call: Callable[[Identity], Any],
            *, is_async: bool, loop: Callable[[Any], Any] | None, timeout: float | None,
            where: Callable[[Identity], str]) -> list[ReplicateResult] | None:
        """Run ``item``'s replicates in the window and return their results (None: the item
        runs its own block, as without a window)."""
        plan = item.stash[PLAN_KEY]
        size = self.settings.concurrency_for(plan.declaration.concurrency)
        if size <= 1:
            if self.tickets:
                self._forget(item)
            return None
        if (loop is not None or _chaos_config(plan.declaration.chaos) is not None
                or item.get_closest_marker("timeout") is not None):
            # pytest-timeout's signal stops the item's own block, whose replicates it ends
            # as timed out; chaos patches the clients while a block runs.
            self._forget(item)
            return None
        self.current = item
        self.window.size = size
        held = {t.identity.replicate: t for t in self.tickets.pop(item, [])}
        tickets = []
        for ident in idents:
            ticket = held.pop(ident.replicate, None)
            if ticket is None or ticket.state not in (QUEUED, RUNNING, DONE):
                ticket = Ticket(ident, plan.declaration, call, where, is_async=is_async,
                                capture=item.stash.get(CAPTURE_KEY, None), chaos=None,
                                timeout=timeout, owner=item)
            tickets.append(ticket)
        self.window.cancel(held.values())
        self.tickets[item] = tickets
        try:
            self.window.add([t for t in tickets if t.state == QUEUED], first=True)
            # The items ahead are queued now, not only while this item waits: its own
            # replicates may all end before its thread reaches the wait (a loaded machine),
            # and then nothing ran ahead while pytest was busy between items.
            self._topup(item, size)
            return self.window.wait(tickets, topup=lambda: self._topup(item, size))
        finally:
            self.tickets.pop(item, None)
            self.current = None

    def keep_started(self, item: pytest.Item) -> bool:
        """An item about to be skipped: cancel what of it has not started; True (and its
        identities cut to them) when some of it has, so that it collects those."""
        tickets = self.tickets.get(item)
        if not tickets:
            return False
        self.window.cancel(tickets)
        started = [t for t in tickets if t.state in (RUNNING, DONE)]
        if not started:
            del self.tickets[item]
            return False
        self.tickets[item] = started
        item.stash[IDENTITIES_KEY] = [t.identity for t in started]
        return True

    def _forget(self, item: pytest.Item) -> None:
        tickets = self.tickets.pop(item, None)
        if tickets:
            self.window.cancel(tickets)

    def _blocked(self, ticket: Ticket) -> bool:
        """Whether a queued ticket of an item ahead may not start: the token cap is reached,
        or a sequential look decided its condition (read from memory: this runs in the
        window's threads)."""
        if ticket.owner is self.current:
            return False  # the item pytest is on runs its whole block, as without a window
        manager = self.config.pluginmanager
        cap = manager.get_plugin("prove_cap")
        if cap is not None and getattr(cap, "message", None) is not None:
            return True
        skipper = manager.get_plugin("prove_sequential")
        decided: dict[str, str] = getattr(skipper, "decided", None) or {}
        return bool(decided) and decided_key(ticket.identity.rollout,
                                             ticket.identity.condition_key) in decided

    # ---- the items ahead

    def _topup(self, item: pytest.Item, size: int) -> None:
        """Queue the replicates of the items ahead of ``item`` until they hold 32 K
        replicates not yet collected (the bound of the window: one slow replicate lets the
        others run that far ahead, no further; K under a token cap).

        All of them are queued at once, not K at a time: the window starts the next queued
        replicate as one ends, in the thread that ended it, while pytest's own thread is
        busy between items (its reports, xdist's messages).  With K queued, a loaded
        worker's window ran dry each time pytest's thread was slow to come back for more
        (bench/io_bound.py under -n 2)."""
        session = item.session
        if session.shouldstop or session.shouldfail:
            return
        held, limit = 0, self.held * size
        for ahead in self._ahead(item):
            tickets = self.tickets.get(ahead)
            if tickets is None:
                if held >= limit:
                    return
                if not self._may_run_ahead(ahead, item, size):
                    return
                tickets = self._tickets_of(ahead)
                if not tickets:
                    continue
                self.tickets[ahead] = tickets
                self.window.add(tickets)
            held += len(tickets)
            if held >= limit:
                return

    def _ahead(self, item: pytest.Item) -> Iterator[pytest.Item]:
        """The items pytest runs after ``item``, in order, as far as this process knows."""
        items = item.session.items
        interactor = self._worker()
        if interactor is not None:
            indices = [interactor.nextitem_index]
            with interactor.torun.lock() as queue:
                # As far as the window may run ahead (an item holds one replicate or more),
                # not the worker's whole share, read again each time a replicate ends.
                indices.extend(itertools.islice(queue, self.held * self.window.size + 1))
            for index in indices:
                if not isinstance(index, int):
                    return  # xdist's shutdown marker
                yield items[index]
            return
        if self._position is None or len(self._position) != len(items):
            self._position = {id(it): n for n, it in enumerate(items)}
        start = self._position.get(id(item))
        if start is None or start >= len(items) or items[start] is not item:
            return
        for n in range(start + 1, len(items)):
            yield items[n]

    def _may_run_ahead(self, ahead: pytest.Item, current: pytest.Item, size: int) -> bool:
        k = ahead.stash.get(_AHEAD_KEY, None)
        if k is None:
            k = ahead.stash[_AHEAD_KEY] = self._ahead_size(ahead)
        if k != size:
            return False
        plan, now = ahead.stash[PLAN_KEY], current.stash[PLAN_KEY]
        if plan.rollout_id != now.rollout_id:
            manager = self.config.pluginmanager.get_plugin("prove_capture")
            if manager is not None and manager.config_for(plan.declaration) is not None:
                return False  # its capture is switched on at its own setup
        return True

    def _ahead_size(self, item: pytest.Item) -> int:
        """The item's K when its replicates may run before pytest sets it up, else 0."""
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None or _chaos_config(plan.declaration.chaos) is not None:
            return 0
        if any(mark.name not in ("parametrize", "usefixtures")
               for mark in item.iter_markers()):
            return 0
        if not isinstance(item, RolloutItem):
            if not isinstance(item, pytest.Function):
                return 0
            function, loop = _coroutine_of(item.obj)
            if loop is not None:
                return 0
            info = getattr(item, "_fixtureinfo", None)
            defs = getattr(info, "name2fixturedefs", {}) or {}
            params = getattr(getattr(item, "callspec", None), "params", {})
            for name in item.fixturenames:
                if name in _PROVE or name == "request":
                    continue
                found = defs.get(name)
                if not found:
                    return 0
                if name in params:
                    if getattr(found[-1].func, "__name__", "") != "get_direct_param_fixture_func":
                        return 0  # an indirect parameter: a fixture made at its setup
                elif found[-1].scope != "session" or found[-1].cached_result is None:
                    return 0  # a fixture made at the item's setup
            if any(n not in _PROVE and n not in params for n in _argnames(function)):
                return 0
        return self.settings.concurrency_for(plan.declaration.concurrency)

    def _tickets_of(self, item: pytest.Item) -> list[Ticket]:
        plan = item.stash[PLAN_KEY]
        idents = identities_of(item)
        many = len(idents) > 1

        def where(ident: Identity) -> str:
            return f"{item.nodeid} (replicate {ident.replicate})" if many else item.nodeid

        if isinstance(item, RolloutItem):
            fn = item.fn
            condition = dict(plan.condition)

            def call(ident: Identity) -> Any:
                return fn(dict(condition), ident.seed)

            is_async = inspect.iscoroutinefunction(fn)
        else:
            assert isinstance(item, pytest.Function)
            function = _coroutine_of(item.obj)[0]
            params = getattr(getattr(item, "callspec", None), "params", {})
            names = _argnames(function)
            base = {n: params[n] for n in names if n in params and n not in _PROVE}
            block = plan.replicates

            def call(ident: Identity) -> Any:
                kwargs = dict(base)
                for name in names:
                    if name == "prove_seed":
                        kwargs[name] = ident.seed
                    elif name == "prove_replicate":
                        kwargs[name] = ident.replicate
                    elif name == "prove_cfg":
                        kwargs[name] = dict(ident.condition)
                    elif name == "prove_block":
                        kwargs[name] = block
                return function(**kwargs)

            is_async = inspect.iscoroutinefunction(function)
        timeout = timeout_of(item, is_async)
        manager = self.config.pluginmanager.get_plugin("prove_capture")
        capture = None if manager is None else manager.config_for(plan.declaration)
        return [Ticket(ident, plan.declaration, call, where, is_async=is_async,
                       capture=capture, chaos=None, timeout=timeout, owner=item)
                for ident in idents]

    # ---- xdist

    def _worker(self) -> Any:
        if self._interactor is None and hasattr(self.config, "workerinput"):
            self._interactor = next(
                (p for p in self.config.pluginmanager.get_plugins()
                 if type(p).__name__ == "WorkerInteractor" and hasattr(p, "torun")), None)
        return self._interactor

    def _guard_steal(self) -> None:
        """xdist's worksteal takes back queued items all or none: refuse a request naming an
        item whose replicates this worker has started, which would run them twice."""
        interactor = self._worker()
        steal = getattr(interactor, "steal", None)
        if steal is None:
            return
        items_of = self.tickets

        def guarded(indices: Any) -> None:
            items = interactor.session.items
            if any(items[i] in items_of for i in indices):
                interactor.sendevent("unscheduled", indices=[])
                return
            steal(indices)

        interactor.steal = guarded

    # ---- the session stops

    def drain(self, item: pytest.Item) -> list[dict[str, Any]]:
        """When the session stops after ``item``: nothing queued ahead starts; what runs is
        waited for (cancelled, for async ones after Ctrl-C); the records of what finished,
        each naming its own item, for ``item``'s teardown report."""
        session = item.session
        if not self.tickets or not (session.shouldstop or session.shouldfail):
            return []
        tickets = [t for group in self.tickets.values() for t in group]
        self.tickets.clear()
        never = self.window.cancel(tickets, running=self.interrupted)
        self.window.settle(tickets, wait_sync=not self.interrupted)
        records = []
        for ticket in tickets:
            if ticket.state == DONE and ticket.result is not None:
                owner = ticket.owner
                records.append({**ticket.result.record,
                                "item": getattr(owner, "nodeid", item.nodeid)})
        left = sum(t.state == RUNNING for t in tickets)
        lost = sum(t.state == DONE and t.result is None for t in tickets)
        self._note(records, never, left + lost)
        return records

    def _note(self, records: list[dict[str, Any]], never: int, left: int) -> None:
        parts = []
        if records:
            parts.append(f"{len(records)} replicates that ran ahead of items the session did "
                         "not reach finished and are stored")
        if left:
            parts.append(f"{left} still running were left, stored by nobody (--prove-resume "
                         "runs them again)")
        if never:
            parts.append(f"{never} queued ahead never started")
        if parts:
            self.notes.append("the session stopped: " + "; ".join(parts))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        tickets = [t for group in self.tickets.values() for t in group]
        self.tickets.clear()
        never = self.window.cancel(tickets, running=True)
        ran = sum(t.state in (RUNNING, DONE) for t in tickets)
        self.window.close()
        if ran:
            self.notes.append(f"{ran} replicates started ahead of items that did not run were "
                              "not stored (--prove-resume runs them again)")
        elif never:
            self.notes.append(f"{never} replicates queued ahead never started")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.notes:
            terminalreporter.write_line(f"pytest-prove: {line}")
