"""Deleting old runs (``pytest-prove prune``): which go, which stay and why, and deleting one
so that no crash leaves half a run that reads as a run.

The policy: the newest ``keep`` runs stay; of the older ones, a named run (``--prove-name``)
stays unless ``named`` is asked, and a run whose session still holds its lock (it is being
written) always stays.  A damaged folder (no manifest a run can be read from: see
:func:`run_manifest`) goes, unless a session holds its lock.  Baselines are files of their
own under ``baselines/``, meant to be committed: nothing here touches them.

A run is deleted under its own lock, so that no session can resume it meanwhile: its folder is
first renamed to a hidden name inside ``runs/`` (one step, on the same file system), which no
reader takes for a run, and only then removed. A folder a crash left under that name is
removed by the next prune.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal, final

from filelock import FileLock, Timeout

from ..record import StoreError

__all__ = ["NO_MANIFEST", "TRASH_PREFIX", "Pruning", "RunBusyError", "StoredRun",
           "being_written", "folder_size", "prune_runs", "remove_run", "run_manifest"]

#: The hidden name a run's folder takes while it is deleted (readers skip hidden folders).
TRASH_PREFIX: Final = ".deleting-"

#: Why a run was kept.
Why = Literal["newest", "named", "being written", "symbolic link"]


class RunBusyError(StoreError):
    """The run's lock is held: a session is writing it right now.

    Every caller here catches it before anything else (the run is then kept, "being
    written"), so it never reaches a user; it is a :class:`StoreError` so that, were it to,
    it would be refused as one."""


@final
@dataclass(frozen=True, slots=True)
class StoredRun:
    """One run as prune sees it: who it is, how big, and what became of it."""

    run_id: str
    name: str
    status: str
    started: str
    path: Path
    size: int  # bytes of its files
    why: Why | None = None  # why it was kept; None for a run deleted
    damaged: str | None = None  # why a damaged folder holds no run it can read

    @property
    def named(self) -> bool:
        return self.name != self.run_id

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "run_id": self.run_id, "status": self.status,
                "started": self.started, "path": str(self.path), "bytes": self.size,
                "named": self.named, **({"kept": self.why} if self.why else {}),
                **({"damaged": self.damaged} if self.damaged else {})}


@final
@dataclass(frozen=True, slots=True)
class Pruning:
    """What a prune did (or, with ``dry_run``, would do)."""

    root: Path
    keep: int
    named: bool
    dry_run: bool
    runs: int  # how many runs it found
    deleted: tuple[StoredRun, ...]
    kept: tuple[StoredRun, ...]
    failed: tuple[tuple[StoredRun, str], ...] = ()
    leftovers: int = 0  # folders of an interrupted earlier prune, removed
    leftover_bytes: int = 0
    baselines: tuple[str, ...] = field(default=())

    @property
    def freed(self) -> int:
        return sum(r.size for r in self.deleted) + self.leftover_bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "store": str(self.root), "keep": self.keep, "named": self.named,
            "dry_run": self.dry_run, "runs": self.runs,
            "deleted": [r.to_json() for r in self.deleted],
            "kept": [r.to_json() for r in self.kept],
            "failed": [{**r.to_json(), "reason": reason} for r, reason in self.failed],
            "bytes_freed": self.freed, "leftovers": self.leftovers,
            "baselines": list(self.baselines),
        }


def folder_size(path: Path) -> int:
    """The bytes of the files under ``path``, links not followed."""
    total = 0
    for top, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_size
    return total


def _linked(directory: Path) -> bool:
    """Whether the run's folder or its lock file is a symbolic link: prune opens neither (an
    older filelock opens a lock file with O_TRUNC, through a link, emptying what it points
    at; a newer one refuses it), and leaves that run alone."""
    return directory.is_symlink() or (directory / "episodes.jsonl.lock").is_symlink()


def _lock(directory: Path) -> FileLock:
    """The run's own lock (the one :class:`~.writer.RunWriter` holds while it writes), taken
    without waiting; :class:`RunBusyError` when a session holds it. Never through a
    symbolic link (``OSError``)."""
    if _linked(directory):
        raise OSError(f"{directory}: the run's folder or lock file is a symbolic link")
    lock = FileLock(str(directory / "episodes.jsonl.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise RunBusyError(str(directory)) from None
    return lock


#: Why a folder under ``runs/`` with no manifest is not a run.
NO_MANIFEST: Final = "it holds no manifest.json"


def run_manifest(directory: Path) -> dict[str, Any] | str:
    """The manifest of the run in ``directory`` (an object with its ``run_id``), or why
    there is none to read: missing, unreadable, not JSON, nested too deeply for Python's
    parser (a RecursionError), or not a run's manifest."""
    path = directory / "manifest.json"
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return NO_MANIFEST
    except OSError as exc:
        return f"its manifest.json cannot be read ({exc.strerror or exc})"
    try:
        manifest = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"its manifest.json is not JSON ({exc})"
    except RecursionError:
        return "its manifest.json is nested too deeply to read (thousands of levels)"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("run_id"), str):
        return "its manifest.json is not a run's manifest (an object with a run_id)"
    return manifest


