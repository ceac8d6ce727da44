"""Reading the store's files: a file's JSON, its format number, and its episodes, a line at
a time, whichever file holds them (a run's ``episodes.jsonl``, a baseline in JSON lines, a
compact baseline: :mod:`.compact_reader`).

A JSON-lines file is read a chunk of whole lines at a time, each line by
:class:`~.decoding.LineDecoder` or, a line it does not take, by ``json.loads`` and
:func:`~pytest_prove.record.check_record`, which names what is wrong.  A truncated last line
(a session killed mid-write) is skipped and said in a note (a :class:`StoreWarning` where
the run is read).
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, cast

from ..record import (
    RUN_MANIFEST_FIX,
    StoreError,
    check_record,
    check_seed,
    episode_name,
    identity,
    nested_tokens,
)
from .compact_reader import read_compact
from .decoding import LineDecoder, is_utf8

__all__ = ["StoreWarning", "check_format", "json_of", "read_episodes"]

_NEWLINE: Final = b"\n"
#: Why a line of JSON nested thousands of levels deep is refused (Python's parsers recurse).
_TOO_DEEP: Final = "nested too deeply: arrays or objects thousands of levels deep"


class StoreWarning(UserWarning):
    """Something was read with a loss the user should know of (a truncated last line)."""


#: How much of a run's file is read at a time: a run of a million episodes is never in
#: memory whole as bytes, as text and as lines at once beside its records.
_CHUNK: Final = 1 << 22


def _bodies(path: Path, data: bytes | None, rest: list[bytes], *, skip_first: bool = False
            ) -> Iterator[tuple[int, bytes | bytearray, int, int, bool]]:
    """The whole lines of ``data`` or, when it is None, of the file at ``path`` (none when it
    does not exist), about :data:`_CHUNK` bytes at a time: the number of lines skipped
    (with ``skip_first``, the first line), a buffer, where its lines start and end (each
    with its newline) and whether they are all UTF-8 (most often ASCII, a quick check:
    msgspec checks only the text it decodes, not what it leaves raw).  What follows the
    last newline goes in ``rest``.

    A file is read into one buffer, used again for each chunk: fresh memory for each chunk
    cost a page fault every 4 KB, a tenth of the read.  So the lines given are good until
    the next are asked for, and the reader keeps no view of them.
    """
    if data is not None:
        ascii_only = data.isascii()
        view = memoryview(data)
        start = skipped = 0
        if skip_first:
            start = data.find(_NEWLINE) + 1
            if not start:  # not even the first line is whole
                rest.append(data)
                return
            skipped = 1
        while start < len(data):
            end = (data.rfind(_NEWLINE, start, start + _CHUNK) + 1
                   or data.find(_NEWLINE, start + _CHUNK) + 1)
            if not end:
                break
            yield skipped, data, start, end, ascii_only or is_utf8(view[start:end])
            skipped, start = 0, end
        rest.append(data[start:])
        return
    try:
        fh = path.open("rb", buffering=0)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    with fh:
        buffer = bytearray(_CHUNK)
        held = 0  # the bytes of a line that goes on past the last chunk
        while True:
            if held == len(buffer):  # a line longer than the buffer: a new one, twice as long
                buffer = buffer + bytes(len(buffer))
            view = memoryview(buffer)
            try:
                got = fh.readinto(view[held:])
            except OSError as exc:
                raise StoreError(
                    f"{path}: cannot read the file ({exc.strerror or exc})") from None
            if not got:
                break
            end = held + got
            cut = buffer.rfind(_NEWLINE, 0, end) + 1
            if cut:
                # Past end, the buffer holds an earlier chunk's bytes: is_utf8 decides.
                yield 0, buffer, 0, cut, buffer.isascii() or is_utf8(view[:cut])
                buffer[:end - cut] = buffer[cut:end]
            view.release()
            held = end - cut
        rest.append(bytes(buffer[:held]))


def _slow_line(line: bytes, where: str, salt: str, fix: str) -> dict[str, Any] | None:
    """A line the fast decoder did not take, read by json.loads and checked field by field:
    its record, None for a blank line, or the error that names what is wrong."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoreError(
            f"{where}: corrupt line ({exc}); the file was edited or damaged: {fix}") from None
    if not text.strip():
        return None
    try:
        value = json.loads(text)
        if type(value) is dict and type(tokens := value.get("tokens")) is dict:
            value["tokens"] = nested_tokens(tokens, where, fix)
        record = check_record(value, where, fix)
    except json.JSONDecodeError as exc:
        raise StoreError(
            f"{where}: corrupt line ({exc}); the file was edited or damaged: {fix}") from None
    except RecursionError:
        raise StoreError(
            f"{where}: corrupt line ({_TOO_DEEP}); the file was edited or damaged: {fix}"
        ) from None
    check_seed(record, salt, where, fix)
    return cast(dict[str, Any], record)


#: How many episodes a condition a run's plan must hold for its reader to decode the
#: condition keys as the plan's strings: building that decoder takes about 4 µs a key, and
#: saves about a quarter of a µs an episode.
_KNOWN_WORTH: Final = 32


