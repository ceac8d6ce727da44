"""The cache of the agent's HTTP calls on the pytest side: ``--prove-cache`` (ini
``prove_cache``, ``prove_cache_max_mb``), switched on in every process of the session, and
the refusals that keep a replay from passing for evidence.

What a call does under the cache is the running side: :mod:`pytest_prove.running.cache`.
"""

from __future__ import annotations

import os
from typing import cast

import pytest

from ..running import cache
from .options import option_group
from .settings import Settings

__all__ = ["add_options", "end", "note_salt", "start", "take_recorded_salt"]

#: Why a replayed run is refused where evidence is needed.
NOT_EVIDENCE = ("a replayed run is not evidence: its model calls were answered from the "
                "cache, not by the model as it is today")


def _mode(text: str) -> str:
    value = text.strip().lower()
    if value not in cache.CACHE_MODES:
        raise pytest.UsageError(
            f"--prove-cache (or ini prove_cache): expected one of "
            f"{', '.join(cache.CACHE_MODES)}, got {text!r}")
    return value


def add_options(parser: pytest.Parser) -> None:
    group = option_group(parser, "running")
    group.addoption("--prove-cache", metavar="record|replay|replay-live|off", default=None,
                    help="record the HTTP calls rollouts make (httpx, requests) in the store, "
                         "or answer them from it without contacting the server; a replayed "
                         "run is marked and cannot be a baseline nor be compared "
                         "(docs/grading.md); default: ini prove_cache, else off")
    parser.addini("prove_cache", "record|replay|replay-live|off: the cache of rollouts' HTTP "
                  "calls (see --prove-cache)", default="off")
    parser.addini("prove_cache_max_mb", "the most megabytes one session adds to the cache of "
                  "HTTP calls", default="1024")


def _max_bytes(config: pytest.Config) -> int:
    raw = str(config.getini("prove_cache_max_mb")).strip()
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise pytest.UsageError(f"ini option prove_cache_max_mb: expected a whole number of "
                                f"megabytes >= 1, got {raw!r}")
    return value << 20


def start(config: pytest.Config, settings: Settings) -> None:
    """Switch the cache on (or off) in this process as the options say; on the controller,
    refuse what would let a replay pass for evidence."""
    opt = config.option
    given = getattr(opt, "prove_cache", None)
    mode = _mode(str(given if given is not None else config.getini("prove_cache")))
    if mode == "off":
        cache.configure(None)
        return
    if mode != "record" and not settings.is_worker:
        for name, flag in (("prove_save_baseline", "--prove-save-baseline"),
                           ("prove_update_baseline", "--prove-update-baseline"),
                           ("prove_baseline", "--prove-baseline")):
            if getattr(opt, name, None):
                raise pytest.UsageError(
                    f"--prove-cache={mode} with {flag}: {NOT_EVIDENCE}. Run the sweep without "
                    f"the cache (or with --prove-cache=record) for a verdict or a baseline; "
                    "a replay is for reading and debugging an episode")
    cache.configure(cache.CacheConfig(cast(cache.CacheMode, mode), settings.store / "cache",
                                      _max_bytes(config)))


#: The file that holds the salt of the last sweep recorded in a store's cache.
SALT_FILE = "salt"


def take_recorded_salt(config: pytest.Config, settings: Settings) -> None:
    """Without a salt of its own (--prove-salt, a baseline, a run resumed or replayed), a
    replaying session takes the salt of the last sweep recorded: its seeds, its calls (on
    the controller, once its store is open, before the salt is chosen)."""
    opt = config.option
    current = cache.current_config()
    named = ("prove_salt", "prove_baseline", "prove_resume", "prove_replay")
    if current is None or not current.replaying or any(getattr(opt, n, None) for n in named):
        return
    path = settings.store / "cache" / SALT_FILE
    try:
        salt = path.read_text(encoding="utf-8").strip()
    except OSError:
        salt = ""
    if not salt:
        raise pytest.UsageError(
            f"--prove-cache=replay: nothing was recorded in {settings.store / 'cache'}; run "
            "the sweep with --prove-cache=record first (a replay answers each call with the "
            "response recorded for the same seed)")
    opt.prove_salt = salt


def note_salt(config: pytest.Config, settings: Settings) -> None:
    """Keep the salt a recording session took, for the replays that follow it."""
    current = cache.current_config()
    if current is None or current.mode == "replay" or settings.is_worker:
        return
    folder = settings.store / "cache"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{SALT_FILE}.{os.getpid()}"
        temp.write_text(settings.salt + "\n", encoding="utf-8")
        os.replace(temp, folder / SALT_FILE)
    except OSError as exc:
        raise pytest.UsageError(f"{folder}: cannot write the cache's salt "
                                f"({exc.strerror or exc})") from None


def end() -> None:
    """Switch the cache off in this process (the session is over)."""
    cache.configure(None)
