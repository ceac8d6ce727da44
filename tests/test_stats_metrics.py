"""Metric rows' statistics (stats/_metrics.py, and the limits in stats/_metric_limits.py),
checked against scipy where it computes the same thing, against exact enumeration where scipy
does not (ties), and by simulation on fixed seeds (the false-alarm rate, the interval's
coverage, the power at a printed limit)."""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pytest_prove.stats import (
    _metric_limits,
    metric_limit,
    metric_test,
    outward_units,
    rank_sum_test,
    signed_rank_null,
    signed_rank_test,
)
from pytest_prove.stats._metric_limits import _GridPairs, _GridSums, _RankSums
from pytest_prove.stats._metrics import _rank_sum_null


def _enumerated(d: np.ndarray) -> tuple[float, float]:
    """P(T+ >= t) and P(T+ <= t) by listing every sign assignment of the nonzero |d|."""
    d = d[d != 0]
    ranks = stats.rankdata(np.abs(d))
    observed = ranks[d > 0].sum()
    sums = np.array([ranks[np.array(signs, dtype=bool)].sum()
                     for signs in itertools.product((0, 1), repeat=len(d))])
    return float(np.mean(sums >= observed - 1e-9)), float(np.mean(sums <= observed + 1e-9))


@pytest.mark.parametrize("n", [1, 4, 9, 17, 40])
def test_without_ties_the_signed_rank_test_is_scipys_exact_test(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(5):
        d = rng.normal(0.2, 1.0, n)
        ours = signed_rank_test(d)
        assert ours.exact
        for p, alternative in ((ours.p, "two-sided"), (ours.p_up, "greater"),
                               (ours.p_down, "less")):
            theirs = stats.wilcoxon(d, method="exact", alternative=alternative).pvalue
            assert p == pytest.approx(theirs, rel=1e-12, abs=1e-15), (n, alternative)


@pytest.mark.parametrize("seed", range(6))
def test_with_ties_and_zeros_the_signed_rank_test_is_exact_enumeration(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    d = rng.integers(-3, 4, 13).astype(float)  # a judge's 1-5 scores differ on few values
    ours = signed_rank_test(d)
    up, down = _enumerated(d)
    assert ours.p_up == pytest.approx(up, rel=1e-12)
    assert ours.p_down == pytest.approx(down, rel=1e-12)
    assert ours.p == pytest.approx(min(1.0, 2 * min(up, down)), rel=1e-12)
    assert ours.n == int(np.count_nonzero(d))


def test_scipys_exact_method_is_not_exact_with_ties_which_is_why_we_count() -> None:
    d = np.array([1, 2, 2, 3, -1, 4, 5, -2, 2, 1, 3, 3], dtype=float)
    up, _ = _enumerated(d)
    assert signed_rank_test(d).p_up == pytest.approx(up, rel=1e-12)
    assert stats.wilcoxon(d, method="exact", alternative="greater").pvalue != pytest.approx(
        up, rel=1e-6)


def test_large_rows_use_scipys_normal_approximation_with_the_tie_correction() -> None:
    rng = np.random.default_rng(7)
    d = np.round(rng.normal(0.05, 1.0, 3000), 1)  # ties and zeros
    ours = signed_rank_test(d)
    assert not ours.exact
    for p, alternative in ((ours.p, "two-sided"), (ours.p_up, "greater"),
                           (ours.p_down, "less")):
        theirs = stats.wilcoxon(d, method="approx", alternative=alternative).pvalue
        assert p == pytest.approx(theirs, rel=1e-9)


def test_the_null_distribution_is_a_symmetric_distribution() -> None:
    weights = np.array([2, 3, 3, 8, 10], dtype=np.int64)  # midranks 1, 1.5, 1.5, 4, 5 doubled
    dist = signed_rank_null(weights)
    assert dist.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.allclose(dist, dist[::-1])
    assert dist[0] == pytest.approx(1 / 32)


def test_the_rank_sum_test_is_scipys() -> None:
    rng = np.random.default_rng(11)
    for n1, n2 in ((5, 6), (30, 40), (200, 180)):
        x = np.round(rng.lognormal(0, 1, n1), 1)
        y = np.round(rng.lognormal(0.3, 1, n2), 1)
        ours = rank_sum_test(x, y)
        for p, alternative in ((ours.p, "two-sided"), (ours.p_up, "greater"),
                               (ours.p_down, "less")):
            assert p == pytest.approx(stats.mannwhitneyu(y, x, alternative=alternative).pvalue,
                                      rel=1e-12)


def test_no_differences_is_no_evidence() -> None:
    same = signed_rank_test(np.zeros(10))
    assert (same.p, same.p_up, same.p_down, same.n) == (1.0, 1.0, 1.0, 0)


def test_the_hodges_lehmann_estimate_is_the_median_of_the_walsh_averages() -> None:
    rng = np.random.default_rng(5)
    before = rng.lognormal(0, 0.5, 25)
    after = before + rng.normal(0.4, 0.3, 25)
    row = metric_test(before, after, paired=True)
    d = after - before
    walsh = [(d[i] + d[j]) / 2 for i in range(25) for j in range(i, 25)]
    assert row.shift == pytest.approx(float(np.median(walsh)), rel=1e-12)
    assert row.low <= row.shift <= row.high
    assert row.relative == pytest.approx(row.shift / np.median(before))
    unpaired = metric_test(before, after, paired=False)
    pairwise = (after[:, None] - before[None, :]).ravel()
    assert unpaired.shift == pytest.approx(float(np.median(pairwise)), rel=1e-12)
    assert "rank-sum" in unpaired.method and "signed-rank" in row.method


@pytest.mark.parametrize("paired, sizes, dropped", [
    (True, (5, 5), None), (True, (6, 6), 0), (True, (10, 10), 8), (True, (20, 20), 52),
    (False, (1, 1), None), (False, (5, 5), 2), (False, (10, 10), 23), (False, (20, 20), 127),
    (False, (4, 9), 4)])
def test_small_intervals_leave_out_what_the_exact_tables_say(paired: bool,
                                                             sizes: tuple[int, int],
                                                             dropped: int | None) -> None:
    """Bug: the ends came from the normal approximation at every size, so 5 twins, or one
    episode against one, got a "95%" interval that covers the shift 94% or 0% of the time
    (the whole range of the differences). Now, below a few hundred, they leave out as many
    Walsh averages (differences) at each end as the classic tables' critical values (paired
    n = 10: 8, 20: 52; unpaired 10 and 10: 23, 20 and 20: 127, 4 and 9: 4), and an interval
    no finite one reaches is unbounded."""
    rng = np.random.default_rng(sum(sizes))
    before, after = rng.normal(size=sizes[0]), rng.normal(size=sizes[1])
    row = metric_test(before, after, paired=paired)
    if dropped is None:
        assert (row.low, row.high) == (-math.inf, math.inf)
        return
    if paired:
        d = after - before
        every = np.sort([(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))])
    else:
        every = np.sort((after[:, None] - before[None, :]).ravel())
    assert (row.low, row.high) == (every[dropped], every[len(every) - 1 - dropped])


def test_the_exact_rank_sum_null_is_enumeration() -> None:
    for m, n in ((3, 4), (2, 7), (5, 5)):
        counts = np.zeros(m * n + 1)
        for chosen in itertools.combinations(range(m + n), m):
            counts[sum(1 for y in set(range(m + n)) - set(chosen) for x in chosen if y > x)] += 1
        assert np.allclose(_rank_sum_null(m, n), counts / counts.sum(), rtol=0, atol=1e-15)


@pytest.mark.parametrize("paired", [True, False])
def test_the_interval_covers_the_shift_as_often_as_it_says(paired: bool) -> None:
    rng = np.random.default_rng(2024 if paired else 2025)
    sims, n, shift = 400, 30, 0.5
    covered = 0
    for _ in range(sims):
        before = rng.lognormal(0, 1, n)
        after = rng.lognormal(0, 1, n)  # twins' differences symmetric about 0, then shifted
        row = metric_test(before, after + shift, paired=paired, level=0.9)
        covered += row.low <= shift <= row.high
    se = math.sqrt(0.9 * 0.1 / sims)
    assert covered / sims >= 0.9 - 2 * se, covered / sims


@pytest.mark.parametrize("paired", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_nothing_changed_is_flagged_at_most_alpha_of_the_time(paired: bool) -> None:
    rng = np.random.default_rng(31 if paired else 32)
    sims, n, alpha = 800, 40, 0.05
    flagged = 0
    for _ in range(sims):
        seed_effect = rng.normal(0, 1, n)  # twins on one seed agree
        before = np.round(np.exp(seed_effect + rng.normal(0, 0.5, n)), 1)
        after = np.round(np.exp(seed_effect + rng.normal(0, 0.5, n)), 1)
        flagged += metric_test(before, after, paired=paired).test.p <= alpha
    se = math.sqrt(alpha * (1 - alpha) / sims)
    assert flagged / sims <= alpha + 2 * se, flagged / sims


@pytest.mark.slow
@pytest.mark.parametrize("paired, better", [(True, "lower"), (False, "higher")])
def test_a_shift_at_the_printed_limit_is_flagged_four_times_in_five(paired: bool,
                                                                     better: str) -> None:
    """A limit is a power over the runs a design gives: each simulated comparison draws its
    own baseline (lognormal, a heavy tail), reads the limit printed for it, and shifts its
    after run by that much in the worse direction."""
    rng = np.random.default_rng(77)
    # At 30 episodes a condition the calibration falls short (0.74 of 300 unpaired, issue 30's
    # note): baselines that small read limits too noisy for the correction's one-number model.
    # bench/metrics.py runs the full calibration.  The paired limit is conservative: its power
    # is about 0.89 (seeds 77, 1, 2 of 100 comparisons each), so 50 comparisons see it over
    # the line 0.69 but for a chance of about 2e-6, and a limit of half the size flagged 0.21
    # of them; the unpaired one's 0.77 keeps 100.
    n, alpha, sims = 50, 0.01, (50 if paired else 100)
    hits = 0
    for _ in range(sims):
        baseline = rng.lognormal(0, 0.6, n)
        limit = metric_limit(baseline, n, paired=paired, better=better,  # type: ignore[arg-type]
                             alpha=alpha, runs=200, seed=int(rng.integers(2**32)))
        assert limit.value is not None and limit.relative is not None
        assert (limit.value > 0) == (better == "lower")
        assert limit.relative == pytest.approx(abs(limit.value) / np.median(baseline))
        printed = float(outward_units(limit.value))
        assert abs(printed) >= abs(limit.value)
        after = rng.lognormal(0, 0.6, n) + printed
        row = metric_test(baseline, after, paired=paired)
        worse_p = row.test.p_up if better == "lower" else row.test.p_down
        hits += worse_p <= alpha / 2
    assert hits / sims >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / sims), hits / sims


def _rank_sum_z_by_ranking(before: np.ndarray, after: np.ndarray) -> float:
    """The rank-sum z (tie-corrected, no continuity correction) of one run, by midranks."""
    pooled = np.concatenate([before, after])
    n1, n2, n = len(before), len(after), len(pooled)
    u = stats.rankdata(pooled)[n1:].sum() - n2 * (n2 + 1) / 2
    _, t = np.unique(pooled, return_counts=True)
    var = n1 * n2 / 12 * ((n + 1) - float(np.sum(t ** 3 - t)) / (n * (n - 1)))
    return 0.0 if var <= 0 else float((u - n1 * n2 / 2) / math.sqrt(var))


@pytest.mark.parametrize("shift", [0.0, 0.5, 1.0, -1.0, 0.3, 1e-17, 2.0])
def test_the_limits_rank_sums_from_counts_are_those_of_ranking_the_runs(shift: float) -> None:
    """The detection limit's simulation (unpaired) counts each run's values instead of
    ranking it again at every shift tried; it must give ranking's z, ties included: shifts
    that make after values tie before values (0.5, 1, -1, 1e-17) and one that makes two
    distinct values one float (1e-17 + 1.0 and 2e-17 + 1.0 are both 1.0)."""
    values = np.array([1e-17, 2e-17, 0.5, 1.0, 1.5, 3.0])
    rng = np.random.default_rng(9)
    before = rng.integers(0, len(values), (40, 12))
    after = rng.integers(0, len(values), (40, 9))
    sums = _RankSums(values, before, after)
    ours = sums.z(shift)
    for r in range(40):
        theirs = _rank_sum_z_by_ranking(values[before[r]], values[after[r]] + shift)
        assert ours[r] == pytest.approx(theirs, rel=1e-12, abs=1e-12), (r, shift)


def test_the_same_baseline_gives_the_same_limit_on_any_machine() -> None:
    baseline = np.random.default_rng(3).lognormal(0, 0.6, 40)
    first = metric_limit(baseline, 40, paired=False, better="lower", alpha=0.01)
    assert first == metric_limit(baseline, 40, paired=False, better="lower", alpha=0.01)
    assert first.value is not None and first.value > 0
    # more episodes after the change see a smaller shift
    more = metric_limit(baseline, 160, paired=False, better="lower", alpha=0.01)
    assert more.value is not None and more.value < first.value
    paired = metric_limit(baseline, 40, paired=True, better="higher", alpha=0.01)
    assert paired.value is not None and paired.value < 0


def test_a_constant_baseline_has_no_limit() -> None:
    """A baseline holding one value (a judge that always said 4) shows no scale to move on:
    adding any small amount to every value was flagged, so it printed a limit of a few
    hundredths while a tenth of the answers dropping a point went unseen."""
    limit = metric_limit(np.full(30, 4.0), 30, paired=True, better="higher", alpha=0.05)
    assert limit.value is None and limit.relative is None


@pytest.mark.parametrize("paired", [True, False], ids=["paired", "unpaired"])
def test_a_judge_scores_limit_is_a_move_on_its_scale_not_a_tie_broken(paired: bool) -> None:
    """A judge's 1-5 scores: the limit was found by adding a shift to every value, which
    breaks each tie of after with before the same way, so at 500 twins it printed -0.002
    while a tenth of the answers dropping one point (a mean of -0.1) was flagged one time in
    five. Now a change moves answers along the scale: the limit shrinks as 1/sqrt(n), near
    (z_q + z_0.8) sd(difference) / sqrt(n), never at a tie-breaking sliver."""
    rng = np.random.default_rng(5)
    scores = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    chances = [0.05, 0.15, 0.4, 0.3, 0.1]
    found = {}
    for n in (50, 130, 500):
        base = rng.choice(scores, size=n, p=chances)
        limit = metric_limit(base, n, paired=paired, better="higher", alpha=0.05 / 4)
        assert limit.value is not None and limit.value < 0
        found[n] = -limit.value
    sd = float(np.sqrt(2 * np.dot(chances, (scores - np.dot(chances, scores)) ** 2)))
    z = float(stats.norm.isf(0.05 / 8) + stats.norm.isf(0.2))
    for n, size in found.items():
        assert 0.7 * z * sd / math.sqrt(n) <= size <= 1.6 * z * sd / math.sqrt(n), (n, size)
    assert found[50] > found[130] > found[500] > 0.1


def test_bad_values_are_refused_with_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="not a finite number"):
        metric_test([1.0, math.nan], [1.0, 2.0], paired=True)
    with pytest.raises(ValueError, match="one after value per before value"):
        metric_test([1.0, 2.0], [1.0], paired=True)
    with pytest.raises(ValueError, match="level"):
        metric_test([1.0], [1.0], paired=False, level=1.0)


