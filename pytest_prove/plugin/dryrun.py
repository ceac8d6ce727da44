"""``--prove-plan`` as a dry run: the network is blocked while the session imports the
project (its conftest files, test modules and sweep targets), so that a module that calls a
model, a database or any host when it is imported is named, and the plan exits 4, before a
real sweep would pay for that call on every process it starts.

Blocked: connecting an internet socket (IPv4 or IPv6, localhost included), sending a
datagram, and resolving a name. A Unix socket is local and stays open. The block is
switched on before pytest imports the first conftest (``pytest_load_initial_conftests``)
and off when the session ends; a ``--prove-plan`` session runs no rollout, so nothing else
it does needs the network.
"""

from __future__ import annotations

import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Final

import pytest

__all__ = ["NetworkBlockedError", "attempts", "block", "plan_asked", "unblock"]

_AF_INET: Final = {socket.AF_INET, getattr(socket, "AF_INET6", socket.AF_INET)}
_lock = threading.Lock()
_saved: list[tuple[Any, str, Any]] = []
_attempts: list[str] = []
_root: Path | None = None


class NetworkBlockedError(OSError):
    """Raised where a ``--prove-plan`` session's import touched the network."""


def plan_asked(args: list[str]) -> bool:
    """Whether the command line asks for the plan (read before the options are parsed)."""
    return any(a == "--prove-plan" for a in args)


def _where() -> str:
    """The project's line that made the call: the innermost frame in the project's folder
    that is not under site-packages (else the innermost frame outside this module)."""
    frames = traceback.extract_stack()[:-3]
    for frame in reversed(frames):
        path = Path(frame.filename)
        if _root is not None and "site-packages" not in path.parts and path.is_relative_to(
                _root) and not path.is_relative_to(Path(__file__).parent.parent):
            return f"{path.relative_to(_root).as_posix()}:{frame.lineno}"
    for frame in reversed(frames):
        if not frame.filename.startswith(str(Path(__file__).parent.parent)):
            return f"{frame.filename}:{frame.lineno}"
    return "an unknown place"


def _refuse(what: str) -> NetworkBlockedError:
    where = _where()
    message = (f"{where} {what} while pytest-prove --prove-plan imported the project: a "
               "module that calls the network when it is imported does so on every process "
               "of a sweep; move the call into the rollout, a fixture or a function it calls")
    with _lock:
        if message not in _attempts:
            _attempts.append(message)
    return NetworkBlockedError(message)


def _address(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return repr(address)


def _guard_connect(original: Any) -> Any:
    """``socket.connect`` or ``connect_ex``, refused for an internet socket."""
    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in _AF_INET:
            raise _refuse(f"connected to {_address(address)}")
        return original(self, address)
    return connect


def _guard_sendto(original: Any) -> Any:
    def sendto(self: socket.socket, *args: Any) -> Any:
        if self.family in _AF_INET:
            raise _refuse(f"sent a datagram to {_address(args[-1])}")
        return original(self, *args)
    return sendto


def _numeric(host: object) -> bool:
    text = host.decode() if isinstance(host, bytes) else str(host)
    for family in _AF_INET:
        try:
            socket.inet_pton(family, text)
        except (OSError, ValueError):
            continue
        return True
    return False


def _guard_getaddrinfo(original: Any) -> Any:
    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host is None or _numeric(host):  # no lookup: the connect is what is named
            return original(host, *args, **kwargs)
        raise _refuse(f"looked up the address of {host!r}")
    getaddrinfo.__wrapped__ = original  # type: ignore[attr-defined]
    return getaddrinfo


def block(root: Path) -> None:
    """Block the network in this process (once), naming calls from ``root``'s files."""
    global _root
    with _lock:
        if _saved:
            return
        _root = root.resolve()
        _attempts.clear()
        for owner, name, wrap in ((socket.socket, "connect", _guard_connect),
                                  (socket.socket, "connect_ex", _guard_connect),
                                  (socket.socket, "sendto", _guard_sendto),
                                  (socket, "getaddrinfo", _guard_getaddrinfo)):
            original = getattr(owner, name)
            _saved.append((owner, name, original))
            setattr(owner, name, wrap(original))


def unblock() -> None:
    """Give the network back (the session is over)."""
    with _lock:
        while _saved:
            owner, name, original = _saved.pop()
            setattr(owner, name, original)


def attempts() -> list[str]:
    """Each place that touched the network while it was blocked, said once."""
    with _lock:
        return list(_attempts)


def load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    """Block the network before the first conftest is imported, when the plan is asked."""
    if plan_asked(args):
        block(Path(str(early_config.invocation_params.dir)))


def report(session: pytest.Session) -> None:
    """At the end of a plan: name every import that touched the network, and exit 4."""
    found = attempts()
    unblock()
    if not found:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in ["pytest-prove --prove-plan: the project touched the network when it was "
                 f"imported ({len(found)} place(s)):", *(f"  {m}" for m in found)]:
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:  # pragma: no cover - a session without a terminal
            print(line, file=sys.stderr)
    session.exitstatus = pytest.ExitCode.USAGE_ERROR
