"""Fix-check's cases: each shared condition's event counts in the two runs, then the exact
Cochran-Mantel-Haenszel test over them (:mod:`pytest_prove.stats.fixcheck`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from ..store import Run
from .labels import keys_and_labels, label_of
from .pairing import RefusalError
from .steps import event_of

if TYPE_CHECKING:
    from ..stats.fixcheck import FixCheck

__all__ = ["FixCheckReview", "fix_check_runs"]


@final
@dataclass(frozen=True, slots=True)
class FixCheckReview:
    """The fix-check of ``after`` against ``before`` on ``event``, with what was left out."""

    before: str
    after: str
    event: str
    result: FixCheck
    left_out: Counter[str]


def fix_check_runs(before: Run, after: Run, event: str | None, *, alpha: float,
                   max_mde: float) -> FixCheckReview:
    """Count ``event`` per shared condition (a case) in each run and test the change."""
    from ..stats.fixcheck import Case, fix_check

    chosen_event, worse_when = event_of(event, before, after)
    labels = keys_and_labels(before, after)
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    cases: dict[tuple[str, str], str] = {}
    left: Counter[str] = Counter()
    for offset, run in ((0, before), (2, after)):
        for r in run.episodes:
            key = (str(r["rollout"]), str(r["condition_key"]))
            if r.get("error") is not None or r.get("outcome") is None:
                left["no outcome or errored"] += 1
                continue
            counts[key][offset] += int(r["outcome"] == chosen_event)
            counts[key][offset + 1] += 1
            case = (r.get("meta") or {}).get("case_id")
            if case is not None:
                cases.setdefault(key, str(case))
    chosen = [key for key, c in sorted(counts.items()) if c[1] and c[3]]
    if not chosen:
        raise RefusalError(
            f"runs {label_of(before)!r} and {label_of(after)!r} share no condition "
            "with an outcome in both; compare runs of the same rollout")

    def name(key: tuple[str, str]) -> str:
        label = labels[key][0]
        return label if key not in cases or cases[key] == label.split("=")[-1] else \
            f"{label} (case {cases[key]})"

    result = fix_check([Case(name(k), counts[k][0], counts[k][1], counts[k][2], counts[k][3])
                        for k in chosen], worse_when=worse_when, alpha=alpha, max_mde=max_mde)
    return FixCheckReview(label_of(before), label_of(after), chosen_event, result, left)
