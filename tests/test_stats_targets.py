"""Absolute targets and pass^k (stats/_targets.py, issue 32): the exact tests against scipy,
their size at the target by enumeration, Holm's family-wise error, the design's replicates
and their power, and the pass^k and pass@k estimators against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from pytest_prove.stats import (
    Side,
    TargetTest,
    _target_sequential,
    _targets,
    holm,
    holm_targets,
    pass_at_k,
    pass_hat_k,
    target_replicates,
    target_test,
)
from pytest_prove.stats._sequential import LOOKS, alpha_shares, look_schedule
from pytest_prove.stats._target_sequential import (
    _power_bound,
    sequential_target_p,
    sequential_target_power,
    sequential_target_replicates,
)
from pytest_prove.stats._targets import target_p_values, target_power

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

Q = 0.05
GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05 .. 0.95
SIDES: tuple[Side, Side] = ("<=", ">=")


def _tables(n: int, target: float, side: Side, k: int = 1) -> tuple[FloatArray, FloatArray]:
    """(p_meets, p_misses) of target_test at every outcome x = 0..n, by target_p_values:
    test_target_p_values_are_target_tests_at_every_outcome holds the two equal bit for bit,
    and _decided_as_target_test checks them against target_test where a decision turns.
    (target_test at each outcome also finds its interval by a root search: 0.2 ms an
    outcome, seconds over the grids below, for numbers these tests do not read.)"""
    return target_p_values(n, target, side, k=k)


def _tables_by_target_test(n: int, target: float, side: Side, k: int = 1
                           ) -> tuple[FloatArray, FloatArray]:
    """(p_meets, p_misses) of target_test itself at every outcome x = 0..n."""
    rows = [target_test(x, n, target, side, k=k) for x in range(n + 1)]
    return np.array([r.p_meets for r in rows]), np.array([r.p_misses for r in rows])


def _decided_as_target_test(n: int, target: float, side: Side, k: int,
                            tables: tuple[FloatArray, FloatArray], level: float = Q) -> None:
    """Each table's decision (p <= level) turns once over x = 0..n (the tail probabilities
    are monotone in x), and target_test's own p-values agree at the outcomes on both sides
    of every turn and at both ends: so the decision at every outcome is target_test's."""
    for column, table in enumerate(tables):
        decided = table <= level
        assert np.count_nonzero(decided[1:] != decided[:-1]) <= 1, (n, target, side, k)
        turns = np.flatnonzero(decided[1:] != decided[:-1])
        for x in {0, n, *turns.tolist(), *(turns + 1).tolist()}:
            row = target_test(int(x), n, target, side, k=k)
            assert (row.p_meets, row.p_misses)[column] == table[x], (n, target, side, k, x)


