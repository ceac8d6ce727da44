"""Sequential comparison: a new run taken in looks, each condition stopped once it is decided.

The design (docs/statistics.md, "Sequential runs"):

* **Looks.** A condition's replicates are taken in ``LOOKS`` looks at n_k = ceil(k N / LOOKS)
  replicates, N the planned maximum. A look uses exactly the condition's first n_k replicates
  (paired: the twins 0..n_k - 1), whichever order they finished in, so its data does not depend
  on when it was taken.
* **Efficacy (worse or safer).** Each row's share of the error rate, alpha = q/m, is spent over
  the looks by the Lan-DeMets O'Brien-Fleming-type function
  alpha(t) = 2 - 2 Phi(z_{1 - alpha/2} / sqrt(t)) at t_k = n_k / N. Look k receives the
  increment w_k = (alpha(t_k) - alpha(t_{k-1})) / alpha (the w_k sum to 1). A row's
  **sequential p-value** is p* = min_k p_k / w_k over the looks taken, p_k the row's exact
  p-value (McNemar mid-p or Fisher) on the data of look k. By the union bound over looks,
  P(p* <= u) <= sum_k P(p_k <= u w_k) <= u: p* is a valid p-value however the looks are
  correlated. Holm's procedure at q over the m rows' p* then controls the family-wise error
  rate at q. p* only falls as looks are added and Holm rejects more when p-values fall, so
  every row rejected at any time is also rejected by Holm on the p* the full sweep would
  have given: stopping a condition, for either reason, never adds a false verdict.
* **Futility (no change of max_mde).** At every look but the last, a row whose interval on
  the change at level ``FUTILITY_LEVEL`` (Tango's paired, Newcombe's unpaired) lies strictly
  inside (-max_mde, +max_mde) has ruled a change of max_mde out, each side at one-sided
  level (1 - FUTILITY_LEVEL) / 2. A condition stops for futility when every one of its rows
  has. The rule is non-binding: the efficacy boundaries above ignore it, so it cannot raise
  the error rate; it only costs power, which the planned maximum makes up.
* **The planned maximum.** Spending and futility cost power at max_mde. The maximum is the
  fixed design's replicates (``design_check``) times an inflation found, with the normal
  approximation of the procedure (a Brownian motion in the information of the looks), as
  the smallest that keeps power at max_mde at least ``power`` at the worst base rate. The
  same approximation gives the expected replicates with nothing changed and with a change
  of max_mde. ``bench/sequential.py`` checks all of it by simulating the exact tests.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._check import check_count, check_power, check_q
from ._compare import interval_bounds
from ._design import design_check
from ._exact import fisher_p, midp
from ._multiplicity import holm
from ._results import RowInput

__all__ = [
    "FUTILITY_LEVEL",
    "LOOKS",
    "ConditionDecision",
    "RowDecision",
    "SequentialDesign",
    "SequentialRow",
    "alpha_shares",
    "decide",
    "look_schedule",
    "obf_spending",
    "sequential_design",
    "sequential_p",
]

FloatArray = npt.NDArray[np.float64]

LOOKS = 5
FUTILITY_LEVEL = 0.90
# Paths of the Brownian motion behind the inflation and the expected replicates: fixed, so
# the figures are the same on every machine; their Monte Carlo error is about 0.003 of power.
_PATHS = 20000
_SEED = 20261202
# The normal approximation's power is asked to reach the target plus this (paired, unpaired):
# the exact tests are discrete, and with an unpaired run the early looks set a short run
# against the whole baseline, which the approximation reads less exactly. Without a margin,
# power at max_mde was 0.797 paired and 0.790 unpaired in bench/sequential.py (2,000 sweeps);
# with 0.02 for both, 0.835 and 0.793.
_POWER_MARGIN = {True: 0.02, False: 0.04}
# Inflations tried for the planned maximum, in steps of 1%.
_INFLATIONS = np.round(np.arange(1.0, 2.0001, 0.01), 2)

State = Literal["worse", "safer", "no change of max_mde", "open", "complete"]


def _phi_sf(z: FloatArray | float) -> FloatArray:
    return np.asarray(0.5 * special.erfc(np.asarray(z, dtype=np.float64) / math.sqrt(2.0)))


def _z_upper(p: float) -> float:
    """z with P(Z > z) = p."""
    return float(-special.ndtri(p))


def obf_spending(t: float | FloatArray, alpha: float) -> FloatArray:
    """Lan-DeMets O'Brien-Fleming-type two-sided spending: the error spent by time t in (0, 1],
    2 - 2 Phi(z_{1-alpha/2} / sqrt(t)); alpha at t = 1, 0 at t = 0 (Lan & DeMets 1983)."""
    t_arr = np.asarray(t, dtype=np.float64)
    z = _z_upper(alpha / 2.0)
    with np.errstate(divide="ignore"):
        spent = 2.0 * _phi_sf(z / np.sqrt(np.where(t_arr > 0, t_arr, 1.0)))
    return np.asarray(np.where(t_arr > 0, spent, 0.0), dtype=np.float64)


def look_schedule(maximum: int, looks: int = LOOKS) -> tuple[int, ...]:
    """Replicates per condition at each look: ceil(k maximum / looks), k = 1..looks, each at
    least one more than the previous (so a small maximum has fewer looks)."""
    maximum = check_count("maximum", maximum)
    looks = check_count("looks", looks)
    if maximum == 0 or looks == 0:
        raise ValueError(f"maximum and looks must be positive, got {maximum} and {looks}")
    sizes = sorted({max(1, -(-k * maximum // looks)) for k in range(1, looks + 1)})
    return tuple(sizes)


def alpha_shares(schedule: Sequence[int], alpha: float) -> tuple[float, ...]:
    """The share w_k of a row's alpha spent at each look of ``schedule`` (the w_k sum to 1)."""
    sizes = np.asarray(schedule, dtype=np.float64)
    spent = obf_spending(sizes / sizes[-1], alpha) / obf_spending(1.0, alpha)
    shares = np.diff(np.concatenate(([0.0], spent)))
    shares[-1] = 1.0 - float(shares[:-1].sum())
    return tuple(float(w) for w in shares)


