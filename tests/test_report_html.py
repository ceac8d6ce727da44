"""The HTML report in a real browser: headless Chromium, driven by Playwright.

Debian's ``chromium`` is used (``.ci/run`` installs it; ``playwright install`` cannot download
browsers in CI), with every background network feature off, so that any request the page makes
is the page's own doing; launched once per process, by the ``chromium`` fixture
(tests/conftest.py).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_prove.cli import main

from .conftest import CHROMIUM_ARGS, needs_chromium

#: Chromium's switches, for bench/report_html.py, which launches it itself.
ARGS = CHROMIUM_ARGS

# Skipped without Chromium outside CI; in CI a failure (tests/conftest.py).
pytestmark = needs_chromium

HOSTILE = "<script>window.__pwned = 1</script>"

#: Two axes (ticket x tone); each case's id carries a script tag, as a careless rollout might.
AGENT = textwrap.dedent(
    f"""
    import os
    import random

    import pytest
    import pytest_prove as prove

    WORSE = os.environ.get("WORSE") == "1"


    @prove.rollout(replicates=30, failures=["unresolved"], successes=["resolved"],
                   outcomes=["resolved", "unresolved", "escalated"])
    @pytest.mark.parametrize("tone", ["kind", "terse"])
    @pytest.mark.parametrize("ticket", ["refund", "password", "shipping"])
    def test_agent(ticket, tone, prove_seed):
        rng = random.Random(prove_seed)
        rate = 0.8 if (WORSE and ticket == "refund" and tone == "terse") else 0.1
        outcome = "unresolved" if rng.random() < rate else "resolved"
        return prove.Episode(outcome, meta={{"case_id": ticket + "/" + tone + {HOSTILE!r}}})
    """
)


@pytest.fixture
def page_path(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_agent=AGENT)
    pytester.runpytest("-p", "no:cacheprovider", "--prove-save-baseline", "base")
    monkeypatch.setenv("WORSE", "1")
    pytester.runpytest("-p", "no:cacheprovider", "--prove-baseline", "base",
                       "--prove-name", "worse")
    path = pytester.path / "report.html"
    assert main(["--store", str(pytester.path / ".prove"), "report", "base", "worse",
                 "--out", str(path), "--x", "tone", "--y", "ticket"]) == 0
    return path


def _details(page: Any) -> str:
    return str(page.locator("section.event").first.locator(".details").inner_text())


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_the_page_in_headless_chromium(page_path: Path, chromium: Any) -> None:
    leaving: list[str] = []
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:

        def watch(route: Any) -> None:
            url = route.request.url
            if url.startswith(("file://", "data:", "about:")):
                route.continue_()
            else:
                leaving.append(url)
                route.abort()

        context.route("**/*", watch)
        page = context.new_page()
        page.on("request", lambda r: None if r.url.startswith(("file://", "data:"))
                else leaving.append(r.url))
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(page_path.as_uri())

        # The grid renders: per event, 3 tickets down x 2 tones across.
        sections = page.locator("section.event")
        assert sections.count() == 2
        grid = sections.first.locator("table.grid")
        assert grid.locator("tbody tr").count() == 3
        assert grid.locator("td.cell[data-i]").count() == 6
        assert grid.locator("thead th").all_inner_texts()[1:] == ["kind", "terse"]
        # Colour only where flagged: the worse cell (refund, terse) and nothing else.
        assert grid.locator("td.cell.worse").count() == 1

        # Tickets down as the test declared them (refund, password, shipping), not sorted.
        assert grid.locator("tbody th").all_inner_texts() == ["refund", "password",
                                                               "shipping"]
        # The page opens on the worst cell: focused, its details shown.
        opened = page.evaluate("document.activeElement.getAttribute('data-i')")
        worst = page.locator("td.cell.worse").first
        assert opened is not None and worst.get_attribute("data-i") == opened
        assert "refund/terse" in _details(page) and "unresolved" in _details(page)
        assert "opens on the worst cell: ticket=refund tone=terse, unresolved" in (
            page.locator("#opens-on").inner_text())

        # Keyboard: focus the first cell; arrows move and the details follow.
        first = grid.locator("td.cell[data-i]").first
        first.focus()
        before = _details(page)
        assert "refund/kind" in before
        page.keyboard.press("ArrowRight")
        after_right = _details(page)
        assert after_right != before and "refund/terse" in after_right
        assert page.evaluate("document.activeElement.getAttribute('tabindex')") == "0"
        page.keyboard.press("ArrowDown")
        assert "password/terse" in _details(page)
        page.keyboard.press("ArrowLeft")
        assert "password/kind" in _details(page)
        page.keyboard.press("ArrowLeft")  # stops at the edge
        assert "password/kind" in _details(page)
        # Hover shows a cell too.
        grid.locator("td.cell[data-i]").nth(5).hover()
        assert "shipping/terse" in _details(page)

        # The case's script tag is text, shown, never run.
        assert page.evaluate("window.__pwned") is None
        assert HOSTILE in _details(page)
        assert HOSTILE in page.locator("table.full").inner_text()
        assert not errors

        # A picture of the whole page, to look at, where PROVE_SCREENSHOT says (nothing
        # reads it: one taken every run into tmp_path cost a few tenths of a second).
        shot = os.environ.get("PROVE_SCREENSHOT")
        if shot:
            page.locator("td.cell.worse").first.focus()
            page.screenshot(path=shot, full_page=True)
    finally:
        context.close()
    assert leaving == [], f"the page tried to load {leaving}"


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_one_run_in_headless_chromium(page_path: Path, chromium: Any) -> None:
    """`report RUN` alone: rates with exact intervals, no colour, the declared order, opened
    on the highest failure rate; nothing leaves the page and nothing a rollout wrote runs."""
    path = page_path.parent / "run.html"
    assert main(["--store", str(page_path.parent / ".prove"), "report", "worse", "--out",
                 str(path), "--x", "tone", "--y", "ticket"]) == 0
    leaving: list[str] = []
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.on("request", lambda r: None if r.url.startswith(("file://", "data:"))
                else leaving.append(r.url))
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(path.as_uri())
        grid = page.locator("section.event").first.locator("table.grid")
        assert grid.locator("tbody th").all_inner_texts() == ["refund", "password",
                                                               "shipping"]
        assert grid.locator("thead th").all_inner_texts()[1:] == ["kind", "terse"]
        assert page.locator("td.cell.worse, td.cell.safer, td.cell.flag").count() == 0
        opened = page.evaluate("document.activeElement.getAttribute('data-i')")
        cell = page.locator(f'td.cell[data-i="{opened}"]')
        details = _details(page)
        assert "refund/terse" in details and "unresolved" in details
        assert "Clopper-Pearson exact" in details
        # The opened cell holds the highest unresolved rate of the grid.
        rates = [float(t.split("\n")[0]) for t in
                 grid.locator("td.cell[data-i]").all_inner_texts()]
        assert float(cell.inner_text().split("\n")[0]) == max(rates)
        assert page.evaluate("window.__pwned") is None and HOSTILE in details
        assert not errors
    finally:
        page.close()
    assert leaving == [], f"the page tried to load {leaving}"
