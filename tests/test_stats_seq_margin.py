"""The margin claim on a sequential run's looks (stats/_seq_margin.py): its exact chance of a
row shown within against every path, its size at the margin by enumeration at small sizes,
its power at its design, and how decide() stops a condition on it."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps  # type: ignore[import-untyped]

from pytest_prove.stats import (
    Pairs,
    RowInput,
    SequentialRow,
    decide,
    margin_test_paired,
    margin_test_unpaired,
    sequential_design,
    sequential_margin_level,
    sequential_margin_test,
)
from pytest_prove.stats._margin import margin_design
from pytest_prove.stats._margin_design import margin_replicates
from pytest_prove.stats._seq_margin import (
    FINAL_SHARE,
    margin_looks,
    margin_shares,
    within_chance,
)
from pytest_prove.stats._seq_paired import sign_p
from pytest_prove.stats._seq_unpaired import look_p
from pytest_prove.stats._sequential import looks_of

Q = 0.05


def test_margin_looks_and_shares() -> None:
    looks = looks_of(220)
    chosen = margin_looks(looks)
    assert [looks[i] for i in chosen] == [28, 56, 84, 112, 140, 168, 196, 220]
    shares = margin_shares(looks)
    assert sum(shares) == pytest.approx(1.0)
    assert shares[chosen[-1]] == FINAL_SHARE
    assert all(shares[i] == pytest.approx((1 - FINAL_SHARE) / 7) for i in chosen[:-1])
    assert sum(1 for s in shares if s > 0) == 8
    assert sequential_margin_level(220, Q) == pytest.approx(FINAL_SHARE * Q)
    # A maximum with fewer looks than eight: each look once, the last at the final share.
    assert margin_looks((4, 8, 10)) == (0, 1, 2)
    assert margin_shares((10,)) == (1.0,)


@functools.cache  # numbers only; the paths ask the same outcomes again and again
def _within(paired: bool, n0: int, n1: int, first: int, second: int, margin: float,
            alpha: float) -> bool:
    """Whether the engine's margin test shows the row within at level alpha: its exact
    p-value, as ``margin_test_paired`` and ``margin_test_unpaired`` compute it (the margin
    design's tail at the outcome), at most alpha.  Their bound, which the decision does not
    read, is left out: it was nine tenths of the CPU of the enumeration below
    (test_within_agrees_with_the_margin_tests checks the two agree)."""
    design = margin_design(paired, n0, n1, margin)
    return design.sup_tail(float(design.order[first, second])) <= alpha


def test_within_agrees_with_the_margin_tests() -> None:
    """_within decides as the margin tests do, on outcomes of the enumeration below (8 twins
    and 8 + 8 episodes at margin 0.3) at its looks' levels, within and not."""
    shares = margin_shares((2, 4, 6, 8))
    decided = set()
    for k, n in ((1, 4), (3, 8)):
        alpha = shares[k] * Q
        for b, c in ((0, 0), (1, 0), (0, 1), (2, 2), (0, 3)):
            within = _within(True, n, n, b, c, 0.3, alpha)
            assert within == margin_test_paired(b, c, n, 0.3, alpha=alpha).within
            decided.add(within)
        for x_a, y in ((0, 0), (4, 1), (4, 4), (2, 3), (8, 2)):
            within = _within(False, 8, n, x_a, y, 0.3, alpha)
            assert within == margin_test_unpaired(x_a, 8, y, n, 0.3, alpha=alpha).within
            decided.add(within)
    assert decided == {True, False}


def _paired_paths(looks: tuple[int, ...], margin: float, p10: float, p01: float,
                  worse_level: float | None) -> float:
    """P(shown within at some margin look), every path of twins summed (0 concordant, 1
    before-only, 2 after-only), the row stopped as worse where the sign test says so."""
    shares = margin_shares(looks)
    chance = {0: 1 - p01 - p10, 1: p10, 2: p01}
    total = 0.0
    for path in itertools.product((0, 1, 2), repeat=looks[-1]):
        for k, n in enumerate(looks):
            b, c = path[:n].count(1), path[:n].count(2)
            if shares[k] and _within(True, n, n, b, c, margin, shares[k] * Q):
                total += math.prod(chance[x] for x in path)
                break
            if worse_level is not None and c > b and sign_p(c, b) <= worse_level:
                break
    return total


def _unpaired_paths(looks: tuple[int, ...], n_a: int, margin: float, p_a: float, p_b: float,
                    worse_level: float | None) -> float:
    shares = margin_shares(looks)
    total = 0.0
    for x_a in range(n_a + 1):
        weight = sps.binom.pmf(x_a, n_a, p_a)
        for path in itertools.product((0, 1), repeat=looks[-1]):
            for k, n in enumerate(looks):
                y = sum(path[:n])
                if shares[k] and _within(False, n_a, n, x_a, y, margin, shares[k] * Q):
                    total += weight * math.prod(p_b if x else 1 - p_b for x in path)
                    break
                if (worse_level is not None and y / n > x_a / n_a
                        and look_p(y, n, x_a, n_a) <= worse_level):
                    break
    return total


def test_within_chance_equals_every_path() -> None:
    looks, margin = (2, 4, 6, 8), 0.3
    for p10, worse in ((0.1, None), (0.2, None), (0.05, 0.3)):
        for p01 in (p10, p10 + margin):
            assert within_chance(looks, margin, Q, paired=True, nuisance=p10,
                                 change=p01 - p10, worse_level=worse) == pytest.approx(
                _paired_paths(looks, margin, p10, p01, worse), abs=1e-12)
    for p_a, worse in ((0.2, None), (0.4, 0.3), (0.6, None)):
        for p_b in (p_a, min(1.0, p_a + margin)):
            assert within_chance(looks, margin, Q, paired=False, nuisance=p_a,
                                 change=p_b - p_a, worse_level=worse) == pytest.approx(
                _unpaired_paths(looks, 8, margin, p_a, p_b, worse), abs=1e-12)


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize("maximum", [20, 40])
def test_size_at_the_margin_by_enumeration(paired: bool, maximum: int) -> None:
    """P(shown within | change toward worse = D) <= q at every nuisance value checked: twins
    before-only 0..(1 - D)/2, baselines (of the maximum) at 0..1 - D, 21 values each, D 0.1,
    0.2 and 0.3, looks every 4: every outcome summed by the recursion (checked against
    every path above). The union bound's price shows too: the size stays well under q."""
    looks = tuple(range(4, maximum + 1, 4))
    for margin in (0.1, 0.2, 0.3):
        top = (1 - margin) / 2 if paired else 1 - margin
        sizes = [within_chance(looks, margin, Q, paired=paired, nuisance=float(v),
                               change=margin) for v in np.linspace(0.0, top, 21)]
        assert max(sizes) <= Q
        assert max(sizes) > 0.4 * Q  # not vacuous: the test does reject near the margin
        # A change beyond the margin is rejected less often still.
        beyond = within_chance(looks, margin, Q, paired=paired,
                               nuisance=float(top / 2) * (0.5 if paired else 1.0),
                               change=min(margin + 0.1, 0.9 - top / 2))
        assert beyond <= Q


@pytest.mark.parametrize("paired", [True, False])
@pytest.mark.parametrize(("margin", "m"), [(0.3, 1), (0.3, 4), (0.2, 1)])
def test_power_at_its_design(paired: bool, margin: float, m: int) -> None:
    """The design: the fewest replicates at which each row's fixed test at the last margin
    look's level (FINAL_SHARE q) shows it within with power 0.8^(1/m) when nothing changed
    (``margin_replicates``, as the session's design check asks). The exact chance over the
    looks, the row stopped as worse where Holm's first level q/m would count it, reaches
    0.8 for all m rows at every base rate of a grid (twins independent given the rate)."""
    maximum = margin_replicates(paired, m, FINAL_SHARE * Q, margin)
    assert maximum is not None
    looks = looks_of(maximum)
    assert sequential_margin_level(maximum, Q) == pytest.approx(FINAL_SHARE * Q)
    if paired:
        from pytest_prove.stats._seq_paired import level

        worse = level(maximum, Q / m)
    else:
        from pytest_prove.stats._seq_unpaired import level as unpaired_level

        worse = unpaired_level(looks, maximum, Q / m)
    rates = np.linspace(0.0, 1.0, 41)
    power = min(within_chance(looks, margin, Q, paired=paired,
                              nuisance=float(r * (1 - r)) if paired else float(r),
                              change=0.0, worse_level=worse) for r in rates)
    assert power ** m >= 0.8


def _twins(n: int, before_only: int, after_only: int, both: int = 0) -> RowInput:
    return RowInput("c", "fail", "rise", both + before_only, n, both + after_only, n,
                    Pairs(n, both, before_only, after_only))


def test_decide_stops_a_condition_within_the_margin() -> None:
    """Identical twins (nothing changed, nothing discordant) at a margin of 0.1: not within
    at the margin looks of 28 and 56 twins (0.9^56 is above their share of q), within at
    84; without a margin the same row stops for futility (no change of max_mde) instead.
    A row that rises is worse and stops its condition, margin or not; the margin test reads
    every margin look taken, and p* only falls."""
    design = sequential_design(220, 4, paired=True)
    looks = design.looks
    flat = SequentialRow("c", "fail", "rise", tuple(_twins(n, 0, 0, n // 10)
                                                    for n in looks[:21]))
    assert looks[20] == 84
    rows, conditions = decide(design, [flat], margin=0.1)
    assert rows[0].state == "within margin" and conditions[0].state == "within margin"
    assert conditions[0].reason == ("decided at look 21 of 55 (84 replicates): within margin "
                                    "0.100 (every row)")
    assert rows[0].margin is not None and rows[0].margin.within
    assert rows[0].margin.bound <= 0.1
    earlier, open_ = decide(design, [dataclasses.replace(flat, looks=flat.looks[:20])],
                            margin=0.1)
    assert earlier[0].state == "open" and open_[0].state == "open"
    assert earlier[0].margin is not None and not earlier[0].margin.within
    assert earlier[0].margin.bound > 0.1  # the bound never contradicts the decision
    _, plain = decide(design, [dataclasses.replace(flat, looks=flat.looks[:20])])
    assert plain[0].state == "no change of max_mde"
    # The p-value is the smallest over the margin looks of p_k / share_k.
    shares = margin_shares(looks)
    p = min(margin_test_paired(0, 0, looks[k], 0.1).p / shares[k]
            for k in margin_looks(looks) if k < 21)
    assert rows[0].margin.p == pytest.approx(min(1.0, p))
    moved = SequentialRow("m", "fail", "rise", tuple(_twins(n, 0, 3 * n // 4)
                                                     for n in looks[:8]))
    decided, by = decide(design, [moved, flat], margin=0.1)
    assert decided[0].state == "worse" and by[0].state == "worse"
    assert by[1].state == "within margin"


def test_sequential_margin_test_of_a_success_reads_its_absence() -> None:
    looks = looks_of(40)
    rows = tuple(RowInput("c", "ok", "fall", n - n // 10, n, n - n // 10, n) for n in looks)
    test = sequential_margin_test(rows, looks, "fall", 0.3, Q)
    flipped = tuple(RowInput("c", "ko", "rise", n // 10, n, n // 10, n) for n in looks)
    again = sequential_margin_test(flipped, looks, "rise", 0.3, Q)
    assert test is not None and again is not None
    assert test.p == pytest.approx(again.p) and test.bound == pytest.approx(again.bound)
    assert test.change == 0.0 and test.within
    assert sequential_margin_test((None, None), looks, "rise", 0.3, Q) is None