def sequential_p(pvalues: Sequence[float], shares: Sequence[float]) -> float:
    """p* = min_k p_k / w_k over the looks taken (``pvalues[k]`` at look k), at most 1."""
    if not pvalues:
        return 1.0
    return float(min(1.0, min(p / w for p, w in zip(pvalues, shares, strict=False))))


# --------------------------------------------------------------------------- the design


@dataclass(frozen=True, slots=True)
class SequentialDesign:
    """A sequential sweep's plan: its looks, how alpha is spent, and what it is expected to
    cost. Replicates are per condition."""

    replicates: int  # the planned maximum (the run's replicates)
    m: int
    paired: bool
    q: float
    max_mde: float
    power: float
    looks: tuple[int, ...]  # replicates per condition at each look
    shares: tuple[float, ...]  # of each row's alpha, spent at each look
    futility_level: float
    fixed: int | None  # replicates of the fixed design that passes the design check
    replicates_needed: int | None  # the smallest maximum keeping power at max_mde
    ok: bool  # power_at_max_mde >= power_asked (the figure printed against the one asked)
    power_at_max_mde: float  # of the procedure at this maximum (normal approximation)
    expected_unchanged: float  # expected replicates of a condition that did not change
    expected_moved: float  # of a condition that moved by max_mde
    method: str

    @property
    def power_asked(self) -> float:
        """The power at max_mde the check asks of the procedure (``power`` plus a margin
        for the exact tests' discreteness): ``ok`` is ``power_at_max_mde >= power_asked``."""
        return _asked(self.power, self.paired)

    def expected_episodes(self, conditions: int, moved: int = 0) -> float:
        """Expected episodes of a sweep of ``conditions`` conditions, ``moved`` of them by
        max_mde and the rest unchanged."""
        return (conditions - moved) * self.expected_unchanged + moved * self.expected_moved

    def to_dict(self) -> dict[str, object]:
        return {
            "replicates": self.replicates, "m": self.m, "paired": self.paired, "q": self.q,
            "max_mde": self.max_mde, "power": self.power, "looks": list(self.looks),
            "shares": list(self.shares), "futility_level": self.futility_level,
            "fixed": self.fixed, "replicates_needed": self.replicates_needed, "ok": self.ok,
            "power_at_max_mde": self.power_at_max_mde,
            "expected_unchanged": self.expected_unchanged,
            "expected_moved": self.expected_moved, "method": self.method,
        }


