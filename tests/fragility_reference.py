"""The fragility search as it was before it was made fast (commit a959b1a), kept verbatim
as the reference the fast search must agree with, result for result: the tests in
tests/test_stats_fragility_speed.py and bench/compare.py compare the two on random
comparisons. Not used by the package."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from pytest_prove.stats._exact import fisher_p, midp
from pytest_prove.stats._fragility import Flip, Fragility, RowState

__all__ = ["fragility"]

FloatArray = npt.NDArray[np.float64]


def _best_p_after(state: RowState, k: int, sign: int, lowest: bool) -> float | None:
    """The lowest (or highest) p over the ways of making k flips toward ``sign``; None when
    k flips that way are impossible."""
    if not state.paired:
        x = state.x_after + sign * k
        if x < 0 or x > state.n_after:
            return None
        return fisher_p(state.x_before, state.n_before, x, state.n_after)
    b, c = state.before_only, state.after_only
    neither = state.n_after - state.both - b - c
    # i flips move a twin between "both" and "before only"; k - i between "after only" and
    # "neither". Toward more events: b -> both (b - i), neither -> after only (c + k - i).
    if sign > 0:
        i = np.arange(max(0, k - neither), min(k, b) + 1)
        bs, cs = b - i, c + (k - i)
    else:
        i = np.arange(max(0, k - c), min(k, state.both) + 1)
        bs, cs = b + i, c - (k - i)
    if i.size == 0:
        return None
    p = [midp(int(x), int(y)) for x, y in zip(bs, cs, strict=True)]
    return min(p) if lowest else max(p)


def _max_flips(state: RowState, sign: int) -> int:
    return state.n_after - state.x_after if sign > 0 else state.x_after


def _flips_to_no_change(state: RowState) -> int:
    """Flips that bring the change to zero (or just past it); beyond, the row would count
    again in the other direction, so searches toward no change stop here."""
    if state.paired:
        return abs(state.after_only - state.before_only)
    target = state.x_before * state.n_after / state.n_before
    return int(np.ceil(abs(state.x_after - target)))


def _fewest(test: Callable[[int], bool], ceiling: int) -> int | None:
    """Smallest k in [1, ceiling] with test(k), assuming test is monotone in k."""
    if ceiling < 1 or not test(ceiling):
        return None
    lo, hi = 0, ceiling
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if test(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _holm_counted(p: FloatArray, q: float) -> npt.NDArray[np.bool_]:
    m = p.size
    order = np.argsort(p, kind="stable")
    passed = p[order] * np.arange(m, 0, -1) <= q
    # Step-down: stop at the first failure.
    steps = int(np.argmin(passed)) if not passed.all() else m
    counted = np.zeros(m, dtype=bool)
    counted[order[:steps]] = True
    return counted


def _worsening_sign(state: RowState) -> int:
    return 1 if state.worse_when == "rise" else -1


def _rowwise_change(state: RowState) -> float:
    return state.x_after / state.n_after - state.x_before / state.n_before


def _is_worse(state: RowState, x_after_shift: int = 0) -> bool:
    change = (state.x_after + x_after_shift) / state.n_after - state.x_before / state.n_before
    return change * _worsening_sign(state) > 0


def _flip_word(sign: int) -> Literal["more", "fewer"]:
    return "more" if sign > 0 else "fewer"


def _describe(moves: Sequence[Flip]) -> str:
    parts = []
    for move in moves:
        noun = "episode" if move.flips == 1 else "episodes"
        verb = "record" if move.toward == "more" else "not record"
        parts.append(
            f"{move.flips} after {noun} of {move.condition} made to {verb} {move.event}"
        )
    return "; ".join(parts)


def _nothing_counted(states: Sequence[RowState], q: float) -> Fragility:
    m = len(states)
    best: int | None = None
    best_move: Flip | None = None
    seen: dict[tuple[object, ...], int | None] = {}
    for index in np.argsort([s.p for s in states], kind="stable"):
        state = states[int(index)]
        for sign in (1, -1):
            key = (state.x_before, state.n_before, state.x_after, state.n_after, state.paired,
                   state.both, state.before_only, state.after_only, sign)
            if key in seen:
                found = seen[key]
            else:
                ceiling = _max_flips(state, sign)
                if best is not None:
                    ceiling = min(ceiling, best - 1)

                def reaches(k: int, state: RowState = state, sign: int = sign) -> bool:
                    p = _best_p_after(state, k, sign, lowest=True)
                    return p is not None and p * m <= q

                # A miss under the bound means "not below the best so far", which stays
                # true as the best only falls; so every answer may be remembered.
                found = _fewest(reaches, ceiling)
                seen[key] = found
            if found is not None and (best is None or found < best):
                best = found
                best_move = Flip(state.condition, state.event, found, _flip_word(sign))
    if best is None or best_move is None:
        return Fragility(None, True, "no number of flipped outcomes would make any row count")
    return Fragility(best, True, _describe([best_move]), (best_move,))


def _uncount(
    states: Sequence[RowState], q: float, targets: Callable[[RowState], bool],
) -> tuple[int | None, list[Flip]]:
    """Greedy: stop every counted row matching ``targets`` from counting, fewest flips first."""
    current = list(states)
    p = np.array([s.p for s in current], dtype=np.float64)
    total = 0
    moves: list[Flip] = []
    for _ in range(len(current)):
        counted = _holm_counted(p, q)
        pending = [i for i in np.flatnonzero(counted) if targets(current[int(i)])]
        if not pending:
            return total, moves
        best: tuple[int, int, int, float] | None = None
        for index in pending[:50]:
            i = int(index)
            state = current[i]
            # Toward no change: against the sign of the observed change.
            sign = -1 if _rowwise_change(state) > 0 else 1

            def stops(k: int, i: int = i, state: RowState = state, sign: int = sign) -> bool:
                value = _best_p_after(state, k, sign, lowest=False)
                if value is None:
                    return False
                trial = p.copy()
                trial[i] = value
                return not _holm_counted(trial, q)[i]

            k = _fewest(stops, min(_max_flips(state, sign), _flips_to_no_change(state)))
            if k is not None and (best is None or k < best[0]):
                value = _best_p_after(state, k, sign, lowest=False)
                assert value is not None
                best = (k, i, sign, value)
        if best is None:
            return None, moves
        k, i, sign, value = best
        state = current[i]
        moves.append(Flip(state.condition, state.event, k, _flip_word(sign)))
        total += k
        p[i] = value
    return total, moves


def _make_worse(states: Sequence[RowState], q: float) -> tuple[int | None, Flip | None]:
    """Fewest flips in one row that make a worsening count (greedy over rows)."""
    p = np.array([s.p for s in states], dtype=np.float64)
    best: tuple[int, Flip] | None = None
    for index in np.argsort(p, kind="stable")[:200]:
        i = int(index)
        state = states[i]
        sign = _worsening_sign(state)
        ceiling = _max_flips(state, sign)
        if best is not None:
            ceiling = min(ceiling, best[0] - 1)

        def counts(k: int, i: int = i, state: RowState = state, sign: int = sign) -> bool:
            if not _is_worse(state, sign * k):
                return False
            value = _best_p_after(state, k, sign, lowest=True)
            if value is None:
                return False
            trial = p.copy()
            trial[i] = value
            return bool(_holm_counted(trial, q)[i])

        k = _fewest(counts, ceiling)
        if k is not None and (best is None or k < best[0]):
            best = (k, Flip(state.condition, state.event, k, _flip_word(sign)))
    if best is None:
        return None, None
    return best[0], best[1]


def fragility(states: Sequence[RowState], word: str, q: float) -> Fragility:
    """The fewest after-run outcome flips that would change ``word``."""
    if not states:
        return Fragility(None, True, "no rows")
    if word not in ("worse", "safer"):
        return _nothing_counted(states, q)
    if word == "worse":
        flips, moves = _uncount(states, q, lambda s: _is_worse(s))
        if flips is None:
            return Fragility(None, False, "no flips found that stop every worsening counting")
        return Fragility(flips, False, _describe(moves), tuple(moves))
    uncount, moves = _uncount(states, q, lambda s: not _is_worse(s))
    worsen, move = _make_worse(states, q)
    options: list[tuple[int, tuple[Flip, ...]]] = []
    if uncount is not None:
        options.append((uncount, tuple(moves)))
    if worsen is not None and move is not None:
        options.append((worsen, (move,)))
    if not options:
        return Fragility(None, False, "no flips found that change the word")
    flips, chosen = min(options, key=lambda option: option[0])
    return Fragility(flips, False, _describe(chosen), chosen)
