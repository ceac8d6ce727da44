"""The step statistics against lifelines, on the same data.

Provenance: lifelines 0.27+ (``AalenJohansenFitter``, ``statistics.logrank_test``), the
reference implementation most Python users check survival results against.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from pytest_prove.stats.steps import (
    aalen_johansen,
    detectable_hazard_ratio,
    logrank,
    logrank_by_cause,
)


def _lifelines(name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = pytest.importorskip(name)
    return module


def _data(seed: int, n: int) -> tuple[list[int], list[str | None]]:
    rng = np.random.default_rng(seed)
    steps = rng.integers(1, 12, n).tolist()  # few distinct steps: many ties
    causes = rng.choice(np.array(["a", "b", "b", "c", "censored"], dtype=object), n).tolist()
    return steps, [None if c == "censored" else str(c) for c in causes]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_aalen_johansen_matches_lifelines(seed: int) -> None:
    lifelines = _lifelines("lifelines")
    steps, causes = _data(seed, 400)
    ours = aalen_johansen(steps, causes, bootstrap=0)
    codes = np.array([0 if c is None else "abc".index(c) + 1 for c in causes])
    for k, cause in enumerate("abc", start=1):
        with warnings.catch_warnings():
            # lifelines breaks tied times apart by jitter and warns; the incidence once every
            # tied end at a step is counted does not depend on their order.
            warnings.simplefilter("ignore")
            fitter = lifelines.AalenJohansenFitter(calculate_variance=False, seed=0)
            # Censored at a step are at risk at that step (both conventions agree); lifelines'
            # jitter could otherwise move one before a tied end, so it gets them half a step on.
            fitter.fit(np.array(steps, dtype=float) + 0.5 * (codes == 0), codes,
                       event_of_interest=k)
            theirs = [float(fitter.predict(s + 0.25)) for s in ours.steps]
        assert ours.curve(cause).incidence == pytest.approx(theirs, abs=1e-12)


def test_incidences_add_up_to_one_minus_survival() -> None:
    steps, causes = _data(4, 300)
    ours = aalen_johansen(steps, causes, groups={"any": ["a", "b", "c"]}, bootstrap=0)
    total = np.sum([ours.curve(c).incidence for c in "abc"], axis=0)
    assert ours.curve("any").incidence == pytest.approx(total.tolist())
    # With no censoring the incidence of all ends reaches 1.
    full = aalen_johansen(steps, [c or "a" for c in causes], groups={"any": ["a", "b", "c"]},
                          bootstrap=0)
    assert full.curve("any").incidence[-1] == pytest.approx(1.0)


def test_bootstrap_band_is_seeded_and_holds_the_estimate() -> None:
    steps, causes = _data(5, 300)
    clusters = [f"case{i % 12}" for i in range(300)]
    one = aalen_johansen(steps, causes, clusters, bootstrap=300, seed=7)
    two = aalen_johansen(steps, causes, clusters, bootstrap=300, seed=7)
    other = aalen_johansen(steps, causes, clusters, bootstrap=300, seed=8)
    assert one == two and one != other
    assert one.clusters == 12
    for curve in one.curves:
        for low, est, high in zip(curve.low, curve.incidence, curve.high, strict=True):
            assert low - 1e-9 <= est <= high + 1e-9
    # Resampling 12 cases gives a wider band than resampling 300 episodes.
    alone = aalen_johansen(steps, causes, bootstrap=300, seed=7)
    assert one.curve("b").high[-1] - one.curve("b").low[-1] > (
        alone.curve("b").high[-1] - alone.curve("b").low[-1])


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_logrank_matches_lifelines(seed: int) -> None:
    statistics = _lifelines("lifelines.statistics")
    rng = np.random.default_rng(seed)
    ta, tb = rng.integers(1, 10, 150), rng.integers(1, 10, 170)
    ea, eb = rng.random(150) < 0.3, rng.random(170) < 0.45
    ours = logrank(ta.tolist(), ea.tolist(), tb.tolist(), eb.tolist())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = statistics.logrank_test(ta, tb, event_observed_A=ea, event_observed_B=eb)
    assert ours.statistic == pytest.approx(theirs.test_statistic, rel=1e-10)
    assert ours.p == pytest.approx(theirs.p_value, rel=1e-10)
    assert ours.observed_a + ours.observed_b == int(ea.sum() + eb.sum())
    assert ours.expected_a + ours.expected_b == pytest.approx(ea.sum() + eb.sum())


def test_stratified_logrank_sums_its_strata() -> None:
    rng = np.random.default_rng(21)
    parts = []
    for _ in range(3):
        ta, tb = rng.integers(1, 8, 60), rng.integers(1, 8, 60)
        ea, eb = rng.random(60) < 0.3, rng.random(60) < 0.5
        parts.append((ta, ea, tb, eb))
    each = [logrank(*(p.tolist() for p in part)) for part in parts]
    joined = [np.concatenate([p[i] for p in parts]) for i in range(4)]
    sa = [f"s{i}" for i in range(3) for _ in range(60)]
    strat = logrank(joined[0].tolist(), joined[1].tolist(), joined[2].tolist(),
                    joined[3].tolist(), sa, sa)
    score = sum(t.observed_b - t.expected_b for t in each)
    variance = sum(t.variance for t in each)
    assert strat.variance == pytest.approx(variance)
    assert strat.statistic == pytest.approx(score * score / variance)
    assert strat.strata == 3
    # Peto's one-step ratio and its interval from the same O, E and V.
    assert strat.hazard_ratio == pytest.approx(np.exp(score / variance))
    assert strat.hr_low == pytest.approx(np.exp(score / variance - 1.959963985 /
                                                np.sqrt(variance)))
    # A stratum only one arm ran tells nothing and is left out.
    extra = logrank([*joined[0].tolist(), 1, 2], [*joined[1].tolist(), True, True],
                    joined[2].tolist(), joined[3].tolist(), [*sa, "only-a", "only-a"], sa)
    assert extra.statistic == pytest.approx(strat.statistic)


def test_peto_ratio_on_the_worked_example_figures() -> None:
    # The reference tool's compare output: O = 6, E = 3.159, V = 1.650 give chi2 4.892 and a
    # hazard ratio of 5.59 (1.22 to 25.72). Rebuild data with those margins in one stratum:
    # B's 6 deaths and A's 1 at step 4, each arm otherwise finishing at step 5.
    ours = logrank([4] * 1 + [5] * 759, [True] + [False] * 759,
                   [4] * 6 + [5] * 754, [True] * 6 + [False] * 754)
    hr = np.exp((ours.observed_b - ours.expected_b) / ours.variance)
    assert ours.hazard_ratio == pytest.approx(hr)
    assert ours.expected_b == pytest.approx(3.5)  # equal arms at risk at the one death time
    assert detectable_hazard_ratio(1.650) == pytest.approx(8.85, abs=0.01)


def test_cause_specific_tests_use_benjamini_hochberg() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(31)
    ta, tb = rng.integers(1, 9, 200).tolist(), rng.integers(1, 9, 200).tolist()
    ca = rng.choice(np.array(["x", "y", None], dtype=object), 200, p=[.1, .2, .7]).tolist()
    cb = rng.choice(np.array(["x", "y", None], dtype=object), 200, p=[.3, .2, .5]).tolist()
    tests = logrank_by_cause(ta, ca, tb, cb)
    assert [t.cause for t in tests] == ["x", "y"]
    expected = scipy_stats.false_discovery_control([t.test.p for t in tests], method="bh")
    assert [t.q for t in tests] == pytest.approx(expected.tolist())
    alone = logrank(ta, [c == "x" for c in ca], tb, [c == "x" for c in cb])
    assert tests[0].test == alone
