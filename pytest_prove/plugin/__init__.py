"""The pytest glue: options, collection, fixtures, the report hand-off and the gate."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from .. import options, wire
from ..arguments import space_form_problem
from ..declare.seeds import new_salt
from ..declare.spec import NO_OUTCOME_EVENT
from ..options import (
    chaos_switch,
    error_rate,
    fail_on,
    gate_fails_on,
    missing_mode,
    new_run_name,
    run_name,
    salt_word,
    seconds,
    shard,
    share,
    store_name,
)
from ..options import concurrency as concurrency_option
from ..options import margin as margin_option
from ..options import max_mde as max_mde_option
from ..options import replicates as replicates_option
from ..store import Run, Store, StoreError
from . import budget, calls, capture, heap, worker
from .calls import RolloutCalls

# The prove_* fixtures live in calls.py; named here, they are this plugin's fixtures.
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
from .salts import FailedSalt, lf_salt
from .session import SESSION_KEY, SESSION_NAME
from .state import (
    PLANNED_KEY,
    SELECTED_KEY,
    SETTINGS_KEY,
    Settings,
    disown_all,
    own,
)

#: Options that name a file or folder, and every option that takes a value (tests check
#: these against ``pytest --help``): see arguments.py for why their separate form is refused.
PATH_OPTIONS = ("--prove-store", "--prove-report")
VALUE_OPTIONS = (*PATH_OPTIONS, "--prove-name", "--prove-baseline", "--prove-save-baseline",
                 "--prove-resume", "--prove-replicates", "--prove-concurrency", "--prove-event",
                 "--prove-fail-on", "--prove-q", "--prove-max-mde", "--prove-margin",
                 "--prove-token-cap",
                 "--prove-output-token-cap", "--prove-plan-from", "--prove-missing",
                 "--prove-episode-timeout", "--prove-replay", "--prove-shard",
                 "--prove-salt", "--prove-chaos", "--prove-max-errored")


# ---------------------------------------------------------------------------
# options


def _report_path(text: str) -> Path:
    """A report file whose suffix names its kind (--prove-report)."""
    path = Path(text)
    if path.suffix.lower() not in (".html", ".htm", ".md", ".json"):
        raise argparse.ArgumentTypeError(
            f"expected a file ending in .html, .md or .json, got {text!r}")
    return path


def _replay_name(text: str) -> str:
    """A run as every front door names one: a name, a run id, latest or baseline:NAME."""
    if text.startswith("baseline:"):
        return "baseline:" + store_name(text.removeprefix("baseline:"))
    return run_name(text)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("prove", "pytest-prove: did this change make the agent fail more?")
    group.addoption("--prove-store", metavar="DIR", default=None,
                    help="folder of runs and baselines (default: ini prove_store, else "
                         ".prove under rootdir)")
    group.addoption("--prove-name", metavar="NAME", type=new_run_name, default=None,
                    help="name this run (default: its run id)")
    group.addoption("--prove-baseline", metavar="NAME", type=store_name, default=None,
                    help="pair this run with baseline NAME, compare, and fail on a worse "
                         "verdict or on a condition it cannot vouch for (too small to tell, "
                         "lost twins, a declaration that differs)")
    group.addoption("--prove-save-baseline", metavar="NAME", type=store_name, default=None,
                    help="write this run as baseline NAME (.prove/baselines/NAME.baseline) once "
                         "it is complete and could serve as one (--prove-max-errored)")
    group.addoption("--prove-update-baseline", action="store_true", default=False,
                    help="replace the --prove-baseline file with this run once it is complete "
                         "and could serve as one (also accepts a changed declaration)")
    group.addoption("--prove-resume", metavar="RUN", type=run_name, default=None,
                    help="run only the replicates that run RUN is missing, appending to it; a "
                         "run paired with a baseline is gated against it")
    group.addoption("--prove-replay", metavar="RUN", type=_replay_name, default=None,
                    help="run the selected items on the seeds they had in run RUN (a name, "
                         "run id, latest or baseline:NAME), one replicate an item and no "
                         "episode timeout unless given, storing nothing: for --pdb or a "
                         "breakpoint() (pytest-prove flips and show print the command)")
    group.addoption("--prove-shard", metavar="K/N", type=shard, default=None,
                    help="run only slice K of N of the sweep (the same slice on every "
                         "machine); every shard needs one salt: --prove-baseline NAME or "
                         "--prove-salt WORD. Join the shards' runs with pytest-prove merge")
    group.addoption("--prove-salt", metavar="WORD", type=salt_word, default=None,
                    help="seed this run from WORD instead of a fresh salt (give every shard "
                         "of a sweep the same WORD; a baseline's run takes its salt)")
    group.addoption("--prove-plan", action="store_true", default=False,
                    help="collect, print the plan and the design check, and run nothing")
    group.addoption("--prove-replicates", metavar="N", type=replicates_option, default=None,
                    help="replicates per condition for every rollout, overriding declarations")
    group.addoption("--prove-concurrency", metavar="K", type=concurrency_option, default=None,
                    help="run K replicates at once in each item (threads, or asyncio tasks "
                         "for async rollouts)")
    group.addoption("--prove-episode-timeout", metavar="S", type=seconds, default=None,
                    help="stop an episode still running after S seconds: stored with no "
                         "outcome (episode_timeout), its item fails, the sweep goes on "
                         "(overrides timeout= and the ini value prove_episode_timeout; "
                         "default for a sync rollout: 1800; 0 or none: no timeout)")
    group.addoption("--prove-event", metavar="EVENT", action="append", default=[],
                    help="compare this outcome (repeatable; default: every declared failure "
                         "and success)")
    group.addoption("--prove-fail-on", metavar="WORDS", type=fail_on, default=None,
                    help="verdicts that fail the session besides the defaults, "
                         "comma-separated: worse and too-small always (a row that could "
                         "not have shown --prove-max-mde), not-within with --prove-margin; "
                         "no-WORD leaves one out on purpose (e.g. no-worse), and the "
                         "summary then says so")
    group.addoption("--prove-missing", metavar="HOW", type=missing_mode, default=None,
                    help="episodes without an outcome (no outcome, errors, timeouts): test "
                         "(default: a rise in their share is worse) or ignore (they are "
                         "infrastructure; the summary says how many were left out)")
    group.addoption("--prove-q", metavar="Q", type=error_rate, default=None,
                    help="error rate q for flags (BH) and the verdict (Holm); default 0.05")
    group.addoption("--prove-max-mde", metavar="D", type=max_mde_option, default=None,
                    help="the largest change you accept not being able to see; default 0.20")
    group.addoption("--prove-margin", metavar="D", type=margin_option, default=None,
                    help="ask for the claim 'no condition got worse by D or more' (a "
                         "non-inferiority margin, 0 < D < 1): each condition and event is "
                         "tested against D, and the session fails unless every one is shown "
                         "within it; default: ini prove_margin, else no margin")
    group.addoption("--prove-sequential", action="store_true", default=None,
                    help="take each condition's replicates in looks and stop it once it is "
                         "decided against the baseline (worse, safer, or no change of "
                         "--prove-max-mde possible); needs --prove-baseline. Also when "
                         "every selected rollout declares sequential=True")
    group.addoption("--prove-allow-underpowered", action="store_true", default=None,
                    help="run even when the design check says a condition could not see "
                         "--prove-max-mde, and pass a gate whose rows are too small to tell "
                         "by design (rows that lost twins to episodes without an outcome "
                         "still fail)")
    group.addoption("--prove-max-errored", metavar="F", type=share, default=None,
                    help="the largest share of a condition's episodes that may end without "
                         "an outcome (errors, timeouts, no outcome) in a run saved as a "
                         "baseline, in the baseline a gate reads, and with "
                         "--prove-missing=ignore in the run; default: ini "
                         "prove_max_errored, else 0.25")
    group.addoption("--prove-report", metavar="PATH", type=_report_path, default=None,
                    help="write the comparison as a report: .html (self-contained), .md or "
                         ".json; without --prove-baseline, this run's rates with exact "
                         "intervals")
    group.addoption("--prove-chaos", metavar="on|off", type=chaos_switch, default=None,
                    help="inject the HTTP faults rollouts declare with chaos= or [chaos] "
                         "(on, the default) or none (off); given against a baseline whose "
                         "chaos differs, it asks for that comparison (docs/chaos.md)")
    parser.addini("prove_store", "folder of runs and baselines (relative to rootdir)",
                  default=".prove")
    parser.addini("prove_specs", "sweep spec files to collect besides prove_*.toml",
                  type="paths", default=[])
    parser.addini("prove_q", "default for --prove-q", default="0.05")
    parser.addini("prove_max_mde", "default for --prove-max-mde", default="0.20")
    parser.addini("prove_fail_on", "verdicts that fail besides worse and too-small (and "
                  "not-within with a margin); no-WORD leaves one out", default="")
    parser.addini("prove_max_errored", "default for --prove-max-errored (share of a "
                  "condition's episodes without an outcome a baseline may hold)",
                  default="0.25")
    parser.addini("prove_margin", "default for --prove-margin (empty: no margin)", default="")
    parser.addini("prove_episode_timeout", "default for --prove-episode-timeout (seconds; "
                  "empty: 1800 for a sync rollout without timeout=; 0 or none: no timeout)",
                  default="")
    parser.addini("prove_missing", "default for --prove-missing: test or ignore",
                  default="test")
    parser.addini("prove_allow_underpowered", "default for --prove-allow-underpowered",
                  type="bool", default=False)
    parser.addini("prove_chaos", "default for --prove-chaos: on or off", default="on")
    parser.addini("prove_sequential", "default for --prove-sequential", type="bool",
                  default=False)
    budget.add_options(parser)
    capture.add_options(parser)


def _ini_number(config: pytest.Config, name: str, parse: Callable[[str], float]) -> float:
    raw = str(config.getini(name))
    try:
        return parse(raw)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {name}: {exc}") from None


# ---------------------------------------------------------------------------
# configure


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "prove_rollout: set by @prove.rollout; do not apply by hand")
    opt = config.option
    q = opt.prove_q or _ini_number(config, "prove_q", error_rate)
    max_mde = opt.prove_max_mde or _ini_number(config, "prove_max_mde", max_mde_option)
    ini_margin = str(config.getini("prove_margin")).strip()
    try:
        margin = opt.prove_margin or (margin_option(ini_margin) if ini_margin else None)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option prove_margin: {exc}") from None
    ini_fail_on = str(config.getini("prove_fail_on")).strip()
    try:
        asked_words = opt.prove_fail_on or (fail_on(ini_fail_on) if ini_fail_on else None)
        fail_words = gate_fails_on(asked_words, margin=margin is not None)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option prove_fail_on: {exc}") from None
    try:
        max_errored = (opt.prove_max_errored if opt.prove_max_errored is not None
                       else share(str(config.getini("prove_max_errored")).strip() or "0.25"))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option prove_max_errored: {exc}") from None
    try:
        missing = opt.prove_missing or missing_mode(
            str(config.getini("prove_missing")).strip() or "test")
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option prove_missing: {exc}") from None
    try:
        chaos_on = (opt.prove_chaos if opt.prove_chaos is not None
                    else chaos_switch(str(config.getini("prove_chaos")).strip() or "on"))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option prove_chaos: {exc}") from None
    ini_timeout = str(config.getini("prove_episode_timeout")).strip()
    try:
        default_timeout = seconds(ini_timeout) if ini_timeout else None
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option prove_episode_timeout: {exc}") from None
    store_root = Path(opt.prove_store) if opt.prove_store else (
        config.rootpath / str(config.getini("prove_store")))
    if NO_OUTCOME_EVENT in opt.prove_event:
        raise pytest.UsageError(
            f"--prove-event={NO_OUTCOME_EVENT!r} names no outcome: episodes that end without "
            "one are tested anyway, beside the events you pick (--prove-missing=ignore "
            "leaves them out)")
    if opt.prove_update_baseline and not opt.prove_baseline:
        raise pytest.UsageError(
            "--prove-update-baseline replaces the baseline named by --prove-baseline; "
            "add --prove-baseline NAME (or use --prove-save-baseline NAME for a new one)")
    _check_shard_options(opt)
    from .sequential import sequential_of

    sequential = sequential_of(config)
    if sequential:
        _check_sequential_options(opt)
        if margin is not None:
            raise pytest.UsageError(
                f"--prove-sequential cannot be used with a margin (--prove-margin {margin:g}, "
                "or ini prove_margin) yet: a sequential run's looks test worse and safer, not "
                "the margin's claim; drop --prove-sequential to ask for the claim, or drop the "
                "margin to stop conditions early")
    if opt.prove_plan:
        # The plan is read on one process: no workers are started for it.
        opt.dist = "no"
    settings = Settings(
        store=store_root.resolve(),
        replicates=opt.prove_replicates,
        concurrency=opt.prove_concurrency or 1,
        q=q,
        max_mde=max_mde,
        margin=margin,
        allow_underpowered=bool(opt.prove_allow_underpowered
                                or config.getini("prove_allow_underpowered")),
        max_errored=max_errored,
        paired=opt.prove_baseline is not None or opt.prove_resume is not None,
        sequential=sequential,
        plan_only=opt.prove_plan,
        episode_timeout=opt.prove_episode_timeout,
        default_timeout=default_timeout,
        builtin_timeout=_builtin_timeout(config),
        shard=opt.prove_shard,
        chaos=chaos_on,
        chaos_asked=opt.prove_chaos is not None,
    )
    config.stash[SETTINGS_KEY] = settings
    config.stash[PLANNED_KEY] = {}
    heap.install(config)
    own(config, RolloutCalls(), "prove_calls")
    lf = config.pluginmanager.get_plugin("lfplugin")
    if lf is not None:
        from .lastfailed import LastFailedBlocks

        own(config, LastFailedBlocks(lf), "prove_lastfailed")
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # An xdist worker: the controller decided the salt and what is already done.
        sent = wire.worker_input(workerinput)
        settings.is_worker = True
        settings.salt = sent["salt"]
        settings.done = sent["done"]
        settings.replay = sent["replay"]
        settings.chaos_references = sent["chaos"]
        settings.worker_refusal = _reused_worker() or _other_version(sent["version"])
        own(config, Collection(config), "prove_collection")
        worker.register(config)
        return

    _refuse_space_form(config)
    from .reports import ReportProperties
    from .session import ProveSession

    store = Store(settings.store)
    try:
        baseline = store.load_baseline(opt.prove_baseline) if opt.prove_baseline else None
        resume = store.load(opt.prove_resume) if opt.prove_resume else None
    except StoreError as exc:
        raise pytest.UsageError(str(exc)) from None
    if resume is not None and opt.prove_replay is None:
        baseline = _paired_baseline(store, resume, baseline)
    replay = _replayed(config, store, opt)
    settings.chaos_references = _chaos_references(baseline, resume, settings)
    last_failed: FailedSalt | None = None
    if replay is not None:
        settings.salt = replay.salt
        settings.replay = _replicates_of(replay)
    elif resume is not None:
        _check_resumed_shard(resume, opt.prove_shard)
        if "sequential" in resume.manifest:
            raise pytest.UsageError(
                f"run {resume.name!r} is sequential: its conditions were decided at their "
                "looks, and running their other replicates now would read them after a "
                "decision the error rates were spent on; start a new run instead")
        settings.salt = resume.salt
        settings.done = frozenset(_done_keys(resume.episodes))
        if baseline is not None and resume.salt != baseline.salt:
            raise pytest.UsageError(
                f"run {resume.name!r} was not paired with baseline {baseline.name!r} (their "
                "salts differ), so resuming it against that baseline would break the pairing; "
                "drop --prove-baseline or start a new run")
    elif baseline is not None:
        settings.salt = baseline.salt
    elif opt.prove_salt is not None:
        settings.salt = opt.prove_salt
    elif (last_failed := lf_salt(config)) is not None:
        settings.salt = last_failed.salt
    else:
        settings.salt = new_salt()
    try:
        session = ProveSession(
            config, settings, store, name=opt.prove_name, baseline=baseline, resume=resume,
            save_baseline=opt.prove_save_baseline, update_baseline=opt.prove_update_baseline,
            asked={"events": tuple(opt.prove_event) or None, "fail_on": fail_words,
                   "missing": missing, "margin": margin,
                   "chaos_differs": settings.chaos_asked,
                   # too-small named on purpose beats --prove-allow-underpowered
                   "allow_underpowered": settings.allow_underpowered
                   and "too-small" not in (asked_words or ()),
                   "max_errored": settings.max_errored},
            replay=replay)
    except StoreError as exc:
        raise pytest.UsageError(str(exc)) from None
    session.last_failed = last_failed
    config.stash[SESSION_KEY] = session
    own(config, session, SESSION_NAME)  # by name too: -p no:… style toggles, getplugin
    own(config, Collection(config), "prove_collection")
    own(config, ReportProperties(), "prove_report_properties")
    session.start()
    if config.pluginmanager.hasplugin("xdist"):
        from .xdist import XdistHooks

        own(config, XdistHooks(session), "prove_xdist")


def _paired_baseline(store: Store, resume: Run, given: Run | None) -> Run | None:
    """The baseline a resumed run is gated against: the one its manifest says it was paired
    with (loaded by that name when --prove-baseline is not given), or a usage error saying
    why it cannot be. A run paired with a baseline never finishes as an unpaired run."""
    paired = resume.manifest.get("paired_with")
    name = paired.get("baseline") if isinstance(paired, dict) else None
    if not isinstance(name, str) or not name:
        return given
    if given is not None and given.name != name:
        raise pytest.UsageError(
            f"run {resume.name!r} was paired with baseline {name!r}, not {given.name!r}; "
            f"resume it with --prove-baseline={name} (or without --prove-baseline), or start "
            "a new run against the other baseline")
    try:
        found = given if given is not None else store.load_baseline(name)
    except StoreError:
        raise pytest.UsageError(
            f"run {resume.name!r} was paired with baseline {name!r}, which this store no "
            f"longer holds, so it could not be gated when finished; restore "
            f"baselines/{name} (git checkout) and resume again, or start a new run") from None
    run_id = paired.get("run_id") if isinstance(paired, dict) else None
    if isinstance(run_id, str) and run_id and found.run_id != run_id:
        raise pytest.UsageError(
            f"run {resume.name!r} was paired with baseline {name!r} as it was then (run "
            f"{run_id}); it has been replaced since (now run {found.run_id}), so the run's "
            "first episodes were compared with another baseline than its last would be; "
            f"start a new run with --prove-baseline={name}")
    return found


def _builtin_timeout(config: pytest.Config) -> float | None:
    """The episode timeout of a sync rollout that sets none, or None: none under a debugger
    (a breakpoint must not time the episode out), nor when pytest-timeout bounds every test
    (its timeout ends the episode already, and stores it as timed out)."""
    opt = config.option
    if getattr(opt, "usepdb", False) or getattr(opt, "trace", False):
        return None
    if config.pluginmanager.hasplugin("timeout"):
        found: object = getattr(opt, "timeout", None) or os.environ.get("PYTEST_TIMEOUT")
        if found is None:
            with contextlib.suppress(ValueError):
                found = config.getini("timeout")
        with contextlib.suppress(TypeError, ValueError):
            if float(str(found)) > 0:
                return None
    return options.DEFAULT_EPISODE_TIMEOUT


def _check_sequential_options(opt: Any) -> None:
    """--prove-sequential reads each condition against its baseline at its looks; say why the
    options it cannot keep its error rates with are refused."""
    if not opt.prove_baseline:
        raise pytest.UsageError(
            "--prove-sequential stops each condition once it is decided against the baseline, "
            "so it needs one: add --prove-baseline NAME (or drop --prove-sequential, and ini "
            "prove_sequential, to run every replicate)")
    refused = (
        ("prove_resume", "--prove-resume", "a resumed run would take its looks again from "
         "episodes whose earlier looks may already have stopped a condition, and the error "
         "spent at those looks is not recorded to be carried on; rerun the sweep"),
        ("prove_shard", "--prove-shard", "a shard holds a slice of each condition's "
         "replicates, and a look needs the condition's first replicates all together; run "
         "the sweep in one session (xdist workers may be remote)"),
        ("prove_save_baseline", "--prove-save-baseline", "a baseline must hold every "
         "replicate of every condition for later runs to pair with, and a sequential run "
         "stops conditions early; save a baseline from a run without --prove-sequential"),
        ("prove_update_baseline", "--prove-update-baseline", "a baseline must hold every "
         "replicate of every condition for later runs to pair with, and a sequential run "
         "stops conditions early; save a baseline from a run without --prove-sequential"),
    )
    for name, flag, why in refused:
        if getattr(opt, name, None):
            raise pytest.UsageError(f"--prove-sequential cannot be used with {flag}: {why}")


def _check_shard_options(opt: Any) -> None:
    """--prove-shard and --prove-salt: what they cannot go with, said before anything runs."""
    salt = opt.prove_salt
    if salt is not None:
        decided = [flag for name, flag in (("prove_baseline", "--prove-baseline"),
                                           ("prove_resume", "--prove-resume"),
                                           ("prove_replay", "--prove-replay"))
                   if getattr(opt, name, None)]
        if decided:
            raise pytest.UsageError(
                f"--prove-salt={salt} names the salt of a new unpaired run, but "
                f"{decided[0]} already decides it (a paired run takes its baseline's salt, a "
                "resumed or replayed run its own); drop --prove-salt")
    if opt.prove_shard is None:
        return
    index, total = opt.prove_shard
    named = f"--prove-shard={index}/{total}"
    if opt.prove_save_baseline or opt.prove_update_baseline:
        flag = "--prove-save-baseline" if opt.prove_save_baseline else "--prove-update-baseline"
        raise pytest.UsageError(
            f"{named} runs one slice of the sweep, and a baseline holds a whole sweep; drop "
            f"{flag}, join the shards with pytest-prove merge RUN... --name NAME "
            "--save-baseline BASELINE")
    if opt.prove_replay:
        raise pytest.UsageError(
            f"--prove-replay runs the items you select on the seeds they had, whichever shard "
            f"ran them; drop {named}")
    if salt is None and not opt.prove_baseline and not opt.prove_resume:
        raise pytest.UsageError(
            f"{named}: the shards of one sweep must share one salt, or their runs cannot be "
            "merged into one; pass the same --prove-salt=WORD to every shard (in CI, e.g. "
            "--prove-salt=sweep-$GITHUB_RUN_ID) or pair them all with --prove-baseline NAME "
            "(they take its salt)")


def _check_resumed_shard(resume: Run, asked: tuple[int, int] | None) -> None:
    """A shard's run is resumed as the same shard; a whole run is not resumed as a shard."""
    found = resume.manifest.get("shard")
    held = (found.get("index"), found.get("count")) if isinstance(found, dict) else None
    if held == asked:
        return
    if held is None:
        raise pytest.UsageError(
            f"run {resume.name!r} ran the whole sweep, not a shard; resume it without "
            "--prove-shard")
    raise pytest.UsageError(
        f"run {resume.name!r} is shard {held[0]}/{held[1]} of its sweep; resume it with "
        f"--prove-shard={held[0]}/{held[1]}")


