"""Reading a compact baseline (the format is described in :mod:`.compact`, which writes it):
its lines checked as they are parsed into :class:`~.episodes.StoredEpisode` objects, and a
wrong line named by its file, its line and its field, with the fix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from msgspec import UNSET, UnsetType

from ..declare.seeds import split_arm
from ..record import ERROR_KINDS, StoreError, episode_name
from .compact import SEP
from .episodes import ItemPattern, ModelUse, OneModel, SeedOf, StoredEpisode, StoredTokens

__all__ = ["read_compact"]


def _bad_line(where: str, what: str, fix: str) -> StoreError:
    return StoreError(f"{where}: {what}; the file was edited or damaged: {fix}")


def _shown(text: str) -> str:
    text = text if len(text) <= 60 else text[:57] + "..."
    return json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace").decode()


class _Block:
    """A condition's line, and what its episodes' lines have named so far, parsed once."""

    __slots__ = ("cases", "condition", "ends", "first", "items", "key", "numbers",
                 "rollout", "seed", "seeds", "seen", "steps", "table")

    def __init__(self, rollout: str, key: str, condition: dict[str, Any], seed: int,
                 table: list[Any], salt: str, first: int) -> None:
        self.rollout, self.key, self.condition, self.seed = rollout, key, condition, seed
        self.table = table
        #: Each episode's seed, derived when it is read.
        self.seeds = SeedOf(SEP.join((salt, split_arm(rollout)[0], key, "")).encode("utf-8"))
        self.seen: dict[int, int] = {}
        self.first = first
        # Each field's text, parsed: the records of a block share these values.
        self.ends: dict[str, tuple[str | None, dict[str, Any] | None]] = {}
        self.numbers: dict[str, float | int | None] = {"-": None}
        self.cases: dict[str, dict[str, Any] | None] = {"-": None}
        self.steps: dict[str, tuple[int, str | None] | None] = {"-": None}
        self.items: dict[str, str | ItemPattern] = {}


def _block(text: str, where: str, salt: str, number: int, fix: str) -> _Block:
    """The block a line starting with ``@`` opens, checked, or an error naming it."""
    shape = ("a JSON array after '@': [rollout, condition key, condition, the seed of "
             "replicate 0, [values]]")
    try:
        found = json.loads(text[1:])
    except json.JSONDecodeError as exc:
        raise _bad_line(where, f"the condition's line is not {shape} ({exc})", fix) from None
    except RecursionError:
        raise _bad_line(where, f"the condition's line is not {shape} (it is nested too "
                        "deeply: arrays or objects thousands of levels deep)", fix) from None
    if type(found) is not list or len(found) != 5:
        raise _bad_line(where, f"the condition's line is not {shape}", fix)
    rollout, key, condition, seed, table = found
    if type(rollout) is not str or not rollout or type(key) is not str or not key:
        raise _bad_line(where, "the rollout and the condition key must be non-empty strings",
                        fix)
    if SEP in rollout or SEP in key:
        raise _bad_line(where, "the rollout or the condition key contains U+001F", fix)
    if type(condition) is not dict or any(
            v is not None and (type(v) not in (str, int, float, bool)
                               or (type(v) is float and not math.isfinite(v)))
            for v in condition.values()):
        raise _bad_line(where, "the condition must be an object of axis values (strings, "
                        "finite numbers, true, false or null)", fix)
    if type(seed) is not int or not 0 <= seed < 2**64:
        raise _bad_line(where, "the seed of replicate 0 must be an integer in [0, 2**64)", fix)
    if type(table) is not list or any(type(v) not in (str, int) for v in table):
        raise _bad_line(where, "the values must be an array of strings and integers", fix)
    block = _Block(rollout, key, condition, seed, table, salt, number)
    expected = _seed(block, 0)
    if seed != expected:
        raise StoreError(
            f"{where}: seed {seed} is not the seed of {episode_name(rollout, key, 0)} under "
            f"the salt {json.dumps(salt)} (that is {expected}); the salt or the seed was "
            f"edited, so a run paired with this file would match episodes that did not run "
            f"on the same seed: {fix}")
    return block


def _seed(block: _Block, replicate: int) -> int:
    return block.seeds.of(replicate)


def read_compact(path: Path, data: bytes, salt: str, fix: str
                 ) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The episodes of the compact baseline whose bytes are ``data`` (its header checked by
    the caller), and notes on what was skipped (a truncated last line).

    Records of one condition share their unchanging parts (condition, meta, error): read
    them, do not change them in place.
    """
    notes: list[str] = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = data.count(b"\n", 0, exc.start) + 1
        raise _bad_line(f"{path}:{number}", f"not UTF-8 text ({exc})", fix) from None
    if "\r" in text:  # checked out with CRLF line ends (git's core.autocrlf on Windows)
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    tail = lines.pop()
    if tail.strip():
        notes.append(f"{path}: line {len(lines) + 1} is truncated (a session stopped while "
                     "writing it); it was skipped and every whole line was read")
    episodes: list[Mapping[str, Any]] = []
    append = episodes.append
    blocks: dict[tuple[str, str], int] = {}
    block: _Block | None = None
    prefix = f"{path}:"
    unset, episode, tokens_of = UNSET, StoredEpisode, StoredTokens
    one_model, model_use = OneModel, ModelUse
    # What the lines of the block read name, parsed once: the same as in the block (which
    # _fast fills in), bound here.
    ends: dict[str, tuple[str | None, dict[str, Any] | None]] = {}
    numbers: dict[str, float | int | None] = {}
    cases: dict[str, dict[str, Any] | None] = {}
    steps_by: dict[str, tuple[int, str | None] | None] = {}
    items: dict[str, str | ItemPattern] = {}
    models: dict[str, tuple[str, int]] = {}
    seen: dict[int, int] = {}
    rollout = key = ""
    condition: dict[str, Any] = {}
    table: list[Any] = []
    seeds: Any = None
    for number in range(2, len(lines) + 1):
        line = lines[number - 1]
        if line[:1] == "@":
            block = _block(line, f"{prefix}{number}", salt, number, fix)
            ident = (block.rollout, block.key)
            if ident in blocks:
                raise _bad_line(f"{prefix}{number}", f"the condition {_shown(block.key)} of "
                                f"{_shown(block.rollout)} also starts on line {blocks[ident]}; "
                                "a baseline holds each condition once", fix)
            blocks[ident] = number
            ends, numbers, cases = block.ends, block.numbers, block.cases
            steps_by, items, seen, models = block.steps, block.items, block.seen, {}
            seeds, table = block.seeds, block.table
            rollout, key, condition = block.rollout, block.key, block.condition
            continue
        if block is None:
            if not line.strip():
                continue
            raise _bad_line(f"{prefix}{number}", "an episode's line comes before any "
                            "condition's line (one starting with '@')", fix)
        try:
            # The most common lines (8 fields, no error, tokens of one model or none),
            # as _fast reads them, with what the block's lines share looked up once.
            fields = line.split(" ")
            if len(fields) != 8:
                record = _fast(line, block)
            else:
                rep, end, t, horizon, case, tokens, steps, item = fields
                ended = ends.get(end)
                if ended is None or ended[1] is not None or (
                        t not in numbers or horizon not in numbers or case not in cases
                        or steps not in steps_by or (item != "-" and item not in items)):
                    record = _fast(line, block)  # an error, or a value first seen
                else:
                    if not rep.isdigit():  # also refuses a sign, spaces and '_'
                        raise ValueError
                    replicate = int(rep)
                    tv, hv = numbers[t], numbers[horizon]
                    if tv is not None and hv is not None and tv > hv:
                        raise ValueError
                    used: StoredTokens | None = None
                    if tokens != "-":
                        parts = tokens.split(",")
                        # IN,OUT,MODEL:CALLS (not one model's own IN:OUT:CALLS)
                        if len(parts) == 3 and "-" not in tokens and (
                                (found := models.get(parts[2])) is not None
                                or parts[2].count(":") == 1):
                            if found is None:
                                model, _, calls = parts[2].partition(":")
                                name = table[int(model)]
                                if type(name) is not str:
                                    raise ValueError
                                found = models[parts[2]] = (name, int(calls))
                            tin, tout = int(parts[0]), int(parts[1])
                            used = (tokens_of(tin, tout, unset, found[0], found[1])
                                    if found[0] else tokens_of(tin, tout, one_model(
                                        found[0], model_use(tin, tout, found[1]))))
                        else:
                            used = _tokens_of(parts, table)
                    counted = steps_by[steps]
                    step_count, last_step = counted if counted is not None else (unset, unset)
                    if item == "-":
                        named: str | ItemPattern | UnsetType = unset
                    else:
                        named = items[item]
                        if type(named) is ItemPattern and not (
                                rep.isascii() and (rep[0] != "0" or len(rep) == 1)):
                            # Not as str(replicate) writes it: as written.
                            named = named.before + rep.zfill(named.width) + named.after
                    # Every field by position (no duration: a compact baseline keeps none;
                    # the seed is derived when it is read).
                    record = episode(
                        rollout, condition, key, replicate, seeds,
                        ended[0], tv, hv, cases[case], None, unset, used, unset, unset,
                        unset, unset, named,  # type: ignore[arg-type]  # an ItemPattern, written out when read
                        step_count, last_step)
        except (ValueError, IndexError, TypeError, KeyError):
            if not line.strip():
                continue
            _diagnose(line, block, f"{prefix}{number}", fix)
            raise  # _diagnose raises; this is never reached
        replicate = record.replicate if type(record) is StoredEpisode else record["replicate"]
        if seen.setdefault(replicate, number) != number:
            name = episode_name(block.rollout, block.key, replicate)
            raise _bad_line(f"{prefix}{number}", f"{name} is also on line {seen[replicate]}; "
                            "a baseline holds each episode once", fix)
        append(record)
    return episodes, notes


