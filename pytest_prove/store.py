"""Runs on disk: plain JSON files anyone can read without the plugin.

Layout under the store root (``.prove/`` by default)::

    runs/<run-id>/manifest.json     what the run was (written to a temp file, then renamed)
    runs/<run-id>/episodes.jsonl    one episode a line, appended whole under a file lock
    baselines/<NAME>.jsonl          a self-contained baseline: its manifest, then its episodes

Only the controller process writes, holding the run's file lock while it does.
Nothing is created until an episode arrives.
Readers tolerate a truncated last line (a session killed mid-write) and say so.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, final

from filelock import FileLock, Timeout

__all__ = [
    "BASELINE_FORMAT",
    "RUN_FORMAT",
    "Run",
    "RunWriter",
    "Store",
    "StoreError",
    "StoreWarning",
    "check_name",
    "episode_key",
    "utc_now",
]

#: The format versions this code writes and reads; a newer file is refused with the fix.
RUN_FORMAT: Final = 1
BASELINE_FORMAT: Final = 1

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


class StoreError(Exception):
    """A store problem the user can fix: an unknown name, a corrupt line, a bad name."""


class StoreWarning(UserWarning):
    """Something was read with a loss the user should know of (a truncated last line)."""


def utc_now() -> str:
    """Now, as an ISO 8601 UTC timestamp with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


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


def episode_key(record: Mapping[str, Any]) -> tuple[str, str, int]:
    """The identity of an episode within a run: (rollout, condition key, replicate)."""
    return (str(record["rollout"]), str(record["condition_key"]), int(record["replicate"]))


def _atomic_write(path: Path, text: str) -> None:
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


#: One encoder for every line (json.dumps with options would build one per call).
_LINE_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"),
                                        allow_nan=False)


def _dump(record: Mapping[str, Any]) -> str:
    return _LINE_ENCODER.encode(record)


