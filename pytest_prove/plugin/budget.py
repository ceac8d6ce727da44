"""The pytest side of cost: declared prices, the token cap, and the cost lines of a session.

The cap is watched in every process.  The controller sums the tokens of every
episode it stores; once the run reaches the cap it stops the session (and, under
xdist, the scheduler: see :mod:`pytest_prove.plugin.xdist`), so no new episode starts.
Each xdist worker also stops itself once its own episodes reach the cap, which
bounds what a worker spends even before the controller's word reaches it (its watch is
in :mod:`.worker`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

import pytest

from .. import wire
from ..config.values import tokens
from ..declare.prices import PriceError, Prices, find_prices, parse_price_lines
from ..record import add_tokens
from .execute import started_ahead
from .options import option_group
from .state import own

__all__ = ["CapWatch", "TokenCap", "add_options", "price_metrics", "prices_of", "token_cap_of"]


def add_options(parser: pytest.Parser) -> None:
    group = option_group(parser, "running")
    group.addoption("--prove-token-cap", metavar="N", type=tokens, default=None,
                    help="stop the run once its episodes used N input tokens: no new episode "
                         "starts, the run is marked capped and the session fails")
    group.addoption("--prove-output-token-cap", metavar="N", type=tokens, default=None,
                    help="the same for output tokens")
    group.addoption("--prove-plan-from", metavar="RUN", default=None,
                    help="with --prove-plan: estimate the sweep's tokens and price from the "
                         "per-condition means of run RUN (a name, a run id or latest)")
    parser.addini("prove_prices", "prices per model: 'MODEL = INPUT OUTPUT' a line, in money "
                  "per million tokens", type="linelist", default=[])


def prices_of(config: pytest.Config) -> Prices:
    """Prices from ini ``prove_prices``, else pyproject ``[tool.pytest-prove.prices]``."""
    lines = [str(x) for x in config.getini("prove_prices")]
    where = f"{config.inipath} prove_prices" if config.inipath else "ini prove_prices"
    try:
        if lines:
            return parse_price_lines(lines, where)
        return find_prices(config.rootpath)
    except PriceError as exc:
        raise pytest.UsageError(str(exc)) from None


@final
@dataclass(frozen=True, slots=True)
class TokenCap:
    """The most input (and output) tokens a run may use."""

    input: int | None = None
    output: int | None = None

    def __bool__(self) -> bool:
        return self.input is not None or self.output is not None

    def reached(self, spent: Mapping[str, int]) -> str | None:
        """A message naming the cap and the tokens spent once either is reached, else None."""
        for kind, cap, option in (("input", self.input, "--prove-token-cap"),
                                  ("output", self.output, "--prove-output-token-cap")):
            if cap is not None and spent.get(kind, 0) >= cap:
                return (f"token cap reached: the run used {spent.get(kind, 0):,} {kind} tokens "
                        f"of the {cap:,} allowed by {option} {cap}")
        return None

    def to_json(self) -> dict[str, int | None]:
        return {"input": self.input, "output": self.output}


def token_cap_of(config: pytest.Config) -> TokenCap:
    return TokenCap(config.option.prove_token_cap, config.option.prove_output_token_cap)


class CapWatch:
    """Stops the session once the tokens spent reach the cap (registered as ``prove_cap``).

    ``spent`` reads the controller's tally of the whole run; on a worker it is None
    and the watch sums the worker's own episodes.  ``on_cap`` tells the xdist
    scheduler to start nothing more.
    """

    def __init__(self, cap: TokenCap, *, spent: Callable[[], Mapping[str, int]] | None = None,
                 on_cap: Callable[[str], None] | None = None,
                 flag: Path | None = None) -> None:
        self.cap = cap
        self.spent = spent
        self.on_cap = on_cap
        # A file the controller creates once the run's total reaches the cap; local (popen)
        # xdist workers look for it before each item (it is not in the store).  Remote
        # workers (--tx socket=, ssh=) are not told of it: the cap's command on xdist's
        # channel reaches every worker (see tell_workers).
        self.flag = flag
        self.own: dict[str, int] = {}
        self.session: pytest.Session | None = None
        self.message: str | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """No episode starts once the cap is reached: the item is skipped, nothing stored."""
        if self.message is None and self.flag is not None and self.flag.exists():
            self.message = self.flag.read_text(encoding="utf-8") or "token cap reached"
        if self.message is not None and not started_ahead(item):
            pytest.skip(self.message)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.flag is not None and self.spent is not None:  # the controller made it
            shutil.rmtree(self.flag.parent, ignore_errors=True)

    def add(self, episodes: Iterable[Mapping[str, Any]]) -> None:
        """Count the tokens of episodes that ended, and stop the session at the cap."""
        if self.message is not None:
            return
        for record in episodes:
            add_tokens(self.own, record)
        spent = self.spent() if self.spent is not None else self.own
        message = self.cap.reached(spent)
        if message is None:
            return
        self.message = message
        if self.session is not None and not self.session.shouldstop:
            self.session.shouldstop = message
        if self.on_cap is not None:
            self.on_cap(message)


def cost_lines(run: Any, prices: Prices) -> list[str]:
    """One line at the end of a session: the tokens the run used and their price."""
    from ..report._format import money, terminal_text
    from ..review.cost import cost_of

    cost = cost_of(run, prices)
    if not cost.models:
        return []
    models = ", ".join(terminal_text(m.model) for m in cost.models)
    price = "" if cost.price is None else f", {money(cost.price)}"
    line = (f"tokens: {cost.input:,} input and {cost.output:,} output in {cost.calls:,} calls "
            f"({models}){price}")
    if cost.unpriced and prices:
        line += f"; no price declared for {', '.join(map(terminal_text, cost.unpriced))}"
    return [line]


@final
@dataclass(slots=True)
class Budget:
    """The controller's cost side: declared prices, the token cap, the flag file workers
    look for, the watch that stops the session, and once the cap is reached, why."""

    prices: Prices
    cap: TokenCap
    flag: Path | None = None
    watch: CapWatch | None = None
    capped: str | None = None


def controller_budget(config: pytest.Config,
                      spent: Callable[[], Mapping[str, int]]) -> Budget:
    """The controller's budget; with a cap, its watch is registered (``spent`` reads the
    run's tally)."""
    budget = Budget(prices=prices_of(config), cap=token_cap_of(config))
    if not budget.cap:
        return budget
    flag = budget.flag = Path(tempfile.mkdtemp(prefix="pytest-prove-cap-")) / "reached"

    def on_cap(message: str) -> None:
        budget.capped = message
        flag.write_text(message, encoding="utf-8")
        # Under xdist the controller's own session does not run items: tell the
        # scheduler to start nothing more and to take back what workers have queued.
        dsession = config.pluginmanager.get_plugin("dsession")
        if dsession is not None:
            if not getattr(dsession, "shouldstop", False):
                dsession.shouldstop = message
            sched = getattr(dsession, "sched", None)
            stop = getattr(sched, "prove_stop", None)
            if stop is not None:
                stop()
            tell_workers(getattr(sched, "nodes", ()), message)

    budget.watch = CapWatch(budget.cap, spent=spent, on_cap=on_cap, flag=flag)
    own(config, budget.watch, "prove_cap")
    return budget


