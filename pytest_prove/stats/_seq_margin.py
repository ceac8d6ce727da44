"""The margin claim on a sequential run's looks: exact fixed tests, the level split.

With ``--prove-sequential`` and a margin D, each row is also tested for H0: change toward
worse >= D at some of its condition's looks (the **margin looks**: the first look at or past
k/8 of the maximum N, k = 1..8). At margin look k the row's counts so far get the exact
unconditional margin test of a fixed design (``_margin``: paired, the twins' first t; unpaired,
the run's first t replicates against the whole baseline), with its p-value p_k. The level q
is split across the margin looks in fixed shares w_k (the last look ``FINAL_SHARE`` of it,
the others the rest equally), and the row is **shown within** once some p_k <= w_k q: its
sequential p-value is p = min_k p_k / w_k.

**Why this is exact.** Each p_k is the exact fixed test's p-value at the counts of look k,
so P(p_k <= w_k u) <= w_k u whatever the nuisance (the base rate; paired, the before-only
rate), and by the union bound P(p <= u) <= sum_k w_k u = u, at the margin and whatever the
looks a condition took: stopping a condition early (for worse, within or its last look) only
removes looks from the union, and workers running ahead change nothing (a look reads the
first t replicates). No recursion over the looks is needed to calibrate it, and it holds
for a margin named after the run too. The cost is the split: the last look tests at
FINAL_SHARE q instead of q, which the maximum makes up (:func:`final_level`), and the union
bound gives away the overlap of the looks' rejection regions (the tests enumerate how much:
:func:`within_chance`).

The row's **bound** (the smallest margin it is shown within) is the smallest over its
margin looks of the fixed bound at level w_k q: a margin D' is shown within exactly when
some look's p_k(D') <= w_k q, so the bound is at most D exactly when the row is within D.

:func:`within_chance` gives, exactly, the chance that a row is shown within at some margin
look, by a recursion over the looks (paired over (after-only, before-only) twins, unpaired
over (baseline count, run count)), optionally with the row stopped as worse by the
sequential test at a given nominal level (what a session does); the tests check it against
every path at small sizes, and with it the size at the margin and the power at the design.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._dist import binom_pmf
from ._margin import (
    PAIRED_METHOD,
    UNPAIRED_METHOD,
    MarginTest,
    _at_or_below,
    margin_design,
    margin_test_paired,
    margin_test_unpaired,
)
from ._results import RowInput
from ._scores import mn_score, tango_score

__all__ = [
    "FINAL_SHARE",
    "MARGIN_LOOKS",
    "expected_replicates",
    "final_level",
    "margin_looks",
    "margin_shares",
    "sequential_margin_test",
    "within_by_look",
    "within_chance",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The margin is tested at this many looks (at most): the first at or past k/8 of the maximum.
MARGIN_LOOKS = 8
#: The share of q the last margin look tests at; the others share the rest equally.
FINAL_SHARE = 0.75


def margin_looks(looks: Sequence[int]) -> tuple[int, ...]:
    """The 0-based indices, into a design's looks, of its margin looks: for k = 1..8 the
    first look at or past k/8 of the maximum (the last is the maximum itself)."""
    top = looks[-1]
    chosen: list[int] = []
    for k in range(1, MARGIN_LOOKS + 1):
        need = math.ceil(top * k / MARGIN_LOOKS)
        index = next(i for i, size in enumerate(looks) if size >= need)
        if index not in chosen:
            chosen.append(index)
    return tuple(chosen)


def margin_shares(looks: Sequence[int]) -> tuple[float, ...]:
    """Per look of the design, the share of q its margin test is at (0: not a margin look);
    the shares sum to 1."""
    chosen = margin_looks(looks)
    shares = [0.0] * len(looks)
    if len(chosen) == 1:
        shares[chosen[0]] = 1.0
        return tuple(shares)
    for index in chosen[:-1]:
        shares[index] = (1.0 - FINAL_SHARE) / (len(chosen) - 1)
    shares[chosen[-1]] = FINAL_SHARE
    return tuple(shares)


def final_level(looks: Sequence[int], q: float) -> float:
    """The level of the last margin look: what the maximum's design check asks each row's
    fixed test to reach there (a lower bound on the row's power over all its looks)."""
    return margin_shares(looks)[-1] * q


# --------------------------------------------------------------------------- one row


def _look_test(row: RowInput, worse_when: Literal["rise", "fall"], margin: float,
               alpha: float) -> MarginTest:
    if row.pairs is not None:
        return margin_test_paired(row.pairs.before_only, row.pairs.after_only, row.pairs.n,
                                  margin, alpha=alpha, worse_when=worse_when)
    return margin_test_unpaired(row.x_before, row.n_before, row.x_after, row.n_after, margin,
                                alpha=alpha, worse_when=worse_when)


def sequential_margin_test(looks: Sequence[RowInput | None], design_looks: Sequence[int],
                           worse_when: Literal["rise", "fall"], margin: float,
                           q: float) -> MarginTest | None:
    """A row's margin test over the looks it took (``looks[k]``: its counts at look k, None
    where it had none): p = min over its margin looks of p_k / w_k (at most 1), the bound the
    smallest of their bounds at level w_k q; the change and statistic of its last look with
    counts. None when it has no counts at any look."""
    shares = margin_shares(design_looks)
    tested: MarginTest | None = None
    latest: RowInput | None = None
    p, bound = 1.0, 1.0
    for k, counts in enumerate(looks):
        if counts is None:
            continue
        latest = counts
        share = shares[k] if k < len(shares) else 0.0
        if share > 0.0:
            tested = _look_test(counts, worse_when, margin, share * q)
            p = min(p, tested.p / share)
            bound = min(bound, tested.bound)
    if latest is None:
        return None
    change = latest.x_after / latest.n_after - latest.x_before / latest.n_before
    if worse_when == "fall":
        change = -change
    # No margin look yet: no claim (p 1, bound 1); the statistic at the last look taken.
    statistic = _statistic(latest, worse_when, margin)
    method = (PAIRED_METHOD if latest.pairs is not None else UNPAIRED_METHOD)
    return MarginTest(margin=margin, paired=latest.pairs is not None, change=change,
                      statistic=statistic, p=min(1.0, p), alpha=q, bound=bound,
                      method=f"{method}, at the sequential run's margin looks, q split "
                             f"across them (the last {FINAL_SHARE:g} q)")


def _statistic(row: RowInput, worse_when: Literal["rise", "fall"], margin: float) -> float:
    """The score statistic at the margin of a row's counts (as ``_margin`` orders them)."""
    if row.pairs is not None:
        b, c = row.pairs.before_only, row.pairs.after_only
        if worse_when == "fall":
            b, c = c, b
        return tango_score(b, c, row.pairs.n, margin)
    x0, x1 = row.x_before, row.x_after
    if worse_when == "fall":
        x0, x1 = row.n_before - x0, row.n_after - x1
    return mn_score(x0, row.n_before, x1, row.n_after, margin)


# --------------------------------------------------------------------------- exact chances


def expected_replicates(design_looks: Sequence[int], margin: float, q: float, *,
                        paired: bool, nuisance: float) -> float:
    """The exact expected replicates of one row's condition when nothing changed and it
    stops once shown within (worse stops left out, which only shorten it): twins
    before-only and after-only with chance ``nuisance`` each, or both runs at rate
    ``nuisance``."""
    looks = tuple(int(n) for n in design_looks)
    by = within_by_look(looks, margin, q, paired=paired, nuisance=nuisance, change=0.0)
    return float(sum(b * n for b, n in zip(by, looks, strict=True))
                 + (1.0 - sum(by)) * looks[-1])


@functools.lru_cache(maxsize=512)
def _region(paired: bool, n0: int, n1: int, margin: float, alpha: float) -> BoolArray:
    """The fixed margin test's rejection region at level alpha over its outcomes (paired:
    (before-only, after-only) of n twins; unpaired: (baseline, run) counts)."""
    design = margin_design(paired, n0, n1, margin)
    z = design.critical(alpha)
    return np.asarray(design.order <= _at_or_below(z))


def within_chance(design_looks: Sequence[int], margin: float, q: float, *, paired: bool,
                  nuisance: float, change: float, n_a: int | None = None,
                  worse_level: float | None = None) -> float:
    """The exact chance that a row is shown within the margin at some margin look (see
    :func:`within_by_look`, whose figures it sums)."""
    return float(sum(within_by_look(design_looks, margin, q, paired=paired, nuisance=nuisance,
                                    change=change, n_a=n_a, worse_level=worse_level)))


def within_by_look(design_looks: Sequence[int], margin: float, q: float, *, paired: bool,
                   nuisance: float, change: float, n_a: int | None = None,
                   worse_level: float | None = None) -> tuple[float, ...]:
    """Per look of a design with these looks, the exact chance that a row is first shown
    within ``margin`` there, its change toward worse ``change``: paired, twins before-only
    with chance ``nuisance`` and after-only ``nuisance + change``; unpaired, a complete
    baseline of ``n_a`` (default the maximum) at rate ``nuisance``, the run at ``nuisance +
    change``. ``worse_level``: the row also stops, as worse, at a look where its nominal
    two-sided sequential statistic (sign test; conditional test) is at most it with the
    change toward worse observed above 0."""
    looks = tuple(int(n) for n in design_looks)
    shares = margin_shares(looks)
    if paired:
        return _paired_chance(looks, shares, margin, q, nuisance, nuisance + change,
                              worse_level)
    return _unpaired_chance(looks, shares, margin, q, n_a or looks[-1], nuisance,
                            nuisance + change, worse_level)


def _paired_chance(looks: tuple[int, ...], shares: tuple[float, ...], margin: float, q: float,
                   p10: float, p01: float, worse_level: float | None) -> tuple[float, ...]:
    from ._seq_paired import _efficacy_top, advance

    top = looks[-1]
    need = _efficacy_top(top, worse_level) if worse_level is not None else None
    grid = np.zeros((top + 1, top + 1))  # grid[b, c]: before-only b, after-only c
    grid[0, 0] = 1.0
    stay = max(0.0, 1.0 - p01 - p10)
    within = [0.0] * len(looks)
    n = 0
    for k, size in enumerate(looks):
        n = advance(grid, n, size, stay, p10, p01)  # rows: before-only
        view = grid[:size + 1, :size + 1]
        if shares[k] > 0.0:
            hit = _region(True, size, size, margin, shares[k] * q)
            within[k] = float(view[hit].sum())
            view[hit] = 0.0
        if need is not None:
            # The sign test's p <= worse_level: max(W, B) at least need[W + B].
            b, c = np.meshgrid(np.arange(size + 1), np.arange(size + 1), indexing="ij")
            total = np.minimum(b + c, top)
            view[(b + c <= size) & (c > b) & (c >= need[total])] = 0.0
    return tuple(within)


def _unpaired_chance(looks: tuple[int, ...], shares: tuple[float, ...], margin: float,
                     q: float, n_a: int, p_a: float, p_b: float,
                     worse_level: float | None) -> tuple[float, ...]:
    from ._seq_unpaired import _table

    xs = np.arange(n_a + 1)
    grid = binom_pmf(xs, n_a, p_a)[:, None].copy()  # grid[x_a, y]
    within = [0.0] * len(looks)
    t = 0
    for k, size in enumerate(looks):
        step = size - t
        kernel = binom_pmf(np.arange(step + 1), step, p_b)
        new = np.zeros((n_a + 1, size + 1))
        for j, w in enumerate(kernel):
            new[:, j:j + t + 1] += w * grid
        grid = new
        t = size
        if shares[k] > 0.0:
            hit = _region(False, n_a, size, margin, shares[k] * q)
            within[k] = float(grid[hit].sum())
            grid[hit] = 0.0
        if worse_level is not None:
            rise = np.arange(size + 1)[None, :] / size > xs[:, None] / n_a
            grid[(_table(size, n_a) <= worse_level) & rise] = 0.0
    return tuple(within)
