"""The Textual app of ``pytest-prove tui``: the store in the terminal, keyboard only.

Four screens, each a step down: the runs (what ``pytest-prove runs`` lists); two runs
compared (what ``pytest-prove diff`` prints, then the conditions whose twins changed
their ending); one condition's flipped twins (what ``pytest-prove flips`` finds); one
episode beside its twin (what ``pytest-prove episode --twin`` prints).  Enter goes down,
Escape goes back, q quits; nothing needs a mouse, so it works over ssh.

Everything shown is computed by :mod:`pytest_prove.review` and worded by
:mod:`pytest_prove.report`, as the commands do; this module only lays it out.  Every text
that came from a rollout or the store is given to Textual as a :class:`rich.text.Text`,
never as a string, which Textual would read as markup (a run named ``[bold]x`` is shown
as typed).  Only ``pytest-prove tui`` imports this module: textual is an optional extra.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ..config.values import gate_fails_on
from ..errors import ProveError
from ..record import Missing
from ..report._format import plain_text, terminal_text
from ..report.episode import twins_lines
from ..report.verdicts import diff_lines
from ..review import review
from ..review.episode import find_episode, first_difference, found_of, twin_of
from ..review.flips import Flip, Flips, ending_of, flips
from ..review.labels import label_of
from ..review.tallies import stored_runs
from ..store import Run, Store

__all__ = ["Reading", "TuiApp"]


@dataclass(frozen=True, slots=True)
class Reading:
    """How a comparison is read: the project's ini values, as every command reads them."""

    q: float = 0.05
    max_mde: float = 0.20
    missing: Missing = "test"
    margin: float | None = None
    fail_on: frozenset[str] | None = None
    max_errored: float | None = None
    allow_underpowered: bool = False


def _text(value: object, limit: int = 80) -> Text:
    """A value from a rollout or the store, as text to show (never markup)."""
    return Text(terminal_text(value, limit))


def _lines(lines: Iterable[str]) -> Text:
    """Lines a renderer worded (already safe for a terminal), as one text (never markup)."""
    return Text("\n".join(lines))


def _ending(record: Any) -> str:
    """An episode's outcome, or how it ended without one (its error's kind and type)."""
    error = ending_of(record)["error"]
    if error is None:
        return str(record.get("outcome"))
    return str(error.get("kind") or "errored") + (f": {error['type']}" if error.get("type")
                                                  else "")


