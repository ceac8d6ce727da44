"""Shared fixtures: a small seeded agent written into a pytester project."""

from __future__ import annotations

import compileall
import contextlib
import io
import json
import os
import re
import shutil
import signal
import sys
import textwrap
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import scipy.optimize  # type: ignore[import-untyped]
import scipy.stats  # noqa: F401  # type: ignore[import-untyped]
from _pytest.reports import BaseReport

# The plugin imports the engine (numpy, scipy) only when a session has something to
# compare.  pytester's in-process runs drop modules first imported inside them, and a
# module built on a C extension cannot be imported twice in one process: numpy refuses,
# scipy's extensions keep their first classes, and so does libyaml's (`yaml._yaml`): a
# yaml imported again after a drop hands mkdocs' CSafeLoader nodes of the first import,
# which the second import's resolver does not recognise ("could not determine a
# constructor for the tag None").  So the suite imports them up front, before any
# pytester snapshot is taken.
import pytest_prove.stats
from pytest_prove.cli.serve import App, make_server
from pytest_prove.review import Gate, Labels, Review
from pytest_prove.review.coverage import Coverage
from pytest_prove.review.pairing import Prepared
from pytest_prove.stats import Comparison
from pytest_prove.store import Run, Store

with contextlib.suppress(ImportError):  # the test extra has it; test_suite_rules checks
    import yaml  # noqa: F401


def _import_what_inner_sessions_import() -> None:
    """Import, before any pytester snapshot, every module of the package and xdist's
    controller modules: an in-process session imported each module it needed and this
    process had not, and pytester dropped them when the session ended, so the next session
    imported them again (xdist's controller modules, 11 ms of CPU a session, in every session
    that loads xdist; the report's and the review's, 58 ms of a session that compares).  No
    test reads this process's module table: a test of what a command or a session imports
    runs it in a fresh interpreter (test_cheap_start.py, test_cli.py, test_polish.py,
    test_collection.py, test_stats_isolation.py).  Left out: the textual app (only its
    command imports textual: test_tui.py) and ``__main__`` (it runs the command line)."""
    import importlib
    import pkgutil

    names = ["xdist.dsession", "xdist.remote", "xdist.report", "xdist.workermanage",
             "xdist.scheduler"]
    names += [info.name for info in pkgutil.walk_packages(pytest_prove.__path__,
                                                          "pytest_prove.")
              if info.name != "pytest_prove.cli.tui_app"
              and not info.name.endswith("__main__")]
    for name in names:
        with contextlib.suppress(ImportError):  # an optional extra's module
            importlib.import_module(name)


_import_what_inner_sessions_import()

#: Whether pyyaml was imported before any test ran (tests/test_suite_rules.py checks it).
YAML_UP_FRONT = "yaml" in sys.modules

