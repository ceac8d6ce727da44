"""The comparison of two runs: one row per (condition, event), and the verdict over them.

Per row: the exact test (McNemar mid-p for twins, Fisher otherwise), the simultaneous interval
on the change (Tango or Newcombe, at level 1 - q/m), and the detection limits. Over the family
of m rows: Benjamini-Hochberg adjusted p-values decide the flag, Holm adjusted p-values decide
what the verdict counts. With a margin, every row's margin test and the margin verdict. The
records it returns are in ``_results``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from ._check import check_count, check_counts, check_q
from ._exact import fisher_p, midp
from ._exact_power import PAIRED_MODEL
from ._fragility import Fragility, RowState, fragility
from ._intervals import (
    Interval,
    exact_intervals,
    exact_paired_intervals,
    newcombe_intervals,
    tango_intervals,
)
from ._limits import Limit, _cached_limits
from ._margin import (
    PAIRED_METHOD,
    UNPAIRED_METHOD,
    MarginTest,
    margin_test_paired,
    margin_test_unpaired,
)
from ._margin_design import replicates_needed
from ._multiplicity import benjamini_hochberg, holm
from ._replicates import replicates_for_all
from ._results import (
    Comparison,
    EventTally,
    MarginVerdict,
    MarginWord,
    Row,
    RowInput,
    Verdict,
    Word,
)

__all__ = ["compare", "interval_bounds", "simultaneous_bounds"]

FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- checks


def _check_row(index: int, row: RowInput) -> None:
    where = f"rows[{index}] ({row.condition!r}, {row.event!r})"
    if row.worse_when not in ("rise", "fall"):
        raise ValueError(f"{where}: worse_when must be 'rise' or 'fall', got {row.worse_when!r}")
    check_counts(f"{where} x_before", row.x_before, f"{where} n_before", row.n_before)
    check_counts(f"{where} x_after", row.x_after, f"{where} n_after", row.n_after)
    if row.n_before == 0 or row.n_after == 0:
        raise ValueError(
            f"{where}: each run needs at least one episode, got n_before={row.n_before}, "
            f"n_after={row.n_after}"
        )
    pairs = row.pairs
    if pairs is None:
        return
    for name in ("n", "both", "before_only", "after_only"):
        check_count(f"{where} pairs.{name}", getattr(pairs, name))
    if pairs.both + pairs.before_only + pairs.after_only > pairs.n:
        raise ValueError(
            f"{where}: pairs.both + pairs.before_only + pairs.after_only must be at most "
            f"pairs.n ({pairs.n}), got {pairs.both + pairs.before_only + pairs.after_only}"
        )
    expected = (pairs.n, pairs.both + pairs.before_only, pairs.n, pairs.both + pairs.after_only)
    got = (row.n_before, row.x_before, row.n_after, row.x_after)
    if got != expected:
        raise ValueError(
            f"{where}: a paired row counts over its matched pairs, so (n_before, x_before, "
            f"n_after, x_after) must be {expected} from its pairs, got {got}"
        )


# --------------------------------------------------------------------------- the engine


def _method(design: str, m: int, q: float, power: float, level: float,
            mirrored: Mapping[str, str], sequential: bool = False, looks: int = 1) -> str:
    tests = []
    if design in ("paired", "mixed"):
        tests.append("paired McNemar mid-p on discordant twins")
    if design in ("unpaired", "mixed"):
        tests.append("Fisher's exact test (two-sided)")
    mirrors = "".join(
        f"; {success} is the complement of {failure} over the declared outcomes, so it is "
        f"tested once, as {failure}" for success, failure in sorted(mirrored.items()))
    return (
        f"{'; '.join(tests)}; flag: Benjamini-Hochberg q {q:g} over {m} tests; "
        f"verdict: Holm q {q:g} over {m} tests; intervals: exact (Clopper-Pearson "
        + (f"bounds, union bound), each covering at least {100 * level:.3f}%" if looks == 1
           else f"bounds, union bound over the rates and the {looks} looks), each covering "
           f"at least {100 * level:.3f}% at the look its condition stopped at, whatever "
           "stopped it")
        + f", so all {m} together at least {100 * (1.0 - q):g}% (Bonferroni); "
        + ("limits: none per row, the sequential design's power at max_mde instead"
           + ("" if design == "paired" else " (a worsening of max_mde, unpaired)")
           if sequential else f"limits: power {power:g} at level q/m, exact")
        + mirrors
    )


def check_probability_value(index: int, value: float) -> float:
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"pvalues[{index}] must be a probability in [0, 1], got {value!r}")
    return value


def _limits_for(
    inputs: Sequence[RowInput], alpha: float, power: float
) -> list[tuple[Limit, Limit]]:
    """Limits of every row, computed per design in one vectorised batch each."""
    groups: dict[tuple[bool, int, int], list[int]] = {}
    for i, row in enumerate(inputs):
        groups.setdefault((row.pairs is not None, row.n_before, row.n_after), []).append(i)
    out: list[tuple[Limit, Limit]] = [(Limit(None, "no room"), Limit(None, "no room"))] * len(
        inputs
    )
    for (paired, n1, n2), members in groups.items():
        base = [inputs[i].x_before / n1 for i in members]
        rises = _cached_limits(paired, n1, n2, base, alpha, power, "rise")
        falls = _cached_limits(paired, n1, n2, base, alpha, power, "fall")
        for i, rise, fall in zip(members, rises, falls, strict=True):
            out[i] = (rise, fall)
    return out


def interval_bounds(inputs: Sequence[RowInput], level: float) -> tuple[FloatArray, FloatArray]:
    """Every row's interval at ``level`` as lows and highs: Tango's for paired rows and
    Newcombe's for the others, each kind computed for all its rows at once."""
    low = np.empty(len(inputs))
    high = np.empty(len(inputs))
    paired = [i for i, row in enumerate(inputs) if row.pairs is not None]
    unpaired = [i for i, row in enumerate(inputs) if row.pairs is None]
    if paired:
        twins = [inputs[i].pairs for i in paired]
        low[paired], high[paired] = tango_intervals(
            np.array([t.before_only for t in twins if t is not None], dtype=np.float64),
            np.array([t.after_only for t in twins if t is not None], dtype=np.float64),
            np.array([t.n for t in twins if t is not None], dtype=np.float64),
            level,
        )
    if unpaired:
        rows = [inputs[i] for i in unpaired]
        low[unpaired], high[unpaired] = newcombe_intervals(
            np.array([r.x_before for r in rows], dtype=np.float64),
            np.array([r.n_before for r in rows], dtype=np.float64),
            np.array([r.x_after for r in rows], dtype=np.float64),
            np.array([r.n_after for r in rows], dtype=np.float64),
            level,
        )
    return low, high


