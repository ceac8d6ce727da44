"""The unpaired sequential test against a complete baseline, calibrated exactly.

The baseline holds all its n_a episodes (x_a events) from the start; the run's first t
replicates (y events) are read at each look. The statistic at a look is the two-sided
conditional test of y given x_a + y (hypergeometric, Fisher's: twice the smaller tail); a
row crosses when it is <= c at some look.

**The chance of crossing under no change, at every rate at once.** With the same rate p in
both runs the n_a + N episodes are exchangeable: given their total S of events, every order
is equally likely, whatever p. So the chance of crossing given the counts so far does not
depend on p, and one recursion over (look, x_a, y) with hypergeometric steps (never a rate)
gives V(s) = P(the row crosses | S = s) for s = 0..n_a + N (:func:`_null`). The chance at a
rate p is then the Bernstein polynomial E(c, p) = sum_s Binom(s; n_a + N, p) V(s).

**A proven bound over every p, not a grid's.** 0 <= V <= 1, so by Cauchy-Schwarz on the
score of S, |dE/dp| <= sqrt(E) sqrt((n_a + N) / (p (1 - p))): sqrt(E) is Lipschitz with
constant sqrt(n_a + N) in theta = arcsin(sqrt(p)). On a grid uniform in theta, the largest E
between two neighbours theta_i, theta_{i+1} is at most ((sqrt E_i + sqrt E_{i+1}) / 2 +
sqrt(n_a + N) (theta_{i+1} - theta_i) / 2)^2; intervals whose bound is above alpha are split
until it holds (or a point itself is above). The level c for a row's alpha is the largest
whose bound over all of 0 <= p <= 1 is <= alpha (:func:`level`; bisection on log c with the
grid's largest chance, then lowered in steps of 1% until the bound holds); Holm
across rows compares each row's smallest p with the level of Holm's step (:func:`level` at
q/(m - j + 1)), so Holm decides exactly.

Futility (non-binding) rules out a **worsening** of max_mde: the likelihood ratio of the run's
counts at the baseline's rate p_0 = (x_a + 1/2) / (n_a + 1) over the rate worse by max_mde
(p_0 + max_mde for a row worse when it rises; mirrored for a fall) is at least e^h, the
lower boundary of Wald's sequential probability ratio test with the baseline's rate put in
for the unknown one (:func:`futile`); where p_0 + max_mde > 1, the two binomials' profile
likelihood ratio against the rise is at least e^2 (the baseline's rate free). It never
enters the error rate; its cost in power, which the baseline's own noise raises, is exact
in :func:`run` (a recursion over the baseline's count and the run's), at the base rates
the design checks. Designs recorded by version 2 ruled out both +-max_mde by the profile
likelihood ratio of the two binomials (Farrington and Manning 1990's constrained rates), and
are read again with that rule (:func:`futile`, ``rule="profile"``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._dist import binom_isf, binom_pmf, binom_ppf

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

__all__ = ["RULES", "crossing", "futile", "level", "look_p", "run", "worst"]

#: The futility rules: "worsening" (one-sided, this version) and "profile" (both
#: directions, the rule of designs recorded by version 2).
RULES = ("worsening", "profile")

_TAIL = 1e-13  # baseline counts whose chance is below this (each side) are left out of run()
_GRID = 8193  # starting points of the theta grid over 0 <= p <= 1
_SPLIT = 4  # an interval whose bound fails is cut into this many
_ROUNDS = 8  # at most this many cuts of an interval


@functools.lru_cache(maxsize=4)
def _log_factorials(top: int) -> FloatArray:
    """log(k!) for k = 0..top: gammaln(k + 1), as :func:`_log_choose` computed it."""
    return np.asarray(special.gammaln(np.arange(top + 1, dtype=np.float64) + 1))


def _log_choose(n: int | IntArray, k: IntArray) -> FloatArray:
    """log C(n, k), elementwise: from a table of log-factorials (the same gammaln values,
    subtracted in the same order, so the same floats), or gammaln itself outside 0..n."""
    n_i = np.asarray(n, dtype=np.int64)
    k_i = np.asarray(k, dtype=np.int64)
    top = int(n_i.max(initial=0))
    if k_i.size and int(k_i.min()) >= 0 and bool(np.all(k_i <= n_i)):
        table = _log_factorials(1 << max(top, 1).bit_length())
        return np.asarray(table[n_i] - table[k_i] - table[n_i - k_i])
    n_ = n_i.astype(np.float64)
    k_ = k_i.astype(np.float64)
    return np.asarray(special.gammaln(n_ + 1) - special.gammaln(k_ + 1)
                      - special.gammaln(n_ - k_ + 1))


def _two_sided(t: int, n_a: int, s: IntArray) -> FloatArray:
    """Rows of the conditional test: for each total s, the two-sided p of y = 0..t (1 where
    y is impossible), from the log hypergeometric pmf, each tail summed from its own end."""
    y = np.arange(t + 1)[None, :]
    total = s[:, None]
    valid = (y <= total) & (total - y <= n_a)
    logs = np.where(valid, _log_choose(t, np.minimum(y, t))
                    + _log_choose(n_a, np.clip(total - y, 0, n_a))
                    - _log_choose(n_a + t, total), -np.inf)
    pmf = np.exp(logs)
    low = np.cumsum(pmf, axis=1)
    high = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]
    return np.asarray(np.where(valid, np.minimum(1.0, 2.0 * np.minimum(low, high)), 1.0))


@functools.lru_cache(maxsize=192)  # half a MB each at 250 replicates
def _table(t: int, n_a: int) -> FloatArray:
    """The two-sided conditional p of every (x_a, y), x_a = 0..n_a, y = 0..t."""
    rows = _two_sided(t, n_a, np.arange(n_a + t + 1))
    x, y = np.meshgrid(np.arange(n_a + 1), np.arange(t + 1), indexing="ij")
    return np.asarray(rows[x + y, y])


def look_p(y: int, t: int, x_a: int, n_a: int) -> float:
    """The two-sided conditional p-value of y events in t against x_a in n_a (the same
    arithmetic as the tables the level is calibrated on)."""
    if t == 0:
        return 1.0
    return float(_two_sided(t, n_a, np.array([x_a + y]))[0, y])


def _constrained(x_a: FloatArray, n_a: int, y: FloatArray, t: int,
                 d: float) -> tuple[FloatArray, FloatArray]:
    """The rates (baseline, run) that maximise the two binomials' likelihood with run -
    baseline = d: the closed form of Farrington and Manning (1990), Miettinen and Nurminen
    (1985), the root of a cubic."""
    p1, p2 = y / t, x_a / n_a
    theta = n_a / t
    a = 1.0 + theta
    b = -(1.0 + theta + p1 + theta * p2 + d * (theta + 2.0))
    c = d * d + d * (2.0 * p1 + theta + 1.0) + p1 + theta * p2
    e = -p1 * d * (1.0 + d)
    v = b ** 3 / (27.0 * a ** 3) - b * c / (6.0 * a * a) + e / (2.0 * a)
    u = np.sign(v) * np.sqrt(np.maximum(b * b / (9.0 * a * a) - c / (3.0 * a), 0.0))
    safe = np.where(u == 0.0, 1.0, u)
    ratio = np.where(u == 0.0, 0.0, np.clip(v / safe ** 3, -1.0, 1.0))
    w = (math.pi + np.arccos(ratio)) / 3.0
    run = np.clip(2.0 * u * np.cos(w) - b / (3.0 * a), max(d, 0.0), min(1.0, 1.0 + d))
    return run - d, run


def _loglik(x: FloatArray, n: int, p: FloatArray) -> FloatArray:
    return np.asarray(special.xlogy(x, p) + special.xlog1py(n - x, -p))


def _log_lr(y: FloatArray, t: int, x_a: FloatArray, n_a: int, d: float) -> FloatArray:
    """The log profile likelihood ratio of the counts against run - baseline = d."""
    free = _loglik(x_a, n_a, x_a / n_a) + _loglik(y, t, y / t)
    base, new = _constrained(x_a, n_a, y, t, d)
    return np.asarray(free - _loglik(x_a, n_a, base) - _loglik(y, t, new))


def _ruled(y: FloatArray, t: int, x_a: FloatArray, n_a: int, mde: float,
           h: float) -> BoolArray:
    """Whether changes of +mde and -mde are both ruled out: the observed change lies
    between them and the profile likelihood ratio against each is at least e^h."""
    change = y / t - x_a / n_a
    return np.asarray((change < mde) & (change > -mde)
                      & (_log_lr(y, t, x_a, n_a, mde) >= h)
                      & (_log_lr(y, t, x_a, n_a, -mde) >= h))


#: Where the baseline's rate leaves a rise of max_mde no room, the log profile likelihood
#: ratio against that rise that rules it out (version 2's threshold).
EDGE = 2.0


def _worsening_ruled(y: FloatArray, t: int, x_a: FloatArray, n_a: int, mde: float,
                     h: float) -> BoolArray:
    """Whether a rise of mde is ruled out: log P(y | p_0) / P(y | p_0 + mde) >= h, with
    p_0 = (x_a + 1/2) / (n_a + 1). Where p_0 > 1 - mde no rate p_0 + mde exists: there the
    two binomials' profile likelihood ratio against a rise of mde (the baseline's rate free
    below 1 - mde) is at least e^EDGE instead, so a run at a baseline's rate near 1 stops
    once the baseline itself has shown the rise has no room."""
    smooth = (x_a + 0.5) / (n_a + 1.0)
    room = smooth <= 1.0 - mde
    p0 = np.where(room, smooth, 0.5 * (1.0 - mde))
    p1 = p0 + mde
    log_lr = (special.xlogy(y, p0) - special.xlogy(y, p1)
              + special.xlog1py(t - y, -p0) - special.xlog1py(t - y, -p1))
    ruled = np.asarray(room & (log_lr >= h))
    edge = ~room
    if edge.any():
        yb, xb = np.broadcast_to(y, ruled.shape), np.broadcast_to(x_a, ruled.shape)
        ye, xe = yb[edge], xb[edge]
        ruled[edge] = (ye / t - xe / n_a < mde) & (_log_lr(ye, t, xe, n_a, mde) >= EDGE)
    return ruled


def futile(y: int, t: int, x_a: int, n_a: int, mde: float, h: float,
           worse_when: str = "rise", rule: str = "worsening") -> bool:
    """The futility rule on a row's counts at a look (``rule`` "worsening": a worsening of
    mde ruled out, a fall mirrored into a rise; "profile": both changes ruled out, the rule
    of version 2's designs)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    if rule == "profile":
        return bool(_ruled(np.asarray(float(y)), t, np.asarray(float(x_a)), n_a, mde, h))
    if worse_when == "fall":
        y, x_a = t - y, n_a - x_a
    return bool(_worsening_ruled(np.asarray(float(y)), t, np.asarray(float(x_a)), n_a,
                                 mde, h))


