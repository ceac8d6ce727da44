"""The HTML report's target grids (issue 32, item 5): per target, a grid of the conditions laid
out as the page's event grids, each cell marked and toned by its row's word (meets, misses,
too small to tell), with the rate and the bound beside the target, and its title and label
saying it in words; on the one-run page and on the comparison's; every value escaped."""

from __future__ import annotations

import contextlib
import fnmatch
import html
import re
import textwrap
from typing import Any

import pytest

from pytest_prove.cli import main

from .conftest import INI, inline_session, needs_chromium

SCRIPT = "\"'><script>window.__pwned = 1</script>"

#: A seeded agent, 40 replicates a condition: refund tickets stay unresolved 80% of the time
#: (misses unresolved<=0.3), password tickets never (meets it), and the third, whose name is
#: an HTML script, 30% of the time (too small to tell at 40 episodes).
AGENT = textwrap.dedent(
    """
    import random

    import pytest
    import pytest_prove as prove

    RATES = {"refund": 0.8, "password": 0.0, "\\"'><script>window.__pwned = 1</script>": 0.3}


    @prove.rollout(replicates=40, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", list(RATES), ids=["refund", "password", "script"])
    def test_agent(ticket, prove_seed):
        rng = random.Random(prove_seed)
        return prove.Episode("unresolved" if rng.random() < RATES[ticket] else "resolved")
    """
)

_CELL = re.compile(r'<td role="gridcell" class="cell target-(\w+)" tabindex="(-?\d)" '
                   r'title="([^"]*)" aria-label="([^"]*)"><span class="ch">([^<]*)</span>'
                   r'<span class="ba">([^<]*)</span><span class="lim">n (\d+)</span></td>')


def _target_cells(page: str) -> list[tuple[str, ...]]:
    """The target grid's cells, in the grid's order: (tone, tabindex, title, label, short
    word, rate and bound, episodes), unescaped."""
    targets = page[page.index('<section class="targets">'):]
    grid = targets[targets.index('<table class="grid"'):targets.index("</table>")]
    return [tuple(html.unescape(part) for part in found) for found in _CELL.findall(grid)]


