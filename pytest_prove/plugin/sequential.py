"""--prove-sequential on the pytest side: looks on the controller, skips everywhere (a
worker's skipper is in :mod:`.worker`).

The controller hands every stored episode to :class:`~pytest_prove.review.sequential.Looks`,
which takes each condition's looks and decides it (docs/statistics.md, "Sequential runs").
Once a condition is decided its remaining items are skipped with the reason, as the token
cap skips items: in one process directly; under xdist, each worker on this machine reads the
controller's file of decided conditions before each item, and every worker is sent the same
map on xdist's own channel (remote workers too).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import pytest

from .. import wire
from .execute import started_ahead
from .settings import NOT_SEQUENTIAL
from .state import PLAN_KEY

if TYPE_CHECKING:
    from ..declare.spec import Declaration
    from ..review.sequential import Looks
    from ..store import Run
    from ..store.recorder import RunRecorder
    from .settings import Settings

__all__ = ["SequentialControl", "Skipper", "decided_key", "declared", "fixed_because",
           "sequential_possible"]


def sequential_possible(config: pytest.Config) -> bool:
    """Whether this session may be sequential: --prove-sequential, or a baseline and none of
    the options a sequential run refuses (then rollouts declaring ``sequential=True`` make it
    so, see :func:`declared`)."""
    opt = config.option
    return bool(opt.prove_sequential or (
        opt.prove_baseline and not any(getattr(opt, name, None) for name in NOT_SEQUENTIAL)))


def fixed_because(opt: Any) -> str | None:
    """Why rollouts declaring ``sequential=True`` run every replicate in this session (None:
    they may stop early)."""
    if opt.prove_save_baseline:
        return (f"this run saves baseline {opt.prove_save_baseline!r}, and a baseline must "
                "hold every replicate of every condition for later runs to pair with")
    if opt.prove_update_baseline:
        return (f"this run updates baseline {opt.prove_baseline!r}, and a baseline must hold "
                "every replicate of every condition for later runs to pair with")
    if opt.prove_replay:
        return "a replay runs each replicate it selects as it ran"
    if opt.prove_resume:
        return "a resumed run runs the replicates its run has not run yet"
    if opt.prove_shard:
        return "a shard runs its slice of every condition's replicates"
    if not opt.prove_baseline:
        return "there is no baseline to stop against (--prove-baseline NAME)"
    return None


def _named(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")


def declared(config: pytest.Config, settings: Settings,
             selected: Mapping[str, Declaration]) -> tuple[str | None, str | None]:
    """``sequential=`` on the selected rollouts (by rollout id): (a line for the plan, or
    None; why the session is refused, or None). One Holm family is read per session, so the
    whole session is sequential or none of it: --prove-sequential (or ini prove_sequential)
    makes it so, and refuses a rollout declaring ``sequential=False``; otherwise it is
    sequential when every selected rollout declares ``sequential=True`` and the session can
    stop conditions (it has a baseline, and saves none); some declaring it and others not is
    refused. Sets ``settings.sequential`` when the declarations make the session
    sequential."""
    asked = sorted(rid for rid, d in selected.items() if d.sequential is True)
    against = sorted(rid for rid, d in selected.items() if d.sequential is False)
    only = sorted(rid for rid, d in selected.items() if d.metrics_only)
    if only and (settings.sequential or (asked and fixed_because(config.option) is None)):
        return None, (
            f"--prove-sequential (or sequential=True) stops each condition on its outcome "
            f"rows, and {_named(only)} declare(s) metrics and no outcomes, so there is "
            "nothing to stop on; run without --prove-sequential (every replicate runs, and "
            "the metric rows test them all), or select only rollouts with outcomes")
    if settings.sequential:
        if against:
            return None, (
                f"--prove-sequential (or ini prove_sequential) makes the whole session "
                f"sequential, but {_named(against)} declare(s) sequential=False; drop "
                "sequential=False there, or run without --prove-sequential (and ini "
                "prove_sequential)")
        return None, None
    if not asked:
        return None, None
    why = fixed_because(config.option)
    if why is not None:
        return (f"sequential=True ({_named(asked)}): every replicate runs, as in a fixed "
                f"run: {why}"), None
    others = sorted(set(selected) - set(asked))
    if others:
        return None, (
            f"{_named(asked)} declare(s) sequential=True but {_named(others)} do(es) not: "
            "a session is gated as one family of tests, all sequential or all fixed, so "
            "declare sequential=True on every rollout you select, select only those (-k, "
            "a path), or pass --prove-sequential to run them all sequentially")
    if settings.margin is not None:
        # The margin's design check is sized before the declarations are read: at the
        # fixed test's level q, not the level of a sequential run's last margin look.
        return None, (
            f"{_named(asked)} declare(s) sequential=True, and a margin (--prove-margin "
            f"{settings.margin:g}, or ini prove_margin) is tested on a sequential run's "
            "looks only when the session asks for it with --prove-sequential (its design "
            "check then sizes the claim at the level of the last margin look); pass "
            "--prove-sequential, or drop the margin")
    settings.sequential = True
    return None, None


def decided_key(rollout_id: str, condition_key: str) -> str:
    """How a condition is named in the map of decided conditions."""
    return f"{rollout_id}\x1f{condition_key}"


class Skipper:
    """Skips an item of a decided condition before it starts (registered in every process:
    the controller's is :class:`SequentialControl`, a worker's is in :mod:`.worker`)."""

    decided: dict[str, str]

    def reason(self, key: str) -> str | None:
        return self.decided.get(key)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        plan = item.stash.get(PLAN_KEY, None)
        if plan is None:
            return
        found = self.reason(decided_key(plan.rollout_id, plan.condition_key))
        if found is not None and not started_ahead(item):
            pytest.skip(f"sequential: {found}")


@final
class SequentialControl(Skipper):
    """The controller's side: the looks, the decided conditions, telling the workers."""

    def __init__(self, config: pytest.Config, run: RunRecorder, baseline: Run | None,
                 settings: Settings, asked: Mapping[str, Any]) -> None:
        self.config = config
        self.run = run
        self.baseline = baseline
        self.settings = settings
        self.asked = asked  # the session's events and missing, as the options say
        self.looks: Looks | None = None
        self.decided = {}
        self.flag = Path(tempfile.mkdtemp(prefix="pytest-prove-seq-")) / "decided.json"
        self.failure: str | None = None
        #: Without --prove-sequential the rollouts' declarations decide (under xdist they
        #: come with the workers' reports): False once they are known and say fixed.
        self.on: bool | None = True if settings.sequential else None

    def _start(self) -> Looks | None:
        """The looks, made once the plan is known (under xdist, with a worker's report)."""
        if self.looks is not None:
            return self.looks
        if self.on is False:
            return None
        run, settings = self.run, self.settings
        plan = run.plan
        baseline = self.baseline
        if not plan or baseline is None:
            return None
        from ..declare.spec import Declaration, SpecError
        from ..review.sequential import Looks
        from ..stats import sequential_design

        if self.on is None:
            found = [run.rollouts.get(rid, {}).get("declaration") for rid in plan]
            if any(d is None for d in found):
                return None  # a declaration comes with its rollout's first report
            # The workers' collection refused rollouts declaring it next to others that do
            # not, so one declaration says for all.
            self.on = all(isinstance(d, dict) and d.get("sequential") is True for d in found)
            if not self.on:
                return None
        events = self.asked.get("events")
        m = 0
        sizes = set()
        for rollout_id, info in plan.items():
            try:
                declaration = Declaration.from_json(
                    run.rollouts[rollout_id]["declaration"])
            except (KeyError, TypeError, SpecError):
                return None  # its declaration comes with its first report
            wanted = [e for e in events if e in declaration.events] if events else None
            # The conditions the selection kept (-k may keep some conditions only).
            kept = [key for key in info["conditions"]
                    if run.selected.get(rollout_id, {}).get(key)]
            m += len(kept or info["conditions"]) * len(declaration.tested(wanted))
            sizes.add(int(info["replicates"]))
        if not m or not sizes:
            return None
        design = sequential_design(min(sizes), m, paired=True, q=settings.q,
                                   max_mde=settings.max_mde)
        self.looks = Looks(baseline, design, settings.salt,
                           run.rollouts, events=events,
                           missing=self.asked.get("missing", "test"), margin=settings.margin)
        return self.looks

    def add(self, stored: list[dict[str, Any]]) -> None:
        """Episodes just stored: take the looks they complete; skip what is decided."""
        looks = self._start()
        if looks is None:
            return
        newly = looks.add(stored)
        if not newly:
            return
        for (rollout_id, condition_key), decision in newly:
            self.decided[decided_key(rollout_id, condition_key)] = decision.reason
        self._tell()

    def _tell(self) -> None:
        """Write the decided conditions for local workers (temp file, then rename) and send
        them on xdist's channel to every worker."""
        text = json.dumps(self.decided)
        temp = self.flag.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            temp.write_text(text, encoding="utf-8")
            os.replace(temp, self.flag)
        dsession = self.config.pluginmanager.get_plugin("dsession")
        sched = getattr(dsession, "sched", None)
        name, kwargs = wire.decided_command(self.decided)
        for node in list(getattr(sched, "nodes", ())):
            with contextlib.suppress(OSError):
                node.sendcommand(name, **kwargs)

    def is_decided(self, rollout_id: str, condition_key: str) -> bool:
        return decided_key(rollout_id, condition_key) in self.decided

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        shutil.rmtree(self.flag.parent, ignore_errors=True)
