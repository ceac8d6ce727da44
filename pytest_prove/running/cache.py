"""Recording the agent's HTTP calls, and answering them again from the recording.

``--prove-cache=record`` keeps every response an episode's HTTP calls got (through the same
transport wrappers fault injection uses, :mod:`.chaos`: httpx, httpx2, requests), one file
per episode under the store's ``cache/``, keyed by its rollout, condition and seed; each call
by its place in the episode and a digest of its request (method, URL, body).
``--prove-cache=replay`` answers each call from that file without contacting the server: the
n-th call of an episode gets the n-th response recorded for the same rollout, condition and
seed, if its request is the same; anything else is a miss, an error of the episode that names
the call (``replay-live`` sends a miss to the server instead, and records it).

Two replicates of one condition run on different seeds, so they never get each other's
responses.  No request header is stored (API keys and cookies travel in them), and of the
response headers, those that carry a cookie or a credential, and those that describe the
encoding of a body the store keeps decoded, are left out.

A replayed episode is marked (``replayed``): it is not evidence of how the agent behaves
today, and the gate, the baselines and the comparisons refuse it (docs/grading.md).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, final

__all__ = ["CACHE_MODES", "CacheConfig", "CacheLog", "CacheMiss", "CacheMode", "active",
           "configure", "current_config", "decode_body", "request_digest"]

CacheMode = Literal["record", "replay", "replay-live", "off"]
CACHE_MODES: Final[tuple[str, ...]] = ("record", "replay", "replay-live", "off")

#: Response headers never stored: credentials and cookies, and what describes an encoding
#: the stored (decoded) body no longer has.
_DROPPED: Final = frozenset({"set-cookie", "set-cookie2", "authorization", "proxy-authorization",
                             "www-authenticate", "cookie", "content-encoding",
                             "content-length", "transfer-encoding", "connection"})


class CacheMiss(Exception):  # noqa: N818 - raised in the agent's call: it reads as what it is
    """A replayed episode made a call the recording does not hold."""


@final
@dataclass(frozen=True, slots=True)
class CacheConfig:
    """Where the cache lives and what the session does with it."""

    mode: CacheMode
    directory: Path
    max_bytes: int = 1 << 30

    @property
    def replaying(self) -> bool:
        return self.mode in ("replay", "replay-live")


_config: CacheConfig | None = None
_written = 0  # bytes this process added to the cache
_lock = threading.Lock()


def configure(config: CacheConfig | None) -> None:
    """Set (or, with None, clear) the session's cache: every episode started afterwards in
    this process records or replays its calls as ``config`` says."""
    global _config, _written
    with _lock:
        _config = None if config is None or config.mode == "off" else config
        _written = 0


def current_config() -> CacheConfig | None:
    return _config


def active() -> bool:
    """Whether the transports must be wrapped for the cache."""
    return _config is not None


def request_digest(method: str, url: str, body: bytes | None) -> str:
    """What identifies a request in the cache: its method, URL and body (never a header)."""
    h = hashlib.sha256()
    for part in (method.upper().encode(), url.encode("utf-8", "backslashreplace"), body or b""):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()[:32]


def _episode_path(directory: Path, rollout: str, condition_key: str, seed: int) -> Path:
    name = hashlib.sha256(f"{rollout}\0{condition_key}".encode("utf-8",
                                                               "backslashreplace")).hexdigest()
    return directory / name[:2] / name[2:24] / f"{seed}.json"


def _kept_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers
            if k.lower() not in _DROPPED and "api-key" not in k.lower()
            and "token" not in k.lower()]


@dataclass
class CacheLog:
    """One episode's calls: those it recorded, or those it is answered from."""

    config: CacheConfig
    path: Path
    calls: list[dict[str, Any]] = field(default_factory=list)
    recorded: list[dict[str, Any]] | None = None  # replay: what the file holds
    misses: list[str] = field(default_factory=list)
    served: int = 0
    _index: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, config: CacheConfig, rollout: str, condition_key: str,
              seed: int) -> CacheLog:
        log = cls(config, _episode_path(config.directory, rollout, condition_key, seed))
        if config.replaying:
            try:
                log.recorded = json.loads(log.path.read_text(encoding="utf-8"))["calls"]
            except (OSError, ValueError, KeyError, TypeError):
                log.recorded = []
        return log

    def next_index(self) -> int:
        with self._lock:
            index = self._index
            self._index += 1
            return index

    def lookup(self, index: int, method: str, url: str, digest: str) -> dict[str, Any] | None:
        """The recorded response of call ``index`` if its request is the same, else None
        (and the miss is noted, with what was recorded there)."""
        found = self.recorded[index] if self.recorded and index < len(self.recorded) else None
        if found is not None and found.get("digest") == digest:
            with self._lock:
                self.served += 1
            return found
        if found is None:
            why = (f"the recording holds {len(self.recorded or ())} call(s) for this episode"
                   if self.recorded else "nothing was recorded for this episode (run it with "
                   "--prove-cache=record first)")
        else:
            why = (f"call {index + 1} was recorded as {found.get('method')} {found.get('url')} "
                   "with another request body" if found.get("url") == url else
                   f"call {index + 1} was recorded as {found.get('method')} {found.get('url')}")
        message = (f"call {index + 1} of this episode, {method} {url}, is not in the cache: "
                   f"{why}; record it again with --prove-cache=record, or let misses go to "
                   "the server with --prove-cache=replay-live")
        with self._lock:
            self.misses.append(message)
        return None

    def keep(self, index: int, method: str, url: str, digest: str, status: int,
             headers: list[tuple[str, str]], body: bytes) -> None:
        entry = {"call": index, "method": method, "url": url, "digest": digest,
                 "status": status, "headers": _kept_headers(headers),
                 "body": base64.b64encode(body).decode("ascii")}
        with self._lock:
            self.calls.append(entry)

    def flush(self) -> str | None:
        """Write the episode's recorded calls (temporary file, then rename); the reason they
        were not written, when the cache is over its size bound or cannot be written."""
        global _written
        if not self.calls:
            return None
        calls = sorted(self.calls, key=lambda c: int(c["call"]))
        if self.recorded:  # replay-live: the recorded calls, and the new ones after them
            mine = {int(c["call"]) for c in calls}
            calls = sorted([c for c in self.recorded if int(c["call"]) not in mine] + calls,
                           key=lambda c: int(c["call"]))
        text = json.dumps({"format": 1, "calls": calls}, ensure_ascii=False,
                          separators=(",", ":"))
        data = text.encode("utf-8")
        with _lock:
            if _written + len(data) > self.config.max_bytes:
                return (f"the cache is full ({self.config.max_bytes:,} bytes written by this "
                        "session): later episodes are not recorded; pytest-prove prune "
                        "--cache empties it, prove_cache_max_mb raises the bound")
            _written += len(data)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(temp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError as exc:
            return f"{self.path}: cannot write the episode's calls ({exc.strerror or exc})"
        return None


def decode_body(entry: dict[str, Any]) -> bytes:
    return base64.b64decode(str(entry.get("body") or ""))
