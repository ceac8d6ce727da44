"""A run's JSON lines decoded by msgspec into :class:`~.episodes.StoredEpisode` objects.

:class:`LineDecoder` is the fast path of a run's reader (:mod:`.reading`): a line the typed
decoder and the cheap checks after it accept becomes a :class:`~.episodes.StoredEpisode`;
any other line (one the schema allows but these types do not, such as an episode with an
error or a field unknown here, and every line that is wrong) is read the slow way
(``json.loads`` and :func:`~pytest_prove.record.check_record`), which either accepts it as a
dict or raises the error that names the file, the line and the field.  The fast path is
never looser than the slow one.  What it leaves out of the dicts it would have built: a
line's rollout, condition key, condition and meta are compared with its condition's as raw
JSON (the same bytes need no new string or dict), and its steps stay raw JSON, checked to be
an array of objects, until something reads them (a comparison reads none; ``where`` and
``compare`` read them once, and they are kept).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, cast

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from .episodes import OneModel, StoredEpisode, _Text

__all__ = ["LineDecoder", "is_utf8"]

_SEP: Final = "\x1f"


class _Line(StoredEpisode, gc=False, eq=False, forbid_unknown_fields=True):
    """A :class:`~.episodes.StoredEpisode` as a run's line is decoded: its rollout,
    condition key, condition and meta left as raw JSON until :class:`LineDecoder` has
    compared them with those of its condition (the same bytes need no second string or
    dict), its steps left as raw JSON, checked to be objects, until something reads them (a
    comparison reads none), and an error decoded (then the line is read the slow way)."""

    rollout: Raw  # type: ignore[assignment]
    condition: Raw  # type: ignore[assignment]
    condition_key: Raw  # type: ignore[assignment]
    meta: Raw = UNSET  # type: ignore[assignment]
    error: dict[str, Any] | UnsetType | None = UNSET  # type: ignore[assignment]
    steps: Raw = UNSET  # type: ignore[assignment]


def _known_line(known: tuple[Sequence[str], Sequence[str], Sequence[str]],
                strings: dict[str, str]) -> type[_Line]:
    """The type of a line whose rollout, condition key and outcome are among the ``known``
    ones (a run's plan and declarations), decoded as those very strings (put in
    ``strings``, to be shared): no raw JSON to compare and no string to share for each
    line.  A group of lines that names another cannot be decoded with it: the reader then
    reads the rest of the file as raw JSON (:meth:`LineDecoder._raw`)."""
    rollouts, keys, outcomes = ({strings.setdefault(s, s): None for s in values}
                                for values in known)
    fields: list[tuple[str, Any, Any]] = [
        ("rollout", Literal[tuple(rollouts)], msgspec.NODEFAULT),
        ("condition_key", Literal[tuple(keys)], msgspec.NODEFAULT),
        ("outcome", Literal[tuple(outcomes)] | UnsetType | None, UNSET)]
    kind: Any = msgspec.defstruct(
        "_KnownLine", fields, bases=(_Line,), gc=False, eq=False, forbid_unknown_fields=True,
        namespace={"__reduce__": _as_line})  # no module holds this class by its name
    return cast(type[_Line], kind)


def _as_line(record: _Line) -> tuple[type[_Line], tuple[Any, ...]]:
    """A record decoded with a run's plan, pickled as the :class:`_Line` it holds."""
    return _Line, tuple(getattr(record, name) for name in _Line.__struct_fields__)


class _Object(Struct, gc=False):
    """Any JSON object, its fields skipped: the check that an episode's steps are objects."""


_NULL: Final = Raw(b"null")
_decode_text = msgspec.json.Decoder(_Text).decode
_decode_condition = msgspec.json.Decoder(dict[str, str | int | float | bool | None]).decode
_decode_meta = msgspec.json.Decoder(dict[str, Any]).decode
_check_steps = msgspec.json.Decoder(list[_Object]).decode

