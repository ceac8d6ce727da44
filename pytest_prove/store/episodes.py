"""Episodes as the store hands them out: read-only mappings that take a fraction of a dict's
memory, decoded from a run's lines by msgspec in one typed pass.

A run of a million episodes read into plain dicts took about 2 KB an episode (a dict of
fourteen keys, three more for the tokens, a copy of the condition and of the meta, and a
string for every value); compared against a baseline of the same size, the process passed
2.5 GB.  An :class:`Episode` is a msgspec ``Struct`` (slots, not tracked by the garbage
collector) that reads like the dict it was decoded from: ``record["outcome"]``,
``record.get("error")``, ``"steps" in record``, ``dict(record)``, iteration and equality
with a dict all behave as they would for the dict, and a field absent from the line is
absent from the mapping.  Its condition and meta are shared with the other episodes of its
condition, its rollout, condition key and outcome are shared strings, and the usage of a
single model is kept in a :class:`OneModel` rather than a dict.  It cannot be changed in
place: copy it with ``dict(record)``.

:func:`decode_line` is the fast path of a run's reader: a line the typed decoder and the
cheap checks after it accept becomes an :class:`Episode`; any other line (one the schema
allows but these types do not, such as an episode with an error or a field unknown here,
and every line that is wrong) returns None, and the reader reads it the slow way
(``json.loads`` and :func:`~pytest_prove.record.check_record`), which either accepts it as
a dict or raises the error that names the file, the line and the field.  The fast path is
never looser than the slow one.
"""

from __future__ import annotations

import hashlib
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TYPE_CHECKING, Annotated, Any, Final

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

__all__ = ["Episode", "ItemPattern", "LineDecoder", "ModelUse", "OneModel", "Tokens", "plain"]

_SEP: Final = "\x1f"
_SEED_END: Final = 2**64
# The checks of check_record that the decoder makes itself, in C.
_Count = Annotated[int, Meta(ge=0)]
_Text = Annotated[str, Meta(min_length=1)]
_Number = Annotated[int, Meta(ge=0)] | Annotated[float, Meta(ge=0)]


if TYPE_CHECKING:
    # What these Structs are to a type checker: mappings (at run time they are registered
    # with Mapping, whose metaclass a Struct cannot take).
    class _MappingStruct(Struct, Mapping[str, Any]):
        pass
else:
    _MappingStruct = Struct


