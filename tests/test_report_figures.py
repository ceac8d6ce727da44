"""The HTML report's pictures in headless Chromium: the forest plot, the step curves and the
cost bars, each read back from the SVG geometry and checked against what the commands
(``diff``, ``where``, ``cost``) print as JSON.

One project serves the whole module (the runs are made once), and one browser every test
of the process (the ``chromium`` fixture, tests/conftest.py); see tests/test_report_html.py
for the Chromium set-up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_prove.cli import main
from pytest_prove.report.drilldown import where_document
from pytest_prove.report.html import render_html
from pytest_prove.review import review
from pytest_prove.review.figures import figures_of
from pytest_prove.review.steps import where as where_of
from pytest_prove.store import Store

from .conftest import INNER_ADDOPTS, needs_chromium

# Skipped without Chromium outside CI; in CI a failure (tests/conftest.py).
pytestmark = needs_chromium

#: Two axes (ticket x tone), steps and token usage recorded; with WORSE=1 refund/terse fails
#: far more often and every condition switches to another model (terse ones add a judge).
AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    WORSE = os.environ.get("WORSE") == "1"


    @prove.rollout(replicates=24, outcomes=["resolved", "unresolved", "timeout"],
                   failures=["unresolved", "timeout"], successes=["resolved"],
                   t_unit="steps", id="bot")
    @pytest.mark.parametrize("tone", ["kind", "terse"])
    @pytest.mark.parametrize("ticket", ["refund", "password", "shipping"])
    def test_bot(ticket, tone, prove_seed):
        rng = random.Random(prove_seed)
        fail = 0.85 if (WORSE and ticket == "refund" and tone == "terse") else 0.15
        draw = rng.random()
        steps = rng.randint(1, 8)
        for _ in range(steps):
            with prove.step("lookup"):
                pass
        with prove.step("reply"):
            pass
        prove.usage("model-b" if WORSE else "model-a",
                    input=(200 if WORSE else 300) * steps + (100 if tone == "kind" else 0),
                    output=40 * steps)
        if WORSE and tone == "terse":
            prove.usage("judge", input=50, output=5)
        if draw < fail:
            outcome = "unresolved"
        elif steps >= 7:
            outcome = "timeout"
        else:
            outcome = "resolved"
        return prove.Episode(outcome, meta={"case_id": ticket + "/" + tone})
    """
)

INI = textwrap.dedent(
    """
    [pytest]
    prove_allow_underpowered = true
    prove_prices =
        model-a = 1.00 4.00
        model-b = 0.50 2.00
        judge = 0.10 0.10
    """
)


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = root / ".prove"
        self.page = root / "report.html"

    def cli(self, *argv: str, expect: int = 0) -> dict[str, Any]:
        """A command's --json document, run from the project (where its prices are)."""
        buffer = io.StringIO()
        with contextlib.chdir(self.root), contextlib.redirect_stdout(buffer):
            assert main(["--json", "--store", str(self.store), *argv]) == expect
        document: dict[str, Any] = json.loads(buffer.getvalue())
        return document


