"""The design check from the baseline's rates (stats/_design_rates.py) against brute force.

The worst limit within each row's interval must be the largest limit over every rate k/n in
the interval and its two ends, rises and falls both, each limit computed here by enumerating
every outcome of the test (Fisher's or McNemar's mid-p p-value table by table, twins at a
discordance ratio cell by cell) and bisecting on the change; the replicates it asks must
pass that brute force and one fewer must fail it.
"""

from __future__ import annotations

import functools
import importlib.util
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

from pytest_prove.stats import (
    baseline_intervals,
    clopper_pearson_interval,
    design_check,
    fisher_exact_p,
    mcnemar_midp,
    rates_design_check,
)

Q, POWER, MDE = 0.2, 0.8, 0.4  # one row at alpha 0.2: designs small enough to enumerate


@functools.cache
def _fisher_rise_table(n: int, alpha: float) -> np.ndarray:
    """reject[x1, x2]: Fisher's two-sided p at most alpha and the after rate higher."""
    table = np.zeros((n + 1, n + 1), dtype=bool)
    for x1 in range(n + 1):
        for x2 in range(x1 + 1, n + 1):
            table[x1, x2] = fisher_exact_p(x1, n, x2, n) <= alpha
    return table


@functools.cache
def _mcnemar_rise_table(n: int, alpha: float) -> np.ndarray:
    """reject[b, c]: the mid-p at most alpha with more after-only twins (c > b)."""
    table = np.zeros((n + 1, n + 1), dtype=bool)
    for b in range(n + 1):
        for c in range(b + 1, n + 1 - b):
            table[b, c] = mcnemar_midp(b, c) <= alpha
    return table


def _power(paired: bool, kappa: float, n: int, p0: float, p1: float, alpha: float) -> float:
    """Exact power of a rise from p0 to p1, every outcome summed."""
    k = np.arange(n + 1)
    if not paired:
        before, after = stats.binom.pmf(k, n, p0), stats.binom.pmf(k, n, p1)
        return float(before @ _fisher_rise_table(n, alpha) @ after)
    pb = min(max(kappa * p0 * (1 - p1), max(0.0, p0 - p1)), min(p0, 1 - p1))
    pc = pb + p1 - p0
    b, c = k[:, None], k[None, :]
    rest = n - b - c
    valid = rest >= 0
    # the multinomial probability of (b, c, the rest), cell by cell
    log_pmf = (special.gammaln(n + 1) - special.gammaln(b + 1) - special.gammaln(c + 1)
               - special.gammaln(np.maximum(rest, 0) + 1) + special.xlogy(b, pb)
               + special.xlogy(c, pc) + special.xlogy(np.maximum(rest, 0),
                                                        max(0.0, 1 - pb - pc)))
    cells = _mcnemar_rise_table(n, alpha) & valid
    return float(np.exp(log_pmf[cells]).sum())


def _rise_limit(paired: bool, kappa: float, n: int, p0: float, alpha: float) -> float:
    """The smallest rise from p0 seen with POWER (inf: none), by bisection on the change."""
    if _power(paired, kappa, n, p0, 1.0, alpha) < POWER:
        return float("inf")
    lo, hi = 0.0, 1.0 - p0
    for _ in range(30):
        mid = (lo + hi) / 2
        if _power(paired, kappa, n, p0, p0 + mid, alpha) >= POWER:
            hi = mid
        else:
            lo = mid
    return hi


def _brute(paired: bool, kappa: float, n: int, intervals: list[tuple[float, float]]
           ) -> float:
    """The largest rise or fall limit over every k/n in the intervals and their ends (a fall
    from p computed as the rise from 1 - p, which both tests are symmetric under)."""
    worst = 0.0
    for lo, hi in intervals:
        rates = {lo, hi} | {k / n for k in range(n + 1) if lo - 1e-12 <= k / n <= hi + 1e-12}
        for p in rates:
            if p <= 1 - MDE + 1e-12:
                worst = max(worst, _rise_limit(paired, kappa, n, p, Q))
            if p >= MDE - 1e-12:
                worst = max(worst, _rise_limit(paired, kappa, n, 1 - p, Q))
    return worst


CASES = [
    # (paired, kappa, baseline counts (x, n) of each row)
    (False, 1.0, [(1, 20)]),
    (False, 1.0, [(10, 20)]),
    (False, 1.0, [(19, 20), (2, 12)]),
    (True, 1.0, [(1, 20)]),
    (True, 1.0, [(6, 15)]),
    (True, 0.4, [(2, 20)]),
]


@pytest.mark.parametrize(("paired", "kappa", "counts"), CASES)
def test_the_worst_limit_within_the_intervals_equals_brute_force(
        paired: bool, kappa: float, counts: list[tuple[int, int]]) -> None:
    intervals = list(baseline_intervals(counts))
    m = len(counts)
    for n in (6, 11, 16):
        found = rates_design_check(n, m, intervals, paired=paired, q=Q * m, max_mde=MDE,
                                   power=POWER, kappa=None if kappa == 1.0 else kappa)
        expected = _brute(paired, kappa, n, intervals)
        if np.isinf(expected):
            assert found.worst_limit is None, (n, found)
        else:
            assert found.worst_limit == pytest.approx(expected, abs=1e-6), (n, counts)
        assert found.ok == (expected <= MDE + 1e-9), (n, expected)


