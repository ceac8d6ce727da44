"""The counts every row carries: which (condition, event) it is and its tallies in each run.

One frozen base for the comparison's input and result rows (``RowInput``, ``Row``) and for
what fragility needs of a row (``RowState``), so the fields are declared once, in one order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["RowCounts"]


@dataclass(frozen=True, slots=True)
class RowCounts:
    """One (condition, event): x_before events in n_before episodes, x_after in n_after."""

    condition: str
    event: str
    worse_when: Literal["rise", "fall"]
    x_before: int
    n_before: int
    x_after: int
    n_after: int
