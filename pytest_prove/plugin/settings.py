"""The options of a session and of each xdist worker: declared, read and checked.

:mod:`.options` declares them (``pytest_addoption``). :meth:`Settings.from_config`
reads them all (``pytest_configure``) and refuses, as a usage error before anything runs, a
value out of its range and every combination of options a run cannot keep its word with.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, final

import pytest

from .. import wire
from ..config import values
from ..config.ini import FROM_INI, INI, given_or_ini
from ..config.paths import space_form_problem
from ..config.values import (
    DEFAULT_FAIL_ON,
    gate_fails_on,
)
from ..declare.metrics import MetricError, merge_directions
from ..declare.spec import NO_OUTCOME_EVENT, Declaration, SpecError
from ..declare.targets import Target
from ..declare.targets_of import with_targets
from ..record import Missing
from .aa import check_twin_options
from .options import PATH_OPTIONS, VALUE_OPTIONS
from .worker_refusals import other_version, reused_worker

__all__ = ["NOT_SEQUENTIAL", "Settings", "sequential_of"]

def _ini(config: pytest.Config, name: str) -> Any:
    """Ini value ``name`` as the table reads it (a bool one as pytest reads it), or a usage
    error naming it."""
    if INI[name].kind == "bool":
        return _ini_switch(config, name)
    try:
        return INI[name].value(str(config.getini(name)))
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(f"ini option {name}: {exc}") from None


def _ini_switch(config: pytest.Config, name: str) -> bool:
    """A bool ini value as pytest reads it, or a usage error naming it (pytest's own names
    neither the option nor what it expects, and pytest 8's is a ValueError: a traceback)."""
    try:
        return bool(config.getini(name))
    except (ValueError, pytest.UsageError) as exc:
        raise pytest.UsageError(f"ini option {name}: expected true or false ({exc})") from None


@final
@dataclass(slots=True)
class Settings:
    """The options every process needs (the controller's and each xdist worker's)."""

    store: Path
    salt: str = ""
    replicates: int | None = None
    concurrency: int = 1
    done: frozenset[tuple[str, str, int]] = frozenset()
    shard: tuple[int, int] | None = None
    q: float = 0.05
    max_mde: float = 0.20
    margin: float | None = None  # --prove-margin
    allow_underpowered: bool = False
    #: --prove-max-errored: the share of a condition's episodes without an outcome a run
    #: saved as a baseline may hold.
    max_errored: float = 0.25
    paired: bool = False  # a baseline is given, so the comparison will be paired
    sequential: bool = False  # --prove-sequential: stop each condition once it is decided
    plan_only: bool = False
    episode_timeout: float | None = None  # --prove-episode-timeout: beats every other
    default_timeout: float | None = None  # ini prove_episode_timeout: below timeout=
    #: The built-in default for a sync rollout with none of the above (config/values.py's
    #: DEFAULT_EPISODE_TIMEOUT; None under --pdb or --trace). 0 anywhere: no timeout.
    builtin_timeout: float | None = None
    #: --prove-replay: the replayed run's replicates by rollout id (None: not a replay).
    replay: dict[str, int] | None = None
    is_worker: bool = False
    plan_sent: bool = False  # an xdist worker sent its plan with a report
    #: An xdist worker's reason to run nothing, found before collection (its process ran a
    #: session before this one); the controller says it as it says the design check's.
    worker_refusal: str | None = None
    #: --prove-chaos (or ini prove_chaos): inject the faults rollouts declare; and whether
    #: --prove-chaos was given, which asks for a comparison with a baseline whose chaos
    #: differs (docs/chaos.md).
    chaos: bool = True
    chaos_asked: bool = False
    #: What collection checks this run's faults against, before anything runs: [name,
    #: {rollout id: chaos or None}, strict] for the baseline (unless --prove-chaos asks for
    #: a comparison with other faults) and the resumed run (strict: its faults are its own).
    chaos_references: list[Any] = field(default_factory=list)
    #: What collection checks this run's arms against: ["baseline" or "run", its name,
    #: {rollout id: its arms, or None for a rollout without}] for the baseline and the
    #: resumed run (docs/arms.md).
    arm_references: list[Any] = field(default_factory=list)
    _chaos_off: dict[int, tuple[Declaration, Declaration]] = field(default_factory=dict)
    _metrics_of: dict[int, tuple[Declaration, Declaration]] = field(default_factory=dict)
    #: Rollouts whose declaration this process has sent with a report (once each).
    announced: set[str] = field(default_factory=set)
    #: What the gate reads (the controller's): --prove-event, --prove-missing, the verdicts
    #: it fails on (--prove-fail-on over the defaults) and the words asked for.
    events: tuple[str, ...] | None = None
    missing: Missing = "test"
    fail_on: frozenset[str] = DEFAULT_FAIL_ON
    fail_on_asked: frozenset[str] | None = None
    #: --prove-metrics (or ini prove_metrics): metrics every rollout reports, with the
    #: direction that is better, and where they were said.
    metrics: tuple[tuple[str, str], ...] = ()
    metrics_from: str = "--prove-metrics"
    #: --prove-metric-margin (or ini prove_metric_margin): each metric's margin.
    metric_margin: dict[str, tuple[float, bool]] = field(default_factory=dict)
    #: --prove-target (or ini prove_targets): targets for every rollout declaring their
    #: event, and where they were said.
    targets: tuple[Target, ...] = ()
    targets_from: str = "--prove-target"
    #: --prove-agreement-from: the runs whose twins the paired design check reads.
    agreement_from: tuple[str, ...] = ()
    #: --prove-design-rates (ini prove_design_rates): the design check reads each test's
    #: base rate from the baseline (within its 99% interval), not every rate.
    design_rates: bool = False
    aa: bool = False  # --prove-aa: every replicate twice on its seed (plugin/aa.py)
    _targets_of: dict[int, tuple[Declaration, Declaration]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        """This process's settings, read from its options and ``prove_*`` ini values; a usage
        error, before anything runs, for a value out of its range and for options that cannot
        go together. An xdist worker's also hold what its controller decided and sent."""
        opt = config.option
        found = given_or_ini([(name, getattr(opt, name)) for name in FROM_INI],
                             lambda name: _ini(config, name))
        margin = found["prove_margin"]
        asked_words = found["prove_fail_on"]
        metric_margin = (opt.prove_metric_margin if opt.prove_metric_margin is not None
                         else _ini(config, "prove_metric_margin"))
        default_timeout = _ini(config, "prove_episode_timeout")
        store_root = Path(opt.prove_store) if opt.prove_store else (
            config.rootpath / _ini(config, "prove_store"))
        _check_options(opt)
        sequential = sequential_of(config)
        if sequential:
            _check_sequential_options(opt)
        if opt.prove_plan:
            # The plan is read on one process: no workers are started for it.
            opt.dist = "no"
        settings = cls(
            store=store_root.resolve(), replicates=opt.prove_replicates,
            concurrency=opt.prove_concurrency or 1, q=found["prove_q"],
            max_mde=found["prove_max_mde"], margin=margin,
            allow_underpowered=bool(found["prove_allow_underpowered"]),
            max_errored=found["prove_max_errored"],
            paired=opt.prove_baseline is not None or opt.prove_resume is not None,
            sequential=sequential, plan_only=opt.prove_plan,
            episode_timeout=opt.prove_episode_timeout, default_timeout=default_timeout,
            builtin_timeout=_builtin_timeout(config), shard=opt.prove_shard,
            chaos=found["prove_chaos"], chaos_asked=opt.prove_chaos is not None,
            events=tuple(opt.prove_event) or None, missing=found["prove_missing"],
            fail_on=gate_fails_on(asked_words,
                                  margin=margin is not None or bool(metric_margin)),
            fail_on_asked=asked_words, metric_margin=metric_margin,
            agreement_from=opt.prove_agreement_from or (), aa=bool(opt.prove_aa),
            design_rates=(opt.prove_design_rates if opt.prove_design_rates is not None
                          else _ini(config, "prove_design_rates")))
        if opt.prove_target:
            settings.targets = tuple(opt.prove_target)
        else:
            settings.targets, settings.targets_from = (_ini(config, "prove_targets"),
                                                       "ini prove_targets")
        if opt.prove_metrics is not None:
            settings.metrics = opt.prove_metrics
        else:
            settings.metrics, settings.metrics_from = (_ini(config, "prove_metrics"),
                                                       "ini prove_metrics")
        workerinput = getattr(config, "workerinput", None)
        if workerinput is None:
            _refuse_space_form(config)
            _check_replay_options(opt)
            return settings
        # An xdist worker: the controller decided the salt and what is already done.
        sent = wire.worker_input(workerinput)
        settings.is_worker = True
        settings.salt = sent["salt"]
        settings.done = sent["done"]
        settings.replay = sent["replay"]
        settings.chaos_references = sent["chaos"]
        settings.arm_references = sent["arms"]
        settings.worker_refusal = reused_worker() or other_version(sent["version"])
        return settings

    def asked(self) -> dict[str, Any]:
        """What the session's review is asked (``review()``'s keywords), as the options say."""
        return {"events": self.events, "fail_on": self.fail_on, "missing": self.missing,
                "margin": self.margin, "chaos_differs": self.chaos_asked,
                # too-small named on purpose beats --prove-allow-underpowered
                "allow_underpowered": self.allow_underpowered
                and "too-small" not in (self.fail_on_asked or ()),
                "max_errored": self.max_errored,
                **({"metric_margin": self.metric_margin} if self.metric_margin else {})}

    def replicates_for(self, rollout_id: str, declared: int) -> int:
        """A rollout's replicates in this session: a replayed run's (so that every item has
        the id it had there), else --prove-replicates, else the declaration's."""
        if self.replay is not None and rollout_id in self.replay:
            return self.replay[rollout_id]
        return self.replicates or declared

    def declared(self, declaration: Declaration, name: str = "") -> Declaration:
        """The declaration a rollout runs with in this session: with the metrics of
        --prove-metrics (ini prove_metrics) beside its own, and without its chaos when
        --prove-chaos is off (so that the manifest says no fault was injected)."""
        if self.metrics:
            declaration = self._with_metrics(declaration, name)
        if self.targets:
            declaration = self._with_targets(declaration)
        if self.chaos or declaration.chaos is None:
            return declaration
        found = self._chaos_off.get(id(declaration))
        if found is None or found[0] is not declaration:
            found = (declaration, replace(declaration, chaos=None))
            self._chaos_off[id(declaration)] = found
        return found[1]

    def _with_metrics(self, declaration: Declaration, name: str) -> Declaration:
        """``declaration`` with the session's metrics added (made once per declaration); a
        metric given both directions is refused, naming the rollout."""
        found = self._metrics_of.get(id(declaration))
        if found is not None and found[0] is declaration:
            return found[1]
        try:
            merged = merge_directions(
                ("the rollout's metrics= or its sweep spec's [metrics]",
                 declaration.metric_directions.items()),
                (self.metrics_from, self.metrics))  # type: ignore[arg-type]
        except MetricError as exc:
            raise SpecError(f"{name or declaration.rollout_id or 'a rollout'}: {exc}") from None
        made = replace(declaration, metrics=merged)
        self._metrics_of[id(declaration)] = (declaration, made)
        return made

    def _with_targets(self, declaration: Declaration) -> Declaration:
        """``declaration`` with the session's targets it can take (made once per one)."""
        found = self._targets_of.get(id(declaration))
        if found is None or found[0] is not declaration:
            found = (declaration, with_targets(declaration, self.targets))
            self._targets_of[id(declaration)] = found
        return found[1]

    def concurrency_for(self, declared: int | None) -> int:
        """Replicates an item runs: one in a replay (a debugger stops in this thread), else
        the declaration's concurrency=, else --prove-concurrency."""
        return 1 if self.replay is not None else (declared or self.concurrency)


def _check_options(opt: Any) -> None:
    """The options that cannot go together in any run, said before anything runs."""
    if NO_OUTCOME_EVENT in opt.prove_event:
        raise pytest.UsageError(
            f"--prove-event={NO_OUTCOME_EVENT!r} names no outcome: episodes that end without "
            "one are tested anyway, beside the events you pick (--prove-missing=ignore "
            "leaves them out)")
    check_twin_options(opt)  # --prove-aa, --prove-agreement-from: plugin/aa.py
    if opt.prove_update_baseline and not opt.prove_baseline:
        raise pytest.UsageError(
            "--prove-update-baseline replaces the baseline named by --prove-baseline; "
            "add --prove-baseline NAME (or use --prove-save-baseline NAME for a new one)")
    _check_shard_options(opt)


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


#: Options a sequential run refuses (see _check_sequential_options): ini prove_sequential is not
#: taken with them, the flag is refused.
NOT_SEQUENTIAL = ("prove_resume", "prove_shard", "prove_save_baseline", "prove_update_baseline",
                  "prove_replay")


def sequential_of(config: pytest.Config) -> bool:
    """--prove-sequential; or ini ``prove_sequential`` when the run has a baseline and none
    of the options a sequential run refuses (so the ini setting never blocks saving a
    baseline or resuming a run: those run every replicate)."""
    opt = config.option
    if opt.prove_sequential:
        return True
    return bool(_ini_switch(config, "prove_sequential") and opt.prove_baseline
                and not any(getattr(opt, name, None) for name in NOT_SEQUENTIAL))


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


#: Options a replay refuses: it stores nothing, compares nothing (so it has no report), and
#: runs each replicate as it ran.
_NOT_WITH_REPLAY = (("prove_baseline", "--prove-baseline"), ("prove_resume", "--prove-resume"),
                    ("prove_save_baseline", "--prove-save-baseline"),
                    ("prove_update_baseline", "--prove-update-baseline"),
                    ("prove_name", "--prove-name"), ("prove_replicates", "--prove-replicates"),
                    ("prove_concurrency", "--prove-concurrency"),
                    ("prove_report", "--prove-report"))


def _check_replay_options(opt: Any) -> None:
    """--prove-replay: the options it does not take, said before the run is opened."""
    if opt.prove_replay is None:
        return
    clash = [flag for name, flag in _NOT_WITH_REPLAY if getattr(opt, name, None)]
    if clash:
        raise pytest.UsageError(
            f"--prove-replay={opt.prove_replay} runs episodes of that run again on their own "
            f"seeds and stores nothing, so it takes no {' or '.join(clash)}; drop "
            f"{'it' if len(clash) == 1 else 'them'}, or drop --prove-replay")


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
    return values.DEFAULT_EPISODE_TIMEOUT  # read here: a test shrinks it


def _refuse_space_form(config: pytest.Config) -> None:
    """Stop before anything runs when a separate option value may have moved the rootdir."""
    import shlex

    params = config.invocation_params
    args = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *params.args]
    problem = space_form_problem(args, value_options=VALUE_OPTIONS, path_options=PATH_OPTIONS,
                                 invocation_dir=params.dir)
    if problem is not None:
        raise pytest.UsageError(problem)
