"""Sequential comparison: a new run read look by look, each condition stopped once decided.

The design (docs/statistics.md, "Sequential runs"):

* **Looks.** A condition's look at n replicates is taken once its first n replicates have all
  ended (paired: the twins 0..n - 1), whatever order they finished in; looks come every
  ``step`` replicates (4, or N/80 for a large maximum N) and at N.
* **Efficacy (worse or safer), exact.** Paired: the sign test on the discordant twins, whose
  walk is fair under no change whatever the twins' agreement; p* = G_N(min p over the looks)
  with G_N the exact chance that a fair walk of N steps ever reaches that p
  (``_seq_paired``). Unpaired against a complete baseline: the conditional (Fisher) test of
  the run's first n replicates against the whole baseline, the level for each of Holm's steps
  calibrated by an exact rate-free recursion and proven at every rate (``_seq_unpaired``).
  Holm at q over the m rows; p* only falls as looks are added, so stopping conditions never
  adds a false verdict.
* **Futility, non-binding.** Paired (no change of max_mde): the profile likelihood ratio
  of the twins' trinomial against a change of +max_mde and of -max_mde both at least e^h.
  Unpaired (no worsening of max_mde): the likelihood ratio of the run's counts at the
  baseline's rate over the rate worse by max_mde at least e^h, one-sided (``_seq_unpaired``;
  designs recorded by version 2 ruled out both directions, and are read with that rule).
  It never enters the error rate above; it costs power, which the maximum makes up.
* **The maximum** is the smallest N at which the exact power at max_mde (futility included)
  is at least ``power`` at every nuisance value checked: paired, every chance s of a
  before-only twin from 0 (identical twins but for the change) to ((1 - max_mde)/2)^2
  (independent twins at the worst base rate); unpaired, base rates 0, 0.1, .., 1 - max_mde.
  The expected replicates printed are exact too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from . import _seq_paired, _seq_unpaired
from ._check import check_count, check_power, check_q
from ._compare import _check_row
from ._design import design_check
from ._results import RowInput
from ._roots import smallest
from ._seq_margin import final_level, sequential_margin_test
from ._seq_records import (
    FUTILE,
    STOPPED,
    ConditionDecision,
    RowDecision,
    SequentialDesign,
    SequentialRow,
    State,
    design_from_dict,
)
from ._spending import LOOKS, alpha_shares, look_schedule, obf_spending, sequential_p

__all__ = [
    "FUTILE",
    "FUTILITY_LEVEL",
    "LOOKS",
    "STOPPED",
    "ConditionDecision",
    "RowDecision",
    "SequentialDesign",
    "SequentialRow",
    "alpha_shares",
    "decide",
    "design_from_dict",
    "look_schedule",
    "look_step",
    "margin_level",
    "obf_spending",
    "sequential_design",
    "sequential_p",
]

#: Kept for the public API (it was the level of the interval an earlier margin seam read).
FUTILITY_LEVEL = 0.90
#: Futility thresholds: paired, the log profile likelihood ratio of the twins' trinomial
#: against +-max_mde; unpaired, the log likelihood ratio of the run's counts at the
#: baseline's rate over the rate worse by max_mde (version 2's designs: 2.0, the profile
#: likelihood ratio of the two binomials against +-max_mde).
FUTILITY = {True: 2.0, False: 1.5}
def look_step(maximum: int) -> int:
    """Replicates between looks: 4, or maximum/80 rounded up for a large maximum."""
    return max(4, -(-maximum // 80))


def looks_of(maximum: int, step: int | None = None) -> tuple[int, ...]:
    """The looks of a maximum: every ``step`` replicates, and the maximum."""
    step = look_step(maximum) if step is None else step
    return (*range(step, maximum, step), maximum)


def margin_level(replicates: int, q: float) -> float:
    """The level a sequential run of ``replicates`` a condition tests the margin at on its
    last look (its share of q): the margin's design check sizes the claim at it."""
    return final_level(looks_of(replicates), q)


# --------------------------------------------------------------------------- the design