def _pytest(root: Path, *argv: str, worse: bool) -> int:
    """A pytest session in this process (two interpreters' start-up would double the time):
    in ``root``, with WORSE set or not, its test module forgotten afterwards."""
    saved = os.environ.pop("WORSE", None)
    if worse:
        os.environ["WORSE"] = "1"
    try:
        with contextlib.chdir(root), contextlib.redirect_stdout(io.StringIO()):
            # INNER_ADDOPTS: the pytest-asyncio warning and hypothesis' plugin left out, as
            # for every inner session (pytester's get them through PYTEST_ADDOPTS).
            return int(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                                    *INNER_ADDOPTS.split(), "-n", "0", f"--rootdir={root}",
                                    str(root), *argv]))
    finally:
        os.environ.pop("WORSE", None)
        if saved is not None:
            os.environ["WORSE"] = saved
        sys.modules.pop("test_bot", None)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    root = tmp_path_factory.mktemp("figures")
    (root / "pytest.ini").write_text(INI)
    (root / "test_bot.py").write_text(AGENT)
    # A fixed salt: WORSE takes about 17 of refund/terse's 24 twins apart (0.15 -> 0.85, all
    # one way); the gate needs 8 (mid-p 0.5^8 under Holm's 0.05/12), and on a new salt 7 or
    # fewer came 4.4e-5 of the time. This salt takes 18 apart.
    assert _pytest(root, "--prove-save-baseline=base", "--prove-salt=figures",
                   worse=False) == 0
    assert _pytest(root, "--prove-baseline=base", "--prove-name=worse", worse=True) == 1
    found = Project(root)
    found.cli("report", "baseline:base", "worse", "--out", str(found.page), "--x", "tone",
              "--y", "ticket")
    assert found.cli("check", "baseline:base", "worse", expect=4)["verdict"] == "worse"
    return found


def _open(chromium: Any, path: Path, scheme: str = "light") -> tuple[Any, list[str]]:
    """A page on ``path`` that records every request leaving it and every script error."""
    page = chromium.new_page(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    trouble: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(("file://", "data:", "about:"))
            else trouble.append(f"request {r.url}"))
    page.on("pageerror", lambda exc: trouble.append(f"error {exc}"))
    page.goto(path.as_uri())
    return page, trouble


class Opened:
    """The module's report, each colour scheme opened once (a page costs a few tenths of a
    second to open and load) and shared by the tests that only read it; a test that presses
    keys or clicks opens one of its own.  Each page's ``trouble`` is all it has had."""

    def __init__(self, chromium: Any, path: Path) -> None:
        self.chromium, self.path = chromium, path
        self.pages: dict[str, tuple[Any, list[str]]] = {}

    def __call__(self, scheme: str = "light") -> tuple[Any, list[str]]:
        if scheme not in self.pages:
            self.pages[scheme] = _open(self.chromium, self.path, scheme)
        return self.pages[scheme]


@pytest.fixture(scope="module")
def report(project: Project, chromium: Any) -> Iterator[Opened]:
    opened = Opened(chromium, project.page)
    try:
        yield opened
    finally:
        for page, _ in opened.pages.values():
            page.close()


#: Each tick's (x, value) and the geometry of every mark of an SVG, read in the page.
READ_FOREST = """svg => ({
  ticks: Array.from(svg.querySelectorAll('.axis .tick')).map(t => [
    Number(t.querySelector('line').getAttribute('x1')), t.querySelector('text').textContent]),
  rows: Array.from(svg.querySelectorAll('g.fr')).map(g => {
    const x = (sel, a) => {
      const e = g.querySelector(sel); return e ? Number(e.getAttribute(a)) : null; };
    return {i: Number(g.dataset.i), lo: x('line.ci', 'x1'), hi: x('line.ci', 'x2'),
            point: x('circle.pt', 'cx'), rise: x('line.rise', 'x1'), fall: x('line.fall', 'x1'),
            counted: g.classList.contains('counted'), diamond: !!g.querySelector('path.cm')};
  }),
  margin: (() => { const m = svg.querySelector('.margin line');
                   return m ? Number(m.getAttribute('x1')) : null; })(),
})"""


