"""An A/A check: the same code run twice on the same seeds, read as a comparison.

Nothing changed between the two runs, so every row that reads worse or safer is a false
alarm, and how often twins ended alike is the user's own noise floor: an agent that replays
on a seed has agreement near 1, one whose episodes are a fresh draw each time about what
independent twins give. Runs on different salts have no twins and are refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from ..store import Run
from . import RefusalError, Review, review
from .pairing import Missing

__all__ = ["AAReview", "aa_review"]


@final
@dataclass(frozen=True, slots=True)
class AAReview:
    """The comparison of two runs of the same code, and its false alarms."""

    review: Review
    worse: int  # rows counted worse: false alarms, since nothing changed
    safer: int


def aa_review(before: Run, after: Run, *, q: float, max_mde: float,
              missing: Missing = "test") -> AAReview:
    """Read ``after`` against ``before`` as an A/A check; refused when they share no salt."""
    if not before.salt or before.salt != after.salt:
        raise RefusalError(
            f"an A/A check reads twins, and runs {before.name!r} and {after.name!r} ran on "
            "different salts, so no seed ran in both; run the same code twice on one salt "
            "(pytest --prove-salt=WORD, twice) and name those two runs")
    done = review(before, after, events=None, q=q, max_mde=max_mde, fail_on=frozenset(),
                  missing=missing)
    done.require_comparison()
    verdict = done.require_comparison().verdict
    return AAReview(done, len(verdict.worse), len(verdict.safer))