@pytest.mark.parametrize("value, printed", [(0.41385, "0.42"), (-12.31, "-13"),
                                            (1234.5, "1300"), (0.000123, "0.00013"),
                                            (0.0999, "0.10"), (5.0, "5.0")])
def test_limits_print_rounded_away_from_zero(value: float, printed: str) -> None:
    assert outward_units(value) == printed
    assert abs(float(printed)) >= abs(value)


# ---------------------------------------------------------------------------
# the smaller CI version of bench/metrics.py (issue 30's calibration), on its own code

_SPEC = importlib.util.spec_from_file_location(
    "prove_bench_metrics", Path(__file__).resolve().parent.parent / "bench" / "metrics.py")
assert _SPEC is not None and _SPEC.loader is not None
bench = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = bench  # its dataclass looks its module up there
_SPEC.loader.exec_module(bench)


@pytest.mark.parametrize("metric", list(bench.METRICS))
def test_the_benchs_batched_tests_are_the_public_tests_row_for_row(metric: str) -> None:
    """bench/metrics.py tests all its rows at once; each row's three p-values must be what
    signed_rank_test or rank_sum_test gives for it, bit for bit (ties, zeros and all)."""
    draw = bench.METRICS[metric][0]
    rng = np.random.default_rng(41)
    latent = rng.normal(size=(60, 30))
    before = draw(rng, latent)
    after = draw(rng, 0.7 * latent + 0.71 * rng.normal(size=latent.shape))
    nulls = bench.SignedRankNulls()
    paired = nulls.ps(after - before)
    unpaired = bench.rank_sum_ps(before, after)
    assert len(nulls) >= 1
    for i in range(len(before)):
        for batch, test in ((paired, signed_rank_test(after[i] - before[i])),
                            (unpaired, rank_sum_test(before[i], after[i]))):
            assert (batch[0][i], batch[1][i], batch[2][i]) == (test.p, test.p_up,
                                                               test.p_down), (metric, i)