#: How many xdist worker sessions this process has configured: more than one only when an
#: execnet socket server is used again (xdist starts every other kind of worker afresh).
_WORKER_SESSIONS = [0]


def _reused_worker() -> str | None:
    """Why a worker whose process already ran a session refuses to run this one, else None.

    execnet's socket server runs each connection's worker in its own process and keeps the
    modules it imported: the rollouts would run as they were imported the first time, not as
    their files read now, and the verdict would be about code no longer there."""
    _WORKER_SESSIONS[0] += 1
    if _WORKER_SESSIONS[0] == 1:
        return None
    return ("this xdist worker's process already ran a pytest session: an execnet socket "
            "server keeps its process, and the modules it imported, from one run to the "
            "next, so the rollouts could run as they were imported then rather than as "
            "their files read now. Start a fresh socket server for each run (see "
            "docs/scale.md, Remote workers)")


def _other_version(controller: str | None) -> str | None:
    """Why a worker whose pytest-prove is not the controller's refuses to run, else None:
    a remote host can have another one installed, and the episodes it sent would then be
    made by one version's rules and checked, stored and compared by another's."""
    import pytest_prove

    mine = pytest_prove.__version__
    if controller == mine:
        return None
    theirs = ("a pytest-prove that sends no version (older than this one)"
              if controller is None else f"pytest-prove {controller}")
    wanted = "" if controller is None else f" (pip install pytest-prove=={controller})"
    return (f"this xdist worker runs pytest-prove {mine} and the controller {theirs}: the "
            "episodes it sent would be made by one version's rules and stored by another's. "
            f"Install the same pytest-prove on every host the workers run on{wanted}")


