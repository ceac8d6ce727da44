"""What ``pytest-prove regrade`` prints: how many episodes the grader graded and changed,
per condition, what could not be graded and why, the grader's agreement with itself when it
graded each answer more than once, and how to compare the new run with its source."""

from __future__ import annotations

import shlex
from typing import Any

from pytest_prove.review.regrade import Regrade

from ._format import terminal_text

__all__ = ["regrade_document", "regrade_lines"]


def regrade_document(done: Regrade, run: str) -> dict[str, Any]:
    return {"source": done.source, "run": run, "grader": done.grader, "times": done.times,
            "graded": done.graded, "changed": done.changed, "errors": done.errors,
            "first_error": done.first_error,
            "conditions": [c.to_dict() for c in done.conditions]}


def _moved(moves: tuple[tuple[str, str, int], ...]) -> str:
    if not moves:
        return "no outcome changed"
    return ", ".join(f"{terminal_text(a)} -> {terminal_text(b)} {n}" for a, b, n in moves)


def regrade_lines(done: Regrade, run: str) -> list[str]:
    source, new = terminal_text(done.source), terminal_text(run)
    head = (f"regraded {source} with {terminal_text(done.grader)} into run {new!r}: "
            f"{done.graded} episodes graded, {done.changed} changed their outcome")
    head += (f", {done.errors} could not be graded" if done.errors else "")
    lines = [head]
    for c in done.conditions:
        line = f"  {terminal_text(c.condition, 120)}: {c.graded} graded; {_moved(c.moved)}"
        if c.errors:
            line += f"; {c.errors} not graded"
        lines.append(line)
    if done.times > 1:
        lines.append(f"the grader against itself, each answer graded {done.times} times:")
        for c in done.conditions:
            if c.agreement is None:
                continue
            noise = "; ".join(
                f"{terminal_text(m)}: {share:.0%} of its variance is the grader's own noise"
                for m, share in sorted(c.noise.items()))
            lines.append(f"  {terminal_text(c.condition, 120)}: the same outcome every time "
                         f"for {c.agreement:.0%} of the answers" + (f"; {noise}" if noise
                                                                    else ""))
        lines.append("a grader that disagrees with itself adds its noise to every comparison: "
                     "a judge's verdict on one answer is a sample, not a fact")
    if done.first_error is not None:
        lines.append(f"first episode not graded: {terminal_text(done.first_error, 300)}")
    lines.append(f"next: pytest-prove diff {shlex.quote(done.source)} {shlex.quote(run)} "
                 f"(the same seeds: paired), pytest-prove flips {shlex.quote(done.source)} "
                 f"{shlex.quote(run)} lists the episodes whose outcome changed")
    return lines
