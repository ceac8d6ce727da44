"""The design from the baseline's rates, by simulation (fixed seeds, figures printed).

Each sweep has M conditions, one failure event each, whose true failure rates are drawn
the way a real baseline's are (scenarios below). A baseline of BASELINE replicates per
condition is drawn; each condition's exact 99% interval on its rate (``baseline_intervals``)
gives the design's replicates, the fewest at which every condition sees a rise or fall of
max_mde at every rate inside its interval (``rates_design_check``'s search). The sweep then
runs those replicates against the baseline's first ones (twins by replicate when paired,
twins independent given the rate; Fisher's test on the two runs' first n otherwise), and is
read as the engine reads it: each row's exact p-value (McNemar mid-p or Fisher), Holm over
the M rows at q, a row counted when its Holm p is at most q.

What it shows, per scenario and design:

1. nothing changed: any worse-or-safer at most q + 2 s.e. (the test is the same exact test;
   the replicates now depend on the baseline it reads, which this measures);
2. one condition rose by max_mde: detected at least 0.80 - 2 s.e. of the time, at fewer
   replicates than any base rate asks (their mean is printed beside it); the condition is
   drawn at random, or is the weakest (its true rate nearest (1 - max_mde)/2, where power
   is least: the one the design rests on).
3. the margin (``--margin D``; ``margin_rates_check``'s claim at the fewest replicates that
   pass it, each row tested in the exact test's rejection region as a comparison tests it):
   nothing changed, every row shown within the margin at least 0.80 - 2 s.e. of the time;
   one row worse by exactly D, the claim made at most q + 2 s.e. of the time.

Run: python bench/design_rates.py [--sweeps N] [--margin D] [--margin-only]
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from pytest_prove.stats import baseline_intervals, holm, rates_design_check
from pytest_prove.stats._design_rates import _sees
from pytest_prove.stats._exact import fisher_p, mcnemar_midp_array
from pytest_prove.stats._margin_design import _fewest, _quick_region
from pytest_prove.stats._margin_rates import _claim, _guess
from pytest_prove.stats._replicates import _smallest_n

Q = 0.05
M = 16
MAX_MDE = 0.20
POWER = 0.8
BASELINE = 200  # replicates per condition in the baseline (above any design asked)
SEED = 20261205

Rates = Callable[[np.random.Generator], npt.NDArray[np.float64]]

#: How each sweep's true failure rates are drawn: agents fail rarely in most conditions and
#: often in a few; a sweep of rates near the worst base rate asks what any rate asks.
SCENARIOS: dict[str, Rates] = {
    "low, uniform 0.01..0.10": lambda rng: rng.uniform(0.01, 0.10, M),
    "rare failures, Beta(0.8, 10)": lambda rng: rng.beta(0.8, 10.0, M),
    "near the worst, 0.3..0.5": lambda rng: rng.uniform(0.3, 0.5, M),
}


@functools.lru_cache(maxsize=1 << 14)
def fewest(paired: bool, counts: tuple[int, ...]) -> int:
    """The design's replicates from the baseline's counts (each of BASELINE)."""
    intervals = baseline_intervals([(x, BASELINE) for x in counts])
    found = _smallest_n(lambda n: _sees(paired, n, intervals, Q / M, POWER, MAX_MDE, None),
                        1, BASELINE)
    assert found is not None
    return found


def _counted(paired: bool, before: npt.NDArray[np.bool_], after: npt.NDArray[np.bool_]
             ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Which rows count (Holm p at most q), and which of them rose."""
    n = after.shape[1]
    b0 = before[:, :n]
    if paired:
        b = (b0 & ~after).sum(axis=1)
        c = (~b0 & after).sum(axis=1)
        p = mcnemar_midp_array(b, c)
        rose = c > b
    else:
        x0, x1 = b0.sum(axis=1), after.sum(axis=1)
        p = np.array([fisher_p(int(a), n, int(z), n) for a, z in zip(x0, x1, strict=True)])
        rose = x1 > x0
    return holm(p) <= Q, rose


def simulate(paired: bool, rates: Rates, sweeps: int, seed: int = SEED
             ) -> dict[str, float]:
    """Run the sweeps: the false alarm rate, the power at max_mde and the mean replicates."""
    rng = np.random.default_rng(seed)
    alarms = detected = weakest = moved = 0
    sizes = []
    for _ in range(sweeps):
        p = rates(rng)
        before = rng.random((M, BASELINE)) < p[:, None]
        n = fewest(paired, tuple(int(x) for x in before.sum(axis=1)))
        sizes.append(n)
        # nothing changed
        after = rng.random((M, n)) < p[:, None]
        counted, _ = _counted(paired, before, after)
        alarms += bool(counted.any())
        # one condition rose by max_mde (one with room for it)
        room = np.flatnonzero(p <= 1.0 - MAX_MDE)
        if room.size:
            moved += 1
            worst = int(room[np.argmin(np.abs(p[room] - (1.0 - MAX_MDE) / 2.0))])
            for j, hits in ((int(rng.choice(room)), "random"), (worst, "weakest")):
                p1 = p.copy()
                p1[j] += MAX_MDE
                after = rng.random((M, n)) < p1[:, None]
                counted, rose = _counted(paired, before, after)
                if hits == "random":
                    detected += bool(counted[j] and rose[j])
                else:
                    weakest += bool(counted[j] and rose[j])
    return {"false_alarm": alarms / sweeps, "power": detected / max(moved, 1),
            "power_weakest": weakest / max(moved, 1),
            "moved": float(moved), "replicates": float(np.mean(sizes))}


