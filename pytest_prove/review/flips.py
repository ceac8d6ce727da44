"""The drill-down: which twins ended differently, and how to replay one episode.

Two runs that share a salt ran every (condition, replicate) on the same seed, so each
episode of the later run has a twin in the earlier one.  :func:`flips` lists the twins whose
outcome changed, condition by condition, with the events each change counts for: for every
(condition, event) row of the comparison, the twins it lists are exactly the discordant pairs
of the paired test (``before_only`` and ``after_only``), because they are read with the same
definitions (:func:`~.pairing.event_flags`) from the same rows (:func:`~.pairing.prepare`).

:func:`replay_target` says which pytest item replays an episode on its seed
(``pytest ITEM --prove-replay=RUN``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from ..declare.environment import replay_environment
from ..declare.spec import axis_text, quoted_label
from ..record import Missing
from ..store import Run
from .labels import keys_and_labels, label_of
from .pairing import NO_OUTCOME, RefusalError, event_flags, group_episodes, prepare

__all__ = ["Flip", "FlipRow", "Flips", "Replay", "flips", "replay_target"]

Key = tuple[str, str]


@final
@dataclass(frozen=True, slots=True)
class Replay:
    """What replays one episode: ``pytest ITEM [-k KEYWORD] --prove-replay=RUN``.

    ``item`` is the item's node id; for an episode stored by a pytest-prove that did not
    record its item, it is the rollout's node id and ``keyword`` picks the replicate.
    ``env``: the declared environment variables the run recorded, ``(name, value)``, the
    value None for a secret (recorded as a digest only: the user exports it); ``unset``:
    those that were unset (prove_record_env, declare/environment.py).
    """

    run: str
    item: str
    keyword: str | None = None
    env: tuple[tuple[str, str | None], ...] = ()
    unset: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """As JSON: ``env`` (``[[name, value or null], ...]``) and ``unset`` only when the
        run recorded declared variables."""
        found: dict[str, Any] = {"run": self.run, "item": self.item, "keyword": self.keyword}
        if self.env or self.unset:
            found["env"] = [[name, value] for name, value in self.env]
            found["unset"] = list(self.unset)
        return found

    @classmethod
    def from_dict(cls, found: Mapping[str, Any]) -> Replay:
        """A replay as :meth:`to_dict` wrote it."""
        return cls(str(found["run"]), str(found["item"]), found.get("keyword"),
                   tuple((str(n), None if v is None else str(v))
                         for n, v in found.get("env") or ()),
                   tuple(str(n) for n in found.get("unset") or ()))


#: The end of an item's id: its replicate, or its block of replicates (``r016-031``).
_BLOCK = re.compile(r"r(\d+)(?:-\d+)?\]$")


def replay_target(run: Run, record: Mapping[str, Any]) -> Replay | None:
    """How to replay ``record`` (an episode of ``run``) on its seed, or None when the run
    does not say where its rollout lives.

    A replay runs every replicate as an item of its own, so an episode stored by a block
    (``test_bot[refund-r016-031]``) is replayed by its replicate's id (``...-r017]``).
    """
    replicate = int(record["replicate"])
    item = record.get("item")
    env, unset = replay_environment(run.manifest.get("environment"))
    if isinstance(item, str) and item:
        found = _BLOCK.search(item)
        if found is not None:
            width = len(found.group(1))
            return Replay(label_of(run), item[:found.start()] + f"r{replicate:0{width}d}]",
                          env=env, unset=unset)
        return Replay(label_of(run), item, env=env, unset=unset)
    info = (run.manifest.get("rollouts") or {}).get(record.get("rollout")) or {}
    node = info.get("node") if isinstance(info, dict) else None
    if not isinstance(node, str) or not node:
        return None
    declaration = info.get("declaration") or {}
    total = declaration.get("replicates") if isinstance(declaration, dict) else None
    width = max(3, len(str(max(int(total) - 1, 0)))) if isinstance(total, int) else 3
    return Replay(label_of(run), node, f"r{replicate:0{width}d}", env=env, unset=unset)


@final
@dataclass(frozen=True, slots=True)
class FlipRow:
    """One (condition, event) row: its twins, and how many had the event in one run only.

    ``before_only`` and ``after_only`` are the paired test's discordant pairs."""

    condition: str
    event: str
    worse_when: str
    twins: int
    before_only: int
    after_only: int

    def to_dict(self) -> dict[str, Any]:
        return {"condition": self.condition, "event": self.event,
                "worse_when": self.worse_when, "twins": self.twins,
                "before_only": self.before_only, "after_only": self.after_only}


