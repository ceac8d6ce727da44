"""Fragility: the fewest outcome flips in the after run that would change the verdict word.

A flip changes whether one after episode recorded one event (one row's after count moves by
one; for a paired row, one twin moves between cells). Limits and blindness depend on the
before run only, so flips can change the word only by changing which rows count (Holm at q).

* Nothing counted (``no significant change`` / ``too small to tell``): the word changes exactly
  when one row reaches p <= q/m (Holm's first step), and flips in other rows cannot help it,
  so the minimum over rows and directions is the exact answer; the search is exhaustive.
* ``worse`` / ``safer``: the word changes when every worse row stops counting (or, for safer,
  when one worse row starts to count). Rows interact through Holm's step-down, so the search
  is greedy (row by row, fewest flips first) and may overstate the fewest flips.

The searches ask many times whether one row would count if its p-value alone were changed.
:class:`_Family` answers that from one sort of the family's p-values (a binary search for
where the new value would sit, and prefix counts of which sorted values would pass Holm's
steps at their own or at the next position), instead of re-sorting all m p-values for every
trial; and the candidate rows of one greedy step are searched in lockstep, so each probe is
one numpy call over those rows. The probes made, their order and the answers are those of
the row-by-row search (tests/fragility_reference.py keeps it; tests and bench/compare.py
check that the two agree).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._exact import fisher_p
from ._roots import bisect, smallest
from ._rows import RowCounts

__all__ = ["Flip", "Fragility", "RowState", "fragility"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Flip:
    """``flips`` after episodes of (condition, event) made to record the event (``"more"``)
    or not to (``"fewer"``)."""

    condition: str
    event: str
    flips: int
    toward: Literal["more", "fewer"]


@dataclass(frozen=True, slots=True)
class Fragility:
    """``flips``: the fewest flips found that change the word (None: none can);
    ``exhaustive``: whether that number is proven minimal."""

    flips: int | None
    exhaustive: bool
    detail: str
    moves: tuple[Flip, ...] = ()


@dataclass(frozen=True, slots=True)
class RowState(RowCounts):
    """What fragility needs of a row (kept apart from Row to avoid an import cycle)."""

    paired: bool
    both: int
    before_only: int
    after_only: int
    p: float


def _best_p_after(state: RowState, k: int, sign: int, lowest: bool) -> float | None:
    """The lowest (or highest) p over the ways of making k flips toward ``sign``; None when
    k flips that way are impossible."""
    return _best_p_after_cached(
        state.paired, state.x_before, state.n_before, state.x_after, state.n_after,
        state.both, state.before_only, state.after_only, k, sign, lowest,
    )


@functools.lru_cache(maxsize=1 << 16)
def _best_p_after_cached(
    paired: bool, x_before: int, n_before: int, x_after: int, n_after: int, both: int,
    b: int, c: int, k: int, sign: int, lowest: bool,
) -> float | None:
    """:func:`_best_p_after` by the counts alone: rows sharing counts share the answer."""
    if not paired:
        x = x_after + sign * k
        if x < 0 or x > n_after:
            return None
        return fisher_p(x_before, n_before, x, n_after)
    neither = n_after - both - b - c
    # i flips move a twin between "both" and "before only"; k - i between "after only" and
    # "neither". Toward more events: b -> both (b - i), neither -> after only (c + k - i).
    if sign > 0:
        i = np.arange(max(0, k - neither), min(k, b) + 1, dtype=np.int64)
        bs, cs = b - i, c + (k - i)
    else:
        i = np.arange(max(0, k - c), min(k, both) + 1, dtype=np.int64)
        bs, cs = b + i, c - (k - i)
    if i.size == 0:
        return None
    p = _midp_many(bs, cs)
    return float(p.min() if lowest else p.max())


def _midp_many(b: IntArray, c: IntArray) -> FloatArray:
    """:func:`._exact.mcnemar_midp_array` without the bounds its general binomial CDF checks, which
    cannot bind here (0 <= min(b, c) <= d / 2): the same special-function calls on the same
    integers, summed in the same order, so the same doubles (a test checks it)."""
    k = np.minimum(b, c)
    d = b + c
    lower = np.where(k >= 1, special.bdtr(np.maximum(k - 1, 0), d, 0.5), 0.0)
    midp = np.where(d == 0, 1.0, special.bdtr(k, d, 0.5) + lower)
    return np.asarray(np.minimum(midp, 1.0), dtype=np.float64)


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
    return smallest(test, 0, ceiling)


def _holm_counted(p: FloatArray, q: float) -> npt.NDArray[np.bool_]:
    m = p.size
    order = np.argsort(p, kind="stable")
    passed = p[order] * np.arange(m, 0, -1) <= q
    # Step-down: stop at the first failure.
    steps = int(np.argmin(passed)) if not passed.all() else m
    counted = np.zeros(m, dtype=bool)
    counted[order[:steps]] = True
    return counted


class _Family:
    """The family's p-values sorted once, to say whether one row would count (Holm at q) if
    its p-value alone were changed, exactly as :func:`_holm_counted` on the changed family.

    Sorted stably (by value, then by index), with s_j at position j: a row of new value v
    lands at position r (the other rows before it in that order). It counts when every row
    before it passes its step and v (m - r) <= q. Removing the row from its old position r0
    leaves the rows before r0 where they were (step j: s_j (m - j) <= q) and moves those
    after it one place up (s_j (m - j + 1) <= q); so prefix facts about the sorted values
    decide every trial in O(log m).
    """

    def __init__(self, p: FloatArray, q: float) -> None:
        self.m = p.size
        self.q = q
        self.p = p.copy()
        self.order = np.argsort(p, kind="stable")
        self.sorted = self.p[self.order]
        self._derive()

    def _derive(self) -> None:
        m, s, order = self.m, self.sorted, self.order
        steps = np.arange(m, 0, -1)
        passed = s * steps <= self.q
        self.steps = int(np.argmin(passed)) if not passed.all() else m
        moved_fails = ~(s * (steps + 1) <= self.q)
        self.moved_fails = np.concatenate(([0], np.cumsum(moved_fails)))
        rank = np.empty(m, dtype=np.int64)
        rank[order] = np.arange(m, dtype=np.int64)
        self.rank = rank
        # Position j's key: the start of its run of equal values, then its row's index, so
        # that the keys rise with j and a row's place among equal values is found by search.
        starts = np.ones(m, dtype=bool)
        starts[1:] = s[1:] != s[:-1]
        run = np.maximum.accumulate(np.where(starts, np.arange(m, dtype=np.int64), 0))
        self.key = run * (m + 1) + order

    def _places(self, rows: IntArray, values: FloatArray) -> IntArray:
        """Where each row would sit in the sorted family with its p-value set to values[t]:
        the number of other rows before it (smaller, or equal and of a smaller index)."""
        m, s = self.m, self.sorted
        lo = np.searchsorted(s, values, side="left")
        hi = np.searchsorted(s, values, side="right")
        below = lo - (self.p[rows] < values)
        tied = np.searchsorted(self.key, lo.astype(np.int64) * (m + 1) + rows, side="left") - lo
        return np.asarray(below + np.where(lo < hi, tied, 0), dtype=np.int64)

    def set(self, row: int, value: float) -> None:
        """Change one row's p-value, moving it within the sorted order (no new sort)."""
        r = int(self._places(np.array([row]), np.array([value]))[0])
        r0 = int(self.rank[row])
        self.order = np.insert(np.delete(self.order, r0), r, row)
        self.sorted = np.insert(np.delete(self.sorted, r0), r, value)
        self.p[row] = value
        self._derive()

    def counted(self) -> npt.NDArray[np.bool_]:
        counted = np.zeros(self.m, dtype=bool)
        counted[self.order[: self.steps]] = True
        return counted

    def counts_with(self, rows: IntArray, values: FloatArray) -> npt.NDArray[np.bool_]:
        """Whether each row rows[t] would count with its p-value set to values[t] (the others
        as they are): ``_holm_counted(trial, q)[rows[t]]`` for every t at once."""
        m = self.m
        r = self._places(rows, values)
        r0 = self.rank[rows]
        earlier = np.where(
            r <= r0,
            self.steps >= r,
            (self.steps >= r0)
            & (self.moved_fails[np.minimum(r + 1, m)] == self.moved_fails[r0 + 1]),
        )
        return np.asarray(earlier & (values * (m - r) <= self.q), dtype=bool)