def _inverse(ticks: list[list[Any]]) -> Any:
    """The value at an x, from the axis's ticks (checked to be one straight line)."""
    points = [(float(x), float(str(text).replace("$", "").replace(",", ""))) for x, text in ticks]
    (x0, v0), (x1, v1) = points[0], points[-1]
    slope = (v1 - v0) / (x1 - x0)
    for x, v in points:
        # Coordinates are written to 0.01 of a unit.
        assert v0 + (x - x0) * slope == pytest.approx(v, abs=0.01 * abs(slope))

    def value(x: float) -> float:
        return v0 + (x - x0) * slope

    value.pixel = abs(slope)  # type: ignore[attr-defined]  # the value of one unit
    return value


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_forest_plot_draws_every_row_where_its_numbers_say(project: Project,
                                                           report: Opened) -> None:
    rows = project.cli("diff", "baseline:base", "worse")["comparison"]["rows"]
    page, trouble = report()
    svgs = page.locator("svg.forest-svg")
    events = list(dict.fromkeys(r["event"] for r in rows))
    assert svgs.count() == len(events) == 3
    orders: list[list[str]] = []
    for k, event in enumerate(events):
        svg = svgs.nth(k)
        assert svg.get_attribute("data-event") == event
        drawn = svg.evaluate(READ_FOREST)
        mine = {i for i, r in enumerate(rows) if r["event"] == event}
        # One mark per row of the event, each row once.
        assert sorted(m["i"] for m in drawn["rows"]) == sorted(mine)
        value = _inverse(drawn["ticks"])
        for mark in drawn["rows"]:
            row = rows[mark["i"]]
            assert value(mark["lo"]) == pytest.approx(row["interval"]["low"], abs=1e-3)
            assert value(mark["hi"]) == pytest.approx(row["interval"]["high"], abs=1e-3)
            assert value(mark["point"]) == pytest.approx(row["change"], abs=1e-3)
            for way, sign in (("rise", 1), ("fall", -1)):
                limit = row[way]["value"]
                if limit is None:
                    assert mark[way] is None
                else:
                    assert value(mark[way]) == pytest.approx(sign * limit, abs=1e-3)
            # Counted rows, and only those, carry the diamond.
            assert mark["counted"] == mark["diamond"] == row["counted"]
        # In the grid's order, one for every event: a condition is at the same height
        # in each plot (tests/test_polish.py checks the order against the grid's).
        orders.append([rows[m["i"]]["condition"] for m in drawn["rows"]])
    assert all(order == orders[0] for order in orders)
    counted = [i for i, r in enumerate(rows) if r["counted"]]
    assert counted, "the worse run should have a counted row"
    assert page.locator("g.fr.counted").count() == len(counted)
    # Screen readers: every figure is an image with a title and a description; the
    # legend's swatches (a stretch of each curve) are hidden from them.
    assert page.locator("svg[aria-hidden=true]").count() == page.locator(
        "svg.sw-line").count()
    for svg in page.locator("svg:not([aria-hidden=true])").all():
        assert svg.get_attribute("role") == "img"
        ids = (svg.get_attribute("aria-labelledby") or "").split()
        assert len(ids) == 2
        assert all((page.locator(f"[id='{i}']").text_content() or "").strip() for i in ids)
    assert trouble == []


def _selected(page: Any) -> dict[str, Any]:
    """The first event's selected cell and mark (one each), its focusable cell and its
    details' condition: read in one call (a locator's call each was five round trips to
    the browser, after every key)."""
    found = dict(page.evaluate("""() => {
        const s = document.querySelector('section.event');
        const cells = s.querySelectorAll('td.cell.sel'), marks = s.querySelectorAll('g.fr.sel');
        const focusable = s.querySelector('td.cell[tabindex="0"]');
        const details = s.querySelectorAll('.details dd[data-field=condition]');
        return {cells: cells.length, marks: marks.length,
                cell: cells.length ? cells[0].getAttribute('data-i') : null,
                mark: marks.length ? marks[0].getAttribute('data-i') : null,
                focusable: focusable ? focusable.getAttribute('data-i') : null,
                said: details.length, details: details.length ? details[0].innerText : null};
      }"""))
    # One of each (the details' one as a locator's inner_text() asked: it refuses two).
    assert found.pop("cells") == found.pop("marks") == found.pop("said") == 1
    return found


