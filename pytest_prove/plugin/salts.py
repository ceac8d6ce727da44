"""Which salt a session takes when nothing else decides: ``--lf`` reruns on the seeds that failed.

A session paired with a baseline takes the baseline's salt, a resumed run its own, a replay
the replayed run's; any other draws a fresh one.  That made ``pytest --lf`` after an unpaired
run useless for a failing replicate: it ran again on a new seed, so the failure did not come
back.  So the controller remembers, in pytest's cache (``prove/failed-salts``), the salt each
failed rollout item ran on (the ones pytest's own ``cache/lastfailed`` holds), and a later
session given ``--lf`` or ``--ff`` takes the salt of those failures.  When they ran on more
than one salt, the newest session's wins and the summary says which failures do not get their
seeds back (a replay of their run does).

:func:`choose_salt` decides it, in that order, from the runs the options name, once it has
loaded them and refused what cannot go with them (a resumed run paired with another baseline,
a replay with options it does not take).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, final

import pytest

from ..declare.seeds import new_salt, split_arm
from ..record import utc_now
from ..store import Run, Store, StoreError
from ..store.arms import declared_arms
from .settings import Settings

__all__ = ["CACHE_KEY", "FailedSalt", "Start", "choose_salt", "lf_salt", "remember_failed"]

#: pytest cache key: failed item id -> {"salt", "run", "when"}.
CACHE_KEY: Final = "prove/failed-salts"


@final
@dataclass(frozen=True, slots=True)
class FailedSalt:
    """The salt the failed items of the last session(s) ran on, and what it leaves out."""

    salt: str
    run: str | None  # the run those episodes were stored in (None: a replay's or unknown)
    items: int  # failed rollout items that ran on this salt
    elsewhere: dict[str, int]  # other runs (or salts) -> failed items that ran on them
    ids: frozenset[str] = frozenset()  # the ids of those items

    def note(self, ran: Iterable[str] | None = None) -> str:
        """What the session's summary says of its salt; ``ran``: the rollout items this
        session ran (None: all of those failures reran). pytest runs every item when it
        collects none of the failures it remembers (the sweep was edited): then none reran on
        its seed, whatever the salt."""
        where = f"run {self.run!r}" if self.run else "the last session"
        rerun = self.items if ran is None else len(self.ids & set(map(str, ran)))
        if rerun == 0:
            text = (f"salt {self.salt} taken from {where} (--lf/--ff), but none of the "
                    f"{self.items} failed replicate item(s) that ran on it was collected this "
                    "time (were their test or its parameters changed?), so no failure reran "
                    "on its seed")
        elif rerun < self.items:
            text = (f"salt {self.salt} taken from {where}, which {self.items} failed replicate "
                    f"item(s) ran on (--lf/--ff): the {rerun} of them collected this time "
                    "rerun on the seeds they failed on")
        else:
            text = (f"salt {self.salt} taken from {where}, which {self.items} failed replicate "
                    f"item(s) ran on (--lf/--ff): they rerun on the seeds they failed on")
        if self.elsewhere:
            other = ", ".join(f"{n} of {name}" for name, n in sorted(self.elsewhere.items()))
            text += (f"; failed items of other salts ({other}) rerun on new seeds, so replay "
                     "those with --prove-replay=RUN instead")
        return text


def _entries(config: pytest.Config) -> dict[str, Any]:
    cache = getattr(config, "cache", None)
    found = cache.get(CACHE_KEY, {}) if cache is not None else {}
    return found if isinstance(found, dict) else {}


def lf_salt(config: pytest.Config) -> FailedSalt | None:
    """With ``--lf`` or ``--ff``: the salt the failures pytest remembers ran on, if any."""
    opt = config.option
    if not (getattr(opt, "lf", False) or getattr(opt, "failedfirst", False)):
        return None
    cache = getattr(config, "cache", None)
    if cache is None:
        return None
    lastfailed = cache.get("cache/lastfailed", {})
    entries = _entries(config)
    if not isinstance(lastfailed, dict) or not entries:
        return None
    by_salt: dict[str, list[Mapping[str, Any]]] = {}
    ids: dict[str, set[str]] = {}
    for item in lastfailed:
        entry = entries.get(item)
        if isinstance(entry, dict) and isinstance(entry.get("salt"), str) and entry["salt"] \
                and "\x1f" not in entry["salt"]:
            by_salt.setdefault(entry["salt"], []).append(entry)
            ids.setdefault(entry["salt"], set()).add(str(item))
    if not by_salt:
        return None
    salt = max(by_salt, key=lambda s: max(str(e.get("when", "")) for e in by_salt[s]))
    newest = max(by_salt[salt], key=lambda e: str(e.get("when", "")))
    elsewhere: dict[str, int] = {}
    for other, found in by_salt.items():
        if other != salt:
            name = found[0].get("run") or f"salt {other}"
            elsewhere[str(name)] = elsewhere.get(str(name), 0) + len(found)
    run = newest.get("run")
    return FailedSalt(salt=salt, run=run if isinstance(run, str) else None,
                      items=len(by_salt[salt]), elsewhere=elsewhere,
                      ids=frozenset(ids[salt]))


def remember_failed(config: pytest.Config, *, salt: str, run: str | None,
                    ran: Iterable[str]) -> None:
    """Keep the salt of every rollout item this session ran that pytest now counts as failed
    (``--lf`` will rerun it), and forget those that passed or left pytest's list."""
    cache = getattr(config, "cache", None)
    lf = config.pluginmanager.get_plugin("lfplugin")
    lastfailed = getattr(lf, "lastfailed", None)
    if cache is None or not isinstance(lastfailed, dict) or not salt:
        return
    failed = {str(k) for k in lastfailed}  # pytest 9 keys them by NodeId, older by str
    # Kept: the items pytest still counts as failed (what passed has left its list).
    entries = {k: v for k, v in _entries(config).items() if k in failed}
    if failed:  # else nothing this session ran is to be kept (100,000 items: 0.2 s saved)
        when = utc_now()
        for item in map(str, ran):
            if item in failed:
                entries[item] = {"salt": salt, "run": run, "when": when}
    cache.set(CACHE_KEY, entries)


