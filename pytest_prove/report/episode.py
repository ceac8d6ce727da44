"""What ``pytest-prove episode RUN ITEM`` prints: one stored episode whole (its condition,
seed, ending, metrics, tokens, steps, spans with what they captured, error and traceback, and
the command that replays it), and with ``--twin RUN2`` its twin beside it, section by
section, after the line that says where the two first differ.

Every text that came from a rollout (names, attributes, messages, tracebacks) is written
through :func:`terminal_text`, on lines of its own: nothing a terminal would act on."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_prove.declare.spec import condition_label
from pytest_prove.review.episode import Difference, Found
from pytest_prove.review.labels import label_of

from ._format import plain_text, terminal_text
from .replay import ending_text, replay_command

__all__ = ["episode_document", "episode_lines", "twins_lines"]

#: The widest a value of a span's attributes, or a line of a traceback, is printed.
_WIDE = 160
#: Lines of a traceback shown without -v (its end, where it was raised).
_TRACEBACK = 12
#: The width of one column when twins are shown side by side.
_COLUMN = 58

Section = tuple[str, list[str]]
#: The sections of an episode, in the order they are printed.
_ORDER = ("ended", "metrics", "tokens", "steps", "spans", "error", "meta")


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _seconds(value: object) -> str:
    return f"{float(value):.3f} s" if isinstance(value, int | float) else "?"


def _tokens_lines(tokens: Mapping[str, Any] | None) -> list[str]:
    if not tokens:
        return ["none recorded"]
    lines = [f"{int(tokens.get('input') or 0):,} in, {int(tokens.get('output') or 0):,} out"]
    by_model = tokens.get("by_model") or {}
    for model, use in sorted(dict(by_model).items()):
        lines.append(f"  {terminal_text(model)}: {int(use.get('input') or 0):,} in, "
                     f"{int(use.get('output') or 0):,} out")
    return lines


def _step_lines(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    if not steps:
        return ["none recorded (the rollout called no prove.step)"]
    lines = []
    for number, step in enumerate(steps, 1):
        indent = "  " * int(step.get("depth") or 0)
        error = step.get("error")
        raised = f"  raised {terminal_text(error)}" if error else ""
        lines.append(f"{number:>3} {indent}{terminal_text(step.get('name'))}  "
                     f"{_seconds(step.get('duration'))}{raised}")
    return lines


def _span_lines(spans: Sequence[Mapping[str, Any]], dropped: int, verbose: bool) -> list[str]:
    if not spans:
        return ["none captured" + (f" ({dropped} dropped past the cap)" if dropped else "")]
    lines = []
    for number, span in enumerate(spans, 1):
        status = str(span.get("status") or "unset")
        message = span.get("status_message")
        lines.append(f"{number:>3} {terminal_text(span.get('name'))}  at "
                     f"{_seconds(span.get('start'))}, took {_seconds(span.get('duration'))}, "
                     f"{terminal_text(status)}"
                     + (f": {terminal_text(message, _WIDE)}" if message else ""))
        attributes = dict(span.get("attributes") or {})
        # The GenAI conventions' attributes (model, usage, content) first: they say most.
        keys = sorted(attributes, key=lambda k: (not str(k).startswith("gen_ai."), str(k)))
        for key in keys if verbose else keys[:12]:
            lines.append(f"      {terminal_text(key)} = {terminal_text(attributes[key], _WIDE)}")
        if not verbose and len(attributes) > 12:
            lines.append(f"      ... {len(attributes) - 12} more (-v shows every one)")
        for event in span.get("events") or ():
            lines.append(f"      event {terminal_text(event.get('name'))}")
            for key, value in sorted(dict(event.get("attributes") or {}).items()):
                lines.append(f"        {terminal_text(key)} = {terminal_text(value, _WIDE)}")
    if dropped:
        lines.append(f"    and {dropped} more, dropped past the cap on spans an episode keeps")
    return lines


def _error_lines(error: Mapping[str, Any] | None, verbose: bool) -> list[str]:
    if not error:
        return []
    lines = [f"{terminal_text(error.get('kind'))}: {terminal_text(error.get('type') or '')}"
             + (f": {terminal_text(error.get('message'), _WIDE)}" if error.get("message")
                else "")]
    traceback = str(error.get("traceback") or "").splitlines()
    if traceback:
        shown = traceback if verbose else traceback[-_TRACEBACK:]
        if len(shown) < len(traceback):
            lines.append(f"  ... {len(traceback) - len(shown)} lines of the traceback above "
                         "(-v shows them)")
        lines += ["  " + terminal_text(line, _WIDE) for line in shown]
    return lines


def _sections(found: Found, verbose: bool) -> list[Section]:
    record = found.record
    horizon = record.get("horizon")
    at = [f"t {_number(record.get('t'))}" + (f" of horizon {_number(horizon)}"
                                               if horizon is not None else "")]
    if record.get("duration") is not None:
        at.append(f"took {_seconds(record.get('duration'))}")
    sections: list[Section] = [
        ("ended", [ending_text(record), ", ".join(at)]),
    ]
    metrics = record.get("metrics")
    if metrics:
        sections.append(("metrics", [f"{terminal_text(k)} {_number(v)}"
                                     for k, v in sorted(dict(metrics).items())]))
    sections.append(("tokens", _tokens_lines(record.get("tokens"))))
    if "step_count" in record:  # read from a compact baseline
        last = record.get("last_step")
        sections.append(("steps", [
            f"{int(record.get('step_count') or 0)} steps"
            + (f", the last {terminal_text(last)}" if last is not None else "")
            + " (a compact baseline keeps no more of them, nor the spans)"]))
    else:
        sections.append(("steps", _step_lines(record.get("steps") or ())))
        sections.append(("spans", _span_lines(record.get("spans") or (),
                                              int(record.get("spans_dropped") or 0),
                                              verbose)))
    error = _error_lines(record.get("error"), verbose)
    if error:
        sections.append(("error", error))
    meta = record.get("meta")
    if meta:
        sections.append(("meta", [terminal_text(json.dumps(plain_text_map(meta),
                                                           sort_keys=True), _WIDE)]))
    return sections


def plain_text_map(value: Any) -> Any:
    """``value`` with every mapping and sequence made plain (for JSON)."""
    if isinstance(value, Mapping):
        return {str(k): plain_text_map(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_text_map(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return plain_text(value)


def _head(found: Found) -> list[str]:
    record = found.record
    return [f"episode {terminal_text(found.item, 200)} of run {label_of(found.run)!r} "
            f"(salt {terminal_text(found.run.salt)})",
            f"  rollout {terminal_text(record.get('rollout'))}, condition "
            f"{terminal_text(condition_label(dict(record.get('condition') or {})), 200)}, "
            f"replicate {int(record['replicate'])}, seed {int(record['seed'])}"]


def _replay_lines(found: Found) -> list[str]:
    if found.replay is None:
        return ["replay: the run does not say where its rollout lives, so no command "
                "replays this episode"]
    return [f"replay: {replay_command(found.replay)}"]


def episode_lines(found: Found, verbose: bool) -> list[str]:
    """One episode, section by section, then the command that replays it."""
    lines = _head(found)
    for title, body in _sections(found, verbose):
        lines.append(f"{title}:")
        lines += ["  " + line for line in body]
    return lines + _replay_lines(found)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "\u2026"


def twins_lines(found: Found, twin: Found, difference: Difference,
                verbose: bool) -> list[str]:
    """Two twins side by side, section by section, after where they first differ."""
    lines = [f"twins: {terminal_text(found.item, 200)}, in run {label_of(found.run)!r} "
             f"(left) and run {label_of(twin.run)!r} (right)",
             f"first difference: {terminal_text(difference.text, 200)}"]
    left = dict(_sections(found, verbose))
    right = dict(_sections(twin, verbose))
    titles = [t for t in _ORDER if t in left or t in right]
    marked = {"step": "steps", "span": "spans"}.get(difference.where)
    if difference.where == "steps":  # a compact baseline's count or last step
        marked = None
    for title in titles:
        a, b = left.get(title, ["-"]), right.get(title, ["-"])
        lines.append(f"{title}:")
        for index in range(max(len(a), len(b))):
            l_text = a[index] if index < len(a) else ""
            r_text = b[index] if index < len(b) else ""
            apart = (title == marked and difference.index is not None
                     and _row_number(l_text, r_text) == difference.index + 1) or (
                title == "ended" and index == 0 and difference.where == "ending")
            flag = ">" if apart else " "
            lines.append(f"{flag} {_fit(l_text, _COLUMN):<{_COLUMN}} | {_fit(r_text, _COLUMN)}")
    lines.append(f"left  {_replay_lines(found)[0]}")
    lines.append(f"right {_replay_lines(twin)[0]}")
    return lines


def _row_number(*texts: str) -> int | None:
    """The number a step's or span's first line starts with (``  3 search``), if any."""
    for text in texts:
        head = text[:4].strip()
        if head.isdigit() and text[:4] == f"{head:>3} ":
            return int(head)
    return None


def episode_document(found: Found, twin: Found | None = None,
                     difference: Difference | None = None) -> dict[str, Any]:
    """The JSON of ``pytest-prove episode``: the episode as stored, its item and replay; with
    a twin, the twin too and where they first differ."""
    def one(f: Found) -> dict[str, Any]:
        return {"run": label_of(f.run), "salt": f.run.salt, "item": f.item,
                "replay": None if f.replay is None else replay_command(f.replay),
                "episode": plain_text_map(dict(f.record))}
    body: dict[str, Any] = one(found)
    if twin is not None:
        body["twin"] = one(twin)
        body["first_difference"] = None if difference is None else difference.to_dict()
    return body
