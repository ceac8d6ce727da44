"""Group-sequential helpers kept for sequential targets (``_target_sequential.py``): a
schedule of ``LOOKS`` looks and Lan-DeMets O'Brien-Fleming-type spending of a level over
them, with a sequential p-value by the union bound (docs/statistics.md, "Targets")."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import special  # type: ignore[import-untyped]

from ._check import check_count

__all__ = ["LOOKS", "alpha_shares", "look_schedule", "obf_spending", "sequential_p"]

FloatArray = npt.NDArray[np.float64]

LOOKS = 5


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
