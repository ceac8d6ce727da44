"""The live view of a sweep (``--prove-live``): while rollouts run, a status line now and
then with the episodes stored so far against those planned, per rollout, the errored ones,
the tokens and their price so far, the conditions ``--prove-sequential`` decided, and an
estimate of the time left; and on each ``-v`` line of a rollout item, how its episode ended
(``PASSED [resolved]``).

The line is written by pytest's own terminal reporter (``write_line``: a line of its own, as
pytest's sections are), on the controller, which stores every episode (under xdist the
workers' reports all reach it): at most one line every :data:`INTERVAL` seconds and every
hundredth of the plan, and one at the end of the tests, whose counts are the stored run's.
Between two lines a report costs a comparison of the clock; a line costs a pass over the
run's conditions (not its episodes).

``auto`` (the default) shows it when the output is a terminal and not under ``-q``; ``on``
shows it wherever the output goes (under ``-q`` too); ``off`` never.  Without pytest's
terminal reporter (``-p no:terminal``) nothing is shown.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any, Final, final

import pytest

from .options import option_group

if TYPE_CHECKING:
    from .session import ProveSession

__all__ = ["INTERVAL", "LiveView", "VerboseOutcomes", "add_options", "live_mode", "outcome_tag",
           "register"]

#: The least time between two status lines, in seconds.
INTERVAL: Final = 2.0
MODES: Final = ("auto", "on", "off")
#: At most this many status lines in a session: a line waits for a hundredth of the plan
#: to be done since the last one (an hour's sweep on a terminal: a line every 36 s or so).
STEPS: Final = 100
#: How many rollouts a status line names one by one (the others are summed).
SHOWN_ROLLOUTS: Final = 4


def add_options(parser: pytest.Parser) -> None:
    group = option_group(parser, "running")
    group.addoption("--prove-live", metavar="auto|on|off", default=None,
                    help="a status line while rollouts run (episodes done of planned, "
                         "errors, tokens, price, time left): auto (on a terminal, not with "
                         "-q), on, or off; ini prove_live")
    parser.addini("prove_live", "the live status line: auto, on or off (see --prove-live)",
                  default="auto")


def live_mode(config: pytest.Config) -> str:
    """``auto``, ``on`` or ``off``, from --prove-live, else ini ``prove_live``; any other
    value is a usage error naming where it came from and the values allowed."""
    given = config.getoption("prove_live", None)
    where = "--prove-live"
    if given is None:
        given = config.getini("prove_live")
        where = f"{config.inipath} prove_live" if config.inipath else "ini prove_live"
    value = str(given).strip().lower()
    if value not in MODES:
        raise pytest.UsageError(f"{where} = {given!r}: not a mode of the live view; use "
                                "auto, on or off")
    return value


def register(config: pytest.Config, session: ProveSession) -> None:
    """On the controller: check the mode and register the view, as ``prove_live`` (pytest's
    terminal reporter, registered by its own ``pytest_configure``, is looked for when the
    session starts)."""
    from .state import own

    own(config, LiveView(session, live_mode(config)), "prove_live")
    if config.get_verbosity() > 0:
        own(config, VerboseOutcomes(), "prove_live_outcomes")


def _duration(seconds: float) -> str:
    seconds = max(int(seconds + 0.5), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


@final
class LiveView:
    """The controller's status line and the outcome on ``-v`` lines."""

    def __init__(self, session: ProveSession, mode: str, *,
                 interval: float | None = None) -> None:
        self.session = session
        self.mode = mode
        self.reporter: Any = None
        self.show = False
        self.interval = INTERVAL if interval is None else interval
        self.started = time.monotonic()
        self.next = self.started + self.interval
        self.next_done = 0  # the run's episodes before the next line may be written
        self.price = 0.0
        self.unpriced = False  # an episode used a model without a declared price
        self.any = False  # an episode was stored in this session
        #: When the first episode of the session was stored, and the run's count then: the
        #: rate (hence the time left) is read from there, not from the start, which under
        #: xdist includes the workers' start and collection.
        self.first: tuple[float, int] | None = None

    # ---- what the session stores (ProveSession.on_stored)

    def add(self, stored: list[dict[str, Any]]) -> None:
        self.any = True
        if self.first is None:
            self.first = (time.monotonic(), len(self.session.run.states))
        prices = self.session.budget.prices
        if not prices:
            return
        from ..declare.metrics import episode_cost

        def price(model: str) -> tuple[float, float] | None:
            found = prices.for_model(model)
            return None if found is None else (found.input_per_million,
                                               found.output_per_million)

        for record in stored:
            cost = episode_cost(record.get("tokens"), price)
            if cost is None:
                self.unpriced = True
            else:
                self.price += cost

    # ---- hooks

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = session.config
        reporter = self.reporter = config.pluginmanager.get_plugin("terminalreporter")
        mode = self.mode
        # -p no:terminal: nothing is written to the terminal at all.
        self.show = reporter is not None and (mode == "on" or (
            mode == "auto" and config.get_verbosity() >= 0
            and bool(getattr(reporter, "isatty", False))))
        if self.show:
            self.session.on_stored = self.add
        else:
            config.pluginmanager.unregister(self)  # off: a report costs nothing more

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        self.started = time.monotonic()
        self.next = self.started + self.interval

    @pytest.hookimpl(trylast=True)  # after the session stored the report's episodes
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.show or report.when != "call":
            return
        now = time.monotonic()
        if now < self.next or not self.any:
            return
        done = len(self.session.run.states)
        if done < self.next_done:
            return  # less than a hundredth of the plan since the last line
        self.next = now + self.interval
        planned = self.planned()
        self.next_done = done + max(planned // STEPS, 1)
        if done < planned:  # the last one: the end line says it
            # xdist's dots go on the line as it is; pytest's own start a line for their file.
            dots = hasattr(report, "node") and self.reporter.config.get_verbosity() <= 0
            self.write(self.line(now), ends=dots)

    def planned(self) -> int:
        return sum(len(s) for keys in self.session.run.selected.values() for s in keys.values())

    def planned_by(self) -> dict[str, int]:
        """Each rollout's episodes planned in this session: what pytest's selection kept,
        where a condition ``--prove-sequential`` decided counts what it ran."""
        run, sequential = self.session.run, self.session.sequential
        decided = sequential.is_decided if sequential is not None and sequential.decided \
            else None
        found: dict[str, int] = {}
        for rid, keys in run.selected.items():
            total = 0
            for key, replicates in keys.items():
                if decided is not None and decided(rid, key):
                    total += min(len(replicates), run.states.in_condition(rid, key))
                else:
                    total += len(replicates)
            found[rid] = total
        return found

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.show and self.any:
            self.write(self.line(time.monotonic(), final=True))

    def write(self, line: str, *, ends: bool = True) -> None:
        """A line of its own: pytest ends the line of dots it writes for a file itself
        (``ensure_newline``), not the one xdist's dots are written on.  Unless ``ends``, the
        line is left open as pytest leaves its own (``currentfspath`` set): pytest's next
        line ends it, where a line ended here would leave an empty one below it."""
        reporter = self.reporter
        reporter.ensure_newline()
        if reporter.config.get_terminal_writer().width_of_current_line:
            reporter.write("\n")
        if ends:
            reporter.write_line(line)
        else:
            reporter.write(line, flush=True)
            reporter.currentfspath = -2  # a line is open (as pytest marks xdist's -v lines)

    # ---- the line

    def line(self, now: float, *, final: bool = False) -> str:
        """The status: ``prove: 1,200/2,000 episodes (...), 3 errored, ...``."""
        run = self.session.run
        states = run.states
        done_by = states.by_rollout()
        planned_by = self.planned_by()
        rollouts = sorted(set(done_by) | {r for r, n in planned_by.items() if n})
        done, planned = len(states), sum(planned_by.values())
        parts = [f"{done:,}/{planned:,} episodes"]
        if len(rollouts) > 1 or (rollouts and done_by.get(rollouts[0], 0) != done):
            named = [f"{_label(run.rollouts, rid)} {done_by.get(rid, 0):,}/"
                     f"{planned_by.get(rid, 0):,}" for rid in rollouts[:SHOWN_ROLLOUTS]]
            if len(rollouts) > SHOWN_ROLLOUTS:
                named.append(f"{len(rollouts) - SHOWN_ROLLOUTS} more")
            parts[0] += f" ({', '.join(named)})"
        parts.append(f"{states.count('errored'):,} errored")
        if run.any_tokens:
            spent = run.spent
            tokens = f"tokens {spent['input']:,} in, {spent['output']:,} out"
            if self.session.budget.prices:
                tokens += (" (price unknown: a model has no declared price)" if self.unpriced
                           else f" ${self.price:,.4f}")
            parts.append(tokens)
        sequential = self.session.sequential
        if sequential is not None and sequential.looks is not None:
            conditions = sum(len(keys) for keys in run.selected.values())
            parts.append(f"{len(sequential.decided)} of {conditions} conditions decided")
        if final:
            parts.append(f"in {_duration(now - self.started)}")
        elif self.first is not None and planned > done:
            since, count = self.first
            if done > count and now > since:
                left = (planned - done) * (now - since) / (done - count)
                parts.append(f"about {_duration(left)} left")
        return ("prove: " if not final else "prove (end): ") + ", ".join(parts)


@final
class VerboseOutcomes:
    """Under ``-v``: the word of a rollout item's line says how its episodes ended
    (``PASSED [resolved]``), on that line only (the short summary of ``-r`` keeps pytest's
    word: it asks the same hook, outside the report's own logging)."""

    def __init__(self) -> None:
        self.logging: pytest.TestReport | None = None  # the report being logged

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        self.logging = report
        try:
            return (yield)
        finally:
            self.logging = None

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport,
                                 config: pytest.Config) -> Generator[None, Any, Any]:
        result = yield
        if report is not self.logging or report.when != "call":
            return result
        tag = outcome_tag(report.user_properties)
        if tag is None or not result or len(result) != 3:
            return result
        category, letter, word = result
        if isinstance(word, tuple):
            return category, letter, (f"{word[0]} [{tag}]", word[1])
        if not word:
            return result
        return category, letter, f"{word} [{tag}]"


def _label(rollouts: Mapping[str, Any], rollout_id: str) -> str:
    info = rollouts.get(rollout_id) or {}
    label = info.get("label") if isinstance(info, Mapping) else None
    from ..report._format import terminal_text

    return terminal_text(label or rollout_id, 40)


def outcome_tag(properties: object) -> str | None:
    """How a rollout item's episodes ended, from its report's ``prove_outcome``
    properties: ``resolved``, or for a block ``2 resolved, 1 unresolved``; None when the
    report has none (not a rollout item's)."""
    if not isinstance(properties, list):
        return None
    found: dict[str, int] = {}
    for pair in properties:
        if (isinstance(pair, tuple | list) and len(pair) == 2
                and pair[0] == "prove_outcome"):
            value = str(pair[1])
            found[value] = found.get(value, 0) + 1
    if not found:
        return None
    from ..report._format import terminal_text  # an outcome is the rollout's own text

    if len(found) == 1 and sum(found.values()) == 1:
        return terminal_text(next(iter(found)), 40)
    return ", ".join(f"{n} {terminal_text(value, 40)}" for value, n in found.items())
