"""The one bisection of the statistics (stats/_roots.py) against answers known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_prove.stats._roots import bisect, boundary, smallest


def test_float_rows_close_on_their_roots_to_the_stated_width() -> None:
    targets = np.linspace(0.1, 3.9, 50)
    asked: list[int] = []

    def at_least(rows: np.ndarray, x: np.ndarray) -> np.ndarray:
        asked.append(rows.size)
        return np.asarray(x * x >= targets[rows])

    fail, hold = bisect(at_least, np.zeros(50), np.full(50, 2.0), steps=40)
    roots = np.sqrt(targets)
    assert (fail < roots).all() and (roots <= hold).all()
    assert np.allclose(hold - fail, 2.0 / 2**40, rtol=0, atol=1e-15)
    assert asked == [50] * 40  # steps: every row asked at every halving


def test_a_bracket_may_run_downward() -> None:
    """holds_at below fails_at: the turn of "x <= 0.3" from the right."""
    fail, hold = bisect(lambda rows, x: np.asarray(x <= 0.3), np.array([1.0]),
                        np.array([-1.0]), width=1e-9)
    assert hold[0] <= 0.3 < fail[0] and fail[0] - hold[0] <= 1e-9


def test_integer_rows_find_their_first_yes_and_only_wide_rows_are_asked() -> None:
    rng = np.random.default_rng(3)
    tables = [np.sort(rng.integers(0, 100, size=size)) for size in (1, 7, 30, 64, 0)]
    z = 50
    asked: list[np.ndarray] = []

    def above(rows: np.ndarray, k: np.ndarray) -> np.ndarray:
        asked.append(rows)
        return np.array([tables[r][i] > z for r, i in zip(rows, k, strict=True)])

    sizes = np.array([t.size for t in tables], dtype=np.int64)
    fail, hold = bisect(above, np.full(sizes.size, -1, dtype=np.int64), sizes, width=1)
    expected = [int(np.searchsorted(t, z, side="right")) for t in tables]
    assert hold.tolist() == expected
    assert (hold - fail == 1).all()
    # the empty table's bracket (-1, 0) is already adjacent: it is never asked about
    assert all(4 not in rows for rows in asked)


def test_one_integer_and_the_inputs_left_as_they_were() -> None:
    assert smallest(lambda n: n * n >= 1000, 0, 100) == 32
    asked: list[int] = []

    def squares_past(n: int) -> bool:
        asked.append(n)
        return n * n >= 1000

    assert smallest(squares_past, 31, 32) == 32
    assert asked == []  # an adjacent bracket is the answer: nothing to ask
    start = np.array([0.0, 0.0])
    bisect(lambda rows, x: np.asarray(x >= 0.5), start, np.ones(2), steps=3)
    assert start.tolist() == [0.0, 0.0]


def test_one_number_to_a_width_or_a_number_of_halvings() -> None:
    root = 2.0**0.5
    by_width = boundary(lambda x: x * x >= 2.0, 0.0, 2.0, width=1e-12)
    assert root <= by_width <= root + 1e-12
    by_steps = boundary(lambda x: x * x >= 2.0, 0.0, 2.0, steps=10)
    assert root <= by_steps <= root + 2.0 / 2**10
    assert by_steps != pytest.approx(by_width, abs=1e-6)  # ten halvings stop well short


@pytest.mark.parametrize("kwargs", [{}, {"steps": 3, "width": 0.1}])
def test_exactly_one_tolerance(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="exactly one of steps and width"):
        bisect(lambda rows, x: np.asarray(x > 0), np.zeros(1), np.ones(1), **kwargs)  # type: ignore[arg-type]