def simultaneous_bounds(inputs: Sequence[RowInput], level: float,
                        looks: int = 1) -> tuple[FloatArray, FloatArray]:
    """Every row's exact interval at ``level`` (each covers the change at least ``level`` of
    the time, whatever the rates): :func:`exact_paired_intervals` for paired rows and
    :func:`exact_intervals` for the others, each kind for all its rows at once. ``looks``:
    a sequential run's looks per condition, over which each interval holds at once."""
    low = np.empty(len(inputs))
    high = np.empty(len(inputs))
    paired = [i for i, row in enumerate(inputs) if row.pairs is not None]
    unpaired = [i for i, row in enumerate(inputs) if row.pairs is None]
    if paired:
        twins = [t for t in (inputs[i].pairs for i in paired) if t is not None]
        low[paired], high[paired] = exact_paired_intervals(
            np.array([t.before_only for t in twins], dtype=np.float64),
            np.array([t.after_only for t in twins], dtype=np.float64),
            np.array([t.n for t in twins], dtype=np.float64), level, looks)
    if unpaired:
        rows = [inputs[i] for i in unpaired]
        low[unpaired], high[unpaired] = exact_intervals(
            np.array([r.x_before for r in rows], dtype=np.float64),
            np.array([r.n_before for r in rows], dtype=np.float64),
            np.array([r.x_after for r in rows], dtype=np.float64),
            np.array([r.n_after for r in rows], dtype=np.float64), level, looks)
    return low, high