def design_from_dict(data: object) -> SequentialDesign:
    """A design as :meth:`SequentialDesign.to_dict` stored it (a run's manifest); raises
    ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"a sequential design is a mapping, got {type(data).__name__}")
    try:
        looks = tuple(int(n) for n in data["looks"])
        shares = tuple(float(w) for w in data["shares"])
        m, q = int(data["m"]), float(data["q"])
        design = SequentialDesign(
            replicates=int(data["replicates"]), m=m, paired=bool(data["paired"]), q=q,
            max_mde=float(data["max_mde"]), power=float(data["power"]), looks=looks,
            shares=shares, futility_level=float(data["futility_level"]),
            fixed=None if data.get("fixed") is None else int(data["fixed"]),
            replicates_needed=None if data.get("replicates_needed") is None
            else int(data["replicates_needed"]),
            ok=bool(data.get("ok")), power_at_max_mde=float(data["power_at_max_mde"]),
            expected_unchanged=float(data["expected_unchanged"]),
            expected_moved=float(data["expected_moved"]), method=str(data["method"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the sequential design is damaged ({exc!r})") from None
    if (not looks or len(shares) != len(looks) or list(looks) != sorted(set(looks))
            or m < 1 or not 0 < q < 1 or abs(sum(shares) - 1.0) > 1e-9
            or any(w <= 0 for w in shares)):
        raise ValueError("the sequential design is damaged (looks, shares, m or q out of "
                         "range)")
    return design


def _method(m: int, q: float, looks: int) -> str:
    return (
        f"group-sequential, {looks} looks: Lan-DeMets O'Brien-Fleming-type spending of each "
        f"row's q/m on its exact test, union bound over looks, Holm q {q:g} over {m} tests; "
        f"futility when the {100 * FUTILITY_LEVEL:g}% interval on the change lies within "
        f"+-max_mde (non-binding)"
    )


@functools.lru_cache(maxsize=1)
def _paths() -> FloatArray:
    """Standard normal increments, fixed: ``_PATHS`` paths of ``LOOKS`` steps."""
    rng = np.random.default_rng(_SEED)
    return rng.standard_normal((_PATHS, LOOKS))


def _procedure(
    fractions: FloatArray, shares: Sequence[float], alpha: float, paired: bool,
    drift: float,
) -> tuple[float, float]:
    """Normal approximation of one row's procedure: (probability of an efficacy stop in the
    direction of the change, expected share of the maximum run). ``drift`` is the z the
    change would have at the maximum's information (0: nothing changed)."""
    # Information at each look, relative to the maximum: paired n_k / N; unpaired against a
    # complete baseline of N, 1/(1/N + 1/n_k) over 1/(2/N).
    info = fractions if paired else 2.0 / (1.0 + 1.0 / fractions)
    increments = np.diff(np.concatenate(([0.0], info)))
    k = len(fractions)
    walk = np.cumsum(_paths()[:, :k] * np.sqrt(increments), axis=1)
    z = (walk + drift * info) / np.sqrt(info)
    bound = np.array([_z_upper(alpha * w / 2.0) for w in shares])
    mean_at_mde = abs(drift) * np.sqrt(info)
    z_f = _z_upper((1.0 - FUTILITY_LEVEL) / 2.0)
    futile = np.abs(z) < mean_at_mde - z_f
    futile[:, -1] = False
    efficacy = np.abs(z) > bound
    stop = efficacy | futile
    stop[:, -1] = True
    first = np.argmax(stop, axis=1)
    rows = np.arange(z.shape[0])
    hit = efficacy[rows, first] & (np.sign(z[rows, first]) == (1.0 if drift >= 0 else -1.0))
    return float(hit.mean()), float(fractions[first].mean())