@final
@dataclass(frozen=True, slots=True)
class Start:
    """The runs a session starts from, as the options name them, and the failures of the last
    session(s) whose salt it took (--lf, --ff)."""

    baseline: Run | None
    resume: Run | None
    replay: Run | None
    last_failed: FailedSalt | None


def choose_salt(config: pytest.Config, settings: Settings, store: Store) -> Start:
    """Load the runs the options name and set this session's salt (and, for a resumed or a
    replayed run, what it runs) in ``settings``; a usage error for what cannot go with them."""
    opt = config.option
    try:
        baseline = store.load_baseline(opt.prove_baseline) if opt.prove_baseline else None
        resume = store.load(opt.prove_resume) if opt.prove_resume else None
    except StoreError as exc:
        raise pytest.UsageError(str(exc)) from None
    if resume is not None and opt.prove_replay is None:
        baseline = _paired_baseline(store, resume, baseline)
    replay = _replayed(store, opt)
    settings.chaos_references = _chaos_references(baseline, resume, settings)
    settings.arm_references = [[kind, run.name, declared_arms(run.manifest)]
                               for kind, run in (("run", resume), ("baseline", baseline))
                               if run is not None]
    last_failed: FailedSalt | None = None
    if replay is not None:
        settings.salt = replay.salt
        settings.replay = _replicates_of(replay)
    elif resume is not None:
        _check_resumed_shard(resume, opt.prove_shard)
        if "sequential" in resume.manifest:
            raise pytest.UsageError(
                f"run {resume.name!r} is sequential: its conditions were decided at their "
                "looks, and running their other replicates now would read them after a "
                "decision the error rates were spent on; start a new run instead")
        settings.salt = resume.salt
        settings.done = frozenset(_done_keys(resume.episodes))
        if baseline is not None and resume.salt != baseline.salt:
            raise pytest.UsageError(
                f"run {resume.name!r} was not paired with baseline {baseline.name!r} (their "
                "salts differ), so resuming it against that baseline would break the pairing; "
                "drop --prove-baseline or start a new run")
    elif baseline is not None:
        settings.salt = baseline.salt
    elif opt.prove_salt is not None:
        settings.salt = opt.prove_salt
    elif (last_failed := lf_salt(config)) is not None:
        settings.salt = last_failed.salt
    else:
        settings.salt = new_salt()
    return Start(baseline, resume, replay, last_failed)


