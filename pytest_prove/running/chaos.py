"""Fault injection at the HTTP clients' transports, while a block of episodes runs (and the
cache of their calls, :mod:`.cache`, which answers a call fault injection lets through).

:func:`injecting` puts wrappers on the methods every request of these clients goes through,
and takes them off when the last block using them ends:

- httpx and httpx2 (``HTTPTransport.handle_request``, ``AsyncHTTPTransport.
  handle_async_request``): the transports the openai and anthropic SDKs send through;
- requests (``HTTPAdapter.send``, its urllib3 adapter).

aiohttp is not covered: its responses are tied to a live connection (there is no public
way to make one without a server), so its calls pass through untouched.

A wrapper reads the running episode from its context variable (the episode's log,
:mod:`.recording`): a call made outside every episode, or in an episode without chaos, or
to a host the declaration does not name, goes through as if nothing were there and is not
numbered. A numbered call waits its drawn delay, then either goes to the server (its
status is logged) or gets its fault without contacting it: a synthesised response with
the fault's status (a 429 with ``Retry-After``), or the client's own ``ReadTimeout`` or
``ConnectError`` raised.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from ..declare.chaos import STATUS, ChaosLog
from .cache import CacheLog, CacheMiss, decode_body, request_digest
from .recording import current_log

#: A call's entry in the episode's chaos log, its fault (or None) and its delay in seconds.
_Call = tuple[dict[str, Any], str | None, float]

__all__ = ["HEADER", "injecting"]

#: The header every synthesised response carries, naming its fault.
HEADER = "x-pytest-prove-chaos"

_lock = threading.Lock()
_users = 0
#: (owner class, attribute name, the original) of every wrapper put on.
_saved: list[tuple[type, str, Any]] = []


def _episode_chaos() -> ChaosLog | None:
    log = current_log()
    if log is None or log.closed:
        return None
    return log.chaos


def _episode_cache() -> CacheLog | None:
    log = current_log()
    if log is None or log.closed:
        return None
    return log.cache


def _message(kind: str, index: int) -> str:
    return f"pytest-prove chaos: {kind} injected on call {index} of this episode"


def _fault_headers(kind: str, chaos: ChaosLog) -> dict[str, str]:
    headers = {"content-type": "application/json", HEADER: kind}
    if kind == "http_429":
        wait = chaos.config.retry_after_s
        headers["retry-after"] = f"{wait:g}"
        headers["retry-after-ms"] = f"{round(wait * 1000)}"
    return headers


def _fault_body(kind: str, index: int) -> bytes:
    code = "rate_limit_exceeded" if kind == "http_429" else "server_error"
    return json.dumps({"error": {"message": _message(kind, index), "type": code,
                                 "code": code}}).encode()


# ---- httpx (and httpx2, the same API under another name)


def _host_of_url(url: Any) -> tuple[str, str, int | None, str]:
    """(host as logged, host, explicit port or None, path) of an httpx URL."""
    host = str(url.host)
    port = url.port
    return (f"{host}:{port}" if port is not None else host), host, port, str(url.path)


def _httpx_fault(module: Any, kind: str, index: int, chaos: ChaosLog, request: Any) -> Any:
    if kind == "read_timeout":
        raise module.ReadTimeout(_message(kind, index), request=request)
    if kind == "connect_error":
        raise module.ConnectError(_message(kind, index), request=request)
    return module.Response(STATUS[kind], headers=_fault_headers(kind, chaos),
                           content=_fault_body(kind, index), request=request)


def _httpx_call(chaos: ChaosLog | None, request: Any) -> _Call | None:
    """The log entry, fault and delay of an httpx request, or None to let it through."""
    if chaos is None:
        return None
    shown, host, port, path = _host_of_url(request.url)
    if not chaos.config.matches(host, port):
        return None
    return chaos.begin(shown, str(request.method), path)


@contextmanager
def _noting_errors(entry: dict[str, Any]) -> Iterator[None]:
    """Log the name of an exception the real transport raises for the call, and re-raise it."""
    try:
        yield
    except BaseException as exc:
        entry["error"] = type(exc).__name__
        raise


def _httpx_cached_sync(module: Any, original: Any, transport: Any, request: Any) -> Any:
    """The response to ``request``: from the server, recorded when the episode records its
    calls; or from the cache when it replays them (see :mod:`.cache`)."""
    cache = _episode_cache()
    if cache is None:
        return original(transport, request)
    index, method, url = cache.next_index(), str(request.method), str(request.url)
    digest = request_digest(method, url, request.read())
    if cache.config.replaying:
        found = cache.lookup(index, method, url, digest)
        if found is not None:
            return module.Response(int(found["status"]), headers=found["headers"],
                                   content=decode_body(found), request=request)
        if cache.config.mode == "replay":
            raise CacheMiss(cache.misses[-1])
    response = original(transport, request)
    response.read()
    cache.keep(index, method, url, digest, response.status_code,
               list(response.headers.multi_items()), response.content)
    return response


async def _httpx_cached_async(module: Any, original: Any, transport: Any,
                              request: Any) -> Any:
    """:func:`_httpx_cached_sync` for the async transport."""
    cache = _episode_cache()
    if cache is None:
        return await original(transport, request)
    index, method, url = cache.next_index(), str(request.method), str(request.url)
    digest = request_digest(method, url, await request.aread())
    if cache.config.replaying:
        found = cache.lookup(index, method, url, digest)
        if found is not None:
            return module.Response(int(found["status"]), headers=found["headers"],
                                   content=decode_body(found), request=request)
        if cache.config.mode == "replay":
            raise CacheMiss(cache.misses[-1])
    response = await original(transport, request)
    await response.aread()
    cache.keep(index, method, url, digest, response.status_code,
               list(response.headers.multi_items()), response.content)
    return response


def _wrap_httpx_sync(module: Any, original: Any) -> Any:
    def handle_request(self: Any, request: Any) -> Any:
        chaos = _episode_chaos()
        call = _httpx_call(chaos, request)
        if chaos is None or call is None:
            return _httpx_cached_sync(module, original, self, request)
        entry, fault, delay = call
        if delay:
            time.sleep(delay)
        if fault is not None:
            return _httpx_fault(module, fault, entry["call"], chaos, request)
        with _noting_errors(entry):
            response = _httpx_cached_sync(module, original, self, request)
        entry["status"] = response.status_code
        return response

    handle_request.__wrapped__ = original  # type: ignore[attr-defined]
    return handle_request


def _wrap_httpx_async(module: Any, original: Any) -> Any:
    async def handle_async_request(self: Any, request: Any) -> Any:
        chaos = _episode_chaos()
        call = _httpx_call(chaos, request)
        if chaos is None or call is None:
            return await _httpx_cached_async(module, original, self, request)
        entry, fault, delay = call
        if delay:
            await _sleep(delay)
        if fault is not None:
            return _httpx_fault(module, fault, entry["call"], chaos, request)
        with _noting_errors(entry):
            response = await _httpx_cached_async(module, original, self, request)
        entry["status"] = response.status_code
        return response

    handle_async_request.__wrapped__ = original  # type: ignore[attr-defined]
    return handle_async_request


async def _sleep(seconds: float) -> None:
    """Sleep in whichever event loop runs the call: asyncio, or trio through anyio (which
    httpx depends on)."""
    try:
        import anyio
    except ImportError:  # pragma: no cover - httpx requires anyio
        import asyncio

        await asyncio.sleep(seconds)
        return
    await anyio.sleep(seconds)


# ---- requests


def _requests_cached(original: Any, adapter: Any, request: Any, *args: Any,
                     **kwargs: Any) -> Any:
    """:func:`_httpx_cached_sync` for requests' adapter."""
    cache = _episode_cache()
    if cache is None:
        return original(adapter, request, *args, **kwargs)
    body = request.body
    raw = body.encode("utf-8") if isinstance(body, str) else body if isinstance(
        body, bytes) else None
    index, method, url = cache.next_index(), str(request.method), str(request.url)
    digest = request_digest(method, url, raw)
    if cache.config.replaying:
        found = cache.lookup(index, method, url, digest)
        if found is not None:
            return _requests_response(request, int(found["status"]), found["headers"],
                                      decode_body(found))
        if cache.config.mode == "replay":
            raise CacheMiss(cache.misses[-1])
    response = original(adapter, request, *args, **kwargs)
    cache.keep(index, method, url, digest, response.status_code,
               list(response.headers.items()), response.content)
    return response