@functools.lru_cache(maxsize=192)  # 64 kB each at 250 replicates
def _futile_mask(t: int, n_a: int, mde: float, h: float) -> BoolArray:
    """Over every (x_a, y): a rise of mde ruled out (the row worse when it rises)."""
    x, y = np.meshgrid(np.arange(n_a + 1.0), np.arange(t + 1.0), indexing="ij")
    return _worsening_ruled(y, t, x, n_a, mde, h)


# --------------------------------------------------------------------------- no change


@functools.lru_cache(maxsize=1024)
def _back(before: int, step: int) -> FloatArray:
    """w[j, u] = P(u - j of the first ``before`` events | u of the first before + step), the
    weights that carry a function of the count back across ``step`` exchangeable draws."""
    after = before + step
    u = np.arange(after + 1)[None, :]
    j = np.arange(step + 1)[:, None]
    valid = (u - j >= 0) & (u - j <= before) & (j <= u)
    logs = (_log_choose(before, np.clip(u - j, 0, before)) + _log_choose(step, j + 0 * u)
            - _log_choose(after, u + 0 * j))
    return np.asarray(np.where(valid, np.exp(np.where(valid, logs, 0.0)), 0.0))


@dataclass(frozen=True)
class _Looks:
    """What the no-change recursion needs at each look, whatever the level: the tables,
    the hypergeometric weight of each (x_a, y) given x_a + y, and x_a + y itself."""

    tables: tuple[FloatArray, ...]
    weights: tuple[FloatArray, ...]
    totals: tuple[IntArray, ...]


