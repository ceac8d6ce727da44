"""Whether a baseline still holds what it held when it was saved.

A baseline is what every later gate compares with, so a file cut short, a block deleted or
an outcome changed by hand must never read as a thinner or a rosier baseline.  Two checks,
made when a baseline is loaded, before any rollout runs:

- **Its header against its body** (every format): the run was complete, every condition of
  the header's plan (``manifest.plan``: rollout -> replicates and condition keys) is in the
  body, each with exactly the replicates ``0 .. replicates - 1``, nothing else is, and the
  header's ``counts`` (episodes, with an outcome, without one, errored) are the body's.
- **Its digest** (format 3 on): the header holds ``"digest": "sha256:HEX"``, the SHA-256 of
  the manifest in a canonical JSON form and the bytes of every line after the header.  Any
  edit that keeps the structure (an outcome's digit, an episode made errored, the header's
  plan and counts changed to agree) changes it.  It shows damage and hand edits, not
  intent: whoever can write the file can save a baseline again; a pull request's reviewer
  reads the change with ``pytest-prove baseline-diff``.

A baseline of format 1 or 2 carries no digest: only its structure is checked.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..declare.spec import condition_label, quoted_label
from ..record import StoreError, ending
from .episodes import StoredEpisode

__all__ = ["DIGEST_KEY", "BaselineIntegrityError", "body_digest", "check_digest",
           "check_structure", "integrity_fix"]

#: The header's key that holds the digest.
DIGEST_KEY: Final = "digest"
_PREFIX: Final = "sha256:"
_COUNTS: Final = ("episodes", "with_outcome", "no_outcome", "errored")


class BaselineIntegrityError(StoreError):
    """A baseline whose body is not what its header says, or whose digest does not match:
    it was cut, edited or damaged since it was saved."""


def integrity_fix(path: Path, name: str) -> str:
    """What to do about a baseline cut or edited since it was saved."""
    return (f"restore the committed file with git (git checkout -- {_rel(path)}), or save "
            f"the baseline again from a complete run (pytest --prove-save-baseline {name})")


def _rel(path: Path) -> str:
    """``path`` from the current folder when it is under it, else whole."""
    try:
        shown = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if shown.startswith("..") else shown


def canonical_manifest(manifest: Mapping[str, Any]) -> bytes:
    """The manifest as the digest reads it: sorted keys, no spaces, ASCII (so that the
    header may be written again in another key order or spacing)."""
    return json.dumps(manifest, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True).encode("ascii")


def body_digest(manifest: Mapping[str, Any], body: bytes) -> str:
    """``sha256:HEX`` of the manifest (canonical) and the body (every line after the
    header, CRLF line ends read as LF, as git may check a file out)."""
    if b"\r" in body:
        body = body.replace(b"\r\n", b"\n")
    digest = hashlib.sha256(b"pytest-prove baseline\n")
    digest.update(canonical_manifest(manifest))
    digest.update(b"\n")
    digest.update(body)
    return _PREFIX + digest.hexdigest()


def check_digest(path: Path, name: str, header: Mapping[str, Any],
                 manifest: Mapping[str, Any], body: bytes) -> None:
    """Raise :class:`BaselineIntegrityError` unless the header's digest is the file's."""
    found = header.get(DIGEST_KEY)
    if found is None:
        raise BaselineIntegrityError(
            f"{path}:1: edited or damaged since it was saved: the header has no "
            f"'{DIGEST_KEY}', which every baseline of its format holds, so nothing shows "
            f"that its episodes are the ones saved; {integrity_fix(path, name)}")
    if type(found) is not str or not found.startswith(_PREFIX):
        raise BaselineIntegrityError(
            f"{path}:1: edited or damaged since it was saved: the header's '{DIGEST_KEY}' is "
            f"{_short(found)}, expected \"sha256:\" and 64 hex digits; "
            f"{integrity_fix(path, name)}")
    want = body_digest(manifest, body)
    if found != want:
        raise BaselineIntegrityError(
            f"{path}: edited or damaged since it was saved: its manifest and episodes no "
            f"longer give the digest in its header ({found[:19]}..., they give "
            f"{want[:19]}...), so the gate cannot trust what it holds (an outcome changed by "
            f"hand reads as a real one); {integrity_fix(path, name)}")


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _label(key: str) -> str:
    """A condition key as a person reads it."""
    try:
        condition = json.loads(key)
    except (ValueError, RecursionError):
        condition = None
    if type(condition) is dict and all(
            v is None or type(v) in (str, int, float, bool) for v in condition.values()):
        return quoted_label(condition_label(condition))
    return quoted_label(key)


def _named(rollout: str, keys: Sequence[str]) -> str:
    shown = ", ".join(f"{_label(k)} of {quoted_label(rollout, 40)}" for k in keys[:4])
    return shown + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")


def _plan(path: Path, name: str, manifest: Mapping[str, Any]) -> dict[str, tuple[int, list[str]]]:
    """The header's plan, checked: replicates and condition keys by rollout."""
    plan = manifest.get("plan")
    shape = ('an object {"ROLLOUT": {"replicates": N, "conditions": [condition keys]}} '
             "naming what the run was meant to hold")
    if type(plan) is not dict or not plan:
        raise BaselineIntegrityError(
            f"{path}:1: the header's manifest.plan is {_short(plan)}, expected {shape}; "
            f"without it nothing shows that the body holds every condition and replicate "
            f"the run had; {integrity_fix(path, name)}")
    found: dict[str, tuple[int, list[str]]] = {}
    for rollout, entry in plan.items():
        replicates = entry.get("replicates") if type(entry) is dict else None
        conditions = entry.get("conditions") if type(entry) is dict else None
        if (type(replicates) is not int or replicates < 1 or type(conditions) is not list
                or not all(type(k) is str and k for k in conditions)
                or len(set(conditions)) != len(conditions)):
            raise BaselineIntegrityError(
                f"{path}:1: the header's manifest.plan[{_short(rollout)}] is {_short(entry)}, "
                f"expected {shape}; {integrity_fix(path, name)}")
        found[rollout] = (replicates, conditions)
    return found


