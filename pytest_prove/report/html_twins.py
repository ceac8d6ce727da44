"""The HTML report's twins: under the grids, for each condition a row of which was flagged,
the first twins that ended differently, each opening on the view ``pytest-prove episode A
ITEM --twin B`` prints (the two episodes side by side, and where they first went apart).

Shown only for a paired comparison (twins share a seed), and only for flagged conditions:
the page stays the size it was for a comparison where nothing moved."""

from __future__ import annotations

import html
import shlex

from pytest_prove.review import RefusalError, Review
from pytest_prove.review.episode import first_difference, found_of
from pytest_prove.review.flips import Flip, flips
from pytest_prove.review.labels import label_of

from ._format import terminal_text
from .episode import twins_lines
from .replay import ending_text

__all__ = ["twins_section"]

#: Twins shown for one condition, and on the whole page.
_PER_CONDITION = 5
_ON_THE_PAGE = 40


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def twins_section(review: Review) -> str:
    """The section, or "" when the comparison is unpaired, nothing was flagged or no twin of a
    flagged condition ended differently."""
    comparison = review.comparison
    if comparison is None or not review.prepared.paired:
        return ""
    flagged = list(dict.fromkeys(r.condition for r in comparison.rows if r.flag))
    if not flagged:
        return ""
    try:
        found = flips(review.before, review.after, conditions=flagged)
    except RefusalError:  # no twins after all (salts differ): nothing to show
        return ""
    by_condition: dict[str, list[Flip]] = {}
    for flip in found.flips:
        by_condition.setdefault(flip.condition, []).append(flip)
    if not by_condition:
        return ""
    before, after = label_of(review.before), label_of(review.after)
    parts = ['<section class="twins" aria-label="twins that ended differently">',
             "<h2>Twins that ended differently</h2>",
             f'<p class="muted">The same condition and seed in {_e(before)} and '
             f"{_e(after)}, two endings; open one for both episodes side by side. "
             "<code>pytest-prove episode</code> prints the same view.</p>"]
    shown = 0
    for condition, changed in by_condition.items():
        if shown >= _ON_THE_PAGE:
            break
        parts.append(f"<h3>{_e(condition)}: {len(changed)} twin(s) changed</h3>")
        for flip in changed[:min(_PER_CONDITION, _ON_THE_PAGE - shown)]:
            left = found_of(review.before, flip.before)
            right = found_of(review.after, flip.after)
            lines = twins_lines(left, right, first_difference(left.record, right.record),
                                verbose=False)
            command = (f"pytest-prove episode {shlex.quote(before)} "
                       f"{shlex.quote(terminal_text(left.item, 200))} --twin "
                       f"{shlex.quote(after)}")
            parts.append(
                f"<details><summary>r{flip.replicate}, seed {flip.seed}: "
                f"{_e(ending_text(flip.before))} → {_e(ending_text(flip.after))}"
                f"</summary><p><code>{_e(command)}</code></p>"
                f"<pre>{_e(chr(10).join(lines))}</pre></details>")
            shown += 1
        if len(changed) > _PER_CONDITION:
            parts.append(f'<p class="muted">and {len(changed) - _PER_CONDITION} more: '
                         f"<code>pytest-prove flips {_e(shlex.quote(before))} "
                         f"{_e(shlex.quote(after))} --condition "
                         f"{_e(shlex.quote(condition))} -v</code></p>")
    parts.append("</section>")
    return "".join(parts)
