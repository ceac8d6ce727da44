"""One episode, read whole: which stored episode a user means, its twin in another run, and
where the two first went apart.

``pytest-prove episode RUN ITEM`` names an episode as pytest does (the item's node id, as
``flips`` and the failure lines print it), or by the end of that id (``refund-r017``), or by
its replicate alone when the run has one condition.  :func:`find_episode` resolves it;
:func:`twin_of` finds the episode of another run on the same (rollout, condition,
replicate); :func:`first_difference` says where two twins first differ: their seeds, then
their steps in order, then the names of their spans in order, then how they ended.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, final

from ..errors import ProveError
from ..store import Run
from .flips import Replay, replay_target
from .labels import label_of

__all__ = ["Difference", "EpisodeNotFoundError", "Found", "find_episode",
           "first_difference", "found_of", "twin_of"]

#: An id's replicate: ``r017`` at its end, or before a block's end (``r016-031``).
_REPLICATE = re.compile(r"(?:^|[-\[])r(\d+)(?:-\d+)?\]?$")
#: Candidates listed when a name is ambiguous or not found.
_LISTED = 8


class EpisodeNotFoundError(ProveError):
    """The run holds no episode by that name, or more than one."""


@final
@dataclass(frozen=True, slots=True)
class Found:
    """A stored episode, the run that holds it, and how to replay it."""

    run: Run
    record: Mapping[str, Any]
    item: str
    replay: Replay | None


def _item_of(run: Run, record: Mapping[str, Any]) -> str:
    """The id a user reads for ``record``: its replicate's item (a block's item is named
    after the replicate), else ``ROLLOUT[CONDITION-rNNN]``."""
    target = replay_target(run, record)
    if target is not None and target.keyword is None:
        return target.item
    # A run that did not record its items (an older baseline): the id pytest gives its
    # replicate, from the condition's values as parametrize writes plain ones.
    replicate = f"r{int(record['replicate']):03d}" if target is None else str(target.keyword)
    values = [_id(v) for v in dict(record.get("condition") or {}).values()]
    node = str(record.get("rollout")) if target is None else target.item
    return f"{node}[{'-'.join([*values, replicate])}]"


def _id(value: object) -> str:
    """A parameter's part of a pytest id: a plain string as it is, anything else as str()."""
    if isinstance(value, str):
        return value if value.isascii() and value.isprintable() else \
            value.encode("unicode_escape").decode("ascii")
    return str(value)


def found_of(run: Run, record: Mapping[str, Any]) -> Found:
    """``record`` (an episode of ``run``) with the id a user reads and its replay."""
    return Found(run, record, _item_of(run, record), replay_target(run, record))


def _replicate_of(text: str) -> int | None:
    found = _REPLICATE.search(text.strip())
    return int(found.group(1)) if found is not None else None


def _matches(item: str, wanted: str) -> bool:
    """Whether ``wanted`` names ``item``: the whole node id, the id after its file
    (``test_bot[refund-r017]``), or the parameters between its brackets
    (``refund-r017``)."""
    if wanted == item or item.endswith("::" + wanted):
        return True
    if "[" in item and item.endswith("]"):
        inside = item[item.index("[") + 1:-1]
        return wanted in (inside, f"[{inside}]")
    return False


def _candidates(run: Run, wanted: str) -> list[Found]:
    found = []
    for record in run.episodes:
        item = _item_of(run, record)
        if _matches(item, wanted):
            found.append(Found(run, record, item, replay_target(run, record)))
    if found:
        return found
    if "[" in wanted and wanted.endswith("]"):
        # An item's id as another run names it (a run that did not record its items names
        # the rollout differently): its part in brackets still names the replicate.
        inside = wanted[wanted.index("[") + 1:-1]
        if inside:
            return _candidates(run, inside)
    replicate = _replicate_of(wanted)
    if replicate is not None and wanted.lstrip("[").startswith("r"):
        # A replicate alone (r017) names an episode when one condition holds it.
        for record in run.episodes:
            if int(record["replicate"]) == replicate:
                found.append(Found(run, record, _item_of(run, record),
                                   replay_target(run, record)))
    return found


def _some_items(run: Run) -> list[str]:
    return [_item_of(run, r) for r in run.episodes[:_LISTED]]


def find_episode(run: Run, wanted: str) -> Found:
    """The one episode of ``run`` that ``wanted`` names, or an error that lists what it
    could mean and how to name one."""
    text = wanted.strip()
    if not text:
        raise EpisodeNotFoundError(
            "name the episode to show: its item's id as pytest prints it, e.g. "
            "'test_bot.py::test_bot[refund-r017]', or the part in brackets, 'refund-r017'")
    found = _candidates(run, text)
    label = label_of(run)
    if not found:
        sample = _some_items(run)
        listed = ("; its episodes are named like " + ", ".join(repr(s) for s in sample[:3])
                  if sample else "; it holds no episode")
        raise EpisodeNotFoundError(
            f"run {label!r} holds no episode named {text!r}{listed}; "
            f"`pytest-prove show {label} -v` lists its errored episodes, and `pytest-prove "
            f"flips A {label}` the ones that ended differently")
    if len(found) > 1:
        names = ", ".join(repr(f.item) for f in found[:_LISTED])
        more = f" and {len(found) - _LISTED} more" if len(found) > _LISTED else ""
        raise EpisodeNotFoundError(
            f"{text!r} names {len(found)} episodes of run {label!r}: {names}{more}; "
            "give the whole id in brackets (e.g. 'refund-r017') or the item's node id")
    return found[0]