def _chance(pvalues: FloatArray, n: int, rate: float, level: float = Q) -> float:
    """The exact chance of p <= level when the outcome is Binomial(n, rate)."""
    return float(stats.binom.pmf(np.arange(n + 1), n, rate)[pvalues <= level].sum())


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: target_test(1, 10, 0.5, ">=", k=0), "k must be a whole number of tries"),
        (lambda: target_test(1, 10, 0.5, ">=", k=2.0), "k must be"),  # type: ignore[arg-type]
        (lambda: target_test(1, 10, 0.0, "<="), "can never be shown met"),
        (lambda: target_test(1, 10, 1.0, ">="), "strictly between 0 and 1"),
        (lambda: target_test(1, 10, 1.5, ">="), "strictly between 0 and 1"),
        (lambda: target_test(1, 10, math.nan, ">="), "strictly between 0 and 1"),
        (lambda: target_test(1, 10, "0.5", ">="), "must be a number"),  # type: ignore[arg-type]
        (lambda: target_test(0, 0, 0.5, ">="), "n must be at least 1, got 0"),
        (lambda: target_test(11, 10, 0.5, ">="), r"events must be between 0 and n \(10\)"),
        (lambda: target_test(-1, 10, 0.5, ">="), "events must be at least 0"),
        (lambda: target_test(1, 10, 0.5, "<"), "side must be '<='"),  # type: ignore[arg-type]
        (lambda: target_test(1, 10, 0.5, ">=", alpha=0.5), "alpha must be below 0.5"),
        (lambda: target_test(1, 5, 0.5, ">=", k=8), "pass\\^8 needs at least k = 8"),
        (lambda: pass_hat_k(3, 5, 6), "needs at least k = 6 replicates, got n = 5"),
        (lambda: pass_hat_k(3, 5, 0), "k must be"),
        (lambda: pass_at_k(6, 5, 2), "successes must be between 0 and n"),
        (lambda: holm_targets([], q=1.0), "q must be"),
        (lambda: target_replicates(0.5, 0.0, ">="), "distance must be above 0"),
        (lambda: target_replicates(0.5, 0.1, ">=", rows=0), "rows must be at least 1"),
        (lambda: target_replicates(1.0, 0.1, ">="), "strictly between 0 and 1"),
    ],
)
def test_bad_input_is_refused_with_its_value(call: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        call()  # type: ignore[operator]


# --------------------------------------------------------------------------- against scipy


CASES = [(x, n) for n in (1, 7, 30, 190, 1000) for x in sorted({0, 1, n // 7, n // 2, n - 1, n})]


@pytest.mark.parametrize(("x", "n"), CASES)
def test_plain_rate_matches_scipy_binomtest(x: int, n: int) -> None:
    # scipy's interval is a root search (most of this test's time) and depends on x, n and
    # the level only, not on the rate tested: one per level, held against every row.
    cis = {alpha: stats.binomtest(x, n).proportion_ci(  # two-sided: alpha each end
        confidence_level=1 - 2 * alpha, method="exact") for alpha in (0.05, 0.025, 0.005)}
    for t in (0.01, 0.1, 0.37, 0.5, 0.9, 0.999):
        less = stats.binomtest(x, n, t, alternative="less")
        greater = stats.binomtest(x, n, t, alternative="greater")
        for alpha, ci in cis.items():
            for side in SIDES:
                row = target_test(x, n, t, side, alpha=alpha)
                meets, misses = (less, greater) if side == "<=" else (greater, less)
                assert row.p_meets == pytest.approx(meets.pvalue, abs=1e-12, rel=1e-12)
                assert row.p_misses == pytest.approx(misses.pvalue, abs=1e-12, rel=1e-12)
                assert row.low == pytest.approx(ci.low, abs=1e-12)
                assert row.high == pytest.approx(ci.high, abs=1e-12)
                assert (row.events, row.n, row.k, row.estimate) == (x, n, 1, x / n)


@pytest.mark.parametrize("k", [2, 4, 8])
@pytest.mark.parametrize(("x", "n"), [(c, n) for c, n in CASES if n >= 8])
def test_pass_k_is_the_rate_test_at_the_kth_root(x: int, n: int, k: int) -> None:
    ci = stats.binomtest(x, n).proportion_ci(confidence_level=0.9, method="exact")  # any rate
    for t in (0.1, 0.5, 0.8):
        rate = t ** (1.0 / k)
        less = stats.binomtest(x, n, rate, alternative="less")
        greater = stats.binomtest(x, n, rate, alternative="greater")
        for side in SIDES:
            row = target_test(x, n, t, side, k=k)
            meets, misses = (less, greater) if side == "<=" else (greater, less)
            assert row.p_meets == pytest.approx(meets.pvalue, abs=1e-12, rel=1e-12)
            assert row.p_misses == pytest.approx(misses.pvalue, abs=1e-12, rel=1e-12)
            # on the rate's scale: scipy finds its ends by a root search good to about
            # 1e-12, which the k-th power would stretch k-fold
            assert row.low ** (1.0 / k) == pytest.approx(ci.low, abs=1e-12)
            assert row.high ** (1.0 / k) == pytest.approx(ci.high, abs=1e-12)
            assert row.k == k
            assert row.estimate == pass_hat_k(x, n, k)


def test_interval_ends_in_closed_form() -> None:
    # At x = n the lower end solves p^n = alpha, at x = 0 the upper one (1 - p)^n = alpha.
    for n in (1, 3, 30, 1000):
        for alpha in (0.05, 0.01):
            assert target_test(n, n, 0.5, ">=", alpha=alpha).low == pytest.approx(
                alpha ** (1 / n), rel=1e-14)
            assert target_test(0, n, 0.5, ">=", alpha=alpha).high == pytest.approx(
                1 - alpha ** (1 / n), rel=1e-13)


def test_the_bound_beside_the_target_tells_what_the_p_value_tells() -> None:
    # The target lies below the 1 - alpha lower bound exactly when P(X >= x) at it is
    # <= alpha, and above the upper bound exactly when P(X <= x) is: checked away from
    # ties (a p-value within 1e-9 of alpha is a tie in floating point).
    alpha = 0.05
    seen = 0
    for n in (5, 20, 60):
        for x in range(n + 1):
            for t in np.linspace(0.01, 0.99, 25):
                row = target_test(x, n, float(t), ">=", alpha=alpha)
                if abs(row.p_meets - alpha) > 1e-9:
                    assert (row.low > t) == (row.p_meets <= alpha), (x, n, t)
                    seen += row.p_meets <= alpha
                if abs(row.p_misses - alpha) > 1e-9:
                    assert (row.high < t) == (row.p_misses <= alpha), (x, n, t)
    assert seen > 100


# --------------------------------------------------------------------------- exact size


def _sizes(n: int, k: int = 1) -> list[tuple[float, Side, float, float]]:
    out = []
    for t in GRID:
        for side in SIDES:
            meets, misses = _tables(n, t, side, k)
            _decided_as_target_test(n, t, side, k, (meets, misses))
            rate = t ** (1.0 / k)
            out.append((t, side, _chance(meets, n, rate), _chance(misses, n, rate)))
    return out


@pytest.mark.parametrize(
    ("n", "k"),
    [(10, 1), (30, 1), (30, 4),
     pytest.param(100, 1, marks=pytest.mark.slow), pytest.param(190, 1, marks=pytest.mark.slow),
     pytest.param(500, 1, marks=pytest.mark.slow), pytest.param(100, 8, marks=pytest.mark.slow)],
)
def test_exact_size_at_the_target_is_at_most_alpha(n: int, k: int) -> None:
    # Every outcome's decision is target_test's own; the chance of a claim with the true
    # quantity exactly at the target is summed over the binomial: no simulation. At the
    # target a misses claim is wrong; the meets test's null has the target as its edge.
    found = _sizes(n, k)
    largest = max(max(meets, misses) for _, _, meets, misses in found)
    assert largest <= Q
    assert largest > 0.6 * Q  # the tests use their level (not vacuously conservative)


def test_size_only_falls_deeper_into_the_null() -> None:
    # The claim's chance is largest at the target: further on the null's side it is smaller.
    n = 40
    for t in (0.1, 0.5, 0.85):
        for side in SIDES:
            meets, misses = _tables_by_target_test(n, t, side)
            toward_meets = -1.0 if side == "<=" else 1.0  # where the target is met
            at = (_chance(meets, n, t), _chance(misses, n, t))
            for step in (0.01, 0.05, 0.1):
                not_met = min(max(t - toward_meets * step, 0.0), 1.0)
                met = min(max(t + toward_meets * step, 0.0), 1.0)
                assert _chance(meets, n, not_met) <= at[0] + 1e-15
                assert _chance(misses, n, met) <= at[1] + 1e-15


def test_exact_size_through_target_power_over_the_grid() -> None:
    # The same sums through the design's power function (checked against target_test's
    # decisions below), on a finer grid of targets; every n at once (the function takes an
    # array of them: one test, not one per n).
    ns = np.array([10, 30, 100, 190, 500])
    for t in np.linspace(0.01, 0.99, 99):
        for side in SIDES:
            for claim in ("meets", "misses"):
                size = target_power(ns, float(t), side, float(t), level=Q, claim=claim)
                assert size.shape == ns.shape and (size <= Q).all(), (t, side, claim, size)


@pytest.mark.parametrize("n", [1, 2, 9, 30])
def test_target_power_is_the_chance_of_target_tests_decisions(n: int) -> None:
    for t in (0.05, 0.3, 0.5, 0.77, 0.95):
        for side in SIDES:
            for k in sorted({1, min(3, n)}):
                meets, misses = _tables_by_target_test(n, t, side, k)
                for level in (0.05, 0.0125):
                    for claim, table in (("meets", meets), ("misses", misses)):
                        for true in (0.0, 0.1, t, 0.6, 1.0):
                            exact = _chance(table, n, true ** (1.0 / k), level)
                            got = target_power(np.array([n]), t, side, true, k=k,
                                               level=level, claim=claim)[0]
                            assert got == pytest.approx(exact, abs=1e-12)


# --------------------------------------------------------------------------- Holm


def _holm_reject(p: FloatArray, q: float) -> BoolArray:
    """Holm's step-down decisions for each family (a row of m p-values)."""
    m = p.shape[1]
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1)
    passed = np.logical_and.accumulate(ranked <= q / (m - np.arange(m)), axis=1)
    out = np.zeros_like(passed)
    np.put_along_axis(out, order, passed, axis=1)
    return out


def test_holm_targets_is_holm_on_each_direction() -> None:
    rows = [target_test(x, 30, t, side) for x, t, side in
            ((2, 0.25, "<="), (20, 0.25, "<="), (29, 0.8, ">="), (24, 0.8, ">="), (5, 0.5, "<="))]
    adjusted = holm_targets(rows, q=Q)
    assert [a for a, _ in adjusted] == pytest.approx(list(holm([r.p_meets for r in rows])))
    assert [b for _, b in adjusted] == pytest.approx(list(holm([r.p_misses for r in rows])))
    assert adjusted[0][0] <= Q < adjusted[0][1]  # shown to meet
    assert adjusted[1][1] <= Q < adjusted[1][0]  # shown to miss
    assert holm_targets([], q=Q) == []
    one = [target_test(2, 30, 0.25, "<=")]
    assert holm_targets(one, q=Q) == [(one[0].p_meets, one[0].p_misses)]


def _exact_fwer(n: int, targets: list[float], sides: list[Side]) -> tuple[float, float, float]:
    """Exact family-wise error of independent rows with the true rate at each target, by
    enumerating every outcome of the family: (misses, meets, both) as in bench/targets.py."""
    m = len(targets)
    tables = [_tables(n, t, s) for t, s in zip(targets, sides, strict=True)]
    # every outcome of the family, in itertools.product's order: one column per row
    outcomes = np.indices((n + 1,) * m).reshape(m, -1)
    grid = outcomes.T
    pmfs = [stats.binom.pmf(np.arange(n + 1), n, t) for t in targets]
    weight = np.prod([pmf[outcomes[i]] for i, pmf in enumerate(pmfs)], axis=0)
    meets = np.empty(grid.shape)
    misses = np.empty(grid.shape)
    for i, tab in enumerate(tables):
        meets[:, i], misses[:, i] = tab[0][outcomes[i]], tab[1][outcomes[i]]
    shown_meet, shown_miss = _holm_reject(meets, Q), _holm_reject(misses, Q)
    # holm_targets itself on a spread of the outcomes
    for s in range(0, grid.shape[0], max(1, grid.shape[0] // 150)):
        rows = [target_test(int(grid[s, i]), n, targets[i], sides[i]) for i in range(m)]
        adjusted = np.array(holm_targets(rows, q=Q))
        assert np.array_equal(adjusted[:, 0] <= Q, shown_meet[s])
        assert np.array_equal(adjusted[:, 1] <= Q, shown_miss[s])
    half = np.arange(m) % 2 == 0
    both = shown_miss[:, half].any(axis=1) | shown_meet[:, ~half].any(axis=1)
    return (float(weight[shown_miss.any(axis=1)].sum()),
            float(weight[shown_meet.any(axis=1)].sum()), float(weight[both].sum()))


@pytest.mark.parametrize("n", [10, 20, pytest.param(30, marks=pytest.mark.slow)])
def test_holm_keeps_each_directions_family_wise_error_exactly(n: int) -> None:
    targets = [0.5, 0.25, 0.5, 0.75] if n >= 20 else [0.3, 0.5, 0.7, 0.5]
    sides: list[Side] = ["<=", ">=", ">=", "<="]
    misses, meets, both = _exact_fwer(n, targets, sides)
    assert misses <= Q and meets <= Q
    assert both <= 2 * Q  # the union bound over the two families (about q in practice)
    assert max(misses, meets) > 0.01  # the test can see an error rate at all


def test_holm_family_wise_error_of_sixteen_rows_by_simulation() -> None:
    rng = np.random.default_rng(20261205)
    n, m, sims = 100, 16, 20000
    targets = [GRID[(3 * i + 1) % len(GRID)] for i in range(m)]
    sides: list[Side] = [SIDES[i % 2] for i in range(m)]
    tables = [_tables(n, t, s) for t, s in zip(targets, sides, strict=True)]
    for t, s, tab in zip(targets, sides, tables, strict=True):
        for level in (Q / m, Q):  # Holm's first and last steps
            _decided_as_target_test(n, t, s, 1, tab, level)
    x = np.column_stack([rng.binomial(n, t, size=sims) for t in targets])
    meets = np.column_stack([tab[0][x[:, i]] for i, tab in enumerate(tables)])
    misses = np.column_stack([tab[1][x[:, i]] for i, tab in enumerate(tables)])
    for p in (meets, misses):
        rate = _holm_reject(p, Q).any(axis=1).mean()
        assert rate <= Q + 2 * math.sqrt(Q * (1 - Q) / sims)
        assert rate > 0.01


# --------------------------------------------------------------------------- the design


DESIGNS = [
    (0.25, "<=", 0.10, 1, 1),
    (0.10, "<=", 0.05, 1, 4),
    pytest.param(0.90, ">=", 0.05, 1, 16, marks=pytest.mark.slow),
    pytest.param(0.50, ">=", 0.20, 8, 1, marks=pytest.mark.slow),
]


def _powers(n: int, t: float, side: Side, d: float, k: int, level: float) -> tuple[float, float]:
    good, bad = (t - d, t + d) if side == "<=" else (t + d, t - d)
    meets, misses = _tables(n, t, side, k)
    _decided_as_target_test(n, t, side, k, (meets, misses), level)
    return (_chance(meets, n, good ** (1.0 / k), level),
            _chance(misses, n, bad ** (1.0 / k), level))


@pytest.mark.parametrize(("t", "side", "d", "k", "rows"), DESIGNS)
def test_design_replicates_have_the_power_and_one_fewer_does_not(
    t: float, side: Side, d: float, k: int, rows: int
) -> None:
    n = target_replicates(t, d, side, k=k, alpha=Q, rows=rows)
    assert n is not None
    level = Q / rows
    assert min(_powers(n, t, side, d, k, level)) >= 0.80
    assert min(_powers(n - 1, t, side, d, k, level)) < 0.80
    # every larger n up to max_n keeps it (the sawtooth), through the power function
    good, bad = (t - d, t + d) if side == "<=" else (t + d, t - d)
    ns = np.arange(n, 20001)
    assert (target_power(ns, t, side, good, k=k, level=level, claim="meets") >= 0.8).all()
    assert (target_power(ns, t, side, bad, k=k, level=level, claim="misses") >= 0.8).all()


@pytest.mark.parametrize(("t", "side", "d", "k", "rows"), DESIGNS[:2])
def test_design_power_by_simulation(t: float, side: Side, d: float, k: int, rows: int) -> None:
    n = target_replicates(t, d, side, k=k, alpha=Q, rows=rows)
    assert n is not None
    level, sims = Q / rows, 4000
    good, bad = (t - d, t + d) if side == "<=" else (t + d, t - d)
    rng = np.random.default_rng(7)
    for rate, meets in ((good, True), (bad, False)):
        draws = rng.binomial(n, rate ** (1.0 / k), size=sims)
        decided = {}
        for x in np.unique(draws):
            row = target_test(int(x), n, t, side, k=k)
            decided[int(x)] = (row.p_meets if meets else row.p_misses) <= level
        share = float(np.mean([decided[int(x)] for x in draws]))
        assert share >= 0.8 - 2 * math.sqrt(0.8 * 0.2 / sims)


def test_design_takes_the_smallest_n_from_which_power_holds_to_max_n() -> None:
    # Against a brute-force scan of every n; and the sawtooth matters: in some designs the
    # first n to reach the power is not the answer, because power dips below it later.
    differs = 0
    for t in (0.1, 0.3, 0.5, 0.7):
        for side in SIDES:
            for d in (0.1, 0.15, 0.2):
                top = 400
                got = target_replicates(t, d, side, alpha=Q, max_n=top)
                good, bad = (t - d, t + d) if side == "<=" else (t + d, t - d)
                ns = np.arange(1, top + 1)
                ok = ((target_power(ns, t, side, good, level=Q, claim="meets") >= 0.8)
                      & (target_power(ns, t, side, bad, level=Q, claim="misses") >= 0.8))
                if not ok[-1]:
                    assert got is None
                    continue
                fails = np.flatnonzero(~ok)
                assert got == (int(fails[-1]) + 2 if fails.size else 1)
                differs += got != int(np.argmax(ok)) + 1
    assert differs > 0


def test_design_says_none_when_it_cannot_be_done() -> None:
    assert target_replicates(0.95, 0.10, ">=") is None  # better than 1 is not a rate
    assert target_replicates(0.05, 0.10, "<=") is None  # nor below 0
    assert target_replicates(0.5, 0.01, ">=", max_n=1000) is None  # needs about 15,000
    assert target_replicates(0.5, 0.01, ">=") is not None
    # more rows (a smaller level) never need fewer replicates
    one = target_replicates(0.8, 0.1, ">=")
    four = target_replicates(0.8, 0.1, ">=", rows=4)
    assert one is not None and four is not None and four > one


# --------------------------------------------------------------------------- pass^k


@pytest.mark.parametrize("n", range(1, 9))
def test_estimators_equal_the_average_over_every_k_subset(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(4):
        outcome = rng.random(n) < rng.random()
        c = int(outcome.sum())
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            every = sum(all(outcome[list(s)]) for s in subsets) / len(subsets)
            some = sum(any(outcome[list(s)]) for s in subsets) / len(subsets)
            assert pass_hat_k(c, n, k) == pytest.approx(every, abs=1e-15)
            assert pass_at_k(c, n, k) == pytest.approx(some, abs=1e-15)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 12, 20])
def test_estimators_are_unbiased(n: int) -> None:
    x = np.arange(n + 1)
    for p in (0.0, 0.05, 0.3, 0.5, 0.77, 0.95, 1.0):
        pmf = stats.binom.pmf(x, n, p)
        for k in range(1, n + 1):
            hat = np.array([pass_hat_k(int(c), n, k) for c in x])
            at = np.array([pass_at_k(int(c), n, k) for c in x])
            assert float(pmf @ hat) == pytest.approx(p**k, abs=1e-12)
            assert float(pmf @ at) == pytest.approx(1 - (1 - p) ** k, abs=1e-12)
    # and the plug-in (c/n)^k is not: the estimator is not it in disguise
    if n >= 2:
        plug = float(stats.binom.pmf(x, n, 0.5) @ (x / n) ** 2)
        assert abs(plug - 0.25) > 1e-3


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_mapped_interval_covers_pass_k(k: int) -> None:
    # Coverage of p^k by [low, high] by enumeration over x, at every p of a grid: at least
    # 1 - 2 alpha (0.95 with alpha 0.025), and each bound on its own at least 1 - alpha.
    for alpha in (0.025, 0.05):
        for n in (8, 10, 20, 30, 50):
            rows = [target_test(x, n, 0.5, ">=", k=k, alpha=alpha) for x in range(n + 1)]
            low = np.array([r.low for r in rows])
            high = np.array([r.high for r in rows])
            # every p of the grid at once: one row of the binomial's pmf over x for each
            p = np.linspace(0.005, 0.995, 199)[:, None]
            pmf = stats.binom.pmf(np.arange(n + 1)[None, :], n, p)
            value = p**k
            above, below = low[None, :] <= value, value <= high[None, :]
            both = (pmf * (above & below)).sum(axis=1)
            assert (both >= 1 - 2 * alpha - 1e-12).all(), p[both < 1 - 2 * alpha - 1e-12]
            assert ((pmf * above).sum(axis=1) >= 1 - alpha - 1e-12).all(), (alpha, n)
            assert ((pmf * below).sum(axis=1) >= 1 - alpha - 1e-12).all(), (alpha, n)


def test_pass_k_row_reads_as_documented() -> None:
    row = target_test(28, 30, 0.5, ">=", k=8)
    assert isinstance(row, TargetTest)
    assert row.estimate == pytest.approx(math.comb(28, 8) / math.comb(30, 8))
    assert row.low < row.estimate < row.high
    assert row.low >= 0.0 and row.high <= 1.0
    # every success: pass^k is 1 and the upper bound too
    assert target_test(30, 30, 0.5, ">=", k=8).estimate == 1.0
    assert target_test(30, 30, 0.5, ">=", k=8).high == 1.0
    assert target_test(0, 30, 0.5, ">=", k=8).low == 0.0


# --------------------------------------------------------------------------- sequential


def test_target_p_values_are_target_tests_at_every_outcome() -> None:
    for n in (1, 10, 97):
        for t in (0.1, 0.5, 0.93):
            for side in SIDES:
                for k in (1, 2):
                    if k > n:
                        continue
                    meets, misses = target_p_values(n, t, side, k=k)
                    rows = [target_test(x, n, t, side, k=k) for x in range(n + 1)]
                    assert meets.tolist() == [r.p_meets for r in rows]
                    assert misses.tolist() == [r.p_misses for r in rows]


def test_sequential_p_is_the_smallest_p_over_its_share() -> None:
    looks = look_schedule(100)
    shares = alpha_shares(looks, Q)
    events = [1, 2, 4, 12, 14]
    meets, misses = sequential_target_p(events[:3], looks[:3], 0.25, "<=", shares)
    rows = [target_test(x, n, 0.25, "<=") for x, n in zip(events[:3], looks[:3], strict=True)]
    assert meets == min(1.0, min(r.p_meets / w for r, w in zip(rows, shares, strict=False)))
    assert misses == min(1.0, min(r.p_misses / w for r, w in zip(rows, shares, strict=False)))
    assert meets <= Q  # 1 of 20, 2 of 40, 4 of 60 against "at most 0.25"
    assert misses == 1.0
    with pytest.raises(ValueError, match="one count of events per look"):
        sequential_target_p([1, 2], looks[:3], 0.25, "<=", shares)
    with pytest.raises(ValueError, match="looks must grow"):
        sequential_target_p([1, 2], [20, 20], 0.25, "<=", shares)


def test_one_look_is_the_fixed_test() -> None:
    ns = np.array([57])
    for claim in ("meets", "misses"):
        for true in (0.1, 0.25, 0.4):
            fixed = target_power(ns, 0.25, "<=", true, level=Q / 4, claim=claim)[0]
            seq = sequential_target_power(57, 0.25, "<=", true, rows=4, looks=1, claim=claim,
                                          stop_on_other=False)
            assert seq == pytest.approx(fixed, abs=1e-12)


@pytest.mark.parametrize("maximum", [20, 60, 190])
def test_sequential_size_at_the_target_is_at_most_alpha(maximum: int) -> None:
    # Exact: summed over every path of the counts at the looks, never stopping early for
    # the other direction (stopping only removes chances to err).
    largest = 0.0
    for t in (0.05, 0.25, 0.5, 0.75, 0.9):
        for side in SIDES:
            for claim in ("meets", "misses"):
                size = sequential_target_power(maximum, t, side, t, claim=claim,
                                               stop_on_other=False)
                assert size <= Q
                largest = max(largest, size)
    assert largest > 0.01


def test_sequential_power_sum_matches_a_simulation_of_the_looks() -> None:
    # The exact sum against the procedure itself: counts drawn at the looks, the sequential
    # p-values taken at each look, the condition stopped once either direction is claimed
    # (meets at Holm's first step, misses at its last); sequential_target_p itself gives
    # the p-values of the first 60 runs.
    maximum, t, side, true, rows = 60, 0.3, "<=", 0.15, 2
    looks = look_schedule(maximum)
    shares = alpha_shares(looks, Q / rows)
    exact = sequential_target_power(maximum, t, side, true, rows=rows, claim="meets")
    rng = np.random.default_rng(11)
    sims = 20000
    steps = np.diff(np.concatenate(([0], looks)))
    counts = np.cumsum(rng.binomial(steps, true, size=(sims, len(looks))), axis=1)
    tables = [target_p_values(n, t, side) for n in looks]
    meets = np.column_stack([tables[j][0][counts[:, j]] / shares[j] for j in range(len(looks))])
    misses = np.column_stack([tables[j][1][counts[:, j]] / shares[j]
                              for j in range(len(looks))])
    meets, misses = np.minimum.accumulate(meets, axis=1), np.minimum.accumulate(misses, axis=1)
    for r in range(60):
        for j in range(1, len(looks) + 1):
            got = sequential_target_p(counts[r, :j].tolist(), looks[:j], t, side, shares)
            assert got == (min(1.0, meets[r, j - 1]), min(1.0, misses[r, j - 1]))
    claimed = meets <= Q / rows
    stopped = claimed | (misses <= Q)
    first = np.argmax(stopped, axis=1)
    shown = stopped.any(axis=1) & claimed[np.arange(sims), first]
    se = math.sqrt(exact * (1 - exact) / sims)
    assert abs(float(shown.mean()) - exact) <= 3 * se
    assert 0.3 < exact < 0.95  # a case where stopping and looks matter


@pytest.mark.parametrize(("t", "side", "d", "k", "rows"), DESIGNS[:2])
def test_sequential_maximum_has_the_power(
    t: float, side: Side, d: float, k: int, rows: int
) -> None:
    fixed = target_replicates(t, d, side, k=k, alpha=Q, rows=rows)
    n = sequential_target_replicates(t, d, side, k=k, alpha=Q, rows=rows)
    assert fixed is not None and n is not None
    assert fixed <= n <= 1.4 * fixed
    good, bad = (t - d, t + d) if side == "<=" else (t + d, t - d)
    for size in (n, n + 1, n + 7):
        for true, claim in ((good, "meets"), (bad, "misses")):
            exact = sequential_target_power(size, t, side, true, k=k, rows=rows, claim=claim)
            bound = _power_bound(np.array([size]), t, side, true, k, Q, rows, LOOKS, claim)
            assert exact >= bound[0] - 1e-12  # the bound is one
            assert exact >= 0.80


def test_sequential_maximum_equals_the_full_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hoeffding's bound only shortens the scan: with it switched off the answer is the same.
    cases = [(0.25, 0.1, "<=", 1), (0.8, 0.1, ">=", 4), (0.5, 0.2, ">=", 1)]
    quick = [sequential_target_replicates(t, d, side, rows=rows, max_n=2000)
             for t, d, side, rows in cases]
    monkeypatch.setattr(_target_sequential, "_sure_from", lambda *args: args[-1])
    _target_sequential._sequential_replicates.cache_clear()
    try:
        full = [sequential_target_replicates(t, d, side, rows=rows, max_n=2000)
                for t, d, side, rows in cases]
    finally:
        _target_sequential._sequential_replicates.cache_clear()
    assert quick == full
    assert all(n is not None for n in quick)


def test_fixed_design_equals_the_full_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    cases = [(0.25, 0.1, "<=", 1, 1), (0.8, 0.05, ">=", 1, 4), (0.5, 0.2, ">=", 8, 1)]
    quick = [target_replicates(t, d, side, k=k, rows=rows, max_n=6000)
             for t, d, side, k, rows in cases]
    monkeypatch.setattr(_targets, "_hoeffding_n", lambda *args: 1 << 62)
    _targets._replicates.cache_clear()
    try:
        full = [target_replicates(t, d, side, k=k, rows=rows, max_n=6000)
                for t, d, side, k, rows in cases]
    finally:
        _targets._replicates.cache_clear()
    assert quick == full
    assert all(n is not None for n in quick)