@pytest.mark.parametrize("metric", list(bench.METRICS))
@pytest.mark.parametrize("correlation", [0.7, None], ids=["paired", "unpaired"])
def test_sixteen_unchanged_conditions_rarely_flag_a_metric(metric: str,
                                                           correlation: float | None) -> None:
    sims = 400  # bench/metrics.py runs 2,000 per cell; these 400, batched, take under a second
    rng = np.random.default_rng(2026)
    share = bench.size(bench.METRICS[metric][0], correlation, 50, sims, rng,
                       bench.SignedRankNulls())
    assert share <= bench.Q + 2 * math.sqrt(bench.Q * (1 - bench.Q) / sims), share


@pytest.mark.slow
@pytest.mark.parametrize("metric", ["judge (1-5, ties)", "cost (zero-inflated)"])
def test_a_shift_at_the_printed_limit_of_a_tied_metric_is_found_four_times_in_five(
        metric: str) -> None:
    """Unpaired (the design whose limit is not conservative): the judge's few values and the
    cost's zeros, where a baseline sometimes gives no limit at all (counted as a miss)."""
    # The judge's power is near the line (0.84 of 120 on this seed) and keeps 120; the
    # cost's is 0.92-0.98 (four seeds), which 60 comparisons hold over 0.70 but for a chance
    # far below 1e-6.
    sims = 120 if metric.startswith("judge") else 60
    draw, better, _ = bench.METRICS[metric]
    power, relative, printed, _ = bench.power(draw, better, None, 50, sims,
                                              np.random.default_rng(2027),
                                              bench.SignedRankNulls())
    assert relative > 0 and (printed < 0) == (better == "higher")
    assert power >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / sims), power