def test_arrow_keys_move_one_selection_in_grid_and_plot(project: Project,
                                                        chromium: Any) -> None:
    page, trouble = _open(chromium, project.page)
    try:
        section = page.locator("section.event").first
        # In the grid: the plot follows.
        section.locator("td.cell[data-i]").first.focus()
        first = _selected(page)
        assert first["cell"] == first["mark"] == first["focusable"]
        page.keyboard.press("ArrowRight")
        right = _selected(page)
        assert right["cell"] == right["mark"] != first["cell"]
        assert right["details"] == "ticket=refund tone=terse"
        page.keyboard.press("ArrowDown")
        down = _selected(page)
        assert down["cell"] == down["mark"] and down["details"] == "ticket=password tone=terse"
        # In the plot: down the grid's order; the grid follows, and Tab would come
        # back to the same cell.
        box = section.locator(".forest-box")
        box.focus()
        order = [g.get_attribute("data-i") for g in box.locator("g.fr").all()]
        at = order.index(down["mark"])
        page.keyboard.press("ArrowDown")
        moved = _selected(page)
        assert moved["mark"] == order[at + 1] == moved["cell"] == moved["focusable"]
        page.keyboard.press("Home")
        home = _selected(page)
        assert home["mark"] == order[0] == home["cell"]
        page.keyboard.press("ArrowUp")  # stops at the top
        assert _selected(page)["mark"] == order[0]
        page.keyboard.press("End")
        assert _selected(page)["cell"] == order[-1]
        # A click on a line selects it too.
        box.locator("g.fr").nth(1).click()
        assert _selected(page)["cell"] == order[1]
        assert trouble == []
    finally:
        page.close()


def test_margin_is_drawn_toward_worse(project: Project, chromium: Any) -> None:
    """The margin of a comparison asked with one (--prove-margin) is a reference line at +D
    for a failure and -D for a success."""
    done = review(*(Store(project.store).open(n) for n in ("baseline:base", "worse")),
                  events=None, q=0.05, max_mde=0.2, fail_on={"worse"}, margin=0.07)
    path = project.root / "margin.html"
    path.write_text(render_html(done))
    page, trouble = _open(chromium, path)
    try:
        for svg in page.locator("svg.forest-svg").all():
            drawn = svg.evaluate(READ_FOREST)
            want = -0.07 if svg.get_attribute("data-event") == "resolved" else 0.07
            assert _inverse(drawn["ticks"])(drawn["margin"]) == pytest.approx(want, abs=1e-3)
        assert page.locator("svg .margin").count() == 3 and trouble == []
    finally:
        page.close()
    # Without a margin (the report today), no margin line.
    assert 'class="margin"' not in project.page.read_text()


READ_STEPS = """svg => ({
  x: Array.from(svg.querySelectorAll('.axis.x .tick')).map(t => [
    Number(t.querySelector('line').getAttribute('x1')), t.querySelector('text').textContent]),
  y: Array.from(svg.querySelectorAll('.axis.y .tick')).map(t => [
    Number(t.querySelector('line').getAttribute('y1')), t.querySelector('text').textContent]),
  curves: Object.fromEntries(Array.from(svg.querySelectorAll('path.cv')).map(p => [
    p.dataset.run, p.getAttribute('d')])),
})"""


def _share_at(path: str, at: Any) -> dict[int, float]:
    """A step path read back: the share it holds from each step on (the last vertex drawn
    at that step's x)."""
    x = y = 0.0
    held: dict[float, float] = {}
    for command, number in re.findall(r"([MHVL])([-\d. ]+)", path):
        parts = [float(p) for p in number.split()]
        if command == "M":
            x, y = parts
        elif command == "H":
            x = parts[0]
        elif command == "V":
            y = parts[0]
        held[round(x, 2)] = y
    return {round(at["x"](px)): at["y"](py) for px, py in held.items()}


