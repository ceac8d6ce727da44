"""Whether a run may become a baseline, and saving it.

A baseline is what every later gate compares with, so it is written only from a complete
run, never with a condition that has no outcome to compare with, and a refresh only from a
run that holds every condition of the baseline it replaces.  Saving over another baseline
says what the old one held that the new one does not.  The answer is one line for the
person who asked.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

from ..declare.spec import condition_label, quoted_label
from ..record import has_outcome
from . import Run, Store, StoreError
from .merging import missing_slices

__all__ = ["MAX_ERRORED", "BaselineNote", "save_baseline"]

#: The largest share of a condition's episodes that may have ended without an outcome
#: (errors, crashes, timeouts, prove.NoOutcome) in a run saved as a baseline: above a
#: quarter, it is rarely the agent and usually an outage, a rate limit or a broken fixture,
#: what is left of the condition is what the fault let through, and every later gate would
#: compare few twins there. --prove-max-errored (ini prove_max_errored) raises it on purpose.
MAX_ERRORED: Final = 0.25


@final
@dataclass(frozen=True, slots=True)
class BaselineNote:
    """What became of a baseline asked for, said once where it is decided: whether it was
    ``saved``, and the line for the person who asked (``baseline 'NAME' saved from run ...``
    or ``not saved: baseline 'NAME' ...`` with the reason and the fix)."""

    saved: bool
    text: str


def _refused(text: str) -> BaselineNote:
    return BaselineNote(saved=False, text=text)


def _labels(run: Run, keys: set[tuple[str, str]]) -> list[str]:
    found: dict[tuple[str, str], str] = {}
    for record in run.episodes:
        key = (str(record["rollout"]), str(record["condition_key"]))
        if key in keys:
            found.setdefault(key, condition_label(dict(record.get("condition") or {})))
    return sorted(found.values())


def _shown(labels: list[str]) -> str:
    return ", ".join(map(quoted_label, labels[:5])) + (" ..." if len(labels) > 5 else "")


def save_baseline(store: Store, name: str, run: Run, *, missing: int,
                  replacing: Run | None = None, max_errored: float = MAX_ERRORED,
                  thin: Callable[[Run], str | None] | None = None) -> BaselineNote:
    """Write ``run`` as baseline ``name`` (``replacing`` the one a gate compared with), or
    say why not: a :class:`BaselineNote`, saved or not, whose line says which and why.

    Refused besides: a condition more than ``max_errored`` of whose episodes ended without
    an outcome, and what ``thin`` says (the design check of the episodes with an outcome,
    :func:`pytest_prove.review.vouch.thin_baseline`, which this layer cannot import). The
    old baseline is left as it was."""
    if any(r.get("replayed") for r in run.episodes):
        return _refused(
            f"not saved: baseline {name!r} must be evidence, and run {run.name!r} replayed "
            "its model calls from the cache (--prove-cache=replay); save a baseline from a "
            "run made without the cache, or with --prove-cache=record")
    merged = missing_slices(run.manifest, run.name)
    if merged is not None:
        return _refused(
            f"not saved: baseline {name!r} is written only from a complete run, and {merged}")
    stopped = _labels(run, _stopped_early(run.manifest.get("sequential")))
    if stopped:
        return _refused(
            f"not saved: baseline {name!r} must hold every replicate of every condition "
            f"for later runs to pair with by replicate, and run {run.name!r} is "
            f"sequential: it stopped {len(stopped)} condition(s) once decided, before "
            f"their last replicate ({_shown(stopped)}); save the baseline from a run "
            "without --prove-sequential (pytest --prove-save-baseline NAME runs every "
            "replicate, even of rollouts declaring sequential=True)")
    if run.status != "complete":
        return _refused(
            f"not saved: baseline {name!r} is written only from a complete run, and run "
            f"{run.name!r} is incomplete ({missing} replicates missing); finish it with "
            f"--prove-resume={run.name}")
    every = {(str(r["rollout"]), str(r["condition_key"])) for r in run.episodes}
    covered = {(str(r["rollout"]), str(r["condition_key"])) for r in run.episodes
               if has_outcome(r)}
    empty = _labels(run, every - covered)
    if empty:
        return _refused(
            f"not saved: baseline {name!r} would hold {len(empty)} condition(s) with no "
            f"outcome to compare with ({_shown(empty)}); make them end with an outcome, "
            "then save again")
    widened = ""
    ran: Counter[tuple[str, str]] = Counter()
    lost: Counter[tuple[str, str]] = Counter()
    for record in run.episodes:
        key = (str(record["rollout"]), str(record["condition_key"]))
        ran[key] += 1
        if not has_outcome(record):
            lost[key] += 1
    shares = {key: lost[key] / ran[key] for key in ran}
    over = {key for key, found in shares.items() if found > max_errored + 1e-12}
    worst = max(shares, key=lambda k: (shares[k], k)) if shares else None
    if over:
        labels = _labels(run, over)
        top = max(shares[k] for k in over)
        return _refused(
            f"not saved: baseline {name!r} would hold {len(over)} condition(s) where more "
            f"than {max_errored:g} of the episodes ended without an outcome (errors, "
            f"timeouts, no outcome; up to {top:.2f}: {_shown(labels)}), which looks like "
            "an outage, and every later gate would compare few twins there; find why "
            f"(pytest-prove show {run.name} -v), fix it and run again, or raise the bound "
            "on purpose with --prove-max-errored (ini prove_max_errored)")
    if max_errored > MAX_ERRORED and worst is not None:
        widened = (f"; --prove-max-errored {max_errored:g} widened the share of episodes "
                   f"without an outcome a baseline may hold (default {MAX_ERRORED:g}): up to "
                   f"{shares[worst]:.2f} here ({_shown(_labels(run, {worst}))})")
    # Only a run that lost episodes can be thinner than its design (and the check imports
    # the engine).
    reason = thin(run) if thin is not None and any(lost.values()) else None
    if reason is not None:
        return _refused(
            f"not saved: baseline {name!r} would be too thin to gate with: {reason}; "
            f"find why its episodes ended without an outcome (pytest-prove show "
            f"{run.name} -v), fix it and run again")
    if replacing is not None:
        wanted = {(str(r["rollout"]), str(r["condition_key"])) for r in replacing.episodes}
        left = _labels(replacing, wanted - covered)
        if left:
            return _refused(
                f"not saved: baseline {name!r} was not replaced, because this run did not "
                f"cover {len(left)} of its conditions ({_shown(left)}); run them all, "
                "without -k or a shard")
    path = store.baseline_path(name)
    replaces = path.is_file() or path.with_suffix(".jsonl").is_file()
    dropped = _dropped(store, name, run, replacing) if replaces and replacing is None else ""
    try:
        path = store.write_baseline(name, run)
    except (OSError, StoreError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        return _refused(f"not saved: baseline {name!r} could not be written: {reason}")
    verb = "replaced by" if replaces else "saved from"
    return BaselineNote(saved=True, text=f"baseline {name!r} {verb} run {run.name!r}: "
                                         f"{_rel(path)}{dropped}{widened}")


def _stopped_early(sequential: object) -> set[tuple[str, str]]:
    """The conditions a sequential run (its manifest's ``sequential``) decided before its
    design's last look: they hold only their first replicates."""
    if not isinstance(sequential, Mapping):
        return set()
    looks = (sequential.get("design") or {}).get("looks") if isinstance(
        sequential.get("design"), Mapping) else None
    last = looks[-1] if isinstance(looks, list) and looks else None
    conditions = sequential.get("conditions")
    found: set[tuple[str, str]] = set()
    for rollout_id, keys in (conditions.items() if isinstance(conditions, Mapping) else ()):
        for key, info in (keys.items() if isinstance(keys, Mapping) else ()):
            ran = info.get("replicates") if isinstance(info, Mapping) else None
            if isinstance(ran, int) and (not isinstance(last, int) or ran < last):
                found.add((str(rollout_id), str(key)))
    return found


def _dropped(store: Store, name: str, run: Run, known: Run | None) -> str:
    """What a baseline about to be overwritten holds that ``run`` does not."""
    try:
        old = known if known is not None else store.load_baseline(name)
    except StoreError:
        return " (the old file could not be read, so what it held is not listed)"
    covered = {(str(r["rollout"]), str(r["condition_key"])) for r in run.episodes}
    gone = _labels(old, {(str(r["rollout"]), str(r["condition_key"]))
                         for r in old.episodes} - covered)
    if not gone:
        return ""
    return f"; it no longer holds {len(gone)} condition(s) the old baseline had ({_shown(gone)})"


def _rel(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