def _requests_response(request: Any, status: int, headers: Any, body: bytes) -> Any:
    requests: Any = importlib.import_module("requests")
    response = requests.Response()
    response.status_code = status
    response.reason = _REASONS.get(status, "")
    response.headers = requests.structures.CaseInsensitiveDict(headers)
    response._content = body
    response.encoding = response.headers.get("content-type", "").partition("charset=")[2] or \
        "utf-8"
    response.url = str(request.url)
    response.request = request
    return response


_REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request",
            401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


def _wrap_requests(original: Any) -> Any:
    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        chaos = _episode_chaos()
        if chaos is None:
            return _requests_cached(original, self, request, *args, **kwargs)
        url = urlsplit(str(request.url))
        host = (url.hostname or "").lower()
        try:
            port = url.port
        except ValueError:
            port = None
        if not chaos.config.matches(host, port):
            return _requests_cached(original, self, request, *args, **kwargs)
        shown = f"{host}:{port}" if port is not None else host
        entry, fault, delay = chaos.begin(shown, str(request.method), url.path)
        if delay:
            time.sleep(delay)
        if fault is not None:
            return _requests_fault(fault, entry["call"], chaos, request)
        with _noting_errors(entry):
            response = _requests_cached(original, self, request, *args, **kwargs)
        entry["status"] = response.status_code
        return response

    send.__wrapped__ = original  # type: ignore[attr-defined]
    return send


