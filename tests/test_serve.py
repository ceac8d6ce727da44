"""``pytest-prove serve`` (issue 34, item 1): a read-only web app over the store, on the
loopback only.  The server runs in a thread on a free port over a store a small project
made (a baseline, a run paired with it that got worse, and a run whose condition holds
HTML), and its pages are fetched with the standard library, as a browser would ask."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_prove.cli import main
from pytest_prove.cli.serve import App, ServeError, make_server
from pytest_prove.store import Store

from .conftest import BOT, as_in_a_terminal, inline_session, needs_chromium, serving

HOSTILE = "<script>alert(1)</script>"
#: A rollout whose one condition is written in HTML: a page must show it as text.
ODD = textwrap.dedent(
    f"""
    import random

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=6, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", [{HOSTILE!r}])
    def test_odd(ticket, prove_seed):
        rng = random.Random(prove_seed)
        return prove.Episode("unresolved" if rng.random() < 0.5 else "resolved")
    """
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve")
    (root / "pytest.ini").write_text("[pytest]\nprove_allow_underpowered = true\n")
    (root / "test_bot.py").write_text(BOT)
    (root / "test_odd.py").write_text(ODD)
    for args, env in ((("--prove-save-baseline", "main", "--prove-name", "before"), None),
                      (("--prove-baseline", "main", "--prove-name", "after"),
                       {"REFUND_FAIL": "0.7"})):
        code, out = inline_session(root, "-p", "no:xdist", f"--ignore={root / 'test_odd.py'}",
                                   *args, env=env)
        assert code in (0, 1), out  # the worse run fails its gate
    code, out = inline_session(root, "-p", "no:xdist", f"--ignore={root / 'test_bot.py'}",
                               "--prove-name", "odd")
    assert code in (0, 1), out
    return root


@pytest.fixture(scope="module")
def server(project: Path) -> Iterator[str]:
    """The app over the project's store, served in a thread; its base URL."""
    with serving(project) as base:
        yield base


def fetch(url: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def raw(base: str, path: str, *, method: str = "GET", host: str | None = None,
        ) -> tuple[int, dict[str, str], str]:
    """A request sent as written (urllib would clean its path, and set its Host)."""
    parts = urllib.parse.urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port)
    try:
        connection.putrequest(method, path, skip_host=True)
        connection.putheader("Host", host if host is not None else parts.netloc)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, dict(answer.headers), answer.read().decode()
    finally:
        connection.close()


