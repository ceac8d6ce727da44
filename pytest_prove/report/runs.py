"""What the commands about the store's runs print: ``runs`` (the list), ``show`` (one run's
manifest, tallies and errored episodes), ``prune`` (what was deleted and why the rest was
kept) and ``merge`` (the shards joined into one run).

Every name that came from a rollout or the store goes through
:func:`~pytest_prove.report._format.terminal_text` in the lines; the documents keep them
whole.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_prove.declare.chaos import chaos_text
from pytest_prove.review.flips import Replay
from pytest_prove.review.tallies import RunLine, Tally

from ._format import table, terminal_text
from .environment import recorded_lines
from .notes import fault_text
from .replay import replay_command

__all__ = ["merge_document", "merge_lines", "prune_lines", "runs_lines", "show_document",
           "show_lines", "size_text"]


def runs_lines(root: Path, runs: Sequence[RunLine], baselines: Sequence[RunLine]) -> list[str]:
    if not runs and not baselines:
        return [f"no runs in {root} yet",
                "next: run a sweep, e.g. pytest --prove-save-baseline current"]
    header = ("name", "id", "status", "rollouts", "episodes", "started", "paired with")
    body = [(r["name"], r["run_id"], r["status"], str(r["rollouts"]), str(r["episodes"]),
             r["started"][:19], r["paired_with"] or "-") for r in [*runs, *baselines]]
    damaged = [r for r in [*runs, *baselines] if r.get("damaged")]
    said = [f"damaged: {terminal_text(r['name'])}: {terminal_text(r['damaged'], 300)}"
            for r in damaged]
    if damaged:
        said.append("next: pytest-prove prune deletes damaged run folders; restore a damaged "
                    "baseline with git, or save it again (pytest --prove-save-baseline NAME)")
    return [f"{len(runs)} run(s) and {len(baselines)} baseline(s) in {root}",
            *table(header, body, frozenset({3, 4})), *said,
            "next: pytest-prove show RUN, or pytest-prove diff A B"]


def show_document(t: Tally) -> dict[str, Any]:
    run, m = t.run, t.run.manifest
    return {
        **t.summary, "ended": m.get("ended"), "salt": run.salt, "path": str(run.path),
        "git_commit": m.get("git_commit"), "command_line": m.get("command"),
        "packages": m.get("packages"), "episodes_read": len(run.episodes),
        # The environment the run recorded (None: not recorded, an older run).
        "environment": m.get("environment") if isinstance(m.get("environment"), dict) else None,
        "outcomes": dict(t.outcomes), "by_condition": {k: dict(v) for k, v in
                                                       t.by_condition.items()},
        "without_outcome": dict(t.without_outcome), "errored": t.errored,
        "rerun": {"episodes": t.rerun, "recovered": t.recovered},
        "notes": list(run.notes),
        "faults": {label: c.to_json() for label, c in (t.faults or {}).items()},
        **_pass_k(t),
    }


def _pass_k(t: Tally) -> dict[str, Any]:
    """pass^k and pass@k by condition, in a run that declares targets."""
    if not t.pass_k:
        return {}
    from .targets import pass_k_json

    return {"pass_k": pass_k_json(t.pass_k)}


def _shard_lines(m: Mapping[str, Any]) -> list[str]:
    """A shard's slice, or the shards a merged run holds (see docs/scale.md)."""
    shard, merged = m.get("shard"), m.get("merged")
    if isinstance(shard, Mapping):
        size = sum(len(reps) for keys in (shard.get("slice") or {}).values()
                   for reps in keys.values())
        return [f"shard {shard.get('index')}/{shard.get('count')} of its sweep: {size} "
                "replicates in its slice (join the shards with pytest-prove merge)"]
    if isinstance(merged, Mapping):
        count = merged.get("count")
        held = ", ".join(f"{k}/{count} {terminal_text(str((v or {}).get('name')))!r}"
                         for k, v in sorted((merged.get("shards") or {}).items(),
                                            key=lambda kv: int(kv[0])))
        missing = merged.get("missing") or []
        return [f"merged from shards {held}"
                + (f"; missing {', '.join(f'{k}/{count}' for k in missing)}" if missing
                   else "")]
    regraded = m.get("regraded")
    if isinstance(regraded, Mapping):
        times = regraded.get("times")
        return [f"regraded from {terminal_text(str(regraded.get('from')))!r} with "
                f"{terminal_text(str(regraded.get('grader')))}"
                + (f", each answer graded {times} times" if isinstance(times, int)
                   and times > 1 else "")
                + ": the agent did not run again, its stored answers were graded"]
    return []


