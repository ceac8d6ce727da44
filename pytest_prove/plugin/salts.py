"""Which salt a session takes when nothing else decides: ``--lf`` reruns on the seeds that failed.

A session paired with a baseline takes the baseline's salt, a resumed run its own, a replay
the replayed run's; any other draws a fresh one.  That made ``pytest --lf`` after an unpaired
run useless for a failing replicate: it ran again on a new seed, so the failure did not come
back.  So the controller remembers, in pytest's cache (``prove/failed-salts``), the salt each
failed rollout item ran on (the ones pytest's own ``cache/lastfailed`` holds), and a later
session given ``--lf`` or ``--ff`` takes the salt of those failures.  When they ran on more
than one salt, the newest session's wins and the summary says which failures do not get their
seeds back (a replay of their run does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, final

import pytest

from ..record import utc_now

__all__ = ["CACHE_KEY", "FailedSalt", "lf_salt", "remember_failed"]

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