def tell_workers(nodes: Iterable[Any], message: str) -> None:
    """Send every xdist worker the cap's command on xdist's own channel: a worker skips the
    items it still holds, the one it has already taken off its queue included (which the
    scheduler cannot take back).  A worker already gone is left alone."""
    name, kwargs = wire.cap_command(message)
    for node in list(nodes):
        with contextlib.suppress(OSError):  # execnet: the channel is closed
            node.sendcommand(name, **kwargs)


def plan_lines(config: pytest.Config, planned: Mapping[str, tuple[Any, int]]) -> list[str]:
    """With ``--prove-plan-from RUN``: the expected tokens and price of the planned sweep."""
    name = config.option.prove_plan_from
    if name is None:
        return ["expected cost: add --prove-plan-from RUN to estimate tokens and price from "
                "an earlier run"]
    from ..report.cost import format_plan
    from ..review.cost import estimate_plan
    from ..store import Store, StoreError
    from .state import SETTINGS_KEY

    try:
        source = Store(config.stash[SETTINGS_KEY].store).open(name)
    except StoreError as exc:
        raise pytest.UsageError(f"--prove-plan-from: {exc}") from None
    prices = prices_of(config)
    return format_plan(estimate_plan(source, planned, prices), prices)


def price_metrics(records: Iterable[dict[str, Any]], rollouts: Mapping[str, Any],
                  prices: Prices) -> None:
    """Add the built-in metric ``cost`` to each episode whose rollout declares it: its tokens
    priced at the declared prices (none when a model it used has no price: the review then
    says its condition cannot be compared on cost, and why)."""
    from ..declare.metrics import episode_cost

    def price(model: str) -> tuple[float, float] | None:
        found = prices.for_model(model)
        return None if found is None else (found.input_per_million, found.output_per_million)

    for record in records:
        metrics = record.get("metrics")
        if metrics is None or "cost" in metrics:
            continue
        info = rollouts.get(record["rollout"]) or {}
        if "cost" not in ((info.get("declaration") or {}).get("metrics") or {}):
            continue
        cost = episode_cost(record.get("tokens"), price)
        if cost is not None:
            metrics["cost"] = cost
