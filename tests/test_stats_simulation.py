"""Simulation checks of the error rate and of the printed detection limits.

Fixed seeds, so every run draws the same comparisons; each check computes its share from the
draws and can fail. The decision rules are applied to whole arrays of simulated counts at once
(the same p-values as the engine: Fisher's from the two-sided margin tables, McNemar's mid-p),
and a sample of the draws is also passed through ``compare`` to tie the rule to the engine.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt
import pytest

from pytest_prove.stats import Pairs, RowInput, compare, limits
from pytest_prove.stats._exact import fisher_margin_pvalues, mcnemar_midp_array

N = 190
M = 16
Q = 0.05
SIMS = 2000
BASES = (0.0, 0.1, 0.4, 0.9)
# 16 rows: every base rate four times.
ROW_BASES = np.repeat(np.array(BASES), 4)

Array = npt.NDArray[np.float64]


@functools.cache
def _fisher_table(n1: int, n2: int) -> Array:
    table = np.empty((n1 + 1, n2 + 1))
    for total in range(n1 + n2 + 1):
        lo, p = fisher_margin_pvalues(n1, n2, total)
        x1 = np.arange(lo, lo + p.size)
        table[x1, total - x1] = p
    return table


def _draw(
    rng: np.random.Generator, p0: Array, p1: Array, paired: bool
) -> tuple[Array, npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """p-values (SIMS x rows) and the counts behind them: before, after, and for twins the
    before-only and after-only counts; twins are independent given the rates (the model the
    paired limits assume)."""
    shape = (SIMS, p0.size)
    if not paired:
        before = rng.binomial(N, np.broadcast_to(p0, shape))
        after = rng.binomial(N, np.broadcast_to(p1, shape))
        p = _fisher_table(N, N)[before, after]
        return p, before, after, np.zeros_like(before)
    cells = np.stack([p0 * p1, p0 * (1 - p1), (1 - p0) * p1, (1 - p0) * (1 - p1)], axis=-1)
    counts = np.stack([rng.multinomial(N, cells[j], size=SIMS) for j in range(p0.size)], axis=1)
    both, b, c = counts[..., 0], counts[..., 1], counts[..., 2]
    p = mcnemar_midp_array(b, c)
    return p, both + b, both + c, np.stack([both, b, c], axis=-1)


def _holm_any(p: Array) -> npt.NDArray[np.bool_]:
    # Holm counts something exactly when its first step does: the smallest p <= q/m.
    return np.asarray(p.min(axis=1) * M <= Q)


def _bh_flagged(p: Array, column: int) -> npt.NDArray[np.bool_]:
    ordered = np.sort(p, axis=1)
    steps = np.arange(1, M + 1)
    passing = ordered <= Q * steps / M
    # Largest j with p_(j) <= q j / m; flag everything at or below that threshold.
    largest = np.where(passing.any(axis=1), M - np.argmax(passing[:, ::-1], axis=1), 0)
    threshold = Q * largest / M
    return np.asarray(p[:, column] <= threshold)


def _compare_row(j: int, paired: bool, before: int, after: int, cells: object) -> RowInput:
    if paired:
        both, b, c = (int(v) for v in cells)  # type: ignore[attr-defined]
        return RowInput(f"c{j}", "failed", "rise", before, N, after, N, Pairs(N, both, b, c))
    return RowInput(f"c{j}", "failed", "rise", before, N, after, N)


@pytest.mark.parametrize("paired", [False, True], ids=["fisher", "paired"])
def test_identical_agents_rarely_get_a_verdict(paired: bool) -> None:
    rng = np.random.default_rng(20240601 + paired)
    p, before, after, cells = _draw(rng, ROW_BASES, ROW_BASES, paired)
    verdict_share = float(_holm_any(p).mean())
    standard_error = np.sqrt(0.05 * 0.95 / SIMS)
    assert verdict_share <= 0.05 + 2 * standard_error, verdict_share

    # The vectorised rule is the engine's rule: check it on the first draws.
    for s in range(40):
        rows = [_compare_row(j, paired, int(before[s, j]), int(after[s, j]), cells[s, j])
                for j in range(M)]
        word = compare(rows, q=Q).verdict.word
        assert (word in ("worse", "safer")) == bool(_holm_any(p[s : s + 1])[0])


SCENARIOS = [
    (base, direction)
    for base in BASES
    for direction in ("rise", "fall")
    if not (base == 0.0 and direction == "fall")
]


@pytest.mark.parametrize("paired", [False, True], ids=["fisher", "paired"])
@pytest.mark.parametrize(("base", "direction"), SCENARIOS)
def test_a_change_of_the_printed_limit_is_flagged_four_times_in_five(
    paired: bool, base: float, direction: str
) -> None:
    x0 = round(base * N)
    found = limits(x0, N, paired=paired, alpha=Q / M)
    limit = found.rise if direction == "rise" else found.fall
    if limit.value is None:
        pytest.skip(f"{direction} from {base}: {limit.status}")
    printed = float(f"{limit.value:.3f}")  # moved by the figure the table prints
    p0 = np.full(M, x0 / N)
    p1 = p0.copy()
    p1[0] = np.clip(x0 / N + (printed if direction == "rise" else -printed), 0.0, 1.0)
    seed = 7 + 100 * BASES.index(base) + 10 * paired + (direction == "fall")
    p, _, _, _ = _draw(np.random.default_rng(seed), p0, p1, paired)
    flagged = float(_bh_flagged(p, 0).mean())
    assert abs(flagged - 0.80) <= 0.04, flagged


def test_positively_correlated_twins_make_the_paired_limit_conservative() -> None:
    """Twins that share part of their fate (after copies before with probability 0.5, else
    is drawn afresh at its own rate) keep the same rates but fewer discordant pairs: the row
    is flagged at least as often as the independent model promises."""
    x0 = 76
    limit = limits(x0, N, paired=True, alpha=Q / M).rise.value
    assert limit is not None
    p0, p1 = x0 / N, x0 / N + limit
    rng = np.random.default_rng(99)
    before = rng.random((SIMS, N)) < p0
    fresh_rate = (p1 - 0.5 * p0) / 0.5  # keeps P(after) = p1
    copy = rng.random((SIMS, N)) < 0.5
    after = np.where(copy, before, rng.random((SIMS, N)) < fresh_rate)
    b = (before & ~after).sum(axis=1)
    c = (~before & after).sum(axis=1)
    moved = mcnemar_midp_array(b, c)
    nulls = np.column_stack([moved, np.full((SIMS, M - 1), 1.0)])
    flagged = float(_bh_flagged(nulls, 0).mean())
    assert flagged >= 0.80, flagged
