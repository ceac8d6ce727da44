"""``--prove-aa``: the current code against itself, in one session.

Each item runs every replicate of its block twice, one right after the other, on the same
seed (``execute._identities`` doubles the block; ``execute._in_turn`` runs the firsts, then
their twins once every first ended). The controller stores the first episode of
each (rollout, condition, replicate) in the session's run as usual, and keeps the second, its
twin, in memory; at the end it writes the twins as a run of their own (same salt, plan and
selection; named ``NAME-aa`` when the run is named) and reads the two runs as an A/A check
(:mod:`pytest_prove.review.aa`): whether any row reads worse or safer, how often the twins
ended alike, and the replicates a paired design then needs. The gate reads the session's run
only; the A/A lines are said beside it and never fail the session.

When arms land (issue 31, item 1), this is arms ``[x, x]``: the same twins, one arm each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, final

from ..record import add_tokens, identity
from ..store import Run, Store, StoreError

if TYPE_CHECKING:
    from ..store.recorder import RunRecorder

__all__ = ["AA_HELP", "AGREEMENT_HELP", "TwinRun", "check_twin_options", "spent_with"]

AA_HELP = ("an A/A check: run every replicate twice, one right after the other, on the same "
           "seed, store the twins as a second run (NAME-aa), and say how often they ended "
           "alike and whether any row reads worse or safer: the noise floor the gate works "
           "against")
AGREEMENT_HELP = ("let the paired design check read the twins' agreement seen in RUN "
                  "(against the baseline it was paired with) or in A,B (two runs on one "
                  "salt, e.g. an A/A check): at its 99%% lower bound it may ask for fewer "
                  "replicates than independent twins need; needs --prove-baseline")


def check_twin_options(opt: Any) -> None:
    """--prove-aa and --prove-agreement-from: what they cannot go with, said before anything
    runs."""
    import pytest

    if opt.prove_aa:
        given = [flag for name, flag in (("prove_resume", "--prove-resume"),
                                         ("prove_replay", "--prove-replay"),
                                         ("prove_shard", "--prove-shard"),
                                         ("prove_sequential", "--prove-sequential"))
                 if getattr(opt, name, None)]
        if given:
            raise pytest.UsageError(
                f"--prove-aa runs every replicate twice and stores the twins as a run of "
                f"their own, and {given[0]} cannot keep them apart; run the A/A check on its "
                "own (pytest --prove-aa), or make two runs on one salt and read them with "
                "pytest-prove aa A B")
    if opt.prove_agreement_from and not opt.prove_baseline:
        raise pytest.UsageError(
            "--prove-agreement-from lets the paired design check read an observed agreement, "
            "and this run is not paired: add --prove-baseline NAME (the twins are its "
            "episodes and this run's on the same seeds), or drop --prove-agreement-from")

Key = tuple[str, str, int]


@final
class TwinRun:
    """The second episode of each replicate, until the session ends."""

    def __init__(self) -> None:
        self.seen: set[Key] = set()
        self.records: list[dict[str, Any]] = []
        self.spent = {"input": 0, "output": 0}

    def split(self, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The records the session's run stores: the first of each identity; the second
        (its twin, on the same seed) is kept here."""
        first = []
        for record in records:
            key = identity(record)
            if key in self.seen:
                self.records.append(record)
                add_tokens(self.spent, record)
            else:
                self.seen.add(key)
                first.append(record)
        return first

    def finish(self, store: Store, main: RunRecorder, main_run: Run, *, interrupted: bool,
               asked: Mapping[str, Any], q: float, max_mde: float) -> list[str]:
        """Write the twins' run and say what the A/A check reads in it."""
        if not self.records:
            return ["--prove-aa: no replicate ran twice, so there are no twins to read"]
        name = main.writer.manifest.get("name")
        run_id = str(main.writer.manifest.get("run_id"))
        twin_name = f"{name}-aa" if name and name != run_id else None
        from ..store.recorder import RunRecorder

        try:
            twin = RunRecorder(store, name=twin_name, salt=main.writer.manifest["salt"],
                               baseline=None, resume=None, on_failure=lambda: None)
        except StoreError as exc:
            return [f"--prove-aa: the twins' run was not written ({exc}); run again with a "
                    "free --prove-name"]
        for field in ("plan", "selected", "skipped", "paths", "narrowed", "leave_out"):
            setattr(twin, field, getattr(main, field))
        twin.rollouts.update(main.rollouts)
        for key in ("packages", "git_commit"):
            twin.writer.manifest[key] = main.writer.manifest.get(key)
        # Started with the session, a hair before its run: ``latest`` still names that run.
        twin.writer.manifest["started"] = _before(str(main.writer.manifest.get("started")),
                                                  str(twin.writer.manifest.get("started")))
        twin.store(self.records)
        twin.close(interrupted=interrupted, capped=None, prices=None)
        twin.writer.release()
        if twin.failure is not None:
            return [f"--prove-aa: the twins' run was not written whole: {twin.failure}"]
        twins = store.read(twin.writer.directory)
        from ..report.twins import aa_lines
        from ..review import review
        from ..review.aa import aa_of

        try:
            done = aa_of(review(main_run, twins, events=asked.get("events"), q=q,
                                max_mde=max_mde, fail_on=frozenset(),
                                missing=asked.get("missing", "test")))
        except (StoreError, ValueError) as exc:  # RefusalError is a ValueError
            return [f"--prove-aa: the twins were stored as run {twins.name!r}, and the A/A "
                    f"check cannot read them: {exc}"]
        comparison = done.review.require_comparison()
        return [f"--prove-aa: each replicate ran twice on its seed; the twins are stored as "
                f"run {twins.name!r} (pytest-prove aa {main_run.name} {twins.name})",
                *aa_lines(done.review.twins, comparison, before=main_run.name,
                          after=twins.name)]


def _before(started: str, fallback: str) -> str:
    """The time one microsecond before ``started`` (as the store writes times), or
    ``fallback`` when ``started`` is not such a time."""
    try:
        when = datetime.strptime(started, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return fallback
    return (when - timedelta(microseconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def spent_with(spent: Mapping[str, int], twins: TwinRun | None) -> dict[str, int]:
    """The tokens the session spent: its run's, and its twins' under --prove-aa."""
    if twins is None:
        return dict(spent)
    return {kind: spent.get(kind, 0) + twins.spent.get(kind, 0)
            for kind in set(spent) | set(twins.spent)}