def _paired_baseline(store: Store, resume: Run, given: Run | None) -> Run | None:
    """The baseline a resumed run is gated against: the one its manifest says it was paired
    with (loaded by that name when --prove-baseline is not given), or a usage error saying
    why it cannot be. A run paired with a baseline never finishes as an unpaired run."""
    paired = resume.manifest.get("paired_with")
    name = paired.get("baseline") if isinstance(paired, dict) else None
    if not isinstance(name, str) or not name:
        return given
    if given is not None and given.name != name:
        raise pytest.UsageError(
            f"run {resume.name!r} was paired with baseline {name!r}, not {given.name!r}; "
            f"resume it with --prove-baseline={name} (or without --prove-baseline), or start "
            "a new run against the other baseline")
    try:
        found = given if given is not None else store.load_baseline(name)
    except StoreError:
        raise pytest.UsageError(
            f"run {resume.name!r} was paired with baseline {name!r}, which this store no "
            f"longer holds, so it could not be gated when finished; restore "
            f"baselines/{name} (git checkout) and resume again, or start a new run") from None
    run_id = paired.get("run_id") if isinstance(paired, dict) else None
    if isinstance(run_id, str) and run_id and found.run_id != run_id:
        raise pytest.UsageError(
            f"run {resume.name!r} was paired with baseline {name!r} as it was then (run "
            f"{run_id}); it has been replaced since (now run {found.run_id}), so the run's "
            "first episodes were compared with another baseline than its last would be; "
            f"start a new run with --prove-baseline={name}")
    return found


def _check_resumed_shard(resume: Run, asked: tuple[int, int] | None) -> None:
    """A shard's run is resumed as the same shard; a whole run is not resumed as a shard."""
    found = resume.manifest.get("shard")
    held = (found.get("index"), found.get("count")) if isinstance(found, dict) else None
    if held == asked:
        return
    if held is None:
        raise pytest.UsageError(
            f"run {resume.name!r} ran the whole sweep, not a shard; resume it without "
            "--prove-shard")
    raise pytest.UsageError(
        f"run {resume.name!r} is shard {held[0]}/{held[1]} of its sweep; resume it with "
        f"--prove-shard={held[0]}/{held[1]}")


def _replayed(store: Store, opt: Any) -> Run | None:
    """The run --prove-replay names, or a usage error saying what is wrong."""
    if opt.prove_replay is None:
        return None
    try:
        return store.open(opt.prove_replay)
    except StoreError as exc:
        raise pytest.UsageError(f"--prove-replay: {exc}") from None


def _chaos_references(baseline: Run | None, resume: Run | None,
                      settings: Settings) -> list[Any]:
    """The runs this run's faults are checked against at collection (see Settings)."""
    from ..declare.chaos import chaos_of

    found: list[Any] = []
    if resume is not None:
        found.append([f"run {resume.name}", chaos_of(resume.manifest.get("rollouts")), True])
    if baseline is not None and not settings.chaos_asked:
        found.append([f"baseline {baseline.name}",
                      chaos_of(baseline.manifest.get("rollouts")), False])
    return found


def _replicates_of(run: Run) -> dict[str, int]:
    """Each rollout's replicates in ``run``, so that a replay's items have the ids they had."""
    found = {}
    for rollout_id, info in (run.manifest.get("rollouts") or {}).items():
        declaration = (info or {}).get("declaration") if isinstance(info, dict) else None
        total = declaration.get("replicates") if isinstance(declaration, dict) else None
        if isinstance(total, int) and total >= 1:
            found[str(rollout_id)] = total
            found[split_arm(str(rollout_id))[0]] = total  # an arm's: its rollout's items
    return found


def _done_keys(episodes: Any) -> set[tuple[str, str, int]]:
    """Replicates a resumed run needs no more: those that ended (errors are run again)."""
    done = set()
    for record in episodes:
        error = record.get("error")
        if error is None or error.get("kind") == "no_outcome":
            done.add((record["rollout"], record["condition_key"], int(record["replicate"])))
    return done