def _check_curves(svg: Any, documents: dict[str, dict[str, Any]]) -> None:
    drawn = svg.evaluate(READ_STEPS)
    at = {"x": _inverse(drawn["x"]), "y": _inverse(drawn["y"])}
    assert set(drawn["curves"]) == set(documents)
    for run, document in documents.items():
        shares = _share_at(drawn["curves"][run], at)
        incidence = document["incidence"]
        failed = next(c for c in incidence["curves"] if c["name"] == "failed")
        assert len(incidence["steps"]) == len(failed["incidence"]) > 1
        for step, share in zip(incidence["steps"], failed["incidence"], strict=True):
            assert shares[step] == pytest.approx(share, abs=2e-3), (run, step)


def test_step_curves_match_where_at_every_step(project: Project, report: Opened) -> None:
    page, trouble = report()
    sections = page.locator("section.steps")
    assert [s.get_attribute("data-event") for s in sections.all()] == ["unresolved",
                                                                        "timeout"]
    for section in sections.all():
        event = section.get_attribute("data-event")
        where = {run: project.cli("where", run, "--event", event)
                 for run in ("baseline:base", "worse")}
        _check_curves(section.locator("figure.pooled svg.steps-svg"), where)
        # Beside them: the log-rank result `compare` prints.
        said = project.cli("compare", "baseline:base", "worse", "--event", event)
        beside = section.locator(".logrank").text_content() or ""
        assert beside.startswith(said["word"])
        assert f"chi2 = {said['logrank']['statistic']:.3f}" in beside
        # Per condition: where on that condition's episodes alone.
        smalls = section.locator("figure.small")
        assert smalls.count() == 6
        store = Store(project.store)
        for small in smalls.all()[:2]:
            condition = small.get_attribute("data-condition")
            ticket, tone = (p.split("=")[1] for p in condition.split(" "))
            documents = {}
            for run in ("baseline:base", "worse"):
                whole = store.open(run)
                alone = dataclasses.replace(whole, episodes=tuple(
                    r for r in whole.episodes
                    if r["condition"] == {"ticket": ticket, "tone": tone}))
                documents[run] = where_document(where_of(alone, event))
            _check_curves(small.locator("svg"), documents)
    # The worst condition is drawn first.
    first = page.locator("section.steps").first.locator("figure.small").first
    assert first.get_attribute("data-condition") == "ticket=refund tone=terse"
    assert trouble == []


READ_BARS = """svg => ({
  ticks: Array.from(svg.querySelectorAll('.axis .tick')).map(t => [
    Number(t.querySelector('line').getAttribute('x1')), t.querySelector('text').textContent]),
  groups: Array.from(svg.querySelectorAll('g.cg')).map(g => ({
    condition: g.dataset.condition,
    ratio: (g.querySelector('.ratio') || {}).textContent || null,
    bars: Array.from(g.querySelectorAll('g.bar')).map(b => ({
      run: b.dataset.run,
      segments: Array.from(b.querySelectorAll('rect.seg')).map(r => [r.dataset.model,
        Number(r.getAttribute('x')), Number(r.getAttribute('width'))])})),
  })),
})"""


def test_cost_bars_match_cost(project: Project, report: Opened) -> None:
    said = project.cli("cost", "baseline:base", "worse")
    page, trouble = report()
    head = page.locator("section.cost p").all_text_contents()
    assert head[0].startswith(f"'worse' uses {said['median_ratio']:.2f}x the tokens")
    for metric in ("tokens", "price"):
        drawn = page.locator(f"svg.cost-svg[data-metric={metric}]").evaluate(READ_BARS)
        value = _inverse(drawn["ticks"])
        assert len(drawn["groups"]) == 6
        for group in drawn["groups"]:
            per_run = {}
            for bar in group["bars"]:
                document = next(r for r in said["runs"] if r["run"] == bar["run"])
                condition = next(c for c in document["conditions"]
                                 if c["condition"] == group["condition"])
                n = condition["episodes"]
                models = {m["model"]: m for m in condition["models"]}
                assert [s[0] for s in bar["segments"]] == sorted(models)
                for model, x, width in bar["segments"]:
                    m = models[model]
                    want = ((m["input"] + m["output"]) / n if metric == "tokens"
                            else m["price"] / n)
                    # Both ends are written to 0.01 of a unit.
                    assert value(x + width) - value(x) == pytest.approx(
                        want, rel=1e-3, abs=0.02 * value.pixel)
                assert value(bar["segments"][0][1]) == pytest.approx(0, abs=1e-9)
                total = ((condition["input"] + condition["output"]) / n
                         if metric == "tokens" else condition["price"] / n)
                end = bar["segments"][-1][1] + bar["segments"][-1][2]
                assert value(end) == pytest.approx(total, rel=1e-3,
                                                   abs=0.01 * len(models) * value.pixel)
                per_run[bar["run"]] = total
            assert group["ratio"] == f"×{per_run['worse'] / per_run['baseline:base']:.2f}"
    assert trouble == []