@functools.lru_cache(maxsize=1 << 14)
def margin_fewest(paired: bool, counts: tuple[int, ...], margin: float) -> int:
    """The margin design's replicates from the baseline's counts (each of BASELINE)."""
    rows = list(baseline_intervals([(x, BASELINE) for x in counts]))

    def passes(n: int) -> bool:
        return _claim(paired, n, margin, Q, rows, 1.0)[0] >= POWER

    found = _fewest(passes, _guess(paired, margin, Q, POWER ** (1.0 / M), 1.0, rows), 0)
    assert found is not None
    return found


def _within(paired: bool, n: int, margin: float, before: npt.NDArray[np.bool_],
            after: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Which rows the margin test shows within the margin at level q (its exact region)."""
    counts = _quick_region(paired, n, margin, Q)
    b0 = before[:, :n]
    if paired:
        first, second = (b0 & ~after).sum(axis=1), (~b0 & after).sum(axis=1)
    else:
        first, second = b0.sum(axis=1), after.sum(axis=1)
    return np.asarray(second < counts[first])


def simulate_margin(paired: bool, rates: Rates, sweeps: int, margin: float,
                    seed: int = SEED) -> dict[str, float]:
    """The margin's sweeps: how often the claim holds when nothing changed (its power),
    how often it is made when one row got worse by exactly the margin (its size), and the
    mean replicates."""
    rng = np.random.default_rng(seed)
    held = wrong = moved = 0
    sizes = []
    for _ in range(sweeps):
        p = rates(rng)
        before = rng.random((M, BASELINE)) < p[:, None]
        n = margin_fewest(paired, tuple(int(x) for x in before.sum(axis=1)), margin)
        sizes.append(n)
        after = rng.random((M, n)) < p[:, None]
        held += bool(_within(paired, n, margin, before, after).all())
        room = np.flatnonzero(p <= 1.0 - margin)
        if room.size:
            j = int(rng.choice(room))
            p1 = p.copy()
            p1[j] += margin
            after = rng.random((M, n)) < p1[:, None]
            wrong += bool(_within(paired, n, margin, before, after).all())
            moved += 1
    return {"claim": held / sweeps, "size": wrong / max(moved, 1), "moved": float(moved),
            "replicates": float(np.mean(sizes))}


def any_rate(paired: bool) -> int:
    """The replicates the design check asks for any base rate."""
    found = rates_design_check(1, M, [(0.0, 1.0)] * M, paired=paired, q=Q, max_mde=MAX_MDE)
    assert found.fewest_any_rate is not None
    return found.fewest_any_rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sweeps", type=int, default=2000)
    parser.add_argument("--margin", type=float, default=0.15)
    parser.add_argument("--margin-only", action="store_true")
    args = parser.parse_args()
    sweeps = args.sweeps
    se_null = math.sqrt(Q * (1 - Q) / sweeps)
    ok = True
    print(f"{'design':9} {'scenario':30} {'sweeps':>6} {'figure':>16} {'value':>7} "
          f"{'bound':>8} pass")
    for paired in () if args.margin_only else (True, False):
        design = "paired" if paired else "unpaired"
        print(f"# {design}: {any_rate(paired)} replicates for any base rate; q {Q}, "
              f"{M} conditions, max_mde {MAX_MDE}, baseline of {BASELINE} a condition")
        for name, rates in SCENARIOS.items():
            start = time.perf_counter()
            found = simulate(paired, rates, sweeps)
            se_power = math.sqrt(POWER * (1 - POWER) / found["moved"])
            rows = [("any worse/safer", found["false_alarm"], f"<={Q + 2 * se_null:.4f}",
                     found["false_alarm"] <= Q + 2 * se_null),
                    ("detected", found["power"], f">={POWER - 2 * se_power:.4f}",
                     found["power"] >= POWER - 2 * se_power),
                    ("weakest detected", found["power_weakest"],
                     f">={POWER - 2 * se_power:.4f}",
                     found["power_weakest"] >= POWER - 2 * se_power),
                    ("replicates", found["replicates"], "(mean)", True)]
            for figure, value, bound, holds in rows:
                ok &= holds
                print(f"{design:9} {name:30} {sweeps:>6} {figure:>16} {value:>7.4f} "
                      f"{bound:>8} {'ok' if holds else 'FAIL'}")
            print(f"#   {time.perf_counter() - start:.0f} s")
    for paired in (True, False):
        design = "paired" if paired else "unpaired"
        print(f"# margin {args.margin}, {design}: the claim over {M} rows at q {Q}; "
              f"nothing changed, and one row worse by exactly the margin")
        for name in ("low, uniform 0.01..0.10",):
            start = time.perf_counter()
            found = simulate_margin(paired, SCENARIOS[name], sweeps, args.margin)
            se_claim = math.sqrt(POWER * (1 - POWER) / sweeps)
            se_size = math.sqrt(Q * (1 - Q) / found["moved"])
            rows = [("claim held", found["claim"], f">={POWER - 2 * se_claim:.4f}",
                     found["claim"] >= POWER - 2 * se_claim),
                    ("claim at D", found["size"], f"<={Q + 2 * se_size:.4f}",
                     found["size"] <= Q + 2 * se_size),
                    ("replicates", found["replicates"], "(mean)", True)]
            for figure, value, bound, holds in rows:
                ok &= holds
                print(f"{design:9} {name:30} {sweeps:>6} {figure:>16} {value:>7.4f} "
                      f"{bound:>8} {'ok' if holds else 'FAIL'}")
            print(f"#   {time.perf_counter() - start:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
