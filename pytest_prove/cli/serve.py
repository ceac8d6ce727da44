"""``pytest-prove serve``: a read-only web app over the store, on this machine only.

The server is the standard library's :class:`~http.server.ThreadingHTTPServer`: a handful of
pages read from files, for one user on one machine, need no framework, and the package's
dependencies stay as they are.  It binds to the loopback address only (127.0.0.1, ::1 or
localhost; any other ``--host`` is refused, exit 1), answers GET and HEAD (any other method:
405) and writes nothing anywhere.

Its guards: the Host header must name the loopback address and the port it listens on
(anything else: 421, against DNS rebinding, where a page of another site reaches this
server by a name of its own); every answer carries a Content-Security-Policy that lets
nothing be loaded (inline styles, and inline script only on the report's pages that need
it), ``nosniff``, no referrer and no framing; every text is escaped by the report's
renderers; a run is named only through :meth:`Store.open` (a name with a slash, ``..`` or
a leading ``/`` is a 404 before the store is asked), never joined onto a path.

Pages are built one at a time (a lock): the store's readers and Python's warnings filter
(which the reading uses to collect what was read with a loss) are not made for threads.
The runs read are kept while their files are unchanged (a few, newest used first).
"""

from __future__ import annotations

import argparse
import html
import socket
import socketserver
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Final, TextIO
from urllib.parse import parse_qs, unquote, urlsplit

from ..config.values import gate_fails_on
from ..declare.spec import condition_label
from ..errors import ProveError
from ..report import pages
from ..report._format import money, terminal_text
from ..report.episode import episode_lines, twins_lines
from ..report.html import render_html, render_run_html, worst_first
from ..report.runs import show_lines
from ..review import review
from ..review.cost import cost_of, prices_for
from ..review.describe import describe
from ..review.episode import (
    EpisodeNotFoundError,
    find_episode,
    first_difference,
    found_of,
    twin_of,
)
from ..review.figures import figures_of
from ..review.flips import flips
from ..review.labels import label_of
from ..review.tallies import stored_runs, tally
from ..review.trend import trend, trend_choices
from ..store import Run, Store, StoreError
from .base import EXIT_OK, Output, command, store_of

__all__ = ["App", "ServeError", "loopback", "make_server", "url_of"]

#: The addresses serve may listen on, as asked, and the one it binds.
LOOPBACK: Final = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "::1"}
#: Seconds between reloads of a page that shows a run being written.
REFRESH: Final = 5
#: A run not ended whose files changed this many seconds ago or less is taken as being
#: written (a session holds it); older, its session stopped.
LIVE_WINDOW: Final = 600
#: Runs kept read, newest used first.
KEPT: Final = 12
#: Episodes listed on a run's page, each a link (the rest: pytest-prove show -v, flips).
LISTED: Final = 400

Answer = tuple[int, str, bool]  # status, page, whether the page runs the report's script


class ServeError(ProveError):
    """``pytest-prove serve`` asked to listen where it may not, or where it cannot."""


class _NotFoundError(ProveError):
    """A path that names no page, run or episode (404); never leaves this module."""


def loopback(host: str) -> str:
    """The address to bind for ``--host``: the loopback only, else :class:`ServeError`."""
    asked = host.strip().removeprefix("[").removesuffix("]").lower()
    if asked not in LOOPBACK:
        raise ServeError(
            f"--host {host!r} is refused: serve listens on this machine's loopback only "
            "(127.0.0.1, ::1 or localhost), since its pages show all the store holds and it "
            "asks no password. To read it from another machine, forward the port: ssh -L "
            "8000:127.0.0.1:8000 THIS_HOST, then open http://127.0.0.1:8000/ there")
    return LOOPBACK[asked]


def security_headers(script: bool) -> list[tuple[str, str]]:
    """The headers of every answer: nothing may be loaded, framed or sniffed."""
    policy = ("default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
              "form-action 'self'; frame-ancestors 'none'")
    if script:
        policy += "; script-src 'unsafe-inline'"
    return [("Content-Security-Policy", policy), ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
            ("Cross-Origin-Resource-Policy", "same-origin"), ("Cache-Control", "no-store")]


def _name(text: str) -> str:
    """A run's name as a path gave it; one that could reach a file is a 404 here, before
    the store is asked (which checks names again: Store.open)."""
    if (not text or "/" in text or "\\" in text or ".." in text or "\0" in text
            or PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute()
            or text.startswith("~")):
        raise _NotFoundError(f"{text!r} is not a run's name: runs are named by plain words (a "
                        "name, a run id, latest or baseline:NAME), never by a path")
    return text


def _planned(manifest: Mapping[str, Any]) -> int | None:
    plan = manifest.get("plan")
    if not isinstance(plan, Mapping):
        return None
    total = sum(int(info.get("replicates") or 0) * len(info.get("conditions") or ())
                for info in plan.values() if isinstance(info, Mapping))
    return total or None