#: Options a replay refuses: it stores nothing, compares nothing (so it has no report), and
#: runs each replicate as it ran.
_NOT_WITH_REPLAY = (("prove_baseline", "--prove-baseline"), ("prove_resume", "--prove-resume"),
                    ("prove_save_baseline", "--prove-save-baseline"),
                    ("prove_update_baseline", "--prove-update-baseline"),
                    ("prove_name", "--prove-name"), ("prove_replicates", "--prove-replicates"),
                    ("prove_concurrency", "--prove-concurrency"),
                    ("prove_report", "--prove-report"))


def _replayed(config: pytest.Config, store: Store, opt: Any) -> Run | None:
    """The run --prove-replay names, or a usage error saying what is wrong."""
    if opt.prove_replay is None:
        return None
    clash = [flag for name, flag in _NOT_WITH_REPLAY if getattr(opt, name, None)]
    if clash:
        raise pytest.UsageError(
            f"--prove-replay={opt.prove_replay} runs episodes of that run again on their own "
            f"seeds and stores nothing, so it takes no {' or '.join(clash)}; drop "
            f"{'it' if len(clash) == 1 else 'them'}, or drop --prove-replay")
    try:
        return store.open(opt.prove_replay)
    except StoreError as exc:
        raise pytest.UsageError(f"--prove-replay: {exc}") from None


