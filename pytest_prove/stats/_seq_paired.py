"""The paired sequential test, exact: a sign walk over the discordant twins.

Twins share a seed; a row's twins are either concordant, **after-only** (the event in the new
run only, W of them) or **before-only** (B). Under no change (equal rates) each discordant pair
is after-only with chance 1/2 whatever the chance of a discordant pair, so, given which pairs
are discordant, (W, B) is a fair random walk in the d = W + B discordant steps. The nominal
statistic at a look is the exact two-sided sign test p(W, B) = min(1, 2 P(Bin(d, 1/2) >=
max(W, B))); a row's sequential statistic is the smallest p over the looks it has taken. With
a maximum of N replicates a condition there are at most N discordant steps, so

    G_N(c) = P(a fair walk of N steps has p <= c at some step)

bounds the chance of min p <= c under no change, for every discordance rate and any looks
(taking looks at fewer steps only lowers it; workers running ahead change nothing: a look
reads a condition's first n replicates). G_N is computed exactly by a recursion over the walk
(:func:`crossing`), and p* = G_N(min p) is a valid p-value: P(p* <= u) <= u.

Futility (non-binding, it never enters the error above) rules out a change of +max_mde
when the observed change (W - B)/n is below it and the profile likelihood ratio of the
counts against it (the trinomial of after-only, before-only and concordant twins maximised
freely, over maximised with after-only - before-only = max_mde; Tango's constrained
estimate) is at least e^h, a constant boundary like a sequential probability ratio test's;
the same for -max_mde; a row is futile when both are ruled out.

Power and expected replicates are exact too (:func:`run`): a recursion over (W, B) replicate
by replicate, stopping at each look for efficacy or futility, for given chances of an
after-only (p01) and a before-only (p10) pair.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

__all__ = ["crossing", "futile", "level", "run", "sign_p"]


def sign_p(w: int, b: int) -> float:
    """The exact two-sided sign test of w after-only against b before-only pairs."""
    d = w + b
    if d == 0:
        return 1.0
    return float(min(1.0, 2.0 * special.bdtrc(max(w, b) - 1, d, 0.5)))


@functools.lru_cache(maxsize=256)
def _tails(steps: int) -> tuple[FloatArray, ...]:
    """Per step d = 1..steps, the two-sided p of each W = 0..d."""
    out = []
    for d in range(1, steps + 1):
        w = np.arange(d + 1)
        top = np.maximum(w, d - w)
        out.append(np.minimum(1.0, 2.0 * special.bdtrc(top - 1, d, 0.5)))
    return tuple(out)


@functools.lru_cache(maxsize=1 << 14)
def crossing(steps: int, c: float) -> float:
    """G_steps(c): the chance that a fair walk of ``steps`` steps has a two-sided sign-test
    p-value <= c at some step (exact)."""
    if c <= 0.0:
        return 0.0
    tails = _tails(steps)
    alive = np.zeros(steps + 1)
    alive[0] = 1.0
    crossed = 0.0
    for d in range(1, steps + 1):
        nxt = np.zeros(steps + 1)
        nxt[1:d + 1] += 0.5 * alive[:d]
        nxt[:d] += 0.5 * alive[:d]
        hit = tails[d - 1] <= c
        crossed += float(nxt[:d + 1][hit].sum())
        nxt[:d + 1][hit] = 0.0
        alive = nxt
    return min(1.0, crossed)


@functools.lru_cache(maxsize=256)
def level(steps: int, alpha: float) -> float:
    """The nominal level c with G_steps(c) <= alpha, as large as the bisection finds (60
    halvings of log c): a row crossing min p <= c has p* <= alpha."""
    lo, hi = math.log(1e-15), math.log(alpha)
    if crossing(steps, alpha) <= alpha:
        return alpha
    # G_steps changes only at the sign test's values, so "G(c) <= alpha" holds exactly for
    # c below the smallest value v with G(v) > alpha: found by bisection over the sorted
    # values (about 14 recursions, not 60), the halvings below then give the same c as
    # with a recursion at each.
    values = np.unique(np.concatenate(_tails(steps)))
    values = values[values <= alpha]
    first, last = 0, values.size  # G(values[i]) > alpha for i >= last (alpha is above)
    while first < last:
        mid_i = (first + last) // 2
        if crossing(steps, float(values[mid_i])) <= alpha:
            first = mid_i + 1
        else:
            last = mid_i
    flip = float(values[first]) if first < values.size else alpha
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if math.exp(mid) < flip:
            lo = mid
        else:
            hi = mid
    return math.exp(lo)


def _log_lr(w: npt.NDArray[np.float64], b: npt.NDArray[np.float64], n: int,
            delta: float) -> FloatArray:
    """The log profile likelihood ratio of the twins' counts (w after-only, b before-only of
    n) against a change of ``delta`` in (0, 1): the trinomial maximised freely over
    maximised with after-only - before-only = delta (Tango's constrained estimate, the root
    of 2n s^2 - b1 s - b delta (1 - delta) = 0 for the before-only chance s)."""
    c = n - w - b
    b1 = w * (1 - delta) + b * (1 - 3 * delta) - 2 * c * delta
    s = (b1 + np.sqrt(b1 * b1 + 8.0 * n * b * delta * (1 - delta))) / (4.0 * n)
    s = np.clip(s, 0.0, (1 - delta) / 2)
    a, rest = s + delta, np.clip(1.0 - 2 * s - delta, 0.0, 1.0)
    free = special.xlogy(w, w / n) + special.xlogy(b, b / n) + special.xlogy(c, c / n)
    tied = special.xlogy(w, a) + special.xlogy(b, s) + special.xlogy(c, rest)
    return np.asarray(free - tied)


def _ruled_out(w: npt.NDArray[np.int64], b: npt.NDArray[np.int64], n: int,
               mde: float, h: float) -> BoolArray:
    """Whether (w after-only, b before-only in n twins) rules a change of +mde out: the
    observed change is below mde and its profile likelihood ratio against +mde is >= e^h."""
    wf, bf = w.astype(np.float64), b.astype(np.float64)
    return np.asarray(((wf - bf) < mde * n) & (_log_lr(wf, bf, n, mde) >= h))


def futile(w: int, b: int, n: int, mde: float, h: float) -> bool:
    """Whether a row with w after-only and b before-only of n twins rules out a change of
    max_mde in both directions."""
    wa, ba = np.asarray([w]), np.asarray([b])
    return bool(_ruled_out(wa, ba, n, mde, h)[0] and _ruled_out(ba, wa, n, mde, h)[0])


@functools.lru_cache(maxsize=256)
def _efficacy_top(steps: int, c: float) -> npt.NDArray[np.int64]:
    """Per d = 0..steps, the smallest max(W, B) whose sign test p is <= c (d + 1: none)."""
    top = np.full(steps + 1, 0, dtype=np.int64)
    top[0] = 1
    for d, tail in enumerate(_tails(steps), start=1):
        hit = np.nonzero(tail[d // 2:] <= c)[0]
        top[d] = d + 1 if hit.size == 0 else d // 2 + int(hit[0])
    return top


@functools.lru_cache(maxsize=512)
def _futile_mask(n: int, mde: float, h: float) -> BoolArray:
    """Over the (W, B) grid of n twins: both changes of +-mde ruled out."""
    w, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    inside = w + b <= n
    return np.asarray(inside & _ruled_out(w, b, n, mde, h) & _ruled_out(b, w, n, mde, h))


@functools.lru_cache(maxsize=8)  # a few MB each at a maximum of 250
def _masks(looks: tuple[int, ...], c: float, mde: float,
           h: float) -> tuple[tuple[BoolArray, BoolArray, BoolArray], ...]:
    """Per look: (worse, safer, stop for futility or at the last look) over the (W, B) grid
    up to the look's size."""
    out = []
    need = _efficacy_top(looks[-1], c)
    for k, n in enumerate(looks):
        w, b = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        inside = w + b <= n
        d = np.minimum(w + b, n)
        hit = inside & (np.maximum(w, b) >= need[d]) & (w != b)
        stop = (_futile_mask(n, mde, h) if k + 1 < len(looks) else inside) & ~hit
        out.append((hit & (w > b), hit & (w < b), stop))
    return tuple(out)