def _fast(text: str, block: _Block) -> Mapping[str, Any]:
    """One episode's line as a record; any exception means the line is wrong (then
    :func:`_diagnose` says how)."""
    fields = text.split(" ")
    metrics = _metrics_of(fields.pop(), block.table) if fields[-1][:1] == "~" else None
    if len(fields) == 8:
        rep, end, t, horizon, case, tokens, steps, item = fields
        earlier = None
    else:
        rep, end, t, horizon, case, tokens, steps, item, earlier = fields
    if not rep.isdigit():  # also refuses a sign, spaces and '_'
        raise ValueError
    replicate = int(rep)
    ended = block.ends.get(end)
    if ended is None:
        ended = block.ends[end] = _ending(end, block.table)
    numbers = block.numbers
    tv = numbers[t] if t in numbers else _parse_number(t, numbers)
    hv = numbers[horizon] if horizon in numbers else _parse_number(horizon, numbers)
    if tv is not None and hv is not None and tv > hv:
        raise ValueError
    cases = block.cases
    meta = cases[case] if case in cases else _case(case, block)
    used: StoredTokens | None = None
    if tokens != "-":
        parts = tokens.split(",")
        if len(parts) == 3 and "-" not in tokens and parts[2].count(":") == 1:
            model, _, calls = parts[2].partition(":")
            tin, tout = int(parts[0]), int(parts[1])
            name = block.table[int(model)]
            if type(name) is not str:
                raise ValueError
            used = (StoredTokens(tin, tout, UNSET, name, int(calls)) if name else
                    StoredTokens(tin, tout, OneModel(name, ModelUse(tin, tout, int(calls)))))
        else:
            used = _tokens_of(parts, block.table)
    # Every argument by position (no duration: a compact baseline keeps none).
    record = StoredEpisode(block.rollout, block.condition, block.key, replicate,
                           block.seeds, ended[0], tv, hv, meta, None,  # type: ignore[arg-type]
                           UNSET, used)
    if steps != "-":
        counted = block.steps.get(steps)
        if counted is None:
            counted = block.steps[steps] = _steps_of(steps, block.table)
        record.step_count, record.last_step = counted
    if item != "-":
        named = block.items.get(item)
        if named is None:
            named = block.items[item] = _item_of(item, block.table)
        if isinstance(named, str):
            record.item = named
        elif rep.isascii() and (rep[0] != "0" or len(rep) == 1):  # as str(replicate)
            record.item = named  # type: ignore[assignment]  # an ItemPattern, written out when read
        else:
            record.item = named.before + rep.zfill(named.width) + named.after
    if metrics is not None:
        record.metrics = metrics
    if ended[1] is None and earlier is None:
        return record
    # An episode with an error, or run more than once: a dict (these are few).
    found: dict[str, Any] = dict(record)
    found["error"] = ended[1]
    if earlier is not None:
        if earlier[:1] != "^":
            raise ValueError
        ends = earlier[1:].split("^")
        found["earlier"] = [
            {"outcome": o, "error": e} for o, e in (_ending(x, block.table) for x in ends)]
        found["attempts"] = len(ends) + 1
    return found


