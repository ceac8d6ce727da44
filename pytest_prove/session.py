"""The controller: the one process that writes the store and decides the verdict.

Without xdist this is the only process.  With xdist, workers run rollouts and
send each episode with its test report; this object receives the reports,
appends the episodes, stores crashed workers' episodes as errored, and at the
end of the session compares the run with its baseline and sets the exit status.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import pytest

from .budget import CapWatch, TokenCap, add_tokens, cost_lines
from .prices import Prices
from .runner import Identity, error_record
from .spec import SpecError, condition_label
from .state import Settings
from .store import Run, RunWriter, Store, StoreError, episode_key, utc_now

if TYPE_CHECKING:
    from .analysis import Prepared
    from .stats import Comparison

__all__ = ["Outcome", "ProveSession"]

Key = tuple[str, str, int]


@final
@dataclass(slots=True)
class Outcome:
    """What the end of the session concluded."""

    run: Run | None = None
    prepared: Prepared | None = None
    comparison: Comparison | None = None
    refusal: str | None = None
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
        self.keys: set[Key] = set()
        self.counts = {"episodes": 0, "with_outcome": 0, "no_outcome": 0, "errored": 0}
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
            self.writer: RunWriter = store.reopen(resume)
            self.keys = {episode_key(r) for r in resume.episodes}
            for record in resume.episodes:
                self._count(record)
            self.rollouts: dict[str, Any] = dict(resume.manifest.get("rollouts") or {})
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

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Say what made the run, before any test runs (so that no test's fixture, such as
        a monkeypatched subprocess or environment, can change what is recorded)."""
        if self.writer.manifest.get("packages") is None:
            self.writer.manifest.update(packages=_versions(),
                                        git_commit=_git_commit(self.config.rootpath))

    # ---- from reports

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Every report reaches the controller; those of rollout items carry episodes."""
        self.on_report(report)

    def _count(self, record: Mapping[str, Any]) -> None:
        self.counts["episodes"] += 1
        if record.get("tokens"):
            self.any_tokens = True
            add_tokens(self.spent, record)
        error = record.get("error")
        if error is None:
            self.counts["with_outcome"] += 1
        elif error.get("kind") == "no_outcome":
            self.counts["no_outcome"] += 1
        else:
            self.counts["errored"] += 1

    def _store(self, records: Iterable[dict[str, Any]]) -> None:
        records = list(records)
        if not records:
            return
        self.writer.append(records)
        for record in records:
            self.keys.add(episode_key(record))
            self._count(record)
        if self.cap_watch is not None:
            self.cap_watch.add(records)

    def on_report(self, report: pytest.TestReport) -> None:
        attributes = report.__dict__
        if report.when == "call":
            episodes = attributes.pop("prove_episodes", None)
            if episodes is not None:
                # Stored, then dropped from the report, which pytest keeps to the end.
                self.pending.pop(report.nodeid, None)
                self._store(episodes)
            return
        if report.when != "setup":
            return
        status = attributes.get("prove_capture")
        if status is not None and self.capture is not None:
            self.capture.record_status(status)
        rollout = attributes.get("prove_rollout")
        if rollout is not None and rollout["id"] not in self.rollouts:
            self.rollouts[rollout["id"]] = {"label": rollout["label"],
                                            "declaration": rollout["declaration"]}
            if self.writer.created:
                self.writer.write_manifest()
        pending = attributes.pop("prove_pending", None)
        if pending is not None:
            if report.passed:
                self.pending[report.nodeid] = pending
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

    def merge_plan(self, plan: Mapping[str, Mapping[str, Any]]) -> None:
        for rollout_id, info in plan.items():
            mine = self.plan.setdefault(rollout_id, {"label": info["label"],
                                                     "declaration": info["declaration"],
                                                     "conditions": {}, "replicates": 0})
            mine["conditions"].update(info["conditions"])
            mine["replicates"] = max(mine["replicates"], int(info["replicates"]))
            if rollout_id not in self.rollouts:
                self.rollouts[rollout_id] = {"label": info["label"],
                                             "declaration": info["declaration"]}

    # ---- the end

    def _missing(self) -> int:
        planned = {(rid, key, r) for rid, info in self.plan.items()
                   for key in info["conditions"] for r in range(info["replicates"])}
        return len(planned - self.keys)

    def finish(self, session: pytest.Session, exitstatus: int) -> None:
        """Close the run, compare it with the baseline, save baselines, set the exit status."""
        notes: list[str] = []
        if self.design_failure is not None:
            self.outcome = Outcome(refusal=self.design_failure)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return
        if not self.writer.created:
            if self.baseline is not None and not self.settings.plan_only:
                notes.append("no rollout ran in this session, so nothing was compared")
            self.outcome = Outcome(notes=tuple(notes))
            return
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        missing = self._missing()
        status = "complete" if (not interrupted and missing == 0 and self.plan) else "incomplete"
        if self.capped is not None:
            status = "capped"
            self.writer.manifest["capped"] = {"message": self.capped,
                                               "cap": self.token_cap.to_json(),
                                               "spent": dict(self.spent)}
        if self.prices:
            self.writer.manifest["prices"] = self.prices.to_json()
        self.writer.write_manifest(
            ended=utc_now(), status=status, counts=self.counts,
            plan={rid: {"replicates": info["replicates"],
                        "conditions": sorted(info["conditions"])}
                  for rid, info in self.plan.items()},
            missing=missing,
        )
        self.writer.close()
        self.ended = True
        outcome = Outcome()
        if self.baseline is not None:
            run = outcome.run = self.ended_run()
            # The engine (and scipy) is imported only when there is something to compare.
            from .analysis import CaseMixError, prepare
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
                else:
                    notes.append("no condition of this run is in the baseline, so nothing "
                                 "was compared")
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
        if failed and session.exitstatus == pytest.ExitCode.OK:
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
        from .cli import report_context
        from .report.json import write_report
        from .report.markdown import append_step_summary, render_markdown

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
                    f"finish it with --prove-resume {run.name}")
        if replace and self.baseline is not None:
            covered = {(r["rollout"], r["condition_key"]) for r in run.episodes}
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
        try:
            path = self.store.write_baseline(name, run)
        except (OSError, StoreError) as exc:
            return f"not saved: baseline {name!r} could not be written: {exc}"
        verb = "replaced by" if replace else "saved from"
        return f"baseline {name!r} {verb} run {run.name!r}: {_rel(path)}"

    def summary_lines(self, verbose: bool) -> list[str]:
        outcome = self.outcome
        lines: list[str] = []
        if outcome.refusal is not None:
            lines.append(f"pytest-prove: {outcome.refusal}")
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
                    f"{', '.join(prepared.not_run[:6])}{more}"
                )
            if prepared.new:
                lines.append(f"new: {len(prepared.new)} condition(s) are not in the baseline "
                             f"and were not compared: {', '.join(prepared.new[:6])}")
            if prepared.left_out:
                shown = ", ".join(f"{n} {reason}"
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
                             f"--prove-resume {name}")
            elif status == "incomplete":
                lines.append(f"next: finish it with --prove-resume {name}")
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


def _rel(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
