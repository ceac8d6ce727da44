"""Fault injection: what a rollout's ``chaos=`` (or a sweep spec's ``[chaos]``) declares, the
fault each of an episode's HTTP calls gets, and the tally an episode keeps of them.

The fault of call ``i`` of an episode is a pure function of the episode's seed and ``i``
(:meth:`ChaosConfig.draw`): twins (the same seed in two runs) get the same faults on the
same calls, whatever process or thread runs them. The injection itself, at the HTTP
clients' transports, is :mod:`pytest_prove.running.chaos`.

Checked where it is declared (a spec when it is read, the decorator when it runs), so that
a bad table stops the session at collection, naming the file or the test.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, final

from ..errors import ProveError

__all__ = ["FAULT_KINDS", "KEYS", "MAX_STORED", "STATUS", "ChaosConfig", "ChaosError",
           "ChaosLog", "FaultCount", "chaos_differences", "chaos_of", "chaos_refusal", "chaos_text",
           "count_faults"]

#: The faults pytest-prove injects, in the order a call's draw walks them.
FAULT_KINDS: Final = ("http_429", "http_500", "http_502", "http_503", "read_timeout",
                      "connect_error")
#: The HTTP status of each fault that is a response.
STATUS: Final = {"http_429": 429, "http_500": 500, "http_502": 502, "http_503": 503}
#: The keys of a ``[chaos]`` table.
KEYS: Final = ("faults", "latency_s", "hosts", "retry_after_s")
#: Seconds a synthesised 429 asks the client to wait (its Retry-After), unless declared.
DEFAULT_RETRY_AFTER: Final = 1.0
#: The most calls, and faults, one episode stores; the rest are counted.
MAX_STORED: Final = 200

_HOST = re.compile(r"^[A-Za-z0-9.*?_\-\[\]]+(:(\d+|\*))?$")


class ChaosError(ProveError, ValueError):
    """A chaos setting that cannot be used, naming where it was set and the fix."""


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(
        value)


@final
@dataclass(frozen=True, slots=True)
class ChaosConfig:
    """Faults to inject into an episode's HTTP calls: each kind's rate per call, a delay
    added to every call (drawn in ``latency_s``), the hosts it applies to (empty: every
    host), and the Retry-After of a synthesised 429."""

    faults: tuple[tuple[str, float], ...] = ()
    latency_s: tuple[float, float] | None = None
    hosts: tuple[str, ...] = ()
    retry_after_s: float = DEFAULT_RETRY_AFTER

    @classmethod
    def from_mapping(cls, data: object, where: str) -> ChaosConfig:
        """The settings of a ``[chaos]`` table (or a ``chaos=`` mapping); ``where`` starts
        every error message."""
        example = ('e.g. {"faults": {"http_429": 0.05}, "latency_s": [0, 0.2], '
                   '"hosts": ["api.openai.com"]}')
        if not isinstance(data, Mapping):
            raise ChaosError(f"{where}: chaos must be a table of {', '.join(KEYS)}, {example}; "
                             f"got {data!r:.120}")
        unknown = sorted(str(k) for k in set(data) - set(KEYS))
        if unknown:
            raise ChaosError(f"{where}: unknown chaos key {unknown[0]!r}; known keys: "
                             f"{', '.join(KEYS)}")
        faults = data.get("faults", {})
        if not isinstance(faults, Mapping):
            raise ChaosError(f"{where}: faults must be a table of rates by kind, e.g. "
                             f'{{"http_429": 0.05}}; got {faults!r:.120}')
        for kind, rate in faults.items():
            if kind not in FAULT_KINDS:
                raise ChaosError(f"{where}: unknown fault {kind!r}; known faults: "
                                 f"{', '.join(FAULT_KINDS)}")
            if not _number(rate) or not 0 <= rate <= 1:
                raise ChaosError(f"{where}: the rate of {kind} must be a number in [0, 1] "
                                 f"(a share of calls), got {rate!r:.60}")
        rates = [(kind, float(faults[kind])) for kind in FAULT_KINDS if kind in faults]
        total = math.fsum(rate for _, rate in rates)
        if total > 1 + 1e-12:
            raise ChaosError(f"{where}: the fault rates add up to {total:g}, more than every "
                             "call; each call gets at most one fault, so their sum must be at "
                             "most 1")
        latency = data.get("latency_s")
        if latency is not None and (
                isinstance(latency, str) or not isinstance(latency, Sequence)
                or len(latency) != 2 or not all(_number(v) for v in latency)
                or not 0 <= latency[0] <= latency[1] <= 3600):
            raise ChaosError(f"{where}: latency_s must be [low, high], seconds with "
                             f"0 <= low <= high <= 3600, e.g. [0, 0.5]; got {latency!r:.120}")
        hosts = data.get("hosts", ())
        if isinstance(hosts, str) or not isinstance(hosts, Sequence):
            raise ChaosError(f"{where}: hosts must be a list of host patterns, e.g. "
                             f'["api.openai.com", "*.anthropic.com"]; got {hosts!r:.120}')
        for pattern in hosts:
            problem = _host_problem(pattern)
            if problem is not None:
                raise ChaosError(f"{where}: hosts has {pattern!r:.120}, {problem}")
        retry = data.get("retry_after_s", DEFAULT_RETRY_AFTER)
        if not _number(retry) or not 0 <= retry <= 3600:
            raise ChaosError(f"{where}: retry_after_s must be seconds in [0, 3600] (the "
                             f"Retry-After of an injected 429), got {retry!r:.60}")
        return cls(tuple(rates),
                   None if latency is None else (float(latency[0]), float(latency[1])),
                   tuple(dict.fromkeys(str(h).lower() for h in hosts)), float(retry))

    def to_json(self) -> dict[str, Any]:
        """The declaration as a manifest stores it."""
        return {"faults": dict(self.faults),
                "latency_s": None if self.latency_s is None else list(self.latency_s),
                "hosts": list(self.hosts), "retry_after_s": self.retry_after_s}

    def describe(self) -> str:
        """The declaration as a person reads it: ``http_429 5%, read_timeout 1%``."""
        parts = [f"{kind} {rate:.4g}" for kind, rate in self.faults if rate > 0]
        if self.latency_s is not None and self.latency_s[1] > 0:
            parts.append(f"latency {self.latency_s[0]:g}-{self.latency_s[1]:g} s")
        text = ", ".join(parts) or "every rate 0"
        return text + (f" on {', '.join(self.hosts)}" if self.hosts else "")

    def matches(self, host: str, port: int | None) -> bool:
        """Whether a call to ``host`` (and ``port``, None for the scheme's own) is one the
        faults apply to: every call without ``hosts``."""
        if not self.hosts:
            return True
        host = host.lower()
        address = f"{host}:{port}" if port is not None else host
        for pattern in self.hosts:
            if ":" in pattern.lstrip("["):
                if port is not None and fnmatch.fnmatchcase(address, pattern):
                    return True
            elif fnmatch.fnmatchcase(host, pattern):
                return True
        return False

    def draw(self, seed: int, index: int) -> tuple[str | None, float]:
        """The fault (None: the call goes through) and the added seconds of call ``index``
        of the episode whose seed is ``seed``: a pure function of the two."""
        digest = hashlib.blake2b(f"pytest-prove chaos\x1f{seed}\x1f{index}".encode(),
                                 digest_size=16).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        v = int.from_bytes(digest[8:], "big") / 2**64
        fault = None
        edge = 0.0
        for kind, rate in self.faults:
            edge += rate
            if u < edge:
                fault = kind
                break
        delay = 0.0
        if self.latency_s is not None:
            low, high = self.latency_s
            delay = low + v * (high - low)
        return fault, delay


def _host_problem(pattern: object) -> str | None:
    if not isinstance(pattern, str) or not pattern:
        return "not a host pattern; give a host, e.g. \"api.openai.com\", \"*.openai.com\" or " \
               "\"127.0.0.1:8080\""
    if "://" in pattern or "/" in pattern:
        return ("a URL; give the host alone, e.g. \"api.openai.com\" (a port may follow: "
                "\"localhost:8080\")")
    if not _HOST.match(pattern):
        return ("which is not a host pattern: letters, digits, '.', '-', '_' and the "
                "wildcards '*' and '?', then an optional ':port'")
    return None


@final
@dataclass(slots=True)
class ChaosLog:
    """One episode's calls under chaos: how many, which faults they got, what the stored
    record says of them (at most :data:`MAX_STORED` calls and faults, the rest counted).

    Calls are numbered in the order they start; an agent that makes calls at once in
    several threads or tasks numbers them in whichever order they happen to start."""

    config: ChaosConfig
    seed: int
    calls: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    latency: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, host: str, method: str, path: str) -> tuple[dict[str, Any], str | None,
                                                                 float]:
        """Number a call and draw its fault and delay; the returned entry is the call's in
        the log (the caller adds its ``status`` or ``error``)."""
        with self._lock:
            index = self.calls
            self.calls += 1
            fault, delay = self.config.draw(self.seed, index)
            entry: dict[str, Any] = {"call": index, "host": host, "method": method,
                                     "path": path[:200]}
            if delay:
                entry["latency_s"] = round(delay, 6)
                self.latency += delay
            if fault is not None:
                entry["fault"] = fault
                self.by_kind[fault] = self.by_kind.get(fault, 0) + 1
                if len(self.faults) < MAX_STORED:
                    self.faults.append({"call": index, "kind": fault, "host": host})
            if len(self.log) < MAX_STORED:
                self.log.append(entry)
        return entry, fault, delay

    def to_record(self) -> dict[str, Any]:
        """What the episode's record stores under ``chaos``."""
        found: dict[str, Any] = {"calls": self.calls, "by_kind": dict(self.by_kind),
                                 "faults": list(self.faults), "log": list(self.log)}
        injected = sum(self.by_kind.values())
        if injected > len(self.faults):
            found["faults_dropped"] = injected - len(self.faults)
        if self.calls > len(self.log):
            found["log_dropped"] = self.calls - len(self.log)
        if self.latency:
            found["latency_s"] = round(self.latency, 6)
        return found


def chaos_of(rollouts: object) -> dict[str, str | None]:
    """Each rollout's chaos, by id, as canonical JSON (None: no chaos), from a manifest's
    ``rollouts``."""
    found: dict[str, str | None] = {}
    if not isinstance(rollouts, Mapping):
        return found
    for rollout_id, info in rollouts.items():
        declaration = info.get("declaration") if isinstance(info, Mapping) else None
        chaos = declaration.get("chaos") if isinstance(declaration, Mapping) else None
        found[str(rollout_id)] = None if chaos is None else json.dumps(chaos, sort_keys=True)
    return found


def chaos_differences(before: object, after: object) -> list[tuple[str, str, str]]:
    """The rollouts of both manifests' ``rollouts`` whose chaos differs: (id, before's,
    after's), each as a person reads it ("none" without chaos)."""
    mine, theirs = chaos_of(before), chaos_of(after)
    found = []
    for rollout_id in sorted(set(mine) & set(theirs)):
        if mine[rollout_id] != theirs[rollout_id]:
            found.append((rollout_id, _said(mine[rollout_id]), _said(theirs[rollout_id])))
    return found


def chaos_refusal(found: Sequence[tuple[str, str, str]], before: str, after: str) -> str:
    """Why runs whose rollouts injected different faults (``found``, from
    :func:`chaos_differences`) are not compared, and how to ask for that comparison."""
    shown = "; ".join(f"rollout {rid}: {mine} in {before!r}, {theirs} in {after!r}"
                      for rid, mine, theirs in found[:4])
    more = f"; and {len(found) - 4} more" if len(found) > 4 else ""
    return (f"refused to compare: the faults injected differ ({shown}{more}). A run with "
            "faults is compared with one without them (or with other faults) only when you "
            "ask for it, since the comparison then measures the faults, not a change of "
            "yours: ask with --prove-chaos on (or off) on the run's command line (pytest-prove "
            "diff and check: --chaos-differs); or compare like with like, with the same chaos "
            "in both runs (e.g. --prove-chaos off against a baseline saved without faults)")


def _said(text: str | None) -> str:
    return "none" if text is None else chaos_text(json.loads(text))


def chaos_text(stored: object) -> str:
    """A stored chaos declaration as a person reads it (as stored, if it cannot be read)."""
    try:
        return ChaosConfig.from_mapping(stored, "chaos").describe()
    except ChaosError:
        return json.dumps(stored, sort_keys=True)[:200]


@final
@dataclass(frozen=True, slots=True)
class FaultCount:
    """What chaos did to one condition's episodes: how many episodes it ran, how many got
    at least one fault, their numbered calls, and the faults injected by kind."""

    episodes: int
    hit: int
    calls: int
    by_kind: Mapping[str, int]

    @property
    def faults(self) -> int:
        return sum(self.by_kind.values())

    def to_json(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "with_faults": self.hit, "calls": self.calls,
                "faults": self.faults, "by_kind": dict(self.by_kind)}


def count_faults(records: Iterable[Mapping[str, Any]],
                 label: Callable[[Mapping[str, Any]], str]) -> dict[str, FaultCount]:
    """The faults of the episodes that ran under chaos, by ``label(record)`` (a
    condition's name), in the order the labels sort; empty when none did."""
    found: dict[str, list[Any]] = {}
    for record in records:
        chaos = record.get("chaos")
        if not isinstance(chaos, Mapping):
            continue
        entry = found.setdefault(label(record), [0, 0, 0, {}])
        kinds = chaos.get("by_kind") or {}
        entry[0] += 1
        entry[1] += 1 if any(kinds.values()) else 0
        entry[2] += int(chaos.get("calls") or 0)
        for kind, n in kinds.items():
            entry[3][kind] = entry[3].get(kind, 0) + int(n)
    return {name: FaultCount(e[0], e[1], e[2], {k: e[3][k] for k in FAULT_KINDS if k in e[3]})
            for name, e in sorted(found.items())}