def show_lines(t: Tally, verbose: bool) -> list[str]:
    run, m = t.run, t.run.manifest
    label = t.summary["name"]
    lines = [
        f"run {label!r} is {run.status}: {len(run.episodes)} episodes, {t.with_outcome} with "
        f"an outcome, {t.without_outcome.get('no_outcome', 0)} with none, "
        f"{len(t.errored)} errored",
        f"id {run.run_id} · started {run.started or '-'} · ended {m.get('ended') or '-'}"
        f" · salt {run.salt or '-'} · paired with {t.summary['paired_with'] or '-'}",
    ]
    if m.get("git_commit"):
        lines.append(f"git commit {m['git_commit']}")
    lines.extend(_shard_lines(m))
    lines.extend(recorded_lines(m.get("environment"), terminal_text))
    if m.get("command"):
        lines.append("command: " + terminal_text(shlex.join(str(c) for c in m["command"]), 400))
    for rollout_id, info in (m.get("rollouts") or {}).items():
        declaration = (info or {}).get("declaration") or {}
        failures = ", ".join(map(terminal_text, declaration.get("failures", []))) or "-"
        successes = ", ".join(map(terminal_text, declaration.get("successes", []))) or "-"
        chaos = declaration.get("chaos")
        metrics = declaration.get("metrics") or {}
        declared = (f"failures {failures}; successes {successes}" if declaration.get("outcomes")
                    or not isinstance(metrics, dict) or not metrics else
                    "metrics only, no outcomes: " + ", ".join(
                        f"{terminal_text(name)} ({terminal_text(better)} is better)"
                        for name, better in metrics.items())
                    + " (each episode that ended is counted as 'measured')")
        lines.append(f"rollout {terminal_text(info.get('label') or rollout_id)}: {declared}; "
                     f"{declaration.get('replicates', '?')} replicates"
                     + ("" if not chaos else f"; chaos: {terminal_text(chaos_text(chaos))}"))
    names = sorted(t.outcomes)
    if t.by_condition:
        body = [(terminal_text(condition), *(str(c.get(n, 0)) for n in names),
                 str(sum(c.values()))) for condition, c in sorted(t.by_condition.items())]
        lines.extend(table(("condition", *map(terminal_text, names), "episodes"), body,
                           frozenset(range(1, len(names) + 2))))
    if t.faults:
        lines.append("faults injected (chaos): " + fault_text(t.faults, terminal_text)
                     .split(". By condition")[0])
        body = [(terminal_text(label), str(c.episodes), str(c.hit), str(c.calls),
                 str(c.faults), ", ".join(f"{k} {n}" for k, n in c.by_kind.items()) or "-")
                for label, c in t.faults.items()]
        lines.extend(table(("condition", "episodes", "with faults", "calls", "faults",
                            "by kind"), body, frozenset(range(1, 5))))
    if t.pass_k:
        from .targets import pass_k_lines

        lines.extend(pass_k_lines(t.pass_k))
    shown = t.errored if verbose else t.errored[:10]
    for e in shown:
        lines.append(f"errored: {terminal_text(e['condition'])} r{e['replicate']} "
                     f"(seed {e['seed']}, {terminal_text(e['node'] or e['rollout'])}): "
                     f"{terminal_text(e['type'])}: {terminal_text(e['message'], 200)}")
        if e.get("replay"):
            lines.append(f"    replay: {replay_command(Replay.from_dict(e['replay']))}")
        if verbose and e.get("traceback"):
            lines.extend(f"    {terminal_text(line, 200)}"
                         for line in str(e["traceback"]).rstrip().splitlines()[-8:])
    if len(shown) < len(t.errored):
        lines.append(f"... and {len(t.errored) - len(shown)} more errored (-v lists them all)")
    if t.rerun:
        lines.append(f"rerun: {t.rerun} episode(s) ran more than once on their seed (a plugin "
                     f"such as pytest-rerunfailures), each counted once by its last attempt; "
                     f"{t.recovered} ended with an outcome after an earlier attempt had none "
                     "(each record's 'earlier' says how)")
    lines.extend(f"note: {note}" for note in run.notes)
    if run.status == "incomplete" and not run.is_baseline:
        lines.append(f"next: finish it with pytest --prove-resume={run.name}")
    elif t.errored:
        lines.append("next: run a replay line with --pdb to stop where the rollout raised")
    else:
        lines.append(f"next: pytest-prove diff BASELINE {label}")
    return lines


# --------------------------------------------------------------------------- prune, merge


