"""``pytest-prove serve`` in headless Chromium over the bundled example's runs (issue 34's
acceptance): the runs list, a comparison, its worst cell, a flipped twin, a run followed while
a sweep writes it, the same path with the keyboard alone, no request leaving 127.0.0.1, a
foreign Host refused, and run names holding HTML or ``../``.

The store is a copy of ``examples/support_bot`` (its committed baseline ``current``, 600
episodes) and one run of the example against it: the terse prompt, 60 replicates a ticket
(about a second).  Chromium is the suite's one per worker (``chromium``, tests/conftest.py),
and the module's tests share one page of it (``tab``: a page and its context cost a few tenths
of a second each), every request of which is routed and kept by the test that made it.

Each page state is saved as a PNG screenshot in the test's ``tmp_path``, or in the folder
``PROVE_SHOTS`` names, to look at::

    PROVE_SHOTS=/tmp/shots python -m pytest tests/test_serve_browser.py -p no:randomly
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from pytest_prove.store import Store, StoreError
from pytest_prove.store.runs import check_run_name

from .conftest import (
    REBOUND_HOST,
    copy_example,
    inline_session,
    needs_chromium,
    serving,
)

#: Each test draws pages in a browser (seconds of wall time) over a store the example's sweep
#: made (about a second of CPU, once a module): none belongs in the developer's loop.
pytestmark = [needs_chromium, pytest.mark.slow]

#: The run the example's sweep adds: its terse prompt, which gives up on refunds more often.
RUN = "terse"
REPLICATES = 60


def example_with_a_run(root: Path) -> Path:
    """A copy of the example in ``root`` holding its baseline and run :data:`RUN`: the terse
    prompt against the baseline, :data:`REPLICATES` a ticket (the gate fails: refunds got
    worse)."""
    copy_example(root)
    code, out = inline_session(root, "-p", "no:xdist", "--prove-baseline", "current",
                               "--prove-replicates", str(REPLICATES),
                               "--prove-allow-underpowered", "--prove-name", RUN,
                               env={"SUPPORT_BOT_PROMPT": "terse"})
    assert code == 1, out
    assert "worse: 1 condition got worse (ticket=refund" in out, out
    return root


def count(run: Any, ticket: str, outcome: str) -> tuple[int, int]:
    """How many of ``run``'s first :data:`REPLICATES` episodes of ``ticket`` ended in
    ``outcome``, of how many: read from the store, as the page must show them."""
    held = [r for r in run.episodes if r["condition"] == {"ticket": ticket}
            and int(r["replicate"]) < REPLICATES]
    return sum(1 for r in held if r.get("outcome") == outcome), len(held)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return example_with_a_run(tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="module")
def server(example: Path) -> Iterator[str]:
    with serving(example) as base:
        yield base


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: ``PROVE_SHOTS``, else the test's own folder."""
    folder = Path(os.environ.get("PROVE_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shot(page: Any, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path


@dataclass
class Browsing:
    """A test's use of the module's page (:class:`Tab`): every request it made, those to the
    server let through, any other stopped and kept in ``leaving``."""

    page: Any
    server: str
    seen: list[str] = field(default_factory=list)
    leaving: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def visited(self) -> list[str]:
        """The paths of the documents and resources requested."""
        return [urlsplit(url).path for url in self.seen]


@dataclass
class Tab:
    """The module's one page, in a context of its own whose every request is routed: to the
    test using it (``current``, a :class:`Browsing`), or stopped between tests."""

    page: Any = None
    current: Browsing | None = None
    between: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def tab(chromium: Any) -> Iterator[Tab]:
    """One page for every test of the module, each a :func:`browsing` of it: a context and a
    page of their own cost each test a few tenths of a second of Chromium's start of them.
    Routing turns Chromium's HTTP cache off, so each test's requests reach the server."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    found = Tab()

    def watch(route: Any) -> None:
        url, using = route.request.url, found.current
        if using is None:  # between tests nothing may ask anything
            found.between.append(url)
            route.abort()
            return
        using.seen.append(url)
        parts = urlsplit(url)
        if f"{parts.scheme}://{parts.netloc}" == using.server and parts.hostname == "127.0.0.1":
            route.continue_()
        else:
            using.leaving.append(url)
            route.abort()

    def error(text: str) -> None:
        (found.current.errors if found.current is not None else found.between).append(text)

    try:
        context.route("**/*", watch)
        found.page = context.new_page()
        found.page.on("pageerror", lambda exc: error(str(exc)))
        found.page.on("console", lambda message: error(message.text)
                      if message.type == "error" else None)
        yield found
    finally:
        context.close()


@contextmanager
def browsing(tab: Tab, server: str, *, refused: bool = False) -> Iterator[Browsing]:
    """A :class:`Browsing` of ``server`` in the module's page, as a new page would start it
    (its size and colour scheme put back); ``refused``: its refusals (404) are expected, and
    the console's line for each is not an error.  At its end the page is left blank (a page
    that reloads itself asks nothing more)."""
    page = tab.page
    assert tab.between == [], tab.between
    page.set_viewport_size({"width": 1280, "height": 900})
    page.emulate_media(color_scheme="light")  # Playwright's default, as a new context's
    found = Browsing(page=page, server=server)
    tab.current = found
    try:
        yield found
    finally:
        try:
            page.goto("about:blank")
        finally:
            tab.current = None
    # Every page visited asked this server only, and none broke its CSP or its script.
    assert found.seen, "no request was routed"
    assert found.leaving == []
    expected = "Failed to load resource: the server responded with a status of 404"
    assert [e for e in found.errors if not (refused and e.startswith(expected))] == []


def runs_table(page: Any, heading: str = "Runs") -> dict[str, list[str]]:
    """The runs (or baselines) table of the runs page: each row's cells' text, by name."""
    rows = page.evaluate(
        """heading => {
             const h = [...document.querySelectorAll('h2')].find(e => e.textContent === heading);
             const table = h.nextElementSibling;
             return [...table.tBodies[0].rows].map(r => [...r.cells].map(c => c.innerText));
           }""", heading)
    return {row[0]: row for row in rows}


def focused(page: Any) -> dict[str, str]:
    """The focused element: its tag, text, aria-label, href and class."""
    return dict(page.evaluate(
        """() => { const e = document.activeElement;
                   return {tag: e.tagName.toLowerCase(), text: e.innerText || '',
                           label: e.getAttribute('aria-label') || '',
                           href: e.getAttribute('href') || '', cls: e.className || '',
                           name: e.getAttribute('name') || '', value: e.value || ''}; }"""))


def details(page: Any, event: str) -> dict[str, str]:
    """The details panel of ``event``'s grid: field, value."""
    return dict(page.evaluate(
        """event => {
             const s = [...document.querySelectorAll('section.event')].find(
               e => e.querySelector('h2').textContent.startsWith(event + ' '));
             return [...s.querySelectorAll('.details dd')].map(
               d => [d.getAttribute('data-field'), d.textContent]);
           }""", event))


# --------------------------------------------------------------------------- the tests


def test_list_compare_worst_cell_and_a_flipped_twin(tab: Tab, server: str, example: Path,
                                                     shots: Path) -> None:
    store = Store(example / ".prove")
    terse, baseline = store.open(RUN), store.open("baseline:current")
    with browsing(tab, server) as b:
        page = b.page
        page.goto(server + "/")
        assert page.locator("h1").inner_text() == "1 run(s) and 1 baseline(s)"
        row = runs_table(page)[RUN]
        assert row[1] == "complete" and row[2] == f"{len(terse.episodes):,}"
        assert row[3] == terse.salt == baseline.salt  # twins: one salt
        assert row[4].startswith("baseline:current")
        assert row[6].startswith("$")  # the example declares its prices
        base = runs_table(page, "Baselines")["baseline:current"]
        assert base[2] == f"{len(baseline.episodes):,}"
        shot(page, shots, "1-runs")

        page.select_option("select[name=a]", "baseline:current")
        page.select_option("select[name=b]", RUN)
        page.click("form.pick button")
        page.wait_for_url("**/compare?*")
        assert page.locator("h1").first.inner_text() == "worse"
        # The page opens on its worst cell, focused, read out in its panel: refunds left
        # unresolved, with the counts the store holds.
        cell = focused(page)
        assert cell["tag"] == "td" and "worse" in cell["cls"]
        assert cell["label"].startswith("ticket=refund, unresolved:")
        x0, n0 = count(baseline, "refund", "unresolved")
        x1, n1 = count(terse, "refund", "unresolved")
        assert x1 > x0
        panel = details(page, "unresolved")
        assert panel["condition"] == "ticket=refund"
        assert panel["before"].endswith(f"({x0}/{n0})")
        assert panel["after"].endswith(f"({x1}/{n1})")
        assert panel["status"].startswith("worse")
        shot(page, shots, "2-compare-worst-cell")

        # Another cell, clicked: the panel follows it.
        page.locator("section.event").first.locator("td.cell[data-i]").nth(1).click()
        assert details(page, "unresolved")["condition"] == "ticket=password"

        # The flipped twins, under the verdict: one opens beside its twin.
        flips = page.locator("details.flips")
        assert page.evaluate("""() => {
            const h = document.querySelector('header'), f = document.querySelector(
              'details.flips');
            return !!(h.compareDocumentPosition(f) & Node.DOCUMENT_POSITION_FOLLOWING); }""")
        flips.locator("summary").click()
        first = flips.locator("tbody tr").first
        item, condition, ended = (first.locator("td").nth(i).inner_text() for i in range(3))
        assert condition.startswith("ticket=") and " → " in ended
        first.locator("a").click()
        page.wait_for_url("**/episode/**")
        assert page.locator("h1").inner_text() == f"episode {item} beside its twin"
        text = page.locator("pre.text").inner_text()
        before_end, after_end = ended.split(" → ")
        assert re.search(rf"\b{re.escape(before_end)}\b", text)
        assert re.search(rf"\b{re.escape(after_end)}\b", text)
        shot(page, shots, "3-twin")
    paths = b.visited()
    assert paths[0] == "/" and "/compare" in paths and any(
        p.startswith("/episode/") for p in paths)


def test_the_keyboard_alone_reaches_compare_the_worst_cell_and_a_twin(
        tab: Tab, server: str, shots: Path) -> None:
    with browsing(tab, server) as b:
        page = b.page
        page.goto(server + "/")
        keys = page.keyboard
        # Tab from the top of the page to the first list of the form.
        for _ in range(10):
            keys.press("Tab")
            if focused(page)["name"] == "a":
                break
        assert focused(page)["name"] == "a", focused(page)
        shot(page, shots, "6-keyboard-form")
        # The arrows choose in a list: down to the run, up to the baseline again.
        keys.press("ArrowDown")
        assert focused(page)["value"] == RUN
        keys.press("ArrowUp")
        assert focused(page)["value"] == "baseline:current"
        keys.press("Tab")
        assert focused(page)["name"] == "b"
        keys.press("Home")
        assert focused(page)["value"] == "baseline:current"
        keys.press("End")
        assert focused(page)["value"] == RUN
        keys.press("Tab")
        assert focused(page)["tag"] == "button"
        keys.press("Enter")
        page.wait_for_url("**/compare?a=baseline%3Acurrent&b=terse")
        page.wait_for_load_state()
        # The worst cell has the focus: the arrows move it, and the panel follows.
        start = focused(page)
        assert start["tag"] == "td" and start["label"].startswith("ticket=refund, unresolved")
        shot(page, shots, "7-keyboard-worst-cell")
        keys.press("ArrowRight")
        assert focused(page)["label"].startswith("ticket=password, unresolved")
        assert details(page, "unresolved")["condition"] == "ticket=password"
        keys.press("ArrowLeft")
        assert focused(page)["label"] == start["label"]
        assert details(page, "unresolved")["condition"] == "ticket=refund"
        # The flipped twins, under the verdict and above the grids, are a Shift+Tab away
        # (and Tab comes back to the cell).
        for _ in range(5):
            keys.press("Shift+Tab")
            if focused(page)["tag"] == "summary":
                break
        assert "ended differently" in focused(page)["text"]
        keys.press("Tab")
        assert focused(page)["label"] == start["label"]
        # Enter on the worst cell opens its condition's twins: the first has the focus.
        keys.press("Enter")
        assert page.locator("details.flips").get_attribute("open") is not None
        link = focused(page)
        assert link["tag"] == "a" and link["href"].startswith("/episode/terse/")
        assert page.evaluate("() => document.activeElement.closest('tr').cells[1].innerText"
                             ) == "ticket=refund"
        shot(page, shots, "8-keyboard-twin-link")
        keys.press("Enter")
        page.wait_for_url("**/episode/**")
        assert page.locator("h1").inner_text() == f"episode {link['text']} beside its twin"
        # And back to the runs with the keyboard: the nav's first link.
        for _ in range(5):
            keys.press("Tab")
            if focused(page)["href"] == "/":
                break
        assert focused(page)["text"] == "runs"
        keys.press("Enter")
        page.wait_for_url(server + "/")
    assert "/compare" in b.visited()


def test_every_focusable_element_shows_its_focus(tab: Tab, server: str) -> None:
    # A keyboard user sees where they are: each element Tab reaches draws a ring of the
    # page's focus colour, 2 px or wider, in light and dark (Chromium's own ring is 1 px of
    # near-black: hard to see, and lost on the dark page).
    twin = "/episode/terse/" + quote("test_support.py::test_support[refund-r005]", safe="")
    with browsing(tab, server) as b:
        page = b.page
        for path in ("/", "/compare?a=baseline:current&b=terse",
                     twin + "?twin=baseline:current"):
            page.goto(server + path)
            # Each scheme on the page loaded once (the page's media queries follow
            # emulate_media as it is): a load each cost a few tenths of a second.
            for scheme in ("light", "dark"):
                page.emulate_media(color_scheme=scheme)
                page.evaluate("""() => {
                    document.querySelector('details.flips')?.setAttribute('open', '');
                    document.activeElement?.blur(); }""")
                focus = page.evaluate(
                    "() => getComputedStyle(document.body).getPropertyValue('--focus')")
                faint: list[tuple[str, ...]] = []
                reached = 0
                for _ in range(30):
                    page.keyboard.press("Tab")
                    ring = page.evaluate(
                        """() => { const e = document.activeElement;
                                   if (e === document.body) { return null; }
                                   const s = getComputedStyle(e);
                                   return [e.tagName + ' ' + (e.innerText || '').slice(0, 30),
                                           s.outlineStyle, s.outlineWidth, s.outlineColor]; }""")
                    if ring is None:
                        break
                    reached += 1
                    name, style, width, color = ring
                    if style != "solid" or float(width.removesuffix("px")) < 2 \
                            or color != rgb(focus):
                        faint.append((name, style, width, color))
                assert reached >= 3, path
                assert faint == [], (scheme, path, faint)


def rgb(hex_colour: str) -> str:
    """``#2452c9`` as getComputedStyle gives a colour: ``rgb(36, 82, 201)``."""
    text = hex_colour.strip().removeprefix("#")
    return "rgb({}, {}, {})".format(*(int(text[i:i + 2], 16) for i in (0, 2, 4)))


def test_no_line_of_an_episode_page_is_cut(tab: Tab, server: str) -> None:
    # The twins' text holds lines longer than the page is wide (where they first went apart):
    # each is wrapped in its box, none cut at its edge.
    twin = "/episode/terse/" + quote("test_support.py::test_support[refund-r005]", safe="")
    with browsing(tab, server) as b:
        for width in (1280, 800):
            b.page.set_viewport_size({"width": width, "height": 900})
            b.page.goto(server + twin + "?twin=baseline:current")
            text = b.page.locator("pre.text").inner_text()
            assert "first difference:" in text
            assert b.page.evaluate(
                """() => [...document.querySelectorAll('pre.text')].every(
                     e => e.scrollWidth <= e.clientWidth)"""), width


def test_each_page_s_title_is_its_largest_heading(tab: Tab, server: str,
                                                  shots: Path) -> None:
    # A page's sections were headed larger than its title ("Runs" over "1 run(s) and 1
    # baseline(s)", "Every row" over "worse"), and the run's page said "run terse" twice,
    # the first (show's) the larger.
    with browsing(tab, server) as b:
        for path, title in (("/", "1 run(s) and 1 baseline(s)"),
                            ("/compare?a=baseline:current&b=terse", "worse"),
                            (f"/run/{RUN}", f"run {RUN}")):
            b.page.goto(server + path)
            headings = b.page.evaluate(
                """() => [...document.querySelectorAll('h1, h2')].map(e => [
                     e.tagName, e.innerText, parseFloat(getComputedStyle(e).fontSize)])""")
            titles = [h for h in headings if h[0] == "H1"]
            assert [t[1] for t in titles] == [title], headings
            assert all(size <= titles[0][2] for _, _, size in headings), (path, headings)
            assert [h[1] for h in headings].count(title) == 1, headings
        assert f"run '{RUN}' is complete" in b.page.locator("section.show pre").inner_text()
        shot(b.page, shots, "10-run")


def test_a_run_being_written_is_followed_as_its_counts_rise(
        tab: Tab, tmp_path: Path, shots: Path) -> None:
    root = copy_example(tmp_path / "live")
    (root / "turnstile.py").write_text(TURNSTILE)
    store = Store(root / ".prove")
    log = tmp_path / "sweep.log"

    def written() -> int:
        """The episodes the run holds on disk now (the store's own state)."""
        return len(store.open("live").episodes)

    def reading(page: Any, name: str) -> list[str]:
        """The run's row on the runs page, loaded again now; a screenshot of it."""
        page.reload()
        for _ in range(5):
            # The page reloads itself every few seconds while a run is being written: on a
            # slow machine that reload may fall in the middle of this reading, of the same
            # store (the sweep waits), so the reading is taken again.
            try:
                row = runs_table(page)["live"]
                refresh = page.locator('meta[http-equiv="refresh"]').count()
                shot(page, shots, name)
                return [*row, str(refresh)]
            except Exception as exc:  # playwright's Error (imported only with a browser)
                if "destroyed" not in str(exc) and "navigat" not in str(exc):
                    raise
                page.wait_for_load_state()
        raise AssertionError("the runs page never held still for a reading")

    with serving(root) as base, browsing(tab, base) as b:
        b.page.goto(base + "/")
        assert "live" not in runs_table(b.page)  # the sweep has not started
        told_r, told_w = os.pipe()
        go_r, go_w = os.pipe()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
        env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", TURNSTILE_AT="10,30",
                   TURNSTILE_TOLD=str(told_w), TURNSTILE_GO=str(go_r),
                   PYTHONPATH=os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH"))
                                              if p))
        # A subprocess: a sweep is a pytest session, and one in a thread of this process
        # would share its modules, environment, working directory and warnings filters with
        # the session running this test; in a process of its own it writes the store as a
        # user's sweep does, beside the server reading it.
        with log.open("w") as out:
            child = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "prove", "-p", "turnstile",
                 "-p", "no:cacheprovider", "-p", "no:randomly", "--prove-baseline", "current",
                 "--prove-replicates", "20", "--prove-allow-underpowered",
                 "--prove-name", "live"],
                cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                pass_fds=(told_w, go_r))
        os.close(told_w)
        os.close(go_r)
        try:
            with os.fdopen(told_r, "rb") as told:
                readings = []
                for at, name in ((10, "4-live-before"), (30, "5-live-after")):
                    # The sweep says when it has stored `at` episodes, and waits (a blocking
                    # read: a sweep that ended is an end of file, not a wait).
                    assert told.readline() == f"{at}\n".encode(), log.read_text()
                    assert written() == at
                    row = reading(b.page, name)
                    found = re.fullmatch(
                        r"being written: (\d+) of (\d+) planned episodes \((\d+)%\)", row[1])
                    assert found is not None, row
                    assert row[2] == found.group(1)  # the episodes column says the same
                    assert row[-1] == "1"  # the page reloads itself
                    readings.append((int(found.group(1)), int(found.group(2))))
                    os.write(go_w, b"g")
                # The counts rose from one reading to the next, of the plan: 3 tickets x 20.
                assert readings == [(10, 60), (30, 60)]
                os.close(go_w)
                go_w = -1
                assert told.readline() == b""  # the sweep ended
            assert child.wait(timeout=600) in (0, 1), log.read_text()
            row = reading(b.page, "5-live-ended")
            assert row[1] == "complete" and row[2] == "60" == str(written())
            assert row[-1] == "0"  # nothing being written: no reload
        finally:
            if go_w >= 0:
                os.close(go_w)
            if child.poll() is None:
                child.kill()
                child.wait()