def being_written(directory: Path) -> bool:
    """Whether a session holds the lock of the run in ``directory``."""
    if not (directory / "episodes.jsonl.lock").exists():
        return False  # a writer makes the lock file before the manifest: no writer here
    try:
        lock = _lock(directory)
    except RunBusyError:
        return True
    except OSError:
        return False
    lock.release()
    return False


def remove_run(runs_dir: Path, directory: Path, run_id: str | None) -> int | None:
    """Delete the run ``run_id`` in ``directory`` (None: a damaged folder, while it is
    still damaged): under its lock, renamed to a hidden name, then removed; returns the
    bytes freed, or None when it was gone already (another prune).

    Raises :class:`RunBusyError` when a session is writing it, ``OSError`` when the folder
    could not be renamed (then nothing changed) or removed (then what is left is hidden and
    the next prune removes it)."""
    if not directory.is_dir() or directory.is_symlink():
        return None
    lock = _lock(directory)  # filelock makes the folder again if it was just deleted
    try:
        if not _holds(directory, run_id):
            with contextlib.suppress(OSError):
                (directory / "episodes.jsonl.lock").unlink()
                directory.rmdir()  # only if it is the empty folder the lock made
            return None
        size = folder_size(directory)
        trash = runs_dir / f"{TRASH_PREFIX}{directory.name}-{secrets.token_hex(4)}"
        os.rename(directory, trash)
        shutil.rmtree(trash)
        return size
    finally:
        with contextlib.suppress(OSError):
            lock.release()


def _holds(directory: Path, run_id: str | None) -> bool:
    """Whether ``directory`` still holds the run ``run_id`` (its manifest says so), or,
    for None, is still damaged (no manifest it can read)."""
    manifest = run_manifest(directory)
    if run_id is None:
        return not isinstance(manifest, dict) and any(
            p.name != "episodes.jsonl.lock" for p in directory.iterdir())
    return isinstance(manifest, dict) and manifest.get("run_id") == run_id


def _prune_damaged(runs_dir: Path, damaged: Iterable[tuple[Path, str]], dry_run: bool
                   ) -> tuple[list[StoredRun], list[StoredRun], list[tuple[StoredRun, str]]]:
    """Delete (unless ``dry_run``) each damaged folder nothing holds: what was deleted,
    kept (a symbolic link, being written) and could not be deleted."""
    deleted: list[StoredRun] = []
    kept: list[StoredRun] = []
    failed: list[tuple[StoredRun, str]] = []
    for directory, why in damaged:
        entry = StoredRun(run_id=directory.name, name=directory.name, status="damaged",
                          started="", path=directory, size=folder_size(directory),
                          damaged=why)
        keeping: Why | None = ("symbolic link" if _linked(directory) else
                               "being written" if being_written(directory) else None)
        if keeping is None and not dry_run:
            try:
                freed = remove_run(runs_dir, directory, None)
            except RunBusyError:
                keeping = "being written"
            except OSError as exc:
                failed.append((entry, exc.strerror or str(exc)))
                continue
            else:
                if freed is None:
                    continue  # mended or deleted meanwhile
                entry = replace(entry, size=freed)
        if keeping is None:
            deleted.append(entry)
        else:
            kept.append(replace(entry, why=keeping))
    return deleted, kept, failed


