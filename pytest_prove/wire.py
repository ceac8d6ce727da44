"""What crosses between an xdist worker and the controller, in one place.

Four channels, each plain JSON-able data:

- down, in ``workerinput``: the run's salt, the replicates a resumed run already holds, and
  for a worker on the controller's machine where the token cap's flag file will appear
  (:class:`WorkerInput`);
- down, while the session runs: once the token cap is reached, one command on xdist's own
  channel to every worker (:func:`cap_command`), which reaches a remote worker
  (``--tx socket=``, ``ssh=``) that cannot see the controller's disk;
- up, with each test report: one attribute, ``prove``, holding :class:`ReportData` (the
  item's stored episodes on its call report; on its setup report the identities it is about
  to run, the rollout's declaration the first time, the sweep's plan with a worker's first
  report, what capture switched on);
- up, in ``workeroutput`` when a worker ends: its plan and the design check's refusal
  (:class:`WorkerOutput`).

In one process without xdist the same report data flows the same way, so the controller
has one way to read it.  Everything here is read by :func:`take` / :func:`worker_input` /
:func:`worker_output` and written by :func:`attach` / :func:`to_worker_input` /
:func:`to_worker_output`, and the cap's command by :func:`cap_command` / :func:`cap_message`,
and nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TypedDict

__all__ = [
    "Done",
    "PlanData",
    "ReportData",
    "RolloutData",
    "WorkerInput",
    "WorkerOutput",
    "attach",
    "cap_command",
    "cap_message",
    "carries",
    "decided_command",
    "decided_message",
    "spans",
    "take",
    "to_worker_input",
    "to_worker_output",
    "unspan",
    "worker_input",
    "worker_output",
]

#: The one attribute of a test report that carries pytest-prove's data.
REPORT_ATTRIBUTE: Final = "prove"

#: The name of the command that tells a worker the run reached its token cap.
CAP_COMMAND: Final = "prove_cap"

#: The name of the command that tells a worker which conditions a sequential run decided.
DECIDED_COMMAND: Final = "prove_decided"

#: A replicate a run holds: (rollout id, condition key, replicate).
Done = tuple[str, str, int]


class RolloutData(TypedDict):
    id: str
    label: str
    declaration: dict[str, Any]


class PlanData(TypedDict):
    """A process's collection: every rollout's plan before deselection, what the selection
    kept, and the paths it collected from (rootdir-relative)."""

    plan: dict[str, dict[str, Any]]
    #: rollout -> condition key -> the replicates kept, as :func:`spans` (a sweep of
    #: 100,000 replicates is one pair, not 100,000 numbers every worker sends twice)
    selected: dict[str, dict[str, list[list[int]]]]
    paths: list[str]
    ignored: list[str]  # --ignore and --ignore-glob, rootdir-relative
    skipped_files: list[str]  # modules skipped at collection (importorskip, a module skip)
    narrowed: bool  # --lf or a node id narrowed collection itself, below the plan
    #: --prove-shard: {"index": K, "count": N, "slice": {rollout: {condition key:
    #: [replicates]}}}, the replicates of the collected sweep that are this shard's.
    shard: dict[str, Any] | None


class ReportData(TypedDict, total=False):
    #: call: the stored records of the item's replicates; teardown, when the session stops:
    #: those of replicates run ahead of items it did not reach (each names its item)
    episodes: list[dict[str, Any]]
    pending: list[dict[str, Any]]  # setup: the identities the item runs
    rollout: RolloutData  # setup, once per rollout and process
    plan: PlanData  # setup, once per xdist worker
    capture: dict[str, Any]  # setup: what capture switched on; call: spans no episode took


class WorkerInput(TypedDict):
    salt: str
    done: frozenset[Done]
    cap_flag: str | None
    replay: dict[str, int] | None  # --prove-replay: the run's replicates by rollout id
    #: The runs whose faults this run must inject (a baseline, a resumed run): [name,
    #: {rollout id: chaos or None}, whether even --prove-chaos may not differ].
    chaos: list[Any]
    #: --prove-sequential: the controller's file of decided conditions (local workers).
    sequential_flag: str | None
    #: The controller's pytest-prove version (None from one that sent none).
    version: str | None
    #: The runs whose arms this run's must agree with (a baseline, a resumed run): [kind,
    #: name, {rollout id: its arms or None}].
    arms: list[Any]


class WorkerOutput(TypedDict):
    plan: PlanData | None
    design_failure: str | None
    design_note: str | None  # a design that passed only thanks to the baseline's rates


_REPORT_KEYS: Final = frozenset(ReportData.__annotations__)


def attach(report: object, **data: Any) -> None:
    """Add ``data`` (keys of :class:`ReportData`) to what ``report`` carries."""
    unknown = data.keys() - _REPORT_KEYS
    if unknown:
        raise TypeError(f"not report data: {', '.join(sorted(unknown))}")
    carried = report.__dict__.setdefault(REPORT_ATTRIBUTE, {})
    carried.update(data)


def carries(report: object) -> bool:
    """Whether ``report`` carries anything (most reports, all but rollout items', carry
    nothing: reading them stops here)."""
    return bool(report.__dict__.get(REPORT_ATTRIBUTE))


def take(report: object, *names: str) -> ReportData:
    """What ``report`` carries, removing ``names`` from it (the controller keeps no episode
    on a report once it stored them); everything is left when no name is given."""
    carried: dict[str, Any] = report.__dict__.get(REPORT_ATTRIBUTE) or {}
    found: ReportData = {**carried}  # type: ignore[typeddict-item]
    for name in names:
        carried.pop(name, None)
    if names and not carried:
        # Nothing left: no empty dict on each of a sweep's reports, which pytest keeps to
        # the end of the session (about 200 bytes a report on the controller).
        report.__dict__.pop(REPORT_ATTRIBUTE, None)
    return found


def to_worker_input(workerinput: dict[str, Any], *, salt: str, done: Iterable[Done],
                    cap_flag: str | None, replay: Mapping[str, int] | None = None,
                    chaos: Sequence[Any] = (), sequential_flag: str | None = None,
                    version: str | None = None, arms: Sequence[Any] = ()) -> None:
    workerinput["prove"] = {"salt": salt, "done": [list(d) for d in done],
                            "cap_flag": cap_flag,
                            "replay": None if replay is None else dict(replay),
                            "chaos": list(chaos), "sequential_flag": sequential_flag,
                            "version": version, "arms": list(arms)}


def worker_input(workerinput: Mapping[str, Any]) -> WorkerInput:
    sent = workerinput.get("prove") or {}
    return WorkerInput(salt=str(sent.get("salt", "")),
                       done=frozenset((str(r), str(k), int(n)) for r, k, n in sent.get("done", ())),
                       cap_flag=sent.get("cap_flag"),
                       replay=None if sent.get("replay") is None else {
                           str(k): int(v) for k, v in sent["replay"].items()},
                       chaos=list(sent.get("chaos") or ()),
                       sequential_flag=sent.get("sequential_flag"),
                       version=None if sent.get("version") is None else str(sent["version"]),
                       arms=list(sent.get("arms") or ()))


def spans(numbers: Iterable[int]) -> list[list[int]]:
    """``numbers`` as ``[start, stop]`` pairs of runs ``start, start + 1, ..., stop - 1``,
    in the order given: ``[0, 1, 2, 7, 8]`` is ``[[0, 3], [7, 9]]``."""
    found: list[list[int]] = []
    last: list[int] | None = None
    for n in numbers:
        if last is not None and n == last[1]:
            last[1] = n + 1
        else:
            last = [n, n + 1]
            found.append(last)
    return found


def unspan(pairs: Iterable[Sequence[int]]) -> Iterable[range]:
    """The runs of :func:`spans`' pairs, as ranges."""
    return (range(int(start), int(stop)) for start, stop in pairs)


