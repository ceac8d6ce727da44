"""``pytest-prove tui`` (issue 34, item 2): the store in the terminal, driven headless with
Textual's pilot (``App.run_test``) over a store a small project made: a baseline, and a run
paired with it that got worse, whose second condition is written in Textual's markup."""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_prove.cli import main

from .conftest import inline_session
from .test_layers import PACKAGE, imports, modules

textual = pytest.importorskip("textual")

from textual.pilot import Pilot  # noqa: E402
from textual.widgets import DataTable  # noqa: E402

from pytest_prove.cli.tui_app import (  # noqa: E402
    CompareScreen,
    EpisodeScreen,
    FlipsScreen,
    RunsScreen,
    TuiApp,
)
from pytest_prove.store import Store  # noqa: E402

#: Markup Textual would read (bold, and the text "[bold]" gone) if it were given a string.
MARKUP = "[bold]pw"

BOT = textwrap.dedent(
    f"""
    import os
    import random

    import pytest
    import pytest_prove as prove

    RATES = {{"refund": float(os.environ.get("REFUND_FAIL", "0.1")),
              {MARKUP!r}: float(os.environ.get("PW_FAIL", "0.1"))}}


    @prove.rollout(replicates=30, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", {MARKUP!r}])
    def test_bot(ticket, prove_seed):
        rng = random.Random(prove_seed)
        return prove.Episode("unresolved" if rng.random() < RATES[ticket] else "resolved")
    """
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tui")
    (root / "pytest.ini").write_text("[pytest]\nprove_allow_underpowered = true\n")
    (root / "test_bot.py").write_text(BOT)
    # A fixed salt: the screens read "2 conditions got worse", and PW_FAIL 0.1 -> 0.6 takes
    # about 15 of [bold]pw's 30 twins apart (all one way) where the gate needs 5 (mid-p 0.5^5
    # under Holm's 0.05, refund's 0.1 -> 0.8 being the surer); on a new salt 4 or fewer came
    # 3.0e-5 of the time. This salt takes 16 (refund) and 19 ([bold]pw) apart.
    for args, env in ((("--prove-save-baseline", "main", "--prove-name", "before",
                        "--prove-salt=tui"), None),
                      (("--prove-baseline", "main", "--prove-name", "after"),
                       {"REFUND_FAIL": "0.8", "PW_FAIL": "0.6"})):
        code, out = inline_session(root, "-p", "no:xdist", *args, env=env)
        assert code in (0, 1), out  # the worse run fails its gate
    return root / ".prove"


def shown(pilot: Pilot[Any]) -> str:
    """The text on the app's screen, as a terminal would draw it."""
    svg = pilot.app.export_screenshot()
    return html.unescape("".join(re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S))
                         ).replace("\xa0", " ")


def drive(store: Path, steps: Callable[[Pilot[Any]], Awaitable[None]]) -> None:
    async def run() -> None:
        async with TuiApp(Store(store)).run_test(size=(170, 50)) as pilot:
            await pilot.pause()
            await steps(pilot)
    asyncio.run(run())


async def keys(pilot: Pilot[Any], *pressed: str) -> None:
    """Press ``pressed``, then wait until the screen has handled what they queued and drawn
    it.  ``pilot.press`` already waits, after each key, for the app to go idle (twice) and
    for the screen's messages; ``pause(0)`` waits for the screen's messages again (those the
    last key's handlers queued) and refreshes it, without ``pause()``'s wait for the process
    to look idle (20 ms at least, a keypress, and a guess from CPU time)."""
    await pilot.press(*pressed)
    await pilot.pause(0)


def test_the_runs_list_shows_every_run_and_baseline(store: Path) -> None:
    async def steps(pilot: Pilot[Any]) -> None:
        assert isinstance(pilot.app.screen, RunsScreen)
        table = pilot.app.screen.query_one("#runs", DataTable)
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == [
            "before", "after", "baseline:main"]
        text = shown(pilot)
        assert "2 run(s) and 1 baseline(s)" in text
        after = next(line for line in text.splitlines() if line.lstrip().startswith("after "))
        assert "complete" in after and after.rstrip().endswith("main")  # paired with
    drive(store, steps)


