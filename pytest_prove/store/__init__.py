"""Runs on disk: plain JSON files anyone can read without the plugin.

Layout under the store root (``.prove/`` by default)::

    runs/.gitignore                 written with the folder: runs are not for committing
    runs/<run-id>/manifest.json     what the run was (written to a temp file, then renamed)
    runs/<run-id>/episodes.jsonl    one episode a line, appended whole under a file lock
    baselines/<NAME>.baseline       a self-contained baseline: its manifest and digest, then its
                                    episodes in short lines (:mod:`.compact`, format 3; format 2,
                                    without the digest, is still read)
    baselines/<NAME>.jsonl          the same in JSON lines (format 1, still read)

A baseline is checked against its own header and digest when it is read
(:mod:`.integrity`).

Only the controller process writes, holding the run's file lock while it does.
Nothing is created until an episode arrives.
Readers tolerate a truncated last line (a session killed mid-write) and say so, and skip
hidden folders under ``runs/`` (a run being deleted: :mod:`.pruning`).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import secrets
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, cast, final

from ..record import (
    RUN_FIX,
    RUN_MANIFEST_FIX,
    StoreError,
    baseline_fix,
    check_header,
    check_manifest,
    check_record,
    check_seed,
    episode_name,
    identity,
    nested_tokens,
    utc_now,
)
from .compact import COMPACT_FORMAT, compact_body, header_line, read_compact
from .episodes import LineDecoder, is_utf8
from .integrity import DIGEST_KEY, body_digest, check_digest, check_structure
from .pruning import NO_MANIFEST, Pruning, being_written, prune_runs, run_manifest
from .writer import RunWriter, atomic_write, dump_line

__all__ = [
    "BASELINE_FORMAT",
    "RUN_FORMAT",
    "Run",
    "RunWriter",
    "Store",
    "StoreError",
    "StoreWarning",
    "check_name",
    "check_run_name",
    "episode_key",
    "read_baseline",
    "utc_now",
]

#: The format versions this code writes and reads; a newer file is refused with the fix.
RUN_FORMAT: Final = 2
BASELINE_FORMAT: Final = COMPACT_FORMAT
#: The first baseline format whose header holds a digest of the file (:mod:`.integrity`).
_DIGESTED: Final = 3
#: A baseline's file: compact (formats 2 and 3), or JSON lines (format 1, read only).
BASELINE_SUFFIX: Final = ".baseline"
LEGACY_SUFFIX: Final = ".jsonl"

_NEWLINE: Final = b"\n"
#: Why a line of JSON nested thousands of levels deep is refused (Python's parsers recurse).
_TOO_DEEP: Final = "nested too deeply: arrays or objects thousands of levels deep"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


class StoreWarning(UserWarning):
    """Something was read with a loss the user should know of (a truncated last line)."""


def check_name(name: str, what: str = "run name") -> str:
    """A run or baseline name that cannot escape the store, or an error that says why."""
    if not isinstance(name, str) or not name:
        raise StoreError(f"the {what} is empty; use letters, digits, '.', '_', '-' or '+'")
    if "/" in name or "\\" in name or os.sep in name:
        raise StoreError(f"the {what} {name!r} contains a path separator; names are plain words")
    if ".." in name:
        raise StoreError(f"the {what} {name!r} contains '..'; names are plain words")
    if not _NAME.match(name):
        raise StoreError(
            f"the {what} {name!r} is not allowed: start with a letter or digit and use only "
            "letters, digits, '.', '_', '-' or '+' (at most 128 characters)"
        )
    return name


#: The shape of a run id, ``20261204T192520Z-d19c``: kept for the ids the store gives.
_RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]+$")


def check_run_name(name: str) -> str:
    """A name for a new run (--prove-name, merge --name): a plain word that is neither
    ``latest`` nor shaped like a run id, since either would shadow another run wherever
    runs are named (``latest`` names the newest run; a run id, the run it was given to)."""
    check_name(name)
    if name == "latest":
        raise StoreError("the run name 'latest' is kept for the newest run, so a run called "
                         "so could not be named; choose another name, e.g. 'latest-main'")
    if _RUN_ID.match(name):
        raise StoreError(f"the run name {name!r} has the shape of a run id "
                         "(YYYYMMDDTHHMMSSZ-hex), which the store gives each run; a run named "
                         "so would shadow the run with that id. Choose a plain name, e.g. "
                         f"'rerun-{name}'")
    return name


#: The identity of an episode within a run: (rollout, condition key, replicate).
episode_key = identity


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


def _episodes(path: Path, salt: str, fix: str, *, skip_first: bool = False,
              unique: bool = False, data: bytes | None = None,
              manifest: Mapping[str, Any] | None = None
              ) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The checked episodes of a JSON-lines file, one per identity, and notes.

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
            if not gc.get_freeze_count():
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
    """The episodes of a JSON-lines file, read by :class:`~.episodes.LineDecoder`: by
    msgspec into :class:`~.episodes.Episode` objects (checked as they are decoded), or,
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


