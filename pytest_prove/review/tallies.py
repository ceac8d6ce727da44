"""The tallies of one run that ``runs`` and ``show`` print: a manifest's summary line, and
a run's outcomes by condition, its errored episodes and those without an outcome."""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, final

from ..declare.chaos import FaultCount, count_faults
from ..declare.spec import condition_label
from ..declare.targets import declares_targets
from ..store import Run, Store, StoreError, StoreWarning
from .flips import replay_target
from .labels import label_of
from .pairing import rollout_label as label_of_rollout

__all__ = ["RunLine", "Tally", "damaged_line", "run_line", "stored_runs", "tally"]

RunLine = dict[str, Any]  # one row of ``runs``, as its JSON document has it


def run_line(manifest: dict[str, Any], name: str, run_id: str,
             episodes: int | None = None) -> RunLine:
    """A run's summary: name, id, status, rollouts, episodes, start, baseline."""
    counts = manifest.get("counts") or {}
    paired = manifest.get("paired_with") or {}
    return {
        "name": name,
        "run_id": run_id,
        "status": str(manifest.get("status", "incomplete")),
        "rollouts": len(manifest.get("rollouts") or {}),
        "episodes": int(counts.get("episodes", episodes or 0)),
        "started": str(manifest.get("started", "")),
        "paired_with": paired.get("baseline") if isinstance(paired, dict) else None,
    }


def damaged_line(name: str, why: str) -> RunLine:
    """A run folder or baseline that cannot be read, and why (``runs`` lists it so)."""
    return {"name": name, "run_id": name, "status": "damaged", "rollouts": 0, "episodes": 0,
            "started": "", "paired_with": None, "damaged": why}


def stored_runs(store: Store, load: Callable[[Store, str], Run],
                ) -> tuple[list[RunLine], list[RunLine]]:
    """Every run and every baseline of ``store`` as summary lines; ``load(store, text)``
    opens a baseline by the name a user would give.  One that cannot be read is listed as
    damaged, with why: it never hides the others."""
    runs = []
    for directory, m in store.runs():
        episodes = None
        name, run_id = str(m.get("name", m["run_id"])), str(m["run_id"])
        if m.get("ended") is None or not isinstance(m.get("counts"), dict):
            # Being written, or its session was killed: the manifest's counts are those of
            # its first episode (or, from an older pytest-prove, absent), so count what its
            # lines hold.
            m = {**m, "counts": None}
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", StoreWarning)  # `show RUN` says it
                    episodes = len(store.read(directory).episodes)
            except StoreError as exc:
                runs.append({**damaged_line(name, str(exc)), "run_id": run_id,
                             "started": str(m.get("started", ""))})
                continue
        runs.append(run_line(m, name, run_id, episodes))
    runs += [damaged_line(directory.name, f"{directory}: {why}")
             for directory, why in store.damaged()]
    baselines = []
    for name in store.baselines():
        try:
            run = load(store, f"baseline:{name}")
        except StoreError as exc:
            baselines.append(damaged_line(f"baseline:{name}", str(exc)))
            continue
        baselines.append(run_line(run.manifest, f"baseline:{name}", run.run_id,
                                  len(run.episodes)))
    return runs, baselines


@final
@dataclass(frozen=True, slots=True)
class Tally:
    """One run read whole: its summary, outcomes overall and by condition, and what has
    no outcome (by kind) or errored (each episode)."""

    run: Run
    summary: RunLine
    outcomes: Counter[str]
    by_condition: dict[str, Counter[str]]
    without_outcome: Counter[str]
    errored: list[dict[str, Any]]
    #: Episodes run more than once (pytest-rerunfailures), and of those the ones whose
    #: final attempt ended with an outcome after an earlier one had none.
    rerun: int = 0
    recovered: int = 0
    #: The faults chaos injected, by condition (empty for a run without chaos).
    faults: dict[str, FaultCount] | None = None
    #: Each condition's pass^k and pass@k (review/targets.py), when the run declares targets.
    pass_k: tuple[Any, ...] = ()

    @property
    def with_outcome(self) -> int:
        return sum(self.outcomes.values())


def tally(run: Run) -> Tally:
    """Count ``run``'s outcomes by condition and list its errored episodes."""
    outcomes: Counter[str] = Counter()
    by_condition: dict[str, Counter[str]] = defaultdict(Counter)
    errored = []
    left: Counter[str] = Counter()
    rerun = recovered = 0
    labels: dict[int, str] = {}
    kept: list[object] = []  # the conditions labelled, alive so that no id is reused
    for record in run.episodes:
        if int(record.get("attempts") or 1) > 1:
            rerun += 1
            if record.get("error") is None and any(
                    e.get("error") is not None for e in record.get("earlier") or ()):
                recovered += 1
        condition = record.get("condition") or {}
        # One label per condition: the episodes of one share their condition's dict.
        label = labels.get(id(condition))
        if label is None:
            label = labels[id(condition)] = condition_label(condition)
            kept.append(condition)
        error = record.get("error")
        if error is None:
            outcomes[str(record.get("outcome"))] += 1
            by_condition[label][str(record.get("outcome"))] += 1
            continue
        kind = str(error.get("kind", "errored"))
        left[kind] += 1
        if kind != "no_outcome":
            info = (run.manifest.get("rollouts") or {}).get(record.get("rollout")) or {}
            replay = replay_target(run, record)
            errored.append({"rollout": record.get("rollout"), "condition": label,
                            "replicate": record.get("replicate"), "kind": kind,
                            "type": error.get("type"), "message": error.get("message"),
                            # What replaying it needs: where it lives and its seed.
                            "node": info.get("node") if isinstance(info, dict) else None,
                            "seed": record.get("seed"), "traceback": error.get("traceback"),
                            "replay": None if replay is None else replay.to_dict(),
                            "attempts": int(record.get("attempts") or 1)})
    summary = run_line(run.manifest, label_of(run), run.run_id, len(run.episodes))
    many = len(run.manifest.get("rollouts") or {}) > 1

    def fault_label(record: Any) -> str:
        label = condition_label(record.get("condition") or {})
        return f"{label_of_rollout(run, str(record.get('rollout')))} · {label}" if many \
            else label

    faults = count_faults(run.episodes, fault_label)
    found: tuple[Any, ...] = ()
    if declares_targets(run.manifest):  # the engine only for a run with targets
        from .targets import pass_k

        found = pass_k(run)
    return Tally(run, summary, outcomes, dict(by_condition), left, errored, rerun, recovered,
                 faults, found)