def _ended(record: Mapping[str, Any]) -> str:
    error = record.get("error")
    if error is None:
        return str(record.get("outcome"))
    return str(error.get("kind") or "errored") + (f": {error['type']}" if error.get("type")
                                                  else "")


@dataclass
class App:
    """What the pages are built from: the store, and how a comparison is read (the
    project's ini values, as every command reads them)."""

    store: Store
    q: float = 0.05
    max_mde: float = 0.20
    missing: Any = "test"
    margin: float | None = None
    fail_on: frozenset[str] | None = None
    max_errored: float | None = None
    allow_underpowered: bool = False
    prices_from: Path = field(default_factory=Path.cwd)
    lock: threading.Lock = field(default_factory=threading.Lock)
    kept: OrderedDict[Path, tuple[tuple[int, ...], Run]] = field(default_factory=OrderedDict)

    @property
    def where(self) -> str:
        return str(self.store.root)

    # ---- reading runs

    def _kept(self, path: Path, files: tuple[Path, ...], read: Callable[[], Run]) -> Run:
        signature = tuple(n for p in files if p.exists()
                          for n in (p.stat().st_mtime_ns, p.stat().st_size))
        held = self.kept.get(path)
        if held is not None and held[0] == signature:
            self.kept.move_to_end(path)
            return held[1]
        run = read()
        self.kept[path] = (signature, run)
        while len(self.kept) > KEPT:
            self.kept.popitem(last=False)
        return run

    def read(self, directory: Path) -> Run:
        return self._kept(directory, (directory / "manifest.json",
                                      directory / "episodes.jsonl"),
                          lambda: self.store.read(directory))

    def _baseline(self, name: str) -> Run:
        path = self.store.baseline_file(name) if name in self.store.baselines() else None
        if path is None:
            return self.store.load_baseline(name)  # the store's own refusal
        return self._kept(path, (path,), lambda: self.store.load_baseline(name))

    def open(self, name: str) -> Run:
        """The run ``name`` names, as :meth:`Store.open` finds it (read again only when its
        files changed)."""
        if name.startswith("baseline:"):
            return self._baseline(name.removeprefix("baseline:"))
        try:
            directory = self.store.resolve(name)
        except StoreError:
            if name != "latest" and name in self.store.baselines():
                return self._baseline(name)
            return self.store.open(name)  # raises the store's message, with the baselines
        return self.read(directory)

    def _live(self, run: Run) -> bool:
        """Whether a session is writing ``run`` now, as far as its files tell."""
        if run.is_baseline or run.manifest.get("ended") is not None:
            return False
        times = [p.stat().st_mtime for p in (run.path / "manifest.json",
                                              run.path / "episodes.jsonl") if p.exists()]
        return bool(times) and time.time() - max(times) <= LIVE_WINDOW

    def _cost(self, run: Run) -> str | None:
        try:
            found = cost_of(run, prices_for(run, self.prices_from))
        except ProveError:
            return None
        if not found.with_tokens:
            return None
        if found.price is not None:
            return money(found.price)
        return f"{found.input + found.output:,} tokens"

    # ---- answering

    def respond(self, target: str) -> Answer:
        """The status and page of ``target`` (the request's path and query)."""
        parts = urlsplit(target)
        if not parts.path.startswith("/"):
            return 404, pages.error_page(404, "Not Found", f"no page at {target!r}",
                                         self.where), False
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        segments = [unquote(s) for s in parts.path.split("/")[1:]]
        # What was read with a loss (a truncated tail) is said on the run's page (show):
        # not on the server's terminal.
        with self.lock, warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            try:
                return self._route(segments, query)
            except (_NotFoundError, StoreError, EpisodeNotFoundError) as exc:
                return 404, pages.error_page(404, "Not Found", str(exc), self.where), False
            except (ProveError, ValueError) as exc:
                return 409, pages.error_page(409, "Conflict", str(exc), self.where), False

    def _route(self, segments: list[str], query: dict[str, str]) -> Answer:
        head, rest = (segments[0], segments[1:]) if segments else ("", [])
        if head == "" and not rest:
            return self._index()
        if head == "run" and len(rest) == 1:
            return self._run(_name(rest[0]))
        if head == "compare" and not rest:
            return self._compare(query)
        if head == "episode" and len(rest) >= 2:
            return self._episode(_name(rest[0]), "/".join(rest[1:]), query)
        if head == "trend" and not rest:
            return self._trend(query)
        raise _NotFoundError(f"no page at /{'/'.join(segments)}; pages: /, /run/NAME, "
                        "/compare?a=A&b=B, /episode/NAME/ITEM, /trend")

    def _index(self) -> Answer:
        runs, baselines = stored_runs(self.store, lambda _, text: self.open(text))
        extras: dict[str, dict[str, Any]] = {}
        live = False
        for row, key in [*((r, "run_id") for r in runs), *((b, "name") for b in baselines)]:
            if row.get("damaged"):
                continue
            try:
                run = self.open(str(row[key]))
            except ProveError:
                continue
            found: dict[str, Any] = {"salt": run.salt, "cost": self._cost(run)}
            if not run.is_baseline and run.manifest.get("ended") is None:
                found["live"] = self._live(run)
                found["progress"] = (int(row["episodes"]), _planned(run.manifest))
                live = live or found["live"]
            extras[str(row["run_id"])] = found
        return 200, pages.index_page(self.where, runs, baselines, extras,
                                     refresh=REFRESH if live else None), False

    def _run(self, name: str) -> Answer:
        run = self.open(name)
        label = label_of(run)
        counted = tally(run)
        episodes = [(found_of(run, r).item, condition_label(dict(r.get("condition") or {})),
                     int(r.get("replicate") or 0), _ended(r)) for r in run.episodes[:LISTED]]
        refused = document = None
        try:
            document = render_run_html(describe(run, missing=self.missing, q=self.q,
                                                max_mde=self.max_mde))
        except (ProveError, ValueError) as exc:
            refused = str(exc)
        extra = pages.run_extras(label, show_lines(counted, verbose=False), episodes,
                                 len(run.episodes), counted.summary.get("paired_with"),
                                 refused)
        refresh = REFRESH if self._live(run) else None
        if document is None:
            return 200, pages.page(f"pytest-prove: run {label}", extra, self.where,
                                   refresh=refresh), False
        return 200, pages.with_nav(document, self.where, extra, refresh=refresh), True

    def _compare(self, query: Mapping[str, str]) -> Answer:
        if not query.get("a") or not query.get("b"):
            return 400, pages.error_page(
                400, "Bad Request", "name the two runs to compare: /compare?a=BEFORE&b=AFTER "
                "(a baseline first), or choose them on the runs page", self.where), False
        before, after = self.open(_name(query["a"])), self.open(_name(query["b"]))
        margin = self.margin
        done = review(before, after, events=None, q=self.q, max_mde=self.max_mde,
                      fail_on=gate_fails_on(self.fail_on, margin=margin is not None),
                      missing=self.missing, margin=margin,
                      allow_underpowered=self.allow_underpowered
                      and "too-small" not in (self.fail_on or ()),
                      max_errored=self.max_errored)
        done.require_compared()
        order = worst_first(done.comparison.rows) if done.comparison is not None else None
        document = render_html(done, figures=figures_of(done, self.prices_from, order=order))
        # The verdict first (the report's header), then the twins that flipped.
        document = document.replace("</header>", "</header>" + self._flips(before, after), 1)
        return 200, pages.with_nav(document, self.where), True

    def _flips(self, before: Run, after: Run) -> str:
        """Links to the twins whose ending changed ("" for runs that are not paired)."""
        try:
            found = flips(before, after, missing=self.missing)
        except (ProveError, ValueError):
            return ""
        return pages.flips_section(label_of(before), label_of(after), [
            (found_of(after, f.after).item, f.condition,
             f"{_ended(f.before)} → {_ended(f.after)}") for f in found.flips])

    def _episode(self, name: str, item: str, query: Mapping[str, str]) -> Answer:
        run = self.open(name)
        found = find_episode(run, item)
        back = f'<p><a href="{pages.link("run", label_of(run))}">back to the run</a>'
        paired = (run.manifest.get("paired_with") or {}).get("baseline") \
            if isinstance(run.manifest.get("paired_with"), dict) else None
        if not query.get("twin"):
            if paired:
                twin_link = pages.link("episode", label_of(run), found.item,
                                       query={"twin": "baseline:" + paired})
                back += (f' · <a href="{twin_link}">'
                         f"beside its twin in baseline:{html.escape(paired)}</a>")
            return 200, pages.text_page(f"pytest-prove: {found.item}", f"episode {found.item}",
                                        episode_lines(found, True), self.where,
                                        before=back + "</p>"), False
        twin = twin_of(found, self.open(_name(query["twin"])))
        apart = first_difference(found.record, twin.record)
        return 200, pages.text_page(f"pytest-prove: {found.item} and its twin",
                                    f"episode {found.item} beside its twin",
                                    twins_lines(found, twin, apart, True), self.where,
                                    before=back + "</p>"), False

    def _trend(self, query: Mapping[str, str]) -> Answer:
        runs = []
        for directory, _ in self.store.runs():
            try:
                runs.append(self.read(directory))
            except StoreError:
                continue  # a damaged run: the runs page says why
        if not query.get("condition") or not query.get("event"):
            return 200, pages.trend_choices_page(trend_choices(runs), self.where), False
        found = trend(runs, rollout=query.get("rollout") or None, condition=query["condition"],
                      event=query["event"])
        return 200, pages.trend_page(found, self.where), False


