"""The run as the controller writes it: its episodes, its plan, its counts, its manifest.

One :class:`RunRecorder` per session, on the controller only.  It appends the episodes the
reports bring, counts them one per identity (a resumed replicate replaces its errored line,
as readers read it), keeps the sweep's plan and what pytest's selection left out in the
manifest from the first episode on, and closes the run with its status.  A failed write
(disk full, read-only store) is kept as :attr:`RunRecorder.failure` and reported once
through ``on_failure``; nothing is written after it.  It knows nothing of pytest.
"""

from __future__ import annotations

import contextlib
import functools
import platform
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from pathlib import Path
from typing import Any, final

from ..declare.environment import add_models, environment_record
from ..record import add_tokens, ending, identity, utc_now
from ..wire import PlanData, unspan
from . import Run, RunWriter, Store, StoreError
from .tally import Endings, ReplicateSet

__all__ = ["RunRecorder", "provenance"]

Key = tuple[str, str, int]


def provenance(root: Path) -> dict[str, Any]:
    """What made the run: package versions and the git commit of ``root``, if any."""
    found = {"python": platform.python_version(), **_versions()}
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        commit = None
    else:
        commit = done.stdout.strip() or None if done.returncode == 0 else None
    return {"packages": found, "git_commit": commit}


@functools.cache
def _versions() -> dict[str, str]:
    """The installed versions of the packages that make a run, read once a process (each
    read parses a package's metadata file): a package upgraded later in the same process
    would not be the one it runs."""
    from importlib import metadata

    found = {}
    for dist in ("pytest-prove", "pytest", "pytest-xdist", "numpy", "scipy"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


@final
class RunRecorder:
    """The run being written: a new one, or a resumed one (locked from the start)."""

    def __init__(self, store: Store, *, name: str | None, salt: str, baseline: Run | None,
                 resume: Run | None, on_failure: Callable[[], None]) -> None:
        self.on_failure = on_failure
        self.plan: dict[str, dict[str, Any]] = {}
        # What pytest's selection kept of the plan, the conditions whose items were skipped,
        # and the paths the session collected from: the gate's coverage reads them.
        self.selected: dict[str, dict[str, ReplicateSet]] = {}
        self.skipped: dict[str, set[str]] = {}
        #: --prove-sequential: conditions decided before their last look, whose remaining
        #: replicates were never meant to run once decided.
        self.stopped: set[tuple[str, str]] = set()
        self.paths: list[str] = []
        self.narrowed = False  # --lf or a node id narrowed collection itself
        self.prior_selection: dict[str, Any] | None = None  # a resumed run's, see selection
        self.leave_out: dict[str, list[str]] = {"ignored": [], "skipped_files": []}
        #: --prove-shard: which slice this run is, and its replicates (see merge_plan).
        self.shard: dict[str, Any] | None = None
        self.states = Endings()  # how each stored episode ended, by identity
        self.spent = {"input": 0, "output": 0}  # tokens of the run so far
        self.any_tokens = False
        #: The model names captured spans named, counted as episodes are stored (the
        #: manifest's ``environment.models``; a resumed run's are counted again from its lines).
        self.models: dict[str, dict[str, int]] = {}
        self.failure: str | None = None  # the store could not be written
        self.ended = False
        if resume is not None:
            # Locks the run at once: a second session resuming it is refused before it runs.
            self.writer: RunWriter = store.reopen(resume)
            for record in resume.episodes:
                self.count(record)
            self.rollouts: dict[str, Any] = dict(resume.manifest.get("rollouts") or {})
            self.merge_stored_plan(resume.manifest.get("plan"))
            stored_shard = resume.manifest.get("shard")
            if isinstance(stored_shard, dict):
                self._merge_shard(stored_shard)
            # Left out on purpose only where every session of the run left it out: a killed
            # session (no selection recorded) left out nothing.
            prior = resume.manifest.get("selection")
            self.prior_selection = prior if isinstance(prior, dict) else {}
        else:
            manifest: dict[str, Any] = {
                "paired_with": None if baseline is None else {
                    "baseline": baseline.name, "run_id": baseline.run_id},
                "rollouts": {},
                "packages": None,  # filled in as the tests start: see stamp()
                "git_commit": None,
                "command": [_program(), *sys.argv[1:]],
                "counts": self.counts,
            }
            self.writer = store.new_run(name=name, salt=salt, manifest=manifest)
            self.rollouts = self.writer.manifest["rollouts"]

    @property
    def counts(self) -> dict[str, int]:
        """Episodes of the run by how they ended, one per identity, as readers count them."""
        states = self.states
        return {"episodes": len(states), "with_outcome": states.count("with_outcome"),
                "no_outcome": states.count("no_outcome"), "errored": states.count("errored")}

    @property
    def keys(self) -> set[Key]:
        return self.states.keys()

    def stamp(self, root: Path, variables: Iterable[str] = (),
              packages: Iterable[str] = ()) -> None:
        """Record what made the run, once, before any test runs (so that no test's fixture,
        such as a monkeypatched subprocess or environment, can change what is recorded): the
        provenance, and the environment the user declares as part of the agent (its
        ``variables`` and ``packages``; a resumed run keeps the one its first session
        recorded)."""
        if self.writer.manifest.get("packages") is None:
            self.writer.manifest.update(provenance(root))
        if not isinstance(self.writer.manifest.get("environment"), dict):
            self.writer.manifest["environment"] = environment_record(variables, packages)

    def models_json(self) -> dict[str, dict[str, int]]:
        """The models seen in spans so far, sorted, for the manifest."""
        return {kind: dict(sorted(seen.items())) for kind, seen in sorted(self.models.items())}

    def store(self, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append ``records``; return those stored (none once the store has failed)."""
        records = list(records)
        if not records or self.failure is not None:
            return []
        try:
            self.writer.append(records, fresh=True)  # a session's own, made as it ran
        except StoreError as exc:
            # Disk full, a read-only store, a quota: what is stored stays, nothing more is
            # written, and the session stops with this one message (no traceback).
            self.failure = str(exc)
            self.on_failure()
            return []
        for record in records:
            self.count(record)
        return records

    def announce(self, rollout: Mapping[str, Any]) -> None:
        """A rollout's declaration, the first time a report brings it."""
        if rollout["id"] in self.rollouts:
            return
        self.rollouts[rollout["id"]] = {"label": rollout["label"],
                                        "declaration": rollout["declaration"]}
        if self.writer.created:
            self.write_manifest()

    def count(self, record: Mapping[str, Any]) -> None:
        spans = record.get("spans")
        if spans:
            add_models(self.models, spans)
        if record.get("tokens"):
            self.any_tokens = True
            add_tokens(self.spent, record)
        self.states.put(*identity(record), ending(record))  # a replaced line: its new ending

    def merge_plan(self, data: PlanData) -> None:
        """Add what a process collected (every xdist worker sends the same) to the run's plan,
        and keep the manifest's copy current, so that a killed run still knows its plan."""
        plan, selected, paths = data["plan"], data["selected"], data["paths"]
        self.narrowed = self.narrowed or bool(data.get("narrowed"))
        for name in ("ignored", "skipped_files"):
            for path in data.get(name) or ():  # type: ignore[attr-defined]
                if path not in self.leave_out[name]:
                    self.leave_out[name].append(path)
        before = (self.plan_json(), self.shard_json())
        if data.get("shard"):
            self._merge_shard(data["shard"])  # type: ignore[arg-type]
        for rollout_id, info in plan.items():
            mine = self.plan.setdefault(rollout_id, {"conditions": {}, "replicates": 0})
            mine["conditions"].update(info["conditions"])
            mine["replicates"] = max(mine["replicates"], int(info["replicates"]))
            for field in ("node", "path"):
                if info.get(field):
                    mine[field] = info[field]
            _merge_positions(mine, info.get("axes"))
            known = self.rollouts.setdefault(rollout_id, {"label": info["label"],
                                                          "declaration": info["declaration"]})
            for field in ("node", "path"):
                if info.get(field):
                    known[field] = info[field]
        for rollout_id, keys in (selected or {}).items():
            mine = self.selected.setdefault(rollout_id, {})
            for key, pairs in keys.items():
                # One update for them all: each one counts the whole array.
                mine.setdefault(key, ReplicateSet()).update(chain.from_iterable(unspan(pairs)))
        for path in paths:
            if path not in self.paths:
                self.paths.append(path)
        plan_json = self.plan_json()
        if (plan_json, self.shard_json()) != before:
            self.writer.manifest["plan"] = plan_json
            if self.shard is not None:
                self.writer.manifest["shard"] = self.shard_json()
            if self.writer.created and not self.ended:
                self.write_manifest()


    def _merge_shard(self, found: Mapping[str, Any]) -> None:
        """Add a process's (or a resumed run's) slice: every process computes the same one."""
        if self.shard is None:
            self.shard = {"index": int(found["index"]), "count": int(found["count"]),
                          "slice": {}}
        mine = self.shard["slice"]
        for rollout_id, conditions in (found.get("slice") or {}).items():
            for key, replicates in conditions.items():
                known = mine.setdefault(str(rollout_id), {}).setdefault(str(key), set())
                known.update(int(r) for r in replicates)

    def shard_json(self) -> dict[str, Any] | None:
        """The manifest's ``shard``: ``{"index": K, "count": N, "slice": {rollout: {condition
        key: [replicates]}}}``, or None for a run of the whole sweep."""
        if self.shard is None:
            return None
        return {"index": self.shard["index"], "count": self.shard["count"],
                "slice": {rid: {key: sorted(reps) for key, reps in sorted(keys.items())}
                          for rid, keys in sorted(self.shard["slice"].items())}}

    def merge_stored_plan(self, stored: object) -> None:
        """A resumed run's plan: what every session of it meant to run, not only this one."""
        if not isinstance(stored, Mapping):
            return
        for rollout_id, info in stored.items():
            if not isinstance(info, Mapping) or not isinstance(info.get("conditions"), list):
                continue
            mine = self.plan.setdefault(str(rollout_id), {"conditions": {}, "replicates": 0})
            mine["conditions"].update({str(k): None for k in info["conditions"]})
            mine["replicates"] = max(mine["replicates"], int(info.get("replicates") or 0))
            for field in ("node", "path"):
                if isinstance(info.get(field), str):
                    mine[field] = info[field]
            _merge_positions(mine, info.get("axes"))


    def plan_json(self) -> dict[str, Any]:
        """The manifest's ``plan``: per rollout its replicates, condition keys, where it
        lives, and (parametrized tests) each axis's values by their place in the
        parametrize list, ``{"ticket": {"0": "refund", "1": "password"}}``."""
        return {rid: {"replicates": info["replicates"], "conditions": sorted(info["conditions"]),
                      **{f: info[f] for f in ("node", "path", "axes") if info.get(f)}}
                for rid, info in self.plan.items()}


    def write_manifest(self, **updates: Any) -> None:
        """Write the manifest; a failure stops the session like a failed episode write."""
        try:
            self.writer.write_manifest(counts=self.counts, **updates)
        except (OSError, StoreError) as exc:
            if self.failure is None:
                self.failure = (f"{self.writer.directory / 'manifest.json'}: cannot write "
                                f"the manifest ({_reason(exc)})")
                self.on_failure()

    # ---- the end


    def planned(self) -> set[Key]:
        """What the run is meant to hold: its plan, or a shard's slice of it."""
        if self.shard is not None:
            return {(rid, key, r) for rid, keys in self.shard["slice"].items()
                    for key, reps in keys.items() for r in reps}
        return {(rid, key, r) for rid, info in self.plan.items()
                for key in info["conditions"] for r in range(info["replicates"])}


    def missing(self) -> int:
        """How many planned replicates the run does not hold (counted condition by
        condition, without a set of every identity); a sequential run's conditions decided
        before their last look (``stopped``) miss none."""
        held = self.states.held
        stopped = self.stopped
        if self.shard is not None:
            slices = [(rid, key, set(reps)) for rid, keys in self.shard["slice"].items()
                      for key, reps in keys.items() if (rid, key) not in stopped]
            return sum(len(reps) - held(rid, key, reps) for rid, key, reps in slices)
        return sum(info["replicates"] - held(rid, key, int(info["replicates"]))
                   for rid, info in self.plan.items() for key in info["conditions"]
                   if (rid, key) not in stopped)


    def selection(self) -> dict[str, Any]:
        """What this session left out on purpose, for the manifest (read by coverage.py):
        the replicates of each condition pytest's selection dropped, the conditions whose
        items were skipped, and how collection was narrowed."""
        deselected: dict[str, dict[str, list[int]]] = {}
        for rid, info in self.plan.items():
            kept = self.selected.get(rid, {})
            for key in info["conditions"]:
                dropped = kept.get(key, ReplicateSet()).missing_below(info["replicates"])
                if dropped:
                    deselected.setdefault(rid, {})[key] = dropped
        skipped = {rid: sorted(keys) for rid, keys in self.skipped.items()}
        narrowed = self.narrowed
        prior = self.prior_selection
        if prior is not None:
            # Left out on purpose only what every session of the run left out.
            earlier = prior.get("deselected")
            earlier = earlier if isinstance(earlier, dict) else {}
            for rid, conditions in deselected.items():
                found = earlier.get(rid)
                before: dict[str, Any] = found if isinstance(found, dict) else {}
                for key in list(conditions):
                    conditions[key] = sorted(set(conditions[key])
                                             & set(before.get(key) or ()))
            earlier_skips = prior.get("skipped")
            earlier_skips = earlier_skips if isinstance(earlier_skips, dict) else {}
            skipped = {rid: [k for k in keys if k in set(earlier_skips.get(rid) or ())]
                       for rid, keys in skipped.items()}
            narrowed = narrowed and bool(prior.get("narrowed"))
        return {"deselected": {rid: {k: r for k, r in conditions.items() if r}
                               for rid, conditions in deselected.items()
                               if any(conditions.values())},
                "skipped": {rid: keys for rid, keys in skipped.items() if keys},
                "paths": list(self.paths), "narrowed": narrowed, **self.leave_out}


    def close(self, *, interrupted: bool, capped: dict[str, Any] | None,
              prices: dict[str, Any] | None) -> str:
        """Write the final manifest (best effort when the store fails) and flush the episodes;
        return its status. The run stays locked until the session ends (the plugin's
        ``pytest_unconfigure`` releases it): the session reads it back after this (its review,
        a baseline, a report, the cost line), and a prune in another process must not delete
        it meanwhile."""
        missing = self.missing()
        status = "complete" if (not interrupted and missing == 0 and self.plan
                                and self.failure is None) else "incomplete"
        if capped is not None:
            status = "capped"
            self.writer.manifest["capped"] = capped
        if prices:
            self.writer.manifest["prices"] = prices
        environment = self.writer.manifest.get("environment")
        if isinstance(environment, dict):
            environment["models"] = self.models_json()
        updates = {"ended": utc_now(), "status": status, "plan": self.plan_json(),
                   "selection": self.selection(), "missing": missing}
        if self.shard is not None:
            updates["shard"] = self.shard_json()
        if self.failure is None:
            self.write_manifest(**updates)
            if self.failure is not None:
                # The final manifest was not written (the disk filled after the last
                # episode): the one on disk still says incomplete, and so must the session.
                status = updates["status"] = "incomplete"
                updates["ended"] = None
        else:
            # The store already failed once: one more try at the final word, quietly.
            with contextlib.suppress(OSError, StoreError):
                self.writer.write_manifest(counts=self.counts, **updates)
        self.writer.manifest.update(updates)
        try:
            self.writer.close(release=False)
        except OSError as exc:
            if self.failure is None:
                self.failure = (f"{self.writer.episodes_path}: cannot finish writing "
                                      f"the episodes ({_reason(exc)})")
        self.ended = True
        return status


def _program() -> str:
    name = Path(sys.argv[0]).name
    return "pytest" if name in ("__main__.py", "py.test", "pytest") else name


def _merge_positions(mine: dict[str, Any], found: object) -> None:
    """Add each axis value's place in its parametrize list (see plan_json)."""
    if not isinstance(found, Mapping):
        return
    for name, positions in found.items():
        if isinstance(positions, Mapping):
            known = mine.setdefault("axes", {}).setdefault(str(name), {})
            for position, value in positions.items():
                known.setdefault(str(position), value)
