"""The pooled step figure's band and curve, read back from the SVG text, against the figures
``where`` prints: at every step, the last one included, the band drawn from that step to the
next spans the band ``where`` gives for that step, and the curve holds its share there.

The band used to end at the last step's x, so that step's band had no width and what a reader
saw at the last step was the band of the step before (the bundled example's terse run: where
says 0.040 - 0.425 by step 13, the page showed 0.025 - 0.380 there).
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import pairwise

import numpy as np
import pytest

from pytest_prove.report.figures import step_figures
from pytest_prove.review.figures import Figures, StepFigure
from pytest_prove.review.steps import Where
from pytest_prove.stats.steps import aalen_johansen


def _where(run: str, seed: int) -> Where:
    rng = np.random.default_rng(seed)
    n = 240
    steps = rng.integers(1, 9, n).tolist()
    pick = rng.integers(0, 4, n).tolist()
    causes = [None if k == 0 else "step:reply" if k == 1 else "ended:resolved"
              for k in pick]
    # Few cases, unevenly failing: a band that moves at every step, the last one too.
    clusters = [f"case{i % 4}" for i in range(n)]
    causes = [("step:reply" if c == "case0" and i % 2 else cause)
              for i, (c, cause) in enumerate(zip(clusters, causes, strict=True))]
    incidence = aalen_johansen(steps, causes, clusters, groups={"failed": ["step:reply"]},
                               bootstrap=200, seed=0)
    return Where(run, "unresolved", (), Counter(), incidence, ("step:reply",), "BASELINE")


def _ticks(svg: str, axis: str) -> tuple[float, float, float, float]:
    """Two ticks of an axis, as (pixel, value) twice, to invert its scale."""
    group = re.search(rf'<g class="axis {axis}">(.*?)</g></g>', svg)
    assert group is not None
    found = re.findall(r'<line x1="([-\d.]+)" x2="[-\d.]+" y1="([-\d.]+)" y2="[-\d.]+"/>'
                       r'<text[^>]*>([-\d.]+)</text>', group.group(0))
    first, last = found[0], found[-1]
    at = 0 if axis == "x" else 1
    return float(first[at]), float(first[2]), float(last[at]), float(last[2])


def _scale(ticks: tuple[float, float, float, float]) -> tuple[float, float]:
    p0, v0, p1, v1 = ticks
    slope = (v1 - v0) / (p1 - p0)
    return slope, v0 - p0 * slope


def _outline(path: str) -> list[tuple[float, float]]:
    points: list[tuple[float, float]] = []
    x = y = 0.0
    for command, numbers in re.findall(r"([MLHVZ])([-\d. ]*)", path):
        parts = [float(p) for p in numbers.split()]
        if command in "ML":
            x, y = parts
        elif command == "H":
            x = parts[0]
        elif command == "V":
            y = parts[0]
        else:
            continue
        points.append((x, y))
    return points


def _crossing(points: list[tuple[float, float]], x: float) -> list[float]:
    """The y of every horizontal edge of a path that passes over ``x``."""
    return [y0 for (x0, y0), (x1, y1) in pairwise(points)
            if y0 == y1 and min(x0, x1) < x < max(x0, x1)]


def test_the_band_and_curve_at_every_step_are_where_s() -> None:
    before, after = _where("base", 1), _where("new", 2)
    figure = StepFigure("unresolved", before, after, (), 0, None, None)
    page = step_figures(Figures(steps=(figure,)), "base", "new")
    svg = re.search(r'<figure class="pooled">(<svg.*?</svg>)', page)
    assert svg is not None
    x_per, x_at = _scale(_ticks(svg.group(1), "x"))
    y_per, y_at = _scale(_ticks(svg.group(1), "y"))
    for name, found in (("before", before), ("after", after)):
        band = re.search(rf'<path class="band {name}" d="([^"]+)"', svg.group(1))
        curve = re.search(rf'<path class="cv {name}" data-run="[^"]+" d="([^"]+)"', svg.group(1))
        assert band is not None and curve is not None
        failed = found.incidence.curve("failed")
        steps = found.incidence.steps
        last_moved = failed.low[-1] != failed.low[-2] or failed.high[-1] != failed.high[-2]
        assert last_moved, "the data should make the last step's band differ"
        for k, step in enumerate(steps):
            # Half way to the next step (to one step on, after the last).
            middle = (step + (steps[k + 1] if k + 1 < len(steps) else step + 1)) / 2
            pixel = (middle - x_at) / x_per
            edges = sorted(y_per * y + y_at for y in _crossing(_outline(band.group(1)), pixel))
            assert len(edges) == 2, (name, step, edges)
            # Coordinates are written to 0.01 of a pixel.
            assert edges == pytest.approx([failed.low[k], failed.high[k]],
                                          abs=0.01 * abs(y_per)), (name, step)
            held = [y_per * y + y_at for y in _crossing(_outline(curve.group(1)), pixel)]
            assert held == pytest.approx([failed.incidence[k]], abs=0.01 * abs(y_per))