class TuiApp(App[None]):
    """The app over ``store``; :meth:`open` reads a run as :meth:`Store.open` finds it."""

    TITLE = "pytest-prove"
    ENABLE_COMMAND_PALETTE = False  # its commands are Textual's, not the store's
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("escape", "up", "back"),
    ]
    CSS = """
    .head { padding: 0 1; }
    #said { height: auto; max-height: 60%; }
    DataTable { height: 1fr; }
    """

    def __init__(self, store: Store, reading: Reading | None = None) -> None:
        super().__init__()
        self.store = store
        self.reading = reading or Reading()
        self.notes: list[str] = []

    def on_mount(self) -> None:
        self.push_screen(RunsScreen())

    def action_up(self) -> None:
        if len(self.screen_stack) > 2:  # the default screen, then the runs
            self.pop_screen()

    def open(self, name: str) -> Run:
        """The run ``name`` names; what was read with a loss is kept in :attr:`notes`
        (stderr is the terminal the app draws on)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = self.store.open(name)
        self.notes.extend(f"note: {plain_text(w.message)}" for w in caught)
        return run

    def compare(self, before: Run, after: Run) -> list[str]:
        """What ``pytest-prove diff`` prints for the two runs."""
        r = self.reading
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            done = review(before, after, events=None, q=r.q, max_mde=r.max_mde,
                          fail_on=gate_fails_on(r.fail_on, margin=r.margin is not None),
                          missing=r.missing, margin=r.margin,
                          allow_underpowered=r.allow_underpowered
                          and "too-small" not in (r.fail_on or ()),
                          max_errored=r.max_errored)
            done.require_compared()
            return diff_lines(done, verbose=False)

    def flipped(self, before: Run, after: Run) -> Flips:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            return flips(before, after, missing=self.reading.missing)


class _Screen(Screen[None]):
    @property
    def tui(self) -> TuiApp:
        app = self.app
        assert isinstance(app, TuiApp)
        return app


def _table(columns: Sequence[str], table_id: str) -> DataTable[Any]:
    table: DataTable[Any] = DataTable(id=table_id, cursor_type="row", zebra_stripes=True)
    table.add_columns(*columns)
    return table


class RunsScreen(_Screen):
    """Every run and baseline; Enter chooses A (before), then B (after) and compares."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "choose", "choose A, then B", show=True, priority=True),
        Binding("p", "paired", "with its baseline"),
        Binding("c", "clear", "choose again"),
        Binding("r", "reload", "reload"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.chosen: str | None = None
        self.names: dict[str, str] = {}  # row key: the name Store.open takes
        self.paired: dict[str, str] = {}  # row key: its baseline, as Store.open takes it
        self.damaged: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="title", classes="head")
        yield _table(("name", "id", "status", "rollouts", "episodes", "started",
                      "paired with"), "runs")
        yield Static(id="choice", classes="head")
        yield Footer()

    def on_mount(self) -> None:
        self._fill()
        self.query_one("#runs", DataTable).focus()

    def _fill(self) -> None:
        """The table of every run and baseline, read again (a sweep may be writing one)."""
        store = self.tui.store
        runs, baselines = stored_runs(store, lambda _, name: self.tui.open(name))
        table = self.query_one("#runs", DataTable)
        table.clear()
        self.names.clear()
        self.paired.clear()
        self.damaged.clear()
        for row in [*runs, *baselines]:
            key = str(row["name"]) if str(row["name"]).startswith("baseline:") \
                else str(row.get("run_id") or row["name"])
            if key in self.names:
                continue
            self.names[key] = key
            if row.get("damaged"):
                self.damaged[key] = str(row["damaged"])
            if row.get("paired_with"):
                self.paired[key] = "baseline:" + str(row["paired_with"])
            table.add_row(*(_text(row.get(k) if row.get(k) is not None else "-")
                            for k in ("name", "run_id", "status")),
                          *(Text(str(row.get(k) or 0), justify="right")
                            for k in ("rollouts", "episodes")),
                          _text(str(row.get("started") or "")[:19]),
                          _text(row.get("paired_with") or "-"), key=key)
        title = f"{len(runs)} run(s) and {len(baselines)} baseline(s) in {store.root}"
        if not runs and not baselines:
            title = (f"no runs in {store.root} yet; run a sweep, e.g. pytest "
                     "--prove-save-baseline current")
        self.query_one("#title", Static).update(_text(title, 300))
        self._say()

    def action_reload(self) -> None:
        self._fill()

    def _say(self) -> None:
        if self.chosen is None:
            said = ("Enter on a run chooses A (before: a baseline first), then Enter on "
                    "another chooses B and compares them; p compares a run with the "
                    "baseline it is paired with")
        else:
            said = (f"A: {terminal_text(self.chosen)}; now Enter on B (after), or c to "
                    "choose A again")
        self.query_one("#choice", Static).update(Text(said))

    def refused(self, exc: Exception) -> None:
        """Said on the line under the table (until the next key that chooses)."""
        self.query_one("#choice", Static).update(Text(f"refused: {plain_text(exc)}"))

    def _highlighted(self) -> str | None:
        table = self.query_one("#runs", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key in self.damaged:
            self.refused(ProveError(f"{key} is damaged: {self.damaged[key]}"))
            return None
        return key

    def action_choose(self) -> None:
        key = self._highlighted()
        if key is None:
            return
        if self.chosen is None:
            self.chosen = key
            self._say()
            return
        before, self.chosen = self.chosen, None
        self._say()
        self.app.push_screen(CompareScreen(before, key))

    def action_paired(self) -> None:
        key = self._highlighted()
        if key is None:
            return
        if key not in self.paired:
            self.refused(ProveError(f"{key} is paired with no baseline: choose A and B "
                                    "with Enter"))
            return
        self.app.push_screen(CompareScreen(self.paired[key], key))

    def action_clear(self) -> None:
        self.chosen = None
        self._say()


class CompareScreen(_Screen):
    """Two runs compared, as ``diff`` prints it, then the conditions whose twins flipped."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "the condition's flipped twins", priority=True),
    ]

    def __init__(self, before: str, after: str) -> None:
        super().__init__()
        self.before_name, self.after_name = before, after
        self.found: Flips | None = None
        self.by_condition: dict[str, list[Flip]] = {}

    def compose(self) -> ComposeResult:
        yield Static(_text(f"{self.before_name} -> {self.after_name}", 200), id="pair",
                     classes="head")
        with VerticalScroll(id="said"):
            yield Static(id="diff", classes="head")
        yield Static(id="flips-title", classes="head")
        yield _table(("condition", "flipped twins", "A -> B"), "conditions")
        yield Footer()

    def on_mount(self) -> None:
        said = self.query_one("#diff", Static)
        try:
            self.before = self.tui.open(self.before_name)
            self.after = self.tui.open(self.after_name)
            lines = self.tui.compare(self.before, self.after)
        except (ProveError, ValueError) as exc:
            said.update(Text(f"refused: {plain_text(exc)}\nEscape goes back to the runs"))
            self.query_one("#conditions", DataTable).display = False
            return
        said.update(_lines([*lines, *self.tui.notes]))
        self.query_one("#pair", Static).update(_text(
            f"A (before): {label_of(self.before)}; B (after): {label_of(self.after)}", 300))
        title = self.query_one("#flips-title", Static)
        try:
            self.found = self.tui.flipped(self.before, self.after)
        except (ProveError, ValueError) as exc:
            title.update(Text(f"no flipped twins to show: {plain_text(exc)}"))
            return
        for flip in self.found.flips:
            self.by_condition.setdefault(flip.condition, []).append(flip)
        title.update(Text(f"{len(self.found.flips)} of {self.found.twins} twins (same "
                          "seed in both runs) changed their ending; Enter on a condition "
                          "lists them"))
        table = self.query_one("#conditions", DataTable)
        for condition, found in self.by_condition.items():
            changes = Counter(f"{_ending(f.before)} -> {_ending(f.after)}" for f in found)
            table.add_row(_text(condition), Text(str(len(found)), justify="right"),
                          _text(", ".join(f"{n} {what}" for what, n in changes.most_common()),
                                200), key=condition)
        table.focus()

    def action_open(self) -> None:
        table = self.query_one("#conditions", DataTable)
        if self.found is None or table.row_count == 0:
            return
        condition = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if condition is not None:
            self.app.push_screen(FlipsScreen(self.before, self.after, condition,
                                             self.by_condition[condition]))


class FlipsScreen(_Screen):
    """One condition's flipped twins; Enter shows the episode beside its twin."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "the episode beside its twin", priority=True),
    ]

    def __init__(self, before: Run, after: Run, condition: str,
                 found: Sequence[Flip]) -> None:
        super().__init__()
        self.before, self.after, self.condition = before, after, condition
        self.items = {found_of(after, f.after).item: f for f in found}

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{terminal_text(self.condition, 200)}: {len(self.items)} twin(s) "
                          f"whose ending changed from {terminal_text(label_of(self.before))} "
                          f"to {terminal_text(label_of(self.after))}"), classes="head")
        yield _table(("episode (in B)", "replicate", "seed", "A", "B",
                      "event (the run that had it)"), "twins")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#twins", DataTable)
        for item, flip in self.items.items():
            rows = ", ".join(f"{event} ({side})" for event, side in flip.events)
            table.add_row(_text(item, 120), Text(str(flip.replicate)), Text(str(flip.seed)),
                          _text(_ending(flip.before)), _text(_ending(flip.after)),
                          _text(rows, 120), key=item)
        table.focus()

    def action_open(self) -> None:
        table = self.query_one("#twins", DataTable)
        if table.row_count == 0:
            return
        item = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if item is not None:
            self.app.push_screen(EpisodeScreen(self.after, self.before, item))


class EpisodeScreen(_Screen):
    """One episode of ``run`` beside its twin in ``other``, as ``episode --twin`` prints."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("v", "verbose", "every attribute")]

    def __init__(self, run: Run, other: Run, item: str) -> None:
        super().__init__()
        self.run, self.other, self.item = run, other, item
        self.verbose = False

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="episode"):
            yield Static(id="text", classes="head")
        yield Footer()

    def on_mount(self) -> None:
        self._show()
        self.query_one("#episode", VerticalScroll).focus()

    def _show(self) -> None:
        said = self.query_one("#text", Static)
        try:
            found = find_episode(self.run, self.item)
            twin = twin_of(found, self.other)
            apart = first_difference(found.record, twin.record)
            said.update(_lines(twins_lines(found, twin, apart, self.verbose)))
        except (ProveError, ValueError) as exc:
            said.update(Text(f"refused: {plain_text(exc)}"))

    def action_verbose(self) -> None:
        self.verbose = not self.verbose
        self._show()
