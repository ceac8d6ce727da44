"""Runs: what is read of one (:class:`Run`, a run or a baseline), the names runs go by, and
the folders under ``runs/``, listed and read.

A run's folder holds its ``manifest.json`` (format :data:`RUN_FORMAT`) and its
``episodes.jsonl``; a folder whose manifest cannot be read is damaged, and said so by name
unless a session is making it now (:func:`scan_runs`).  Hidden folders (a run being
deleted: :mod:`.pruning`) are skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, final

from ..record import RUN_FIX, RUN_MANIFEST_FIX, StoreError, check_manifest
from .pruning import NO_MANIFEST, being_written, run_manifest
from .reading import check_format, json_of, read_episodes

__all__ = ["BASELINE_SUFFIX", "LEGACY_SUFFIX", "RUN_FORMAT", "Run", "check_name",
           "check_run_name", "read_run", "scan_runs"]

#: The format version of the runs this code writes and reads; a newer one is refused with
#: the fix.
RUN_FORMAT: Final = 2
#: A baseline's file: compact (formats 2 and 3), or JSON lines (format 1, read only).
BASELINE_SUFFIX: Final = ".baseline"
LEGACY_SUFFIX: Final = ".jsonl"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")


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


def scan_runs(runs_dir: Path) -> tuple[list[tuple[Path, dict[str, Any]]], list[tuple[Path, str]]]:
    """Every folder under ``runs_dir``: the runs (folder and manifest), and the folders
    whose manifest cannot be read, each with why (one damaged folder never hides the
    others, nor stops a command that lists them)."""
    runs: list[tuple[Path, dict[str, Any]]] = []
    damaged: list[tuple[Path, str]] = []
    if not runs_dir.is_dir():
        return runs, damaged
    for directory in runs_dir.iterdir():
        if directory.name.startswith(".") or not directory.is_dir():
            continue  # .gitignore, or a run being deleted (see pruning.remove_run)
        found = run_manifest(directory)
        if isinstance(found, dict):
            runs.append((directory, found))
        elif not (found == NO_MANIFEST and being_written(directory)):
            damaged.append((directory, found))  # not a session making its folder now
    return runs, damaged


def read_run(directory: Path) -> Run:
    """The run in ``directory`` (a folder under ``runs/``), read whole and checked; what was
    skipped (a truncated last line) is in its notes."""
    path = directory / "manifest.json"
    if not path.exists():
        raise StoreError(f"{path}: the run's manifest is missing; {RUN_MANIFEST_FIX}")
    found = json_of(path, path.read_bytes, lambda exc: (
        f"{path}: corrupt JSON ({exc}); the file was edited or damaged: "
        f"{RUN_MANIFEST_FIX}"))
    manifest = check_manifest(found, str(path), RUN_MANIFEST_FIX, run=True)
    check_format(manifest.get("format", 1), RUN_FORMAT, path)
    episodes, notes = read_episodes(directory / "episodes.jsonl", manifest["salt"], RUN_FIX,
                                    manifest=manifest)
    return Run(
        run_id=manifest["run_id"],
        name=str(manifest.get("name", manifest["run_id"])),
        manifest=manifest,
        episodes=tuple(episodes),
        path=directory,
        notes=tuple(notes),
    )