def _intervals_for(inputs: Sequence[RowInput], level: float,
                   looks: int = 1) -> list[Interval]:
    low, high = simultaneous_bounds(inputs, level, looks)
    return [Interval(float(lo), float(hi), level) for lo, hi in zip(low, high, strict=True)]


def _blind_directions(
    p0: float, rise: Limit, fall: Limit, max_mde: float
) -> tuple[Literal["rise", "fall"], ...]:
    """Directions with room for a change of max_mde whose limit does not reach it; a
    direction with less room than max_mde cannot show such a change at all and does not
    count against the row."""
    blind: list[Literal["rise", "fall"]] = []
    if 1.0 - p0 >= max_mde - 1e-12 and not rise.sees(max_mde):
        blind.append("rise")
    if p0 >= max_mde - 1e-12 and not fall.sees(max_mde):
        blind.append("fall")
    return tuple(blind)


def compare(
    rows: Sequence[RowInput],
    *,
    q: float = 0.05,
    max_mde: float = 0.20,
    power: float = 0.8,
    mirrored: Mapping[str, str] | None = None,
    margin: float | None = None,
    pvalues: Sequence[float] | None = None,
    sees: Sequence[bool] | None = None,
    m: int | None = None,
    sequential: str | None = None,
    margin_tests: Sequence[MarginTest] | None = None,
    margin_level: float | None = None,
    looks: int = 1,
) -> Comparison:
    """Compare two runs row by row and give the verdict (SPEC section 4).

    ``mirrored`` (``{success: failure}``) names the events left out because each is the
    complement of a tested one; the method says so. ``margin`` (in (0, 1)) adds the margin
    test of every row and the margin verdict (``Comparison.margin``).

    A sequential run (stats/_sequential.py) passes its rows' sequential p-values as
    ``pvalues`` (they replace each row's own test), its family size ``m`` (rows not given
    count with p = 1), ``sees`` (rows that ruled a change of max_mde out, never blind) and
    its method's name as ``sequential``. Its fragility is not searched: flipping outcomes
    would change looks already taken. With a margin it passes each row's margin test over
    its looks as ``margin_tests`` (``_seq_margin``), and ``margin_level``, the level of the
    test at its last look, which the replicates advised for the claim are sized at; a
    row is then beyond the margin only when it is also counted worse. ``looks``: its
    design's looks per condition; each row's interval is read at the look its condition
    stopped at, a look its data chose, so it is built to hold at every look at once (union
    bound, :func:`exact_intervals`) and covers at least 1 - q/m there."""
    q = check_q(q)
    if margin is not None:
        margin = check_q(margin, "margin")
    max_mde = check_q(max_mde, "max_mde")
    power = check_q(power, "power")
    inputs = list(rows)
    if not inputs:
        raise ValueError("compare() needs at least one (condition, event) row, got none")
    seen: set[tuple[str, str]] = set()
    for i, row in enumerate(inputs):
        _check_row(i, row)
        key = (row.condition, row.event)
        if key in seen:
            raise ValueError(f"rows[{i}]: ({row.condition!r}, {row.event!r}) appears twice")
        seen.add(key)

    given = len(inputs)
    for name, values in (("pvalues", pvalues), ("sees", sees), ("margin_tests", margin_tests)):
        if values is not None and len(values) != given:
            raise ValueError(f"{name} must have one value per row ({given}), got {len(values)}")
    if m is None:
        m = given
    elif m < given:
        raise ValueError(f"m must be at least the number of rows ({given}), got {m}")
    alpha = q / m
    level = 1.0 - alpha

    p = np.empty(given)
    if pvalues is not None:
        p[:] = [check_probability_value(i, v) for i, v in enumerate(pvalues)]
    else:
        for i, row in enumerate(inputs):
            if row.pairs is not None:
                p[i] = midp(row.pairs.before_only, row.pairs.after_only)
            else:
                p[i] = fisher_p(row.x_before, row.n_before, row.x_after, row.n_after)
    padded = np.concatenate((p, np.ones(m - given)))
    q_values = benjamini_hochberg(padded)[:given]
    p_holm = holm(padded)[:given]
    # A sequential run's rows have no limit of their own: the fixed test's limit at the look
    # a condition stopped at is not what the sequential procedure detects (a printed rise was
    # caught 0.19-0.72 of the time); the design's power at max_mde is (``sees`` carries it).
    limits = (_limits_for(inputs, alpha, power) if sequential is None
              else [(Limit(None, "sequential"), Limit(None, "sequential"))] * given)
    if looks < 1:
        raise ValueError(f"looks must be at least 1, got {looks}")
    intervals = _intervals_for(inputs, level, looks)

    built: list[Row] = []
    for i, row in enumerate(inputs):
        before = row.x_before / row.n_before
        after = row.x_after / row.n_after
        change = after - before
        interval = intervals[i]
        counted = bool(p_holm[i] <= q)
        direction: Literal["worse", "safer", "unchanged"] = "unchanged"
        if counted and change != 0:
            worse = (change > 0) == (row.worse_when == "rise")
            direction = "worse" if worse else "safer"
        rise, fall = limits[i]
        built.append(
            Row(
                condition=row.condition, event=row.event, worse_when=row.worse_when,
                x_before=row.x_before, n_before=row.n_before, x_after=row.x_after,
                n_after=row.n_after, pairs=row.pairs, before=before, after=after,
                change=change, p=float(p[i]), q_value=float(q_values[i]),
                p_holm=float(p_holm[i]), flag=bool(q_values[i] <= q), counted=counted,
                direction=direction, interval=interval, rise=rise, fall=fall,
                blind=() if sees is not None and sees[i]
                else _blind_directions(before, rise, fall, max_mde),
            )
        )

    margin_verdict: MarginVerdict | None = None
    if margin is not None:
        built, margin_verdict = _with_margin(built, margin, q, margin_tests, margin_level)

    worse_rows = tuple(r for r in built if r.direction == "worse")
    safer_rows = tuple(r for r in built if r.direction == "safer")
    blind_rows = tuple(r for r in built if r.is_blind)
    word: Word
    if worse_rows:
        word = "worse"
    elif safer_rows:
        word = "safer"
    elif blind_rows:
        word = "too small to tell"
    else:
        word = "no significant change"

    numeric = [
        limit.value for r in built for limit in (r.rise, r.fall) if limit.value is not None
    ]
    needed = _replicates_needed(blind_rows, alpha, power, max_mde)

    designs = {r.paired for r in built}
    design: Literal["paired", "unpaired", "mixed"] = (
        "mixed" if len(designs) == 2 else ("paired" if True in designs else "unpaired")
    )
    tallies = []
    for event in dict.fromkeys(r.event for r in built):
        of_event = [r for r in built if r.event == event]
        tallies.append(EventTally(
            event,
            sum(r.direction == "worse" for r in of_event),
            sum(r.direction == "safer" for r in of_event),
            sum(r.direction == "unchanged" for r in of_event),
        ))
    states = [
        RowState(
            r.condition, r.event, r.worse_when, r.x_before, r.n_before, r.x_after, r.n_after,
            r.paired,
            r.pairs.both if r.pairs else 0,
            r.pairs.before_only if r.pairs else 0,
            r.pairs.after_only if r.pairs else 0,
            r.p,
        )
        for r in built
    ]
    verdict = Verdict(
        word=word,
        worse=worse_rows,
        safer=safer_rows,
        blind=blind_rows,
        largest_limit=max(numeric) if numeric else None,
        replicates_needed=needed,
        fragility=fragility(states, word, q) if pvalues is None else Fragility(
            None, False, "not searched for a sequential run: a flip would change its looks"),
        by_event=tuple(tallies),
        m=m,
        q=q,
        max_mde=max_mde,
    )
    return Comparison(
        rows=tuple(built),
        verdict=verdict,
        m=m,
        q=q,
        max_mde=max_mde,
        power=power,
        method=(_method(design, m, q, power, level, mirrored or {}) if sequential is None
                else f"{sequential}; " + _method(design, m, q, power, level, mirrored or {},
                                                 sequential=True, looks=looks)),
        design=design,
        paired_model=PAIRED_MODEL if design != "unpaired" else None,
        level=level,
        margin=margin_verdict,
    )


