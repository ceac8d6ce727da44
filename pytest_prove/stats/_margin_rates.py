"""The margin's design check from the baseline's rates.

As ``_margin_design`` asks, when nothing changed, whether every one of the m rows would be
shown within the margin with probability ``power`` for the whole sweep, rows independent;
but each row's power is taken at its weakest base rate inside its exact interval from the
baseline (``_design_rates``: every k/n in it and its ends) rather than at the weakest of
every rate (near 1/2), and the sweep's is the product of the rows'. With probability at
least 0.99 per row its rate lies in its interval, and the claim's power holds as computed;
the margin test itself, and so its size, is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special  # type: ignore[import-untyped]

from ._check import check_count, check_level, check_q
from ._design_rates import RATES_LEVEL, Interval, _rates_in
from ._margin import _check_margin
from ._margin_design import (
    EXACT_SEARCH_UP_TO,
    MarginDesignCheck,
    _fewest,
    _weakest,
    margin_design_check,
    within_power,
)

__all__ = ["margin_rates_check"]


def _claim(paired: bool, n: int, margin: float, q: float, rows: Sequence[Interval],
           kappa: float) -> tuple[float, float, float]:
    """The sweep's power of the claim at n (the product of each row's weakest power within
    its interval), and the weakest row's power and base rate."""
    total, weakest, where = 1.0, 2.0, 0.0
    for lo, hi in dict.fromkeys(rows):
        if lo <= 0.0 and hi >= 1.0:
            power, rate = _weakest(paired, n, margin, q, kappa)
        else:
            rates = _rates_in(n, [(lo, hi)])
            values = within_power(paired, n, margin, q, rates, kappa)
            i = int(np.argmin(values))
            power, rate = float(values[i]), float(rates[i])
        total *= power ** rows.count((lo, hi))
        if power < weakest:
            weakest, where = power, rate
    return total, weakest, where


def _guess(paired: bool, margin: float, q: float, row_power: float, kappa: float,
           rows: Sequence[Interval]) -> int:
    """The normal approximation's replicates at the rate nearest 1/2 of the intervals."""
    spread = max(p * (1.0 - p) for p in
                 [min(max(0.5, lo), hi) for lo, hi in rows]) if rows else 0.25
    z = float(special.ndtri(1.0 - q) + special.ndtri(row_power))
    variance = 2.0 * spread * (kappa if paired else 1.0)
    return max(2, math.ceil(z * z * variance / (margin * margin)))


def margin_rates_check(replicates: int, m: int, intervals: Sequence[Interval], *,
                       paired: bool, margin: float, q: float = 0.05, power: float = 0.8,
                       kappa: float = 1.0, level: float = RATES_LEVEL) -> MarginDesignCheck:
    """:func:`margin_design_check` with each row's base rate known to lie in its interval
    (one per row, e.g. ``baseline_intervals``): the claim's power is the product over rows
    of each row's weakest power inside its interval; the replicates asked, when it falls
    short, the fewest above ``replicates`` at which it would not (exact up to
    ``EXACT_SEARCH_UP_TO`` by the normal approximation, that approximation beyond)."""
    n = check_count("replicates", replicates)
    m = check_count("m", m)
    if n == 0 or m == 0:
        raise ValueError(f"replicates and m must be positive, got replicates={n}, m={m}")
    margin, q = _check_margin(margin), check_q(q)
    power = check_q(power, "power")
    level = check_level(level)
    rows = [(float(lo), float(hi)) for lo, hi in intervals]
    if len(rows) != m:
        raise ValueError(f"one interval per row: m = {m}, got {len(rows)} intervals")
    if any(not 0.0 <= lo <= hi <= 1.0 for lo, hi in rows):
        raise ValueError("an interval must lie in [0, 1] with low <= high")
    if not (math.isfinite(kappa) and 0.0 <= kappa <= 1.0):
        raise ValueError(f"kappa must be between 0 and 1, got {kappa!r}")
    kappa = kappa if paired else 1.0
    total, weakest, where = _claim(paired, n, margin, q, rows, kappa)
    ok = total >= power
    needed, exact = None, True
    if not ok:
        row_power = power ** (1.0 / m)
        guess = _guess(paired, margin, q, row_power, kappa, rows)
        if guess <= EXACT_SEARCH_UP_TO:
            needed = _fewest(lambda size: _claim(paired, size, margin, q, rows, kappa)[0]
                             >= power, guess, n)
        else:
            needed, exact = max(guess, n + 1), False
    plain = margin_design_check(n, m, paired=paired, margin=margin, q=q, power=power,
                                kappa=kappa)
    return MarginDesignCheck(
        replicates=n, m=m, paired=paired, q=q, margin=margin, power=power,
        row_power=power ** (1.0 / m), weakest_power=weakest, weakest_base_rate=where, ok=ok,
        replicates_needed=needed, replicates_exact=exact,
        method=(f"{plain.method}; base rates within each row's exact {100.0 * level:g}% "
                "interval from the baseline"),
        claim_power=total, ok_any_rate=plain.ok)
