"""Writing a run: whole lines appended under the run's lock, manifests written atomically.

:class:`RunWriter` is the one writer of a run (on the controller only): it creates the run's
folder exclusively, holds the run's file lock for as long as it writes, never writes through
a symbolic link, appends each batch of episodes as whole lines in one write (cut back to the
last whole line when the write fails) and writes the manifest to a temporary file that it
then renames.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, final

import msgspec
from filelock import FileLock, Timeout

from ..record import StoreError
from .episodes import StoredTokens

__all__ = ["RUNS_GITIGNORE", "RunWriter", "atomic_write", "dump_line", "lean_record"]


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file private; give it the mode any new file would get.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def json_default(value: object) -> dict[str, Any]:
    """An episode read from the store (a read-only mapping, :mod:`.episodes`) as JSON
    encodes it: the dict it was read from."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


#: One encoder for every line (json.dumps with options would build one per call).
_LINE_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                                        allow_nan=False, default=json_default)


_ASCII_ENCODER: Final = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"),
                                         allow_nan=False, default=json_default)


def dump_line(record: Mapping[str, Any]) -> str:
    return _LINE_ENCODER.encode(record)


#: A session's new episodes (plain dicts, as the runner makes them): msgspec's encoder writes
#: the same JSON (UTF-8, no spaces, the keys in their order) in a tenth of the json module's
#: time, which ran for every episode of a sweep (a float may read otherwise, ``1e16`` for
#: ``1e+16``: the same number).  Episodes read from a store (msgspec Structs, which it would
#: write field by field) and what it cannot write (a lone surrogate) go through the json
#: module, as before.
_EPISODE_ENCODER: Final = msgspec.json.Encoder()


def _episode_lines(records: list[Mapping[str, Any]], fresh: bool) -> bytes:
    if fresh:
        encode = _EPISODE_ENCODER.encode
        try:
            return b"".join([encode(r) + b"\n" for r in records])
        except (msgspec.EncodeError, TypeError, ValueError, OverflowError):
            pass
    text = "".join(dump_line(r) + "\n" for r in records)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from a rollout's text) cannot be UTF-8: JSON's \\u escapes
        # hold it, and json.loads gives back the same string.
        return "".join(_ASCII_ENCODER.encode(r) + "\n" for r in records).encode("ascii")