def _metrics_of(text: str, table: list[Any]) -> dict[str, float]:
    """``~NAME:VALUE,...`` (names by index) as the episode's metrics."""
    found: dict[str, float] = {}
    for part in text[1:].split(","):
        index, _, value = part.partition(":")
        name = table[int(index)]
        number = float(value)
        if type(name) is not str or name in found or number != number or number in (
                math.inf, -math.inf):
            raise ValueError
        found[name] = number
    if not found:
        raise ValueError
    return found


def _item_of(text: str, table: list[Any]) -> str | ItemPattern:
    value = table[int(text.removesuffix("*"))]
    if type(value) is not str or not value:
        raise ValueError
    if not text.endswith("*"):
        return value
    before, width, after = value.split(SEP)
    if not width.isdigit() or not 0 < int(width) < 20:
        raise ValueError
    return ItemPattern(before, int(width), after)


def _parse_number(text: str, numbers: dict[str, float | int | None]) -> float | int:
    value = int(text) if text.isdigit() else float(text)
    if not 0 <= value < math.inf:
        raise ValueError
    numbers[text] = value
    return value


def _case(text: str, block: _Block) -> dict[str, Any]:
    meta = block.cases[text] = {"case_id": block.table[int(text)]}
    return meta


def _steps_of(text: str, table: list[Any]) -> tuple[int, str | None]:
    count, _, last = text.partition(":")
    n = int(count)
    if n < 1 or not count.isdigit():
        raise ValueError
    name = table[int(last)] if last else None
    if name is not None and type(name) is not str:
        raise ValueError
    return n, name


