"""The step statistics, computed on whole arrays, against the plain loops written out here.

``aalen_johansen``, ``logrank`` and ``logrank_by_cause`` count by step, stratum and cluster
with ``bincount`` on flat indices (a report of a thousand conditions compared them stratum by
stratum for a minute and a half). The loops below are the textbook definitions, one episode and
one step at a time: the Aalen-Johansen increment ``S(t-) d_k(t) / n(t)`` (Aalen and Johansen
1978), Mantel's stratified log-rank with the hypergeometric variance for ties, Peto's one-step
ratio, and Benjamini-Hochberg's step-up. Both must agree to 1e-12 on random inputs with ties,
censoring, empty arms, strata only one arm ran, causes only one arm had, and no events at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from pytest_prove.stats.steps import aalen_johansen, logrank, logrank_by_cause

TOL = 1e-12


def _close(ours: Any, theirs: Any) -> bool:
    if isinstance(theirs, float) or isinstance(ours, float):
        if ours is None or theirs is None:
            return ours is theirs
        return math.isclose(ours, theirs, rel_tol=TOL, abs_tol=TOL)
    return bool(ours == theirs)


# --------------------------------------------------------------------------- the loops


def _incidence_loop(steps: Sequence[int], causes: Sequence[str | None],
                    weights: Sequence[float], names: Sequence[str]) -> dict[str, list[float]]:
    """Each cause's Aalen-Johansen incidence at each distinct step, episode i counting
    weights[i] times; censored at a step are at risk at that step."""
    grid = sorted(set(steps))
    survival = 1.0
    total = {name: 0.0 for name in names}
    out: dict[str, list[float]] = {name: [] for name in names}
    for t in grid:
        at_risk = 0.0
        ended = {name: 0.0 for name in names}
        for step, cause, weight in zip(steps, causes, weights, strict=True):
            if step >= t:
                at_risk += weight
            if step == t and cause is not None:
                ended[cause] += weight
        if at_risk > 0:
            for name in names:
                total[name] += survival * ended[name] / at_risk
            survival *= 1.0 - sum(ended.values()) / at_risk
        for name in names:
            out[name].append(total[name])
    return out


def _aalen_johansen_loop(steps: list[int], causes: list[str | None],
                         clusters: list[str] | None, groups: dict[str, list[str]],
                         bootstrap: int, seed: int, level: float) -> dict[str, Any]:
    n = len(steps)
    names = sorted({c for c in causes if c is not None})
    grid = sorted(set(steps))
    labels: list[Any] = sorted(set(clusters)) if clusters is not None else list(range(n))
    member = ([labels.index(c) for c in clusters] if clusters is not None
              else list(range(n)))
    point = _incidence_loop(steps, causes, [1.0] * n, names)
    draws: list[dict[str, list[float]]] = []
    if bootstrap:
        # The same draws as the function: how many times each case is taken, per resample.
        rng = np.random.default_rng(seed)
        taken = rng.multinomial(len(labels), np.full(len(labels), 1.0 / len(labels)),
                                size=bootstrap)
        for row in taken:
            draws.append(_incidence_loop(steps, causes,
                                         [float(row[member[i]]) for i in range(n)], names))
    tail = (1.0 - level) / 2.0
    curves = []
    for name, members in [*((name, [name]) for name in names), *groups.items()]:
        known = [m for m in members if m in names]
        est = [sum(point[m][j] for m in known) for j in range(len(grid))]
        events = [sum(1 for s, c in zip(steps, causes, strict=True) if s == t and c in known)
                  for t in grid]
        if draws and known:
            low, high = [], []
            for j in range(len(grid)):
                values = [sum(d[m][j] for m in known) for d in draws]
                low.append(float(np.quantile(values, tail)))
                high.append(float(np.quantile(values, 1.0 - tail)))
        else:
            low, high = est, est
        curves.append({"name": name, "causes": list(members), "events": events,
                       "incidence": est, "low": low, "high": high})
    return {"steps": grid, "at_risk": [sum(1 for s in steps if s >= t) for t in grid],
            "censored": [sum(1 for s, c in zip(steps, causes, strict=True)
                             if s == t and c is None) for t in grid],
            "n": n, "clusters": len(labels), "bootstrap": bootstrap, "seed": seed,
            "level": level, "curves": curves}


def _logrank_loop(times_a: list[int], events_a: list[bool], times_b: list[int],
                  events_b: list[bool], strata_a: list[str] | None,
                  strata_b: list[str] | None, level: float = 0.95) -> dict[str, Any]:
    sa = strata_a if strata_a is not None else [""] * len(times_a)
    sb = strata_b if strata_b is not None else [""] * len(times_b)
    common = sorted(set(sa) & set(sb))
    observed_b = expected_b = variance = 0.0
    informative = total = n_a_all = n_b_all = 0
    for stratum in common:
        a = [(t, e) for t, e, s in zip(times_a, events_a, sa, strict=True) if s == stratum]
        b = [(t, e) for t, e, s in zip(times_b, events_b, sb, strict=True) if s == stratum]
        n_a_all += len(a)
        n_b_all += len(b)
        total += sum(e for _, e in a) + sum(e for _, e in b)
        v_here = 0.0
        for t in sorted({t for t, e in a + b if e}):
            n_a = sum(1 for u, _ in a if u >= t)
            n_b = sum(1 for u, _ in b if u >= t)
            d_a = sum(1 for u, e in a if u == t and e)
            d_b = sum(1 for u, e in b if u == t and e)
            n, d = n_a + n_b, d_a + d_b
            observed_b += d_b
            expected_b += d * n_b / n
            if n > 1:
                v_here += d * n_a * n_b * (n - d) / (n * n * (n - 1))
        variance += v_here
        informative += v_here > 0
    z = float(sps.norm.ppf(0.5 + level / 2.0))
    out: dict[str, Any] = {
        "n_a": n_a_all, "n_b": n_b_all, "observed_a": round(total - observed_b),
        "observed_b": round(observed_b), "expected_a": total - expected_b,
        "expected_b": expected_b, "variance": variance, "level": level,
        "strata": informative}
    if variance > 0:
        score = observed_b - expected_b
        log_hr = score / variance
        out.update(statistic=score * score / variance,
                   p=float(sps.chi2.sf(score * score / variance, 1)),
                   hazard_ratio=math.exp(log_hr),
                   hr_low=math.exp(log_hr - z / math.sqrt(variance)),
                   hr_high=math.exp(log_hr + z / math.sqrt(variance)))
    else:
        out.update(statistic=0.0, p=1.0, hazard_ratio=None, hr_low=None, hr_high=None)
    return out


def _bh_loop(ps: list[float]) -> list[float]:
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    adjusted = [0.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, ps[i] * m / rank)
        adjusted[i] = running
    return adjusted


# --------------------------------------------------------------------------- random inputs


def _arm(rng: np.random.Generator, n: int, strata: int, causes: str,
         steps: int) -> tuple[list[int], list[str | None], list[str]]:
    times = rng.integers(0, steps, n).tolist()  # few distinct steps: many ties
    pick = rng.integers(0, len(causes) + 1, n)  # 0: censored
    ends = [None if k == 0 else causes[k - 1] for k in pick.tolist()]
    return times, ends, [f"s{k}" for k in rng.integers(0, strata, n).tolist()]


SEEDS = range(40)


@pytest.mark.parametrize("seed", SEEDS)
def test_aalen_johansen_equals_the_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 2, 7, 40, 120]))
    times, ends, _ = _arm(rng, n, 1, "abc"[: int(rng.integers(0, 4))], int(rng.integers(1, 9)))
    clusters = ([f"case{k}" for k in rng.integers(0, int(rng.integers(1, 6)), n).tolist()]
                if seed % 3 else None)
    groups = {"failed": ["a", "b"], "other": ["c", "z"]}
    level = float(rng.choice([0.8, 0.95]))
    bootstrap = 0 if seed % 4 == 0 else 25
    ours = aalen_johansen(times, ends, clusters, groups=groups, bootstrap=bootstrap, seed=seed,
                          level=level).to_dict()
    theirs = _aalen_johansen_loop(times, ends, clusters, groups, bootstrap, seed, level)
    assert [c["name"] for c in ours["curves"]] == [c["name"] for c in theirs["curves"]]
    for key in ("steps", "at_risk", "censored", "n", "clusters", "bootstrap", "seed", "level"):
        assert ours[key] == theirs[key], key
    for mine, loop in zip(ours["curves"], theirs["curves"], strict=True):
        assert mine["events"] == loop["events"] and mine["causes"] == loop["causes"]
        for key in ("incidence", "low", "high"):
            assert len(mine[key]) == len(loop[key])
            assert all(_close(x, y) for x, y in zip(mine[key], loop[key], strict=True)), \
                (mine["name"], key, mine[key], loop[key])


def _compare_test(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    for key, value in theirs.items():
        assert _close(ours[key], value), (key, ours[key], value)


@pytest.mark.parametrize("seed", SEEDS)
def test_logrank_equals_the_loop(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    # Sizes with empty arms; arm B has a stratum arm A never ran, and some of A's strata are
    # missing from B when B is small.
    n_a, n_b = (int(x) for x in rng.choice([0, 1, 3, 25, 90], 2))
    strata = int(rng.integers(1, 7))
    steps = int(rng.integers(1, 8))
    ta, ca, sa = _arm(rng, n_a, strata, "ab", steps)
    tb, cb, sb = _arm(rng, n_b, strata + 1, "abc", steps)
    ea, eb = [c is not None for c in ca], [c is not None for c in cb]
    for given in ((sa, sb), (None, None)):
        ours = logrank(ta, ea, tb, eb, *given).to_dict()
        _compare_test(ours, _logrank_loop(ta, ea, tb, eb, *given))
        by_cause = logrank_by_cause(ta, ca, tb, cb, *given, q=0.1)
        names = sorted({c for c in ca + cb if c is not None})
        assert [t.cause for t in by_cause] == names
        loops = [_logrank_loop(ta, [c == name for c in ca], tb, [c == name for c in cb],
                               *given) for name in names]
        for test, loop in zip(by_cause, loops, strict=True):
            _compare_test(test.to_dict(), loop)
        for test, q in zip(by_cause, _bh_loop([loop["p"] for loop in loops]), strict=True):
            assert _close(test.q, q) and test.flag == (q <= 0.1)


def test_the_loops_cover_the_edges() -> None:
    """The random inputs above reach the cases the arrays could get wrong."""
    reached = set()
    for seed in SEEDS:
        rng = np.random.default_rng(1000 + seed)
        n_a, n_b = (int(x) for x in rng.choice([0, 1, 3, 25, 90], 2))
        strata = int(rng.integers(1, 7))
        steps = int(rng.integers(1, 8))
        ta, ca, sa = _arm(rng, n_a, strata, "ab", steps)
        tb, cb, sb = _arm(rng, n_b, strata + 1, "abc", steps)
        test = logrank(ta, [c is not None for c in ca], tb, [c is not None for c in cb], sa, sb)
        reached.add("empty arm" if not (n_a and n_b) else "both arms")
        if set(sb) - set(sa):
            reached.add("a stratum only one arm ran")
        if test.variance == 0:
            reached.add("no information")
        if 0 < test.strata < len(set(sa) & set(sb)):
            reached.add("a common stratum without information")
        if len(set(ta + tb)) < len(ta + tb):
            reached.add("ties")
    assert reached == {"empty arm", "both arms", "a stratum only one arm ran", "no information",
                       "a common stratum without information", "ties"}


def test_one_episode_one_case_one_stratum() -> None:
    one = aalen_johansen([3], ["a"], ["case"], bootstrap=10)
    assert one.curve("a").incidence == (1.0,) and one.clusters == 1
    censored = aalen_johansen([0], [None], bootstrap=5)
    assert censored.curves == () and censored.at_risk == (1,) and censored.censored == (1,)
    alone = logrank([1, 2], [True, False], [], [], ["s", "s"], [])
    assert (alone.n_a, alone.n_b, alone.variance, alone.p, alone.strata) == (0, 0, 0.0, 1.0, 0)