def _futility_drift(alpha: float, power: float) -> float:
    """The z a change of max_mde has at the fixed design's information (the design check
    sets that design so its power there is ``power``)."""
    return _z_upper(alpha / 2.0) + _z_upper(1.0 - power)


def sequential_design(
    replicates: int,
    m: int,
    *,
    paired: bool,
    q: float = 0.05,
    max_mde: float = 0.20,
    power: float = 0.8,
    looks: int = LOOKS,
) -> SequentialDesign:
    """Plan a sequential sweep of ``replicates`` per condition at most, m rows.

    The maximum needed is the fixed design's replicates (the smallest the design check
    passes) times the smallest inflation (in steps of 1%) at which the procedure's power at
    max_mde, by the normal approximation at the worst base rate, is at least ``power`` plus a
    margin for the exact tests (0.02 paired, 0.04 unpaired; see ``_POWER_MARGIN``).
    """
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    looks = check_count("looks", looks)
    if not 1 <= looks <= LOOKS:
        raise ValueError(f"looks must be between 1 and {LOOKS}, got {looks}")
    q = check_q(q)
    max_mde = check_q(max_mde, "max_mde")
    power = check_power(power)
    alpha = q / m
    fixed_check = design_check(2, m, paired=paired, q=q, max_mde=max_mde, power=power)
    fixed = fixed_check.replicates if fixed_check.ok else fixed_check.replicates_needed
    theta_fixed = _futility_drift(alpha, power)
    schedule = look_schedule(n, looks)
    shares = alpha_shares(schedule, alpha)
    fractions = np.asarray(schedule, dtype=np.float64) / n
    asked = _asked(power, paired)
    scale = math.sqrt(n / fixed) if fixed else 0.0
    reached, moved = _procedure(fractions, shares, alpha, paired, theta_fixed * scale)
    # The check passes when the power printed (the procedure's at these looks) reaches the
    # power asked: the words and the figure come from one comparison.
    ok = fixed is not None and reached >= asked
    needed: int | None = None
    if fixed is not None:
        # The inflation is found on the full schedule of looks at a large maximum (so that
        # rounding of the looks does not enter), then applied to the fixed design; a design
        # that fails is told the first maximum above it whose own looks reach the power.
        ideal = np.arange(1, looks + 1, dtype=np.float64) / looks
        ideal_shares = alpha_shares(list(range(1, looks + 1)), alpha)
        for inflation in _INFLATIONS:
            drift = theta_fixed * math.sqrt(float(inflation))
            reach = _procedure(ideal, ideal_shares, alpha, paired, drift)[0]
            if reach >= asked:
                needed = math.ceil(float(inflation) * fixed - 1e-9)
                break
        if ok:
            needed = n if needed is None else min(needed, n)
        elif needed is not None:
            needed = _first_reaching(max(needed, n + 1), 2 * needed + n, looks, alpha,
                                     paired, theta_fixed, fixed, asked)
    # With nothing changed, the futility rule reads the interval against max_mde, so the
    # drift of max_mde sets where it stops: rerun with that drift's futility boundary.
    unchanged = _unchanged_share(fractions, shares, alpha, paired, theta_fixed * scale)
    return SequentialDesign(
        replicates=n, m=m, paired=paired, q=q, max_mde=max_mde, power=power,
        looks=schedule, shares=shares, futility_level=FUTILITY_LEVEL, fixed=fixed,
        replicates_needed=needed, ok=ok,
        power_at_max_mde=reached, expected_unchanged=unchanged * n,
        expected_moved=moved * n, method=_method(m, q, len(schedule)),
    )


def _asked(power: float, paired: bool) -> float:
    """The procedure's power at max_mde the design check asks (normal approximation):
    ``power`` plus a margin for the exact tests' discreteness (``_POWER_MARGIN``)."""
    return min(power + _POWER_MARGIN[paired], 0.999)