def _margin_of(row: Row, margin: float, q: float) -> MarginTest:
    if row.pairs is not None:
        return margin_test_paired(row.pairs.before_only, row.pairs.after_only, row.pairs.n,
                                  margin, alpha=q, worse_when=row.worse_when)
    return margin_test_unpaired(row.x_before, row.n_before, row.x_after, row.n_after, margin,
                                alpha=q, worse_when=row.worse_when)


def _with_margin(rows: list[Row], margin: float, q: float,
                 given: Sequence[MarginTest] | None = None,
                 level: float | None = None) -> tuple[list[Row], MarginVerdict]:
    """Every row's margin test (``given``: a sequential run's), their Holm adjustment, and
    the margin verdict."""
    tests = list(given) if given is not None else [_margin_of(r, margin, q) for r in rows]
    adjusted = holm(np.array([t.p for t in tests]))
    out: list[Row] = []
    for row, test, p_holm in zip(rows, tests, adjusted, strict=True):
        toward_worse_low = row.interval.low if row.worse_when == "rise" else -row.interval.high
        above = toward_worse_low > margin and (given is None or row.direction == "worse")
        out.append(dataclasses.replace(row, margin=test, margin_holm=float(p_holm),
                                       beyond=above))
    beyond = tuple(r for r in out if r.beyond)
    not_within = tuple(r for r in out if not r.within)
    word: MarginWord = ("beyond margin" if beyond else
                        "not shown within margin" if not_within else "within margin")
    m = len(out)
    paired = all(r.paired for r in out)
    needed, exact = (replicates_needed(paired, m, q if level is None else level, margin)
                     if not_within else (None, True))
    kinds = sorted({PAIRED_METHOD if r.paired else UNPAIRED_METHOD for r in out})
    method = (f"margin {margin:g}: {'; '.join(kinds)}; one-sided, change toward worse < "
              f"{margin:g}; every row at level q = {q:g}, so the claim for all {m} rows holds "
              f"at level {q:g} (intersection-union test, Berger 1982); a claim about one row "
              f"alone: Holm q {q:g} over {m} tests; beyond: simultaneous interval wholly above "
              f"{margin:g}" + ("" if given is None else
                               "; a sequential run: each row tested at its condition's "
                               "margin looks, q split across them (union bound), beyond "
                               "only when counted worse"))
    return out, MarginVerdict(margin=margin, word=word, not_within=not_within, beyond=beyond,
                              replicates_needed=needed, replicates_exact=exact, method=method)


def _replicates_needed(
    blind: Sequence[Row], alpha: float, power: float, max_mde: float
) -> int | None:
    """Replicates per condition (in both runs) at which every blind row, at its base rate,
    would see max_mde in each direction it is blind to; None if there is no blind row or
    the search's ceiling is passed. One search per design (paired or not)."""
    if not blind:
        return None
    figures: list[int] = []
    for paired in (False, True):
        rows = [r for r in blind if r.paired == paired]
        if not rows:
            continue
        rates: dict[Literal["rise", "fall"], list[float]] = {}
        for row in rows:
            for direction in row.blind:
                rates.setdefault(direction, []).append(row.before)
        found = replicates_for_all(
            rates, paired=paired, alpha=alpha, max_mde=max_mde, power=power,
            start=max(max(r.n_before, r.n_after) for r in rows) + 1,
        )
        if found is None:
            return None
        figures.append(found)
    return max(figures)