@final
@dataclass(frozen=True, slots=True)
class Flip:
    """One twin whose outcome changed: the same condition, replicate and seed in both runs.

    ``before`` and ``after`` are the episodes as stored; ``events`` names each row that
    counts this twin, with ``"before"`` or ``"after"`` for the run that had the event.
    """

    condition: str
    rollout: str
    condition_key: str
    replicate: int
    seed: int
    before: Mapping[str, Any]
    after: Mapping[str, Any]
    events: tuple[tuple[str, str], ...]
    replay: Replay | None

    def to_dict(self) -> dict[str, Any]:
        return {"condition": self.condition, "rollout": self.rollout,
                "condition_key": self.condition_key, "replicate": self.replicate,
                "seed": self.seed, "before": ending_of(self.before),
                "after": ending_of(self.after),
                "events": [{"event": e, "had_it": side} for e, side in self.events],
                "replay": None if self.replay is None else self.replay.to_dict()}


def ending_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """How an episode ended: its outcome, or its error's kind, type and message."""
    error = record.get("error")
    if error is None:
        return {"outcome": record.get("outcome"), "error": None}
    return {"outcome": None, "error": {k: error.get(k) for k in ("kind", "type", "message")}}


@final
@dataclass(frozen=True, slots=True)
class Flips:
    """The twins of two paired runs whose outcome changed, and the rows they count in."""

    before: str
    after: str
    salt: str
    twins: int  # twins the rows shown read (in the conditions shown)
    rows: tuple[FlipRow, ...]
    flips: tuple[Flip, ...]
    conditions: tuple[str, ...]  # every condition label compared, chosen or not
    chosen: tuple[str, ...]  # the conditions --condition named (empty: all)
    events: tuple[str, ...] = ()  # the events --event named (empty: every row's)
    # Twins of the conditions shown that no row shown reads: each ended without an outcome
    # in one run or both, which only the 'no outcome' row reads (left out, or not chosen).
    unread: int = 0
    missing: Missing = "test"


def _parts(text: str) -> dict[str, str] | None:
    """``ticket=refund model=small`` (as a label writes it; ``ticket=refund, model=small``
    as labels were written before) as {axis: value}, or None when it is not that form. A
    value in quotes is read without them."""
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace += ","
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # a quote left open
        return None
    found: dict[str, str] = {}
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or not name.strip() or name.strip() in found:
            return None
        found[name.strip()] = value
    return found or None


def _matches(asked: str, label: str, axes: Mapping[str, Any]) -> bool:
    """Whether ``asked`` names the condition ``label``: the label itself, or some of its
    axis values written as the label writes them (``ticket=refund``)."""
    if asked.strip() == label:
        return True
    wanted = _parts(asked)
    if wanted is None:
        return False
    shown = {k: axis_text(v) for k, v in axes.items()}
    return all(k in axes and v in (shown[k], str(axes[k])) for k, v in wanted.items())