def _ending(end: str, table: list[Any]) -> tuple[str | None, dict[str, Any] | None]:
    if end[:1] == "!":
        return None, _error(end, table)
    return _outcome(end, table), None


def _outcome(end: str, table: list[Any]) -> str:
    outcome = table[int(end)]
    if type(outcome) is not str or not outcome:
        raise ValueError
    return outcome


def _error(end: str, table: list[Any]) -> dict[str, Any]:
    parts = end[1:].split(",")
    if len(parts) > 3:
        raise ValueError
    kind = table[int(parts[0])]
    if kind not in ERROR_KINDS:
        raise ValueError
    error: dict[str, Any] = {"kind": kind}
    for name, index in zip(("type", "message"), parts[1:], strict=False):
        if index:
            value = table[int(index)]
            if type(value) is not str:
                raise ValueError
            error[name] = value
    return error


def _tokens_of(parts: list[str], table: list[Any]) -> StoredTokens:
    tin, tout = int(parts[0]), int(parts[1])
    if tin < 0 or tout < 0:
        raise ValueError
    if len(parts) == 2:
        return StoredTokens(tin, tout)
    if len(parts) == 3:
        model, colon, calls = parts[2].partition(":")
        if colon and ":" not in calls:
            name = table[int(model)]
            used = int(calls)
            if type(name) is not str or used < 0:
                raise ValueError
            return (StoredTokens(tin, tout, UNSET, name, used) if name else
                    StoredTokens(tin, tout, OneModel(name, ModelUse(tin, tout, used))))
    by_model: dict[str, ModelUse] = {}
    for part in parts[2:]:
        use = part.split(":")
        if len(use) != 4:
            raise ValueError
        name = table[int(use[0])]
        numbers = (int(use[1]), int(use[2]), int(use[3]))
        if type(name) is not str or name in by_model or min(numbers) < 0:
            raise ValueError
        by_model[name] = ModelUse(*numbers)
    return StoredTokens(tin, tout, by_model)