def advance(grid: FloatArray, n: int, size: int, stay: float, row: float,
            column: float) -> int:
    """Take the twin-pair walk in ``grid`` (entry [i, j]: the chance of i discordant pairs of
    one kind and j of the other after ``n`` pairs) on to ``size`` pairs, in place: each pair
    adds one to the row's count with chance ``row``, to the column's with ``column``, and to
    neither with ``stay``; returns ``size``."""
    while n < size:
        s = n + 1
        new = stay * grid[:s + 1, :s + 1]
        new[1:, :] += row * grid[:s, :s + 1]
        new[:, 1:] += column * grid[:s + 1, :s]
        grid[:s + 1, :s + 1] = new
        n = s
    return n


@functools.lru_cache(maxsize=1024)
def run(looks: tuple[int, ...], c: float, mde: float, h: float, p01: float,
        p10: float) -> tuple[float, float, float]:
    """One row's procedure, exact: (P(worse: W > B at a crossing), P(safer), expected
    replicates), twins after-only with chance p01 and before-only with chance p10."""
    top = looks[-1]
    grid = np.zeros((top + 1, top + 1))
    grid[0, 0] = 1.0
    stay = 1.0 - p01 - p10
    worse = safer = spent = 0.0
    masks = _masks(looks, c, mde, h)
    n = 0
    for k, size in enumerate(looks):
        n = advance(grid, n, size, stay, p01, p10)
        up, down, stop = masks[k]
        view = grid[:size + 1, :size + 1]
        hit_up, hit_down = float(view[up].sum()), float(view[down].sum())
        worse += hit_up
        safer += hit_down
        ended = hit_up + hit_down + float(view[stop].sum())
        spent += size * ended
        view[up | down | stop] = 0.0
    return worse, safer, spent
