"""The sequential design and its decisions (stats/_sequential.py), and a small fixed-seed
version of bench/sequential.py's simulation."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from scipy import stats as sps  # type: ignore[import-untyped]

from pytest_prove.stats import (
    LOOKS,
    Pairs,
    RowInput,
    SequentialRow,
    alpha_shares,
    decide,
    design_check,
    look_schedule,
    obf_spending,
    sequential_design,
    sequential_p,
)

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_sequential",
                                                  ROOT / "bench" / "sequential.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_spending_is_lan_demets_obrien_fleming() -> None:
    alpha = 0.05 / 16
    z = sps.norm.isf(alpha / 2)
    for t in (0.2, 0.5, 0.8, 1.0):
        expected = 2 * sps.norm.sf(z / math.sqrt(t))
        assert float(obf_spending(t, alpha)) == pytest.approx(expected, rel=1e-10)
    assert float(obf_spending(0.0, alpha)) == 0.0
    shares = alpha_shares([42, 83, 124, 165, 206], alpha)
    assert sum(shares) == pytest.approx(1.0, abs=1e-15)
    assert all(w > 0 for w in shares)
    assert list(shares) == sorted(shares)  # O'Brien-Fleming spends late


def test_schedule_and_sequential_p() -> None:
    assert look_schedule(206) == (42, 83, 124, 165, 206)
    assert look_schedule(3) == (1, 2, 3)  # fewer looks than LOOKS when too small
    assert len(look_schedule(1000)) == LOOKS
    with pytest.raises(ValueError, match="positive"):
        look_schedule(0)
    assert sequential_p([], [0.5, 0.5]) == 1.0
    assert sequential_p([0.01, 0.2], [0.1, 0.9]) == pytest.approx(0.1)
    assert sequential_p([0.5, 0.002], [0.1, 0.9]) == pytest.approx(0.002 / 0.9)


def test_sequential_p_is_a_valid_p_value() -> None:
    """P(p* <= u) <= u under no change, for a paired row over its looks tested with the exact
    (conventional) McNemar test: the union bound over looks holds, however correlated."""
    design = sequential_design(40, 1, paired=True)
    rng = np.random.default_rng(7)
    draws = 20000
    before = rng.random((draws, 40)) < 0.4
    after = rng.random((draws, 40)) < 0.4
    ratios = []
    for n, share in zip(design.looks, design.shares, strict=True):
        b = np.sum(before[:, :n] & ~after[:, :n], axis=1)
        d = np.sum(before[:, :n] ^ after[:, :n], axis=1)
        p = np.minimum(1.0, 2 * sps.binom.cdf(np.minimum(b, d - b), d, 0.5))
        ratios.append(np.where(d == 0, 1.0, p) / share)
    p_star = np.minimum(1.0, np.min(ratios, axis=0))
    for u in (0.01, 0.05, 0.2):
        share = float(np.mean(p_star <= u))
        assert share <= u + 3 * math.sqrt(u * (1 - u) / draws), u
    # and sequential_p agrees with the vectorised form
    first = [float(r[0]) * w for r, w in zip(ratios, design.shares, strict=True)]
    assert sequential_p(first, design.shares) == pytest.approx(float(p_star[0]))


def test_design_inflates_the_fixed_design_and_expects_fewer() -> None:
    for paired, fixed in ((True, 182), (False, 188)):
        plan = sequential_design(2, 16, paired=paired)
        assert plan.fixed == fixed
        check = design_check(fixed, 16, paired=paired)
        assert check.ok and not design_check(fixed - 1, 16, paired=paired).ok
        assert plan.replicates_needed is not None
        assert fixed < plan.replicates_needed < 1.3 * fixed
        assert not plan.ok
        full = sequential_design(plan.replicates_needed, 16, paired=paired)
        assert full.ok and full.power_at_max_mde >= 0.8
        assert full.expected_unchanged < 0.65 * fixed
        assert full.expected_unchanged < full.expected_moved < full.replicates
        assert full.expected_episodes(16) == pytest.approx(16 * full.expected_unchanged)
        assert "O'Brien-Fleming" in full.method
        # Deterministic: the same figures on a second call.
        assert sequential_design(plan.replicates_needed, 16, paired=paired) == full


def _paired(name: str, n: int, before_only: int, after_only: int, both: int = 0) -> RowInput:
    return RowInput(name, "fail", "rise", both + before_only, n, both + after_only, n,
                    Pairs(n, both, before_only, after_only))


def test_decide_worse_early_futility_and_open() -> None:
    design = sequential_design(206, 4, paired=True)
    n1, n2 = design.looks[:2]
    rows = [
        # 0.10 -> 0.60: after-only twins pile up.
        SequentialRow("moved", "fail", "rise",
                      (_paired("moved", n1, 1, 22, 2), _paired("moved", n2, 2, 43, 4))),
        # the same twins before and after: nothing moves, and a tight interval.
        SequentialRow("same", "fail", "rise",
                      (_paired("same", n1, 0, 0, 4), _paired("same", n2, 1, 1, 8))),
        # 0.4 -> 0.5 so far: neither a verdict nor ruled out.
        SequentialRow("maybe", "fail", "rise",
                      (_paired("maybe", n1, 8, 12, 8), _paired("maybe", n2, 18, 26, 16))),
        SequentialRow("none", "fail", "rise", (None, None)),
    ]
    decided, conditions = decide(design, rows)
    by = {c.condition: c for c in conditions}
    assert by["moved"].state == "worse"
    assert by["moved"].look <= 2
    assert by["moved"].reason.startswith(f"decided at look {by['moved'].look} of 5")
    assert by["same"].state == "no change of max_mde"
    assert "no change of max_mde possible" in by["same"].reason
    assert by["maybe"].state == "open"
    assert by["none"].state == "no change of max_mde"
    assert decided[0].p_holm <= 0.05 < decided[2].p_holm
    # m counts rows not yet seen: with 400 rows Holm is stricter.
    strict = sequential_design(206, 400, paired=True)
    _, later = decide(strict, rows[2:3])
    assert later[0].state == "open"


def test_decide_futility_is_never_taken_at_the_last_look() -> None:
    design = sequential_design(10, 1, paired=True)
    looks = tuple(_paired("c", n, 0, 0, 0) for n in design.looks)
    _, conditions = decide(design, [SequentialRow("c", "fail", "rise", looks)])
    assert conditions[0].state == "complete"
    assert "ran all 10 replicates" in conditions[0].reason
    with pytest.raises(ValueError, match="looks"):
        decide(design, [SequentialRow("c", "fail", "rise", looks + looks)])


def test_margin_seam_stops_within_the_margin() -> None:
    design = sequential_design(206, 1, paired=True)
    n1 = design.looks[0]
    row = SequentialRow("c", "fail", "rise", (_paired("c", n1, 10, 2, 0),))
    _, plain = decide(design, [row])
    _, margin = decide(design, [row], margin=0.05)
    assert plain[0].state == "open"
    assert margin[0].state == "no change of max_mde"


def test_simulation_small_fixed_seed() -> None:
    """bench/sequential.py at 40 sweeps a line, paired: no false verdict beyond chance, the
    unchanged sweep spends under 0.65 of the fixed design, the condition moved by 0.40 is
    caught and spends under half its maximum."""
    bench = _bench()
    plan = sequential_design(2, 16, paired=True)
    assert plan.replicates_needed is not None and plan.fixed is not None
    design = sequential_design(plan.replicates_needed, 16, paired=True)
    flat = np.full(16, 0.40)
    out = bench.simulate(design, flat, flat, 40, 11)
    assert out.any_verdict <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 40)
    assert out.spent / (16 * plan.fixed) <= 0.65
    before, after = flat.copy(), flat.copy()
    before[0], after[0] = 0.30, 0.70
    moved = bench.simulate(design, before, after, 40, 12)
    assert moved.moved_worse >= 0.95
    assert moved.spent_moved / design.replicates <= 0.50


def test_compare_takes_sequential_pvalues_and_family_size() -> None:
    from pytest_prove.stats import compare

    rows = [_paired("a", 45, 1, 20, 3), _paired("b", 45, 2, 2, 5)]
    plain = compare(rows)
    assert plain.m == 2 and plain.rows[0].direction == "worse"
    # p* of 0.01 over m = 16: Holm needs 0.05 / 16, so nothing counts.
    seq = compare(rows, pvalues=[0.01, 1.0], m=16, sees=[False, True], sequential="seq")
    assert seq.m == 16 and seq.rows[0].p == 0.01 and not seq.rows[0].counted
    assert seq.rows[0].p_holm == pytest.approx(0.16)
    assert seq.rows[1].blind == ()
    assert seq.method.startswith("seq; ")
    assert seq.verdict.fragility.flips is None
    with pytest.raises(ValueError, match="one value per row"):
        compare(rows, pvalues=[0.1])
    with pytest.raises(ValueError, match="at least the number of rows"):
        compare(rows, m=1)
    with pytest.raises(ValueError, match=r"pvalues\[1\]"):
        compare(rows, pvalues=[0.1, 1.5])