def twin_of(found: Found, other: Run) -> Found:
    """The episode of ``other`` on the same rollout, condition and replicate as ``found``
    (its twin when the two runs share a salt), or an error naming what is missing."""
    record = found.record
    identity = (record["rollout"], record["condition_key"], int(record["replicate"]))
    for candidate in other.episodes:
        if (candidate["rollout"], candidate["condition_key"],
                int(candidate["replicate"])) == identity:
            return Found(other, candidate, _item_of(other, candidate),
                         replay_target(other, candidate))
    raise EpisodeNotFoundError(
        f"run {label_of(other)!r} holds no episode of rollout {identity[0]!r} on condition "
        f"{identity[1]!r}, replicate {identity[2]}: it has no twin of {found.item!r}; "
        f"`pytest-prove show {label_of(other)}` shows what it holds")


@final
@dataclass(frozen=True, slots=True)
class Difference:
    """Where two twins first differ: ``where`` is ``seed``, ``step``, ``span``, ``steps``
    (their number or last step, when one is read from a compact baseline), ``ending`` or
    ``none``; ``index`` is the step's or span's position (from 0) when it is one of
    those; ``text`` says it in words."""

    where: str
    index: int | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "index": self.index, "text": self.text}


def _step_text(step: Mapping[str, Any]) -> str:
    error = step.get("error")
    return f"{step.get('name')}" + (f" (raised {error})" if error else "")


def _ending(record: Mapping[str, Any]) -> tuple[Any, ...]:
    error = record.get("error")
    if isinstance(error, Mapping):
        return ("error", error.get("kind"), error.get("type"))
    return ("outcome", record.get("outcome"))


def _ending_words(record: Mapping[str, Any]) -> str:
    error = record.get("error")
    if isinstance(error, Mapping):
        return f"no outcome ({error.get('kind')}: {error.get('type') or 'no type'})"
    return f"{record.get('outcome')}"


def _first_apart(a: Sequence[str], b: Sequence[str]) -> int | None:
    for index, (left, right) in enumerate(zip(a, b, strict=False)):
        if left != right:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def _compact_steps(record: Mapping[str, Any]) -> tuple[int, object]:
    """How many steps an episode took and its last step's name: all a compact baseline
    keeps of its steps."""
    if "step_count" in record:
        return int(record.get("step_count") or 0), record.get("last_step")
    steps = list(record.get("steps") or ())
    return len(steps), (steps[-1].get("name") if steps else None)


def _compact_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> Difference:
    """Where twins differ when one is read from a compact baseline, which keeps the number
    of steps and the last one's name, not each step nor the spans."""
    (count_a, last_a), (count_b, last_b) = _compact_steps(a), _compact_steps(b)
    kept = " (a compact baseline keeps only how many steps and the last one's name)"
    if count_a != count_b:
        return Difference("steps", None, f"{count_a} steps | {count_b} steps{kept}")
    if last_a != last_b:
        return Difference("steps", None, f"last step {last_a} | {last_b}{kept}")
    if _ending(a) != _ending(b):
        return Difference("ending", None, f"as many steps and the same last step, then they "
                          f"ended {_ending_words(a)} | {_ending_words(b)}{kept}")
    return Difference("none", None, f"as many steps, the same last step and the same "
                      f"ending{kept}")


def first_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> Difference:
    """Where ``a`` and ``b`` (twins: one rollout, condition and replicate) first differ."""
    if int(a["seed"]) != int(b["seed"]):
        return Difference("seed", None,
                          f"they ran on different seeds ({a['seed']} and {b['seed']}): the "
                          "runs have different salts, so these are not twins, and any "
                          "difference may be the seed's")
    if any("step_count" in r for r in (a, b)):
        return _compact_difference(a, b)
    steps = [[_step_text(s) for s in (r.get("steps") or ())] for r in (a, b)]
    index = _first_apart(*steps)
    if index is not None:
        left = steps[0][index] if index < len(steps[0]) else "(no more steps)"
        right = steps[1][index] if index < len(steps[1]) else "(no more steps)"
        return Difference("step", index, f"step {index + 1}: {left} | {right}")
    spans = [[str(s.get("name")) for s in (r.get("spans") or ())] for r in (a, b)]
    index = _first_apart(*spans)
    if index is not None:
        left = spans[0][index] if index < len(spans[0]) else "(no more spans)"
        right = spans[1][index] if index < len(spans[1]) else "(no more spans)"
        return Difference("span", index, f"span {index + 1}: {left} | {right}")
    if _ending(a) != _ending(b):
        return Difference("ending", None, f"same steps and spans, then they ended "
                          f"{_ending_words(a)} | {_ending_words(b)}")
    return Difference("none", None, "the same steps and spans, and the same ending")