#: A plugin of the followed sweep: before the item after the N-th (N in TURNSTILE_AT), by
#: which time the first N episodes are stored, it writes N to one pipe and waits for a byte
#: on another.
TURNSTILE = '''
import os

AT = {int(n) for n in os.environ["TURNSTILE_AT"].split(",")}
TOLD, GO = int(os.environ["TURNSTILE_TOLD"]), int(os.environ["TURNSTILE_GO"])
started = 0


def pytest_runtest_protocol(item, nextitem):
    global started
    if started in AT:
        os.write(TOLD, b"%d\\n" % started)
        os.read(GO, 1)
    started += 1
'''


#: Names a run may not have: HTML, a path out of the store.
HOSTILE = ['<img src=x onerror="document.title=1">', "../../../etc/passwd"]


def test_a_hostile_run_name_is_refused_or_shown_escaped_and_reaches_nothing(
        tab: Tab, example: Path, tmp_path: Path, shots: Path) -> None:
    # The store refuses such a name for a new run (--prove-name, merge --name) ...
    for name in HOSTILE:
        with pytest.raises(StoreError, match=r"names are plain words|is not allowed"):
            check_run_name(name)
    # ... but a store written by hand, or by another tool, may hold one in a manifest.
    root = tmp_path / "hostile"
    shutil.copytree(example / ".prove", root / ".prove")
    shutil.copy2(example / "pytest.ini", root / "pytest.ini")  # its prices
    source = Store(root / ".prove").resolve(RUN)
    for i, name in enumerate(HOSTILE):
        target = source.parent / f"{source.name}{i}"
        shutil.copytree(source, target)
        manifest = (target / "manifest.json").read_text()
        manifest = manifest.replace(f'"name": "{RUN}"', f'"name": {json.dumps(name)}', 1)
        manifest = manifest.replace(f'"run_id": "{source.name}"',
                                    f'"run_id": "{target.name}"', 1)
        (target / "manifest.json").write_text(manifest)
    with serving(root) as base, browsing(tab, base, refused=True) as b:
        page = b.page
        page.goto(base + "/")
        names = runs_table(page)
        assert set(HOSTILE) <= set(names)  # shown as the text it is
        assert page.locator("main img").count() == 0
        assert page.title() == "pytest-prove serve: runs"  # no handler ran
        options = page.locator("select[name=a] option").all_inner_texts()
        assert set(HOSTILE) <= set(options)
        shot(page, shots, "9-hostile-names")
        # Each one's link leads to a refusal, never to a file.
        for name in HOSTILE:
            page.goto(base + "/")
            href = page.get_by_role("link", name=name, exact=True).get_attribute("href")
            assert href == "/run/" + quote(name, safe="")
            page.get_by_role("link", name=name, exact=True).click()
            page.wait_for_url(base + href)
            assert page.locator("h1").inner_text() == "404 Not Found"
            assert name in page.locator("pre.text").inner_text()  # said, as text
        # A path out of the store, however it is written, is a 404 (asked as a script of
        # another page would: the browser's own request API, no URL cleaning of a page).
        for path in ("/run/..%2F..%2F..%2Fetc%2Fpasswd", "/run/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
                     "/run/%2Fetc%2Fpasswd", "/run/..%5C..%5Cetc%5Cpasswd",
                     "/episode/..%2F..%2Fetc/passwd", "/compare?a=..%2Fx&b=terse",
                     "/run/C:%5CWindows", "//etc/passwd", "/run/~root"):
            answer = page.request.get(base + path)
            assert answer.status == 404, path
            assert "root:" not in answer.text() and "404 Not Found" in answer.text(), path


def test_a_foreign_host_header_is_refused_from_the_browser(tab: Tab, server: str) -> None:
    port = urlsplit(server).port
    with browsing(tab, server) as b:
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}"):
            answer = b.page.request.get(server + "/", headers={"Host": host})
            assert answer.status == 421, host
            assert "DNS rebinding" in answer.text() and "terse" not in answer.text()
        # The same page asked by its own address is answered.
        answer = b.page.goto(server + "/")
        assert answer is not None and answer.status == 200
        assert RUN in runs_table(b.page)


def test_dns_rebinding_is_refused(chromium: Any, server: str) -> None:
    # The attack itself: a name of another site that resolves to 127.0.0.1 (REBOUND_HOST, in
    # the suite's Chromium), opened in a browser. The page it gets is the refusal, none of the
    # store.  A page of its own, unrouted: the name is what the browser asks for.
    port = urlsplit(server).port
    page = chromium.new_page()
    try:
        answer = page.goto(f"http://{REBOUND_HOST}:{port}/run/terse")
        assert answer is not None and answer.status == 421
        assert page.locator("h1").inner_text() == "421 Misdirected Request"
        assert page.locator("table").count() == 0  # nothing of the store
    finally:
        page.close()
