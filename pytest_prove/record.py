"""The stored episode: its schema, and the checks a line read back from disk must pass.

A run's ``episodes.jsonl`` and a format-1 baseline's lines after its header hold one
:class:`EpisodeRecord` each (a compact baseline, :mod:`.store.compact`, keeps part of
one).  A run of format 2 writes the usage of an episode that used one model, whose totals
are that model's, flat: ``{"input": 9, "output": 4, "model": "m", "calls": 2}`` is
``{"input": 9, "output": 4, "by_model": {"m": {"input": 9, "output": 4, "calls": 2}}}``
(:func:`nested_tokens`).  The store checks every line it reads, so that a hand-edited or
damaged file is refused when it is loaded, before any rollout runs, with one error naming
the file, the line, the field, the value and the fix, rather than compared silently or
breaking with a traceback once a sweep is over.

Only the standard library and the seeds: the store imports this module, never the
other way round.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal, NotRequired, TypedDict, cast, get_args

from .declare.seeds import derive_seed
from .errors import ProveError

__all__ = [
    "ERROR_KINDS",
    "RUN_FIX",
    "RUN_MANIFEST_FIX",
    "EpisodeError",
    "EpisodeRecord",
    "ErrorKind",
    "StoreError",
    "Tokens",
    "add_tokens",
    "baseline_fix",
    "check_header",
    "check_manifest",
    "check_record",
    "check_seed",
    "ending",
    "episode_name",
    "fold_attempts",
    "has_outcome",
    "identity",
    "left_out_reason",
    "left_out_reason_of",
    "nested_tokens",
    "steps_of",
    "utc_now",
]


class StoreError(ProveError):
    """A store problem the user can fix: an unknown name, a corrupt line, a bad name."""


def utc_now() -> str:
    """Now, as an ISO 8601 UTC timestamp with microseconds (every stored time is one)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


# ---- what every reader asks of a stored episode

#: How a comparison reads episodes without an outcome: tested as an event of their own
#: (``test``, the default), or left out because the user knows they are infrastructure
#: (``ignore``; ``--prove-missing=ignore``, ``pytest-prove diff --missing=ignore``).
Missing = Literal["test", "ignore"]
MISSING_MODES: Final[tuple[str, ...]] = get_args(Missing)



def has_outcome(record: Mapping[str, Any]) -> bool:
    """Whether the episode ended with one of the declared outcomes (it is compared)."""
    return record.get("error") is None and record.get("outcome") is not None


def ending(record: Mapping[str, Any]) -> str:
    """``with_outcome``, ``no_outcome`` or ``errored``: how the counts class an episode."""
    error = record.get("error")
    if error is None:
        return "with_outcome"
    return "no_outcome" if error.get("kind") == "no_outcome" else "errored"


def left_out_reason(record: Mapping[str, Any]) -> str:
    """Why an episode without an outcome is left out of a comparison, as a person reads it."""
    return left_out_reason_of(record.get("error"))


def left_out_reason_of(error: Any) -> str:
    """:func:`left_out_reason` of an episode whose ``error`` is this."""
    kind = str((error or {}).get("kind", "errored"))
    return {"no_outcome": "no outcome", "exception": "errored",
            "episode_timeout": "timed out"}.get(kind, kind)


def add_tokens(spent: dict[str, int], record: Mapping[str, Any]) -> None:
    """Add the episode's input and output tokens to ``spent``."""
    tokens = record.get("tokens") or {}
    spent["input"] = spent.get("input", 0) + int(tokens.get("input") or 0)
    spent["output"] = spent.get("output", 0) + int(tokens.get("output") or 0)


