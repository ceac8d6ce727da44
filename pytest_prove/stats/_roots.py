"""Bisection: where a monotone yes/no question about a number turns from no to yes.

One routine for every search of the engine that halves a bracket: detection limits (the
smallest change with the asked power), the ends of Tango's intervals, the margin test's
bound and critical values, the rejection regions' edges, the fragility search and the
replicate searches. Each row of an array is its own bracket, all halved in lockstep, so a
search over many rows costs one call of the question per halving; a single number is a
row of one.

A bracket is a pair (``fails_at``, ``holds_at``): the question is answered "no" at the
first and "yes" at the second (known, or assumed without asking: a virtual end such as
-1 or the size of a table). Either may be the larger. The question must be monotone in
between (one turn), which each caller states and its tests check; then the turn stays
inside the bracket at every step. Floating-point brackets halve at 0.5 (a + b);
integer ones at floor((a + b) / 2).

The tolerance is the caller's: ``steps`` halves every row exactly that many times (the
bracket ends |holds_at - fails_at| / 2**steps wide), ``width`` halves each row until it is
at most that wide (only the rows still wider are asked; 1 for integers: adjacent).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["bisect", "boundary", "smallest"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Numbers = TypeVar("Numbers", npt.NDArray[np.float64], npt.NDArray[np.int64])


def _halfway(a: Any, b: Any, integer: bool) -> Any:
    """The midpoint of each row's bracket: floor((a + b) / 2) for integers."""
    return (a + b) // 2 if integer else 0.5 * (a + b)


def bisect(holds: Callable[[IntArray, Numbers], BoolArray], fails_at: Numbers,
           holds_at: Numbers, *, steps: int | None = None,
           width: float | None = None) -> tuple[Numbers, Numbers]:
    """Narrow each row's bracket (``fails_at``, ``holds_at``) around its turn; returns the
    narrowed pair (new arrays: those given are never written). ``holds(rows, mid)``
    answers for the rows at positions ``rows`` (into the arrays given) at the points
    ``mid``, one per row asked.

    Give exactly one of ``steps`` (every row halved that many times, every row asked each
    time) or ``width`` (each row halved until |holds_at - fails_at| <= width)."""
    if (steps is None) == (width is None):
        raise ValueError("bisect() takes exactly one of steps and width")
    integer = np.issubdtype(np.asarray(fails_at).dtype, np.integer)
    if steps is not None:
        # np.where makes new arrays: the brackets given are never written
        fail, hold = fails_at, holds_at
        every = np.arange(np.size(fail), dtype=np.int64)
        for _ in range(steps):
            mid = _halfway(fail, hold, integer)
            hit = holds(every, mid)
            hold = np.where(hit, mid, hold)
            fail = np.where(hit, fail, mid)
        return fail, hold
    fail = np.array(fails_at, copy=True)
    hold = np.array(holds_at, copy=True)
    while True:
        rows = np.flatnonzero(np.abs(hold - fail) > width)
        if rows.size == 0:
            return fail, hold
        a, b = fail[rows], hold[rows]
        mid = _halfway(a, b, integer)
        hit = holds(rows, mid)
        hold[rows] = np.where(hit, mid, b)
        fail[rows] = np.where(hit, a, mid)


def boundary(passes: Callable[[float], bool], fails_at: float, holds_at: float, *,
             steps: int | None = None, width: float | None = None) -> float:
    """The end on the "yes" side of one number's narrowed bracket: :func:`bisect` on a row
    of one, with its tolerance."""
    _, hold = bisect(lambda rows, mid: np.array([passes(float(mid[0]))]),
                     np.array([fails_at], dtype=np.float64),
                     np.array([holds_at], dtype=np.float64), steps=steps, width=width)
    return float(hold[0])


def smallest(passes: Callable[[int], bool], fails_at: int, holds_at: int) -> int:
    """The integer in (fails_at, holds_at] (or [holds_at, fails_at)) next to the turn of
    ``passes``, a question about one integer: :func:`bisect` on a row of one."""
    _, hold = bisect(lambda rows, mid: np.array([passes(int(mid[0]))]),
                     np.array([fails_at], dtype=np.int64),
                     np.array([holds_at], dtype=np.int64), width=1)
    return int(hold[0])
