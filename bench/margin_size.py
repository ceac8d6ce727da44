"""The exact size of the margin test at the margin, by enumeration (figures printed).

For each design (paired or not, n replicates per run) and margin D, the test's rejection
region at level q is found (``MarginDesign.critical``), and the probability of landing in it
is summed exactly over every outcome, with the true change exactly D, at every base rate of a
grid over [0, 1 - D]: unpaired, before rate p0 and after rate p0 + D; paired, independent
twins (before-only rate p0 (1 - p0 - D)) and positively correlated twins (correlation rho
between a twin's two outcomes, which makes discordant twins rarer). The largest such
probability is the size; it must not exceed q. The same is printed for the score test
referred to the normal distribution (reject when Z <= z_q), which is what the exact test
replaces, and the supremum the test took over its grid is compared with the largest value
on a grid ten times finer.

Run: python bench/margin_size.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from pytest_prove.stats._margin import _region_probability, margin_design

FloatArray = npt.NDArray[np.float64]

Q = 0.05
SIZES = (30, 100, 190, 500)
MARGINS = (0.02, 0.05, 0.1)
RHOS = (0.0, 0.3, 0.6, 0.9)
STEP = 0.0025  # base-rate grid step


@dataclass(frozen=True)
class Size:
    paired: bool
    n: int
    margin: float
    exact: float  # largest size of the exact test over the grid
    where: str
    asymptotic: float  # largest size of the score test referred to the normal
    asymptotic_where: str
    sup_shortfall: float  # finer-grid sup over the test's own sup of its region (1 = exact)


def nuisance_of(paired: bool, p0: FloatArray, margin: float, rho: float) -> FloatArray:
    """The nuisance value of each base rate: the before rate, or (paired) the before-only
    rate of twins whose outcomes have correlation rho (NaN where rho is out of reach)."""
    if not paired:
        return p0
    p1 = p0 + margin
    both = p0 * p1 + rho * np.sqrt(p0 * (1 - p0) * p1 * (1 - p1))
    before_only = p0 - both
    ok = (both <= np.minimum(p0, p1) + 1e-15) & (before_only >= -1e-15)
    return np.where(ok, np.maximum(before_only, 0.0), np.nan)


def size_of(paired: bool, n: int, margin: float, q: float = Q,
            step: float = STEP) -> Size:
    design = margin_design(paired, n, n, margin)
    counts = design.counts(design.critical(q))
    z = float(special.ndtri(q))
    asymptotic_counts = np.asarray((design.order <= z).sum(axis=1), dtype=np.int64)
    base = np.arange(0.0, 1.0 - margin + 1e-12, step)
    best = (-1.0, "")
    best_asym = (-1.0, "")
    for rho in (RHOS if paired else (0.0,)):
        nu = nuisance_of(paired, base, margin, rho)
        keep = ~np.isnan(nu)
        for region, slot in ((counts, 0), (asymptotic_counts, 1)):
            sizes = _region_probability(paired, n, n, region, nu[keep], margin)
            i = int(np.argmax(sizes))
            where = f"p0={base[keep][i]:.4f}" + (f" rho={rho:g}" if paired else "")
            if slot == 0 and sizes[i] > best[0]:
                best = (float(sizes[i]), where)
            if slot == 1 and sizes[i] > best_asym[0]:
                best_asym = (float(sizes[i]), where)
    # The test's sup against a grid ten times finer over the whole nuisance range.
    fine = np.linspace(design.grid[0], design.grid[-1], 10 * design.grid.size)
    on_fine = float(_region_probability(paired, n, n, counts, fine, margin).max())
    own = design.sup_tail(design.critical(q))
    return Size(paired, n, margin, best[0], best[1], best_asym[0], best_asym[1],
                on_fine / own if own > 0 else math.nan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 30 and 100 only")
    args = parser.parse_args()
    sizes = SIZES[:2] if args.quick else SIZES
    print(f"q = {Q}; base rates 0 to 1 - D in steps of {STEP}; paired: rho in {RHOS}")
    print(f"{'design':<9}{'n':>5}{'D':>6}{'exact size':>12}  {'where':<22}"
          f"{'score+normal':>13}  {'where':<22}{'fine/own sup':>13}{'s':>7}")
    worst: tuple[float, str] = (-1.0, "")
    for paired in (False, True):
        for n in sizes:
            for margin in MARGINS:
                start = time.perf_counter()
                s = size_of(paired, n, margin)
                took = time.perf_counter() - start
                label = "paired" if paired else "unpaired"
                print(f"{label:<9}{n:>5}{margin:>6}{s.exact:>12.5f}  {s.where:<22}"
                      f"{s.asymptotic:>13.5f}  {s.asymptotic_where:<22}"
                      f"{s.sup_shortfall:>13.6f}{took:>7.1f}")
                if s.exact > worst[0]:
                    worst = (s.exact, f"{label} n={n} D={margin} {s.where}")
    print(f"largest exact size: {worst[0]:.5f} at {worst[1]} "
          f"({'<=' if worst[0] <= Q else 'ABOVE'} q = {Q})")


if __name__ == "__main__":
    main()
