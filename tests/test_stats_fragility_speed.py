"""The fast fragility search gives what the search before it gave, to the last move.

tests/fragility_reference.py keeps the search as it was (row by row, the whole Holm family
re-sorted for every trial); the fast one must agree with it on seeded random comparisons of
every kind: paired, unpaired and mixed rows, counts shared by many rows, words worse, safer
and neither. bench/compare.py runs the same check for a minute and times both.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

from pytest_prove.stats._exact import fisher_p, mcnemar_midp_array, midp
from pytest_prove.stats._fragility import (
    Fragility,
    RowState,
    _Family,
    _holm_counted,
    _midp_many,
    fragility,
)
from pytest_prove.stats._multiplicity import holm
from tests.fragility_reference import fragility as reference


def random_states(rng: np.random.Generator) -> tuple[list[RowState], str, float]:
    """A random family of rows as compare() hands it to the search, its word and q."""
    m = int(rng.integers(1, 41))
    q = float(rng.choice([0.05, 0.1, 0.2, 0.5, 0.9]))
    mix = rng.choice(["paired", "unpaired", "mixed"])
    n = int(rng.integers(2, 61))
    shared = int(rng.integers(1, m + 1))  # how many distinct rows the family draws from
    templates = []
    for _ in range(shared):
        paired = mix == "paired" or (mix == "mixed" and bool(rng.random() < 0.5))
        rise: Literal["rise", "fall"] = "rise" if rng.random() < 0.6 else "fall"
        p0 = float(rng.random())
        p1 = float(np.clip(p0 + rng.choice([0.0, 0.0, 0.3, -0.3, 0.6, -0.6]), 0.0, 1.0))
        if paired:
            u = rng.random(n)
            before, after = u < p0, u < p1
            flip = rng.random(n) < 0.1
            after = after ^ flip
            both = int((before & after).sum())
            b = int((before & ~after).sum())
            c = int((~before & after).sum())
            templates.append((rise, both + b, n, both + c, n, True, both, b, c, midp(b, c)))
        else:
            n2 = n if rng.random() < 0.7 else int(rng.integers(2, 61))
            x1 = int(rng.binomial(n, p0))
            x2 = int(rng.binomial(n2, p1))
            templates.append((rise, x1, n, x2, n2, False, 0, 0, 0, fisher_p(x1, n, x2, n2)))
    states = []
    for i in range(m):
        t = templates[int(rng.integers(0, shared))]
        states.append(RowState(f"c{i}", f"e{i % 3}", *t))  # type: ignore[arg-type]
    p_holm = holm(np.array([s.p for s in states]))
    worse = safer = False
    for s, adjusted in zip(states, p_holm, strict=True):
        change = s.x_after / s.n_after - s.x_before / s.n_before
        if adjusted <= q and change != 0:
            if (change > 0) == (s.worse_when == "rise"):
                worse = True
            else:
                safer = True
    word = "worse" if worse else "safer" if safer else str(
        rng.choice(["no significant change", "too small to tell"]))
    return states, word, q


def same(a: Fragility, b: Fragility) -> bool:
    return (a.flips, a.exhaustive, a.detail, a.moves) == (b.flips, b.exhaustive, b.detail,
                                                          b.moves)


@pytest.mark.parametrize("seed", range(2))
def test_fast_search_agrees_with_the_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    words = set()
    for _ in range(60):
        states, word, q = random_states(rng)
        words.add(word)
        fast, slow = fragility(states, word, q), reference(states, word, q)
        assert same(fast, slow), (word, q, states)
    assert {"worse", "safer"} <= words  # the greedy searches were exercised


def test_agrees_when_many_rows_count_among_many() -> None:
    # A family large enough that rows interact through Holm's step-down: 200 rows, a quarter
    # moved by 0.4 (some worse, some safer), many sharing counts.
    rng = np.random.default_rng(7)
    states = []
    for i in range(200):
        x1 = int(rng.integers(10, 60))
        x2 = x1 + (int(rng.choice([-40, 40, 30])) if i % 4 == 0 else int(rng.integers(-5, 6)))
        x2 = min(max(x2, 0), 100)
        worse_when: Literal["rise", "fall"] = "rise" if i % 3 else "fall"
        states.append(RowState(f"c{i}", "e", worse_when, x1, 100, x2, 100, False, 0, 0, 0,
                               fisher_p(x1, 100, x2, 100)))
    for word in ("worse", "safer"):
        fast, slow = fragility(states, word, 0.05), reference(states, word, 0.05)
        assert fast.flips is not None and same(fast, slow)


def test_one_changed_row_counts_as_a_full_holm_step_down_says() -> None:
    # _Family answers "would row i count with p-value v?" from one sort; it must match
    # sorting the changed family, ties (equal p-values, ordered by row) included.
    rng = np.random.default_rng(11)
    for _ in range(300):
        m = int(rng.integers(1, 30))
        q = float(rng.choice([0.05, 0.2, 0.5]))
        grid = np.array([0.0, 1e-4, 0.001, 0.004, 0.01, 0.02, 0.05, 0.1, 0.5, 1.0])
        p = rng.choice(grid, size=m) if rng.random() < 0.5 else rng.random(m) * q
        family = _Family(p, q)
        assert (family.counted() == _holm_counted(p, q)).all()
        rows = rng.integers(0, m, size=20)
        values = np.where(rng.random(20) < 0.5, rng.choice(grid, size=20), rng.random(20) * q)
        got = family.counts_with(rows, values)
        for i, v, answer in zip(rows, values, got, strict=True):
            trial = p.copy()
            trial[i] = v
            assert answer == _holm_counted(trial, q)[i], (p.tolist(), int(i), float(v), q)


def test_a_moved_row_leaves_the_family_as_a_fresh_sort_would() -> None:
    rng = np.random.default_rng(12)
    grid = np.array([0.0, 1e-4, 0.001, 0.01, 0.05, 0.5, 1.0])
    for _ in range(100):
        m = int(rng.integers(1, 30))
        p = rng.choice(grid, size=m)
        family = _Family(p, 0.2)
        for _ in range(5):
            i, v = int(rng.integers(0, m)), float(rng.choice(grid))
            family.set(i, v)
            p[i] = v
            fresh = _Family(p, 0.2)
            assert (family.order == fresh.order).all() and family.steps == fresh.steps
            assert (family.key == fresh.key).all() and (family.rank == fresh.rank).all()
            assert (family.moved_fails == fresh.moved_fails).all()


def test_the_search_s_mid_p_is_the_engine_s_to_the_last_bit() -> None:
    b, c = np.meshgrid(np.arange(0, 300, dtype=np.int64), np.arange(0, 300, dtype=np.int64))
    b, c = b.ravel(), c.ravel()
    assert (_midp_many(b, c) == mcnemar_midp_array(b, c)).all()