def flips(before: Run, after: Run, *, conditions: Sequence[str] = (),
          events: Sequence[str] = (), missing: Missing = "test") -> Flips:
    """The twins whose outcome changed between ``before`` and ``after``.

    ``conditions`` narrows to the conditions named as the comparison labels them
    (``ticket=refund``, or the full label); ``events`` to those rows (a declared outcome, or
    ``no outcome``).  Refuses (:class:`RefusalError`) runs that do not share a salt, since
    their episodes have no twins, and a condition or event neither run has.
    """
    label_a, label_b = label_of(before), label_of(after)
    if not before.salt or before.salt != after.salt:
        fix = (f"run the later sweep again with --prove-baseline={before.name}, which takes "
               "that baseline's salt" if before.is_baseline else
               "save the earlier sweep as a baseline (--prove-save-baseline=NAME) and run the "
               "later one with --prove-baseline=NAME")
        raise RefusalError(
            f"runs {label_a!r} and {label_b!r} have no twins: their salts differ "
            f"({before.salt or '-'} and {after.salt or '-'}), so no episode of {label_b!r} ran "
            f"on the seed of an episode of {label_a!r}, and an outcome that differs may be "
            f"the seed's doing. To pair them, {fix}; pytest-prove diff {label_a} {label_b} "
            "compares them unpaired meanwhile")
    declared = [e for e in events if e != NO_OUTCOME]
    prepared = prepare(before, after, declared or None, paired=True, missing=missing)
    if not prepared.rows and prepared.compared:
        raise RefusalError(
            f"runs {label_a!r} and {label_b!r} have no outcome rows: their rollouts declare "
            "metrics and no outcomes, so no twin's outcome can change; compare their metric "
            f"rows with pytest-prove diff {label_a} {label_b}")
    every, _, _ = group_episodes(before, after)
    named = keys_and_labels(before, after)
    known = list(dict.fromkeys(r.condition for r in prepared.rows))
    chosen_keys: set[Key] | None = None
    if conditions:
        chosen_keys = set()
        for asked in conditions:
            hits = {key for key, (label, axes) in named.items()
                    if label in known and _matches(asked, label, axes)}
            if not hits:
                shown = ", ".join(map(quoted_label, known[:20])) + (", ..." if len(known) > 20
                                                               else "")
                raise RefusalError(
                    f"no condition {asked!r} was compared in {label_a!r} and {label_b!r}; "
                    f"give one as the comparison labels it (axis=value, several joined by "
                    f"', '), one of: {shown or 'none'}")
            chosen_keys |= hits
    wanted_events = set(events)
    if NO_OUTCOME in wanted_events and NO_OUTCOME not in prepared.events:
        raise RefusalError(
            f"no condition of {label_a!r} and {label_b!r} has a row {NO_OUTCOME!r}: every "
            "twin ended with an outcome" + (" (or --missing=ignore left them out)"
                                            if missing == "ignore" else ""))
    rows: list[FlipRow] = []
    changed: dict[tuple[Key, int], list[tuple[str, str]]] = {}
    twins: set[tuple[Key, int]] = set()  # read by a row shown
    held: set[tuple[Key, int]] = set()  # held by both runs, in the conditions shown
    for row, key in zip(prepared.rows, prepared.keys, strict=True):
        if chosen_keys is not None and key not in chosen_keys:
            continue
        if wanted_events and row.event not in wanted_events:
            continue
        arms = every[key]
        had_before = event_flags(row.event, arms["before"])
        had_after = event_flags(row.event, arms["after"])
        paired = sorted(set(had_before) & set(had_after))
        twins.update((key, r) for r in paired)
        held.update((key, r) for r in set(arms["before"]) & set(arms["after"]))
        before_only = after_only = 0
        for r in paired:
            if had_before[r] == had_after[r]:
                continue
            side = "before" if had_before[r] else "after"
            before_only += side == "before"
            after_only += side == "after"
            changed.setdefault((key, r), []).append((row.event, side))
        rows.append(FlipRow(condition=row.condition, event=row.event,
                            worse_when=row.worse_when, twins=len(paired),
                            before_only=before_only, after_only=after_only))
    found = []
    for (key, r), which in sorted(changed.items()):
        b, a = every[key]["before"][r], every[key]["after"][r]
        # Replayed on the later run's salt, which is the earlier one's too; by the item id
        # either run recorded (a baseline saved by an older pytest-prove has none).
        replay = replay_target(after, a)
        twin = replay_target(before, b)
        if twin is not None and twin.keyword is None and (replay is None or replay.keyword):
            env, unset = replay_environment(after.manifest.get("environment"))
            replay = Replay(label_b, twin.item, env=env, unset=unset)
        found.append(Flip(condition=named[key][0], rollout=key[0], condition_key=key[1],
                          replicate=r, seed=int(a["seed"]), before=b, after=a,
                          events=tuple(which), replay=replay))
    return Flips(before=label_a, after=label_b, salt=after.salt, twins=len(twins),
                 rows=tuple(rows), flips=tuple(found), conditions=tuple(known),
                 chosen=tuple(conditions), events=tuple(dict.fromkeys(events)),
                 unread=len(held - twins), missing=missing)