def _method(paired: bool, m: int, q: float, step: int, h: float) -> str:
    test = ("exact sign test on the discordant twins, its level calibrated for every look "
            "of a fair walk" if paired else
            "Fisher's conditional test against the whole baseline, its level calibrated "
            "exactly over the looks and the base rate")
    rule = (f"likelihood ratio e^{h:g} against +-max_mde" if paired else
            f"likelihood ratio e^{h:g} against a worsening of max_mde from the baseline's rate")
    return (f"group-sequential, a look every {step} replicates: {test}; Holm q {q:g} over "
            f"{m} tests; futility when {rule} (non-binding)")


_LATE_RATES = 0.40  # the base rate of the expected replicates printed


def _s_grid(mde: float) -> tuple[float, ...]:
    top = ((1.0 - mde) / 2.0) ** 2
    return tuple(round(top * f, 6) for f in (0.0, 0.25, 0.5, 0.75, 1.0))


def _rates_grid(mde: float) -> tuple[float, ...]:
    return tuple(round(p, 6) for p in np.arange(0.0, 1.0 - mde + 1e-9, 0.1))


@functools.lru_cache(maxsize=256)
def _evaluate(maximum: int, alpha: float, mde: float,
              paired: bool) -> tuple[float, float, float, float]:
    """(efficacy level, power at max_mde: the smallest over the nuisance grid, expected
    replicates unchanged at 0.40, moved 0.40 -> 0.40 + max_mde), all exact."""
    looks = looks_of(maximum)
    h = FUTILITY[paired]
    p, moved = _LATE_RATES, _LATE_RATES + mde
    if paired:
        c = _seq_paired.level(maximum, alpha)
        power = min(_seq_paired.run(looks, c, mde, h, s + mde, s)[0] for s in _s_grid(mde))
        unchanged = _seq_paired.run(looks, c, mde, h, p * (1 - p), p * (1 - p))[2]
        after = _seq_paired.run(looks, c, mde, h, moved * (1 - p), p * (1 - moved))[2]
    else:
        c = _seq_unpaired.level(looks, maximum, alpha)
        power = min(_seq_unpaired.run(looks, maximum, c, mde, h, r, r + mde)[0]
                    for r in _rates_grid(mde))
        unchanged = _seq_unpaired.run(looks, maximum, c, mde, h, p, p)[2]
        after = _seq_unpaired.run(looks, maximum, c, mde, h, p, moved)[2]
    return c, power, unchanged, after


@functools.lru_cache(maxsize=1024)
def _reaches(maximum: int, alpha: float, mde: float, paired: bool, power: float) -> bool:
    """Whether ``_evaluate(maximum, ..)``'s power reaches ``power``, the same computation
    read nuisance value by nuisance value, the likely weakest first, and stopped at the
    first that falls short: a maximum searched for needs neither the expected replicates
    nor, when it falls short, the other values (a first design of 220 replicates costs a
    third less)."""
    looks = looks_of(maximum)
    h = FUTILITY[paired]
    if paired:
        c = _seq_paired.level(maximum, alpha)
        # Power falls as the twins disagree more (s up), for every maximum we have seen.
        return all(_seq_paired.run(looks, c, mde, h, s + mde, s)[0] >= power
                   for s in reversed(_s_grid(mde)))
    c = _seq_unpaired.level(looks, maximum, alpha)
    middle = (1.0 - mde) / 2.0  # power is lowest for base rates near the middle
    return all(_seq_unpaired.run(looks, maximum, c, mde, h, r, r + mde)[0] >= power
               for r in sorted(_rates_grid(mde), key=lambda r: abs(r - middle)))