@final
@dataclass(frozen=True, slots=True)
class Run:
    """A stored run or baseline, read whole: its manifest and its episodes."""

    run_id: str
    name: str
    manifest: dict[str, Any]
    episodes: tuple[Mapping[str, Any], ...]
    path: Path
    notes: tuple[str, ...] = ()

    @property
    def salt(self) -> str:
        return str(self.manifest.get("salt", ""))

    @property
    def status(self) -> str:
        return str(self.manifest.get("status", "incomplete"))

    @property
    def started(self) -> str:
        return str(self.manifest.get("started", ""))

    @property
    def is_baseline(self) -> bool:
        return self.path.suffix in (BASELINE_SUFFIX, LEGACY_SUFFIX)


@final
@dataclass(slots=True)
class Store:
    """The folder that holds runs and baselines."""

    root: Path
    _cache: dict[str, Run] = field(default_factory=dict, repr=False)

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    @property
    def baselines_dir(self) -> Path:
        return self.root / "baselines"

    # ---- runs

    def new_run(self, *, name: str | None, salt: str, manifest: Mapping[str, Any]) -> RunWriter:
        """A writer for a new run; its folder appears only when the first episode does."""
        started = datetime.now(UTC)
        run_id = f"{started:%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"
        if name is not None:
            check_run_name(name)
        body = {
            "format": RUN_FORMAT,
            "run_id": run_id,
            "name": name or run_id,
            "salt": salt,
            "started": utc_now(),
            "ended": None,
            "status": "incomplete",
            **manifest,
        }
        return RunWriter(self.runs_dir / run_id, body)

    def reopen(self, run: Run) -> RunWriter:
        """A writer that appends to an existing run (``--prove-resume``)."""
        manifest = dict(run.manifest)
        # Written when the first episode is: until then the run on disk is as it was.
        manifest.update(status="incomplete", ended=None)
        manifest["resumed"] = [*(manifest.get("resumed") or []), utc_now()]
        return RunWriter(run.path, manifest, existing=True)

    def _scan(self) -> tuple[list[tuple[Path, dict[str, Any]]], list[tuple[Path, str]]]:
        """Every folder under ``runs/``: the runs (folder and manifest), and the folders
        whose manifest cannot be read, each with why (one damaged folder never hides the
        others, nor stops a command that lists them)."""
        runs: list[tuple[Path, dict[str, Any]]] = []
        damaged: list[tuple[Path, str]] = []
        if not self.runs_dir.is_dir():
            return runs, damaged
        for directory in self.runs_dir.iterdir():
            if directory.name.startswith(".") or not directory.is_dir():
                continue  # .gitignore, or a run being deleted (see pruning.remove_run)
            found = run_manifest(directory)
            if isinstance(found, dict):
                runs.append((directory, found))
            elif not (found == NO_MANIFEST and being_written(directory)):
                damaged.append((directory, found))  # not a session making its folder now
        return runs, damaged

    def runs(self) -> list[tuple[Path, dict[str, Any]]]:
        """Every run's folder and manifest, oldest first."""
        return sorted(self._scan()[0], key=lambda item: str(item[1].get("started", "")))

    def damaged(self) -> list[tuple[Path, str]]:
        """The folders under ``runs/`` that hold no readable run's manifest, and why, by
        name (a run id starts with its time)."""
        return sorted(self._scan()[1])

    def resolve(self, name: str) -> Path:
        """The folder of the run called ``name`` (a name, a run id, or ``latest``)."""
        runs = self.runs()
        if name == "latest":
            if not runs:
                raise StoreError(
                    f"there is no run in {self.root} yet, so 'latest' names nothing; run a "
                    "sweep first"
                )
            return runs[-1][0]
        check_name(name)
        for directory, manifest in reversed(runs):
            if manifest.get("name") == name or manifest.get("run_id") == name:
                return Path(directory)
        for directory, why in self.damaged():
            if directory.name == name:
                raise StoreError(
                    f"{directory}: the run's folder is damaged ({why}); "
                    f"{RUN_MANIFEST_FIX} (pytest-prove prune deletes damaged folders)")
        known = sorted({str(m.get("name")) for _, m in runs})
        listed = ", ".join(known[-12:]) if known else "none yet"
        raise StoreError(
            f"no run named {name!r} in {self.root}; runs: {listed} (or 'latest')"
        )

    def open(self, name: str) -> Run:
        """The run or baseline ``name`` names, as every front door reads one: a run name, a
        run id, ``latest``, ``baseline:NAME``, or a bare NAME found only among the
        baselines."""
        if name.startswith("baseline:"):
            return self.load_baseline(name.removeprefix("baseline:"))
        try:
            directory = self.resolve(name)
        except StoreError as exc:
            if name != "latest" and name in self.baselines():
                return self.load_baseline(name)
            known = ", ".join(f"baseline:{b}" for b in self.baselines()) or "none"
            raise StoreError(f"{exc}; baselines: {known}") from None
        return self.read(directory)

    def load(self, name: str) -> Run:
        """Read the run called ``name`` whole."""
        return self.read(self.resolve(name))

    def read(self, directory: Path) -> Run:
        """Read the run in ``directory`` whole (a folder under ``runs/``)."""
        path = directory / "manifest.json"
        if not path.exists():
            raise StoreError(f"{path}: the run's manifest is missing; {RUN_MANIFEST_FIX}")
        found = _json_of(path, path.read_bytes, lambda exc: (
            f"{path}: corrupt JSON ({exc}); the file was edited or damaged: "
            f"{RUN_MANIFEST_FIX}"))
        manifest = check_manifest(found, str(path), RUN_MANIFEST_FIX, run=True)
        _check_format(manifest.get("format", 1), RUN_FORMAT, path)
        episodes, notes = _episodes(directory / "episodes.jsonl", manifest["salt"], RUN_FIX,
                                    manifest=manifest)
        for note in notes:
            warnings.warn(StoreWarning(note), stacklevel=2)
        return Run(
            run_id=manifest["run_id"],
            name=str(manifest.get("name", manifest["run_id"])),
            manifest=manifest,
            episodes=tuple(episodes),
            path=directory,
            notes=tuple(notes),
        )

    # ---- deleting runs

    def prune(self, *, keep: int, named: bool = False, dry_run: bool = False) -> Pruning:
        """Delete every run but the newest ``keep``, named runs (unless ``named``) and runs
        being written, and every damaged folder (:meth:`damaged`: nothing can read it);
        with ``dry_run``, only say which would go. Baselines are never touched."""
        runs, damaged = self._scan()
        return prune_runs(self.root, self.runs_dir, runs, keep=keep, named=named,
                          dry_run=dry_run, baselines=self.baselines(), damaged=damaged)

    # ---- baselines

    def baseline_path(self, name: str) -> Path:
        """Where baseline ``name`` is written (in the compact format)."""
        return self.baselines_dir / f"{check_name(name, 'baseline name')}{BASELINE_SUFFIX}"

    def baseline_file(self, name: str) -> Path | None:
        """The file that holds baseline ``name``: a compact one, else one in JSON lines
        (as saved before format 2), else None."""
        path = self.baseline_path(name)
        legacy = path.with_suffix(LEGACY_SUFFIX)
        if path.is_file():
            if legacy.is_file():
                raise StoreError(
                    f"baseline {name!r} is in two files, {path} and {legacy}; delete the one "
                    "that is out of date (saving the baseline again writes one and deletes "
                    "the other)")
            return path
        return legacy if legacy.is_file() else None

    def baselines(self) -> list[str]:
        if not self.baselines_dir.is_dir():
            return []
        return sorted({p.stem for suffix in (BASELINE_SUFFIX, LEGACY_SUFFIX)
                       for p in self.baselines_dir.glob(f"*{suffix}")})

    def load_baseline(self, name: str) -> Run:
        """Read a committed baseline file whole, checked against its own header (and its
        digest, from format 3 on): :func:`read_baseline`."""
        path = self.baseline_file(name)
        if path is None:
            known = ", ".join(self.baselines()) or "none yet"
            raise StoreError(
                f"no baseline named {name!r} in {self.baselines_dir}; baselines: {known}. "
                f"Make one with --prove-save-baseline {name}"
            )
        return read_baseline(path, name)

    def write_baseline(self, name: str, run: Run, *, compact: bool = True) -> Path:
        """Write ``run`` as the baseline ``name``, replacing any old one in one step: in
        the compact format (and then a JSON-lines file of the same name is deleted), or,
        with ``compact=False``, in JSON lines, every field kept (format 1)."""
        path = self.baseline_path(name)
        legacy = path.with_suffix(LEGACY_SUFFIX)
        manifest = dict(run.manifest)
        manifest["baseline_name"] = name
        manifest["saved"] = utc_now()
        if compact:
            body = compact_body(str(manifest["salt"]), run.episodes)
            # The digest of the manifest as it will be read back (JSON's types, escapes).
            written = json.loads(header_line(manifest))
            header = {"pytest_prove_baseline": BASELINE_FORMAT,
                      DIGEST_KEY: body_digest(written, body.encode("utf-8")),
                      "manifest": manifest}
            atomic_write(path, header_line(header) + "\n" + body)
            legacy.unlink(missing_ok=True)
            return path
        header = {"pytest_prove_baseline": 1, "manifest": manifest}
        ordered = sorted(run.episodes, key=episode_key)
        text = dump_line(header) + "\n" + "".join(dump_line(r) + "\n" for r in ordered)
        atomic_write(legacy, text)
        path.unlink(missing_ok=True)
        return legacy