def to_worker_output(workeroutput: dict[str, Any], *, plan: PlanData,
                     design_failure: str | None, design_note: str | None = None) -> None:
    workeroutput["prove"] = {"plan": plan, "design_failure": design_failure,
                             "design_note": design_note}


def worker_output(workeroutput: Mapping[str, Any] | None) -> WorkerOutput:
    sent = (workeroutput or {}).get("prove") or {}
    return WorkerOutput(plan=sent.get("plan"), design_failure=sent.get("design_failure"),
                        design_note=sent.get("design_note"))


def cap_command(message: str) -> tuple[str, dict[str, Any]]:
    """The command (xdist's ``(name, kwargs)`` form) that says the run reached its cap."""
    return CAP_COMMAND, {"message": message}


def cap_message(command: object) -> str | None:
    """The cap's message when ``command`` is :func:`cap_command`'s, else None (a command of
    xdist's own)."""
    if (isinstance(command, tuple) and len(command) == 2 and command[0] == CAP_COMMAND
            and isinstance(command[1], dict)):
        return str(command[1].get("message") or "token cap reached")
    return None


def decided_command(decided: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The command that tells a worker the conditions a sequential run decided: ``{"rollout
    id\x1fcondition key": reason}``, every one so far."""
    return DECIDED_COMMAND, {"decided": dict(decided)}


def decided_message(command: object) -> dict[str, str] | None:
    """The decided conditions when ``command`` is :func:`decided_command`'s, else None."""
    if (isinstance(command, tuple) and len(command) == 2 and command[0] == DECIDED_COMMAND
            and isinstance(command[1], dict) and isinstance(command[1].get("decided"), dict)):
        return {str(k): str(v) for k, v in command[1]["decided"].items()}
    return None