def _tally(episodes: Sequence[Mapping[str, Any]]
           ) -> tuple[dict[tuple[str, str], list[int]], dict[str, int]]:
    """Per condition, how many episodes and the highest replicate; and the body's counts."""
    held: dict[tuple[str, str], list[int]] = {}
    errored = no_outcome = 0
    last: tuple[str, str] | None = None
    entry = [0, -1]
    for record in episodes:
        if type(record) is StoredEpisode:  # read fast: these end with an outcome
            key = (record.rollout, record.condition_key)
            replicate = record.replicate
        else:
            key = (str(record["rollout"]), str(record["condition_key"]))
            replicate = int(record["replicate"])
            how = ending(record)
            if how == "errored":
                errored += 1
            elif how == "no_outcome":
                no_outcome += 1
        if key != last:
            last = key
            entry = held.setdefault(key, [0, -1])
        entry[0] += 1
        if replicate > entry[1]:
            entry[1] = replicate
    total = len(episodes)
    return held, {"episodes": total, "with_outcome": total - errored - no_outcome,
                  "no_outcome": no_outcome, "errored": errored}


def check_structure(path: Path, name: str, manifest: Mapping[str, Any],
                    episodes: Sequence[Mapping[str, Any]]) -> None:
    """Raise :class:`BaselineIntegrityError` unless the body holds what the header says:
    a complete run, every planned condition with exactly its planned replicates (a
    baseline holds each replicate once, which its reader checks), nothing else, and the
    header's counts."""
    fix = integrity_fix(path, name)
    said = f"{path}: the baseline does not hold what its header says"
    status = manifest.get("status")
    if status != "complete":
        raise BaselineIntegrityError(
            f"{said}: the header says the run it was saved from was {_short(status)}, and a "
            f"baseline is saved only from a complete run; {fix}")
    missing = manifest.get("missing", 0)
    if missing != 0:
        raise BaselineIntegrityError(
            f"{said}: the header says the run missed {_short(missing)} replicate(s), and a "
            f"baseline is saved only from a run that missed none; {fix}")
    plan = _plan(path, name, manifest)
    held, counts = _tally(episodes)
    absent: dict[str, list[str]] = {}
    short: list[str] = []
    for rollout, (replicates, conditions) in plan.items():
        for key in conditions:
            found = held.get((rollout, key))
            if found is None:
                absent.setdefault(rollout, []).append(key)
            elif found[0] != replicates or found[1] != replicates - 1:
                short.append(f"{_named(rollout, [key])} holds {found[0]} episode(s) (replicates "
                             f"up to {found[1]}), where the plan says {replicates} "
                             f"(0 to {replicates - 1})")
    if absent:
        lacking = sum(len(keys) for keys in absent.values())
        named = "; ".join(_named(rollout, keys) for rollout, keys in absent.items())
        raise BaselineIntegrityError(
            f"{said}: its plan lists {sum(len(c) for _, c in plan.values())} condition(s), "
            f"and the body lacks {lacking} of them ({named}); a gate against it would leave "
            f"them out unseen; {fix}")
    if short:
        more = f" and {len(short) - 2} more" if len(short) > 2 else ""
        raise BaselineIntegrityError(f"{said}: {'; '.join(short[:2])}{more}; {fix}")
    extra = sorted(k for k in held if k[1] not in plan.get(k[0], (0, ()))[1])
    if extra:
        rollout = extra[0][0]
        raise BaselineIntegrityError(
            f"{said}: the body holds {len(extra)} condition(s) its plan does not list "
            f"({_named(rollout, [k for r, k in extra if r == rollout])}); {fix}")
    stated = manifest.get("counts")
    if type(stated) is not dict or any(type(stated.get(k)) is not int for k in _COUNTS):
        raise BaselineIntegrityError(
            f"{path}:1: the header's manifest.counts is {_short(stated)}, expected an object "
            f"of {', '.join(_COUNTS)} (integers); {fix}")
    wrong = [k for k in _COUNTS if stated[k] != counts[k]]
    if wrong:
        header = ", ".join(f"{k} {stated[k]}" for k in wrong)
        body = ", ".join(f"{k} {counts[k]}" for k in wrong)
        raise BaselineIntegrityError(
            f"{said}: its counts say {header}, and the body holds {body}; {fix}")