# --------------------------------------------------------------------------- the limits' speed
# The detection limit's simulation runs in every review: its fast paths (signed-rank midranks
# from sorted integer keys, runs in blocks that stop once the answer is known, the rank sums'
# tie correction updated rather than summed afresh) must give the limits the straightforward
# computation gives, bit for bit. The straightforward computation is written out here.


def _signed_rank_z_by_ranking(d: np.ndarray) -> np.ndarray:
    """Each row's signed-rank z, ranking with scipy (zeros out, ties at midranks)."""
    zeros = (d == 0.0).sum(axis=1, keepdims=True)
    ranks = np.where(d == 0.0, 0.0, stats.rankdata(np.abs(d), axis=1) - zeros)
    plus = np.where(d > 0.0, ranks, 0.0).sum(axis=1)
    var = (ranks ** 2).sum(axis=1) / 4.0
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (plus - ranks.sum(axis=1) / 2.0) / np.sqrt(var)
    return np.where(var > 0.0, z, 0.0)


def _rank_sums_z_afresh(self: _RankSums, shift: float) -> np.ndarray:
    """_RankSums.z with the tie correction summed from the pooled counts at every shift."""
    values, before, after = self._values, self._before, self._after
    shifted = values + shift
    low = np.searchsorted(values, shifted, side="left")
    high = np.searchsorted(values, shifted, side="right")
    beaten = self._below[:, low] + 0.5 * (self._below[:, high] - self._below[:, low])
    u = np.einsum("rk,rk->r", after, beaten)
    tied = high > low
    if len(np.unique(shifted)) == len(shifted):
        pooled = before.copy()
        pooled[:, low[tied]] += after[:, tied]
        ties = ((pooled ** 3 - pooled).sum(axis=1)
                + (after[:, ~tied] ** 3 - after[:, ~tied]).sum(axis=1))
    else:
        grouped = _metric_limits._pooled_groups(values, shifted, before, after)
        ties = (grouped ** 3 - grouped).sum(axis=1)
    n1, n2 = self._n1, self._n2
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (u - n1 * n2 / 2.0) / np.sqrt(var)
    return np.where(var > 0.0, z, 0.0)