class _Links(HTMLParser):
    """Every attribute value and every tag of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.values.extend(v for _, v in attrs if v is not None)


def parsed(page: str) -> _Links:
    found = _Links()
    found.feed(page)
    return found


def test_the_runs_page_lists_runs_and_baselines(server: str) -> None:
    status, headers, page = fetch(server + "/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    for name in ("before", "after", "odd", "baseline:main"):
        assert f'href="/run/{urllib.parse.quote(name, safe="")}"' in page
    assert "/compare?a=baseline%3Amain&amp;b=after" in page  # paired with its baseline
    assert "report.css" not in page and "--worse-c" in page  # the report's CSS, inline
    assert "refresh" not in page  # nothing is being written


def test_a_run_page_holds_show_and_the_run_report(server: str) -> None:
    status, headers, page = fetch(server + "/run/after")
    assert status == 200
    assert "run &#x27;after&#x27; is complete" in page  # show's first line, escaped
    assert "<h1>run after</h1>" in page  # render_run_html's own heading
    assert "script-src 'unsafe-inline'" in headers["Content-Security-Policy"]
    assert '<nav class="app">' in page
    # Its episodes link to their pages.
    first = re.search(r'href="(/episode/after/[^"]+)"', page)
    assert first is not None
    status, headers, episode = fetch(server + first.group(1).replace("&amp;", "&"))
    assert status == 200, episode
    assert "script-src" not in headers["Content-Security-Policy"]
    assert "<pre" in episode and "seed" in episode


def test_compare_shows_the_report_page(server: str) -> None:
    status, _, page = fetch(server + "/compare?a=baseline:main&b=after")
    assert status == 200, page
    assert '<h1 class="word-worse">worse</h1>' in page
    assert "ticket=refund" in page and 'id="prove-data"' in page
    # Its flipped twins, each a link to the episode beside its twin.
    twin = re.search(r'href="(/episode/after/[^"]+\?twin=baseline%3Amain)"', page)
    assert twin is not None and "ended differently in baseline:main and after" in page
    status, _, episode = fetch(server + twin.group(1))
    assert status == 200 and "beside its twin" in episode
    assert re.search(r"resolved +\| unresolved|unresolved +\| resolved", episode)


def test_compare_refused_is_a_page_with_the_reason(server: str) -> None:
    status, _, page = fetch(server + "/compare?a=before&b=odd")
    assert status == 409
    assert "409 Conflict" in page
    assert fetch(server + "/compare?a=before")[0] == 400


def test_an_episode_beside_its_twin(server: str) -> None:
    item = urllib.parse.quote("refund-r003", safe="")
    status, _, page = fetch(f"{server}/episode/after/{item}?twin=baseline:main")
    assert status == 200, page
    assert "beside its twin" in page and "baseline:main" in page


def test_the_trend_follows_a_condition_across_runs(server: str) -> None:
    status, _, choices = fetch(server + "/trend")
    assert status == 200
    assert "condition=ticket%3Drefund&amp;event=unresolved" in choices
    query = urllib.parse.urlencode({"rollout": "test_bot", "condition": "ticket=refund",
                                    "event": "unresolved"})
    status, _, page = fetch(f"{server}/trend?{query}")
    assert status == 200
    rows = re.findall(r"<tr><td class=\"n\">(\d+)</td><td><a href=\"/run/(\w+)\">", page)
    assert [name for _, name in rows] == ["before", "after"]  # in start order
    assert "<svg" in page and "not in: odd" in page
    assert "Clopper-Pearson" in page


def test_every_answer_has_the_security_headers(server: str) -> None:
    for path in ("/", "/run/before", "/compare?a=baseline:main&b=after", "/trend",
                 "/run/nothing", "/nowhere"):
        _, headers, _ = fetch(server + path)
        policy = headers["Content-Security-Policy"]
        assert policy.startswith("default-src 'none'; style-src 'unsafe-inline'"), path
        assert "http" not in policy
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert headers["X-Frame-Options"] == "DENY"


def test_no_page_loads_anything_from_the_network(server: str) -> None:
    for path in ("/", "/run/after", "/run/odd", "/compare?a=baseline:main&b=after",
                 "/trend", "/episode/after/refund-r001?twin=before"):
        status, _, page = fetch(server + path)
        assert status == 200, (path, page)
        found = parsed(page)
        outside = [v for v in found.values if re.search(r"(?i)https?:|^//", v)]
        assert outside == [], path
        assert not {"img", "link", "iframe", "object", "embed"} & set(found.tags), path
        assert not re.search(r"<script[^>]*\ssrc=", page), path


def test_a_value_holding_html_is_shown_as_text(server: str) -> None:
    for path in ("/run/odd", "/trend", "/trend?" + urllib.parse.urlencode(
            {"condition": f"ticket={HOSTILE}", "event": "unresolved"})):
        status, _, page = fetch(server + path)
        assert status == 200, path
        assert HOSTILE not in page, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, path
    # A name in the path is shown escaped in the refusal too.
    status, _, page = fetch(server + "/run/" + urllib.parse.quote(HOSTILE, safe=""))
    assert status == 404 and HOSTILE not in page and "&lt;script&gt;" in page


@pytest.mark.parametrize("path", [
    "/run/../../etc/passwd", "/run/..%2F..%2Fetc%2Fpasswd", "/run/%2Fetc%2Fpasswd",
    "/run/..", "/episode/..%2Fruns/x", "/compare?a=../x&b=after", "/run/a%5Cb",
    "/static/report.css", "/run/nothing", "run/after", "/run/after/../../../etc/passwd",
])
def test_paths_are_confined_to_the_store(server: str, path: str) -> None:
    status, _, page = raw(server, path)
    assert status == 404, page
    assert "root:" not in page  # nothing of /etc/passwd
    assert "404 Not Found" in page


def test_a_foreign_host_header_is_refused(server: str) -> None:
    port = urllib.parse.urlsplit(server).port
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1:1", f"127.0.0.2:{port}",
                 ""):
        status, headers, page = raw(server, "/", host=host)
        assert status == 421, host
        assert "DNS rebinding" in page
        assert headers["X-Frame-Options"] == "DENY"
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert raw(server, "/", host=host)[0] == 200, host


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "FOO"])
def test_only_get_and_head_are_answered(server: str, project: Path, method: str) -> None:
    before = sorted(p.name for p in (project / ".prove").rglob("*"))
    status, headers, _ = raw(server, "/", method=method)
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"
    assert sorted(p.name for p in (project / ".prove").rglob("*")) == before


def test_reading_every_page_changes_nothing_in_the_store(server: str, project: Path) -> None:
    def state() -> dict[str, tuple[int, int]]:
        return {str(p.relative_to(project)): (p.stat().st_mtime_ns, p.stat().st_size)
                for p in sorted((project / ".prove").rglob("*"))}

    before = state()
    for path in ("/", "/run/after", "/run/baseline%3Amain", "/run/latest",
                 "/compare?a=baseline:main&b=after", "/compare?a=before&b=odd", "/trend",
                 "/episode/after/refund-r001?twin=baseline:main", "/run/nothing"):
        assert fetch(server + path)[0] in (200, 404, 409), path
    assert state() == before


def test_head_answers_the_headers_alone(server: str) -> None:
    status, headers, body = raw(server, "/run/after", method="HEAD")
    assert status == 200 and body == ""
    assert int(headers["Content-Length"]) > 1000


def test_another_host_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for host in ("0.0.0.0", "192.168.1.2", "::", "example.org"):
        code = main(["--store", str(project / ".prove"), "serve", "--host", host])
        assert code == 1
        assert "is refused: serve listens on this machine's loopback only" in \
            capsys.readouterr().err
    with pytest.raises(ServeError, match="loopback only"):
        make_server(App(Store(project / ".prove")), "0.0.0.0", 0)


def test_the_server_stops_and_lets_its_port_go(project: Path) -> None:
    httpd = make_server(App(Store(project / ".prove")), "localhost", 0)
    port = int(httpd.server_address[1])
    # Polled every 10 ms for shutdown() (0.5 s by default: what shutdown() waited here).
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01})
    thread.start()
    assert raw(f"http://127.0.0.1:{port}", "/", host=f"localhost:{port}")[0] == 200
    httpd.shutdown()
    httpd.server_close()
    thread.join()
    assert not thread.is_alive()
    with pytest.raises(ConnectionRefusedError):
        raw(f"http://127.0.0.1:{port}", "/")
    # A port taken is refused with the fix, not a traceback.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ServeError, match="choose another --port, or --port 0"):
            make_server(App(Store(project / ".prove")), "127.0.0.1", taken.getsockname()[1])


def test_a_long_run_lists_its_first_episodes(project: Path, monkeypatch: pytest.MonkeyPatch,
                                            ) -> None:
    monkeypatch.setattr("pytest_prove.cli.serve.LISTED", 5)
    status, page, _ = App(Store(project / ".prove")).respond("/run/after")
    assert status == 200
    assert "<summary>80 episodes</summary>" in page
    assert "the first 5 of 80 episodes are listed" in page
    assert len(re.findall(r'href="/episode/after/', page)) == 5


def test_a_run_being_written_is_shown_with_its_progress(tmp_path: Path, project: Path) -> None:
    # A run the store holds with no end: its manifest as a session leaves it mid-sweep.
    store = tmp_path / ".prove"
    source = Store(project / ".prove").resolve("after")
    target = store / "runs" / source.name
    target.mkdir(parents=True)
    manifest = json.loads((source / "manifest.json").read_text())
    manifest.update(ended=None, status="incomplete", name="live")
    (target / "manifest.json").write_text(json.dumps(manifest))
    lines = (source / "episodes.jsonl").read_text().splitlines(keepends=True)
    (target / "episodes.jsonl").write_text("".join(lines[:30]))
    app = App(Store(store), prices_from=tmp_path)
    status, page, _ = app.respond("/")
    assert status == 200
    assert "being written: 30 of 80 planned episodes (38%)" in page
    assert '<meta http-equiv="refresh" content="5">' in page
    status, page, _ = app.respond("/run/live")
    assert status == 200 and 'http-equiv="refresh"' in page
    # More episodes land: the page counts them (the run is read again when its file grows).
    (target / "episodes.jsonl").write_text("".join(lines[:50]))
    assert "being written: 50 of 80 planned" in app.respond("/")[1]
    # Its session stopped long ago: no reload, and the fix.
    os.utime(target / "episodes.jsonl", (0, 0))
    os.utime(target / "manifest.json", (0, 0))
    status, page, _ = app.respond("/")
    assert "refresh" not in page and "--prove-resume=live" in page


def test_the_command_serves_until_ctrl_c(project: Path) -> None:
    # A subprocess: Ctrl-C (SIGINT) reaches a process's main thread, which this test's is not.
    command = [sys.executable, "-c", "from pytest_prove.cli import main; raise SystemExit("
               f"main(['--store', {str(project / '.prove')!r}, 'serve', '--port', '0']))"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    # A worker an earlier test left with SIGINT blocked would hand that on: the server
    # never saw Ctrl-C (3 of 3 loaded runs of the suite).
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, preexec_fn=as_in_a_terminal)
    try:
        assert child.stdout is not None
        first = child.stdout.readline()  # written once the socket listens
        found = re.search(r"read-only at (http://127\.0\.0\.1:\d+/)", first)
        assert found is not None, first + (child.stderr.read() if child.stderr else "")
        status, _, page = fetch(found.group(1))
        assert status == 200 and "baseline:main" in page
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


@needs_chromium
@pytest.mark.slow  # pages drawn in a browser
def test_the_pages_in_headless_chromium(server: str, chromium: Any) -> None:
    # The suite's Chromium (one a worker: tests/conftest.py); tests/test_serve_browser.py
    # drives the same pages over the bundled example's runs.
    leaving: list[str] = []
    errors: list[str] = []
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        def watch(route: Any) -> None:
            if route.request.url.startswith(server):
                route.continue_()
            else:
                leaving.append(route.request.url)
                route.abort()

        context.route("**/*", watch)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(server + "/")
        # Choose the two runs and compare them: a form, no script.
        page.select_option("select[name=a]", "baseline:main")
        page.select_option("select[name=b]", "after")
        page.click("form.pick button")
        page.wait_for_url("**/compare?*")
        assert page.locator("h1").first.inner_text() == "worse"
        # The report's own script ran under the server's CSP: the worst cell is
        # focused and its details are shown.
        details = page.locator("section.event").first.locator(".details").inner_text()
        assert "ticket=refund" in details and "worse" in details
        # A flipped twin opens beside its twin.
        page.locator("details.flips summary").click()
        page.locator("details.flips a").first.click()
        page.wait_for_url("**/episode/after/**")
        assert "beside its twin" in page.locator("h1").inner_text()
        page.goto(server + "/run/odd")
        assert HOSTILE in page.locator("pre.text").first.inner_text()  # as text
        assert page.locator("script:not([type]):not([id])").count() == 1  # the report's
    finally:
        context.close()
    assert leaving == []
    assert errors == []


def test_the_trend_reads_each_run_as_the_one_run_report_does(project: Path) -> None:
    from pytest_prove.review.describe import describe
    from pytest_prove.review.trend import trend

    store = Store(project / ".prove")
    runs = [store.read(directory) for directory, _ in store.runs()]
    found = trend(runs, rollout="test_bot", condition="ticket=refund", event="unresolved")
    assert [p.run for p in found.points] == ["before", "after"]
    assert found.absent == ("odd",)
    for point, run in zip(found.points, runs[:2], strict=True):
        row = next(r for r in describe(run).rows
                   if r.condition == "ticket=refund" and r.event == "unresolved")
        assert (point.x, point.n, point.low, point.high) == (row.x, row.n, row.low, row.high)
    # Another rollout's name, or an event no episode had, holds nothing.
    assert trend(runs, rollout="test_odd", condition="ticket=refund",
                 event="unresolved").points == ()
    none = trend(runs, rollout=None, condition="ticket=refund", event="no outcome")
    assert [(p.x, p.n) for p in none.points] == [(0, 40), (0, 40)]