@pytest.mark.slow  # a second or more of CPU: four screens drawn (bench/suite_time.py)
def test_compare_drill_down_to_a_flipped_twin_escape_back_and_quit(
        store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(store), "diff", "baseline:main", "after"]) == 0
    printed = capsys.readouterr().out
    worse = next(line for line in printed.splitlines()
                 if line.startswith("ticket=refund") and " worse " in line)

    async def steps(pilot: Pilot[Any]) -> None:
        app = pilot.app
        await keys(pilot, "down", "down", "enter")  # A: baseline:main
        assert "A: baseline:main" in shown(pilot)
        await keys(pilot, "up", "enter")  # B: after
        assert isinstance(app.screen, CompareScreen)
        text = shown(pilot)
        assert "worse: 2 conditions got worse" in text
        assert worse in text.splitlines()  # the worse row, as diff prints it
        table = app.screen.query_one("#conditions", DataTable)
        flipped = {str(table.get_row_at(i)[0]): int(str(table.get_row_at(i)[1]))
                   for i in range(table.row_count)}
        assert set(flipped) == {"ticket=refund", f"ticket={MARKUP}"}
        assert all(n > 0 for n in flipped.values())

        await keys(pilot, "enter")
        assert isinstance(app.screen, FlipsScreen)
        condition = app.screen.condition
        twins = app.screen.query_one("#twins", DataTable)
        assert twins.row_count == flipped[condition]
        item = str(twins.get_row_at(0)[0])
        await keys(pilot, "enter")
        assert isinstance(app.screen, EpisodeScreen)
        text = shown(pilot)
        assert f"twins: {item}, in run 'after' (left)" in text
        assert "first difference:" in text and "--prove-replay=after" in text

        await keys(pilot, "escape")
        assert isinstance(app.screen, FlipsScreen)
        await keys(pilot, "escape", "escape")
        assert isinstance(app.screen, RunsScreen)
        await keys(pilot, "escape")  # the runs are the top: Escape stays there
        assert isinstance(app.screen, RunsScreen)
        await keys(pilot, "q")
        assert not app.is_running and app.return_code == 0
    drive(store, steps)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled example's store: its committed baseline and a run of its terse prompt
    against it (tests/test_serve_browser.py drives serve over the same)."""
    from .test_serve_browser import example_with_a_run

    return example_with_a_run(tmp_path_factory.mktemp("example")) / ".prove"


@pytest.mark.slow  # a sweep of the example, and four screens drawn
def test_the_example_s_runs_list_compare_and_drill_down(example: Path) -> None:
    from pytest_prove.review.flips import flips

    from .test_serve_browser import RUN

    store = Store(example)
    terse, baseline = store.open(RUN), store.open("baseline:current")
    found = flips(baseline, terse)
    by_condition: dict[str, list[Any]] = {}
    for flip in found.flips:
        by_condition.setdefault(flip.condition, []).append(flip)
    assert by_condition  # the terse prompt changed some endings

    shots = os.environ.get("PROVE_SHOTS")  # as tests/test_serve_browser.py: SVGs to look at

    def shot(pilot: Pilot[Any], name: str) -> None:
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            (Path(shots) / f"{name}.svg").write_text(pilot.app.export_screenshot())

    async def steps(pilot: Pilot[Any]) -> None:
        app = pilot.app
        table = app.screen.query_one("#runs", DataTable)
        shot(pilot, "tui-1-runs")
        rows = {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)]
                for i in range(table.row_count)}
        assert list(rows) == [RUN, "baseline:current"]
        assert "complete" in rows[RUN] and str(len(terse.episodes)) in rows[RUN]
        assert str(len(baseline.episodes)) in rows["baseline:current"]
        assert "1 run(s) and 1 baseline(s)" in shown(pilot)
        await keys(pilot, "down", "enter")  # A: the baseline
        await keys(pilot, "up", "enter")  # B: the run
        assert isinstance(app.screen, CompareScreen)
        text = shown(pilot)
        assert "A (before): baseline:current; B (after): terse" in text
        assert "worse: 1 condition got worse (ticket=refund" in text
        assert f"{len(found.flips)} of {found.twins} twins" in text
        shot(pilot, "tui-2-compare")
        conditions = app.screen.query_one("#conditions", DataTable)
        listed = {str(conditions.get_row_at(i)[0]): int(str(conditions.get_row_at(i)[1]))
                  for i in range(conditions.row_count)}
        assert listed == {c: len(f) for c, f in by_condition.items()}
        # Down to refunds (the condition that got worse), and into its twins.
        row = list(listed).index("ticket=refund")
        await keys(pilot, *["down"] * row, "enter")
        assert isinstance(app.screen, FlipsScreen) and app.screen.condition == "ticket=refund"
        twins = app.screen.query_one("#twins", DataTable)
        assert twins.row_count == listed["ticket=refund"]
        shot(pilot, "tui-3-flips")
        first = by_condition["ticket=refund"][0]
        assert str(twins.get_row_at(0)[1]) == str(first.replicate)
        item = str(twins.get_row_at(0)[0])
        await keys(pilot, "enter")
        assert isinstance(app.screen, EpisodeScreen)
        text = shown(pilot)
        assert f"twins: {item}, in run 'terse' (left)" in text
        assert "unresolved" in text and "resolved" in text
        shot(pilot, "tui-4-twin")
        await keys(pilot, "escape", "escape", "escape")
        assert isinstance(app.screen, RunsScreen)
    drive(example, steps)


def test_p_compares_a_run_with_the_baseline_it_is_paired_with(store: Path) -> None:
    async def steps(pilot: Pilot[Any]) -> None:
        await keys(pilot, "p")  # on "before": paired with nothing, said
        assert isinstance(pilot.app.screen, RunsScreen)
        assert "paired with no baseline" in shown(pilot)
        await keys(pilot, "down", "p")
        screen = pilot.app.screen
        assert isinstance(screen, CompareScreen)
        assert (screen.before_name, screen.after_name)[0] == "baseline:main"
        assert "A (before): baseline:main; B (after): after" in shown(pilot)
    drive(store, steps)


def test_markup_from_the_store_is_shown_as_typed(store: Path) -> None:
    async def steps(pilot: Pilot[Any]) -> None:
        await keys(pilot, "down", "p")
        text = shown(pilot)
        # In the comparison (worded by the report) and the conditions table (the app's).
        assert text.count(f"ticket={MARKUP}") >= 3, text
        table = pilot.app.screen.query_one("#conditions", DataTable)
        row = next(i for i in range(table.row_count)
                   if str(table.get_row_at(i)[0]) == f"ticket={MARKUP}")
        await keys(pilot, *["down"] * row, "enter")
        assert isinstance(pilot.app.screen, FlipsScreen)
        assert f"test_bot[{MARKUP}-r0" in shown(pilot)
    drive(store, steps)


def test_r_reads_the_store_again_and_a_damaged_run_says_why(
        store: Path, tmp_path: Path) -> None:
    copy = tmp_path / ".prove"
    shutil.copytree(store, copy)
    later = tmp_path / "later"
    [after] = [d for d in (copy / "runs").iterdir() if d.is_dir()
               if json.loads((d / "manifest.json").read_text())["name"] == "after"]
    after.rename(later)

    async def steps(pilot: Pilot[Any]) -> None:
        table = pilot.app.screen.query_one("#runs", DataTable)
        assert "after" not in [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        later.rename(after)  # a sweep wrote it meanwhile
        (copy / "runs" / "broken").mkdir()
        (copy / "runs" / "broken" / "manifest.json").write_text("{not json")
        await keys(pilot, "r")
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert "after" in names and "broken" in names
        await keys(pilot, *["down"] * names.index("broken"), "enter")
        assert isinstance(pilot.app.screen, RunsScreen)
        text = shown(pilot)
        assert "refused: broken is damaged:" in text and "A: " not in text

    async def run() -> None:
        async with TuiApp(Store(copy)).run_test(size=(170, 50)) as pilot:
            await pilot.pause()
            await steps(pilot)
    asyncio.run(run())


def test_two_runs_that_cannot_be_compared_say_why(store: Path, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    empty = Store(tmp_path / "other")

    async def steps(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, TuiApp)
        app.push_screen(CompareScreen("baseline:main", "no-such-run"))
        await pilot.pause()
        assert "refused: " in shown(pilot) and "no-such-run" in shown(pilot)
        await keys(pilot, "escape")
        assert isinstance(app.screen, RunsScreen)
    drive(store, steps)
    assert not list(empty.runs())  # nothing written by reading


def test_the_command_needs_a_terminal(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(store), "tui"]) == 1  # pytest's stdin is no terminal
    assert "tui needs a terminal" in capsys.readouterr().err
    assert main(["--store", str(store), "tui", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"].startswith("tui is interactive")


def test_without_textual_the_command_says_what_to_install(
        store: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delitem(sys.modules, "pytest_prove.cli.tui_app", raising=False)
    monkeypatch.setitem(sys.modules, "textual", None)  # import textual: ImportError
    monkeypatch.setitem(sys.modules, "textual.app", None)
    assert main(["--store", str(store), "tui"]) == 1
    err = capsys.readouterr().err
    assert "pip install 'pytest-prove[tui]'" in err and "Traceback" not in err


@pytest.mark.slow  # a fresh interpreter (this one has pytest and textual loaded already)
def test_only_the_tui_command_imports_textual_and_never_pytest(store: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        from pytest_prove.cli import main
        assert main(["--store", {str(store)!r}, "runs"]) == 0
        assert "textual" not in sys.modules
        import pytest_prove.cli.tui_app
        bad = sorted(m for m in sys.modules if m == "pytest" or m.startswith("_pytest"))
        assert not bad, bad
        assert "pytest_prove.plugin" not in sys.modules
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_only_the_app_imports_textual() -> None:
    # Every other module of the command line runs without the extra installed.
    known = modules(PACKAGE)
    users = {m for m, path in known.items() for target, _ in imports(m, path, known)
             if target in ("ext:textual", "ext:rich")}
    assert users == {"cli.tui_app"}
