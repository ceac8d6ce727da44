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

Only the controller process writes, holding the run's file lock while it does
(:mod:`.writer`).
Nothing is created until an episode arrives.
Readers tolerate a truncated last line (a session killed mid-write) and say so, and skip
hidden folders under ``runs/`` (a run being deleted: :mod:`.pruning`).

This module holds :class:`Store`, the one door to that folder, and the package's public
names.  Each part of the work has its own module: :mod:`.runs` (what a run is, its names,
listing and reading the folders under ``runs/``), :mod:`.baseline_files` (a baseline's
file, read and written), :mod:`.reading` (a file's lines of episodes), :mod:`.decoding`
and :mod:`.episodes` (a run's lines decoded into read-only records), :mod:`.compact` and
:mod:`.compact_reader` (a baseline's short lines, written and read), :mod:`.integrity`,
:mod:`.writer`, :mod:`.recorder`, :mod:`.tally`, :mod:`.baselines`, :mod:`.pruning` and
:mod:`.merging`.
"""

from __future__ import annotations

import secrets
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, final

from ..record import RUN_MANIFEST_FIX, StoreError, utc_now
from .baseline_files import BASELINE_FORMAT, read_baseline, write_baseline_file
from .pruning import Pruning, prune_runs
from .reading import StoreWarning
from .runs import (
    BASELINE_SUFFIX,
    LEGACY_SUFFIX,
    RUN_FORMAT,
    Run,
    check_name,
    check_run_name,
    read_run,
    scan_runs,
)
from .writer import RunWriter

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
    "read_baseline",
]


@final
@dataclass(slots=True)
class Store:
    """The folder that holds runs and baselines."""

    root: Path

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

    def runs(self) -> list[tuple[Path, dict[str, Any]]]:
        """Every run's folder and manifest, oldest first."""
        return sorted(scan_runs(self.runs_dir)[0], key=lambda item: str(item[1].get("started", "")))

    def damaged(self) -> list[tuple[Path, str]]:
        """The folders under ``runs/`` that hold no readable run's manifest, and why, by
        name (a run id starts with its time)."""
        return sorted(scan_runs(self.runs_dir)[1])

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
        baselines; any of these followed by ``:ARM`` names one arm of a run with arms
        (:func:`.arms.one_arm`; no run's name holds a ':')."""
        if ":" in name.removeprefix("baseline:"):
            from .arms import one_arm

            whole, _, arm = name.rpartition(":")
            return one_arm(self.open(whole), arm)
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
        run = read_run(directory)
        for note in run.notes:
            warnings.warn(StoreWarning(note), stacklevel=2)
        return run

    # ---- deleting runs

    def prune(self, *, keep: int, named: bool = False, dry_run: bool = False) -> Pruning:
        """Delete every run but the newest ``keep``, named runs (unless ``named``) and runs
        being written, and every damaged folder (:meth:`damaged`: nothing can read it);
        with ``dry_run``, only say which would go. Baselines are never touched."""
        runs, damaged = scan_runs(self.runs_dir)
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
        return write_baseline_file(self.baseline_path(name), name, run, compact=compact)