#: A seeded agent whose refund tickets fail at the rate REFUND_FAIL says.
BOT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    RATES = {"refund": float(os.environ.get("REFUND_FAIL", "0.1")), "password": 0.1}


    @prove.rollout(replicates=int(os.environ.get("BOT_REPLICATES", "40")),
                   failures=["unresolved"], successes=["resolved"], t_unit="steps")
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_bot(ticket, prove_seed):
        rng = random.Random(prove_seed)
        outcome = "unresolved" if rng.random() < RATES[ticket] else "resolved"
        return prove.Episode(outcome, t=rng.randint(1, 9), horizon=10,
                             meta={"case_id": ticket})
    """
)

INI = "[pytest]\nprove_allow_underpowered = true\n"

#: The bundled example: a simulated support agent with a committed baseline.
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "support_bot"


#: Options for every session a test starts (pytester's, in-process or in a subprocess, and the
#: subprocesses those start, through the environment): hypothesis' plugin imports all of
#: hypothesis at the end of every session, seconds in each subprocess and xdist worker on a
#: loaded machine, and none of these projects uses it; pytest-asyncio warns in every session
#: whose project leaves its fixture loop scope unset, and those warnings filled this suite's
#: summary; pytest's unraisableexception plugin ends every configuration it was set up in with
#: a full garbage collection (pytester's inline runs turn that off, its parseconfig and
#: pytest.main in a test do not), which walks the whole heap of the worker running the test:
#: 0.2 s a configuration in a fresh process, up to 26 s for one test late in a full run.
#: (A test may still name any of these plugins on its own command line.)
INNER_ADDOPTS = ("-p no:hypothesispytest -p no:unraisableexception "
                 "-o asyncio_default_fixture_loop_scope=function")


#: What the package and its test extra declare (pyproject.toml: dependencies and the ``test``
#: extra), by distribution, with the module each is imported as.  In CI (``CI`` set, as
#: ``.ci/run`` runs) a test skipped because one of them cannot be imported FAILS: a broken
#: install must not pass green.  tests/test_suite_rules.py checks this table against
#: pyproject.toml.
DECLARED = {
    "pytest": "pytest", "pluggy": "pluggy", "numpy": "numpy", "scipy": "scipy",
    "filelock": "filelock", "opentelemetry-sdk": "opentelemetry.sdk",
    "pytest-xdist": "xdist", "msgspec": "msgspec",
    # the test extra
    "statsmodels": "statsmodels", "hypothesis": "hypothesis", "openai": "openai",
    "httpx": "httpx",
    "opentelemetry-instrumentation-openai-v2": "opentelemetry.instrumentation.openai_v2",
    "opentelemetry-util-genai": "opentelemetry.util.genai", "requests": "requests",
    "pydantic-ai-slim": "pydantic_ai", "playwright": "playwright", "lifelines": "lifelines",
    "pytest-asyncio": "pytest_asyncio", "pytest-timeout": "pytest_timeout",
    "pytest-rerunfailures": "pytest_rerunfailures", "pyyaml": "yaml", "mypy": "mypy",
    "mkdocs": "mkdocs", "textual": "textual",
}

#: Where the HTML report's tests find headless Chromium (Debian's package), and the reason
#: they skip without it: outside CI only (a developer without Chromium); in CI a failure.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NO_CHROMIUM = "headless Chromium is not installed (apt-get install -y chromium; .ci/run does)"
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=NO_CHROMIUM)
#: Chromium's switches for those tests: every background network feature off, so that any
#: request a page makes is the page's own doing.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-quic"]
#: A name of another site that the suite's Chromium resolves to 127.0.0.1, as a DNS
#: rebinding attack has it (test_serve_browser.py's test_dns_rebinding_is_refused).  A switch
#: of the launch, the only place it can be set: a second browser launched for that one test
#: cost a second or two.  No page of the suite asks for the name otherwise.
REBOUND_HOST = "evil.example"


class InBrowserThread:
    """A Playwright object used from this thread, kept in the thread that made it: every
    attribute read and call runs there (``run``), and the Playwright objects it gives back
    (pages, locators, lists of them) are wrapped the same.  Playwright's sync API marks its
    event loop as running in the thread it was started in for as long as it runs, so that
    ``asyncio.run`` there fails: in a thread of its own for the whole session, it leaves this
    suite's main thread as every other test expects it.  Callbacks (``page.on``, ``route``)
    run in Playwright's thread with its own objects."""

    __slots__ = ("_run", "_target")

    def __init__(self, target: object, run: Callable[..., Any]) -> None:
        self._target, self._run = target, run

    @staticmethod
    def wrap(value: Any, run: Callable[..., Any]) -> Any:
        if isinstance(value, list):
            return [InBrowserThread.wrap(item, run) for item in value]
        if type(value).__module__.startswith("playwright."):
            return InBrowserThread(value, run)
        return value

    def __getattr__(self, name: str) -> Any:
        run = self._run
        value = run(getattr, self._target, name)
        if not callable(value) or type(value).__module__.startswith("playwright."):
            return self.wrap(value, run)

        def method(*args: Any, **kwargs: Any) -> Any:
            args = tuple(a._target if isinstance(a, InBrowserThread) else a for a in args)
            return self.wrap(run(value, *args, **kwargs), run)

        return method


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """Headless Chromium (Debian's), launched once per process (once per xdist worker) for
    every test that opens a page in it, in a page or context of its own or one its module's
    tests share (a page costs a few tenths of a second): a launch (and Playwright's driver)
    costs about a second; no module launches one of its own.  Its CPU is counted
    (bench/suite_time.py) in the test it is closed after, the session's last.  Used through
    :class:`InBrowserThread`.
    Without Chromium or Playwright: a skip outside CI, a failure in CI (``missing_in_ci``)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(NO_CHROMIUM)
    sync_api = pytest.importorskip("playwright.sync_api")
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chromium")

    def run(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return pool.submit(function, *args, **kwargs).result()

    try:
        playwright = run(lambda: sync_api.sync_playwright().start())
        try:
            browser = run(playwright.chromium.launch, executable_path=CHROMIUM,
                          args=[*CHROMIUM_ARGS,
                                f"--host-resolver-rules=MAP {REBOUND_HOST} 127.0.0.1"],
                          headless=True)
            try:
                yield InBrowserThread(browser, run)
            finally:
                run(browser.close)
        finally:
            run(playwright.stop)
    finally:
        pool.shutdown()


def in_ci() -> bool:
    """Whether this is a CI run: ``CI`` set to anything but empty, 0 or false."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_in_ci(reason: str) -> str | None:
    """Why a skip with this ``reason`` is a failure in CI, or None if it stays a skip: a
    declared module that cannot be imported (``pytest.importorskip``'s "could not import
    'M'"), or Chromium missing."""
    if NO_CHROMIUM in reason:
        return f"{NO_CHROMIUM}: in CI the HTML report's browser tests must run"
    found = re.search(r"could not import '([\w.]+)'", reason)
    if found is None:
        return None
    name = found.group(1)
    for dist, module in DECLARED.items():
        if name == module or name.startswith(module + ".") or module.startswith(name + "."):
            return (f"{name} (from {dist}, which pyproject.toml declares) cannot be imported: "
                    f'in CI this fails instead of skipping; pip install -e ".[test]"')
    return None


