"""Joining the runs of a sweep's shards (``--prove-shard K/N``) into one run.

Each shard's run records its slice in its manifest (``shard``: index, count and the
replicates it was given).  :func:`merge_runs` refuses, with the reason, shards that cannot be
one sweep: a different salt (their seeds are not the same sweep's), plan, declaration,
package versions, pairing or number of shards; a slice given twice; an episode held by two
shards or outside its own slice; a shard that did not finish.  The merged run is written as
any run is (a new folder, its lock, episodes appended, the manifest written to a temporary
file and renamed), records which shards it holds, and is ``complete`` only when every slice
is there; :func:`missing_slices` words what an incomplete merge lacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from filelock import FileLock, Timeout

from ..record import StoreError, ending, episode_name, identity, utc_now
from . import RUN_FORMAT, Run, Store, check_run_name

__all__ = ["manifest_declarations", "merge_runs", "missing_slices"]

Key = tuple[str, str, int]


def _shard_of(run: Run) -> tuple[int, int, dict[str, Any]]:
    found = run.manifest.get("shard")
    if run.is_baseline or not isinstance(found, Mapping):
        what = ("a baseline" if run.is_baseline else "already a merge of shards"
                if run.manifest.get("merged") else "a run of the whole sweep")
        raise StoreError(
            f"{run.name!r} is {what}, not a shard: merge joins the runs of "
            "pytest --prove-shard=K/N, one for each K")
    try:
        index, count = int(found["index"]), int(found["count"])
        slice_ = found["slice"]
        if not isinstance(slice_, Mapping) or not 1 <= index <= count:
            raise ValueError
    except (KeyError, TypeError, ValueError):
        raise StoreError(f"run {run.name!r}: its manifest's shard entry is damaged "
                         f"({found!r:.200}); run that shard again") from None
    return index, count, dict(slice_)


def _slice_keys(slice_: Mapping[str, Any]) -> set[Key]:
    return {(str(rid), str(key), int(r)) for rid, keys in slice_.items()
            for key, reps in keys.items() for r in reps}


def _plan_shape(manifest: Mapping[str, Any]) -> dict[str, tuple[int, tuple[str, ...]]]:
    plan = manifest.get("plan") or {}
    return {str(rid): (int(info.get("replicates") or 0), tuple(info.get("conditions") or ()))
            for rid, info in plan.items() if isinstance(info, Mapping)}


def manifest_declarations(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Each rollout's declaration as a run's manifest stores it (what merge compares, and
    what a gate compares with its baseline's)."""
    rollouts = manifest.get("rollouts") or {}
    return {str(rid): info.get("declaration") for rid, info in rollouts.items()
            if isinstance(info, Mapping)}


def _agree(runs: Sequence[Run], what: str, read: Any, fix: str) -> None:
    """Refuse when ``read(run)`` is not the same for every run, naming the first that differs."""
    first = read(runs[0])
    for run in runs[1:]:
        if read(run) != first:
            raise StoreError(
                f"runs {runs[0].name!r} and {run.name!r} differ in {what}, so they are not "
                f"shards of one sweep; {fix}")


def _selection(runs: Sequence[Run]) -> dict[str, Any]:
    """What the shards' sessions left out on purpose, as one session's: a replicate (or a
    skipped condition) only when every shard left it out (each deselects the others'
    slices), the paths and files left out that they name."""
    found: list[Mapping[str, Any]] = []
    for run in runs:
        selection = run.manifest.get("selection")
        found.append(selection if isinstance(selection, Mapping) else {})
    deselected: dict[str, dict[str, list[int]]] = {}
    first = found[0].get("deselected") or {}
    for rid, keys in first.items():
        for key, reps in keys.items():
            common = set(reps)
            for other in found[1:]:
                common &= set(((other.get("deselected") or {}).get(rid) or {}).get(key) or ())
            if common:
                deselected.setdefault(rid, {})[key] = sorted(common)
    skipped: dict[str, list[str]] = {}
    for rid, keys in (found[0].get("skipped") or {}).items():
        common_keys = [k for k in keys
                       if all(k in ((o.get("skipped") or {}).get(rid) or ()) for o in found)]
        if common_keys:
            skipped[rid] = common_keys

    def union(field: str) -> list[str]:
        seen: list[str] = []
        for selection in found:
            seen.extend(p for p in selection.get(field) or () if p not in seen)
        return seen

    return {"deselected": deselected, "skipped": skipped, "paths": union("paths"),
            "narrowed": all(bool(s.get("narrowed")) for s in found),
            "ignored": union("ignored"), "skipped_files": union("skipped_files")}