def _read_jsonl(path: Path, *, skip_first: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """Every whole line of a JSON-lines file, and warnings for what was skipped.

    A last line with no newline was being written when a session died: it is
    skipped with a warning.  Any other line that is not a JSON object is an
    error naming the file and line, since the data around it cannot be trusted.
    """
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return records, notes
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    if tail.strip():
        notes.append(
            f"{path}: line {len(lines) + 1} is truncated (a session stopped while writing it); "
            "it was skipped and every whole line was read"
        )
    for number, raw in enumerate(lines, start=1):
        if skip_first and number == 1:
            continue
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreError(
                f"{path}:{number}: corrupt line ({exc}); the file was edited or damaged. "
                "Restore it from version control, or delete that line to keep the rest"
            ) from None
        if not isinstance(record, dict):
            raise StoreError(f"{path}:{number}: expected a JSON object, got {raw[:60]!r}")
        records.append(record)
    return records, notes


def _latest(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per episode identity, the last written winning (a resumed replicate)."""
    by_key: dict[tuple[str, str, int], dict[str, Any]] = {}
    for record in records:
        try:
            key = episode_key(record)
        except (KeyError, TypeError, ValueError):
            continue
        by_key.pop(key, None)
        by_key[key] = record
    return list(by_key.values())


@final
@dataclass(frozen=True, slots=True)
class Run:
    """A stored run or baseline, read whole: its manifest and its episodes."""

    run_id: str
    name: str
    manifest: dict[str, Any]
    episodes: tuple[dict[str, Any], ...]
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
        return self.path.suffix == ".jsonl"


@final
class RunWriter:
    """The one writer of a run: appends episodes and keeps the manifest current."""

    def __init__(self, directory: Path, manifest: dict[str, Any], *,
                 existing: bool = False) -> None:
        self.directory = directory
        self.existing = existing
        self.manifest = manifest
        self.episodes_path = directory / "episodes.jsonl"
        self._lock = FileLock(str(directory / "episodes.jsonl.lock"))
        self._fh: Any = None
        self.written = 0

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    @property
    def created(self) -> bool:
        """Whether the run is on disk (it is once an episode arrived, or when resumed)."""
        return self.existing or self._fh is not None

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        # The lock is held for as long as this session writes the run: a second session
        # (a concurrent --prove-resume of the same run) is refused instead of interleaving.
        # The operating system releases it when the process dies, even on SIGKILL.
        try:
            self._lock.acquire(timeout=10)
        except Timeout:
            raise StoreError(
                f"{self.directory}: another session is writing this run; wait for it to "
                "finish, or start a new run"
            ) from None
        # A killed session may have left a partial last line: cut it off before
        # appending, so that it never becomes a corrupt line in the middle.
        if self.episodes_path.exists():
            data = self.episodes_path.read_bytes()
            if data and not data.endswith(b"\n"):
                with self.episodes_path.open("r+b") as fh:
                    fh.truncate(data.rfind(b"\n") + 1)
        self._fh = self.episodes_path.open("a", encoding="utf-8")
        self.existing = True
        self.write_manifest()

    def append(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append whole lines, each write one call, flushed to the operating system."""
        text = "".join(_dump(r) + "\n" for r in records)
        if not text:
            return
        if self._fh is None:
            self._open()
        try:
            self._fh.write(text)
            self._fh.flush()
        except OSError as exc:
            raise StoreError(
                f"{self.episodes_path}: cannot write episodes ({exc.strerror}); "
                "free some disk space, then finish the run with --prove-resume "
                f"{self.manifest.get('name') or self.run_id}"
            ) from None
        self.written += text.count("\n")

    def write_manifest(self, **updates: Any) -> None:
        """Merge ``updates`` into the manifest and write it atomically (only once created)."""
        self.manifest.update(updates)
        if not self.created:
            return
        _atomic_write(self.directory / "manifest.json", json.dumps(self.manifest, indent=2) + "\n")

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            finally:
                self._fh.close()
                self._fh = None
                self._lock.release()


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
            check_name(name)
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
        manifest["status"] = "incomplete"
        manifest.setdefault("resumed", []).append(utc_now())
        return RunWriter(run.path, manifest, existing=True)

    def _manifests(self) -> Iterator[tuple[Path, dict[str, Any]]]:
        if not self.runs_dir.is_dir():
            return
        for directory in self.runs_dir.iterdir():
            path = directory / "manifest.json"
            try:
                manifest = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(manifest, dict) and "run_id" in manifest:
                yield directory, manifest

    def runs(self) -> list[tuple[Path, dict[str, Any]]]:
        """Every run's folder and manifest, oldest first."""
        return sorted(self._manifests(), key=lambda item: str(item[1].get("started", "")))

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
        known = sorted({str(m.get("name")) for _, m in runs})
        listed = ", ".join(known[-12:]) if known else "none yet"
        raise StoreError(
            f"no run named {name!r} in {self.root}; runs: {listed} (or 'latest')"
        )

    def load(self, name: str) -> Run:
        """Read the run called ``name`` whole."""
        return self.read(self.resolve(name))

    def read(self, directory: Path) -> Run:
        """Read the run in ``directory`` whole (a folder under ``runs/``)."""
        manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        _check_format(manifest.get("format", 1), RUN_FORMAT, directory / "manifest.json")
        records, notes = _read_jsonl(directory / "episodes.jsonl")
        for note in notes:
            warnings.warn(StoreWarning(note), stacklevel=2)
        return Run(
            run_id=str(manifest["run_id"]),
            name=str(manifest.get("name", manifest["run_id"])),
            manifest=manifest,
            episodes=tuple(_latest(records)),
            path=directory,
            notes=tuple(notes),
        )

    # ---- baselines

    def baseline_path(self, name: str) -> Path:
        return self.baselines_dir / f"{check_name(name, 'baseline name')}.jsonl"

    def baselines(self) -> list[str]:
        if not self.baselines_dir.is_dir():
            return []
        return sorted(p.stem for p in self.baselines_dir.glob("*.jsonl"))

    def load_baseline(self, name: str) -> Run:
        """Read a committed baseline file whole."""
        path = self.baseline_path(name)
        if not path.is_file():
            known = ", ".join(self.baselines()) or "none yet"
            raise StoreError(
                f"no baseline named {name!r} in {self.baselines_dir}; baselines: {known}. "
                f"Make one with --prove-save-baseline {name}"
            )
        try:
            with path.open("rb") as fh:
                first = fh.readline()
            header = json.loads(first)
        except (OSError, ValueError):
            raise StoreError(
                f"{path}:1: the first line must be the baseline's manifest; the file is "
                "damaged. Restore it from version control or save it again"
            ) from None
        if not isinstance(header, dict) or "pytest_prove_baseline" not in header:
            raise StoreError(f"{path}:1: not a pytest-prove baseline (no header line)")
        _check_format(header["pytest_prove_baseline"], BASELINE_FORMAT, path)
        manifest = dict(header.get("manifest", {}))
        records, notes = _read_jsonl(path, skip_first=True)
        for note in notes:
            warnings.warn(StoreWarning(note), stacklevel=2)
        return Run(
            run_id=str(manifest.get("run_id", name)),
            name=name,
            manifest=manifest,
            episodes=tuple(_latest(records)),
            path=path,
            notes=tuple(notes),
        )

    def write_baseline(self, name: str, run: Run) -> Path:
        """Write ``run`` as the baseline ``name``, replacing any old one in one step."""
        path = self.baseline_path(name)
        manifest = dict(run.manifest)
        manifest["baseline_name"] = name
        manifest["saved"] = utc_now()
        header = {"pytest_prove_baseline": BASELINE_FORMAT, "manifest": manifest}
        ordered = sorted(run.episodes, key=episode_key)
        text = _dump(header) + "\n" + "".join(_dump(r) + "\n" for r in ordered)
        _atomic_write(path, text)
        return path


def _check_format(found: object, supported: int, path: Path) -> None:
    if not isinstance(found, int) or found > supported:
        raise StoreError(
            f"{path}: written in format {found!r} by a newer pytest-prove; this one reads "
            f"format {supported} and older. Upgrade pytest-prove (pip install -U pytest-prove)"
        )