def _failed_in_ci(report: BaseReport) -> None:
    """Turn ``report``, if skipped for something CI must have, into a failure saying what."""
    if not report.skipped or not in_ci() or getattr(report, "wasxfail", None) is not None:
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    why = missing_in_ci(reason)
    if why is not None:
        report.outcome = "failed"
        report.longrepr = why


def pytest_configure(config: pytest.Config) -> None:
    """Let the suite's processes keep their bytecode, and compile the package up front.

    Where ``PYTHONDONTWRITEBYTECODE`` is set (as in this project's development environment)
    nothing is kept as bytecode: each xdist worker of this suite rewrote the assertions of
    every test module and of the plugin (pytest rewrites an installed plugin's modules too)
    again on every run, 12.7 s of CPU for a collection where the kept files make it 5.3 s;
    and every process a test starts (a subprocess session, the command line, an inner
    session's xdist workers) compiled the package again: test_timeout.py, test_cli.py and
    test_kill.py took 18.8 s of CPU with no ``.pyc`` of the package, 15.6 s with them.  So
    the controller, before xdist starts its workers, drops the variable from the environment
    they and every process they start inherit (what Python and pytest do by default, and what
    CI runs with), and compiles the package once so that the first processes do not each
    compile it at once.  A stale file is never used (Python checks a ``.pyc`` against its
    source's time stamp and size, pytest its rewritten file against the source's hash); both
    write a file under a temporary name and rename it, so two sessions at once cannot leave
    a torn one; a folder that cannot be written is left as it is.  tests/test_suite_rules.py
    checks the package's files are there."""
    if hasattr(config, "workerinput"):
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False  # this process's own test modules, without xdist
    package = Path(pytest_prove.__file__).resolve().parent
    with contextlib.suppress(OSError):
        compileall.compile_dir(package, quiet=2)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which turns -n alone into --dist load
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Under -n with no --dist of the user's, xdist's work stealing: with ``load``, xdist sends
    each worker a queue of tests and never takes one back, so a run ended with one worker idle
    while the other worked through a queue of slow tests; a worker out of work now takes half
    of the other's queue."""
    option = config.option
    if (getattr(option, "numprocesses", None) and getattr(option, "dist", None) == "no"
            and not getattr(option, "distload", False)):
        option.dist = "worksteal"