# --------------------------------------------------------------------------- the server


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "pytest-prove"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def __getattr__(self, name: str) -> Callable[[], None]:
        # Every other method (POST, PUT, DELETE, ...; http.server looks for do_METHOD):
        # 405, where http.server would say 501.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._reply(405, pages.error_page(
            405, "Method Not Allowed", f"{self.command} is not allowed: this server only "
            "reads (GET and HEAD)", self.server.app.where), script=False,
                    head=False, extra=[("Allow", "GET, HEAD")])

    def _answer(self, *, head: bool) -> None:
        host = (self.headers.get("Host") or "").strip().lower()
        if host not in self.server.hosts:
            self._reply(421, pages.error_page(
                421, "Misdirected Request",
                f"this server answers to {', '.join(sorted(self.server.hosts))} only, not "
                f"to the Host {host!r} (a page of another site reaching it by a name of "
                "its own: DNS rebinding)", self.server.app.where), script=False, head=head)
            return
        try:
            status, body, script = self.server.app.respond(self.path)
        except Exception as exc:  # noqa: BLE001 (a bug of ours: said, the server goes on)
            status, body, script = 500, pages.error_page(
                500, "Internal Server Error", f"{type(exc).__name__}: {exc}",
                self.server.app.where), False
        self._reply(status, body, script=script, head=head)

    def _reply(self, status: int, body: str, *, script: bool, head: bool,
               extra: list[tuple[str, str]] | None = None) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in [*security_headers(script), *(extra or [])]:
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """http.server's own refusals (a bad request line, a header too long) as pages with
        the same headers."""
        reason = message or self.responses.get(code, ("Error",))[0]
        self.close_connection = True
        self._reply(code, pages.error_page(code, reason, explain or reason,
                                           self.server.app.where),
                    script=False, head=getattr(self, "command", None) == "HEAD")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log = self.server.log
        if log is not None:  # a request line is what a client wrote: as text
            print(f"{self.address_string()} {terminal_text(format % args, 300)}", file=log)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, port: int, app: App, log: TextIO | None) -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.app, self.log = app, log
        super().__init__((host, port), _Handler)
        bound = int(self.server_address[1])
        self.hosts = frozenset({f"127.0.0.1:{bound}", f"localhost:{bound}",
                                f"[::1]:{bound}"})

    def server_bind(self) -> None:
        # http.server looks the host's full name up (socket.getfqdn): a name service
        # query, for a name nothing here uses.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), \
            int(self.server_address[1])


