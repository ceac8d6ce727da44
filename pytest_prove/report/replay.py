"""What a ``--prove-replay`` session prints: each episode it ran against the one stored;
and the words of a replay anywhere else: the command line that replays one episode
(:func:`replay_command`, which ``flips`` and ``show`` print) and how an episode ended
(:func:`ending_text`).

Imports no engine: a replay compares nothing, it only says, for every episode it ran,
whether the seed and the ending are the ones the replayed run stored.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_prove.declare.environment import shell_prefix
from pytest_prove.declare.spec import condition_label

from ._format import terminal_text

if TYPE_CHECKING:  # the review's engine is not imported by a replay session
    from pytest_prove.review.flips import Replay

__all__ = ["ending_text", "replay_command", "replay_lines"]

#: Episodes listed without -v.
_SHOWN = 20


def replay_command(replay: Replay) -> str:
    """The command line that replays one episode on its seed (quoted for a POSIX shell), in
    the declared environment its run recorded (``AGENT_MODEL=agent-mini pytest ...``); a
    secret variable, recorded as a digest only, is named in a comment after the command, to
    be exported by hand first."""
    prefix, secrets = shell_prefix(replay.env, replay.unset)
    words = [prefix] if prefix else []
    words += ["pytest", shlex.quote(replay.item)]
    if replay.keyword is not None:
        words += ["-k", shlex.quote(replay.keyword)]
    words.append(f"--prove-replay={shlex.quote(replay.run)}")
    if secrets:
        words.append("  # first: " + "; ".join(f"export {name}=..." for name in secrets)
                     + " (recorded as a digest, not its value)")
    return terminal_text(" ".join(words), 600)


def ending_text(record: Mapping[str, Any]) -> str:
    """How an episode ended, on one line: its outcome, or ``no outcome (KIND: TYPE:
    MESSAGE)``; ``record`` is a stored episode or its ending (``review.flips.ending_of``)."""
    error = record.get("error")
    if error is None:
        return terminal_text(str(record.get("outcome")))
    detail = ": ".join(str(x) for x in (error.get("type"), error.get("message")) if x)
    kind = terminal_text(str(error.get("kind")))
    return f"no outcome ({kind}: {terminal_text(detail, 160)})" if detail else \
        f"no outcome ({kind})"


def replay_lines(run: str, salt: str, stored: Iterable[Mapping[str, Any]],
                 replayed: Sequence[Mapping[str, Any]], *, verbose: bool,
                 changed: Sequence[tuple[str, str, str]] = ()) -> list[str]:
    """The verdict (how many ended as stored), then each episode: its seed, both endings;
    ``changed``: the declared variables the run recorded that differ in this session
    (name, as recorded, as now), said after them, since they replay another agent."""
    label = terminal_text(run)
    said = [] if not changed else [
        "note: this session's environment differs from the one run "
        f"{label!r} recorded: "
        + "; ".join(f"{terminal_text(name)} was {terminal_text(was)}, is {terminal_text(now)}"
                    for name, was, now in changed)
        + "; an ending may differ for that alone: set them as the replay commands of "
          "pytest-prove flips and show do"]
    by_identity = {(str(r["rollout"]), str(r["condition_key"]), int(r["replicate"])): r
                   for r in stored}
    if not replayed:
        return [f"replay of run {label!r} (salt {terminal_text(salt)}): no rollout item ran, "
                "so nothing was replayed",
                f"next: name the item to replay, e.g. pytest 'test_x.py::test_y[case-r017]' "
                f"--prove-replay={label} (pytest-prove flips and show print it)", *said]
    same = differ = absent = 0
    lines = []
    for record in replayed:
        key = (str(record["rollout"]), str(record["condition_key"]), int(record["replicate"]))
        was = by_identity.get(key)
        head = (f"{terminal_text(condition_label(record.get('condition') or {}))} "
                f"r{record['replicate']} seed {record['seed']}")
        if was is None:
            absent += 1
            text = (f"{head}: {ending_text(record)}; run {label!r} holds no such episode, so "
                    "this is the seed its salt gives that replicate")
        elif was["seed"] != record["seed"]:  # cannot happen while seeds come from the salt
            differ += 1
            text = f"{head}: the stored episode ran on seed {was['seed']}, not this one"
        else:
            now, then = ending_text(record), ending_text(was)
            if now == then:
                same += 1
                text = f"{head}: {now}, as stored"
            else:
                differ += 1
                text = f"{head}: {now}, stored {then}"
        lines.append("  " + text)
    counts = [f"{same} ended as stored"]
    if differ:
        counts.insert(0, f"{differ} ended differently")
        counts[1] = f"{same} as stored"
    if absent:
        counts.append(f"{absent} not in the run")
    head = (f"replayed {len(replayed)} episode(s) of run {label!r} on their seeds (salt "
            f"{terminal_text(salt)}): {', '.join(counts)}; nothing was stored")
    shown = lines if verbose else lines[:_SHOWN]
    out = [head, *shown]
    if len(shown) < len(lines):
        out.append(f"  ... and {len(lines) - len(shown)} more (-v lists them all)")
    out.extend(said)
    if differ:
        out.append("note: an ending that differs on the same seed means the rollout depends on "
                   "more than its seed (the code changed since, or a clock, the network, a "
                   "model's own sampling, a random state not drawn from prove_seed)")
    return out
