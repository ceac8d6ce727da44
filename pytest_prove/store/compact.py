"""The compact baseline: what a comparison and every review read of an episode, in short
text lines that git diffs line by line.

A baseline of format 3 (``.prove/baselines/NAME.baseline``) is::

    {"pytest_prove_baseline":3,"digest":"sha256:...","manifest":{...}}
    @["support","{\\"ticket\\":\\"refund\\"}",{"ticket":"refund"},7499270858453848828,[...]]
    0 0 11 13 3 9000,800,4:1 11:5 6*
    1 1 12 13 3 - 12:5 6*

Line 1 is the header, as in format 1, with the digest of the manifest and of every line
after the header (:mod:`.integrity`; format 2 is the same without it).  Each condition is a
block: a line starting with ``@`` holds, as one JSON array, its rollout, its condition key,
its condition, the seed of its replicate 0 (a sample: every seed is derived from the salt,
and this one shows that the salt was not edited) and the block's table of values
(outcomes, error kinds, case ids, models, step names) that its episode lines name by
index.  A table per block keeps a refresh's diff to the blocks whose episodes changed.
Blocks are sorted by rollout and condition key, episode lines by replicate.  An episode line
has eight fields, separated by one space, and a ninth for a replicate run more than once:

1. the replicate;
2. how it ended: the outcome's index, or ``!KIND`` / ``!KIND,TYPE,MESSAGE`` (indices;
   an empty one is absent) for an episode with an error;
3. ``t`` and 4. ``horizon``: a number, or ``-`` for none;
5. the index of ``meta.case_id``, or ``-``;
6. tokens: ``-``, ``IN,OUT``, ``IN,OUT,MODEL:CALLS`` (one model used them all) or
   ``IN,OUT,MODEL:IN:OUT:CALLS,...``;
7. steps: ``-``, their count, or ``COUNT:LAST`` (the index of the last step's name);
8. the pytest item that ran it (what a replay runs): ``-``, an index, or ``INDEX*`` for a
   value whose U+001F WIDTH U+001F stands for the replicate (``test_a[refund-r017]``);
9. ``^END^END...``: how each attempt before the final one ended, as in field 2;
10. ``~NAME:VALUE,NAME:VALUE``: the values of the metrics its rollout declares (each name by
    index), last on the line, only for an episode that has metrics.

What is not kept: seeds (derived), the other keys of ``meta``, tracebacks, durations,
spans, step names but the last, and when an episode finished.  Nothing a gate, ``diff``,
``where``, ``fix-check``, ``flips`` or ``cost`` reads of a baseline is lost; ``show`` lists
a baseline's errored episodes without their tracebacks (the run it was saved from has
them).

This module writes the format; :mod:`.compact_reader` reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..declare.seeds import derive_seed
from ..record import identity, steps_of
from .writer import json_default

__all__ = ["COMPACT_FORMAT", "SEP", "compact_body", "dump_compact", "header_line"]

#: The baseline format number of this layout: 3 holds a digest in its header
#: (:mod:`.integrity`); 2, the same lines without one, is still read.
COMPACT_FORMAT: Final = 3

#: U+001F: what a seed's text is joined with (no salt, rollout or condition key holds it),
#: and so what stands around the width of the replicate in an item's pattern (field 8).
SEP: Final = "\x1f"
_LIST: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                                default=json_default)
_ASCII: Final = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False,
                                 default=json_default)


def _json(value: Any) -> str:
    """``value`` as one line of JSON that UTF-8 can hold: a lone surrogate (a model's name
    given to prove.usage, an argument in the manifest's command) is kept as JSON's
    ``\\ud800`` escape, which json.loads gives back as it was."""
    text = _LIST.encode(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII.encode(value)
    return text


class _Table:
    """The values one block names by index, in the order they first appear."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._index: dict[tuple[type, Any], int] = {}

    def __call__(self, value: Any) -> str:
        key = (type(value), value)
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.values)
            self.values.append(value)
        return str(found)


