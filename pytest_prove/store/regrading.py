"""Writing a regraded run (``pytest-prove regrade``): the episodes of a stored run, each on
its seed, graded again, as a new run that says where it came from.

It is written as any run is (a new folder, its lock, episodes appended as whole lines, the
manifest written to a temporary file and renamed): with the source's salt, so that it pairs
with the source (and with what the source paired with), and its manifest's ``regraded``
naming the source and the grader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..record import StoreError, ending, identity, utc_now
from . import Run, Store

__all__ = ["check_new_name", "write_regraded"]


def check_new_name(store: Store, name: str) -> None:
    """Refuse ``name`` for the regraded run when a run already has it."""
    taken = {str(m.get(f)) for _, m in store.runs() for f in ("name", "run_id")}
    if name in taken:
        raise StoreError(f"a run named {name!r} is already in {store.root}; name the "
                         "regraded run anew (--name), or delete the old one first")


def write_regraded(store: Store, source: Run, episodes: Sequence[Mapping[str, Any]], *,
                   name: str, grader: str, times: int, source_label: str) -> Run:
    """The regraded run ``name``, written in ``store``."""
    check_new_name(store, name)
    counts = {"episodes": 0, "with_outcome": 0, "no_outcome": 0, "errored": 0}
    for record in episodes:
        counts["episodes"] += 1
        counts[ending(record)] += 1
    first = source.manifest
    manifest: dict[str, Any] = {
        "paired_with": first.get("paired_with"),
        "rollouts": first.get("rollouts"),
        "packages": first.get("packages"),
        "git_commit": first.get("git_commit"),
        "command": ["pytest-prove", "regrade", source_label, "--grader", grader,
                    "--name", name] + (["--times", str(times)] if times > 1 else []),
        "plan": first.get("plan"),
        "regraded": {"from": source_label, "run_id": source.run_id, "grader": grader,
                     "times": times},
        "counts": counts,
    }
    writer = store.new_run(name=name, salt=source.salt, manifest=manifest)
    try:
        writer.append(sorted(episodes, key=identity))
        writer.write_manifest(ended=utc_now(), status=source.status,
                              missing=first.get("missing", 0),
                              selection=first.get("selection"))
    except OSError as exc:
        raise StoreError(f"{writer.directory}: cannot write the regraded run "
                         f"({exc.strerror or exc})") from None
    finally:
        writer.close()
    return store.read(writer.directory)
