"""Twin agreement and the paired test, by simulation (fixed seeds, figures printed).

Sweeps of M conditions, one failure event each, twins drawn under the model of
``stats/_twins.py``: before-only kappa p0 (1 - p1), after-only that plus p1 - p0 (kappa 1:
independent twins; agreement with nothing changed 1 - 2 kappa p0 (1 - p0)). Every sweep's
verdict is read as the engine reads it: McNemar mid-p per row (``mcnemar_midp_array``), Holm
over the M rows at q (``holm``); a row counts when its Holm p is at most q. A check on the
first sweeps compares this with the engine's own ``compare`` (the figures must agree).

What it shows:

1. nothing changed, agreement 0.9 and 0.5 (base rate 0.5): the paired comparison's false
   worse-or-safer stays within q + 2 s.e.;
2. one condition moved by max_mde from its weakest base rate, at the replicates the design
   check asks for (independent twins): detected at least 0.80 - 2 s.e. of the time;
3. the design from an observed agreement: each sweep first runs an A/A pilot, takes the
   one-sided 99% upper bound of its discordance ratio (``pooled_kappa``) and runs the
   replicates ``twin_replicates`` asks at it (fewer than independent twins need); the moved
   condition is still detected at least 0.80 - 2 s.e. of the time, and nothing-changed keeps
   its size;
4. a stale baseline: a drift of DRIFT in every condition's failure rate between the
   baseline's sweep and the current one (the provider changed; the code did not). The
   comparison with the baseline reads worse far more often than q; both versions on the same
   seeds in the drifted world (one session) keep the size.

Run: python bench/twins.py [--sweeps N] [--quick]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import numpy.typing as npt

from pytest_prove.stats import (
    Pairs,
    RowInput,
    compare,
    design_check,
    holm,
    pooled_kappa,
    twin_replicates,
)
from pytest_prove.stats import agreement as agreement_of
from pytest_prove.stats._exact import mcnemar_midp_array

IntArray = npt.NDArray[np.int64]

Q = 0.05
M = 4
MAX_MDE = 0.20
BASE = 0.5  # every condition's failure rate, when nothing changed
DRIFT = 0.10
PILOT = 100  # twins per condition in the A/A pilot of the design from agreement


def kappa_for(agreement: float, p: float = BASE) -> float:
    """The discordance ratio whose twins agree that often at base rate p, nothing changed."""
    return (1.0 - agreement) / (2.0 * p * (1.0 - p))


def draw(rng: np.random.Generator, sweeps: int, n: int, p0: npt.NDArray[np.float64],
         p1: npt.NDArray[np.float64], kappa: float) -> tuple[IntArray, IntArray, IntArray]:
    """(both, b, c) of every sweep and condition: n twins each, multinomial."""
    pb = kappa * p0 * (1.0 - p1)
    pb = np.minimum(np.maximum(pb, np.maximum(0.0, p0 - p1)), np.minimum(p0, 1.0 - p1))
    pc = pb + p1 - p0
    both = p0 - pb
    neither = 1.0 - both - pb - pc
    probs = np.stack([both, pb, pc, np.maximum(neither, 0.0)], axis=1)
    counts = np.stack([rng.multinomial(n, row / row.sum(), size=sweeps) for row in probs],
                      axis=1)  # sweeps x M x 4
    return counts[..., 0], counts[..., 1], counts[..., 2]


def counted(b: IntArray, c: IntArray) -> npt.NDArray[np.bool_]:
    """Rows whose Holm-adjusted mid-p is at most Q, sweep by sweep (sweeps x M)."""
    p = mcnemar_midp_array(b.ravel(), c.ravel()).reshape(b.shape)
    return holm_rows(p) <= Q


def holm_rows(p: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Holm-adjusted p-values of every row of ``p`` at once (``holm`` row by row: checked
    on the first rows)."""
    m = p.shape[1]
    order = np.argsort(p, axis=1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=1) * np.arange(m, 0, -1)
    adjusted = np.minimum(np.maximum.accumulate(ranked, axis=1), 1.0)
    out = np.empty_like(p)
    np.put_along_axis(out, order, adjusted, axis=1)
    for row in range(min(p.shape[0], 20)):
        assert np.allclose(out[row], holm(p[row]))
    return out


def rate(hits: npt.NDArray[np.bool_]) -> tuple[float, float]:
    """A share and its standard error."""
    share = float(hits.mean())
    return share, math.sqrt(max(share * (1.0 - share), 1e-12) / hits.size)


def engine_agrees(rng: np.random.Generator, n: int, kappa: float, sweeps: int = 40) -> bool:
    """The shortcut's counted rows equal ``compare``'s on a few sweeps with a moved row."""
    p0 = np.full(M, BASE)
    p1 = p0.copy()
    p1[0] += 0.15
    both, b, c = draw(rng, sweeps, n, p0, p1, kappa)
    fast = counted(b, c)
    for s in range(sweeps):
        rows = [RowInput(condition=f"c{i}", event="fail", worse_when="rise",
                         x_before=int(both[s, i] + b[s, i]), n_before=n,
                         x_after=int(both[s, i] + c[s, i]), n_after=n,
                         pairs=Pairs(n, int(both[s, i]), int(b[s, i]), int(c[s, i])))
                for i in range(M)]
        done = compare(rows, q=Q, max_mde=MAX_MDE)
        if [r.counted for r in done.rows] != list(fast[s]):
            return False
    return True


