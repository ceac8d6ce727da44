"""The pytest glue's hooks: the options (read in settings.py), collection (collect.py), the
rollout call and its fixtures (calls.py), the worker's side (worker.py), the session's end
and the gate (session.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ..store import Store, StoreError
from . import budget, cache, capture, dryrun, environment, heap, live, window, worker
from .calls import RolloutCalls

# The prove_* fixtures live in calls.py; named here, they are this plugin's fixtures.
from .calls import prove_arm as prove_arm
from .calls import prove_block as prove_block
from .calls import prove_cfg as prove_cfg
from .calls import prove_replicate as prove_replicate
from .calls import prove_seed as prove_seed

# The collection hooks live in collect.py; named here, they are this plugin's hooks.
from .collect import Collection
from .collect import pytest_collect_file as pytest_collect_file
from .collect import pytest_collection_modifyitems as pytest_collection_modifyitems
from .collect import pytest_generate_tests as pytest_generate_tests
from .collect import pytest_pycollect_makeitem as pytest_pycollect_makeitem
from .options import add_options
from .reports import RolloutReports, without_rollouts
from .salts import choose_salt
from .session import SESSION_KEY, SESSION_NAME
from .settings import Settings
from .state import PLAN_KEY, PLANNED_KEY, SELECTED_KEY, SETTINGS_KEY, disown_all, own

#: The marker's help (``pytest --markers``). Nothing sets the marker: a rollout is known by
#: its declaration. It stays registered so that a suite that applied it by hand still runs
#: under --strict-markers.
MARKER = ("prove_rollout: not set by pytest-prove (@prove.rollout adds no marker), so "
          "-m prove_rollout selects no rollout; select rollouts by path or -k")


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
    budget.add_options(parser)
    capture.add_options(parser)
    cache.add_options(parser)
    environment.add_options(parser)
    live.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser,
                                  args: list[str]) -> None:
    dryrun.load_initial_conftests(early_config, args)  # --prove-plan: before any import


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    settings = Settings.from_config(config)
    config.stash[SETTINGS_KEY] = settings
    config.stash[PLANNED_KEY] = {}
    cache.start(config, settings)
    heap.install(config)
    own(config, RolloutCalls(), "prove_calls")
    own(config, RolloutReports(), "prove_rollout_reports")
    window.register(config)
    lf = config.pluginmanager.get_plugin("lfplugin")
    if lf is not None:
        from .lastfailed import LastFailedBlocks

        own(config, LastFailedBlocks(lf), "prove_lastfailed")
    if settings.is_worker:
        own(config, Collection(config), "prove_collection")
        worker.register(config)
        return

    from .reports import ReportProperties, SessionReports
    from .session import ProveSession

    opt = config.option
    store = Store(settings.store)
    cache.take_recorded_salt(config, settings)
    start = choose_salt(config, settings, store)
    cache.note_salt(config, settings)
    try:
        session = ProveSession(
            config, settings, store, name=opt.prove_name, baseline=start.baseline,
            resume=start.resume, save_baseline=opt.prove_save_baseline,
            update_baseline=opt.prove_update_baseline, asked=settings.asked(),
            replay=start.replay)
    except StoreError as exc:
        raise pytest.UsageError(str(exc)) from None
    session.last_failed = start.last_failed
    config.stash[SESSION_KEY] = session
    own(config, session, SESSION_NAME)  # by name too: -p no:… style toggles, getplugin
    own(config, SessionReports(session), "prove_session_reports")
    own(config, Collection(config), "prove_collection")
    own(config, ReportProperties(), "prove_report_properties")
    session.start()
    live.register(config, session)  # --prove-live: the status line, -v lines' outcomes
    if config.pluginmanager.hasplugin("xdist"):
        from .xdist import XdistHooks

        own(config, XdistHooks(session), "prove_xdist")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Said before the tests: pytest-timeout's thread method would end this very process."""
    settings = config.stash.get(SETTINGS_KEY, None)
    timeout_plugin = config.pluginmanager.get_plugin("timeout")  # the pytest_timeout module
    read = getattr(timeout_plugin, "get_env_settings", None)
    if (settings is None or settings.is_worker or not callable(read)
            or getattr(config.option, "dist", "no") != "no"):
        return []  # under xdist a worker that ends is replaced, and its item stored as errored
    try:
        found = read(config)
    except (AttributeError, ValueError, pytest.UsageError):
        return []
    if not getattr(found, "timeout", None) or getattr(found, "method", None) != "thread":
        return []
    return ["pytest-prove: pytest-timeout's thread method ends this process at its first "
            "timeout: the session stops there, that episode is not stored and the run is left "
            "incomplete (finish it with --prove-resume=latest). --prove-episode-timeout=S "
            "stores a late episode as timed out and goes on; so does --timeout-method=signal"]


def pytest_plugin_registered(plugin: object) -> None:
    """A session that loads pytester imports the engine (numpy, scipy) at once.

    pytester's in-process runs (``runpytest``, ``inline_run``) drop every module first
    imported inside them, and numpy cannot be imported twice in one process: a second
    in-process session that compared anything stopped with an INTERNALERROR.  Imported
    in the outer session, before any in-process run, the engine stays for all of them.
    """
    if getattr(plugin, "__name__", None) == "_pytest.pytester":
        from .. import stats  # noqa: F401


def pytest_unconfigure(config: pytest.Config) -> None:
    cache.end()
    dryrun.unblock()
    prove = config.stash.get(SESSION_KEY, None)
    if prove is not None:
        prove.run.writer.release()  # held from the first episode until the session ends
        del config.stash[SESSION_KEY]
    disown_all(config)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    if not any(PLAN_KEY in item.stash for item in session.items):
        without_rollouts(session.config)  # a plain test pays nothing for the plugin


@pytest.hookimpl(tryfirst=True)  # before junitxml and the --lf cache write what they saw
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is None:
        return
    prove = config.stash.get(SESSION_KEY, None)
    if config.stash.get(SELECTED_KEY, None) or (prove is not None and prove.ran_any):
        # No test runs any more: pytest's last collections and the interpreter's need not
        # walk what the session still holds (see heap.py); sessions without a rollout are
        # left alone.
        heap.settle(config)
    if settings.is_worker:
        worker.finish(config)
    elif prove is not None:
        prove.end(session, exitstatus)
    if settings.plan_only:
        dryrun.report(session)  # an import that touched the network: named, exit 4


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    prove = config.stash.get(SESSION_KEY, None)
    if prove is None:
        return
    verbosity = config.get_verbosity()
    # -q: the verdict, why the gate failed, and where things were written; -v: every row.
    lines = prove.summary_lines(verbose=verbosity > 0, quiet=verbosity < 0)
    if not lines:
        return
    if bool(getattr(terminalreporter, "isatty", False)):
        # A terminal folds a long line wherever its edge falls, inside a word: wrapped
        # where a space is instead (a log or a pipe gets each line whole).
        from ..report._format import wrapped

        lines = wrapped(lines, terminalreporter._tw.fullwidth)
    terminalreporter.section("pytest-prove")
    for line in lines:
        terminalreporter.write_line(line)