def _remove_leftovers(runs_dir: Path, dry_run: bool) -> tuple[int, int]:
    """Folders an interrupted prune left (hidden, never read as runs): how many and their
    bytes, removed unless ``dry_run``."""
    count = size = 0
    if not runs_dir.is_dir():
        return 0, 0
    for path in runs_dir.iterdir():
        if not path.name.startswith(TRASH_PREFIX) or path.is_symlink() or not path.is_dir():
            continue
        found = folder_size(path)
        if not dry_run:
            try:
                shutil.rmtree(path)
            except OSError:
                continue
        count, size = count + 1, size + found
    return count, size


def prune_runs(root: Path, runs_dir: Path, runs: Iterable[tuple[Path, Mapping[str, Any]]], *,
               keep: int, named: bool, dry_run: bool,
               baselines: Iterable[str] = (),
               damaged: Iterable[tuple[Path, str]] = ()) -> Pruning:
    """Keep the newest ``keep`` of ``runs`` (folder and manifest), named runs unless
    ``named``, and every run being written; delete the rest, and the ``damaged`` folders
    (folder and why: no run can be read from them), unless ``dry_run``."""
    if keep < 0:
        raise ValueError(f"keep must be 0 or more, got {keep}")
    deleted, kept, failed = _prune_damaged(runs_dir, damaged, dry_run)
    ordered = sorted(runs, key=lambda item: (str(item[1].get("started", "")),
                                             str(item[1].get("run_id", ""))), reverse=True)
    for position, (directory, manifest) in enumerate(ordered):
        run_id = str(manifest.get("run_id"))
        entry = StoredRun(run_id=run_id, name=str(manifest.get("name", run_id)),
                          status=str(manifest.get("status", "incomplete")),
                          started=str(manifest.get("started", "")), path=directory,
                          size=folder_size(directory))
        why: Why | None = None
        if position < keep:
            why = "newest"
        elif _linked(directory):
            why = "symbolic link"
        elif entry.named and not named:
            why = "named"
        elif being_written(directory):
            why = "being written"
        if why is None and not dry_run:
            try:
                freed = remove_run(runs_dir, directory, run_id)
            except RunBusyError:
                why = "being written"  # its session took the lock since it was looked at
            except OSError as exc:
                failed.append((entry, exc.strerror or str(exc)))
                continue
            else:
                if freed is None:
                    continue  # deleted meanwhile by another prune: not this one's to count
                entry = replace(entry, size=freed)
        if why is None:
            deleted.append(entry)
        else:
            kept.append(replace(entry, why=why))
    leftovers, leftover_bytes = _remove_leftovers(runs_dir, dry_run)
    return Pruning(root=root, keep=keep, named=named, dry_run=dry_run,
                   runs=len(ordered) + sum(r.damaged is not None for r in (*deleted, *kept)),
                   deleted=tuple(deleted), kept=tuple(kept), failed=tuple(failed),
                   leftovers=leftovers, leftover_bytes=leftover_bytes,
                   baselines=tuple(baselines))


def prune_cache(root: Path, *, dry_run: bool) -> tuple[int, int]:
    """Empty the cache of HTTP calls (``--prove-cache``) under the store ``root``: the number
    of episode files and the bytes removed (or that would be, with ``dry_run``).  The folder
    is renamed away first, so that a session recording into it meanwhile starts a new one."""
    folder = root / "cache"
    if not folder.is_dir() or _linked(folder):
        return 0, 0
    files = sum(1 for p in folder.rglob("*.json") if p.is_file())
    size = folder_size(folder)
    if dry_run:
        return files, size
    doomed = root / f".cache-pruned-{os.getpid()}"
    try:
        os.replace(folder, doomed)
        shutil.rmtree(doomed)
    except OSError as exc:
        raise StoreError(f"{folder}: cannot empty the cache ({exc.strerror or exc}); make it "
                         "writable, then prune again") from None
    return files, size