@pytest.mark.parametrize(("paired", "kappa", "counts"), CASES)
def test_the_replicates_asked_pass_by_brute_force_and_one_fewer_does_not(
        paired: bool, kappa: float, counts: list[tuple[int, int]]) -> None:
    intervals = list(baseline_intervals(counts))
    m = len(counts)
    found = rates_design_check(4, m, intervals, paired=paired, q=Q * m, max_mde=MDE,
                               power=POWER, kappa=None if kappa == 1.0 else kappa)
    n = found.fewest
    assert n is not None and n <= 40 and found.replicates_needed == n
    assert _brute(paired, kappa, n, intervals) <= MDE + 1e-9
    assert _brute(paired, kappa, n - 1, intervals) > MDE


def test_low_baseline_rates_ask_fewer_replicates_and_rates_near_a_half_as_many() -> None:
    low = rates_design_check(190, 16, baseline_intervals([(10, 190)] * 16), paired=False)
    assert low.ok and low.ok_any_rate and not low.only_from_rates
    assert low.fewest_any_rate == 188  # docs/statistics.md's figure for any rate
    assert low.fewest is not None and low.fewest < 140 and low.replicates_needed is None
    half = rates_design_check(190, 16, baseline_intervals([(95, 190)] * 16), paired=False)
    assert half.fewest == half.fewest_any_rate == 188
    # 150 replicates fail for any rate and pass only thanks to the baseline's rates
    only = rates_design_check(150, 16, baseline_intervals([(10, 190)] * 16), paired=False)
    assert only.ok and not only.ok_any_rate and only.only_from_rates
    assert design_check(150, 16, paired=False).ok is False


def test_a_row_the_baseline_does_not_hold_is_read_at_every_base_rate() -> None:
    rows = [(10, 190)] * 15 + [(0, 0)]
    found = rates_design_check(150, 16, baseline_intervals(rows), paired=False)
    whole = design_check(150, 16, paired=False)
    assert not found.ok
    assert found.worst_limit == whole.worst_limit
    assert found.replicates_needed == found.fewest_any_rate == 188


def test_the_intervals_are_clopper_pearson_at_99_percent() -> None:
    assert baseline_intervals([(3, 50), (0, 0)]) == (clopper_pearson_interval(3, 50, 0.99),
                                                     (0.0, 1.0))


@pytest.mark.parametrize("bad", [[(0.3, 0.2)], [(-0.1, 0.2)], [(0.1, 0.2), (0.1, 0.3)]])
def test_bad_intervals_are_refused(bad: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError, match="interval"):
        rates_design_check(20, 1, bad, paired=False)


def _rates_one_interval_at_a_time(n: int, intervals: list[tuple[float, float]]) -> np.ndarray:
    found = [np.array([lo, hi], dtype=np.float64) for lo, hi in intervals]
    for lo, hi in intervals:
        k = np.arange(int(np.ceil(lo * n - 1e-9)), int(np.floor(hi * n + 1e-9)) + 1)
        found.append(k[(k >= 0) & (k <= n)] / n)
    rates = np.concatenate(found) if found else np.zeros(0)
    return np.unique(np.clip(rates, 0.0, 1.0))


def test_the_rates_inside_the_intervals_are_those_found_one_interval_at_a_time() -> None:
    """The design checks' base rates (every k/n inside the rows' intervals, and their ends),
    found for every interval at once, are those found one interval at a time, bit for bit:
    baselines' intervals, a new row's [0, 1], arbitrary ones, none, n = 1 and large n."""
    from pytest_prove.stats._design_rates import _rates_in

    rng = np.random.default_rng(12)
    for _ in range(150):
        rows, size = int(rng.integers(0, 20)), int(rng.integers(0, 300))
        intervals = list(baseline_intervals([(int(rng.integers(0, size + 1)), size)
                                             for _ in range(rows)]))
        if rng.random() < 0.2:
            intervals.append((0.0, 1.0))
        if rng.random() < 0.2:
            intervals = [(float(a), float(b)) for a, b in np.sort(rng.random((rows, 2)), axis=1)]
        for n in (1, 2, int(rng.integers(1, 2000))):
            ours = _rates_in(n, intervals)
            assert ours.tobytes() == _rates_one_interval_at_a_time(n, intervals).tobytes(), (
                n, intervals)
            assert ours.dtype == np.float64


