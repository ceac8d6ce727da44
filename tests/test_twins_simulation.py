"""The smaller CI version of bench/twins.py (fixed seeds, a few hundred sweeps; bounds of
three standard errors for the smaller count): the paired comparison keeps its size whatever
the twins' agreement, sees max_mde at the design's replicates, still sees it at the fewer
replicates a design from an observed agreement asks, and a stale baseline raises false
alarms that one session's twins do not.

Twins are drawn under the model of stats/_twins.py; each sweep's verdict is the engine's
(mid-p per row, Holm over the rows at q), checked against ``compare`` on a few sweeps."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from pytest_prove.stats import (
    Pairs,
    RowInput,
    agreement,
    compare,
    design_check,
    holm,
    pooled_kappa,
    twin_replicates,
)
from pytest_prove.stats._exact import mcnemar_midp_array

Q, M, MAX_MDE, BASE, SWEEPS = 0.05, 4, 0.2, 0.5, 300
Counts = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]


def _kappa(agreement_seen: float) -> float:
    return (1.0 - agreement_seen) / (2.0 * BASE * (1.0 - BASE))


def _draw(rng: np.random.Generator, sweeps: int, n: int, p0: list[float], p1: list[float],
          kappa: float) -> Counts:
    """(both, b, c) of every sweep and condition."""
    rows = []
    for before, after in zip(p0, p1, strict=True):
        pb = min(max(kappa * before * (1.0 - after), max(0.0, before - after)),
                 min(before, 1.0 - after))
        pc = pb + after - before
        probs = np.array([before - pb, pb, pc, 1.0 - before - pc])
        rows.append(rng.multinomial(n, probs / probs.sum(), size=sweeps))
    counts = np.stack(rows, axis=1)
    return counts[..., 0], counts[..., 1], counts[..., 2]


def _counted(b: npt.NDArray[np.int64], c: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    p = mcnemar_midp_array(b.ravel(), c.ravel()).reshape(b.shape)
    return np.stack([holm(row) <= Q for row in p])


def _se(share: float, count: int) -> float:
    return math.sqrt(max(share * (1.0 - share), 0.01) / count)


@pytest.fixture(scope="module")
def replicates() -> int:
    found = design_check(50, M, paired=True, q=Q, max_mde=MAX_MDE).replicates_needed
    assert found is not None
    return found


@pytest.mark.slow
def test_the_shortcut_is_the_engines_verdict(replicates: int) -> None:
    rng = np.random.default_rng(1)
    both, b, c = _draw(rng, 15, replicates, [BASE] * M, [BASE + 0.15] + [BASE] * (M - 1),
                       _kappa(0.9))
    fast = _counted(b, c)
    for s in range(15):
        rows = [RowInput(condition=f"c{i}", event="fail", worse_when="rise",
                         x_before=int(both[s, i] + b[s, i]), n_before=replicates,
                         x_after=int(both[s, i] + c[s, i]), n_after=replicates,
                         pairs=Pairs(replicates, int(both[s, i]), int(b[s, i]), int(c[s, i])))
                for i in range(M)]
        assert [r.counted for r in compare(rows, q=Q, max_mde=MAX_MDE).rows] == list(fast[s])


@pytest.mark.parametrize("seen", [0.9, 0.5])
def test_size_and_power_at_an_agreement(replicates: int, seen: float) -> None:
    rng = np.random.default_rng(int(seen * 100))
    _, b, c = _draw(rng, SWEEPS, replicates, [BASE] * M, [BASE] * M, _kappa(seen))
    alarms = float(_counted(b, c).any(axis=1).mean())
    assert alarms <= Q + 3 * _se(Q, SWEEPS), alarms
    weakest = (1.0 - MAX_MDE) / 2.0
    _, b, c = _draw(rng, SWEEPS, replicates, [weakest] + [BASE] * (M - 1),
                    [weakest + MAX_MDE] + [BASE] * (M - 1), _kappa(seen))
    found = float((_counted(b, c)[:, 0] & (c[:, 0] > b[:, 0])).mean())
    assert found >= 0.8 - 3 * _se(0.8, SWEEPS), found


@pytest.mark.slow
def test_the_design_from_an_aa_pilot_asks_fewer_replicates_and_still_sees_max_mde(
        replicates: int) -> None:
    rng = np.random.default_rng(7)
    kappa, pilot = _kappa(0.9), 100
    both, b, c = _draw(rng, SWEEPS, pilot, [BASE] * M, [BASE] * M, kappa)
    asked: dict[float, int] = {}
    sizes = []
    for s in range(SWEEPS):
        pooled = pooled_kappa([agreement(pilot, int(both[s, i]), int(b[s, i]), int(c[s, i]))
                               for i in range(M)])
        assert pooled.upper is not None
        key = math.ceil(min(pooled.upper, 1.0) * 100.0) / 100.0
        if key not in asked:
            found = twin_replicates(M, kappa=key, q=Q, max_mde=MAX_MDE)
            assert found is not None
            asked[key] = found
        sizes.append(asked[key])
    assert max(sizes) < replicates  # fewer than independent twins need, every time
    weakest = (1.0 - MAX_MDE) / 2.0
    detected = []
    for size in sorted(set(sizes)):
        count = sizes.count(size)
        _, b1, c1 = _draw(rng, count, size, [weakest] + [BASE] * (M - 1),
                          [weakest + MAX_MDE] + [BASE] * (M - 1), kappa)
        detected.extend(_counted(b1, c1)[:, 0] & (c1[:, 0] > b1[:, 0]))
    found = float(np.mean(detected))
    assert found >= 0.8 - 3 * _se(0.8, SWEEPS), found


def test_a_stale_baseline_raises_false_alarms_one_session_does_not(replicates: int) -> None:
    rng = np.random.default_rng(11)
    kappa, drifted = _kappa(0.9), [BASE + 0.1] * M
    _, b, c = _draw(rng, SWEEPS, replicates, [BASE] * M, drifted, kappa)
    stale = float(_counted(b, c).any(axis=1).mean())
    _, b, c = _draw(rng, SWEEPS, replicates, drifted, drifted, kappa)
    same = float(_counted(b, c).any(axis=1).mean())
    assert stale > 0.5
    assert same <= Q + 3 * _se(Q, SWEEPS), same