def _requests_fault(kind: str, index: int, chaos: ChaosLog, request: Any) -> Any:
    requests: Any = importlib.import_module("requests")
    if kind == "read_timeout":
        raise requests.exceptions.ReadTimeout(_message(kind, index), request=request)
    if kind == "connect_error":
        raise requests.exceptions.ConnectionError(_message(kind, index), request=request)
    response = requests.Response()
    response.status_code = STATUS[kind]
    response.reason = {429: "Too Many Requests", 500: "Internal Server Error",
                       502: "Bad Gateway", 503: "Service Unavailable"}[STATUS[kind]]
    response.headers = requests.structures.CaseInsensitiveDict(_fault_headers(kind, chaos))
    response._content = _fault_body(kind, index)
    response.encoding = "utf-8"
    response.url = str(request.url)
    response.request = request
    return response


# ---- putting the wrappers on, and taking them off


def _present(name: str) -> Any:
    """The module ``name`` if it is installed and imports, else None (a client that cannot
    be imported sends no request to wrap)."""
    try:
        if importlib.util.find_spec(name) is None:
            return None
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a broken install of a client is not ours to fail on
        return None


def _install() -> None:
    for name in ("httpx", "httpx2"):
        module = _present(name)
        if module is None:
            continue
        for owner, attr, wrap in ((module.HTTPTransport, "handle_request", _wrap_httpx_sync),
                                  (module.AsyncHTTPTransport, "handle_async_request",
                                   _wrap_httpx_async)):
            original = owner.__dict__[attr]
            _saved.append((owner, attr, original))
            setattr(owner, attr, wrap(module, original))
    if _present("requests") is not None:
        adapter: Any = importlib.import_module("requests.adapters").HTTPAdapter
        original = adapter.__dict__["send"]
        _saved.append((adapter, "send", original))
        adapter.send = _wrap_requests(original)


def _uninstall() -> None:
    while _saved:
        owner, attr, original = _saved.pop()
        setattr(owner, attr, original)


@contextmanager
def injecting(active: bool) -> Iterator[None]:
    """Wrap the clients' transports for the block (nothing when not ``active``); the last
    block to end takes the wrappers off, so that nothing is wrapped between blocks."""
    global _users
    if not active:
        yield
        return
    with _lock:
        if _users == 0:
            try:
                _install()
            except BaseException:
                _uninstall()
                raise
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                _uninstall()