def _known(manifest: Mapping[str, Any]) -> tuple[list[str], list[str], list[str]] | None:
    """The rollouts and condition keys a manifest's plan names, and the outcomes their
    declarations name (what a run's lines should all be among), or None when it names none
    or not as this version writes them."""
    plan, rollouts = manifest.get("plan"), manifest.get("rollouts")
    if not plan or type(plan) is not dict or type(rollouts) is not dict:
        return None
    keys: list[str] = []
    outcomes: list[str] = []
    planned = 0
    for name, entry in plan.items():
        conditions = entry.get("conditions") if type(entry) is dict else None
        replicates = entry.get("replicates") if type(entry) is dict else None
        declaration = (rollouts.get(name) or {}).get("declaration")
        declared = declaration.get("outcomes") if type(declaration) is dict else None
        if (type(conditions) is not list or type(declared) is not list
                or type(replicates) is not int):
            return None
        keys.extend(conditions)
        outcomes.extend(declared)
        planned += len(conditions) * replicates
    if planned < _KNOWN_WORTH * len(keys):
        return None  # too few episodes a condition to pay for the decoder's table
    if not all(type(v) is str and v for v in (*plan, *keys, *outcomes)):
        return None
    return list(plan), keys, outcomes


def read_episodes(path: Path, salt: str, fix: str, *, skip_first: bool = False,
                  unique: bool = False, data: bytes | None = None,
                  manifest: Mapping[str, Any] | None = None
                  ) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The checked episodes of a JSON-lines file (or, given its bytes in ``data`` without
    ``skip_first``, of a compact baseline), one per identity, and notes.

    A run may hold an identity twice: ``--prove-resume`` (or a plugin that reruns a
    failed item) appends a new ending for a replicate that errored, and the last
    line wins.  A baseline is written sorted and deduplicated, so there a repeat
    means the file was edited (``unique``).
    """
    with _collector_paused():
        if data is not None and not skip_first:
            return read_compact(path, data, salt, fix)
        return _checked(path, salt, fix, skip_first=skip_first, unique=unique, data=data,
                        known=None if manifest is None else _known(manifest))


#: Whether the caller froze the objects alive itself (the plugin does at a sweep's end, see
#: plugin/heap.py): a read then leaves the frozen objects alone without asking
#: ``gc.get_freeze_count()``, which walks every frozen object (the whole heap of a test
#: process running sessions in-process: 34 ms a read).
_heap_frozen_by_caller = False


def heap_frozen(frozen: bool) -> None:
    """Say that the caller froze the objects alive (True) or unfroze them (False)."""
    global _heap_frozen_by_caller  # one switch for the process's reads
    _heap_frozen_by_caller = frozen


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a file of episodes is read.

    Parsed JSON holds no reference cycles, yet each of the many containers it makes
    counts towards the next collection, and each collection walks every record read
    so far: with it running, a 100,000-episode baseline took about a quarter longer.
    Afterwards they go to the oldest generation, unwalked.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not _heap_frozen_by_caller and not gc.get_freeze_count():
                # The records just read are long-lived: move them to the oldest generation
                # now, or the first collection after this walks every one of them (a
                # fifth of a compact baseline's read).  Skipped when the program froze
                # objects of its own, which unfreeze would let go.
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _checked(path: Path, salt: str, fix: str, *, skip_first: bool, unique: bool,
             data: bytes | None = None,
             known: tuple[list[str], list[str], list[str]] | None = None
             ) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The episodes of a JSON-lines file, read by :class:`~.decoding.LineDecoder`: by
    msgspec into :class:`~.episodes.StoredEpisode` objects (checked as they are decoded), or,
    a line it does not take, by json.loads into a dict checked by :func:`check_record`,
    which names what is wrong."""
    notes: list[str] = []
    prefix = f"{path}:"

    def slow(line: bytes, number: int) -> Mapping[str, Any] | None:
        return _slow_line(line, f"{prefix}{number}", salt, fix)

    def repeated(record: Mapping[str, Any], number: int, earlier: int) -> None:
        raise StoreError(
            f"{prefix}{number}: {episode_name(*identity(record))} is also on line "
            f"{earlier}; a baseline holds each episode once, so the file was edited or "
            f"damaged: {fix}"
        )

    decoder = LineDecoder(salt, slow, unique=unique, repeated=repeated, known=known)
    number = 0
    rest: list[bytes] = []
    for skipped, buffer, start, end, text in _bodies(path, data, rest, skip_first=skip_first):
        number += skipped
        number += decoder.read(buffer, start, end, number, text=text)
    tail = rest[0] if rest else b""
    if tail.strip():
        notes.append(
            f"{path}: line {number + 1} is truncated (a session stopped while writing it); "
            "it was skipped and every whole line was read"
        )
    episodes = decoder.episodes
    found = [r for r in episodes if r is not None] if decoder.replaced else episodes
    return cast(list[Mapping[str, Any]], found), notes


def json_of(path: Path, read: Callable[[], bytes], corrupt: Callable[[Exception], str]) -> Any:
    """The JSON that ``read()`` gives, or a StoreError: ``corrupt(exc)`` when it is not JSON."""
    try:
        data = read()
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(corrupt(exc)) from None
    except RecursionError:
        raise StoreError(corrupt(ValueError(_TOO_DEEP))) from None


def check_format(found: object, supported: int, path: Path, fix: str = RUN_MANIFEST_FIX
                 ) -> None:
    """Refuse a file whose format number ``found`` is not one from 1 to ``supported``."""
    if isinstance(found, bool) or not isinstance(found, int) or found < 1:
        raise StoreError(
            f"{path}: the format number is {found!r}, expected an int from 1; the file was "
            f"edited or damaged: {fix}"
        )
    if found > supported:
        raise StoreError(
            f"{path}: written in format {found!r} by a newer pytest-prove; this one reads "
            f"format {supported} and older. Upgrade pytest-prove (pip install -U pytest-prove)"
        )
