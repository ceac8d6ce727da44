"""The HTML report's metric rows (issue 30): a forest plot of shifts per metric beside the
outcome rows, each row drawn where its numbers say (read back from the SVG's geometry in
headless Chromium), its verdict in words and colour, the detection limit and the margin
marked, and a text alternative; a page of runs without metrics carries none of it.

See tests/test_report_html.py for the Chromium set-up."""

from __future__ import annotations

import dataclasses
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_prove.report.html import render_html
from pytest_prove.report.metric_plot import metric_order, metric_section
from pytest_prove.report.metrics import number
from pytest_prove.review import review
from pytest_prove.review.metrics import MetricReview, MetricRow
from pytest_prove.stats import metric_limit, metric_test
from pytest_prove.store import Store

from .conftest import INI, needs_chromium
from .test_metrics_gate import AGENT
from .test_report_figures import _inverse

MARGINS = {"latency_s": (0.1, True), "judge": (0.5, False)}

#: Each metric plot's ticks and every row's marks, read in the page.
READ_METRIC = """svg => ({
  metric: svg.dataset.metric,
  ticks: Array.from(svg.querySelectorAll('.axis .tick')).map(t => [
    Number(t.querySelector('line').getAttribute('x1')), t.querySelector('text').textContent]),
  zero: Number(svg.querySelector('line.zero').getAttribute('x1')),
  rows: Array.from(svg.querySelectorAll('g.mr')).map(g => {
    const x = (sel, a) => {
      const e = g.querySelector(sel); return e ? Number(e.getAttribute(a)) : null; };
    const word = g.querySelector('text.vw');
    return {condition: g.dataset.condition, word: g.dataset.word,
            said: word.textContent, colour: getComputedStyle(word).fill,
            lo: x('line.ci', 'x1'), hi: x('line.ci', 'x2'), point: x('circle.pt', 'cx'),
            limit: x('line.lim', 'x1'), margin: x('line.mg', 'x1'),
            counted: g.classList.contains('counted'), diamond: !!g.querySelector('path.cm'),
            tone: ['worse', 'safer', 'blind', 'plain'].find(c => g.classList.contains(c))};
  }),
})"""