def _smallest(start: int, alpha: float, mde: float, paired: bool, power: float,
              ceiling: int) -> int | None:
    """The smallest maximum from ``start`` whose power reaches ``power``: steps of 5% up
    until one does, then bisection below it (from half ``start`` when ``start`` does)."""
    def reaches(n: int) -> bool:
        return _reaches(n, alpha, mde, paired, power)

    low, high = start - 1, start
    if reaches(high):
        low = max(1, start // 2)
    while not reaches(high):
        low, high = high, high + max(1, high // 20)
        if high > ceiling:
            return None
    return smallest(reaches, low, high)


def sequential_design(
    replicates: int,
    m: int,
    *,
    paired: bool,
    q: float = 0.05,
    max_mde: float = 0.20,
    power: float = 0.8,
) -> SequentialDesign:
    """Plan a sequential sweep of ``replicates`` per condition at most, m rows.

    ``ok`` when the exact power at max_mde at this maximum reaches ``power`` at every
    nuisance value checked; ``replicates_needed`` is the smallest maximum that does (searched
    from the fixed design's replicates), found by the same exact computation.
    """
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    q = check_q(q)
    max_mde = check_q(max_mde, "max_mde")
    power = check_power(power)
    alpha = q / m
    fixed_check = design_check(2, m, paired=paired, q=q, max_mde=max_mde, power=power)
    fixed = fixed_check.replicates if fixed_check.ok else fixed_check.replicates_needed
    c, reached, unchanged, moved = _evaluate(n, alpha, max_mde, paired)
    ok = reached >= power
    needed: int | None = n if ok else None
    if fixed is not None:
        found = _smallest(fixed, alpha, max_mde, paired, power, 6 * fixed)
        if ok:
            needed = n if found is None else min(found, n)
        elif found is not None:
            needed = found if found > n else _smallest(n + 1, alpha, max_mde, paired, power,
                                                       n + 6 * fixed)
    return SequentialDesign(
        replicates=n, m=m, paired=paired, q=q, max_mde=max_mde, power=power,
        looks=looks_of(n), efficacy=c, futility=FUTILITY[paired], fixed=fixed,
        replicates_needed=needed, ok=ok, power_at_max_mde=reached,
        expected_unchanged=unchanged, expected_moved=moved,
        method=_method(paired, m, q, look_step(n), FUTILITY[paired]),
    )


# --------------------------------------------------------------------------- decisions


def _paired_counts(row: RowInput) -> tuple[int, int]:
    """(after-only, before-only) twins of a paired row."""
    assert row.pairs is not None
    return row.pairs.after_only, row.pairs.before_only


@functools.lru_cache(maxsize=1 << 16)
def _look_p(row: RowInput) -> float:
    """The row's nominal two-sided p at one look (sign test on twins, or conditional)."""
    if row.pairs is not None:
        return _seq_paired.sign_p(*_paired_counts(row))
    return _seq_unpaired.look_p(row.x_after, row.n_after, row.x_before, row.n_before)


def _futile(design: SequentialDesign, row: RowInput, worse_when: str) -> bool:
    if row.pairs is not None:
        w, b = _paired_counts(row)
        return _futile_counts(True, w, b, row.pairs.n, 0, design.max_mde, design.futility,
                              worse_when, "profile")
    rule = "worsening" if design.one_sided else "profile"
    return _futile_counts(False, row.x_after, row.n_after, row.x_before, row.n_before,
                          design.max_mde, design.futility, worse_when, rule)


@functools.lru_cache(maxsize=1 << 16)
def _futile_counts(paired: bool, a: int, b: int, c: int, d: int, mde: float,
                   h: float, worse_when: str, rule: str) -> bool:
    """The futility rule on a row's counts (paired: after-only, before-only, twins; unpaired:
    the run's events and replicates, the baseline's), cached: looks repeat counts."""
    if paired:
        return _seq_paired.futile(a, b, c, mde, h)
    return _seq_unpaired.futile(a, b, c, d, mde, h, worse_when, rule)


def _p_values(design: SequentialDesign, rows: Sequence[SequentialRow],
              m: int) -> tuple[np.ndarray, np.ndarray]:
    """(p*, Holm-adjusted p*) of every row. Paired rows: p* = G_N(min p), exact. Unpaired
    rows: Holm step by step, each row's min p against the level of its step; p* is the
    level of the step that counted it (rounded up to Holm's levels), 1 if none did."""
    least = np.ones(len(rows))
    for i, row in enumerate(rows):
        if len(row.looks) > len(design.looks):
            raise ValueError(
                f"row ({row.condition!r}, {row.event!r}) has {len(row.looks)} looks, the "
                f"design has {len(design.looks)}")
        values = [_look_p(r) for r in row.looks if r is not None]
        least[i] = min(values, default=1.0)
    if design.paired:
        p_star = np.array([_seq_paired.crossing(design.replicates, float(p)) if p < 1 else 1.0
                           for p in least])
        return p_star, _holm(p_star, m)
    p_star = np.ones(len(rows))
    sizes = {r.n_before for row in rows for r in row.looks if r is not None}
    if len(sizes) > 1:
        raise ValueError(f"unpaired rows of one sequential run read baselines of "
                         f"{sorted(sizes)} replicates; give every condition the same")
    if sizes:
        n_a = sizes.pop()
        for step, i in enumerate(np.argsort(least, kind="stable")):
            level = _holm_level(design.q, m - step)
            if least[i] > _seq_unpaired.level(design.looks, n_a, level):
                break
            p_star[i] = level
    return p_star, _holm(p_star, m)


def _holm_level(q: float, k: int) -> float:
    """Holm's level q/k for a step with k rows left, as the largest float whose product
    with k is at most q: Holm multiplies a counted row's p* by k again, and q/k * k rounds
    above q for some k (11, 22, 44, 75, 88, 150, 176 at q 0.05), which left that row, and
    every row after it, uncounted."""
    level = q / k
    while level * k > q:
        level = math.nextafter(level, 0.0)
    return level


def _holm(p: np.ndarray, m: int) -> np.ndarray:
    """Holm-adjusted p-values over m tests, the rows not given counting with p = 1."""
    from ._multiplicity import holm

    return holm(np.concatenate((p, np.ones(m - len(p)))))[: len(p)]


def decide(
    design: SequentialDesign, rows: Sequence[SequentialRow],
    *, margin: float | None = None,
) -> tuple[tuple[RowDecision, ...], tuple[ConditionDecision, ...]]:
    """Decide every row and every condition from the looks taken so far.

    A row is **worse** or **safer** when Holm's procedure at q over the m rows' sequential
    p-values counts it (m = ``design.m``, at least the number of rows given). It has **no
    change of max_mde** (paired) or **no worsening of max_mde** (unpaired: the rule is
    one-sided) when, at a look before the last, its futility rule holds; a row with no
    event to test has no change. A condition is decided **worse** as soon as one of its
    rows is; otherwise when every row is decided (safer if any row is, else no worsening
    when a row has it, else no change of max_mde); otherwise it is
    **complete** once it has taken its last look, and **open** before.

    With a ``margin`` each row is also tested for "change toward worse >= margin" at its
    margin looks (``_seq_margin``, exact at level q; ``RowDecision.margin``): a row shown
    within has the state **within margin** unless worse or safer. Futility stops no row
    then (the margin's question is still open): a condition stops when every row is worse
    or within (worse if any is; else within margin). Calling this again with more looks
    never undoes a worse, safer or within decision.
    """
    for index, row in enumerate(rows):
        if row.worse_when not in ("rise", "fall"):
            raise ValueError(f"rows[{index}] ({row.condition!r}, {row.event!r}): worse_when "
                             f"must be 'rise' or 'fall', got {row.worse_when!r}")
        for look, counts in enumerate(row.looks, start=1):
            if counts is not None:
                _check_look(index, look, counts)
    m = max(design.m, len(rows))
    last = len(design.looks)
    p_star, p_holm = _p_values(design, rows, m)
    current = [row.looks[-1] if row.looks else None for row in rows]
    decisions: list[RowDecision] = []
    for i, row in enumerate(rows):
        at = current[i]
        taken = len(row.looks)
        state: State = "open"
        look = taken
        tested = (None if margin is None else sequential_margin_test(
            row.looks, design.looks, row.worse_when, margin, design.q))
        if at is not None and p_holm[i] <= design.q:
            look = _first_look(row, design, float(p_star[i]), float(p_holm[i]))
            at = row.looks[look - 1]
            assert at is not None  # the look that set p* < 1 had a test
        change = 0.0 if at is None else at.x_after / at.n_after - at.x_before / at.n_before
        if at is not None and p_holm[i] <= design.q and change != 0.0:
            worse = (change > 0) == (row.worse_when == "rise")
            state = "worse" if worse else "safer"
        elif at is None and taken:
            state = "no change of max_mde"  # nothing to test: no event to change
        elif tested is not None and tested.within:
            state = "within margin"
        elif (margin is None and at is not None and taken < last
              and _futile(design, at, row.worse_when)):
            state = _ruled_out(design)
        elif taken >= last:
            state = "complete"
        decisions.append(RowDecision(
            row.condition, row.event, state, look, float(p_star[i]), float(p_holm[i]),
            change, tested))
    return tuple(decisions), _conditions(design, rows, decisions, margin)


def _check_look(index: int, look: int, counts: RowInput) -> None:
    """A row's counts at a look, checked as :func:`compare` checks a row's (the message
    names the look); counts already found good are not checked again (a session decides
    every row's looks again at each new look)."""
    problem = _problem(counts)
    if problem is not None:
        raise ValueError(f"look {look}: {problem.replace('rows[0]', f'rows[{index}]')}")


@functools.lru_cache(maxsize=1 << 16)
def _problem(counts: RowInput) -> str | None:
    try:
        _check_row(0, counts)
    except ValueError as exc:
        return str(exc)
    return None


def _first_look(row: SequentialRow, design: SequentialDesign, p_star: float,
                p_holm: float) -> int:
    """The first look at which the row would have been counted: its p* up to that look
    reaches the level Holm compared it with (q p* / p_holm)."""
    level = design.q * p_star / p_holm if p_holm > 0 else design.q
    least = 1.0
    for k, counts in enumerate(row.looks):
        if counts is None:
            continue
        least = min(least, _look_p(counts))
        if design.paired:
            if _seq_paired.crossing(design.replicates, least) <= level * (1 + 1e-12):
                return k + 1
        elif least <= _seq_unpaired.level(design.looks, counts.n_before, level):
            return k + 1
    return len(row.looks)


def _conditions(
    design: SequentialDesign, rows: Sequence[SequentialRow],
    decisions: Sequence[RowDecision], margin: float | None = None,
) -> tuple[ConditionDecision, ...]:
    by: dict[str, list[tuple[SequentialRow, RowDecision]]] = {}
    for row, decision in zip(rows, decisions, strict=True):
        by.setdefault(row.condition, []).append((row, decision))
    out: list[ConditionDecision] = []
    last = len(design.looks)
    for condition, members in by.items():
        taken = max(len(r.looks) for r, _ in members)
        worse = [d for _, d in members if d.state == "worse"]
        safer = [d for _, d in members if d.state == "safer"]
        if margin is None:
            decided = all(d.state in ("worse", "safer", *FUTILE) for _, d in members)
        else:  # every row worse, within (safer ones too), or with nothing to test
            decided = all(d.state in ("worse", "within margin", *FUTILE)
                          or (d.margin is not None and d.margin.within) for _, d in members)
        within = any(d.state == "within margin" for _, d in members)
        state: State
        if worse:
            state, look = "worse", min(d.look for d in worse)
        elif decided and safer:
            state, look = "safer", taken
        elif decided and within:
            state, look = "within margin", taken
        elif decided:  # "no worsening" when any row ruled out only a worsening
            state = ("no worsening of max_mde" if any(
                d.state == "no worsening of max_mde" for _, d in members)
                else "no change of max_mde")
            look = taken
        elif taken >= last:
            state, look = "complete", taken
        else:
            state, look = "open", taken
        size = design.looks[look - 1] if look else 0
        out.append(ConditionDecision(condition, state, look, size,
                                     _reason(state, look, last, size, members, margin)))
    return tuple(out)


def _reason(state: State, look: int, last: int, size: int,
            members: Sequence[tuple[SequentialRow, RowDecision]],
            margin: float | None = None) -> str:
    where = f"look {look} of {last} ({size} replicates)"
    if state == "within margin":
        return f"decided at {where}: within margin {margin:.3f} (every row)"
    if state in ("worse", "safer"):
        moved = ", ".join(_moved(r.looks[d.look - 1], d.event)
                          for r, d in members if d.state == state)
        return f"decided at {where}: {state} ({moved})"
    if state in FUTILE:
        return f"decided at {where}: {state} possible"
    if state == "complete":
        return f"ran all {size} replicates: undecided until the last look"
    return f"open after {where}"


def _ruled_out(design: SequentialDesign) -> State:
    """The state of a row the design's futility rule stops: no change (both directions:
    paired, and version 2's unpaired designs) or no worsening of max_mde (unpaired)."""
    return "no worsening of max_mde" if design.one_sided else "no change of max_mde"


def _moved(counts: RowInput | None, event: str) -> str:
    if counts is None:
        return event
    return (f"{event} {counts.x_before / counts.n_before:.3f} -> "
            f"{counts.x_after / counts.n_after:.3f}")
