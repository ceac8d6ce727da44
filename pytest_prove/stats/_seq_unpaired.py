"""The unpaired sequential test against a complete baseline, calibrated exactly.

The baseline holds all its n_a episodes (x_a events) from the start; the run's first t
replicates (y events) are read at each look. The statistic at a look is the two-sided
conditional test of y given x_a + y (hypergeometric, Fisher's: twice the smaller tail); a
row crosses when it is <= c at some look. With the same rate p in both runs the chance of
crossing is

    E(c, p) = sum_{x_a} Binom(x_a; n_a, p) P_p(the run's path crosses | x_a),

computed exactly by a recursion over (look, y), all x_a at once (:func:`crossing`). The level
c for a row's alpha is the largest (bisection on log c) whose largest E over a grid of p
(``_GRID``: 0.0025 to 0.5 in steps of 0.0025; E is symmetric in p and 1 - p) is <= alpha;
the tests check E between the grid's points. Holm across rows compares each row's smallest
p with the level of Holm's step (:func:`level` at q/(m - j + 1)), so Holm decides exactly.

Futility (non-binding) rules out a change of +-max_mde when the z of the change against
each of them, with smoothed rates in the variance, is at least ``h`` (a constant boundary,
like a sequential probability ratio test's); power and expected replicates are exact
(:func:`run`), at the base rates the design checks.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt
from scipy import stats as sps  # type: ignore[import-untyped]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

__all__ = ["crossing", "futile", "level", "look_p", "run"]

_GRID = np.round(np.arange(0.0025, 0.5001, 0.0025), 6)
_TAIL = 1e-13  # baseline counts whose chance is below this (each side) are left out


@functools.lru_cache(maxsize=256)  # half a MB each at 250 replicates
def _table(t: int, n_a: int) -> FloatArray:
    """The two-sided conditional p of every (x_a, y), x_a = 0..n_a, y = 0..t."""
    x, y = np.meshgrid(np.arange(n_a + 1), np.arange(t + 1), indexing="ij")
    up = sps.hypergeom.sf(y - 1, n_a + t, x + y, t)
    down = sps.hypergeom.cdf(y, n_a + t, x + y, t)
    return np.asarray(np.minimum(1.0, 2.0 * np.minimum(up, down)))


def look_p(y: int, t: int, x_a: int, n_a: int) -> float:
    """The two-sided conditional p-value of y events in t against x_a in n_a."""
    if t == 0:
        return 1.0
    up = sps.hypergeom.sf(y - 1, n_a + t, x_a + y, t)
    down = sps.hypergeom.cdf(y, n_a + t, x_a + y, t)
    return float(min(1.0, 2.0 * min(up, down)))


def _ruled(y: FloatArray, t: int, x_a: FloatArray, n_a: int, mde: float,
           h: float) -> BoolArray:
    """Whether the change is shown below +mde and above -mde, each by a z of at least h."""
    pa = (x_a + 0.5) / (n_a + 1.0)
    pb = (y + 0.5) / (t + 1.0)
    se = np.sqrt(pa * (1 - pa) / n_a + pb * (1 - pb) / t)
    change = y / t - x_a / n_a
    return np.asarray((mde - change >= h * se) & (change + mde >= h * se))


def futile(y: int, t: int, x_a: int, n_a: int, mde: float, h: float) -> bool:
    return bool(_ruled(np.asarray(float(y)), t, np.asarray(float(x_a)), n_a, mde, h))


def _support(n_a: int, p: float) -> npt.NDArray[np.int64]:
    lo = int(sps.binom.ppf(_TAIL, n_a, p))
    hi = int(sps.binom.isf(_TAIL, n_a, p))
    return np.arange(max(lo - 1, 0), min(hi + 1, n_a) + 1)


def _walk(looks: tuple[int, ...], n_a: int, p_a: float, p_b: float, c: float,
          mde: float | None, h: float) -> tuple[float, float, float]:
    """(P(cross upwards), P(cross downwards), expected replicates) with baseline rate p_a
    and run rate p_b; futility only when ``mde`` is given."""
    xs = _support(n_a, p_a)
    weights = sps.binom.pmf(xs, n_a, p_a)
    top = looks[-1]
    grid = np.zeros((xs.size, top + 1))
    grid[:, 0] = weights
    up = down = spent = 0.0
    t = 0
    y = np.arange(top + 1, dtype=np.float64)
    xcol = xs[:, None].astype(np.float64)
    for k, size in enumerate(looks):
        step = size - t
        kernel = sps.binom.pmf(np.arange(step + 1), step, p_b)
        new = np.zeros_like(grid)
        for j, w in enumerate(kernel):
            new[:, j:size + 1] += w * grid[:, :size + 1 - j]
        grid = new
        t = size
        table = _table(t, n_a)[xs]
        hit = table <= c
        rate = y[None, :size + 1] / t - xcol / n_a
        hit_up = hit & (rate > 0)
        hit_down = hit & (rate < 0)
        view = grid[:, :size + 1]
        u, d = float(view[hit_up].sum()), float(view[hit_down].sum())
        up += u
        down += d
        if k + 1 < len(looks):
            stop = ~(hit_up | hit_down)
            if mde is not None:
                stop &= _ruled(y[None, :size + 1], t, xcol, n_a, mde, h)
            else:
                stop[:] = False
        else:
            stop = ~(hit_up | hit_down)
        rest = float(view[stop].sum())
        spent += size * (u + d + rest)
        view[hit_up | hit_down | stop] = 0.0
    return up, down, spent


@functools.lru_cache(maxsize=1 << 14)
def crossing(looks: tuple[int, ...], n_a: int, c: float, p: float) -> float:
    """The chance of a look's p <= c when both runs have rate p (exact)."""
    up, down, _ = _walk(looks, n_a, p, p, c, None, 0.0)
    return up + down


@functools.lru_cache(maxsize=1024)
def level(looks: tuple[int, ...], n_a: int, alpha: float) -> float:
    """The largest c (bisection on log c, 40 halvings) whose largest crossing chance over
    ``_GRID`` is <= alpha: found on every eighth point of the grid, then lowered until the
    whole grid holds."""

    def worst(c: float, grid: FloatArray) -> float:
        return max(crossing(looks, n_a, c, float(p)) for p in grid)

    lo, hi = math.log(1e-14), math.log(alpha)
    if worst(alpha, _GRID[7::8]) <= alpha:
        lo = hi
    for _ in range(40):
        if hi - lo < 1e-3:
            break
        mid = 0.5 * (lo + hi)
        if worst(math.exp(mid), _GRID[7::8]) <= alpha:
            lo = mid
        else:
            hi = mid
    found = math.exp(lo)
    while worst(found, _GRID) > alpha:
        found *= 0.98
    return found


@functools.lru_cache(maxsize=1024)
def run(looks: tuple[int, ...], n_a: int, c: float, mde: float, h: float, p_a: float,
        p_b: float) -> tuple[float, float, float]:
    """One row's procedure, exact: (P(crossed upwards), P(downwards), expected replicates)."""
    return _walk(looks, n_a, p_a, p_b, c, mde, h)