def _number(value: object) -> str:
    if value is None:
        return "-"
    if type(value) is int:
        return str(value)
    return repr(float(value))  # type: ignore[arg-type]


def _end(record: Mapping[str, Any], table: _Table) -> str:
    error = record.get("error")
    if error is None:
        return table(record["outcome"])
    parts = [table(error["kind"])]
    for name in ("type", "message"):
        value = error.get(name)
        parts.append("" if not isinstance(value, str) else table(value))
    while parts[-1] == "":
        parts.pop()
    return "!" + ",".join(parts)


def _tokens(tokens: Mapping[str, Any] | None, table: _Table) -> str:
    if not tokens:
        return "-"
    total = f"{int(tokens.get('input') or 0)},{int(tokens.get('output') or 0)}"
    by_model = tokens.get("by_model") or {}
    if not by_model:
        return total
    if len(by_model) == 1:
        (model, use), = by_model.items()
        if (int(use.get("input") or 0) == int(tokens.get("input") or 0)
                and int(use.get("output") or 0) == int(tokens.get("output") or 0)):
            return f"{total},{table(model)}:{int(use.get('calls') or 0)}"
    models = ",".join(
        f"{table(model)}:{int(use.get('input') or 0)}:{int(use.get('output') or 0)}:"
        f"{int(use.get('calls') or 0)}" for model, use in sorted(by_model.items()))
    return f"{total},{models}"


def _steps(record: Mapping[str, Any], table: _Table) -> str:
    count, name = steps_of(record)
    if not count:
        return "-"
    return f"{count}:{table(name)}" if isinstance(name, str) else str(count)


_LAST_DIGITS: Final = re.compile(r"(\d+)(?=\D*$)")


def _item(record: Mapping[str, Any], table: _Table) -> str:
    """The item's index; for one named after its replicate, a pattern's, shared by all."""
    item = record.get("item")
    if not isinstance(item, str) or not item:
        return "-"
    found = _LAST_DIGITS.search(item)
    if found is None or SEP in item or int(found.group(1)) != int(record["replicate"]):
        return table(item)
    pattern = f"{item[:found.start()]}{SEP}{len(found.group(1))}{SEP}{item[found.end():]}"
    return table(pattern) + "*"


def _line(record: Mapping[str, Any], table: _Table) -> str:
    case = (record.get("meta") or {}).get("case_id")
    fields = [str(int(record["replicate"])), _end(record, table), _number(record.get("t")),
              _number(record.get("horizon")), "-" if case is None else table(case),
              _tokens(record.get("tokens"), table), _steps(record, table),
              _item(record, table)]
    earlier = record.get("earlier")
    if earlier:
        fields.append("".join("^" + _end(e, table) for e in earlier))
    metrics = record.get("metrics")
    if metrics:
        fields.append("~" + ",".join(f"{table(name)}:{_number(value)}"
                                     for name, value in metrics.items()))
    return " ".join(fields)


def dump_compact(header: Mapping[str, Any], episodes: Iterable[Mapping[str, Any]]) -> str:
    """The text of a compact baseline: ``header``, then ``episodes`` in blocks, sorted."""
    return header_line(header) + "\n" + compact_body(str(header["manifest"]["salt"]), episodes)


def header_line(header: Mapping[str, Any]) -> str:
    """A baseline's first line (without its newline)."""
    return _json(header)


def compact_body(salt: str, episodes: Iterable[Mapping[str, Any]]) -> str:
    """Every line after a compact baseline's header: ``episodes`` in blocks, sorted."""
    blocks: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in sorted(episodes, key=identity):
        blocks.setdefault((str(record["rollout"]), str(record["condition_key"])),
                          []).append(record)
    out: list[str] = []
    for (rollout, key), records in blocks.items():
        table = _Table()
        lines = [_line(r, table) for r in records]
        condition = records[0].get("condition") or {}
        sample = derive_seed(salt, rollout, key, 0)
        out.append("@" + _json([rollout, key, condition, sample, table.values]))
        out.extend(lines)
    return "".join(line + "\n" for line in out)