def make_server(app: App, host: str = "127.0.0.1", port: int = 0,
                log: TextIO | None = None) -> _Server:
    """A server of ``app`` bound to ``host`` (the loopback only: :func:`loopback`) and
    ``port`` (0: a free one, read from ``server_address``); serve it with
    ``serve_forever()``."""
    address = loopback(host)
    try:
        return _Server(address, port, app, log)
    except OSError as exc:
        raise ServeError(f"cannot listen on {address} port {port}: {exc.strerror or exc}; "
                         "choose another --port, or --port 0 for a free one") from None


def url_of(server: _Server, host: str = "127.0.0.1") -> str:
    name = host.strip().removeprefix("[").removesuffix("]").lower()
    shown = f"[{name}]" if ":" in name else name
    return f"http://{shown}:{server.server_address[1]}/"


# --------------------------------------------------------------------------- the command


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {value}")
    return value


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=_port, default=8000,
                        help="the port to listen on (default 8000; 0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="127.0.0.1 (default), ::1 or localhost: any other address is "
                             "refused")
    # Read from the project's ini values, as every comparison of the command line is.
    parser.set_defaults(q=None, max_mde=None, missing=None, margin=None, fail_on=None,
                        max_errored=None, allow_underpowered=None)


@command("serve", "a read-only web page of the store on 127.0.0.1: runs, comparisons, "
         "episodes, trends (Ctrl-C stops it)", _arguments)
def _serve(args: argparse.Namespace, out: Output) -> int:
    store = store_of(args)
    app = App(store, q=args.q, max_mde=args.max_mde, missing=args.missing, margin=args.margin,
              fail_on=args.fail_on, max_errored=args.max_errored,
              allow_underpowered=bool(args.allow_underpowered))
    server = make_server(app, args.host, args.port, log=sys.stderr)
    address = url_of(server, args.host)
    out.answer("serve", {"url": address, "store": str(store.root)},
               [f"serving {store.root} read-only at {address}",
                "press Ctrl-C to stop"])
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        out.line("stopped")
    finally:
        server.server_close()
    return EXIT_OK
