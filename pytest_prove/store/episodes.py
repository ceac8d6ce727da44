"""Episodes as the store hands them out: read-only mappings that take a fraction of a dict's
memory, decoded from a run's lines by msgspec in one typed pass (:mod:`.decoding`) or from a
compact baseline's (:mod:`.compact_reader`).

A run of a million episodes read into plain dicts took about 2 KB an episode (a dict of
fourteen keys, three more for the tokens, a copy of the condition and of the meta, and a
string for every value); compared against a baseline of the same size, the process passed
2.5 GB.  A :class:`StoredEpisode` (a stored :class:`~pytest_prove.record.EpisodeRecord`,
not the :class:`prove.Episode` a rollout returns) is a msgspec ``Struct`` (slots, not
tracked by the garbage collector) that reads like the dict it was decoded from:
``record["outcome"]``, ``record.get("error")``, ``"steps" in record``, ``dict(record)``,
iteration and equality with a dict all behave as they would for the dict, and a field absent
from the line is absent from the mapping.  Its condition and meta are shared with the other
episodes of its condition, its rollout, condition key and outcome are shared strings, its
token usage is a :class:`StoredTokens`, and the usage of a single model is kept in a
:class:`OneModel` rather than a dict.  It cannot be changed in place: copy it with
``dict(record)``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TYPE_CHECKING, Annotated, Any, Final, cast

import msgspec
from msgspec import UNSET, Meta, Raw, Struct, UnsetType

__all__ = ["ItemPattern", "ModelUse", "OneModel", "SeedOf", "StoredEpisode", "StoredTokens",
           "plain"]

# The checks of check_record that the decoder makes itself, in C (:mod:`.decoding`).
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

    def keys(self: Mapping[str, Any]) -> KeysView[str]:
        return KeysView(self)

    def items(self: Mapping[str, Any]) -> ItemsView[str, Any]:
        return ItemsView(self)

    def values(self: Mapping[str, Any]) -> ValuesView[Any]:
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


class StoredTokens(_Fields):
    """An episode's token usage: ``{"input": ..., "output": ..., "by_model": {...}}``.

    The usage of an episode that used one model, whose totals are that model's, is kept
    flat, as a run of format 2 writes it: its ``model`` and ``calls`` beside the totals
    (``{"input": 9, "output": 4, "model": "m", "calls": 2}``), with no dict and no second
    object.  It still reads as ``{"input": 9, "output": 4, "by_model": {"m": {"input": 9,
    "output": 4, "calls": 2}}}``: ``model`` and ``calls`` are not among its keys.
    """

    input: _Count
    output: _Count
    by_model: Mapping[str, ModelUse] | UnsetType = UNSET
    model: _Text | UnsetType = UNSET
    calls: _Count | UnsetType = UNSET

    def __iter__(self) -> Iterator[str]:
        yield "input"
        yield "output"
        if self.by_model is not UNSET or self.model is not UNSET:
            yield "by_model"

    def __len__(self) -> int:
        return 2 + (self.by_model is not UNSET or self.model is not UNSET)

    def __getitem__(self, key: str) -> Any:
        if key == "by_model":
            found = self.by_model
            if found is UNSET:
                if self.model is UNSET:
                    raise KeyError(key)
                return self.one_model()
            return found
        if key == "input" or key == "output":
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return key == "input" or key == "output" or (
            key == "by_model" and (self.by_model is not UNSET or self.model is not UNSET))

    def one_model(self) -> OneModel:
        """``by_model`` of flat usage: the one model's, made when it is read."""
        return OneModel(cast(str, self.model), ModelUse(self.input, self.output, self.calls))

    @property
    def flat(self) -> dict[str, Any] | None:
        """The usage as a run of format 2 writes it, when it is kept flat (else None)."""
        if self.model is UNSET:
            return None
        found = {"input": self.input, "output": self.output, "model": self.model}
        if self.calls is not UNSET:
            found["calls"] = self.calls
        return found


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

    # A mapping's views, equality and repr, as a _Fields has them.
    keys = _Fields.keys
    items = _Fields.items
    values = _Fields.values
    __eq__ = _Fields.__eq__
    __ne__ = _Fields.__ne__
    __hash__ = None  # type: ignore[assignment]
    __repr__ = _Fields.__repr__