def test_dark_scheme_and_nothing_loaded(project: Project, report: Opened) -> None:
    html = project.page.read_text()
    assert ('content="default-src \'none\'; style-src \'unsafe-inline\'; script-src '
            "'unsafe-inline'\"") in html
    colours = {}
    for scheme in ("light", "dark"):
        page, trouble = report(scheme)
        colours[scheme] = page.evaluate(
            "[getComputedStyle(document.body).backgroundColor,"
            " getComputedStyle(document.querySelector('path.cv.after')).stroke,"
            " getComputedStyle(document.querySelector('svg text')).fill]")
        assert trouble == []
    assert colours["light"][0] == "rgb(255, 255, 255)"
    assert all(a != b for a, b in zip(colours["light"], colours["dark"], strict=True))


READ_STROKES = """() => Array.from(document.querySelectorAll('section.steps figure.pooled')).map(
  figure => Object.fromEntries(['before', 'after'].map(name => {
    const style = e => { const s = getComputedStyle(e);
      return [s.stroke, s.strokeDasharray, s.strokeWidth, e.getBoundingClientRect().width]; };
    return [name, {curve: style(figure.querySelector(`svg.steps-svg path.cv.${name}`)),
                   swatch: style(figure.querySelector(`figcaption svg.sw-line path.cv.${name}`))}];
  })))"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_legend_draws_each_run_as_its_curve(report: Opened, scheme: str) -> None:
    """The swatch beside each run's name has its curve's colour, width and dashes (the
    earlier run's was a dashed CSS border 2 px high, which Chromium drew solid)."""
    page, trouble = report(scheme)
    figures = page.evaluate(READ_STROKES)
    assert len(figures) == 2
    for drawn in figures:
        for name, seen in drawn.items():
            assert seen["swatch"][:3] == seen["curve"][:3], (scheme, name)
            assert seen["swatch"][3] > 10  # a stretch long enough to show its dashes
        assert drawn["before"]["curve"][1] not in ("none", "")
        assert drawn["after"]["curve"][1] in ("none", "")
        assert drawn["before"]["curve"][0] != drawn["after"]["curve"][0]
    assert trouble == []


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_a_run_without_steps_is_named_not_refused(project: Project) -> None:
    """When one run recorded no steps, its curve is missing and the note says which run,
    rather than compare's refusal (the runs 'share no condition'); the cost stays."""
    store = Store(project.store)
    before, after = store.open("baseline:base"), store.open("worse")
    bare = dataclasses.replace(before, episodes=tuple(
        {k: v for k, v in r.items() if k not in ("steps", "step_count", "last_step", "t")}
        for r in before.episodes))
    done = review(bare, after, events=None, q=0.05, max_mde=0.2, fail_on={"worse"})
    found = figures_of(done, project.root)
    assert [f.event for f in found.steps] == ["unresolved", "timeout"]
    for figure in found.steps:
        assert figure.before is None and figure.after is not None and figure.test is None
        assert figure.note == ("no log-rank test: no episode of 'baseline:base' stopped at a "
                               "recorded step")
    assert found.cost is not None and found.notes == ()