class _Fields(_MappingStruct, gc=False, eq=False, forbid_unknown_fields=True):
    """A Struct read as a mapping of its fields that are set (not UNSET)."""

    # Each class's own lookups (set by _accessors below): a frozenset of its fields, not
    # a scan of __struct_fields__, since a review reads a few fields of every episode.
    def __getitem__(self, key: str) -> Any:
        raise NotImplementedError

    def get(self, key: str, default: Any = None) -> Any:
        raise NotImplementedError

    def __contains__(self, key: object) -> bool:
        raise NotImplementedError

    def __iter__(self) -> Iterator[str]:
        return (k for k in self.__struct_fields__ if getattr(self, k) is not UNSET)

    def __len__(self) -> int:
        return sum(getattr(self, k) is not UNSET for k in self.__struct_fields__)

    def keys(self) -> KeysView[str]:
        return KeysView(self)

    def items(self) -> ItemsView[str, Any]:
        return ItemsView(self)

    def values(self) -> ValuesView[Any]:
        return ValuesView(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return bool(plain(self) == plain(other))

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # a mapping, as unhashable as a dict

    def __repr__(self) -> str:
        return repr(plain(self))


class ModelUse(_Fields):
    """One model's usage in an episode: ``{"input": ..., "output": ..., "calls": ...}``."""

    input: _Count | UnsetType = UNSET
    output: _Count | UnsetType = UNSET
    calls: _Count | UnsetType = UNSET


class Tokens(_Fields):
    """An episode's token usage: ``{"input": ..., "output": ..., "by_model": {...}}``."""

    input: _Count
    output: _Count
    by_model: Mapping[str, ModelUse] | UnsetType = UNSET


class OneModel(_MappingStruct, gc=False, eq=False):
    """``by_model`` of an episode that used one model: ``{name: use}`` without a dict."""

    name: str
    use: ModelUse

    def __getitem__(self, key: str) -> ModelUse:
        if key == self.name:
            return self.use
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        return self.use if key == self.name else default

    def __contains__(self, key: object) -> bool:
        return key == self.name

    def __iter__(self) -> Iterator[str]:
        return iter((self.name,))

    def __len__(self) -> int:
        return 1

    def keys(self) -> KeysView[str]:
        return KeysView(self)

    def items(self) -> ItemsView[str, Any]:
        return ItemsView(self)

    def values(self) -> ValuesView[Any]:
        return ValuesView(self)

    __eq__ = _Fields.__eq__
    __ne__ = _Fields.__ne__
    __hash__ = None  # type: ignore[assignment]
    __repr__ = _Fields.__repr__


class Episode(_Fields):
    """One stored episode (:class:`~pytest_prove.record.EpisodeRecord`), read-only.

    The fields are in the order the runner writes them; ``step_count`` and ``last_step``
    are set only for an episode read from a compact baseline, which keeps them instead of
    its steps.
    """

    rollout: _Text
    condition: dict[str, str | int | float | bool | None]
    condition_key: _Text
    replicate: _Count
    seed: _Count
    outcome: _Text | UnsetType | None = UNSET
    t: _Number | UnsetType | None = UNSET
    horizon: _Number | UnsetType | None = UNSET
    meta: dict[str, Any] | UnsetType | None = UNSET
    error: UnsetType | None = UNSET  # an episode with an error is read as a dict
    duration: _Number | UnsetType | None = UNSET
    tokens: Tokens | UnsetType | None = UNSET
    steps: list[dict[str, Any]] | UnsetType = UNSET
    finished: str | UnsetType = UNSET
    spans: list[dict[str, Any]] | UnsetType = UNSET
    spans_dropped: int | UnsetType = UNSET
    item: str | UnsetType = UNSET
    step_count: int | UnsetType = UNSET
    last_step: str | UnsetType | None = UNSET


class ItemPattern:
    """The pytest item of an episode read from a compact baseline whose item is named after
    its replicate (``test_a[refund-r017]``), shared by the episodes of its condition and
    written out when it is read: a million such names need not all be in memory."""

    __slots__ = ("after", "before", "width")

    def __init__(self, before: str, width: int, after: str) -> None:
        self.before, self.width, self.after = before, width, after

    def of(self, replicate: int) -> str:
        return f"{self.before}{replicate:0{self.width}d}{self.after}"


def _accessors(kind: type[_Fields]) -> None:
    fields = frozenset(kind.__struct_fields__)

    def getitem(self: _Fields, key: str, _fields: frozenset[str] = fields,
                _unset: Any = UNSET, _get: Any = getattr,
                _pattern: type = ItemPattern) -> Any:
        if key in _fields:
            value = _get(self, key)
            if value is not _unset:
                if type(value) is _pattern:
                    return value.of(self.replicate)  # type: ignore[attr-defined]
                return value
        raise KeyError(key)

    def get(self: _Fields, key: str, default: Any = None, _fields: frozenset[str] = fields,
            _unset: Any = UNSET, _get: Any = getattr, _pattern: type = ItemPattern) -> Any:
        if key in _fields:
            value = _get(self, key)
            if value is not _unset:
                if type(value) is _pattern:
                    return value.of(self.replicate)  # type: ignore[attr-defined]
                return value
        return default

    def contains(self: _Fields, key: object, _fields: frozenset[str] = fields,
                 _unset: Any = UNSET, _get: Any = getattr) -> bool:
        return key in _fields and _get(self, key) is not _unset

    kind.__getitem__ = getitem  # type: ignore[method-assign]
    kind.get = get  # type: ignore[method-assign]
    kind.__contains__ = contains  # type: ignore[method-assign]


for _struct in (ModelUse, Tokens, Episode):
    _accessors(_struct)
for _kind in (_Fields, OneModel):
    Mapping.register(_kind)


def plain(value: Any) -> Any:
    """``value`` with every mapping and list in it made a plain dict and list (what
    ``json.loads`` gives), for equality, JSON and copies that a caller changes."""
    if isinstance(value, dict | _Fields | OneModel):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


class _Condition:
    """What the episodes of one condition share, the hash their seeds start from, and where
    each of its episodes read so far is among the reader's, by replicate."""

    __slots__ = ("condition", "key", "meta", "positions", "prefix", "rollout")

    def __init__(self, salt: str, rollout: str, key: str, condition: dict[str, Any],
                 positions: dict[int, int]) -> None:
        self.rollout, self.key, self.condition = rollout, key, condition
        self.meta: dict[str, Any] | None = None
        self.prefix = hashlib.blake2b(_SEP.join((salt, rollout, key, "")).encode("utf-8"),
                                      digest_size=8)
        self.positions = positions


class LineDecoder:
    """Decodes a run's lines (bytes, without their newline) into :class:`Episode` objects,
    checked as :func:`~pytest_prove.record.check_record` and
    :func:`~pytest_prove.record.check_seed` would check them; None for a line to read the
    slow way.

    It also keeps, for the reader, where each episode it was handed is by condition and
    replicate: :attr:`positions` is that of the episode just decoded, :meth:`positions_of`
    any condition's.
    """

    def __init__(self, salt: str) -> None:
        self.salt = salt
        self._decode = msgspec.json.Decoder(Episode).decode
        self._conditions: dict[tuple[str, str], _Condition] = {}
        self._positions: dict[tuple[str, str], dict[int, int]] = {}
        self._strings: dict[str, str] = {}
        self.positions: dict[int, int] = {}
        self._last = _Condition(salt, "", "", {}, {})  # matches no episode's

    def positions_of(self, rollout: str, key: str) -> dict[int, int]:
        """The positions of the condition ``key`` of ``rollout``, by replicate."""
        found = self._positions.get((rollout, key))
        if found is None:
            found = self._positions[(rollout, key)] = {}
        return found

    def __call__(self, line: bytes) -> Episode | None:
        try:
            record = self._decode(line)
        except (msgspec.DecodeError, ValueError):
            return None
        strings = self._strings
        last = self._last  # a condition's lines mostly follow each other
        shared: _Condition | None = last
        if last.key != record.condition_key or last.rollout != record.rollout:
            shared = self._conditions.get((record.rollout, record.condition_key))
        if shared is None:
            rollout, key = record.rollout, record.condition_key
            if _SEP in rollout or _SEP in key or _SEP in self.salt:
                return None
            rollout = strings.setdefault(rollout, rollout)
            key = strings.setdefault(key, key)
            shared = self._conditions[(rollout, key)] = _Condition(
                self.salt, rollout, key, record.condition, self.positions_of(rollout, key))
        elif record.condition != shared.condition:
            return None  # a condition key with two conditions: the slow way says so
        record.rollout, record.condition_key = shared.rollout, shared.key
        record.condition = shared.condition
        seed = record.seed
        h = shared.prefix.copy()
        h.update(b"%d" % record.replicate)
        if seed >= _SEED_END or int.from_bytes(h.digest(), "big") != seed:
            return None
        outcome = record.outcome
        if outcome is None or outcome is UNSET:
            return None  # no outcome and no error: the slow way names the field
        record.outcome = strings.setdefault(outcome, outcome)
        t, horizon = record.t, record.horizon
        if (t is not None and t is not UNSET and horizon is not None and horizon is not UNSET
                and t > horizon):
            return None
        meta = record.meta
        if meta:
            case = meta.get("case_id")
            if case is not None and type(case) is not str and type(case) is not int:
                return None
            if meta == shared.meta:
                record.meta = shared.meta
            else:
                shared.meta = meta
        tokens = record.tokens
        if tokens is not None and tokens is not UNSET:
            by_model = tokens.by_model
            if by_model is not UNSET and len(by_model) == 1:
                (name, use), = by_model.items()
                if use.input == tokens.input:
                    use.input = tokens.input
                if use.output == tokens.output:
                    use.output = tokens.output
                tokens.by_model = OneModel(strings.setdefault(name, name), use)
        self.positions = shared.positions
        self._last = shared
        return record