def lean_record(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """``record`` as a run of format 2 writes it: the usage of an episode that used one
    model, whose totals are that model's, flat (``{"input": 9, "output": 4, "model": "m",
    "calls": 2}``), which the store reads 1.17 to 1.20 times as fast as ``by_model``'s
    object in an object (``bench/store_read.py``); any other record as it is."""
    tokens = record.get("tokens")
    if not tokens:
        return record
    flat = _flat(tokens)
    if flat is None:
        return record
    lean = dict(record)
    lean["tokens"] = flat
    return lean


def _flat(tokens: object) -> dict[str, Any] | None:
    """Flat usage (see :func:`lean_record`), or None when ``tokens`` are not one model's."""
    if type(tokens) is StoredTokens:
        found = tokens.flat
        if found is not None and found["model"]:
            return found
    if not isinstance(tokens, Mapping) or len(tokens) != 3:
        return None
    tin, tout, by_model = tokens.get("input"), tokens.get("output"), tokens.get("by_model")
    if (type(tin) is not int or type(tout) is not int or not isinstance(by_model, Mapping)
            or len(by_model) != 1):
        return None
    ((name, use),) = by_model.items()
    if (type(name) is not str or not name or not isinstance(use, Mapping)
            or not set(use) <= {"input", "output", "calls"}):
        return None
    uin, uout = use.get("input"), use.get("output")
    if type(uin) is not int or type(uout) is not int or uin != tin or uout != tout:
        return None
    flat = {"input": tin, "output": tout, "model": name}
    if "calls" in use:
        flat["calls"] = use["calls"]
    return flat


#: Written into the runs folder when it is made: runs are many and large, so that no
#: ``git add .`` commits them; baselines, beside it, are the files to commit.
RUNS_GITIGNORE: Final = ("# Written by pytest-prove: runs are not for committing (commit a "
                         "baseline,\n# ../baselines/NAME.baseline, instead). Delete this file to "
                         "commit runs.\n*\n")


def _ignore_in_git(runs: Path) -> None:
    """Write the runs folder's .gitignore; a run goes on without it if it cannot be."""
    with contextlib.suppress(OSError):
        atomic_write(runs / ".gitignore", RUNS_GITIGNORE)


def _refuse_link(path: Path) -> None:
    """pytest-prove writes only files it made: never through a symbolic link."""
    if path.is_symlink():
        raise StoreError(
            f"{path} is a symbolic link; pytest-prove writes only the files it made in a "
            "run's folder, so it does not write through it. Remove the link (and copy the "
            "file there if it is the run's), then run again"
        )


@final
class RunWriter:
    """The one writer of a run: appends episodes and keeps the manifest current.

    A resumed run is locked as soon as its writer is made, so that a second session
    is refused before it runs anything; a new run is locked when its folder is
    made, which is created exclusively (two sessions never share one)."""

    def __init__(self, directory: Path, manifest: dict[str, Any], *,
                 existing: bool = False) -> None:
        self.directory = directory
        self.existing = existing
        self.manifest = manifest
        self._lock: FileLock | None = None
        self._fd: int | None = None
        self._size = 0  # the file's length: where a failed write is cut back to
        self.written = 0
        if existing:
            self._acquire()

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    @property
    def episodes_path(self) -> Path:
        return self.directory / "episodes.jsonl"

    @property
    def created(self) -> bool:
        """Whether the run is on disk (it is once an episode arrived, or when resumed)."""
        return self.existing or self._fd is not None

    def _acquire(self) -> None:
        for path in (self.directory, self.episodes_path,
                     self.directory / "episodes.jsonl.lock", self.directory / "manifest.json"):
            _refuse_link(path)
        # Held for as long as this session writes the run; the operating system releases
        # it when the process dies, even on SIGKILL.
        lock = FileLock(str(self.directory / "episodes.jsonl.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise StoreError(
                f"run {self.manifest.get('name') or self.run_id!r} ({self.directory}) is being "
                "written by another session right now; wait for it to end, then resume it, "
                "or start a new run"
            ) from None
        except OSError as exc:
            raise StoreError(f"{self.directory}: cannot lock the run ({exc.strerror})") from None
        if self.existing and not (self.directory / "manifest.json").is_file():
            # Deleted (pytest-prove prune) since it was read; filelock made the folder again:
            # take it back if it holds nothing but the lock file.
            with contextlib.suppress(OSError):
                lock.release()
            with contextlib.suppress(OSError):
                if all(p.name == "episodes.jsonl.lock" for p in self.directory.iterdir()):
                    (self.directory / "episodes.jsonl.lock").unlink()
                    self.directory.rmdir()
            raise StoreError(
                f"run {self.manifest.get('name') or self.run_id!r} ({self.directory}) was "
                "deleted after it was read (by pytest-prove prune?); start a new run")
        self._lock = lock

    def _make_folder(self) -> None:
        """Create the run's folder, a new one: a run id already taken gets a suffix."""
        runs = self.directory.parent
        if not runs.is_dir():
            try:
                runs.mkdir(parents=True)
            except FileExistsError:
                pass  # another session made it first, and wrote its .gitignore
            else:
                _ignore_in_git(runs)
        while True:
            try:
                self.directory.mkdir()
                return
            except FileExistsError:
                old = self.run_id
                new = f"{old}-{secrets.token_hex(2)}"
                if self.manifest.get("name") == old:
                    self.manifest["name"] = new
                self.manifest["run_id"] = new
                self.directory = self.directory.parent / new

    def _open(self) -> None:
        new = not self.existing
        made = False
        try:
            if new:
                self._make_folder()
                made = True
                self._acquire()
            # A killed session may have left a partial last line: cut it off before
            # appending, so that it never becomes a corrupt line in the middle.
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
            self._fd = os.open(self.episodes_path, flags, 0o666)
            size = os.fstat(self._fd).st_size
            if size and os.pread(self._fd, 1, size - 1) != b"\n":
                size = self._last_newline(self._fd, size)
                os.ftruncate(self._fd, size)
            self._size = size
            self.existing = True
            self.write_manifest()
        except OSError as exc:
            if new:
                # Nothing of this run is on disk yet that anyone could resume: take back
                # what was made, so that no folder without a manifest is left behind.
                self._unmake(made)
                fix = ("make the store writable or free some space (or give another "
                       "--prove-store=DIR), then run again")
            else:
                fix = (f"free some disk space or make the store writable, then finish the "
                       f"run with --prove-resume={self.manifest.get('name') or self.run_id}")
            raise StoreError(
                f"{self.directory}: cannot write the run ({exc.strerror or exc}); {fix}"
            ) from None

    def _unmake(self, made: bool) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        self.existing = False
        self.release()
        if made:
            for name in ("episodes.jsonl", "episodes.jsonl.lock", "manifest.json"):
                with contextlib.suppress(OSError):
                    (self.directory / name).unlink()
            with contextlib.suppress(OSError):
                self.directory.rmdir()

    @staticmethod
    def _last_newline(fd: int, size: int) -> int:
        """The length of the file's whole lines, read backwards in chunks."""
        end = size
        while end > 0:
            start = max(0, end - 65536)
            chunk = os.pread(fd, end - start, start)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                return start + cut + 1
            end = start
        return 0

    def append(self, records: Iterable[Mapping[str, Any]], *, fresh: bool = False) -> None:
        """Append whole lines in one write; a failed write is cut back to whole lines.
        ``fresh``: the records are a session's new episodes, plain dicts of JSON values."""
        records = list(records)
        if not records:
            return
        if self.manifest.get("format", 1) >= 2:
            records = [lean_record(r) for r in records]
        data = _episode_lines(records, fresh)
        if self._fd is None:
            self._open()
        assert self._fd is not None
        start = self._size  # only this writer appends, under the run's lock
        try:
            view = memoryview(data)
            while view:
                done = os.write(self._fd, view)
                view = view[done:]
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise StoreError(
                f"{self.episodes_path}: cannot write episodes ({exc.strerror or exc}); "
                "free some disk space, then finish the run with --prove-resume="
                f"{self.manifest.get('name') or self.run_id}"
            ) from None
        self._size = start + len(data)
        self.written += len(records)

    def write_manifest(self, **updates: Any) -> None:
        """Merge ``updates`` into the manifest and write it atomically (only once created)."""
        self.manifest.update(updates)
        if not self.created:
            return
        atomic_write(self.directory / "manifest.json", json.dumps(self.manifest, indent=2) + "\n")

    def close(self, *, release: bool = True) -> None:
        """Flush the episodes to disk and, unless ``release`` is false, release the run (a
        session keeps it until it ends: it reads the run back after closing it)."""
        try:
            if self._fd is not None:
                fd, self._fd = self._fd, None
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        finally:
            if release:
                self.release()

    def release(self) -> None:
        """Let another session write the run (idempotent)."""
        if self._lock is not None:
            lock, self._lock = self._lock, None
            with contextlib.suppress(OSError):
                lock.release()