def _differences(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    found = [rng.lognormal(0, 0.5, (60, 30)) - rng.lognormal(0, 0.5, (60, 30)),
             rng.choice([-2.0, -1.0, 0.0, 1.0, 2.0], (60, 25)),  # ties and zeros
             np.round(rng.normal(0, 1, (40, 200)), 1),
             np.where(rng.random((50, 40)) < 0.5, 0.0, rng.gamma(2, 1e-3, (50, 40))),
             np.zeros((3, 7)), np.array([[-0.0, 0.0, 1.0, -1.0, 1e-300, -1e-300]]),
             rng.choice([0.1, 0.2, 0.30000000000000004, 0.3], (20, 9))]
    x = rng.lognormal(0, 0.5, 200)  # as the simulation forms them: (after + shift) - twin
    found.append(x[rng.integers(0, 200, (50, 200))] + 0.37 - x[rng.integers(0, 200, (50, 200))])
    return found


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_limits_signed_rank_z_is_scipys_ranking_bit_for_bit(seed: int) -> None:
    for d in _differences(seed):
        ours, theirs = _metric_limits._signed_rank_z(d), _signed_rank_z_by_ranking(d)
        assert ours.tobytes() == theirs.tobytes(), d


def _baselines() -> list[tuple[np.ndarray, int]]:
    rng = np.random.default_rng(11)
    return [(rng.lognormal(0, 0.5, 120), 120),  # a latency
            (rng.choice([1.0, 2.0, 3.0, 3.0, 4.0, 5.0], 80), 80),  # a judge, many ties
            (np.where(rng.random(60) < 0.4, 0.0, rng.gamma(2, 1e-3, 60)), 30),  # a cost
            (np.round(rng.normal(10, 2, 25), 1), 25),
            (np.array([2.0, 2.0, 2.0, 2.5, 7.0]), 5)]


@pytest.mark.parametrize("paired", [True, False], ids=["paired", "unpaired"])
def test_fast_limits_are_the_straightforward_limits_bit_for_bit(
        paired: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = [metric_limit(x, n, paired=paired, better=better, alpha=0.05 / 8)
            for x, n in _baselines() for better in ("lower", "higher")]
    # The straightforward computation: scipy's ranking, every run's z at every shift tried
    # (one block of all the runs), the tie correction summed afresh, the before runs
    # counted afresh against each after sample.
    monkeypatch.setattr(_metric_limits, "_signed_rank_z", _signed_rank_z_by_ranking)
    monkeypatch.setattr(_metric_limits, "_RUNS_BLOCK", 10 ** 9)
    monkeypatch.setattr(_RankSums, "z", _rank_sums_z_afresh)
    monkeypatch.setattr(_GridSums, "z", lambda self, after: _RankSums(
        self._grid, self._before_codes, after).z(0.0))
    monkeypatch.setattr(_GridPairs, "z", lambda self, after: _signed_rank_z_by_ranking(
        self._grid[after] - self._grid[self._twins]))
    plain = [metric_limit(x, n, paired=paired, better=better, alpha=0.05 / 8)
             for x, n in _baselines() for better in ("lower", "higher")]
    assert [(f.value, f.relative) for f in fast] == [(p.value, p.relative) for p in plain]
    assert sum(f.value is not None for f in fast) >= 6  # the limits compared were found


@pytest.mark.parametrize("grid", [[1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 1e-3, 2.5e-3, 0.1],
                                  [-2.0, -0.5, 0.0, 0.25, 7.0], [3.0],
                                  [0.1, 0.2, 0.30000000000000004, 0.3]])
def test_a_grids_rank_statistics_from_counts_are_the_ranked_ones_bit_for_bit(
        grid: list[float]) -> None:
    """A grid limit's z from counts (_GridPairs paired, _GridSums unpaired) is the one
    ranking gives (_signed_rank_z and scipy's ranking; _RankSums at no shift, its tie
    correction summed afresh), ties, zeros and runs of one value and all."""
    values = np.unique(grid)  # sorted and distinct, as a grid limit has them
    rng = np.random.default_rng(len(grid))
    for runs, pairs in ((200, 30), (5, 1), (40, 400)):
        twins = rng.integers(0, len(values), (runs, pairs))
        after = rng.integers(0, len(values), (runs, pairs))
        after[:2] = twins[:2]  # every difference zero
        after[2] = 0  # one value throughout
        ours = _GridPairs(values, twins).z(after)
        assert ours.tobytes() == _metric_limits._signed_rank_z(
            values[after] - values[twins]).tobytes()
        assert ours.tobytes() == _signed_rank_z_by_ranking(
            values[after] - values[twins]).tobytes()
        before = rng.integers(0, len(values), (runs, pairs + 3))
        before[2] = 0
        sums = _RankSums(values, before, after)
        assert _GridSums(values, before).z(after).tobytes() == _rank_sums_z_afresh(
            sums, 0.0).tobytes() == sums.z(0.0).tobytes()


@pytest.mark.parametrize("runs", [1, 7, 100, 1000, 1001])
@pytest.mark.parametrize("power", [0.8, 0.5, 0.8416212335729143, 0.99, 1.0 - 1e-15, 0.001])
def test_runs_needed_is_where_the_flagged_share_reaches_the_power(runs: int,
                                                                  power: float) -> None:
    needed = _metric_limits._runs_needed(runs, power)
    shares = [float(np.mean(np.arange(runs) < k)) for k in range(runs + 1)]
    assert needed == next((k for k, share in enumerate(shares) if share >= power), runs + 1)


@pytest.mark.parametrize("shift", [0.0, 0.5, 1.0, -1.0, 0.3, 1e-17, 2.0, 1.5, -0.5])
def test_the_rank_sums_tie_correction_updated_is_the_one_summed_afresh(shift: float) -> None:
    values = np.array([1e-17, 2e-17, 0.5, 1.0, 1.5, 3.0])
    rng = np.random.default_rng(5)
    sums = _RankSums(values, rng.integers(0, len(values), (300, 40)),
                     rng.integers(0, len(values), (300, 33)))
    assert sums.z(shift).tobytes() == _rank_sums_z_afresh(sums, shift).tobytes()