_FIELDS: Final = ("the replicate", "how it ended", "t", "horizon", "the case id", "tokens",
                  "steps", "the item", "the earlier attempts")
_EXPECTED: Final = (
    "an integer >= 0",
    "an outcome's index in the condition's values, or '!' and an error kind's index",
    "'-' or a finite number >= 0",
    "'-' or a finite number >= 0 (and t at most horizon)",
    "'-' or an index in the condition's values",
    "'-', IN,OUT, IN,OUT,MODEL:CALLS or IN,OUT,MODEL:IN:OUT:CALLS,... (integers >= 0, "
    "models by index)",
    "'-', a count >= 1, or COUNT:INDEX of the last step's name",
    "'-', or the index of the item's name (with '*' when its replicate is left out)",
    "'^' then how each earlier attempt ended, as in field 2",
)
_METRICS_EXPECTED: Final = ("'~' then NAME:VALUE pairs separated by commas (names by index, "
                            "finite numbers)")


def _diagnose(text: str, block: _Block, where: str, fix: str) -> None:
    """Raise the error that says which field of a wrong episode's line is wrong and how."""
    fields = text.split(" ")
    if fields[-1][:1] == "~":
        last = fields.pop()
        try:
            _metrics_of(last, block.table)
        except (ValueError, IndexError, TypeError, KeyError):
            raise _bad_line(where, f"the metrics (last field) are {_shown(last)}, expected "
                            f"{_METRICS_EXPECTED}", fix) from None
        text = " ".join(fields)
    if len(fields) not in (8, 9):
        raise _bad_line(where, f"the episode's line {_shown(text)} has {len(fields)} "
                        "field(s) separated by single spaces, expected 8 (or 9 for a "
                        "replicate run more than once)", fix)
    # Parse again with each field alone in a line otherwise known good, to name it.
    good = ["0", "!0", "-", "-", "-", "-", "-", "-"]
    probe = _Block(block.rollout, block.key, block.condition, block.seed,
                   [*block.table, "exception"], "x", 0)
    good[1] = f"!{len(block.table)}"
    for index, value in enumerate(fields):
        trial = list(good)
        if index == 3 and fields[2] != "-":
            trial[2] = fields[2]  # t > horizon is a fault of the pair
        if index < 8:
            trial[index] = value
        else:
            trial.append(value)
        try:
            _fast(" ".join(trial), probe)
        except (ValueError, IndexError, TypeError, KeyError):
            raise _bad_line(where, f"{_FIELDS[index]} (field {index + 1}) is "
                            f"{_shown(value)}, expected {_EXPECTED[index]}", fix) from None
    raise _bad_line(where, f"the episode's line {_shown(text)} names a value past the "
                    f"{len(block.table)} of its condition's line", fix)