def missing_slices(manifest: Mapping[str, Any], name: str) -> str | None:
    """Why a merged run is incomplete (the slices it lacks), or None."""
    merged = manifest.get("merged")
    if not isinstance(merged, Mapping) or not merged.get("missing"):
        return None
    count = int(merged.get("count") or 0)
    missing = [int(k) for k in merged["missing"]]
    shown = ", ".join(f"{k}/{count}" for k in missing)
    return (f"run {name!r} merges {count - len(missing)} of {count} shards: slice(s) {shown} "
            f"missing; run them (pytest --prove-shard=K/{count}, with the same salt) and "
            "merge every shard's run again")


#: How long a merge waits for another merge into the same store to finish.
_MERGE_WAIT: Final = 600.0


def merge_runs(store: Store, runs: Sequence[Run], name: str) -> Run:
    """Write the shards ``runs`` as one new run ``name`` and return it as read back.

    One merge at a time writes into a store (a lock file in its ``runs`` folder), so that
    two merges into one name cannot both find it free and write two runs of that name."""
    check_run_name(name)
    if not runs:
        raise StoreError("name at least one shard's run to merge")
    path = store.runs_dir / ".merge.lock"
    try:
        store.runs_dir.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():  # an older filelock would truncate what it points at
            raise StoreError(f"{path} is a symbolic link; delete it, then merge again")
        lock = FileLock(str(path))
        lock.acquire(timeout=_MERGE_WAIT)
    except Timeout:
        raise StoreError(f"another pytest-prove merge into {store.root} has held {path} for "
                         f"{_MERGE_WAIT:.0f} s; wait for it to end, then merge again") from None
    except OSError as exc:
        raise StoreError(f"{path}: cannot take the store's merge lock "
                         f"({exc.strerror or exc})") from None
    try:
        return _merge_runs(store, runs, name)
    finally:
        lock.release()