def _bench() -> Any:
    """bench/design_rates.py, the simulation this test runs a small version of."""
    path = Path(__file__).resolve().parent.parent / "bench" / "design_rates.py"
    spec = importlib.util.spec_from_file_location("bench_design_rates", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("paired", [True, False], ids=["paired", "unpaired"])
def test_the_design_from_rates_keeps_power_and_size_by_simulation(paired: bool) -> None:
    """bench/design_rates.py at 150 sweeps (fixed seed), rates drawn low as a real agent's:
    fewer replicates than any rate asks, the weakest condition moved by max_mde caught at
    least 0.8 - 3 s.e. of the time, and nothing changed read worse or safer at most
    q + 3 s.e. of the time."""
    bench = _bench()
    sweeps = 150
    found = bench.simulate(paired, bench.SCENARIOS["low, uniform 0.01..0.10"], sweeps)
    assert found["replicates"] < bench.any_rate(paired) - 20
    power_se = math.sqrt(0.8 * 0.2 / found["moved"])
    assert found["power_weakest"] >= 0.8 - 3 * power_se, found
    assert found["power"] >= 0.8 - 3 * power_se, found
    assert found["false_alarm"] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sweeps), found


def test_the_margin_claim_from_rates_is_the_product_of_each_rows_weakest_in_its_interval(
        ) -> None:
    from pytest_prove.stats import margin_design_check, margin_rates_check
    from pytest_prove.stats._margin_design import within_power

    counts = [(1, 30), (6, 30), (0, 0)]
    intervals = baseline_intervals(counts)
    for paired in (False, True):
        for n in (25, 40):
            found = margin_rates_check(n, 3, intervals, paired=paired, margin=0.3, q=0.2)
            # the row the baseline does not hold: the check over every base rate
            expected = margin_design_check(n, 3, paired=paired, margin=0.3,
                                           q=0.2).weakest_power
            for lo, hi in intervals[:2]:
                rates = sorted({lo, hi} | {k / n for k in range(n + 1) if lo <= k / n <= hi})
                expected *= min(float(within_power(paired, n, 0.3, 0.2, np.array([r]))[0])
                                for r in rates)
            assert found.claim_power == pytest.approx(expected, rel=1e-9)
            assert found.ok == (expected >= 0.8)
    # every row at any rate: the check over every base rate
    whole = margin_rates_check(40, 2, [(0.0, 1.0)] * 2, paired=False, margin=0.3, q=0.2)
    plain = margin_design_check(40, 2, paired=False, margin=0.3, q=0.2)
    assert whole.claim_power == pytest.approx(plain.weakest_power ** 2)
    assert whole.ok == plain.ok


def test_the_margin_replicates_from_rates_pass_and_one_fewer_does_not() -> None:
    from pytest_prove.stats import margin_rates_check

    intervals = baseline_intervals([(2, 40), (3, 40)])
    found = margin_rates_check(5, 2, intervals, paired=False, margin=0.25, q=0.1)
    n = found.replicates_needed
    assert not found.ok and n is not None and found.replicates_exact
    assert margin_rates_check(n, 2, intervals, paired=False, margin=0.25, q=0.1).ok
    assert not margin_rates_check(n - 1, 2, intervals, paired=False, margin=0.25, q=0.1).ok
    # fewer than any base rate asks
    any_rate = margin_rates_check(5, 2, [(0.0, 1.0)] * 2, paired=False, margin=0.25, q=0.1)
    assert any_rate.replicates_needed is not None and n < any_rate.replicates_needed


@pytest.mark.parametrize("paired", [False, True], ids=["unpaired", "paired"])
def test_the_block_search_within_wide_intervals_equals_brute_force(paired: bool) -> None:
    """More than 24 rates to read: the worst limit comes from the block search (the one over
    every base rate, on the intervals' rates), checked against every rate enumerated."""
    from pytest_prove.stats._design_rates import _rises

    intervals = list(baseline_intervals([(12, 30), (2, 30)]))
    for n in (40, 47):
        assert np.unique(_rises(n, intervals, MDE)[0]).size > 24
        found = rates_design_check(n, 2, intervals, paired=paired, q=Q * 2, max_mde=MDE,
                                   power=POWER)
        expected = _brute(paired, 1.0, n, intervals)
        assert found.worst_limit == pytest.approx(expected, abs=1e-6)
        assert found.ok == (expected <= MDE + 1e-9)


def test_a_rate_near_one_is_read_as_a_fall_from_where_the_row_shows_it() -> None:
    intervals = baseline_intervals([(95, 100)])  # [0.86, 0.99]: no room for a rise of 0.2
    found = rates_design_check(60, 1, intervals, paired=False)
    assert found.worst_direction == "fall"
    assert intervals[0][0] <= found.worst_base_rate <= intervals[0][1]
    # the same as a rise from the mirrored rate, read the other way
    mirrored = rates_design_check(60, 1, [(1 - intervals[0][1], 1 - intervals[0][0])],
                                  paired=False)
    assert mirrored.worst_direction == "rise"
    assert found.worst_limit == pytest.approx(mirrored.worst_limit)
    assert found.worst_base_rate == pytest.approx(1 - mirrored.worst_base_rate)
