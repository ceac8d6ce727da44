"""The controller: the one process that writes the store and decides the verdict.

Without xdist this is the only process.  With xdist, workers run rollouts and
send each episode with its test report; this object receives the reports,
appends the episodes, stores crashed workers' episodes as errored, and at the
end of the session compares the run with its baseline and sets the exit status.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import pytest

from . import wire
from .budget import CapWatch, TokenCap, add_tokens, cost_lines
from .prices import Prices
from .report._format import terminal_text
from .runner import Identity, error_record
from .spec import SpecError, condition_label
from .state import Settings, plan_data
from .store import Run, RunWriter, Store, StoreError, episode_key, utc_now

if TYPE_CHECKING:
    from .review.pairing import Prepared
    from .stats import Comparison

__all__ = ["Outcome", "ProveSession"]

#: Why the session stopped when the store failed (the message itself is in the summary).
_STORE_STOP = "the store could not be written, so no new item started (see pytest-prove above)"

Key = tuple[str, str, int]


@final
@dataclass(slots=True)
class Outcome:
    """What the end of the session concluded."""

    run: Run | None = None
    prepared: Prepared | None = None
    comparison: Comparison | None = None
    refusal: str | None = None
    coverage_failure: str | None = None  # the gate compared less than the baseline holds
    failed_gate: bool = False
    notes: tuple[str, ...] = ()


def _versions() -> dict[str, str]:
    import platform
    from importlib import metadata

    found = {"python": platform.python_version()}
    for dist in ("pytest-prove", "pytest", "pytest-xdist", "numpy", "scipy"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def _git_commit(root: Path) -> str | None:
    import subprocess

    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


@final
class ProveSession:
    """Controller state: registered as the plugin ``prove_session``."""

    def __init__(self, config: pytest.Config, settings: Settings, store: Store, *,
                 name: str | None, baseline: Run | None, resume: Run | None,
                 save_baseline: str | None, update_baseline: bool,
                 events: tuple[str, ...], fail_on: frozenset[str]) -> None:
        self.config = config
        self.settings = settings
        self.store = store
        self.baseline = baseline
        self.save_baseline = save_baseline
        self.update_baseline = update_baseline
        self.events = events
        self.fail_on = fail_on
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.plan: dict[str, dict[str, Any]] = {}
        # What pytest's selection kept of the plan, the conditions whose items were skipped,
        # and the paths the session collected from: the gate's coverage reads them.
        self.selected: dict[str, dict[str, set[int]]] = {}
        self.skipped: dict[str, set[str]] = {}
        self.paths: list[str] = []
        self.narrowed = False  # --lf or a node id narrowed collection itself
        self.prior_selection: dict[str, Any] | None = None  # a resumed run's, see _selection
        self.leave_out: dict[str, list[str]] = {"ignored": [], "skipped_files": []}
        # How each stored episode ended, the last line of an identity winning as readers
        # read it (a resumed replicate replaces its errored line): the counts come from it.
        self.states: dict[Key, str] = {}
        self.pytest_session: pytest.Session | None = None
        self.write_failure: str | None = None  # the store could not be written: see _store
        self.outcome = Outcome()
        self.ended = False  # finish() closed the run and wrote its final manifest
        self._ended_run: Run | None = None  # see ended_run()
        self.design_failure: str | None = None  # set when xdist workers refused the design
        # Cost: tokens the run used so far, the cap (budget.py watches it) and prices.
        self.spent = {"input": 0, "output": 0}
        self.any_tokens = False  # some episode recorded tokens: the summary prices them
        self.capped: str | None = None
        self.cap_flag: Path | None = None  # budget.py: where workers look for "cap reached"
        self.token_cap = TokenCap()
        self.cap_watch: CapWatch | None = None  # budget.py: stops the session at the cap
        self.prices = Prices()
        self.capture: Any = None  # capture.py's manager: records what instrumentors ran
        self.capture_lines: list[str] = []  # set by capture.py: instrumentors that did not run
        if resume is not None:
            # Locks the run at once: a second session resuming it is refused before it runs.
            self.writer: RunWriter = store.reopen(resume)
            for record in resume.episodes:
                self._count(record)
            self.rollouts: dict[str, Any] = dict(resume.manifest.get("rollouts") or {})
            self._merge_stored_plan(resume.manifest.get("plan"))
            # Left out on purpose only where every session of the run left it out: a killed
            # session (no selection recorded) left out nothing.
            prior = resume.manifest.get("selection")
            self.prior_selection = prior if isinstance(prior, dict) else {}
        else:
            manifest: dict[str, Any] = {
                "paired_with": None if baseline is None else {
                    "baseline": baseline.name, "run_id": baseline.run_id},
                "rollouts": {},
                "packages": None,  # filled in as the tests start: see pytest_runtestloop
                "git_commit": None,
                "command": [_program(), *sys.argv[1:]],
                "counts": self.counts,
            }
            self.writer = store.new_run(name=name, salt=settings.salt, manifest=manifest)
            self.rollouts = self.writer.manifest["rollouts"]

    @property
    def counts(self) -> dict[str, int]:
        """Episodes of the run by how they ended, one per identity, as readers count them."""
        tally = Counter(self.states.values())
        return {"episodes": len(self.states), "with_outcome": tally["with_outcome"],
                "no_outcome": tally["no_outcome"], "errored": tally["errored"]}

    @property
    def keys(self) -> set[Key]:
        return set(self.states)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Say what made the run, before any test runs (so that no test's fixture, such as
        a monkeypatched subprocess or environment, can change what is recorded)."""
        if self.writer.manifest.get("packages") is None:
            self.writer.manifest.update(packages=_versions(),
                                        git_commit=_git_commit(self.config.rootpath))
        # In one process the plan is known now (under xdist it comes with each worker's
        # first report): in the manifest from the first episode on, a killed run keeps it.
        self.merge_plan(plan_data(self.config))

    # ---- from reports

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Every report reaches the controller; those of rollout items carry episodes."""
        self.on_report(report)

    def _count(self, record: Mapping[str, Any]) -> None:
        if record.get("tokens"):
            self.any_tokens = True
            add_tokens(self.spent, record)
        error = record.get("error")
        key = episode_key(record)
        self.states.pop(key, None)  # a replaced line counts where it now stands
        if error is None:
            self.states[key] = "with_outcome"
        elif error.get("kind") == "no_outcome":
            self.states[key] = "no_outcome"
        else:
            self.states[key] = "errored"

    def _store(self, records: Iterable[dict[str, Any]]) -> None:
        records = list(records)
        if not records or self.write_failure is not None:
            return
        try:
            self.writer.append(records)
        except StoreError as exc:
            # Disk full, a read-only store, a quota: what is stored stays, nothing more is
            # written, and the session stops with this one message (no traceback).
            self.write_failure = str(exc)
            self._stop(_STORE_STOP)
            return
        for record in records:
            self._count(record)
        if self.cap_watch is not None:
            self.cap_watch.add(records)

    def _stop(self, message: str) -> None:
        """Start no new item: in this process, and under xdist in the scheduler."""
        if self.pytest_session is not None and not self.pytest_session.shouldstop:
            self.pytest_session.shouldstop = message
        dsession = self.config.pluginmanager.get_plugin("dsession")
        if dsession is not None and not getattr(dsession, "shouldstop", False):
            dsession.shouldstop = message

    def on_report(self, report: pytest.TestReport) -> None:
        if report.when == "call":
            # Stored, then dropped from the report, which pytest keeps to the end.
            episodes = wire.take(report, "episodes").get("episodes")
            if episodes is not None:
                self.pending.pop(report.nodeid, None)
                self._store(episodes)
            return
        if report.when != "setup":
            return
        data = wire.take(report, "plan", "pending")
        status = data.get("capture")
        if status is not None and self.capture is not None:
            self.capture.record_status(status)
        rollout = data.get("rollout")
        if rollout is not None and rollout["id"] not in self.rollouts:
            self.rollouts[rollout["id"]] = {"label": rollout["label"],
                                            "declaration": rollout["declaration"]}
            if self.writer.created:
                self._write_manifest()
        sent = data.get("plan")
        if sent is not None:
            self.merge_plan(sent)
        pending = data.get("pending")
        if pending is not None:
            if report.passed:
                self.pending[report.nodeid] = pending
            elif report.skipped:
                if self.capped is None:  # skipped by the user, not by the token cap
                    for p in pending:
                        self.skipped.setdefault(p["rollout"], set()).add(p["condition_key"])
            elif report.failed:
                # The item's setup failed: its replicates ran no rollout, but they ended.
                message = str(report.longreprtext).strip().splitlines()
                self._store(error_record(_identity(p), "setup", "SetupError",
                                         message[-1] if message else "setup failed")
                            for p in pending)

    def on_crash(self, nodeid: str, message: str) -> None:
        """A worker died while running ``nodeid``: its episodes end as errored."""
        pending = self.pending.pop(nodeid, [])
        self._store(error_record(_identity(p), "worker_crash", "WorkerCrash", message)
                    for p in pending)

    def merge_plan(self, data: wire.PlanData) -> None:
        """Add what a process collected (every xdist worker sends the same) to the run's plan,
        and keep the manifest's copy current, so that a killed run still knows its plan."""
        plan, selected, paths = data["plan"], data["selected"], data["paths"]
        self.narrowed = self.narrowed or bool(data.get("narrowed"))
        for name in ("ignored", "skipped_files"):
            for path in data.get(name) or ():  # type: ignore[attr-defined]
                if path not in self.leave_out[name]:
                    self.leave_out[name].append(path)
        before = self._plan_json()
        for rollout_id, info in plan.items():
            mine = self.plan.setdefault(rollout_id, {"conditions": {}, "replicates": 0})
            mine["conditions"].update(info["conditions"])
            mine["replicates"] = max(mine["replicates"], int(info["replicates"]))
            for field in ("node", "path"):
                if info.get(field):
                    mine[field] = info[field]
            known = self.rollouts.setdefault(rollout_id, {"label": info["label"],
                                                          "declaration": info["declaration"]})
            for field in ("node", "path"):
                if info.get(field):
                    known[field] = info[field]
        for rollout_id, keys in (selected or {}).items():
            mine = self.selected.setdefault(rollout_id, {})
            for key, replicates in keys.items():
                mine.setdefault(key, set()).update(replicates)
        for path in paths:
            if path not in self.paths:
                self.paths.append(path)
        plan_json = self._plan_json()
        if plan_json != before:
            self.writer.manifest["plan"] = plan_json
            if self.writer.created and not self.ended:
                self._write_manifest()

    def _merge_stored_plan(self, stored: object) -> None:
        """A resumed run's plan: what every session of it meant to run, not only this one."""
        if not isinstance(stored, Mapping):
            return
        for rollout_id, info in stored.items():
            if not isinstance(info, Mapping) or not isinstance(info.get("conditions"), list):
                continue
            mine = self.plan.setdefault(str(rollout_id), {"conditions": {}, "replicates": 0})
            mine["conditions"].update({str(k): None for k in info["conditions"]})
            mine["replicates"] = max(mine["replicates"], int(info.get("replicates") or 0))
            for field in ("node", "path"):
                if isinstance(info.get(field), str):
                    mine[field] = info[field]

    def _plan_json(self) -> dict[str, Any]:
        return {rid: {"replicates": info["replicates"], "conditions": sorted(info["conditions"]),
                      **{f: info[f] for f in ("node", "path") if f in info}}
                for rid, info in self.plan.items()}

    def _write_manifest(self, **updates: Any) -> None:
        """Write the manifest; a failure stops the session like a failed episode write."""
        try:
            self.writer.write_manifest(counts=self.counts, **updates)
        except (OSError, StoreError) as exc:
            if self.write_failure is None:
                self.write_failure = (f"{self.writer.directory / 'manifest.json'}: cannot "
                                      f"write the manifest ({_reason(exc)})")
                self._stop(_STORE_STOP)

    # ---- the end

    def _planned(self) -> set[Key]:
        return {(rid, key, r) for rid, info in self.plan.items()
                for key in info["conditions"] for r in range(info["replicates"])}

    def _missing(self) -> int:
        return len(self._planned() - self.keys)

    def _selection(self) -> dict[str, Any]:
        """What this session left out on purpose, for the manifest (read by coverage.py):
        the replicates of each condition pytest's selection dropped, the conditions whose
        items were skipped, and how collection was narrowed."""
        deselected: dict[str, dict[str, list[int]]] = {}
        for rid, info in self.plan.items():
            kept = self.selected.get(rid, {})
            for key in info["conditions"]:
                dropped = set(range(info["replicates"])) - kept.get(key, set())
                if dropped:
                    deselected.setdefault(rid, {})[key] = sorted(dropped)
        skipped = {rid: sorted(keys) for rid, keys in self.skipped.items()}
        narrowed = self.narrowed
        prior = self.prior_selection
        if prior is not None:
            # Left out on purpose only what every session of the run left out.
            earlier = prior.get("deselected")
            earlier = earlier if isinstance(earlier, dict) else {}
            for rid, conditions in deselected.items():
                found = earlier.get(rid)
                before: dict[str, Any] = found if isinstance(found, dict) else {}
                for key in list(conditions):
                    conditions[key] = sorted(set(conditions[key])
                                             & set(before.get(key) or ()))
            earlier_skips = prior.get("skipped")
            earlier_skips = earlier_skips if isinstance(earlier_skips, dict) else {}
            skipped = {rid: [k for k in keys if k in set(earlier_skips.get(rid) or ())]
                       for rid, keys in skipped.items()}
            narrowed = narrowed and bool(prior.get("narrowed"))
        return {"deselected": {rid: {k: r for k, r in conditions.items() if r}
                               for rid, conditions in deselected.items()
                               if any(conditions.values())},
                "skipped": {rid: keys for rid, keys in skipped.items() if keys},
                "paths": list(self.paths), "narrowed": narrowed, **self.leave_out}

    def _close(self, exitstatus: int) -> str:
        """Write the final manifest (best effort when the store fails) and release the run."""
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        missing = self._missing()
        status = "complete" if (not interrupted and missing == 0 and self.plan
                                and self.write_failure is None) else "incomplete"
        if self.capped is not None:
            status = "capped"
            self.writer.manifest["capped"] = {"message": self.capped,
                                               "cap": self.token_cap.to_json(),
                                               "spent": dict(self.spent)}
        if self.prices:
            self.writer.manifest["prices"] = self.prices.to_json()
        updates = {"ended": utc_now(), "status": status, "plan": self._plan_json(),
                   "selection": self._selection(), "missing": missing}
        if self.write_failure is None:
            self._write_manifest(**updates)
        else:
            # The store already failed once: one more try at the final word, quietly.
            with contextlib.suppress(OSError, StoreError):
                self.writer.write_manifest(counts=self.counts, **updates)
        self.writer.manifest.update(updates)
        try:
            self.writer.close()
        except OSError as exc:
            if self.write_failure is None:
                self.write_failure = (f"{self.writer.episodes_path}: cannot finish writing "
                                      f"the episodes ({_reason(exc)})")
        self.ended = True
        return status

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """Close the run, compare it with the baseline, save baselines, set the exit status."""
        notes: list[str] = []
        if self.design_failure is not None:
            self.outcome = Outcome(refusal=self.design_failure)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if self.write_failure is not None and not self.writer.created:
            self.outcome = Outcome(refusal=f"{self.write_failure} (nothing was stored)")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if not self.writer.created:
            outcome = Outcome()
            if (self.baseline is not None and not self.settings.plan_only
                    and not self.config.option.collectonly):
                outcome.refusal = (
                    f"gate failed: no rollout ran in this session, so nothing was compared "
                    f"with baseline {self.baseline.name!r}. Run the tests that made it (were "
                    "they moved or renamed, or did -k select none of them?)")
                outcome.failed_gate = True
            self.outcome = outcome
            if outcome.failed_gate and session.exitstatus in (
                    pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        resumed_nothing = (self.writer.existing and self.writer.written == 0
                           and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED)
        status = self._close(exitstatus)
        if resumed_nothing and status == "complete":
            notes.append(f"nothing left to run: run {self.writer.manifest['name']!r} already "
                         "holds every planned replicate")
            session.exitstatus = pytest.ExitCode.OK
        outcome = Outcome()
        if self.write_failure is not None:
            self.outcome = Outcome(refusal=f"{self.write_failure} (the {len(self.states)} "
                                           "episodes stored before it are kept)")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if self.baseline is not None:
            run = outcome.run = self.ended_run()
            # The engine (and scipy) is imported only when there is something to compare.
            from .review.coverage import coverage, unfinished_reason
            from .review.pairing import CaseMixError, prepare
            from .stats import compare

            try:
                prepared = prepare(self.baseline, run, self.events or None)
            except (CaseMixError, SpecError, ValueError) as exc:
                outcome.refusal = str(exc)
            else:
                outcome.prepared = prepared
                if prepared.rows:
                    outcome.comparison = compare(prepared.rows, q=self.settings.q,
                                                 max_mde=self.settings.max_mde)
                    word = outcome.comparison.verdict.word
                    outcome.failed_gate = (
                        (word == "worse" and "worse" in self.fail_on)
                        or (word == "too small to tell" and "too-small" in self.fail_on)
                    )
                gap = coverage(self.baseline, run).failure(self.baseline.name, run.name)
                # A run that stopped before it ran what it selected (pytest.exit, -x, a
                # crash) compared less than it meant to, whatever its exit status says.
                gap = gap or unfinished_reason(run)
                if gap is not None or not prepared.rows:
                    outcome.coverage_failure = "gate failed: " + (gap or (
                        "nothing was compared: no condition of this run has an outcome in "
                        f"baseline {self.baseline.name!r} as well"))
                    outcome.failed_gate = True
        if self.save_baseline is not None:
            notes.append(self._save(self.save_baseline, self.ended_run(), replace=False))
        if self.update_baseline and self.baseline is not None and outcome.refusal is None:
            note = self._save(self.baseline.name, self.ended_run(), replace=True)
            notes.append(note)
            if note.startswith("baseline"):
                outcome.failed_gate = False
        outcome.notes = tuple(notes)
        self.outcome = outcome
        self._write_report(outcome)
        if self.capped is not None:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        failed = (outcome.refusal is not None or outcome.failed_gate
                  or any(n.startswith("not saved") for n in notes))
        if failed and session.exitstatus in (pytest.ExitCode.OK,
                                             pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def ended_run(self) -> Run:
        """The run as stored, read back from its folder once, by the first that needs its
        episodes (a comparison, a saved baseline, the cost line)."""
        if self._ended_run is None:
            self._ended_run = self.store.read(self.writer.directory)
        return self._ended_run

    # ---- reports (issue 4): --prove-report, and GitHub's step summary when it is set

    def _write_report(self, outcome: Outcome) -> None:
        path = self.config.getoption("prove_report", None)
        if (outcome.comparison is None or outcome.prepared is None or outcome.run is None
                or self.baseline is None):
            if path is not None:
                outcome.notes += (f"no report written to {path}: nothing was compared (a "
                                  "report needs --prove-baseline NAME)",)
            return
        from .report.files import write_report
        from .report.markdown import append_step_summary, render_markdown
        from .review.context import report_context

        context = report_context(self.baseline, outcome.run, outcome.prepared)
        if path is not None:
            try:
                written = write_report(Path(path), outcome.comparison, context)
            except (OSError, ValueError) as exc:
                outcome.notes += (f"report not written to {path}: {exc}",)
            else:
                outcome.notes += (f"report written to {_rel(written)}",)
        append_step_summary(render_markdown(outcome.comparison, context))

    def _save(self, name: str, run: Run, *, replace: bool) -> str:
        if run.status != "complete":
            return (f"not saved: baseline {name!r} is written only from a complete run, and "
                    f"run {run.name!r} is incomplete ({self._missing()} replicates missing); "
                    f"finish it with --prove-resume={run.name}")
        # Every condition of the new baseline must have outcomes to compare with, and a
        # refresh must hold every condition of the baseline it replaces.
        covered = {(r["rollout"], r["condition_key"]) for r in run.episodes
                   if r.get("error") is None and r.get("outcome") is not None}
        empty = sorted({condition_label(dict(r.get("condition") or {})) for r in run.episodes
                        if (r["rollout"], r["condition_key"]) not in covered})
        if empty:
            return (f"not saved: baseline {name!r} would hold {len(empty)} condition(s) with no "
                    f"outcome to compare with ({', '.join(empty[:5])}); make them end with an "
                    "outcome, then save again")
        if replace and self.baseline is not None:
            wanted = {(r["rollout"], r["condition_key"]) for r in self.baseline.episodes}
            left = wanted - covered
            if left:
                shown = ", ".join(sorted(condition_label(dict(
                    next(r for r in self.baseline.episodes
                         if (r["rollout"], r["condition_key"]) == k)["condition"] or {}))
                    for k in list(left)[:5]))
                return (f"not saved: baseline {name!r} was not replaced, because this run did "
                        f"not cover {len(left)} of its conditions ({shown}); run them all, "
                        "without -k or a shard")
        dropped = ""
        replaces = self.store.baseline_path(name).is_file()
        if replaces and not replace:
            dropped = self._dropped(name, run)
        try:
            path = self.store.write_baseline(name, run)
        except (OSError, StoreError) as exc:
            return f"not saved: baseline {name!r} could not be written: {_reason(exc)}"
        verb = "replaced by" if replaces else "saved from"
        return f"baseline {name!r} {verb} run {run.name!r}: {_rel(path)}{dropped}"

    def _dropped(self, name: str, run: Run) -> str:
        """What a baseline about to be overwritten holds that ``run`` does not."""
        try:
            old = self.baseline if (self.baseline is not None and self.baseline.name == name) \
                else self.store.load_baseline(name)
        except StoreError:
            return " (the old file could not be read, so what it held is not listed)"
        covered = {(r["rollout"], r["condition_key"]) for r in run.episodes}
        gone: dict[tuple[str, str], str] = {}
        for record in old.episodes:
            key = (record["rollout"], record["condition_key"])
            if key not in covered:
                gone.setdefault(key, condition_label(dict(record.get("condition") or {})))
        if not gone:
            return ""
        shown = ", ".join(sorted(gone.values())[:5]) + (" ..." if len(gone) > 5 else "")
        return (f"; it no longer holds {len(gone)} condition(s) the old baseline had "
                f"({shown})")

    def summary_lines(self, verbose: bool) -> list[str]:
        outcome = self.outcome
        lines: list[str] = []
        if outcome.refusal is not None:
            lines.append(f"pytest-prove: {outcome.refusal}")
        if outcome.coverage_failure is not None:
            lines.append(f"pytest-prove: {outcome.coverage_failure}")
        if outcome.comparison is not None and self.baseline is not None and outcome.run:
            from .report.terminal import format_comparison

            lines.extend(format_comparison(outcome.comparison, before=self.baseline.name,
                                           after=outcome.run.name, verbose=verbose))
        if outcome.prepared is not None:
            prepared = outcome.prepared
            if prepared.not_run:
                more = " ..." if len(prepared.not_run) > 6 else ""
                lines.append(
                    f"not run: {len(prepared.not_run)} condition(s) of the baseline did not run "
                    f"in this session and are left out of the verdict: "
                    f"{', '.join(map(terminal_text, prepared.not_run[:6]))}{more}"
                )
            if prepared.new:
                new = ", ".join(map(terminal_text, prepared.new[:6]))
                lines.append(f"new: {len(prepared.new)} condition(s) are not in the baseline "
                             f"and were not compared: {new}")
            if prepared.left_out:
                shown = ", ".join(f"{n} {terminal_text(reason)}"
                                  for reason, n in sorted(prepared.left_out.items()))
                lines.append(f"left out of the comparison: {shown}")
        if self.ended:
            name = str(self.writer.manifest["name"])
            status = self.writer.manifest["status"]
            c = self.counts
            lines.append(
                f"run {name!r} ({status}): {c['episodes']} episodes, "
                f"{c['with_outcome']} with an outcome, {c['no_outcome']} with none, "
                f"{c['errored']} errored; stored in {_rel(self.writer.directory)}"
            )
            if self.any_tokens:
                lines.extend(cost_lines(self.ended_run(), self.prices))
            lines.extend(self.capture_lines)
            if self.capped is not None:
                lines.insert(0, f"pytest-prove: {self.capped}; no new episode started, "
                                f"run {name!r} is marked capped")
                lines.append(f"next: raise the cap, or finish the run later with "
                             f"--prove-resume={name}")
            elif status == "incomplete":
                lines.append(f"next: finish it with --prove-resume={name}")
            elif self.baseline is None and self.save_baseline is None:
                lines.append("next: keep it as a baseline with --prove-save-baseline NAME, "
                             "then compare later runs with --prove-baseline NAME")
        lines.extend(outcome.notes)
        return lines


def _program() -> str:
    name = Path(sys.argv[0]).name
    return "pytest" if name in ("__main__.py", "py.test", "pytest") else name


def _identity(data: Mapping[str, Any]) -> Identity:
    return Identity(rollout=data["rollout"], condition=dict(data["condition"]),
                    condition_key=data["condition_key"], replicate=int(data["replicate"]),
                    seed=int(data["seed"]))


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _rel(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