@pytest.hookimpl(trylast=True)  # after pytest's own ordering (by the fixtures' scopes)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist's workers (each orders the same collection the same way), the test files with
    the most tests marked ``slow`` first, each file's tests together and in their order: the
    long tests start early and the run ends on short ones, which a worker left without work
    can take from the other (a file's module-scoped fixtures still set up once a worker).
    Not under ``--ff``, whose failures first this would undo."""
    if not hasattr(config, "workerinput") or config.getoption("failedfirst", False):
        return
    slow: dict[Path, int] = {}
    for item in items:
        slow[item.path] = slow.get(item.path, 0) + (item.get_closest_marker("slow") is not None)
    files = {path: rank for rank, path in enumerate(slow)}  # first seen, first
    items.sort(key=lambda item: (-slow[item.path], files[item.path]))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    _failed_in_ci(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector
                               ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    report = yield
    _failed_in_ci(report)
    return report


#: The plugins of every session a test starts, named: this one and xdist's two, with pytest's
#: loading of every installed plugin turned off (PYTEST_DISABLE_PLUGIN_AUTOLOAD).  Reading each
#: installed distribution's entry points and metadata (for that loading, for the assertion
#: rewriting of plugins, for the header's plugin list) was a sixth of an in-process session's
#: own cost, and every subprocess and xdist worker paid it again; and the test extra's plugins
#: (pytest-asyncio, anyio, pytest-timeout, pytest-rerunfailures, hypothesis) were set up in
#: projects that use none of them.  A test of this plugin beside those is marked
#: ``installed_plugins``: its sessions load every installed plugin, as a user's do.
INNER_PLUGINS = "-p prove -p xdist -p xdist.looponfail -p no:unraisableexception"


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
             request: pytest.FixtureRequest) -> pytest.Pytester:
    """pytest's own ``pytester``, whose sessions load :data:`INNER_PLUGINS` only (or every
    installed plugin with :data:`INNER_ADDOPTS`, for a test marked ``installed_plugins``)."""
    if request.node.get_closest_marker("installed_plugins") is not None:
        monkeypatch.setenv("PYTEST_ADDOPTS", INNER_ADDOPTS)
    else:
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        monkeypatch.setenv("PYTEST_ADDOPTS", INNER_PLUGINS)
    return pytester


def inline_session(root: Path, *argv: str, env: Mapping[str, str] | None = None
                   ) -> tuple[int, str]:
    """A pytest session in this process, in ``root`` (its rootdir), with ``env`` set and no
    ``PYTEST_*`` variable for its length, and :data:`INNER_ADDOPTS`: its exit code and what it
    printed.  For module-scoped fixtures, which cannot use pytester; a subprocess would cost
    an interpreter's, the plugins' and scipy's start-up again (about 1.5 s of CPU)."""
    saved = dict(os.environ)
    modules, path = set(sys.modules), list(sys.path)
    for key in [k for k in os.environ if k.startswith("PYTEST_")]:
        del os.environ[key]
    os.environ.update(env or {})
    buffer = io.StringIO()
    try:
        with contextlib.chdir(root), contextlib.redirect_stdout(buffer):
            code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                                *INNER_ADDOPTS.split(), f"--rootdir={root}", str(root), *argv])
    finally:
        os.environ.clear()
        os.environ.update(saved)
        sys.path[:] = path
        for name in set(sys.modules) - modules:  # the project's test modules, not the engine
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(root)):
                del sys.modules[name]
    return int(code), buffer.getvalue()


def copy_example(root: Path) -> Path:
    """``examples/support_bot`` copied into ``root``: its files and committed baseline, none
    of its runs."""
    for source in sorted(EXAMPLE.rglob("*")):
        relative = source.relative_to(EXAMPLE)
        if "__pycache__" in relative.parts or relative.parts[:2] == (".prove", "runs"):
            continue
        target = root / relative
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return root