def read_baseline(path: Path, name: str | None = None) -> Run:
    """The baseline in the file at ``path`` (``name``: what it is called, by default its
    file's stem), read whole and checked: every line (by file and line), then its body
    against its header (:func:`.integrity.check_structure`: complete, every planned
    condition and replicate, the counts), then its digest (format 3 on).  Anything else is
    a :class:`StoreError` naming the file and the fix; never a thinner baseline."""
    name = path.stem if name is None else name
    fix = baseline_fix(name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    header, found, manifest = _baseline_manifest(path, data, fix)
    try:
        episodes, notes = _episodes(path, manifest["salt"], fix, skip_first=found == 1,
                                    unique=True, data=data, manifest=manifest)
    except RecursionError:
        # Every line's own reader names a line nested too deeply; this is the last guard.
        raise StoreError(f"{path}: nested too deeply to read (JSON arrays or objects "
                         f"thousands of levels deep); the file was edited or damaged: "
                         f"{fix}") from None
    try:
        check_structure(path, name, manifest, episodes)
    except StoreError as exc:
        # A baseline is written whole, in one step: a cut tail lost episodes.
        if notes:
            raise type(exc)(f"{exc} ({'; '.join(notes)})") from None
        raise
    if found >= _DIGESTED:
        end = data.find(_NEWLINE)
        check_digest(path, name, header, manifest, data[end + 1:] if end >= 0 else b"")
    for note in notes:
        warnings.warn(StoreWarning(note), stacklevel=2)
    return Run(
        run_id=str(manifest.get("run_id", name)),
        name=name,
        manifest=manifest,
        episodes=tuple(episodes),
        path=path,
        notes=tuple(notes),
    )


def _json_of(path: Path, read: Callable[[], bytes], corrupt: Callable[[Exception], str]) -> Any:
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


def _baseline_manifest(path: Path, data: bytes, fix: str
                       ) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """The header, the format and the manifest in a baseline's first line, checked, or an
    error naming line 1."""
    where = f"{path}:1"
    end = data.find(b"\n")  # not data.split(b"\n", 1), which copies the rest of the file
    header = _json_of(path, lambda: data if end < 0 else data[:end], lambda exc: (
        f"{where}: the first line must be the baseline's header, and it is not JSON "
        f"({exc}); the file was edited or damaged: {fix}"))
    check_header(header, where, fix)
    found = header["pytest_prove_baseline"]
    _check_format(found, BASELINE_FORMAT, path, fix)
    return header, found, check_manifest(header["manifest"], where, fix, prefix="manifest.")


def _check_format(found: object, supported: int, path: Path, fix: str = RUN_MANIFEST_FIX
                  ) -> None:
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