def _meta(raw: Raw) -> dict[str, Any] | None:
    """The meta in ``raw``, None unless it is an object whose case id, if any, is a string
    or an integer."""
    try:
        meta = _decode_meta(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    case = meta.get("case_id")
    if case is not None and type(case) is not str and type(case) is not int:
        return None
    return meta


def is_utf8(data: bytes | memoryview) -> bool:
    try:
        str(data, "utf-8")
    except UnicodeDecodeError:
        return False
    return True


_OPEN, _CLOSE, _NEWLINE = ord("{"), ord("}"), ord("\n")
#: How many lines are decoded in one call: few enough that their records are still in the
#: processor's cache when they are checked.
_GROUP: Final = 64
#: The replicate numbers as a seed's hash takes them, made once.
_REPLICATES: Final = tuple(b"%d" % r for r in range(4096))


def _ends(data: bytes | bytearray, start: int, end: int) -> list[int] | None:
    """Where each line of ``data[start:end]`` (whole lines) ends, when each is ``{`` to
    ``}``, with nothing around; else None.  Found by numpy over the whole buffer (a loop
    of ``find`` took a tenth of a run's read)."""
    import numpy as np  # here: the plugin reads no runs before its session ends

    if start == end:
        return []
    body = np.frombuffer(data, np.uint8, end - start, start)
    ends = np.flatnonzero(body == _NEWLINE)
    if (body[0] != _OPEN or not (body[ends - 1] == _CLOSE).all()
            or not (body[ends[:-1] + 1] == _OPEN).all()):
        return None
    ends += start
    found: list[int] = ends.tolist()
    return found


def _line_at(body: bytes | memoryview, start: int, ends: Sequence[int]
             ) -> Callable[[int], bytes]:
    """Line ``index`` of the lines of ``body`` from ``start`` that end at ``ends``."""
    def line(index: int) -> bytes:
        return bytes(body[ends[index - 1] + 1 if index else start:ends[index]])
    return line


class _Condition:
    """What the episodes of one condition share, the hash their seeds start from, and where
    each of its episodes read so far is among the reader's, by replicate."""

    __slots__ = ("condition", "key", "key_raw", "meta", "meta_raw", "positions", "prefix",
                 "raw", "rollout", "rollout_raw")

    def __init__(self, salt: str, rollout: str, key: str, condition: dict[str, Any],
                 positions: dict[int, int], raw: Raw, rollout_raw: Raw, key_raw: Raw
                 ) -> None:
        self.rollout, self.key, self.condition, self.raw = rollout, key, condition, raw
        self.rollout_raw, self.key_raw = rollout_raw, key_raw
        self.meta: dict[str, Any] | None = None
        self.meta_raw: Raw | None = None
        self.prefix = hashlib.blake2b(_SEP.join((salt, rollout, key, "")).encode("utf-8"),
                                      digest_size=8)
        self.positions = positions


class LineDecoder:
    """Reads a JSON-lines file's episodes, a buffer of whole lines at a time, into
    :attr:`episodes`: each line decoded by msgspec into a
    :class:`~.episodes.StoredEpisode` and checked as :func:`~pytest_prove.record.check_record`
    and :func:`~pytest_prove.record.check_seed` would check it, or, when that fails, handed
    to ``slow(line, number)``, which reads it the slow way (a dict, None for a blank line)
    or raises the error that names it.

    The last line of an episode wins (a resumed run appends a new ending); with
    ``unique``, ``repeated(record, number, earlier)`` is called instead, with the two line
    numbers (a baseline holds each episode once).
    """

    def __init__(self, salt: str, slow: Callable[[bytes, int], Mapping[str, Any] | None], *,
                 unique: bool = False,
                 repeated: Callable[[Mapping[str, Any], int, int], None] | None = None,
                 known: tuple[Sequence[str], Sequence[str], Sequence[str]] | None = None
                 ) -> None:
        self.salt = salt
        self.episodes: list[Mapping[str, Any] | None] = []
        #: Whether an episode was replaced by a later line (its place is None).
        self.replaced = False
        self._slow = slow
        self._unique = unique
        self._repeated = repeated
        self._line_of = array("q")  # with unique, the line of each episode
        self._strings: dict[str, str] = {}
        #: Whether a line's rollout, condition key and outcome are decoded as the strings
        #: they are among those ``known`` (else as raw JSON, and shared here).
        try:
            self._known = _known_line(known, self._strings) if known else None
            decoder = msgspec.json.Decoder(self._known or _Line)
        except (UnicodeError, TypeError, ValueError):  # none known, or a name msgspec
            self._known = None                         # cannot take (a lone surrogate)
            decoder = msgspec.json.Decoder(_Line)
        self._decode = decoder.decode
        self._decode_lines = decoder.decode_lines
        self._conditions: dict[tuple[str, str], _Condition] = {}
        self._positions: dict[tuple[str, str], dict[int, int]] = {}
        self._last = _Condition(salt, "", "", {}, {}, Raw(b""), Raw(b""), Raw(b""))

    def read(self, data: bytes | bytearray, start: int, end: int, before: int, *,
             text: bool) -> int:
        """Read the lines of ``data[start:end]`` (whole lines, each with its newline), the
        first of them line ``before + 1`` of the file; ``text`` when they are all UTF-8.
        Returns how many lines there were.

        When every line is one object, ``{`` to ``}``, they are decoded a group at a time
        (msgspec's ``decode_lines``): a newline cannot be in a JSON string, and after an
        object's ``}`` another ``{`` can only start the next value at the top, so each
        line starts a value, and as many values as lines means one a line.  Otherwise,
        or when that call fails, each line is decoded alone.
        """
        ends = _ends(data, start, end) if text else None
        if ends is not None:
            view = memoryview(data)
            for first in range(0, len(ends), _GROUP):
                self._group(view, ends[first:first + _GROUP], before + first,
                            ends[first - 1] + 1 if first else start)
            return len(ends)
        self._raw()
        lines: list[bytes] = bytes(data[start:end]).split(b"\n")
        lines.pop()
        self._take(list(map(self._try if text else self._one, lines)), before,
                   lines.__getitem__)
        return len(lines)

    def _group(self, body: memoryview, ends: Sequence[int], before: int, start: int) -> None:
        """Read the lines of ``body`` from ``start`` to each of ``ends``, the first of them
        line ``before + 1``: decoded in one call, or else each alone."""
        try:
            records: Sequence[_Line | None] = self._decode_lines(body[start:ends[-1] + 1])
        except (msgspec.DecodeError, ValueError, RecursionError):
            records = ()
        if len(records) != len(ends) and self._known is not None:
            self._raw()  # a rollout, key or outcome not known: read as raw JSON from here
            self._group(body, ends, before, start)
            return
        lines = _line_at(body, start, ends)
        if len(records) != len(ends):
            records = [self._try(lines(index)) for index in range(len(ends))]
        self._take(records, before, lines)

    def _raw(self) -> None:
        """Decode each line's rollout and condition key as raw JSON from now on (the
        conditions read so far compared with the JSON msgspec writes of them), and its
        outcome as any string."""
        if self._known is None:
            return
        self._known = None
        decoder = msgspec.json.Decoder(_Line)
        self._decode, self._decode_lines = decoder.decode, decoder.decode_lines
        encode = msgspec.json.encode
        for shared in (*self._conditions.values(), self._last):
            shared.rollout_raw = Raw(encode(shared.rollout))
            shared.key_raw = Raw(encode(shared.key))

    def _try(self, line: bytes) -> _Line | None:
        try:
            record: _Line = self._decode(line)
        except (msgspec.DecodeError, ValueError, RecursionError):
            return None
        return record

    def _one(self, line: bytes) -> _Line | None:
        if not (line.isascii() or is_utf8(line)):
            return None
        return self._try(line)

    def positions_of(self, rollout: str, key: str) -> dict[int, int]:
        """The positions of the condition ``key`` of ``rollout``, by replicate."""
        found = self._positions.get((rollout, key))
        if found is None:
            found = self._positions[(rollout, key)] = {}
        return found

    def _shared(self, record: _Line) -> _Condition | None:
        """What ``record``'s condition shares with the others read (None: the slow way)."""
        if self._known is None:
            try:
                rollout = _decode_text(record.rollout)
                key = _decode_text(record.condition_key)
            except (msgspec.DecodeError, ValueError, RecursionError):
                return None
        else:
            rollout, key = record.rollout, record.condition_key  # type: ignore[assignment]
            if not rollout or not key:
                return None
        shared = self._conditions.get((rollout, key))
        if shared is not None:
            if record.condition != shared.raw:
                try:
                    condition = _decode_condition(record.condition)
                except (msgspec.DecodeError, ValueError, RecursionError):
                    return None
                # The same condition written otherwise is the same; another one under the
                # same key is not (the slow way says so).
                if condition != shared.condition:
                    return None
            return shared
        if _SEP in rollout or _SEP in key or _SEP in self.salt:
            return None
        try:
            condition = _decode_condition(record.condition)
        except (msgspec.DecodeError, ValueError, RecursionError):
            return None
        strings = self._strings
        rollout = strings.setdefault(rollout, rollout)
        key = strings.setdefault(key, key)
        shared = self._conditions[(rollout, key)] = _Condition(
            self.salt, rollout, key, condition, self.positions_of(rollout, key),
            record.condition.copy(),
            *((record.rollout.copy(), record.condition_key.copy()) if self._known is None
              else (rollout, key)))
        return shared

    def _take(self, records: Sequence[_Line | None], before: int,
              line_at: Callable[[int], bytes]) -> None:
        """Check and share what the decoder left to Python of each record (the condition,
        the seed, the outcome, t against horizon, meta, error, tokens and steps), and add
        its episode where it belongs; a line the decoder did not take (None), or whose
        record fails a check, is read by ``slow``."""
        episodes = self.episodes
        append = episodes.append
        unique = self._unique
        line_of = self._line_of.append
        intern = self._strings.setdefault
        last = self._last  # a condition's lines mostly follow each other
        unset, null, big = UNSET, _NULL, int.from_bytes
        check_steps, one_model, replicates = _check_steps, OneModel, _REPLICATES
        raw = self._known is None
        count = len(episodes)
        for index, record in enumerate(records):
            if record is None:
                self._take_slow(line_at(index), before + index + 1)
                count = len(episodes)
                continue
            if (record.condition_key != last.key_raw or record.condition != last.raw
                    or record.rollout != last.rollout_raw):
                shared = self._shared(record)
                if shared is None:
                    self._take_slow(line_at(index), before + index + 1)
                    count = len(episodes)
                    continue
                last = shared
            replicate = record.replicate
            h = last.prefix.copy()
            try:
                h.update(replicates[replicate])
            except IndexError:
                h.update(b"%d" % replicate)
            outcome = record.outcome
            if (big(h.digest(), "big") != record.seed
                    or outcome is None or outcome is unset):  # the slow way names the field
                self._take_slow(line_at(index), before + index + 1)
                count = len(episodes)
                continue
            try:
                if record.t > record.horizon:  # type: ignore[operator]
                    self._take_slow(line_at(index), before + index + 1)
                    count = len(episodes)
                    continue
            except TypeError:
                pass  # t or horizon is None or absent
            meta = record.meta
            if meta is not unset:  # type: ignore[comparison-overlap]
                if meta == last.meta_raw:
                    record.meta = last.meta  # type: ignore[assignment]
                elif meta == null:
                    record.meta = None  # type: ignore[assignment]
                else:
                    value = _meta(meta)
                    if value is None:
                        self._take_slow(line_at(index), before + index + 1)
                        count = len(episodes)
                        continue
                    record.meta = value  # type: ignore[assignment]
                    if value:
                        last.meta, last.meta_raw = value, meta.copy()
            error = record.error
            if error is not None and error is not unset:
                self._take_slow(line_at(index), before + index + 1)  # read as a dict
                count = len(episodes)
                continue
            tokens = record.tokens
            if tokens is not None and tokens is not unset:
                model = tokens.model
                by_model = tokens.by_model
                if model is not unset:  # flat, as format 2 writes one model's usage
                    if by_model is not unset:
                        self._take_slow(line_at(index), before + index + 1)  # says why
                        count = len(episodes)
                        continue
                    tokens.model = intern(model, model)
                elif tokens.calls is not unset:
                    self._take_slow(line_at(index), before + index + 1)  # says why
                    count = len(episodes)
                    continue
                elif by_model is not unset and len(by_model) == 1:
                    name, use = by_model.popitem()  # type: ignore[attr-defined]
                    if use.input == tokens.input and use.output == tokens.output and name:
                        tokens.by_model = unset
                        tokens.model = intern(name, name)
                        tokens.calls = use.calls
                    else:
                        if use.input == tokens.input:
                            use.input = tokens.input
                        if use.output == tokens.output:
                            use.output = tokens.output
                        tokens.by_model = one_model(intern(name, name), use)
            steps = record.steps
            if steps is not unset:  # type: ignore[comparison-overlap]
                try:
                    check_steps(steps)
                except (msgspec.DecodeError, ValueError, RecursionError):
                    self._take_slow(line_at(index), before + index + 1)
                    count = len(episodes)
                    continue
                record.steps = steps.copy()
            record.condition = last.condition  # type: ignore[assignment]
            if raw:
                record.rollout = last.rollout  # type: ignore[assignment]
                record.condition_key = last.key  # type: ignore[assignment]
                record.outcome = intern(outcome, outcome)
            positions = last.positions
            if positions.setdefault(replicate, count) != count:
                self._again(record, positions[replicate], before + index + 1)
                positions[replicate] = count
            append(record)
            count += 1
            if unique:
                line_of(before + index + 1)
        self._last = last

    def _take_slow(self, line: bytes, number: int) -> None:
        """Read ``line``, line ``number`` of the file, by ``slow`` and add what it gives."""
        record = self._slow(line, number)
        if record is None:
            return
        positions = self.positions_of(record["rollout"], record["condition_key"])
        replicate = record["replicate"]
        if replicate in positions:
            self._again(record, positions[replicate], number)
        positions[replicate] = len(self.episodes)
        self.episodes.append(record)
        if self._unique:
            self._line_of.append(number)

    def _again(self, record: Mapping[str, Any], earlier: int, number: int) -> None:
        """``record``, on line ``number``, repeats the episode at ``earlier``."""
        if self._unique and self._repeated is not None:
            self._repeated(record, number, self._line_of[earlier])
        self.episodes[earlier] = None
        self.replaced = True