def _sum_tokens(found: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The tokens of several attempts added up, by model too (None when none has any)."""
    if not found:
        return None
    by_model: dict[str, dict[str, int]] = {}
    for tokens in found:
        for model, use in (tokens.get("by_model") or {}).items():
            entry = by_model.setdefault(model, {"input": 0, "output": 0, "calls": 0})
            for name in entry:
                entry[name] += int(use.get(name) or 0)
    total: dict[str, Any] = {"input": sum(int(t.get("input") or 0) for t in found),
                             "output": sum(int(t.get("output") or 0) for t in found)}
    if by_model:
        total["by_model"] = by_model
    return total


def fold_attempts(final: Mapping[str, Any],
                  earlier: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The one record of a replicate its item ran more than once (pytest-rerunfailures
    runs a failed item again, on the same seeds): the final attempt's ending, with
    ``attempts`` and, in ``earlier``, how each attempt before it ended (outcome, error
    without its traceback, duration, tokens).  Its ``tokens`` are every attempt's: they
    were all spent, and the cap, the cost and the session's line count them once."""
    record = dict(final)
    kept = [dict(e) for e in record.get("earlier") or ()]
    for attempt in earlier:
        kept.extend(dict(e) for e in attempt.get("earlier") or ())
        error = attempt.get("error")
        kept.append({
            "outcome": attempt.get("outcome"),
            "error": None if error is None else {k: v for k, v in error.items()
                                                 if k != "traceback"},
            "duration": attempt.get("duration"),
            "tokens": attempt.get("tokens")})
    record["earlier"] = kept
    record["attempts"] = len(kept) + 1
    spent = [t for t in (final.get("tokens"), *(a.get("tokens") for a in earlier)) if t]
    if len(spent) > 1 or (spent and not final.get("tokens")):
        record["tokens"] = _sum_tokens(spent)
    return record


def steps_of(record: Mapping[str, Any]) -> tuple[int, object]:
    """How many steps the episode recorded, and the name of its last (None without steps).

    A run's record holds its ``steps``; one read from a compact baseline holds only
    ``step_count`` and ``last_step``, what ``where`` and ``compare`` read of them.
    """
    steps = record.get("steps")
    if steps:
        return len(steps), steps[-1].get("name")
    count = record.get("step_count")
    return (int(count), record.get("last_step")) if count else (0, None)


def identity(record: Mapping[str, Any]) -> tuple[str, str, int]:
    """The episode's identity within a run: (rollout, condition key, replicate)."""
    return (str(record["rollout"]), str(record["condition_key"]), int(record["replicate"]))


#: How an episode ended without an outcome: ``prove.NoOutcome`` (or ``pytest.skip``), a
#: raised exception, a broken contract (a wrong return value), a failed fixture, a crashed
#: xdist worker; and ``episode_timeout``, for an episode stopped by
#: ``--prove-episode-timeout`` (SPEC section 7).
ErrorKind = Literal["no_outcome", "exception", "contract", "setup", "worker_crash",
                    "episode_timeout"]
ERROR_KINDS: Final[tuple[str, ...]] = get_args(ErrorKind)


class EpisodeError(TypedDict):
    """Why an episode has no outcome."""

    kind: ErrorKind
    type: NotRequired[str]
    message: NotRequired[str]
    traceback: NotRequired[str]


class Tokens(TypedDict):
    """An episode's token usage, in all and by model."""

    input: int
    output: int
    by_model: NotRequired[dict[str, dict[str, int]]]


class EpisodeRecord(TypedDict):
    """One stored episode: which it was, how it ended, and what it recorded.

    An episode ended either with an ``outcome`` (and ``error`` null) or with an
    ``error`` (and ``outcome`` null), never both and never neither.
    """

    rollout: str
    condition: dict[str, str | int | float | bool | None]
    condition_key: str
    replicate: int
    seed: int
    outcome: str | None
    error: NotRequired[EpisodeError | None]
    t: NotRequired[float | int | None]
    horizon: NotRequired[float | int | None]
    meta: NotRequired[dict[str, Any] | None]
    duration: NotRequired[float | int | None]
    tokens: NotRequired[Tokens | None]
    steps: NotRequired[list[dict[str, Any]]]
    spans: NotRequired[list[dict[str, Any]]]
    #: Spans of the episode not stored, past the most one episode stores.
    spans_dropped: NotRequired[int]
    finished: NotRequired[str]
    #: Set only for a replicate run more than once in its session (pytest-rerunfailures):
    #: how many times, and how each attempt before the final one ended.
    attempts: NotRequired[int]
    earlier: NotRequired[list[dict[str, Any]]]
    #: Set only when its rollout declares chaos: its HTTP calls and the faults injected
    #: (``calls``, ``by_kind``, ``faults``, ``log``; see declare/chaos.py, ChaosLog).
    chaos: NotRequired[dict[str, Any]]
    #: Set only when its rollout declares metrics: each one's value, by name.
    metrics: NotRequired[dict[str, float]]
    #: Set only when its rollout keeps answers: the agent's answer (any JSON value), or,
    #: when it was larger than a store keeps, its size in bytes (``answer_bytes``).
    answer: NotRequired[Any]
    answer_bytes: NotRequired[int]
    #: Set when its HTTP calls were answered from the cache (--prove-cache=replay): not
    #: evidence, refused by every comparison and by a baseline.
    replayed: NotRequired[bool]


#: Said after a problem with a run's line (runs are not committed, so not restored).
RUN_FIX: Final = "delete that line to keep the rest, or run the sweep again"
#: Said after a problem with a run's manifest.json.
RUN_MANIFEST_FIX: Final = ("restore manifest.json from a copy, or delete the run's folder and "
                           "run the sweep again")


def baseline_fix(name: str) -> str:
    """What to do about a damaged baseline file called ``name``."""
    return ("restore the file from version control, or save the baseline again with "
            f"--prove-save-baseline {name}")


#: What a JSON value is called, by the Python type json.loads gives it.
_JSON_TYPES: Final = {str: "a string", int: "an integer", float: "a number", list: "an array",
                      dict: "an object"}


def _printable(text: str) -> str:
    """``text`` with lone surrogates escaped, so that an error message can be printed."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _shown(value: object) -> str:
    """A value as the file has it (JSON, cut short), and what kind of JSON value it is."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    kind = _JSON_TYPES.get(type(value))
    text = _printable(text)
    return text if kind is None else f"{text} ({kind})"


def episode_name(rollout: str, condition_key: str, replicate: int) -> str:
    """How an error names one episode: replicate 3 of {"ticket":"refund"} in test_a.py::t."""
    return _printable(f"replicate {replicate} of {condition_key} in {rollout}")


def _bad(where: str, field: str, value: object, expected: str, fix: str) -> StoreError:
    return StoreError(
        f"{where}: {field} is {_shown(value)}, expected {expected}; the file was edited "
        f"or damaged: {fix}"
    )


def _missing(where: str, field: str, expected: str, fix: str) -> StoreError:
    return StoreError(
        f"{where}: the field {field!r} is missing, expected {expected}; the file was "
        f"edited or damaged: {fix}"
    )


def _field(record: dict[str, Any], where: str, name: str, expected: str,
           fix: str) -> StoreError:
    """The error for a field that is missing or has the wrong value."""
    if name not in record:
        return _missing(where, name, expected, fix)
    return _bad(where, name, record[name], expected, fix)


#: json.loads gives exactly these types for numbers (``type(x) in`` leaves out bool).
_NUMBERS: Final = (int, float)
_SEED_END: Final = 2**64
_SCALARS: Final = (str, int, float, bool)
_INFINITIES: Final = (math.inf, -math.inf)


def check_record(record: object, where: str, fix: str = RUN_FIX) -> EpisodeRecord:
    """``record`` as an :class:`EpisodeRecord`, or a :class:`StoreError` saying what is wrong.

    ``where`` is ``file:line``; ``fix`` is what the user should do (restore a baseline
    from version control, or drop a run's line).  Fields other than those of the schema
    are kept as they are.
    """
    # Every line of a large baseline passes through here when it loads, so the checks
    # compare exact types (what json.loads returns) and build a message only on failure.
    if type(record) is not dict:
        raise _bad(where, "the line", record, "an object (one episode)", fix)
    get = record.get
    for name in ("rollout", "condition_key"):
        value = get(name)
        if type(value) is not str or not value:
            raise _field(record, where, name, "a non-empty string", fix)
    condition = get("condition")
    if type(condition) is not dict:
        raise _field(record, where, "condition", "an object of axis values", fix)
    for axis, value in condition.items():
        if value is not None and (type(value) not in _SCALARS or value != value
                                  or value in _INFINITIES):
            raise _bad(where, _printable(f"condition[{json.dumps(axis)}]"), value,
                       "an axis value: a string, a finite number, true, false or null", fix)
    replicate = get("replicate")
    if type(replicate) is not int or replicate < 0:
        raise _field(record, where, "replicate", "an integer >= 0", fix)
    seed = get("seed")
    if type(seed) is not int or not 0 <= seed < _SEED_END:
        raise _field(record, where, "seed", "an integer in [0, 2**64)", fix)
    error = get("error")
    if error is None:
        outcome = get("outcome")
        if type(outcome) is not str or not outcome:
            expected = ("a non-empty string, since the episode has no error: an episode "
                        "ends with an outcome or an error")
            raise _field(record, where, "outcome", expected, fix)
    else:
        _check_error(record, error, where, fix)
    for name in ("t", "horizon", "duration"):
        value = get(name)
        if value is not None and not (type(value) in _NUMBERS and 0 <= value < math.inf):
            raise _bad(where, name, value, "null or a finite number >= 0", fix)
    t, horizon = get("t"), get("horizon")
    if t is not None and horizon is not None and t > horizon:
        raise _bad(where, "t", t, f"at most horizon ({horizon})", fix)
    meta = get("meta")
    if meta is not None:
        if type(meta) is not dict:
            raise _bad(where, "meta", meta, "an object", fix)
        case_id = meta.get("case_id")
        if case_id is not None and type(case_id) is not str and type(case_id) is not int:
            raise _bad(where, "meta.case_id", case_id, "a string or an integer", fix)
    tokens = get("tokens")
    if tokens is not None:
        _check_tokens(tokens, where, fix)
    for name in ("steps", "spans"):
        entries = get(name)
        if entries is None and name not in record:
            continue
        if type(entries) is not list:
            raise _bad(where, name, entries, "an array of objects", fix)
        for entry in entries:
            if type(entry) is not dict:
                raise _bad(where, f"an entry of {name}", entry, "an object", fix)
    if "attempts" in record or "earlier" in record:
        _check_attempts(record, where, fix)
    if "chaos" in record:
        _check_chaos(record["chaos"], where, fix)
    if "metrics" in record:
        _check_metrics(record["metrics"], where, fix)
    return cast(EpisodeRecord, record)


def _check_metrics(metrics: object, where: str, fix: str) -> None:
    """An episode's metrics: an object of finite numbers by name."""
    if type(metrics) is not dict:
        raise _bad(where, "metrics", metrics, "an object of numbers by metric name", fix)
    for name, value in metrics.items():
        if type(value) not in _NUMBERS or value != value or value in _INFINITIES:
            raise _bad(where, _printable(f"metrics[{json.dumps(name)}]"), value,
                       "a finite number", fix)


def _check_chaos(chaos: object, where: str, fix: str) -> None:
    """An episode's calls under chaos: their number, the faults by kind, and the stored
    faults and calls (objects)."""
    if type(chaos) is not dict:
        raise _bad(where, "chaos", chaos, "an object of calls, by_kind, faults and log", fix)
    calls = chaos.get("calls")
    if type(calls) is not int or calls < 0:
        raise _bad(where, "chaos.calls", calls, "an integer >= 0", fix)
    by_kind = chaos.get("by_kind")
    if type(by_kind) is not dict or not all(type(n) is int and n >= 0
                                            for n in by_kind.values()):
        raise _bad(where, "chaos.by_kind", by_kind, "an object of counts by fault kind", fix)
    for name in ("faults", "log"):
        entries = chaos.get(name)
        if type(entries) is not list or not all(type(e) is dict for e in entries):
            raise _bad(where, f"chaos.{name}", entries, "an array of objects", fix)


def _check_attempts(record: dict[str, Any], where: str, fix: str) -> None:
    """A rerun replicate's ``attempts`` (2 or more) and ``earlier`` (one object each)."""
    attempts, earlier = record.get("attempts"), record.get("earlier")
    if type(attempts) is not int or attempts < 2:
        raise _field(record, where, "attempts", "an integer >= 2 (set only for a replicate "
                     "run more than once)", fix)
    if type(earlier) is not list or len(earlier) != attempts - 1:
        raise _field(record, where, "earlier", f"an array of {attempts - 1} object(s), one "
                     "for each attempt before the last", fix)
    for entry in earlier:
        if type(entry) is not dict:
            raise _bad(where, "an entry of earlier", entry, "an object", fix)
        if entry.get("tokens") is not None:
            _check_tokens(entry["tokens"], where, fix)


def _check_error(record: dict[str, Any], error: object, where: str, fix: str) -> None:
    """Why an episode has no outcome: a known kind, and no outcome beside it."""
    if type(error) is not dict:
        raise _bad(where, "error", error, "null, or an object with a 'kind'", fix)
    kind = error.get("kind")
    if kind not in ERROR_KINDS:
        raise _bad(where, "error.kind", kind, f"one of {', '.join(ERROR_KINDS)} (a newer "
                   "pytest-prove may write kinds this one does not know: upgrade it)", fix)
    for name in ("type", "message", "traceback"):
        if name in error and type(error[name]) is not str:
            raise _bad(where, f"error.{name}", error[name], "a string", fix)
    if "outcome" not in record:
        raise _missing(where, "outcome", "null, since the episode has an error", fix)
    if record["outcome"] is not None:
        raise _bad(where, "outcome", record["outcome"], f"null, since the episode has an "
                   f"error ({kind}): an episode ends with an outcome or an error, not both", fix)


def _counts(use: dict[str, Any]) -> bool:
    """Whether a model's usage holds only integers >= 0 as its input, output and calls."""
    get = use.get
    for value in (get("input", 0), get("output", 0), get("calls", 0)):
        if type(value) is not int or value < 0:
            return False
    return True


def nested_tokens(tokens: dict[str, Any], where: str, fix: str) -> dict[str, Any]:
    """``tokens`` as every reader takes them: the usage of one model that a run of format 2
    writes flat (``{"input": 9, "output": 4, "model": "m", "calls": 2}``, that model's
    name and calls beside the totals, which are its own) as ``by_model`` of that model.
    Usage without a ``model`` is returned as it is."""
    if "model" not in tokens:
        return tokens
    model = tokens["model"]
    if type(model) is not str or not model:
        raise _bad(where, "tokens.model", model, "the name of the one model used", fix)
    if "by_model" in tokens:
        raise _bad(where, "tokens.by_model", tokens["by_model"],
                   "no by_model beside tokens.model (one model's usage is written flat)", fix)
    calls = tokens.get("calls", 0)
    if type(calls) is not int or calls < 0:  # named as written, not as by_model's
        raise _bad(where, "tokens.calls", calls, "an integer >= 0 (the model's calls)", fix)
    use = {name: tokens[name] for name in ("input", "output", "calls") if name in tokens}
    nested = {k: v for k, v in tokens.items() if k != "model" and k != "calls"}
    nested["by_model"] = {model: use}
    return nested


def _check_tokens(tokens: object, where: str, fix: str) -> None:
    """An episode's token usage: totals, and the same by model."""
    if type(tokens) is not dict:
        raise _bad(where, "tokens", tokens, "null or an object", fix)
    for name in ("input", "output"):
        value = tokens.get(name)
        if type(value) is not int or value < 0:
            raise _bad(where, f"tokens.{name}", value, "an integer >= 0", fix)
    by_model = tokens.get("by_model", {})
    if type(by_model) is not dict:
        raise _bad(where, "tokens.by_model", by_model, "an object by model", fix)
    for model, use in by_model.items():
        if type(use) is not dict or not _counts(use):
            raise _bad(where, f"tokens.by_model[{json.dumps(model)}]", use,
                       "an object of input, output and calls, integers >= 0", fix)


def check_seed(record: Mapping[str, Any], salt: str, where: str, fix: str = RUN_FIX) -> None:
    """Refuse an episode whose seed is not the one its run's salt gives it.

    A run paired with a baseline takes its salt and is matched with it replicate by
    replicate: after a changed salt or an edited seed, episodes that ran on different
    seeds would pass for twins.
    """
    rollout, key, replicate = record["rollout"], record["condition_key"], record["replicate"]
    try:
        expected = derive_seed(salt, rollout, key, replicate)
    except ValueError as exc:
        raise StoreError(
            f"{where}: {_printable(str(exc))}; the file was edited or damaged: {fix}"
        ) from None
    if record["seed"] != expected:
        raise StoreError(
            f"{where}: seed {record['seed']} is not the seed of "
            f"{episode_name(rollout, key, replicate)} under the salt {json.dumps(salt)} "
            f"(that is {expected}); the salt or the seed was edited, so a run paired with "
            f"this file would match episodes that did not run on the same seed: {fix}"
        )


def check_header(header: object, where: str, fix: str) -> dict[str, Any]:
    """A baseline's first line: ``{"pytest_prove_baseline": FORMAT, "manifest": {...}}``."""
    if not isinstance(header, dict):
        raise _bad(where, "the header", header,
                   'an object {"pytest_prove_baseline": 1, "manifest": {...}}', fix)
    if "pytest_prove_baseline" not in header:
        raise StoreError(
            f"{where}: not a pytest-prove baseline (its first line has no "
            f"'pytest_prove_baseline'); if it was one, {fix}"
        )
    if "manifest" not in header:
        raise _missing(where, "manifest", "the manifest of the run it was saved from", fix)
    return header


def check_manifest(manifest: object, where: str, fix: str, *, prefix: str = "",
                   run: bool = False) -> dict[str, Any]:
    """``manifest`` as a run's or a baseline's manifest, or a :class:`StoreError`.

    ``prefix`` names where it sits (``"manifest."`` in a baseline's header); ``run``
    says it is a run's own ``manifest.json``, which must say its run id.
    """
    if not isinstance(manifest, dict):
        raise _bad(where, prefix.rstrip(".") or "the manifest", manifest, "an object", fix)
    salt = manifest.get("salt")
    if not isinstance(salt, str) or not salt or "\x1f" in salt:
        if "salt" not in manifest:
            raise _missing(where, f"{prefix}salt", "the salt its seeds were made with", fix)
        raise _bad(where, f"{prefix}salt", salt, "a non-empty string without U+001F", fix)
    if run and "run_id" not in manifest:
        raise _missing(where, f"{prefix}run_id", "the run's id (a non-empty string)", fix)
    for name in ("run_id", "name", "status", "started", "baseline_name", "saved"):
        value = manifest.get(name)
        if name in manifest and (not isinstance(value, str) or not value):
            raise _bad(where, f"{prefix}{name}", value, "a non-empty string", fix)
    if manifest.get("ended") is not None and not isinstance(manifest["ended"], str):
        raise _bad(where, f"{prefix}ended", manifest["ended"], "null or a string", fix)
    rollouts = manifest.get("rollouts")
    if not run and "rollouts" not in manifest:
        raise _missing(where, f"{prefix}rollouts", "an object of rollouts by id", fix)
    if "rollouts" in manifest:
        if not isinstance(rollouts, dict):
            raise _bad(where, f"{prefix}rollouts", rollouts, "an object of rollouts by id", fix)
        for rollout, info in rollouts.items():
            if not isinstance(info, dict):
                raise _bad(where, _printable(f"{prefix}rollouts[{json.dumps(rollout)}]"), info,
                           "an object with the rollout's label and declaration", fix)
    for name in ("counts", "paired_with"):
        value = manifest.get(name)
        if value is not None and not isinstance(value, dict):
            raise _bad(where, f"{prefix}{name}", value, "null or an object", fix)
    return manifest