@functools.lru_cache(maxsize=2)  # tens of MB each at 250 replicates
def _prepared(looks: tuple[int, ...], n_a: int) -> _Looks:
    tables, weights, totals = [], [], []
    x = np.arange(n_a + 1)[:, None]
    for t in looks:
        y = np.arange(t + 1)[None, :]
        tables.append(_table(t, n_a))
        weights.append(np.exp(_log_choose(n_a, x + 0 * y) + _log_choose(t, y + 0 * x)
                              - _log_choose(n_a + t, x + y)))
        totals.append(np.asarray((x + y).ravel(), dtype=np.int64))
    return _Looks(tuple(tables), tuple(weights), tuple(totals))


def _carry(values: FloatArray, before: int, step: int) -> FloatArray:
    """values over the count 0..before (last axis) carried to 0..before + step."""
    w = _back(before, step)
    out = np.zeros((*values.shape[:-1], before + step + 1))
    for j in range(step + 1):
        out[..., j:j + before + 1] += w[j, j:j + before + 1] * values
    return out


@functools.lru_cache(maxsize=1 << 12)
def _null(looks: tuple[int, ...], n_a: int, c: float) -> FloatArray:
    """V(s) = P(some look's p <= c | s events among all n_a + N episodes), s = 0..n_a + N,
    exact and the same at every rate."""
    prep = _prepared(looks, n_a)
    alive = np.ones((n_a + 1, 1))  # P(not crossed | x_a, y) at the current look
    pushed = np.zeros(n_a + 1)  # P(crossed so far | s events among n_a + t), s = 0..n_a + t
    t = 0
    for k, size in enumerate(looks):
        alive = _carry(alive, t, size - t)
        pushed = _carry(pushed, n_a + t, size - t)
        t = size
        hit = prep.tables[k] <= c
        crossed = np.where(hit, alive * prep.weights[k], 0.0)
        pushed += np.bincount(prep.totals[k], crossed.ravel(), minlength=n_a + t + 1)
        alive[hit] = 0.0
    return pushed