def _chaos_references(baseline: Run | None, resume: Run | None,
                      settings: Settings) -> list[Any]:
    """The runs this run's faults are checked against at collection (see Settings)."""
    from ..declare.chaos import chaos_of

    found: list[Any] = []
    if resume is not None:
        found.append([f"run {resume.name}", chaos_of(resume.manifest.get("rollouts")), True])
    if baseline is not None and not settings.chaos_asked:
        found.append([f"baseline {baseline.name}",
                      chaos_of(baseline.manifest.get("rollouts")), False])
    return found


def _replicates_of(run: Run) -> dict[str, int]:
    """Each rollout's replicates in ``run``, so that a replay's items have the ids they had."""
    found = {}
    for rollout_id, info in (run.manifest.get("rollouts") or {}).items():
        declaration = (info or {}).get("declaration") if isinstance(info, dict) else None
        total = declaration.get("replicates") if isinstance(declaration, dict) else None
        if isinstance(total, int) and total >= 1:
            found[str(rollout_id)] = total
    return found


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


def _refuse_space_form(config: pytest.Config) -> None:
    """Stop before anything runs when a separate option value may have moved the rootdir."""
    import os
    import shlex

    params = config.invocation_params
    args = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *params.args]
    problem = space_form_problem(args, value_options=VALUE_OPTIONS, path_options=PATH_OPTIONS,
                                 invocation_dir=params.dir)
    if problem is not None:
        raise pytest.UsageError(problem)


def _done_keys(episodes: Any) -> set[tuple[str, str, int]]:
    """Replicates a resumed run needs no more: those that ended (errors are run again)."""
    done = set()
    for record in episodes:
        error = record.get("error")
        if error is None or error.get("kind") == "no_outcome":
            done.add((record["rollout"], record["condition_key"], int(record["replicate"])))
    return done


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
    prove = config.stash.get(SESSION_KEY, None)
    if prove is not None:
        prove.run.writer.release()  # held from the first episode until the session ends
        del config.stash[SESSION_KEY]
    disown_all(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    return (yield from calls.report_of(item, call))


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


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    prove = config.stash.get(SESSION_KEY, None)
    if prove is None:
        return
    verbosity = config.get_verbosity()
    # -q: the verdict, why the gate failed, and where things were written; -v: every row.
    lines = prove.summary_lines(verbose=verbosity > 0, quiet=verbosity < 0)
    if not lines:
        return
    terminalreporter.section("pytest-prove")
    for line in lines:
        terminalreporter.write_line(line)