class StoredEpisode(_Fields):
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
    tokens: StoredTokens | UnsetType | None = UNSET
    steps: list[dict[str, Any]] | UnsetType = UNSET
    finished: str | UnsetType = UNSET
    spans: list[dict[str, Any]] | UnsetType = UNSET
    spans_dropped: int | UnsetType = UNSET
    item: str | UnsetType = UNSET
    step_count: int | UnsetType = UNSET
    last_step: str | UnsetType | None = UNSET
    #: The values of the metrics its rollout declares, by name (set only when it has any).
    metrics: dict[str, float] | UnsetType = UNSET
    #: The agent's answer, kept when its rollout asked (or its size, when too large to keep).
    answer: Any | UnsetType = UNSET
    answer_bytes: int | UnsetType = UNSET
    #: Set when its HTTP calls were answered from the cache (--prove-cache=replay).
    replayed: bool | UnsetType = UNSET


class ItemPattern:
    """The pytest item of an episode read from a compact baseline whose item is named after
    its replicate (``test_a[refund-r017]``), shared by the episodes of its condition and
    written out when it is read: a million such names need not all be in memory."""

    __slots__ = ("after", "before", "width")

    def __init__(self, before: str, width: int, after: str) -> None:
        self.before, self.width, self.after = before, width, after

    def of(self, replicate: int) -> str:
        return f"{self.before}{replicate:0{self.width}d}{self.after}"


class SeedOf:
    """The seed of an episode read from a compact baseline, which keeps no seeds (each is
    derived from the salt, the rollout, the condition key and the replicate): shared by the
    episodes of its condition, and derived when it is read, then kept.  A comparison reads
    no seeds, so a baseline's reader need not hash a million of them."""

    __slots__ = ("prefix", "text")

    def __init__(self, text: bytes) -> None:
        self.text = text  # the salt, rollout and key, as the seed's hash takes them
        self.prefix = hashlib.blake2b(text, digest_size=8)  # and hashed

    def __reduce__(self) -> tuple[type[SeedOf], tuple[bytes]]:
        return SeedOf, (self.text,)  # pickled and copied as its text (a hash object is not)

    def of(self, replicate: int) -> int:
        h = self.prefix.copy()
        h.update(b"%d" % replicate)
        return int.from_bytes(h.digest(), "big")


_decode_steps = msgspec.json.Decoder(list[dict[str, Any]]).decode


def _steps(record: _Fields, raw: Raw) -> list[dict[str, Any]]:
    """The steps of ``record`` kept as raw JSON, decoded on first reading and kept."""
    try:
        steps: list[dict[str, Any]] = _decode_steps(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        # A number past msgspec's range (an integer past 64 bits, 1E400): the reader
        # checked the steps are objects, and json.loads reads them as the slow way.
        steps = json.loads(bytes(raw))
    record.steps = steps  # type: ignore[attr-defined]
    return steps


#: The types a field may hold in place of its value, to be made when it is first read.
_STAND_INS: Final = frozenset({ItemPattern, SeedOf, Raw})


def _stood_for(record: _Fields, key: str, value: ItemPattern | SeedOf | Raw) -> Any:
    """What ``value``, kept in field ``key`` of ``record`` in its place, stands for: an
    item's name written out, a seed derived (and kept), or steps decoded (and kept)."""
    if type(value) is Raw:
        return _steps(record, value)
    found = value.of(record.replicate)  # type: ignore[attr-defined]
    if type(value) is SeedOf:
        setattr(record, key, found)
    return found


def _accessors(kind: type[_Fields]) -> None:
    fields = frozenset(kind.__struct_fields__)

    def getitem(self: _Fields, key: str, _fields: frozenset[str] = fields,
                _unset: Any = UNSET, _get: Any = getattr, _kept: Any = _STAND_INS) -> Any:
        if key in _fields:
            value = _get(self, key)
            if value is not _unset:
                return _stood_for(self, key, value) if type(value) in _kept else value
        raise KeyError(key)

    def get(self: _Fields, key: str, default: Any = None, _fields: frozenset[str] = fields,
            _unset: Any = UNSET, _get: Any = getattr, _kept: Any = _STAND_INS) -> Any:
        if key in _fields:
            value = _get(self, key)
            if value is not _unset:
                return _stood_for(self, key, value) if type(value) in _kept else value
        return default

    def contains(self: _Fields, key: object, _fields: frozenset[str] = fields,
                 _unset: Any = UNSET, _get: Any = getattr) -> bool:
        return key in _fields and _get(self, key) is not _unset

    kind.__getitem__ = getitem  # type: ignore[method-assign]
    kind.get = get  # type: ignore[method-assign]
    kind.__contains__ = contains  # type: ignore[method-assign]


for _struct in (ModelUse, StoredEpisode):
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