def line(name: str, hits: npt.NDArray[np.bool_], bound: str, holds: bool) -> bool:
    share, se = rate(hits)
    print(f"  {name:<62} {share:.4f} (s.e. {se:.4f}; {bound}) {'ok' if holds else 'FAILED'}")
    return holds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweeps", type=int, default=4000)
    parser.add_argument("--quick", action="store_true", help="400 sweeps")
    args = parser.parse_args()
    sweeps = 400 if args.quick else args.sweeps
    rng = np.random.default_rng(20261205)
    started = time.perf_counter()
    independent = design_check(50, M, paired=True, q=Q, max_mde=MAX_MDE).replicates_needed
    assert independent is not None
    print(f"{sweeps} sweeps of {M} conditions, q {Q}, max_mde {MAX_MDE}; the design check "
          f"(independent twins) asks {independent} replicates per condition")
    print(f"engine check: the shortcut's verdict equals compare()'s on 40 sweeps: "
          f"{engine_agrees(rng, independent, kappa_for(0.9))}")
    ok = True
    p_null = np.full(M, BASE)
    weakest = (1.0 - MAX_MDE) / 2.0
    moved_p0 = np.array([weakest, *[BASE] * (M - 1)])
    moved_p1 = moved_p0.copy()
    moved_p1[0] += MAX_MDE
    for target in (0.9, 0.5):
        kappa = kappa_for(target)
        print(f"\nagreement {target} (kappa {kappa:.2f}) at base rate {BASE}, "
              f"{independent} twins per condition")
        _, b, c = draw(rng, sweeps, independent, p_null, p_null, kappa)
        alarms = counted(b, c).any(axis=1)
        share, se = rate(alarms)
        ok &= line("nothing changed: false worse-or-safer", alarms, f"<= q + 2 s.e. = "
                   f"{Q + 2 * se:.4f}", share <= Q + 2 * se)
        _, b, c = draw(rng, sweeps, independent, moved_p0, moved_p1, kappa)
        found = counted(b, c)[:, 0] & (c[:, 0] > b[:, 0])
        share, se = rate(found)
        ok &= line(f"one condition {weakest:.2f} -> {weakest + MAX_MDE:.2f}: detected worse",
                   found, f">= 0.80 - 2 s.e. = {0.8 - 2 * se:.4f}", share >= 0.8 - 2 * se)

    print(f"\nthe design from an observed agreement: an A/A pilot of {PILOT} twins per "
          "condition, then the replicates at its kappa's 99% upper bound")
    for target in (0.9, 0.5):
        kappa = kappa_for(target)
        both, b, c = draw(rng, sweeps, PILOT, p_null, p_null, kappa)
        needed: dict[float, int] = {}
        sizes = np.zeros(sweeps, dtype=np.int64)
        covered = np.zeros(sweeps, dtype=bool)
        for s in range(sweeps):
            pooled = pooled_kappa([agreement_of(PILOT, int(both[s, i]), int(b[s, i]),
                                                int(c[s, i])) for i in range(M)])
            upper = 1.0 if pooled.upper is None else min(pooled.upper, 1.0)
            covered[s] = upper >= min(kappa, 1.0) - 1e-12
            key = math.ceil(upper * 100.0) / 100.0  # rounded up: never fewer replicates
            if key not in needed:
                found_n = twin_replicates(M, kappa=key, q=Q, max_mde=MAX_MDE)
                assert found_n is not None
                needed[key] = found_n
            sizes[s] = needed[key]
        detected = np.zeros(sweeps, dtype=bool)
        alarms = np.zeros(sweeps, dtype=bool)
        for size in np.unique(sizes):
            rows = np.flatnonzero(sizes == size)
            _, b1, c1 = draw(rng, rows.size, int(size), moved_p0, moved_p1, kappa)
            detected[rows] = counted(b1, c1)[:, 0] & (c1[:, 0] > b1[:, 0])
            _, b0, c0 = draw(rng, rows.size, int(size), p_null, p_null, kappa)
            alarms[rows] = counted(b0, c0).any(axis=1)
        print(f"agreement {target} (kappa {kappa:.2f}): replicates asked: median "
              f"{int(np.median(sizes))}, range {sizes.min()}-{sizes.max()} (independent twins: "
              f"{independent}); the bound covered the true kappa in "
              f"{covered.mean():.3f} of pilots")
        share, se = rate(detected)
        ok &= line("one condition moved by max_mde: detected worse", detected,
                   f">= 0.80 - 2 s.e. = {0.8 - 2 * se:.4f}", share >= 0.8 - 2 * se)
        share, se = rate(alarms)
        ok &= line("nothing changed: false worse-or-safer", alarms,
                   f"<= q + 2 s.e. = {Q + 2 * se:.4f}", share <= Q + 2 * se)

    kappa = kappa_for(0.9)
    drifted = p_null + DRIFT
    print(f"\nstale baseline: every condition's rate drifts {BASE} -> {BASE + DRIFT} between "
          f"the baseline's sweep and the current one; the code did not change "
          f"(agreement 0.9, {independent} twins)")
    _, b, c = draw(rng, sweeps, independent, p_null, drifted, kappa)
    stale = counted(b, c).any(axis=1)
    share, se = rate(stale)
    ok &= line("against the stale baseline: false worse-or-safer", stale,
               f"far above q: {share > Q + 2 * se}", share > Q + 2 * se)
    _, b, c = draw(rng, sweeps, independent, drifted, drifted, kappa)
    same = counted(b, c).any(axis=1)
    share, se = rate(same)
    ok &= line("both versions on the same seeds, one session: false worse-or-safer", same,
               f"<= q + 2 s.e. = {Q + 2 * se:.4f}", share <= Q + 2 * se)
    print(f"\n{'all bounds hold' if ok else 'SOME BOUND FAILED'} "
          f"({time.perf_counter() - started:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
