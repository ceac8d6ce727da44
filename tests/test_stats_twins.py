"""Twin agreement and the paired test's power at an observed agreement (stats/_twins.py),
checked by exact enumeration of every table of twins and against the engine's own
independent-twins power and design check (kappa = 1)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from pytest_prove.stats import (
    design_check,
    detection_power,
    limits,
    margin_design_check,
    mcnemar_midp,
)
from pytest_prove.stats._twins import (
    agreement,
    discordance_power,
    pooled_kappa,
    twin_design_check,
    twin_limit,
    twin_limits,
    twin_power,
    twin_replicates,
)


def _enumerated_power(n: int, pb: float, pc: float, alpha: float) -> float:
    """Every (b, c) of n twins with its multinomial probability; rejected toward c when
    c > b and the mid-p is at most alpha."""
    total = 0.0
    rest = 1.0 - pb - pc
    for b, c in itertools.product(range(n + 1), repeat=2):
        if b + c > n or c <= b or mcnemar_midp(b, c) > alpha:
            continue
        log_p = (math.lgamma(n + 1) - math.lgamma(b + 1) - math.lgamma(c + 1)
                 - math.lgamma(n - b - c + 1))
        for count, share in ((b, pb), (c, pc), (n - b - c, rest)):
            if count:
                log_p += count * math.log(share) if share > 0 else -math.inf
        total += math.exp(log_p)
    return total


@pytest.mark.parametrize("n", [1, 5, 12, 23])
@pytest.mark.parametrize("alpha", [0.3, 0.05, 0.005])
def test_discordance_power_equals_every_table_enumerated(n: int, alpha: float) -> None:
    for pb, pc in ((0.05, 0.2), (0.0, 0.3), (0.2, 0.2), (0.3, 0.1), (0.01, 0.9)):
        assert discordance_power(n, pb, pc, alpha) == pytest.approx(
            _enumerated_power(n, pb, pc, alpha), abs=1e-12), (pb, pc)


@pytest.mark.parametrize("p0, p1, n", [(0.3, 0.45, 100), (0.1, 0.3, 50), (0.5, 0.3, 200),
                                       (0.0, 0.2, 40), (0.9, 1.0, 30)])
def test_kappa_one_is_the_engines_independent_twins(p0: float, p1: float, n: int) -> None:
    for alpha in (0.05, 0.001):
        assert twin_power(n, p0, p1, kappa=1.0, alpha=alpha) == pytest.approx(
            detection_power(p0, p1, n, paired=True, alpha=alpha), abs=1e-9)


def test_the_limit_at_kappa_one_is_the_engines_and_shrinks_with_agreement() -> None:
    for x, n in ((30, 100), (5, 60), (120, 200)):
        engine = limits(x, n, paired=True, alpha=0.01)
        for direction, want in (("rise", engine.rise), ("fall", engine.fall)):
            found = twin_limit(n, x / n, kappa=1.0, alpha=0.01, direction=direction)
            assert found.status == want.status
            if want.value is None or found.value is None:
                continue
            assert found.value == pytest.approx(want.value, abs=1e-6)
            tighter = twin_limit(n, x / n, kappa=0.2, alpha=0.01, direction=direction)
            assert tighter.value is not None and tighter.value < found.value
    assert twin_limit(10, 1.0, kappa=0.5, alpha=0.05).status == "no room"
    assert twin_limit(3, 0.5, kappa=1.0, alpha=1e-6).status == "none detectable"


def test_agreement_counts_of_a_hand_built_pair() -> None:
    # 10 twins: 3 failed in both, 2 before only, 1 after only, 4 in neither.
    found = agreement(10, 3, 2, 1)
    assert (found.n, found.alike, found.discordant) == (10, 7, 3)
    assert found.rate == pytest.approx(0.7)
    assert (found.before, found.after) == (pytest.approx(0.5), pytest.approx(0.4))
    # independent twins at 0.5 and 0.4 disagree on 0.5 * 0.6 + 0.5 * 0.4 = 0.5 of seeds
    assert found.kappa == pytest.approx(0.3 / 0.5)
    # Clopper-Pearson one-sided: P(Bin(10, upper) <= 3) = 0.05
    upper = 1.0 - found.low(0.95)
    assert stats.binom.cdf(3, 10, upper) == pytest.approx(0.05, abs=1e-9)
    assert agreement(5, 0, 0, 0).kappa is None  # no twin had room to disagree
    with pytest.raises(ValueError, match="at most n"):
        agreement(3, 2, 1, 1)


def test_pooled_kappa_and_its_upper_bound() -> None:
    rows = [agreement(100, 20, 5, 5), agreement(100, 45, 5, 5)]
    pooled = pooled_kappa(rows, 0.95)
    expected = 100 * (0.25 * 0.75 * 2) + 100 * (0.5 * 0.5 * 2)
    assert pooled.kappa == pytest.approx(20 / expected)
    share = float(stats.beta.ppf(0.95, 21, 180))
    assert pooled.upper == pytest.approx(share / (expected / 200))
    assert pooled.upper is not None and pooled.kappa < pooled.upper
    assert pooled_kappa([agreement(4, 4, 0, 0)]).kappa is None


def test_the_worst_base_rate_is_where_the_model_is_most_discordant() -> None:
    # The design reads one base rate, (1 - max_mde)/2: power at every other is no lower.
    for n, kappa in ((40, 1.0), (80, 0.3), (150, 0.05)):
        change, alpha = 0.2, 0.01
        worst = twin_power(n, 0.4, 0.6, kappa=kappa, alpha=alpha)
        for p0 in np.linspace(0.0, 0.8, 81):
            assert twin_power(n, p0, p0 + change, kappa=kappa, alpha=alpha) >= worst - 1e-12


@pytest.mark.parametrize("replicates, m", [(50, 1), (50, 10), (30, 4), (200, 40)])
def test_the_design_at_kappa_one_asks_what_the_engine_asks(replicates: int, m: int) -> None:
    engine = design_check(replicates, m, paired=True)
    mine = twin_design_check(replicates, m, kappa=1.0)
    assert mine.ok == engine.ok
    assert mine.replicates_needed == engine.replicates_needed


def test_agreement_asks_for_fewer_replicates_and_the_count_reaches_power() -> None:
    loose = twin_design_check(50, 10, kappa=1.0)
    tight = twin_design_check(50, 10, kappa=0.2)
    assert loose.replicates_needed is not None and tight.replicates_needed is not None
    assert tight.replicates_needed < loose.replicates_needed
    n = tight.replicates_needed
    assert twin_power(n, 0.4, 0.6, kappa=0.2, alpha=0.005) >= 0.8
    assert twin_power(n - 1, 0.4, 0.6, kappa=0.2, alpha=0.005) < 0.8


@pytest.mark.parametrize("n, kappa", [(20, 0.77), (20, 1.0), (60, 0.3), (150, 1.0)])
def test_the_designs_worst_limit_is_the_largest_over_base_rates(n: int, kappa: float) -> None:
    check = twin_design_check(n, 1, kappa=kappa)
    scanned = twin_limits(n, np.linspace(0, 0.8, 161), kappa=kappa, alpha=0.05)
    if any(limit.value is None for limit in scanned):
        assert check.worst_limit is None
        first = next(p0 for p0, limit in zip(np.linspace(0, 0.8, 161), scanned, strict=True)
                     if limit.value is None)
        assert check.worst_base_rate == pytest.approx(first, abs=0.005)
    else:
        assert check.worst_limit is not None
        top = max(limit.value or 0.0 for limit in scanned)
        assert check.worst_limit == pytest.approx(top, abs=2e-3)
        assert check.worst_limit >= top - 1e-9 or check.worst_limit == pytest.approx(top)
    assert check.ok == (check.worst_limit is not None and check.worst_limit <= 0.2 + 1e-9)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_the_margin_design_at_an_agreement_asks_fewer_replicates() -> None:
    plain = margin_design_check(100, 4, paired=True, margin=0.1)
    assert margin_design_check(100, 4, paired=True, margin=0.1, kappa=1.0) == plain
    tight = margin_design_check(100, 4, paired=True, margin=0.1, kappa=0.3)
    assert plain.replicates_needed is not None and tight.replicates_needed is not None
    assert tight.weakest_power > plain.weakest_power
    assert tight.replicates_needed < plain.replicates_needed
    assert "discordance ratio 0.30" in tight.method
    # the replicates it names pass at that kappa
    assert margin_design_check(tight.replicates_needed, 4, paired=True, margin=0.1,
                               kappa=0.3).ok
    with pytest.raises(ValueError, match="kappa"):
        margin_design_check(100, 4, paired=True, margin=0.1, kappa=1.5)


@pytest.mark.parametrize("m, kappa, max_mde", [(1, 1.0, 0.2), (4, 0.2, 0.2), (10, 0.5, 0.3),
                                               (3, 0.05, 0.1)])
def test_the_replicate_search_equals_the_search_over_the_whole_grid(
        m: int, kappa: float, max_mde: float) -> None:
    from pytest_prove.stats._replicates import MAX_REPLICATES_PAIRED, _smallest_n
    from pytest_prove.stats._twins import _weakest

    alpha = 0.05 / m
    direct = _smallest_n(lambda n: _weakest(n, kappa, max_mde, alpha) >= 0.8, 1,
                         MAX_REPLICATES_PAIRED)
    assert twin_replicates(m, kappa=kappa, max_mde=max_mde) == direct
