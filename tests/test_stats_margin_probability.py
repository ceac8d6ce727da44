"""The margin test's region probability (``_margin._block_probability``) against the formula
it replaced: scipy's ``bdtr`` at every (nuisance value, first count), kept here as the
reference. The fast one builds each second binomial's CDF once per row (unpaired) or carries it
from column to column (paired); both must agree with the reference to 1e-12."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special  # type: ignore[import-untyped]

from pytest_prove.stats import _margin
from pytest_prove.stats._margin import _block_probability, _quick_counts


def _log_pmf(k: np.ndarray, n: float, p: np.ndarray) -> np.ndarray:
    coef = special.gammaln(n + 1) - special.gammaln(k + 1) - special.gammaln(n - k + 1)
    return np.asarray(coef + special.xlogy(k, p) + special.xlog1py(n - k, -p))


def _reference(paired: bool, n0: int, n1: int, counts: np.ndarray, nu: np.ndarray,
               change: float, first_lo: int, first_hi: int) -> np.ndarray:
    """The block probability as it was computed before: bdtr per row and first count."""
    rows = nu.shape[0]
    cols = first_hi - first_lo + 1
    i = np.arange(first_lo, first_hi + 1, dtype=np.int64)
    k = np.broadcast_to(counts[None, first_lo:first_hi + 1] - 1, (rows, cols))
    base = np.clip(nu, 0.0, 1.0)
    first = np.exp(_log_pmf(i[None, :].astype(np.float64), n0, base))
    if paired:
        after = np.clip(nu + change, 0.0, 1.0)
        ratio = np.clip(after / np.maximum(1.0 - base, 1e-300), 0.0, 1.0)
        size = np.broadcast_to(n0 - i[None, :], (rows, cols))
    else:
        ratio = np.clip(nu + change, 0.0, 1.0)
        size = np.broadcast_to(np.int64(n1), (rows, cols))
    inside = np.minimum(np.maximum(k, 0), size)
    cdf = special.bdtr(inside, size, np.broadcast_to(ratio, (rows, cols)))
    cdf = np.where(k < 0, 0.0, np.where(k >= size, 1.0, cdf))
    return np.asarray((first * cdf).sum(axis=1))


def _designs(paired: bool, seed: int) -> list[tuple[int, int, float, np.ndarray, np.ndarray]]:
    """Random designs: sizes, margins, a region (a score's, or arbitrary counts with jumps),
    and a block of sorted nuisance values over the whole range, ends included."""
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(12):
        n0 = int(rng.integers(1, 1400))
        n1 = n0 if paired else int(rng.integers(1, 1400))
        margin = float(rng.choice([0.02, 0.05, 0.1, 0.2, 0.35, -0.1]))
        lo, hi = _margin._nuisance_range(paired, margin)
        nu = np.sort(np.concatenate([[lo, hi], rng.uniform(lo, hi, 30)]))[:, None]
        if rng.random() < 0.5 and max(n0, n1) < 1400:
            counts = _quick_counts(paired, n0, n1, margin, float(rng.normal(-1.6, 0.5)))
        else:  # any region: counts with jumps of every size, off both ends
            top = n0 + 2 if paired else n1 + 2
            counts = np.sort(rng.integers(-1, top, n0 + 1))
            if paired:
                counts = rng.permutation(counts)
        found.append((n0, n1, margin, counts.astype(np.int64), nu))
    return found


@pytest.mark.parametrize("paired", [False, True], ids=["unpaired", "paired"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_block_probability_equals_the_bdtr_formula(paired: bool, seed: int) -> None:
    for n0, n1, margin, counts, nu in _designs(paired, seed):
        for change in (margin, 0.0):
            for first_lo, first_hi in ((0, n0), (n0 // 3, (2 * n0) // 3)):
                new = _block_probability(paired, n0, n1, counts, nu, change, first_lo,
                                         first_hi)
                old = _reference(paired, n0, n1, counts, nu, change, first_lo, first_hi)
                assert np.abs(new - old).max() <= 1e-12, (n0, n1, margin, change,
                                                          np.abs(new - old).max())


def test_the_region_probability_asks_bdtr_for_few_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit's cost: a design check at 1,237 replicates took 18 s of CPU, 22.6 s of 27.9
    profiled in bdtr at every (nuisance value, first count). The unpaired CDF now asks it
    nothing, the paired one one column in 16 (and where the region jumps)."""
    cells = {"asked": 0}
    real = special.bdtr

    def counting(k: object, n: object, p: object) -> object:
        found = real(k, n, p)
        cells["asked"] += int(np.size(found))
        return found

    monkeypatch.setattr(special, "bdtr", counting)
    for paired, n in ((False, 300), (True, 300)):
        cells["asked"] = 0
        counts = _quick_counts(paired, n, n, 0.1, -1.645)
        nu = np.linspace(*_margin._nuisance_range(paired, 0.1), 32)[:, None]
        _block_probability(paired, n, n, counts, nu, 0.1, 0, n)
        every = nu.shape[0] * (n + 1)
        assert cells["asked"] <= (every / 8 if paired else 0), (paired, cells, every)