def size_text(count: int) -> str:
    """Bytes as a person reads them: 980 bytes, 12.4 kB, 3.1 MB (powers of 1000)."""
    if count < 1000:
        return f"{count} byte{'' if count == 1 else 's'}"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if count < scale * 1000 or unit == "GB":
            return f"{count / scale:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def _kept_words(kept: Sequence[dict[str, Any]], keep: int) -> str:
    why = [str(r["kept"]) for r in kept]
    parts = []
    if "newest" in why:
        newest = why.count("newest")
        parts.append("the newest" if newest == keep == 1 else f"the newest {newest}"
                     if newest == keep else f"all {newest} (fewer than {keep})")
    if "named" in why:
        parts.append(f"{why.count('named')} named (--named deletes them too)")
    if "being written" in why:
        parts.append(f"{why.count('being written')} being written by a session")
    if "symbolic link" in why:
        parts.append(f"{why.count('symbolic link')} that are symbolic links")
    return "kept " + ", ".join(parts) if parts else "kept none"


def prune_lines(doc: dict[str, Any]) -> list[str]:
    """What prune deleted (or would, with --dry-run), what it kept and why, and the bytes."""
    store, total, deleted = doc["store"], int(doc["runs"]), doc["deleted"]
    baselines = doc["baselines"]
    kept = _kept_words(doc["kept"], int(doc["keep"]))
    if not total:
        head = f"nothing to delete: no runs in {store}"
    elif not deleted:
        head = f"nothing to delete: {total} run(s) in {store}, {kept}"
    elif doc["dry_run"]:
        head = (f"would delete {len(deleted)} of {total} runs in {store}, freeing "
                f"{size_text(int(doc['bytes_freed']))}; {kept}")
    else:
        head = (f"deleted {len(deleted)} of {total} runs in {store}, "
                f"{size_text(int(doc['bytes_freed']))} freed; {kept}")
    lines = [head]
    if deleted:
        lines += table(("name", "id", "status", "started", "size"),
                       [(terminal_text(r["name"]), terminal_text(r["run_id"]), r["status"],
                         str(r["started"])[:19], size_text(int(r["bytes"]))) for r in deleted],
                       frozenset({4}))
    if doc["leftovers"]:
        verb = "would also remove" if doc["dry_run"] else "also removed"
        lines.append(f"{verb} {doc['leftovers']} folder(s) an interrupted prune left in "
                     f"{store}/runs")
    for failure in doc["failed"]:
        lines.append(f"not deleted: run {terminal_text(failure['name'])!r} "
                     f"({failure['path']}): {failure['reason']}")
    lines.append(f"baselines are never deleted: {len(baselines)} in {store}/baselines"
                 + (f" ({', '.join(terminal_text(b) for b in baselines[:6])}"
                    f"{' ...' if len(baselines) > 6 else ''})" if baselines else ""))
    if doc["failed"]:
        lines.append("next: make those folders writable (or stop what holds them), then "
                     "prune again")
    elif doc["dry_run"] and (deleted or doc["leftovers"]):
        lines.append("next: the same command without --dry-run deletes them")
    return lines


def merge_document(run: Any, saved: str | None) -> dict[str, Any]:
    """``merge --json``: the merged run, its shards, and what it lacks."""
    merged = run.manifest.get("merged") or {}
    return {"run": run.name, "run_id": run.run_id, "status": run.status, "salt": run.salt,
            "episodes": len(run.episodes), "count": merged.get("count"),
            "shards": merged.get("shards"), "missing": merged.get("missing"),
            "baseline": saved}


def merge_lines(run: Any, saved: str | None) -> list[str]:
    """What ``merge`` did: the verdict on completeness first, the shards, the next step."""
    merged = run.manifest.get("merged") or {}
    count = int(merged.get("count") or 0)
    missing = [int(k) for k in merged.get("missing") or []]
    shards = merged.get("shards") or {}
    name = terminal_text(run.name)
    head = (f"merged {len(shards)} of {count} shards into run {name!r}: "
            f"{len(run.episodes):,} episodes, salt {terminal_text(run.salt)}, ")
    if missing:
        head += ("incomplete: slice(s) " + ", ".join(f"{k}/{count}" for k in missing)
                 + " missing")
    else:
        head += "complete"
    lines = [head]
    for index, info in sorted(shards.items(), key=lambda kv: int(kv[0])):
        lines.append(f"  shard {index}/{count}: run {terminal_text(str(info.get('name')))!r} "
                     f"({terminal_text(str(info.get('run_id')))})")
    if saved is not None:
        lines.append(terminal_text(saved, 1000))
    paired = (run.manifest.get("paired_with") or {}).get("baseline")
    if missing:
        lines.append(f"next: run the missing shard(s) with the same salt, then merge every "
                     f"shard's run again; a check or a baseline of {name!r} is refused "
                     "until then")
    elif paired:
        lines.append(f"next: pytest-prove check baseline:{terminal_text(str(paired))} {name}")
    else:
        lines.append(f"next: pytest-prove show {name}, or compare it: pytest-prove check "
                     f"BASELINE {name}")
    return lines