def _first_reaching(start: int, stop: int, looks: int, alpha: float, paired: bool,
                    theta_fixed: float, fixed: int, asked: float) -> int | None:
    """The first maximum from ``start`` (up to ``stop``) whose own looks give the procedure
    a power at max_mde of at least ``asked``; None past ``stop``."""
    for size in range(start, stop + 1):
        schedule = look_schedule(size, looks)
        fractions = np.asarray(schedule, dtype=np.float64) / size
        shares = alpha_shares(schedule, alpha)
        drift = theta_fixed * math.sqrt(size / fixed)
        if _procedure(fractions, shares, alpha, paired, drift)[0] >= asked:
            return size
    return None


def _unchanged_share(
    fractions: FloatArray, shares: Sequence[float], alpha: float, paired: bool,
    drift_at_mde: float,
) -> float:
    """Expected share of the maximum run by a row that did not change: efficacy as under no
    change, futility read against the drift a change of max_mde would have."""
    info = fractions if paired else 2.0 / (1.0 + 1.0 / fractions)
    increments = np.diff(np.concatenate(([0.0], info)))
    walk = np.cumsum(_paths()[:, : len(fractions)] * np.sqrt(increments), axis=1)
    z = walk / np.sqrt(info)
    bound = np.array([_z_upper(alpha * w / 2.0) for w in shares])
    z_f = _z_upper((1.0 - FUTILITY_LEVEL) / 2.0)
    futile = np.abs(z) < drift_at_mde * np.sqrt(info) - z_f
    futile[:, -1] = False
    stop = (np.abs(z) > bound) | futile
    stop[:, -1] = True
    return float(fractions[np.argmax(stop, axis=1)].mean())


# --------------------------------------------------------------------------- decisions


@dataclass(frozen=True, slots=True)
class SequentialRow:
    """One (condition, event) at each look its condition has taken: ``looks[k]`` holds the
    counts over the condition's first ``design.looks[k]`` replicates (paired: twins), or None
    where the row had nothing to test at that look (a ``no outcome`` row before any episode
    lacked one): its p-value there is 1."""

    condition: str
    event: str
    worse_when: Literal["rise", "fall"]
    looks: tuple[RowInput | None, ...]


@dataclass(frozen=True, slots=True)
class RowDecision:
    condition: str
    event: str
    state: State
    look: int  # 1-based look of the decision, or the last look taken
    p_star: float  # the sequential p-value over the looks taken
    p_holm: float  # Holm-adjusted p* over the m rows
    change: float  # after - before at ``look``
    low: float  # the futility interval at the last look taken
    high: float


@dataclass(frozen=True, slots=True)
class ConditionDecision:
    condition: str
    state: State
    look: int  # 1-based look at which it was decided (or the last taken)
    replicates: int  # replicates per condition at that look
    reason: str  # "decided at look 2 of 5: worse (unresolved 0.10 -> 0.60)"


@functools.lru_cache(maxsize=1 << 16)
def _row_p(row: RowInput) -> float:
    if row.pairs is not None:
        return midp(row.pairs.before_only, row.pairs.after_only)
    return fisher_p(row.x_before, row.n_before, row.x_after, row.n_after)


