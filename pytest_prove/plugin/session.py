"""The controller: the one process that writes the store and decides the verdict.

Without xdist this is the only process.  With xdist, workers run rollouts and send each
episode with its test report; this object hands their episodes to the run's
:class:`~pytest_prove.store.recorder.RunRecorder`, stores crashed workers' episodes as
errored, and at the end reviews the run against its baseline (with the command line's
:func:`pytest_prove.review.review`), saves baselines and sets the exit status; a failed
gate becomes reports in :mod:`.gate`, the words are in :mod:`pytest_prove.report.session`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import pytest

from .. import wire
from ..declare.prices import Prices
from ..declare.targets import declares_targets
from ..record import fold_attempts, identity
from ..running.runner import Identity, error_record
from ..store import Run, Store
from ..store.arms import arms_of
from ..store.baselines import BaselineNote
from ..store.recorder import RunRecorder
from . import capture
from .aa import TwinRun, spent_with
from .budget import Budget, TokenCap, controller_budget, price_metrics
from .capture import CaptureManager
from .gate import GateReports
from .report_files import write_reports
from .salts import remember_failed
from .settings import Settings
from .state import DESIGN_NOTE_KEY, PLAN_FAILS_KEY, SELECTED_KEY, own, plan_data

if TYPE_CHECKING:
    from ..review import Review
    from .salts import FailedSalt
    from .sequential import SequentialControl

__all__ = ["SESSION_KEY", "SESSION_NAME", "Outcome", "ProveSession"]

#: Why the session stopped when the store failed (the message itself is in the summary).
_STORE_STOP = "the store could not be written, so no new item started (see pytest-prove above)"


@final
@dataclass(slots=True)
class Outcome:
    """What the end of the session concluded."""

    run: Run | None = None
    review: Review | None = None
    refusal: str | None = None
    failed_gate: bool = False
    notes: tuple[str, ...] = ()
    #: The baselines asked for and not saved: each one's line (also among ``notes``).
    not_saved: tuple[str, ...] = ()
    #: --prove-update-baseline over a baseline declared otherwise: why nothing was compared
    #: (the baseline is replaced, or the session fails with the reason it was not).
    declaration_changed: str | None = None
    #: Without a baseline: the run read against its targets (plugin/targets.py), the rows
    #: that fail the gate, the reasons it cannot vouch for some, what it spared.
    targets: Any = None
    target_gate: tuple[Any, ...] = ((), [], [])


@final
class ProveSession:
    """Controller state: registered as the plugin ``prove_session``."""

    def __init__(self, config: pytest.Config, settings: Settings, store: Store, *,
                 name: str | None, baseline: Run | None, resume: Run | None,
                 save_baseline: str | None, update_baseline: bool,
                 asked: Mapping[str, Any], replay: Run | None = None) -> None:
        self.config = config
        self.settings = settings
        self.store = store
        self.baseline = baseline
        self.save_baseline = save_baseline
        self.update_baseline = update_baseline
        self.asked = asked  # review()'s events, fail_on and missing, as the options say
        self.pending: dict[str, list[dict[str, Any]]] = {}
        #: Episodes of attempts pytest-rerunfailures runs again, by identity, until the
        #: final attempt's ending is stored with them (see on_report).
        self.rerun: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        self.pytest_session: pytest.Session | None = None
        self.outcome = Outcome()
        self.gate_reports = GateReports()  # a failed gate as reports pytest counts
        self._ended_run: Run | None = None  # see ended_run()
        self.design_failure: str | None = None  # set when xdist workers refused the design
        # --prove-replay: the run replayed, and the episodes this session ran (not stored).
        self.replay = replay
        self.replayed: list[dict[str, Any]] = []
        #: Rollout items that ran (for --lf's salt) and stored no episode through the gate's
        #: list (their setup failed, their worker crashed, their attempt is rerun): the
        #: others are in ``gate_reports``, once (see :meth:`ran_items`).
        self._ran_other: set[str] = set()
        self.last_failed: FailedSalt | None = None  # --lf/--ff: the failures' salt taken
        self.run = RunRecorder(store, name=name, salt=settings.salt, baseline=baseline,
                               resume=resume, on_failure=lambda: self._stop(_STORE_STOP))
        self.budget = Budget(prices=Prices(), cap=TokenCap())  # see start()
        self.aa = TwinRun() if settings.aa else None  # --prove-aa: see plugin/aa.py
        self.capture: CaptureManager | None = None  # what instrumentors ran; see start()
        self.sequential: SequentialControl | None = None  # --prove-sequential; see start()
        #: The variables and packages the run records (see plugin/environment.py; start()).
        self.recorded: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self.on_stored: Callable[[list[dict[str, Any]]], None] | None = None  # live.py

    def start(self) -> None:
        """Build and register what the session owns besides itself: the budget (prices, the
        token cap and its watch) and the capture manager."""
        from .environment import check_resumed, recorded_names

        self.recorded = recorded_names(self.config)  # a bad name: refused before any test
        if self.run.writer.existing:
            check_resumed(self.run.writer.manifest, self.recorded[0])
        self.budget = controller_budget(self.config,
                                        spent=lambda: spent_with(self.run.spent, self.aa))
        self.capture = capture.register(self.config, self.run)
        from .sequential import sequential_possible

        if sequential_possible(self.config) and self.replay is None:
            from .sequential import SequentialControl

            self.sequential = SequentialControl(self.config, self.run, self.baseline,
                                                self.settings, self.asked)
            own(self.config, self.sequential, "prove_sequential")

    def stamp(self) -> None:  # once: the recorder keeps the first
        self.run.stamp(self.config.rootpath, *self.recorded)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if (self.config.stash.get(SELECTED_KEY, None) or self.run.writer.existing
                or self.config.pluginmanager.has_plugin("dsession")):
            # Before any test can change it, what made the run (git, package metadata) in
            # a session that may store episodes; one without rollouts pays nothing for it.
            self.stamp()
        # In one process the plan is known now (under xdist it comes with each worker's
        # first report): in the manifest from the first episode on, a killed run keeps it.
        self.run.merge_plan(plan_data(self.config))

    # ---- from reports (through reports.SessionReports)

    def _store(self, records: Any) -> None:
        if self.rerun:
            records = [fold_attempts(r, self.rerun.pop(identity(r)))
                       if identity(r) in self.rerun else r for r in records]
        if self.aa is not None:  # --prove-aa: each replicate's twin goes to its own run
            records = self.aa.split(records)
        if self.replay is not None:  # a replay stores nothing; its summary reads them
            self.replayed.extend(records)
            return
        records = list(records)  # read twice: priced, then stored
        self.stamp()  # once: at the loop's start unless the session selected no rollout
        price_metrics(records, self.run.rollouts, self.budget.prices)
        stored = self.run.store(records)
        if stored and self.budget.watch is not None:
            self.budget.watch.add(stored)
        if stored and self.sequential is not None:
            self.sequential.add(stored)
        if stored and self.on_stored is not None:
            self.on_stored(stored)

    def _stop(self, message: str) -> None:
        """Start no new item: in this process, and under xdist in the scheduler."""
        if self.pytest_session is not None and not self.pytest_session.shouldstop:
            self.pytest_session.shouldstop = message
        dsession = self.config.pluginmanager.get_plugin("dsession")
        if dsession is not None and not getattr(dsession, "shouldstop", False):
            dsession.shouldstop = message

    def on_report(self, report: pytest.TestReport) -> None:
        if not wire.carries(report):
            return  # not a rollout's, or a rollout's setup that ran here: nothing to read
        if report.when == "call":
            # Stored, then dropped from the report, which pytest keeps to the end.
            data = wire.take(report, "episodes", "capture")
            status = data.get("capture")
            if status is not None and self.capture is not None:
                self.capture.record_status(status)  # spans with usage no episode took
            episodes = data.get("episodes")
            if episodes is not None:
                self.pending.pop(report.nodeid, None)
                for episode in episodes:  # the item that ran it: what replays it
                    episode.setdefault("item", report.nodeid)
                if str(report.outcome) == "rerun":  # not among pytest's own outcomes
                    self._ran_other.add(report.nodeid)
                    # pytest-rerunfailures runs the item again, on the same seeds: each
                    # replicate is stored once, with its final attempt's ending, its
                    # number of attempts, and how the earlier ones ended.
                    for episode in episodes:
                        self.rerun.setdefault(identity(episode), []).append(episode)
                    return
                self._store(episodes)
                self.gate_reports.saw(report, episodes)
                if not episodes:
                    self._ran_other.add(report.nodeid)
            return
        if report.when == "teardown":
            # Replicates the window ran ahead of items the session stopped before reaching
            # (plugin/window.py), each naming its own item: stored once, here.
            ahead = wire.take(report, "episodes").get("episodes")
            if ahead:
                self._store(ahead)
            return
        if report.when != "setup":
            return
        data = wire.take(report, "plan", "pending")
        status = data.get("capture")
        if status is not None and self.capture is not None:
            self.capture.record_status(status)
        rollout = data.get("rollout")
        if rollout is not None:
            self.run.announce(rollout)
        sent = data.get("plan")
        if sent is not None:
            self.run.merge_plan(sent)
        pending = data.get("pending")
        if pending is None:
            return
        if report.passed:
            self.pending[report.nodeid] = pending
        elif report.skipped:
            if self.budget.capped is None:  # skipped by the user, not by the token cap
                for p in pending:
                    if self.sequential is not None and self.sequential.is_decided(
                            str(p["rollout"]), str(p["condition_key"])):
                        continue  # stopped by its decision: not left out
                    self.run.skipped.setdefault(p["rollout"], set()).add(p["condition_key"])
        elif report.failed:
            # The item's setup failed: its replicates ran no rollout, but they ended.
            self._ran_other.add(report.nodeid)
            message = str(report.longreprtext).strip().splitlines()
            self._store({**error_record(Identity.from_json(p), "setup", "SetupError",
                                        message[-1] if message else "setup failed"),
                         "item": report.nodeid} for p in pending)

    def on_crash(self, nodeid: str, message: str) -> None:
        """A worker died while running ``nodeid``: its episodes end as errored."""
        pending = self.pending.pop(nodeid, [])
        if pending:
            self._ran_other.add(nodeid)
        self._store({**error_record(Identity.from_json(p), "worker_crash", "WorkerCrash",
                                    message), "item": nodeid} for p in pending)

    # ---- the end

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """Close the run, review it against the baseline, save baselines, set the exit
        status."""
        from ..report.session import no_rollout_ran

        outcome = self.outcome = Outcome()
        if self.rerun:
            # Attempts whose rerun never ended (the session stopped first): the last one
            # seen is the replicate's ending.
            unfinished, self.rerun = list(self.rerun.values()), {}
            self._store(fold_attempts(found[-1], found[:-1]) if len(found) > 1 else found[0]
                        for found in unfinished)
        if self.design_failure is not None:
            outcome.refusal = self.design_failure
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        writer = self.run.writer
        if self.run.failure is not None and not writer.created:
            outcome.refusal = f"{self.run.failure} (nothing was stored)"
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if not writer.created:
            # A usage error (a refusal at collection) says why nothing ran; a second reason
            # that names no cause would only hide it.
            if (self.baseline is not None and not self.settings.plan_only
                    and not self.config.option.collectonly
                    and exitstatus != pytest.ExitCode.USAGE_ERROR):
                outcome.refusal = no_rollout_ran(self.baseline.name,
                                                 session.shouldfail or session.shouldstop)
                outcome.failed_gate = True
                self._fail(session)
            report = self.config.getoption("prove_report", None)
            if report is not None and not self.settings.plan_only:
                outcome.notes = (f"no report written to {report}: no rollout ran, so there "
                                 "is no run to report on",)
            return
        resumed_nothing = (writer.existing and writer.written == 0
                           and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED)
        if self.sequential is not None and self.sequential.looks is not None:
            looks = self.sequential.looks
            looks.finish()
            self.run.stopped = {k for k in looks.taken if looks.decided(k) is not None}
            self.run.writer.manifest["sequential"] = looks.manifest()  # written by close()
        status = self.run.close(
            interrupted=exitstatus in (pytest.ExitCode.INTERRUPTED,
                                       pytest.ExitCode.INTERNAL_ERROR),
            capped=None if self.budget.capped is None else {
                "message": self.budget.capped, "cap": self.budget.cap.to_json(),
                "spent": dict(self.run.spent)},
            prices=self.budget.prices.to_json() if self.budget.prices else None)
        notes: list[str] = []
        if resumed_nothing and status == "complete":
            notes.append(f"nothing left to run: run {writer.manifest['name']!r} already "
                         "holds every planned replicate")
            session.exitstatus = pytest.ExitCode.OK
        if self.run.failure is not None:
            outcome.refusal = (f"{self.run.failure} (the {len(self.run.states)} episodes "
                               "stored before it are kept)")
            unsaved = self._not_saved(str(writer.manifest["name"]))
            outcome.notes = tuple(notes + [n.text for n in unsaved])
            outcome.not_saved = tuple(n.text for n in unsaved)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if self.baseline is not None and self.settings.shard is not None:
            index, total = self.settings.shard
            notes.append(
                f"shard {index}/{total}: paired with baseline {self.baseline.name!r} (its salt) "
                f"but not compared here: a slice holds about 1/{total} of each condition's "
                "replicates, and the gate is decided once, on the whole sweep. When every "
                "shard's run is in one store: pytest-prove merge RUN... --name NAME, then "
                f"pytest-prove check baseline:{self.baseline.name} NAME")
        elif self.settings.shard is None and arms_of(writer.manifest):
            self._review_arms(outcome, notes)  # the gate; a baseline's drift said, not gated
        elif self.baseline is not None:
            self._review(outcome)
        if self.aa is not None:
            notes.extend(self.aa.finish(self.store, self.run, self.ended_run(),
                                        interrupted=status != "complete", asked=self.asked,
                                        q=self.settings.q, max_mde=self.settings.max_mde))
        if declares_targets(writer.manifest) and self.settings.shard is None:
            from .targets import run_gate

            outcome.run = self.ended_run()
            outcome.targets, *gate = run_gate(outcome.run, self.settings,
                                              str(self.asked.get("missing", "test")))
            outcome.target_gate = tuple(gate)
            # Beside a comparison (a baseline's, or the arms'), either fails the gate.
            outcome.failed_gate = outcome.failed_gate or bool(gate[0] or gate[1])
        notes.extend(self._fixed_note())
        design_note = self.config.stash.get(DESIGN_NOTE_KEY, None)
        if design_note and self.baseline is not None:
            notes.append(design_note)  # a design that passed only thanks to the baseline's rates
        if outcome.declaration_changed is not None:
            notes.append(outcome.declaration_changed)
        saved = self._save_baselines(outcome)
        notes.extend(n.text for n in saved)
        outcome.notes = tuple(notes)
        outcome.not_saved = tuple(n.text for n in saved if not n.saved)
        write_reports(self, outcome)
        if self.budget.capped is not None:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if outcome.refusal is not None or outcome.failed_gate or outcome.not_saved:
            self._fail(session)

    def end(self, session: pytest.Session, exitstatus: int) -> None:
        """The end of the session (``pytest_sessionfinish``): finish and gate the run, make
        a failed gate reports pytest counts, and keep the salt --lf reruns its failures on."""
        config = self.config
        self.run.merge_plan(plan_data(config))
        self.finish(session, exitstatus)
        self._gate_reports(session)
        if self.ran_any:  # what --lf will rerun, and on which salt it failed
            remember_failed(config, salt=self.settings.salt, run=self.run_label(),
                            ran=self.ran_items())
        if (self.settings.plan_only
                and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = (pytest.ExitCode.USAGE_ERROR
                                  if config.stash.get(PLAN_FAILS_KEY, False)
                                  else pytest.ExitCode.OK)

    def _gate_reports(self, session: pytest.Session) -> None:
        """A session that fails for pytest-prove's reasons fails as pytest counts failures."""
        outcome = self.outcome
        if session.exitstatus != pytest.ExitCode.TESTS_FAILED or self.design_failure is not None:
            if outcome.review is not None and not outcome.failed_gate:
                self.gate_reports.clear_for_lf(session.config)
            return
        review = outcome.review
        reasons = [r for r in (outcome.refusal, *(review.gate.reasons if review else ()),
                               *outcome.target_gate[1], *outcome.not_saved,
                               self.budget.capped) if r is not None]
        if outcome.failed_gate or reasons:
            self.gate_reports.emit(session.config, review if outcome.failed_gate else None,
                                   reasons, targets=outcome.target_gate[0],
                                   run=outcome.run)
            self.gate_reports.close_progress_line(session.config)
        elif review is not None:
            self.gate_reports.clear_for_lf(session.config)

    @staticmethod
    def _fail(session: pytest.Session) -> None:
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _review(self, outcome: Outcome) -> None:
        # The engine (and scipy) is imported only when there is something to compare.
        from ..declare.spec import SpecError
        from ..review import CaseMixError, DeclarationError, review

        assert self.baseline is not None
        run = outcome.run = self.ended_run()
        try:
            outcome.review = review(
                self.baseline, run, q=self.settings.q, max_mde=self.settings.max_mde,
                sequential=None if self.sequential is None else self.sequential.looks,
                **self.asked)
        except DeclarationError as exc:
            if self.update_baseline:
                # The user reviewed the new declaration and replaces the baseline with it:
                # nothing can be compared, and the baseline is saved (or refused) below.
                outcome.declaration_changed = str(exc).replace(
                    "refused to compare", "not compared", 1)
                return
            outcome.refusal = str(exc)
            return
        except (CaseMixError, SpecError, ValueError) as exc:
            outcome.refusal = str(exc)
            return
        outcome.failed_gate = outcome.review.gate.failed
        design_note = self.config.stash.get(DESIGN_NOTE_KEY, None)
        if design_note:  # the reports say it too (a design that rests on the baseline's rates)
            outcome.review = dataclasses.replace(
                outcome.review, notes=(*outcome.review.notes, design_note))

    def _review_arms(self, outcome: Outcome, notes: list[str]) -> None:
        """The arms against the reference arm: the review and gate (docs/arms.md)."""
        from .arms import review_arms

        outcome.run = self.ended_run()
        outcome.review, outcome.refusal, arm_notes = review_arms(
            outcome.run, self.settings, self.asked, baseline=self.baseline)
        outcome.failed_gate = outcome.review is not None and outcome.review.gate.failed
        notes.extend(arm_notes)

    def _fixed_note(self) -> list[str]:
        """Rollouts declaring ``sequential=True`` in a session that ran every replicate (it
        saves a baseline, or has none): one line saying so and why."""
        if self.sequential is not None and self.sequential.looks is not None:
            return []
        from .sequential import fixed_because

        asked = sorted(rid for rid, info in self.run.rollouts.items()
                       if isinstance(info, dict) and isinstance(info.get("declaration"), dict)
                       and info["declaration"].get("sequential") is True)
        why = fixed_because(self.config.option) if asked else None
        if why is None:
            return []
        shown = ", ".join(asked[:5]) + (f" and {len(asked) - 5} more" if len(asked) > 5 else "")
        return [f"sequential=True ({shown}): every replicate ran, as in a fixed run: {why}"]

    def _not_saved(self, run: str) -> list[BaselineNote]:
        """The baselines asked for that a store which failed could not take, with the fix."""
        found = []
        if self.save_baseline is not None:
            found.append(f"not saved: baseline {self.save_baseline!r}: the store could not be "
                         f"written, so run {run!r} is incomplete on disk; once there is room, "
                         f"pytest --prove-resume={run} --prove-save-baseline="
                         f"{self.save_baseline} completes it and saves the baseline")
        if self.update_baseline and self.baseline is not None:
            found.append(f"not saved: baseline {self.baseline.name!r} was not updated: the "
                         f"store could not be written, so run {run!r} is incomplete on disk; "
                         f"once there is room, pytest --prove-resume={run} --prove-baseline="
                         f"{self.baseline.name} --prove-update-baseline completes it and "
                         "updates the baseline")
        return [BaselineNote(saved=False, text=text) for text in found]

    def _save_baselines(self, outcome: Outcome) -> list[BaselineNote]:
        """Save the baselines asked for, or say why not (``--prove-update-baseline`` over a
        changed declaration: whether the gate fails follows from it)."""
        from ..store.baselines import save_baseline

        settings = self.settings

        def thin(run: Run) -> str | None:
            # The engine (numpy, scipy) is imported only when a baseline is written.
            from ..review.vouch import thin_baseline

            return thin_baseline(run, q=settings.q, max_mde=settings.max_mde)

        notes = []
        gated = self.baseline is not None and self.save_baseline == self.baseline.name
        if (self.save_baseline is not None and gated and not self.update_baseline
                and (outcome.failed_gate or outcome.refusal is not None)):
            # Written over the baseline that just failed this run, the worse run would pass
            # the next gate of the same agent: accepting it is --prove-update-baseline's.
            notes.append(BaselineNote(saved=False, text=(
                f"not saved: baseline {self.save_baseline!r} is the one this run was gated "
                "against, and the gate failed; it is left as it was. To accept this run as "
                f"the new baseline on purpose, run --prove-baseline={self.save_baseline} "
                "--prove-update-baseline after review")))
        elif self.save_baseline is not None:
            notes.append(save_baseline(self.store, self.save_baseline, self.ended_run(),
                                       missing=self.run.missing(),
                                       max_errored=settings.max_errored, thin=thin))
        if self.update_baseline and self.baseline is not None and outcome.refusal is None:
            note = save_baseline(self.store, self.baseline.name, self.ended_run(),
                                 missing=self.run.missing(), replacing=self.baseline,
                                 max_errored=settings.max_errored, thin=thin)
            notes.append(note)
            if note.saved:
                # The user accepted this run as the new baseline: the comparison no longer
                # fails it; a missed target is another claim, and still does.
                outcome.failed_gate = bool(outcome.target_gate[0] or outcome.target_gate[1])
            elif outcome.declaration_changed is not None:
                outcome.failed_gate = True  # neither compared nor replaced
        return notes

    def ended_run(self) -> Run:
        """The run as stored, read back from its folder once, by the first that needs its
        episodes (a comparison, a saved baseline, the cost line)."""
        if self._ended_run is None:
            self._ended_run = self.store.read(self.run.writer.directory)
        return self._ended_run

    # ---- reports (issue 4): --prove-report, and GitHub's step summary when it is set

    @property
    def ran_any(self) -> bool:
        """Whether any rollout item ran in this session."""
        return bool(self._ran_other) or self.gate_reports.any_seen

    def ran_items(self) -> Iterator[str]:
        """The rollout items that ran in this session (an item may come twice)."""
        yield from self._ran_other
        yield from self.gate_reports.seen_ids()

    def run_label(self) -> str | None:
        """The run this session's episodes belong to: the one written, or the one replayed."""
        if self.replay is not None:
            return f"baseline:{self.replay.name}" if self.replay.is_baseline else self.replay.name
        return str(self.run.writer.manifest.get("name")) if self.run.writer.created else None

    def summary_lines(self, verbose: bool, quiet: bool = False) -> list[str]:
        from ..report.session import summary_lines
        from .arms import run_cost_lines

        if self.replay is not None:
            if self.settings.plan_only or self.config.option.collectonly:
                return []  # nothing was meant to run
            from ..declare.environment import changed_variables
            from ..report.replay import replay_lines

            return replay_lines(self.run_label() or "", self.replay.salt, self.replay.episodes,
                                self.replayed, verbose=verbose, changed=changed_variables(
                                    self.replay.manifest.get("environment")))

        ended = self.run.ended
        outcome = self.outcome
        return summary_lines(
            refusal=outcome.refusal, review=outcome.review,
            after=outcome.review.after.name if outcome.review  # an arms' run: its arm
            else None if outcome.run is None else outcome.run.name, notes=outcome.notes,
            verbose=verbose, ended=ended, manifest=self.run.writer.manifest,
            counts=self.run.counts, where=_rel(self.run.writer.directory),
            cost=run_cost_lines(self.ended_run(), self.budget.prices)
            if ended and self.run.any_tokens and not quiet else [],
            capture=([] if self.capture is None else self.capture.lines)
            + (self._fault_lines() if ended and outcome.review is None and not quiet else []),
            capped=self.budget.capped,
            suggest_baseline=(self.baseline is None and self.save_baseline is None
                              and outcome.review is None),
            quiet=quiet, targets=outcome.targets, target_gate=outcome.target_gate,
        ) + ([] if self.last_failed is None else
             [f"note: {self.last_failed.note(self.ran_items())}"])

    def _fault_lines(self) -> list[str]:
        """What chaos injected into this run, when it was not compared (a comparison's
        summary says it with the rest of what it set aside)."""
        from ..declare.chaos import chaos_of, count_faults
        from ..declare.spec import condition_label
        from ..report._format import terminal_text
        from ..report.notes import fault_text

        if not any(chaos_of(self.run.writer.manifest.get("rollouts")).values()):
            return []
        counts = count_faults(self.ended_run().episodes,
                              lambda r: condition_label(r.get("condition") or {}))
        return [f"faults injected (chaos): {fault_text(counts, terminal_text)}"] if counts \
            else []


#: The controller's session (absent on xdist workers and before configure).
SESSION_KEY = pytest.StashKey[ProveSession]()
#: The name the controller's session is registered under (``config.pluginmanager.getplugin``).
SESSION_NAME = "prove_session"


def _rel(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