def _merge_runs(store: Store, runs: Sequence[Run], name: str) -> Run:
    taken = {str(m.get(f)) for _, m in store.runs() for f in ("name", "run_id")}
    if name in taken:
        raise StoreError(f"a run named {name!r} is already in {store.root}; merge into a new "
                         "name (--name), or delete the old run first")
    shards: dict[int, Run] = {}
    slices: dict[int, set[Key]] = {}
    counts = set()
    for run in runs:
        index, count, slice_ = _shard_of(run)
        counts.add(count)
        if index in shards:
            other = shards[index]
            same = other.run_id == run.run_id
            raise StoreError(
                f"shard {index}/{count} is given twice"
                + (f" (run {run.name!r} named twice)" if same else
                   f" (runs {other.name!r} and {run.name!r}: that shard ran twice)")
                + "; give each shard's run once: keep one of them")
        if run.status != "complete":
            raise StoreError(
                f"run {run.name!r} (shard {index}/{count}) is {run.status}: finish it with "
                f"pytest --prove-shard={index}/{count} --prove-resume={run.name}, then merge")
        shards[index] = run
        slices[index] = _slice_keys(slice_)
    ordered = [shards[k] for k in sorted(shards)]
    if len(counts) > 1:
        shown = ", ".join(f"{r.name!r} of {_shard_of(r)[1]}" for r in ordered)
        raise StoreError(f"the runs cut the sweep into different numbers of shards ({shown}); "
                         "merge the shards of one --prove-shard=K/N only")
    total = counts.pop()
    _agree(ordered, "salt (their seeds are not the same sweep's)", lambda r: r.salt,
           "give every shard the same --prove-salt=WORD, or pair them all with the same "
           "--prove-baseline")
    _agree(ordered, "plan (rollouts, conditions or replicates)",
           lambda r: _plan_shape(r.manifest),
           "run every shard with the same tests, paths and options")
    _agree(ordered, "declarations (outcomes, failures, successes)",
           lambda r: manifest_declarations(r.manifest), "run every shard on the same code")
    _agree(ordered, "package versions", lambda r: r.manifest.get("packages"),
           "install the same versions (and Python) for every shard")
    _agree(ordered, "recorded environment (declared variables, packages, system)",
           lambda r: _environment_shape(r.manifest),
           "run every shard with the same prove_record_env values, packages and system")
    _agree(ordered, "baseline they were paired with",
           lambda r: (r.manifest.get("paired_with") or {}).get("baseline"),
           "pair every shard with the same --prove-baseline, or none")
    owner: dict[Key, int] = {}
    for index, keys in slices.items():
        for key in keys:
            if key in owner:
                raise StoreError(
                    f"shards {owner[key]}/{total} and {index}/{total} overlap: both were given "
                    f"{episode_name(*key)}; they were not cut from one collected sweep (run "
                    "every shard with the same tests and options)")
            owner[key] = index
    episodes: list[Mapping[str, Any]] = []
    for index, run in zip(sorted(shards), ordered, strict=True):
        for record in run.episodes:
            key = identity(record)
            if owner.get(key) != index:
                where = ("is in no shard's slice" if key not in owner
                         else f"belongs to shard {owner[key]}/{total}")
                raise StoreError(
                    f"run {run.name!r} (shard {index}/{total}) holds "
                    f"{episode_name(*key)}, which {where}: the episode is duplicated "
                    "or the run was edited; run that shard again")
            episodes.append(record)
    missing = [k for k in range(1, total + 1) if k not in shards]
    planned = {(rid, key, r) for rid, (reps, keys) in _plan_shape(ordered[0].manifest).items()
               for key in keys for r in range(reps)}
    if not missing and set(owner) != planned:
        raise StoreError(
            f"the {total} shards' slices do not make up the plan ({len(owner)} replicates "
            f"for {len(planned)} planned); they were not cut from one collected sweep")
    if not episodes:
        raise StoreError("the shards hold no episode: there is nothing to merge")
    first = ordered[0].manifest
    rollouts: dict[str, Any] = {}
    for run in ordered:
        for rid, info in (run.manifest.get("rollouts") or {}).items():
            rollouts.setdefault(rid, info)
    commits = sorted({str(r.manifest.get("git_commit")) for r in ordered
                      if r.manifest.get("git_commit")})
    tally = {"episodes": 0, "with_outcome": 0, "no_outcome": 0, "errored": 0}
    for record in episodes:
        tally["episodes"] += 1
        tally[ending(record)] += 1
    merged: dict[str, Any] = {
        "count": total, "missing": missing,
        "shards": {str(k): {"run_id": shards[k].run_id, "name": shards[k].name,
                            "git_commit": shards[k].manifest.get("git_commit")}
                   for k in sorted(shards)}}
    if len(commits) > 1:
        merged["git_commits"] = commits  # the shards ran on different commits
    manifest: dict[str, Any] = {
        "paired_with": first.get("paired_with"),
        "rollouts": rollouts,
        "packages": first.get("packages"),
        **_merged_environment(ordered),
        "git_commit": commits[0] if len(commits) == 1 else None,
        "command": ["pytest-prove", "merge", *(r.name for r in runs), "--name", name],
        "plan": first.get("plan"),
        "merged": merged,
        "counts": tally,
    }
    writer = store.new_run(name=name, salt=ordered[0].salt, manifest=manifest)
    assert writer.manifest["format"] == RUN_FORMAT
    try:
        writer.append(sorted(episodes, key=identity))
        writer.write_manifest(
            ended=utc_now(), status="incomplete" if missing else "complete",
            missing=len(planned - set(owner)) if missing else 0,
            selection=_selection(ordered))
    except OSError as exc:
        raise StoreError(f"{writer.directory}: cannot write the merged run "
                         f"({exc.strerror or exc})") from None
    finally:
        writer.close()
    return store.read(writer.directory)


def _environment_shape(manifest: Mapping[str, Any]) -> object:
    """What shards of one sweep must have recorded alike (their models seen may differ)."""
    found = manifest.get("environment")
    if not isinstance(found, dict):
        return None
    return {k: found.get(k) for k in ("variables", "packages", "system")}


def _merged_environment(runs: list[Run]) -> dict[str, Any]:
    """The shards' recorded environment (one, as they agree), their models seen added up;
    nothing when the first shard recorded none."""
    first = runs[0].manifest.get("environment")
    if not isinstance(first, dict):
        return {}
    models: dict[str, dict[str, int]] = {}
    for run in runs:
        found = run.manifest.get("environment")
        seen = found.get("models") if isinstance(found, dict) else None
        for kind, names in (seen or {}).items():
            into = models.setdefault(str(kind), {})
            for name, count in (names or {}).items():
                into[str(name)] = into.get(str(name), 0) + int(count)
    return {"environment": {**first, "models": models}}