def _fewest_many(
    test: Callable[[IntArray, IntArray], npt.NDArray[np.bool_]], ceilings: IntArray
) -> list[int | None]:
    """:func:`_fewest` for many rows at once, in lockstep: row t's probes are those
    _fewest(lambda k: test([t], [k]), ceilings[t]) makes, each round one call of ``test``
    on the rows still searching."""
    n = ceilings.size
    found: list[int | None] = [None] * n
    live = np.flatnonzero(ceilings >= 1)
    if live.size == 0:
        return found
    reached = live[test(live, ceilings[live])]
    _, hi = bisect(lambda rows, mid: test(reached[rows], mid),
                   np.zeros(reached.size, dtype=np.int64),
                   ceilings[reached].astype(np.int64), width=1)
    for t, k in zip(reached, hi, strict=True):
        found[int(t)] = int(k)
    return found


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
    """Greedy: stop every counted row matching ``targets`` from counting, fewest flips first.

    Each step searches the first 50 counted targets (by row) for the fewest flips toward no
    change that stop it counting, all in lockstep, and makes the smallest such move (the
    first row on a tie)."""
    p = np.array([s.p for s in states], dtype=np.float64)
    wanted = np.array([targets(s) for s in states], dtype=bool)
    # Toward no change: against the sign of the observed change.
    signs = [-1 if _rowwise_change(s) > 0 else 1 for s in states]
    ceilings = np.array(
        [min(_max_flips(s, sign), _flips_to_no_change(s)) for s, sign in zip(
            states, signs, strict=True)],
        dtype=np.int64,
    )
    total = 0
    moves: list[Flip] = []
    family = _Family(p, q)
    # Each row's p after k flips, k = 0..its ceiling, filled in as the searches ask (rows
    # keep their counts: a move changes only the family's p-value of the row).
    known: dict[int, list[float | bool | None]] = {}

    def value_at(i: int, k: int) -> float | None:
        row = known.get(i)
        if row is None:
            row = known[i] = [False] * (int(ceilings[i]) + 1)
        value = row[k]
        if value is False:
            value = row[k] = _best_p_after(states[i], k, signs[i], lowest=False)
        assert not isinstance(value, bool)
        return value

    for _ in range(len(states)):
        pending = np.flatnonzero(family.counted() & wanted)[:50]
        if pending.size == 0:
            return total, moves

        def stops(at: IntArray, ks: IntArray, pending: IntArray = pending,
                  family: _Family = family) -> npt.NDArray[np.bool_]:
            rows = pending[at]
            values = [value_at(i, k) for i, k in zip(rows.tolist(), ks.tolist(), strict=True)]
            possible = np.array([v is not None for v in values], dtype=bool)
            out = np.zeros(rows.size, dtype=bool)
            if possible.any():
                trial = np.array([v for v in values if v is not None], dtype=np.float64)
                out[possible] = ~family.counts_with(rows[possible], trial)
            return out

        found = _fewest_many(stops, ceilings[pending])
        best: tuple[int, int] | None = None
        for index, k in zip(pending, found, strict=True):
            if k is not None and (best is None or k < best[0]):
                best = (k, int(index))
        if best is None:
            return None, moves
        k, i = best
        state = states[i]
        value = _best_p_after(state, k, signs[i], lowest=False)
        assert value is not None
        moves.append(Flip(state.condition, state.event, k, _flip_word(signs[i])))
        total += k
        family.set(i, value)
    return total, moves


def _make_worse(states: Sequence[RowState], q: float) -> tuple[int | None, Flip | None]:
    """Fewest flips in one row that make a worsening count (greedy over rows)."""
    p = np.array([s.p for s in states], dtype=np.float64)
    family = _Family(p, q)
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
            return bool(family.counts_with(np.array([i]), np.array([value]))[0])

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