def decide(
    design: SequentialDesign, rows: Sequence[SequentialRow],
    *, margin: float | None = None,
) -> tuple[tuple[RowDecision, ...], tuple[ConditionDecision, ...]]:
    """Decide every row and every condition from the looks taken so far.

    A row is **worse** or **safer** when Holm's procedure at q over the m rows' sequential
    p-values counts it (m = ``design.m``, at least the number of rows given). It has **no
    change of max_mde** when, at a look before the last, its interval at ``FUTILITY_LEVEL``
    lies inside (-max_mde, +max_mde). A condition is decided **worse** as soon as one of its
    rows is; otherwise when every row is decided (safer if any row is, else no change of
    max_mde); otherwise it is **complete** once it has taken its last look, and **open**
    before. ``margin`` is the seam for a non-inferiority margin (--prove-margin): when set,
    a row also stops for futility once its interval's worse end lies within the margin.
    Calling this again with more looks never undoes a worse or safer decision.
    """
    m = max(design.m, len(rows))
    last = len(design.looks)
    p_star = np.ones(len(rows))
    for i, row in enumerate(rows):
        if not row.looks:
            continue
        if len(row.looks) > last:
            raise ValueError(
                f"row ({row.condition!r}, {row.event!r}) has {len(row.looks)} looks, the "
                f"design has {last}")
        p_star[i] = sequential_p([1.0 if r is None else _row_p(r) for r in row.looks],
                                 design.shares)
    # Holm over m rows: rows not given (not yet seen) count with p* = 1.
    p_holm = holm(np.concatenate((p_star, np.ones(m - len(rows)))))[: len(rows)]
    current = [row.looks[-1] if row.looks else None for row in rows]
    present = [r for r in current if r is not None]
    low = np.full(len(rows), -1.0)
    high = np.full(len(rows), 1.0)
    if present:
        index = [i for i, r in enumerate(current) if r is not None]
        lo, hi = interval_bounds(present, FUTILITY_LEVEL)
        low[index], high[index] = lo, hi
    decisions: list[RowDecision] = []
    for i, row in enumerate(rows):
        at = current[i]
        taken = len(row.looks)
        state: State = "open"
        look = taken
        if at is not None and p_holm[i] <= design.q:
            look = _first_look(row, design, float(p_star[i]))
            at = row.looks[look - 1]
            assert at is not None  # the look that set p* < 1 had a test
        change = 0.0 if at is None else at.x_after / at.n_after - at.x_before / at.n_before
        if at is not None and p_holm[i] <= design.q and change != 0.0:
            worse = (change > 0) == (row.worse_when == "rise")
            state = "worse" if worse else "safer"
        elif at is None and taken:
            state = "no change of max_mde"  # nothing to test: no event to change
        elif at is not None and taken < last and (
            (-design.max_mde < low[i] and high[i] < design.max_mde)
            or _within_margin(row.worse_when, low[i], high[i], margin)
        ):
            state = "no change of max_mde"
        elif taken >= last:
            state = "complete"
        decisions.append(RowDecision(
            row.condition, row.event, state, look, float(p_star[i]), float(p_holm[i]),
            change, float(low[i]), float(high[i])))
    return tuple(decisions), _conditions(design, rows, decisions)


def _within_margin(
    worse_when: str, low: float, high: float, margin: float | None
) -> bool:
    """The seam for --prove-margin: the worse end of the interval lies within the margin."""
    if margin is None:
        return False
    return high < margin if worse_when == "rise" else low > -margin


def _first_look(row: SequentialRow, design: SequentialDesign, p_star: float) -> int:
    """The look whose p-value set the row's p* (where it crossed its boundary)."""
    for k, counts in enumerate(row.looks):
        if counts is not None and _row_p(counts) / design.shares[k] <= p_star * (1 + 1e-12):
            return k + 1
    return len(row.looks)


def _conditions(
    design: SequentialDesign, rows: Sequence[SequentialRow],
    decisions: Sequence[RowDecision],
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
        decided = all(d.state in ("worse", "safer", "no change of max_mde") for _, d in members)
        state: State
        if worse:
            state, look = "worse", min(d.look for d in worse)
        elif decided and safer:
            state, look = "safer", taken
        elif decided:
            state, look = "no change of max_mde", taken
        elif taken >= last:
            state, look = "complete", taken
        else:
            state, look = "open", taken
        size = design.looks[look - 1] if look else 0
        out.append(ConditionDecision(condition, state, look, size,
                                     _reason(state, look, last, size, members)))
    return tuple(out)


def _reason(state: State, look: int, last: int, size: int,
            members: Sequence[tuple[SequentialRow, RowDecision]]) -> str:
    where = f"look {look} of {last} ({size} replicates)"
    if state in ("worse", "safer"):
        moved = ", ".join(_moved(r.looks[d.look - 1], d.event)
                          for r, d in members if d.state == state)
        return f"decided at {where}: {state} ({moved})"
    if state == "no change of max_mde":
        return f"decided at {where}: no change of max_mde possible"
    if state == "complete":
        return f"ran all {size} replicates: undecided until the last look"
    return f"open after {where}"


def _moved(counts: RowInput | None, event: str) -> str:
    if counts is None:
        return event
    return (f"{event} {counts.x_before / counts.n_before:.3f} -> "
            f"{counts.x_after / counts.n_after:.3f}")