@contextmanager
def serving(root: Path) -> Iterator[str]:
    """``pytest-prove serve``'s app over ``root``'s store, in a thread on a free port: its
    base URL (test_serve.py, test_serve_browser.py)."""
    httpd = make_server(App(Store(root / ".prove"), prices_from=root), "127.0.0.1", 0)
    # A 10 ms poll (the default is 0.5 s): shutdown() waits for the loop to see it.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()  # make_server returns a listening socket
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture
def example(pytester: pytest.Pytester) -> pytest.Pytester:
    """A copy of the bundled example (its committed baseline, none of its runs)."""
    copy_example(pytester.path)
    return pytester


@pytest.fixture
def bot(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with the seeded agent and the design check relaxed for small sweeps."""
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    return pytester


def load(pytester: pytest.Pytester, name: str = "latest") -> Run:
    """The stored run called ``name`` in the project's default store."""
    return Store(pytester.path / ".prove").load(name)


def reviewed(comparison: Comparison, labels: Labels, *, paired: bool = False,
             not_run: tuple[str, ...] = (), new: tuple[str, ...] = (),
             left_out: Mapping[str, int] | None = None) -> Review:
    """A Review around a comparison made from counts, for the renderers' own tests; its runs
    hold no episode (the HTML report looks in them for steps and token usage to draw)."""
    prepared = Prepared(rows=(), paired=paired, events=(), not_run=not_run, new=new,
                        left_out=dict(left_out or {}))
    before, after = (Run(run_id=name, name=name, manifest={}, episodes=(), path=Path(name))
                     for name in (labels.before, labels.after))
    return Review(before=before, after=after,
                  prepared=prepared, comparison=comparison, labels=labels,
                  coverage=Coverage({}, {}, 1, 1), notes=(),
                  gate=Gate(False, (), frozenset()))


def fitted(manifest: Mapping[str, object], episodes: Iterable[Mapping[str, object]]
           ) -> dict[str, object]:
    """``manifest`` with the status, plan and counts of a complete run of ``episodes`` (each
    condition's replicates 0 to N - 1): what a baseline's header must say of its body, for
    tests that save a baseline from episodes they made themselves."""
    from pytest_prove.record import ending

    held: dict[str, dict[str, int]] = {}
    counts = {"episodes": 0, "with_outcome": 0, "no_outcome": 0, "errored": 0}
    for record in episodes:
        rollout = held.setdefault(str(record["rollout"]), {})
        key = str(record["condition_key"])
        rollout[key] = max(rollout.get(key, 0), int(record["replicate"]) + 1)  # type: ignore[call-overload]
        counts["episodes"] += 1
        counts[ending(record)] += 1
    plan = {rid: {"replicates": max(keys.values()), "conditions": sorted(keys)}
            for rid, keys in held.items()}
    return {**manifest, "status": "complete", "missing": 0, "plan": plan, "counts": counts}


@contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """An HTTP server on 127.0.0.1 (a free port) answering with ``handler``, in a thread, for
    the length of the block; the requests it saw are in its ``calls`` list."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.calls = []  # type: ignore[attr-defined]
    # A 10 ms poll (the default is 0.5 s): shutdown() waits for the loop to see it.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


class JSONHandler(BaseHTTPRequestHandler):
    """A quiet handler whose ``answer`` sends one JSON document with status 200."""

    def answer(self, document: object) -> None:
        reply = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


def capture_session(pytester: pytest.Pytester, *args: str,
                    timeout: float = 120) -> pytest.RunResult:
    """A session of a capture test. One process: a subprocess, since the global tracer
    provider is set once a process (and an instrumentor patches its library for the rest of
    it).  Under -n 2: in this process, which only collects and reads what the workers report;
    the workers, processes of their own, are where capture is switched on (when an item is
    set up)."""
    if "-n" in args:
        return pytester.runpytest(*args)
    return pytester.runpytest_subprocess(*args, timeout=timeout)


def as_in_a_terminal() -> None:
    """Ctrl-C as a terminal delivers it (a ``preexec_fn``): a child inherits an ignored or
    blocked SIGINT from the process that starts it, and a test worker may have been left so
    by an earlier test (a child session then ran on untouched, and a server never stopped)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