@functools.lru_cache(maxsize=2)  # 30 MB each at 250 replicates
def _theta_grid(total: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(theta, p, Binom(s; total, p) for s = 0..total) on the starting grid."""
    theta = np.linspace(0.0, math.pi / 2, _GRID)
    p = np.sin(theta) ** 2
    return theta, p, _binom(total, p)


def _binom(total: int, p: FloatArray) -> FloatArray:
    """Binom(s; total, p) for s = 0..total (columns) at each p (rows), by logs."""
    s = np.arange(total + 1, dtype=np.float64)
    inner = (p > 0.0) & (p < 1.0)
    q = np.where(inner, p, 0.5)[:, None]
    logc = _log_choose(total, np.arange(total + 1))[None, :]
    log_p, log_q = np.log(q), np.log1p(-q)
    rest = (total - s)[None, :]
    out = np.empty((p.size, total + 1))
    # exp(log C + s log p + (total - s) log(1 - p)), the same arithmetic in blocks of rows
    # that stay in the cache (half the time of whole temporaries at 8,193 x 451).
    for i in range(0, p.size, 128):
        block = out[i:i + 128]
        np.multiply(s[None, :], log_p[i:i + 128], out=block)
        np.add(logc, block, out=block)
        block += rest * log_q[i:i + 128]
        np.exp(block, out=block)
    out[p <= 0.0] = s == 0
    out[p >= 1.0] = s == total
    return np.asarray(out)


def worst(looks: tuple[int, ...], n_a: int, c: float, alpha: float) -> float:
    """A proven upper bound on the crossing chance over every rate 0 <= p <= 1, refined
    until it is <= alpha (or cannot be: then the bound found, above alpha)."""
    v = _null(looks, n_a, c)
    total = n_a + looks[-1]
    lip = math.sqrt(total)
    theta, _, basis = _theta_grid(total)
    e = np.maximum(basis @ v, 0.0)
    lo, hi = theta[:-1], theta[1:]
    ea, eb = e[:-1], e[1:]
    top = float(e.max())
    for round_ in range(_ROUNDS + 1):
        bound = ((np.sqrt(ea) + np.sqrt(eb)) / 2 + lip * (hi - lo) / 2) ** 2
        bad = bound > alpha
        if top > alpha or not bad.any():
            return max(top, float(bound.max()))
        if round_ == _ROUNDS:
            return float(bound.max())
        cuts = np.linspace(0.0, 1.0, _SPLIT + 1)
        edges = lo[bad][:, None] + (hi[bad] - lo[bad])[:, None] * cuts[None, :]
        inner = edges[:, 1:-1].ravel()
        rates = np.sin(inner) ** 2
        values = np.maximum(np.concatenate([
            _binom(total, rates[i:i + 2048]) @ v for i in range(0, rates.size, 2048)]), 0.0)
        top = max(top, float(values.max()))
        ev = np.concatenate((ea[bad][:, None], values.reshape(-1, _SPLIT - 1),
                             eb[bad][:, None]), axis=1)
        lo = np.concatenate((lo[~bad], edges[:, :-1].ravel()))
        hi = np.concatenate((hi[~bad], edges[:, 1:].ravel()))
        ea = np.concatenate((ea[~bad], ev[:, :-1].ravel()))
        eb = np.concatenate((eb[~bad], ev[:, 1:].ravel()))
    return float("inf")  # not reached


def crossing(looks: tuple[int, ...], n_a: int, c: float, p: float) -> float:
    """The chance of a look's p <= c when both runs have rate p (exact)."""
    v = _null(looks, n_a, c)
    return float(binom_pmf(np.arange(v.size), v.size - 1, p) @ v)


def _grid_top(looks: tuple[int, ...], n_a: int, c: float) -> float:
    """The largest crossing chance on the starting grid (no bound between its points)."""
    _, _, basis = _theta_grid(n_a + looks[-1])
    return float((basis @ _null(looks, n_a, c)).max())


@functools.lru_cache(maxsize=1024)
def level(looks: tuple[int, ...], n_a: int, alpha: float) -> float:
    """The largest c whose crossing chance is proven <= alpha at every rate (:func:`worst`):
    bisection on log c (to 0.1%) with the starting grid's largest chance, then lowered by 1%
    steps until the bound between the grid's points holds too."""
    if worst(looks, n_a, alpha, alpha) <= alpha:
        return alpha
    lo, hi = math.log(1e-14), math.log(alpha)
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        if _grid_top(looks, n_a, math.exp(mid)) <= alpha:
            lo = mid
        else:
            hi = mid
    found = math.exp(lo)
    while worst(looks, n_a, found, alpha) > alpha:
        found *= 0.99
    return found


# --------------------------------------------------------------------------- power


def _support(n_a: int, p: float) -> IntArray:
    lo = int(binom_ppf(_TAIL, n_a, p))
    hi = int(binom_isf(_TAIL, n_a, p))
    return np.arange(max(lo - 1, 0), min(hi + 1, n_a) + 1)


@functools.lru_cache(maxsize=1024)
def run(looks: tuple[int, ...], n_a: int, c: float, mde: float, h: float, p_a: float,
        p_b: float) -> tuple[float, float, float]:
    """One row's procedure, exact: (P(crossed upwards), P(downwards), expected replicates)
    with baseline rate p_a and run rate p_b, futility included, for a row worse when it
    rises (a row worse when it falls is this one with both rates mirrored, 1 - p: the
    conditional test and the rule are symmetric)."""
    xs = _support(n_a, p_a)
    weights = binom_pmf(xs, n_a, p_a)
    top = looks[-1]
    grid = weights[:, None].copy()
    up = down = spent = 0.0
    t = 0
    y = np.arange(top + 1, dtype=np.float64)
    xcol = xs[:, None].astype(np.float64)
    for k, size in enumerate(looks):
        step = size - t
        kernel = binom_pmf(np.arange(step + 1), step, p_b)
        new = np.zeros((xs.size, size + 1))
        for j, w in enumerate(kernel):
            new[:, j:j + t + 1] += w * grid
        grid = new
        t = size
        hit = _table(t, n_a)[xs] <= c
        rate = y[None, :size + 1] / t - xcol / n_a
        hit_up = hit & (rate > 0)
        hit_down = hit & (rate < 0)
        u, d = float(grid[hit_up].sum()), float(grid[hit_down].sum())
        up += u
        down += d
        stop = ~(hit_up | hit_down)
        if k + 1 < len(looks):
            stop &= _futile_mask(t, n_a, mde, h)[xs]
        rest = float(grid[stop].sum())
        spent += size * (u + d + rest)
        grid[hit_up | hit_down | stop] = 0.0
    return up, down, spent