def _check_page(page: str) -> None:
    assert "<script>window" not in page  # escaped everywhere, in the grid as in the table
    targets = page[page.index('<section class="targets">'):]
    grid = targets[targets.index('<table class="grid"'):targets.index("</table>")]
    # The grid's columns are the ticket axis's values, in the order the sweep declared them.
    assert re.findall(r'<th scope="col">([^<]*)</th>', grid)[1:] == [
        "refund", "password", html.escape(SCRIPT)]
    cells = _target_cells(page)
    assert [c[0] for c in cells] == ["misses", "meets", "undecided"]
    assert [c[4] for c in cells] == ["✗ misses", "✓ meets", "? too small"]
    assert [c[1] for c in cells] == ["0", "-1", "-1"]  # the grid is one Tab stop
    assert [c[6] for c in cells] == ["40", "40", "40"]
    for (_, _, title, label, _, beside, _), name, word in zip(
            cells, ["ticket=refund", "ticket=password", f"ticket={SCRIPT}"],
            ["misses target", "meets target", "too small to tell"], strict=True):
        assert title == label
        assert label.startswith(f"{name}, target unresolved at most 0.3: {word}; rate ")
        # The rate, then the end of its exact bounds that decides the row beside the target
        # (a miss of "at most": the low end, over the target; else the high end), in the cell
        # and in words, the same numbers.
        found = re.fullmatch(r"(0\.\d{3}) \(bound (\d\.\d{3})\) ([<>=]) 0\.3", beside)
        assert found, beside
        estimate, bound, relation = found.groups()
        assert f"rate {estimate} over 40 episodes" in label
        assert f"the {'low' if word == 'misses target' else 'high'} end {bound} " in label
        assert relation == ("<" if float(bound) < 0.3 else ">")
        assert f"{'below' if relation == '<' else 'above'} the target" in label
    misses, meets, undecided = cells
    assert float(meets[5].split()[0]) == 0.0 and meets[5].endswith("< 0.3")
    assert misses[5].endswith("> 0.3") and undecided[5].endswith("> 0.3")
    assert "replicates a condition would decide it" in undecided[3]
    # The table of the target rows stays below the grid.
    assert targets.index("<table>") > targets.index('<table class="grid"')
    assert targets.count("<tr class=\"target-") == 3


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The one-run page and the comparison's (against a baseline of the same agent), of a
    run whose target unresolved<=0.3 one condition misses, one meets and one is too small to
    tell.  Made once for the module's two tests that read them (in this process:
    ``inline_session``)."""
    root = tmp_path_factory.mktemp("targets")
    (root / "pytest.ini").write_text(INI)
    (root / "test_agent.py").write_text(AGENT)
    code, out = inline_session(root, "--prove-salt=fixed", "--prove-save-baseline=main")
    assert code == pytest.ExitCode.OK, out
    code, out = inline_session(root, "--prove-target=unresolved<=0.3", "--prove-salt=fixed",
                               "--prove-report=run.html")
    assert code == pytest.ExitCode.TESTS_FAILED, out  # refund misses its target
    assert any(fnmatch.fnmatch(line, "targets: misses target: 1 row*1 meet, 1 miss, "
                                     "1 too small*") for line in out.splitlines()), out
    with contextlib.chdir(root):
        assert main(["report", "baseline:main", "latest", "--out", "cmp.html"]) == 0
    return str(root / "run.html"), str(root / "cmp.html")


def test_the_target_grid_on_the_one_run_page_and_the_comparisons(
        pages: tuple[str, str]) -> None:
    with open(pages[0], encoding="utf-8") as f:
        page = f.read()
    _check_page(page)
    assert "cell is coloured but a target's (by its word, under Targets)" in page
    with open(pages[1], encoding="utf-8") as f:
        compared = f.read()
    _check_page(compared)
    # The page's own script reads a cell's details by data-i: no target cell has one.
    targets = compared[compared.index('<section class="targets">'):]
    assert "data-i=" not in targets[:targets.index("<table>")]


@needs_chromium
@pytest.mark.slow  # a browser and two inner sessions
def test_the_target_grid_renders_and_the_keyboard_reaches_it(pages: tuple[str, str],
                                                             chromium: Any) -> None:
    """In headless Chromium: the grid shows its three cells with their words, Tab reaches
    its first cell and the arrow keys move along it; the <script> value never runs."""
    from pathlib import Path

    # The suite's Chromium (tests/conftest.py): a Playwright driver and a browser started
    # for this test alone cost about a second.
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    try:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(Path(pages[0]).as_uri())
        cells = page.locator("section.targets table.grid td.cell")
        assert [t.split("\n")[0] for t in cells.all_inner_texts()] == [
            "✗ misses", "✓ meets", "? too small"]
        assert all(cells.nth(i).is_visible() for i in range(3))
        # Tab from the last cell of the event grids above reaches the target grid's first.
        page.locator("main > section.event td.cell[tabindex='0']").last.focus()
        page.keyboard.press("Tab")

        def focused() -> str:
            return str(page.evaluate("document.activeElement.getAttribute('aria-label')"))

        assert focused().startswith("ticket=refund, target unresolved at most 0.3: misses")
        page.keyboard.press("ArrowRight")
        assert focused().startswith("ticket=password, target unresolved at most 0.3: meets")
        page.keyboard.press("End")
        assert focused().startswith(f"ticket={SCRIPT}, target unresolved at most 0.3: too")
        assert page.evaluate("window.__pwned") is None
        assert not errors
    finally:
        page.close()


def _row(condition: str, word: str, estimate: float, low: float, high: float,
         reason: str | None = None) -> Any:
    from pytest_prove.declare.targets import parse_target
    from pytest_prove.review.targets import TargetRow

    return TargetRow("r", "", condition, condition, parse_target("resolved>=0.6"), 50, 0,
                     estimate, low, high, 1.0, 1.0, word, 400, reason)  # type: ignore[arg-type]


def test_the_target_grid_takes_the_pages_axes_and_says_a_row_it_cannot_vouch_for() -> None:
    """The grid lays the conditions out as the page's grids do (``--x``, ``--y``, one grid per
    value of a further axis, declared order), the bound beside a ``>=`` target is the low
    end (the high end for a row shown to miss it), and a row that cannot be vouched for says
    so, in its cell and in words."""
    from pytest_prove.report.html import _target_grids
    from pytest_prove.report.targets import target_html
    from pytest_prove.review.labels import Labels
    from pytest_prove.review.targets import MEETS, MISSES, UNDECIDED, TargetReview

    names = {f"m={m} t={t} k={k}": {"m": m, "t": t, "k": k}
             for k in ("b", "a") for t in ("y", "x") for m in ("p", "q")}
    labels = Labels("before", "after", axes=names,
                    order={"m": ["q", "p"], "t": ["y", "x"], "k": ["b", "a"]})
    words = [MEETS, MISSES, UNDECIDED, UNDECIDED] * 2
    rows = tuple(_row(c, w, 0.5 if w == MISSES else 0.7, 0.65 if w == MEETS else 0.4,
                      0.55 if w == MISSES else 0.8,
                      "2 episodes, fewer than the 4 it needs" if i == 7 else None)
                 for i, (c, w) in enumerate(zip(names, words, strict=True)))
    page = target_html(TargetReview(rows, 0.05, 0.1), labels, _target_grids("m", "t"))
    grids = re.findall(r'<table class="grid".*?</table>', page, flags=re.S)
    assert [re.search(r"<caption>([^<]*)</caption>", g).group(1)  # type: ignore[union-attr]
            for g in grids] == ["k=b", "k=a"]
    for grid, first in zip(grids, ("k=b", "k=a"), strict=True):
        assert re.findall(r'<th scope="col">([^<]*)</th>', grid)[1:] == ["q", "p"]
        assert re.findall(r'<th scope="row">([^<]*)</th>', grid) == ["y", "x"]
        labels_in = [html.unescape(a) for a in re.findall(r'aria-label="([^"]*)"', grid)[1:]]
        assert [a.split(" ")[0] for a in labels_in] == ["m=q", "m=p", "m=q", "m=p"]
        assert all(f"k={first.split('=')[1]}" in a for a in labels_in)
    cells = re.findall(r'class="cell target-(\w+)".*?<span class="ch">([^<]*)</span>'
                       r'<span class="ba">([^<]*)</span>', page)
    by_tone = {tone: (short, html.unescape(beside)) for tone, short, beside in cells}
    assert by_tone["meets"] == ("✓ meets", "0.700 (bound 0.650) > 0.6")
    # a miss of an "at least" target: its high end, under the target
    assert by_tone["misses"] == ("✗ misses", "0.500 (bound 0.550) < 0.6")
    assert by_tone["undecided"][0] == "? too small"
    assert by_tone["unvouched"][0] == "! cannot vouch"
    assert "m=q t=x k=a, target resolved&gt;=0.6: cannot be vouched for: 2 episodes" in page
    assert "the low end 0.650 above the target" in page


def test_a_target_row_the_page_has_no_axes_for_gets_a_cell_of_its_own() -> None:
    """Two rows whose labels the page's names do not know (two rollouts of one short name)
    are never drawn into one cell: each is a condition of its own."""
    from pytest_prove.report.html import _target_grids
    from pytest_prove.report.targets import target_html
    from pytest_prove.review.labels import Labels
    from pytest_prove.review.targets import MEETS, MISSES, TargetReview

    rows = (_row("a · ticket=x", MEETS, 0.9, 0.8, 0.95), _row("b · ticket=x", MISSES, 0.3, 0.2,
                                                                  0.4))
    page = target_html(TargetReview(rows, 0.05, 0.1), Labels("b", "a"), _target_grids(None, None))
    assert re.findall(r"<caption>([^<]*)</caption>", page) == ["condition=a · ticket=x",
                                                                "condition=b · ticket=x"]
    assert re.findall(r'class="cell target-(\w+)"', page) == ["meets", "misses"]