@pytest.fixture
def pages(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    """A baseline, then a run whose refund latency is 30% longer, reported as HTML by the
    session (with metric margins); and the same comparison reviewed here, for its numbers."""
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    assert pytester.runpytest("--prove-save-baseline=main").ret == pytest.ExitCode.OK
    monkeypatch.setenv("SLOW", "1")
    result = pytester.runpytest("--prove-baseline=main", "--prove-report=r.html",
                                "--prove-metric-margin=latency_s=10%,judge=0.5")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    store = Store(pytester.path / ".prove")
    done = review(store.open("baseline:main"), store.open("latest"), events=None, q=0.05,
                  max_mde=0.2, fail_on={"worse"}, metric_margin=MARGINS)
    return pytester.path / "r.html", done


@needs_chromium
def test_metric_plot_draws_every_row_where_its_numbers_say(
        pages: tuple[Path, Any], chromium: Any) -> None:
    path, done = pages
    metrics = done.metrics
    assert metrics is not None and metrics.m == 4
    rows = {(r.metric, r.condition): r for r in metrics.rows}
    assert [(r.metric, r.condition) for r in metrics.worse] == [
        ("latency_s", "ticket=refund")]
    trouble: list[str] = []
    # The suite's Chromium (tests/conftest.py): a Playwright driver and a browser started
    # for this test alone cost about a second.
    page = chromium.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.on("request", lambda r: None if r.url.startswith(("file://", "data:"))
                else trouble.append(f"request {r.url}"))
        page.on("pageerror", lambda exc: trouble.append(f"error {exc}"))
        page.goto(path.as_uri())
        # The outcome rows keep their plot (unresolved; resolved is its complement); the
        # metric rows come beside them, a plot per metric.
        assert page.locator("svg.forest-svg").count() == 1
        svgs = page.locator("section.metrics svg.metric-svg")
        assert svgs.count() == 2
        seen: set[tuple[str, str]] = set()
        colours: dict[str, set[str]] = {}
        for k in range(svgs.count()):
            drawn = svgs.nth(k).evaluate(READ_METRIC)
            value = _inverse(drawn["ticks"])
            tolerance = 0.75 * value.pixel  # coordinates are written to 0.01 px
            assert value(drawn["zero"]) == pytest.approx(0.0, abs=tolerance)
            metric = drawn["metric"]
            # Worst first: a row that got worse heads its plot.
            words = [m["word"] for m in drawn["rows"]]
            assert "worse" not in words[1:]
            for mark in drawn["rows"]:
                row: MetricRow = rows[(metric, mark["condition"])]
                seen.add((metric, mark["condition"]))
                test = row.test
                assert value(mark["point"]) == pytest.approx(test.shift, abs=tolerance)
                assert value(mark["lo"]) == pytest.approx(test.low, abs=tolerance)
                assert value(mark["hi"]) == pytest.approx(test.high, abs=tolerance)
                assert row.limit is not None and row.limit.value is not None
                assert value(mark["limit"]) == pytest.approx(row.limit.value,
                                                             abs=tolerance)
                # The limit lies the worse way: up for latency, down for the judge.
                assert (row.limit.value > 0) == (metric == "latency_s")
                assert row.margin is not None
                want = row.margin if row.better == "lower" else -row.margin
                assert value(mark["margin"]) == pytest.approx(want, abs=tolerance)
                # The verdict in words, with the shift as a share of the median.
                assert mark["word"] == row.word
                assert mark["said"].startswith(row.word)
                share = test.relative
                assert share is not None and f"{share:+.0%}" in mark["said"]
                # ... and in colour: worse (and safer) carry the diamond the verdict
                # counts, and their word is coloured as the outcome cells' are.
                moved = row.word in ("worse", "safer")
                assert mark["counted"] == mark["diamond"] == moved
                assert mark["tone"] == (row.word if moved else "plain")
                colours.setdefault(mark["tone"], set()).add(mark["colour"])
        assert seen == set(rows)
        assert len(colours) == 2 and colours["worse"].isdisjoint(colours["plain"])
        # A text alternative: each plot an image with a title and a description that
        # names the row that got worse, and a table of every metric row.
        for svg in svgs.all():
            assert svg.get_attribute("role") == "img"
            ids = (svg.get_attribute("aria-labelledby") or "").split()
            assert len(ids) == 2
            texts = [page.locator(f"[id='{i}']").text_content() or "" for i in ids]
            assert all(t.strip() for t in texts)
            if svg.get_attribute("data-metric") == "latency_s":
                shift = rows[("latency_s", "ticket=refund")].test.shift
                assert f"ticket=refund worse {number(shift, True)}" in texts[1]
        table = page.locator("table.metric-rows tbody tr")
        assert table.count() == 4
        refund = [t for t in table.all_inner_texts() if "latency_s" in t and "refund" in t]
        assert len(refund) == 1 and "worse" in refund[0] and "beyond margin" in refund[0]
        assert table.all_inner_texts()[0] == refund[0]  # worse first, as the terminal
        # The verdict first: the metric rows' answer in the header.
        assert "metrics: worse: latency_s in ticket=refund" in page.locator(
            "header").inner_text()
    finally:
        page.close()
    assert trouble == []


def _row(metric: str, condition: str, better: str, before: list[float], after: list[float],
         word: str, *, paired: bool = True) -> MetricRow:
    test = metric_test(before, after, paired=paired, level=0.95)
    limit = metric_limit(before, len(after), paired=paired, better="lower" if better == "lower"
                         else "higher", alpha=0.05)
    return MetricRow(condition, metric, better, test, test.test.p, word,  # type: ignore[arg-type]
                     limit, ("r", condition))


def _svg(section: str, metric: str) -> ET.Element:
    found = re.search(r'<svg class="metric-svg".*?data-metric="' + metric + r'".*?</svg>',
                      section)
    assert found is not None
    return ET.fromstring(found.group(0))


def test_an_unbounded_interval_runs_to_the_edge_with_an_arrow_and_no_shift_draws_no_dot(
        ) -> None:
    """Three twins give no finite 95% interval: its bar runs across the plot, an arrow at
    each end; a row with no twin compared has no shift, so no dot and no bar, and still its
    word."""
    rng = np.random.default_rng(4)
    base = list(rng.lognormal(0, 0.5, 40))
    rows = (_row("latency", "few", "lower", [1.0, 1.2, 0.9], [1.1, 1.3, 1.0],
                 "too small to tell"),
            _row("latency", "none", "lower", [], [], "too small to tell"),
            _row("latency", "many", "lower", base, [v + 0.2 for v in base], "worse"),
            _row("latency", "better", "lower", base, [v - 0.1 for v in base], "safer"))
    section = metric_section(MetricReview(rows, 0.05, True))
    svg = _svg(section, "latency")
    marks = {g.get("data-condition"): g for g in svg.iter() if g.get("class", "").startswith(
        "mr ")}
    assert set(marks) == {"few", "none", "many", "better"}
    few = marks["few"]
    bar = next(e for e in few.iter() if e.get("class", "").startswith("ci"))
    assert "open-low" in bar.get("class", "") and "open-high" in bar.get("class", "")
    assert float(bar.get("x1", "0")) == 190.0 and float(bar.get("x2", "0")) == 560.0
    assert len([e for e in few.iter() if e.get("class") == "arrow"]) == 2
    none = marks["none"]
    assert not [e for e in none.iter() if e.get("class") in ("pt", "ci")]
    assert "too small to tell" in "".join(none.itertext())
    # Worst first: worse, then the largest shift toward worse, the row with no shift last.
    order = [g.get("data-condition") for g in svg.iter()
             if g.get("class", "").startswith("mr ")]
    assert order == ["many", "few", "better", "none"]
    assert metric_order(rows) == [2, 0, 3, 1]
    assert "blind" in few.get("class", "") and "safer counted" in marks["better"].get(
        "class", "")
    assert all(math.isfinite(float(e.get(a, "0"))) for e in svg.iter()
               for a in ("x1", "x2", "cx") if e.get(a) is not None)


def test_a_page_without_metric_rows_has_no_metric_markup(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    # One salt for both runs: the same seeds, so the same episodes and no metric row that
    # fails the gate.  With a new salt each, the two runs were independent draws, and one
    # CI run in many read latency_s in ticket=refund as worse by chance, and the page
    # without metric rows still said "gate failed on metrics" in its title.
    for name in ("a", "b"):
        assert pytester.runpytest(f"--prove-save-baseline={name}", "--prove-salt=one",
                                  "-p", "no:cacheprovider").ret == pytest.ExitCode.OK
    store = Store(pytester.path / ".prove")
    done = review(store.open("baseline:a"), store.open("baseline:b"), events=None, q=0.05,
                  max_mde=0.2, fail_on={"worse"})
    assert done.metrics is not None and done.metrics.m == 4
    with_metrics = render_html(done)
    assert 'class="metrics"' in with_metrics and "g.mr" in with_metrics
    without = render_html(dataclasses.replace(done, metrics=None))
    for mark in ('class="metrics"', "metric-svg", "g.mr", "metric-rows", "metrics: "):
        assert mark not in without
