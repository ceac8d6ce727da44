"""The checks after pytest's selection, before any rollout runs.

The faults a run injects against the baseline's (or the resumed run's), the events
``--prove-event`` names, the design check (could one condition alone be flagged for the
largest rise the user accepts?), the margin's design check, a sequential run's looks, and
the plan these add up to.  Each check says why the session is refused, or None; the words
are in :mod:`pytest_prove.report.plan`, the refusing in :mod:`.collect`.
"""

from __future__ import annotations

import bisect
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from filelock import FileLock

from ..declare.chaos import chaos_differences, chaos_refusal
from ..report import plan as words
from . import budget, shards
from .settings import Settings
from .state import DESIGN_NOTE_KEY, PLAN_FAILS_KEY, PLAN_KEY, ItemPlan

__all__ = ["Design", "check_chaos", "check_events", "decide"]

#: What the checks count: each selected rollout's plan and the keys of its conditions.
Selected = Mapping[str, tuple[ItemPlan, set[str]]]


def check_chaos(selected: Selected, settings: Settings) -> str | None:
    """Why a run whose rollouts inject other faults than the baseline's did is refused,
    unless --prove-chaos asks for that comparison, or than the run it resumes did
    (docs/chaos.md); None when the faults agree."""
    mine = {rid: {"declaration": plan.declaration.to_json()}
            for rid, (plan, _) in selected.items()}
    for name, chaos, strict in settings.chaos_references:
        theirs = {rid: {"declaration": {} if c is None else {"chaos": json.loads(c)}}
                  for rid, c in chaos.items()}
        found = chaos_differences(theirs, mine)
        if not found:
            continue
        if strict:
            return words.chaos_resumed(found, name)
        return chaos_refusal(found, name, "this run")
    return None


def check_events(asked_for: list[str] | None, selected: Selected) -> str | None:
    """Why a --prove-event that no selected rollout declares is refused, before any rollout
    runs (the comparison refused it only at the end, once the sweep had spent its tokens);
    None when every event asked for is declared."""
    asked = list(dict.fromkeys(asked_for or ()))
    if not asked or not selected:
        return None
    known = sorted({e for plan, _ in selected.values() for e in plan.declaration.events})
    unknown = [e for e in asked if e not in known]
    if not unknown:
        return None
    return words.unknown_events(unknown, known)


@dataclass(frozen=True, slots=True)
class _Check:
    """The design check as the plan shows it (remembered in pytest's cache)."""

    worst_limit: float | None
    worst_base_rate: float
    ok: bool
    replicates_needed: int | None
    #: The worst limit as printed (rounded up), kept so that a cached check prints it
    #: without importing the engine (numpy, scipy): about 2.5 s a session.
    shown: str
    #: Read at the baseline's rates (--prove-design-rates=baseline): what it read, said in
    #: the refusal; the plan's line; the summary's note when only the rates let it pass.
    basis: str = ""
    direction: str = "rise"
    line: str = ""
    note: str = ""


def _baseline_of(config: pytest.Config, settings: Settings) -> Any:
    """The baseline whose rates the design check reads (--prove-design-rates=baseline, on
    by default with --prove-baseline), or None: the session's, or on an xdist worker read
    from the store (a baseline that cannot be read leaves every base rate to the check;
    the controller refuses the run for it)."""
    name = getattr(config.option, "prove_baseline", None)
    if not settings.design_rates or not name:
        return None
    from ..store import Store, StoreError
    from .session import SESSION_KEY

    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        return session.baseline
    try:
        return Store(settings.store).load_baseline(name)
    except (StoreError, OSError):
        return None


#: The baseline's name and each test's (x, n) in it, when the checks read its rates.
Rates = tuple[str, list[tuple[int, int]]]


def _digest(rates: Rates) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(list(rates)).encode()).hexdigest()[:20]


def _rates_check(config: pytest.Config, rates: Rates, replicates: int, settings: Settings,
                 paired: bool, kappa: float) -> _Check:
    """The design check at the baseline's rates (each test's exact interval), remembered in
    pytest's cache under its sizes and the baseline's counts."""
    name, counts = rates
    key = _key("design-rates", f"{replicates}-{len(counts)}-{int(paired)}-{settings.q}-"
                                f"{settings.max_mde}-{kappa!r}-{_digest(rates)}")
    found: _Check | None = _cached(config, key, _Check)
    if found is not None:
        return found
    with _one_worker(config, settings):
        found = _cached(config, key, _Check)
        if found is not None:
            return found
        from ..stats import baseline_intervals, rates_design_check

        check = rates_design_check(replicates, len(counts), baseline_intervals(counts),
                                   paired=paired, q=settings.q, max_mde=settings.max_mde,
                                   kappa=kappa if paired and kappa < 1.0 else None)
        design = _Check(
            worst_limit=check.worst_limit, worst_base_rate=check.worst_base_rate,
            ok=check.ok, replicates_needed=check.replicates_needed,
            shown=words.limit_shown(check.worst_limit),
            basis=words.rates_basis(name, check.level, check.fewest_any_rate),
            direction=check.worst_direction,
            line=words.rates_line(baseline=name, level=check.level, m=len(counts),
                                  unknown=sum(1 for _, n in counts if n == 0),
                                  replicates=replicates, fewest=check.fewest,
                                  fewest_any_rate=check.fewest_any_rate, ok=check.ok,
                                  ok_any_rate=check.ok_any_rate),
            note=words.rates_note(baseline=name, level=check.level, replicates=replicates,
                                  fewest_any_rate=check.fewest_any_rate)
            if check.only_from_rates else "")
        _remember(config, key, {field: getattr(design, field)
                                for field in _Check.__dataclass_fields__})
        return design


@dataclass(frozen=True, slots=True)
class _MarginCheck:
    """The margin's design check as the plan shows it (remembered in pytest's cache)."""

    ok: bool
    line: str  # the plan's line
    advice: str  # what would pass, when not ok
    note: str = ""  # the summary's, when only the baseline's rates let it pass


def _key(kind: str, sizes: str) -> str:
    """A check's key in pytest's cache: its kind, the pytest-prove version that computed it
    (a release may change a check's figures or its method: an entry another version wrote
    is never read, only computed again), and what it depends on."""
    from .. import __version__

    return f"prove/{kind}/{__version__}-{sizes}"


def _cached(config: pytest.Config, key: str, kind: type[Any]) -> Any:
    """The check remembered under ``key`` in pytest's cache, or None."""
    cache = getattr(config, "cache", None)
    found = None if cache is None else cache.get(key, None)
    if isinstance(found, dict):
        try:
            return kind(**found)
        except TypeError:
            pass
    return None


def _one_worker(config: pytest.Config,
                settings: Settings) -> contextlib.AbstractContextManager[object]:
    """On an xdist worker, a lock in pytest's cache around computing a check: every worker
    collects the same items and checks the same design, and the first to take the lock
    computes it (importing numpy and scipy, about 0.5 s of CPU) while the others wait, then
    read it from the cache.  Elsewhere, or without a cache, nothing."""
    cache = getattr(config, "cache", None)
    if not settings.is_worker or cache is None:
        return contextlib.nullcontext()
    try:
        folder = cache.mkdir("prove-design")
    except OSError:
        return contextlib.nullcontext()
    return FileLock(str(folder / "lock"))


def _remember(config: pytest.Config, key: str, value: dict[str, Any]) -> None:
    cache = getattr(config, "cache", None)
    if cache is not None:
        cache.set(key, value)


def _design_check(config: pytest.Config, replicates: int, m: int,
                  settings: Settings, paired: bool) -> _Check:
    """The engine's design check, remembered in pytest's cache: it depends on sizes alone."""
    key = _key("design", f"{replicates}-{m}-{int(paired)}-{settings.q}-{settings.max_mde}")
    found: _Check | None = _cached(config, key, _Check)
    if found is not None:
        return found
    with _one_worker(config, settings):
        found = _cached(config, key, _Check)  # another worker's, computed while this waited
        if found is not None:
            return found
        return _computed_design_check(config, key, replicates, m, settings, paired)


def _computed_design_check(config: pytest.Config, key: str, replicates: int, m: int,
                           settings: Settings, paired: bool) -> _Check:
    from ..stats import design_check  # numpy and scipy: imported only to compute a check

    check = design_check(replicates, m, paired=paired, q=settings.q,
                         max_mde=settings.max_mde)
    design = _Check(worst_limit=check.worst_limit, worst_base_rate=check.worst_base_rate,
                    ok=check.ok, replicates_needed=check.replicates_needed,
                    shown=words.limit_shown(check.worst_limit))
    _remember(config, key, {"worst_limit": design.worst_limit,
                            "worst_base_rate": design.worst_base_rate, "ok": design.ok,
                            "replicates_needed": design.replicates_needed,
                            "shown": design.shown})
    return design


def _agreement_check(config: pytest.Config, replicates: int, m: int, settings: Settings,
                     paired: bool) -> tuple[_Check, str | None, str | None, float]:
    """The paired design check at the agreement seen in --prove-agreement-from's runs (its
    one-sided lower bound): the check, the plan's line, why the runs cannot be read, and the
    discordance ratio the margin's design check reads (1 when they cannot)."""
    from ..errors import ProveError
    from ..review.aa import observed_agreement
    from ..stats import twin_design_check
    from ..store import Store

    try:
        done = observed_agreement(Store(settings.store), settings.agreement_from,
                                  q=settings.q, max_mde=settings.max_mde,
                                  missing=settings.missing)
    except ProveError as exc:  # the plan reads the independent check; the run stops
        return (_design_check(config, replicates, m, settings, paired), None,
                f"--prove-agreement-from={','.join(settings.agreement_from)}: {exc}", 1.0)
    twins = done.twins
    assert twins is not None
    kappa = 1.0 if twins.pooled.upper is None else min(twins.pooled.upper, 1.0)
    check = twin_design_check(replicates, m, kappa=kappa, q=settings.q,
                              max_mde=settings.max_mde)
    design = _Check(worst_limit=check.worst_limit, worst_base_rate=check.worst_base_rate,
                    ok=check.ok, replicates_needed=check.replicates_needed,
                    shown=words.limit_shown(check.worst_limit))
    return design, words.agreement_line(done.labels.before, done.labels.after, twins,
                                        kappa), None, kappa


def _margin_check(config: pytest.Config, replicates: int, m: int,
                  settings: Settings, paired: bool,
                  kappa: float = 1.0, rates: Rates | None = None) -> _MarginCheck | None:
    """The margin's design check (--prove-margin), remembered in pytest's cache; at the
    baseline's ``rates`` when given."""
    if settings.margin is None:
        return None
    key = _key("margin-design", f"{replicates}-{m}-{int(paired)}-{settings.q}-"
               + ("seq-" if settings.sequential else "") +
               f"{settings.margin}" + ("" if kappa == 1.0 else f"-kappa{kappa!r}")
               + ("" if rates is None else f"-rates{_digest(rates)}"))
    found: _MarginCheck | None = _cached(config, key, _MarginCheck)
    if found is not None:
        return found
    with _one_worker(config, settings):
        found = _cached(config, key, _MarginCheck)
        if found is not None:
            return found
        return _computed_margin_check(config, key, replicates, m, settings, paired, kappa,
                                      rates)


def _computed_margin_check(config: pytest.Config, key: str, replicates: int, m: int,
                           settings: Settings, paired: bool, kappa: float,
                           rates: Rates | None) -> _MarginCheck:
    from ..stats import baseline_intervals, margin_design_check, margin_rates_check

    assert settings.margin is not None
    # A sequential run tests the margin at its looks, its last at a share of q: the claim's
    # power is sized there (stats/_seq_margin.py).
    level = settings.q
    if settings.sequential:
        from ..stats import sequential_margin_level

        level = sequential_margin_level(replicates, settings.q)
    if rates is None:
        check = margin_design_check(replicates, m, paired=paired, margin=settings.margin,
                                    q=level, kappa=kappa if paired else 1.0)
    else:
        check = margin_rates_check(replicates, m, baseline_intervals(rates[1]),
                                   paired=paired, margin=settings.margin, q=level,
                                   kappa=kappa if paired else 1.0)
    note = ("" if rates is None or not check.ok or check.ok_any_rate is not False else
            words.margin_rates_note(baseline=rates[0], replicates=replicates,
                                    margin=settings.margin))
    design = _MarginCheck(ok=check.ok, line=words.margin_line(check, m, settings.margin),
                          advice=words.margin_advice(check, m, settings.margin), note=note)
    _remember(config, key, {"ok": design.ok, "line": design.line, "advice": design.advice,
                            "note": design.note})
    return design


@dataclass(slots=True)
class Design:
    """What the checks after selection decided: the plan's lines and what would stop the
    run (the design check, the margin's, a sequential run's)."""

    replicates: int  # the fewest a selected rollout runs
    m: int  # the tests the gate reads: conditions times events
    #: The design check, or None when nothing reads it: a run (not a plan) that allows an
    #: underpowered design, where leaving it out spares every process (each xdist worker
    #: collects) the engine's import, about 0.9 s of CPU.
    check: _Check | None
    margin: _MarginCheck | None
    lines: list[str] = field(default_factory=list)
    sequential_refusal: str | None = None
    target_refusal: str | None = None  # the targets' design check (plugin/targets.py)
    #: --prove-agreement-from named runs whose twins cannot be read.
    agreement_refusal: str | None = None
    #: For the cost estimate: each rollout's condition keys and the replicates each runs.
    planned: dict[str, tuple[set[str], int]] = field(default_factory=dict)

    def plan_end(self, config: pytest.Config, settings: Settings) -> list[str]:
        """The plan's last lines: the expected cost and why the run would stop (noting for
        the session's exit status that it would)."""
        lines = budget.plan_lines(config, self.planned)
        if settings.sequential and config.option.prove_plan_from:
            lines.append(words.SEQUENTIAL_COST)
        stops = [] if self.sequential_refusal is None else [
            words.would_stop(self.sequential_refusal)]
        if not self.m and settings.margin is not None:
            stops.append(words.would_stop(words.margin_without_outcomes(settings.margin)))
        if not settings.allow_underpowered:
            if self.check is not None and not self.check.ok:
                # The plan is the place to learn this: say it, and exit as the run would.
                stops.append(words.design_fails_in_plan(self.check.replicates_needed,
                                                        settings.max_mde, self.check.basis))
            if self.margin is not None and not self.margin.ok:
                stops.append(words.margin_fails_in_plan(self.margin.advice))
        if self.target_refusal is not None:
            stops.append(words.would_stop(self.target_refusal))
        if self.agreement_refusal is not None:
            stops.append(words.would_stop(self.agreement_refusal))
        if stops:
            config.stash[PLAN_FAILS_KEY] = True
        return [*lines, *stops]

    def refusal(self, settings: Settings) -> str | None:
        """Why the run is refused before any rollout runs, or None."""
        if self.agreement_refusal is not None:
            return self.agreement_refusal
        if not self.m and settings.margin is not None:
            return words.margin_without_outcomes(settings.margin)
        if self.check is not None and not self.check.ok and not settings.allow_underpowered:
            return words.design_failed(
                replicates=self.replicates, m=self.m, shown=self.check.shown,
                worst_base_rate=self.check.worst_base_rate, max_mde=settings.max_mde,
                replicates_needed=self.check.replicates_needed, basis=self.check.basis,
                direction=self.check.direction)
        if self.margin is not None and not self.margin.ok and not settings.allow_underpowered:
            return words.margin_failed(self.replicates, self.margin.advice)
        return self.sequential_refusal or self.target_refusal


def decide(config: pytest.Config, items: list[pytest.Item], sweep: list[pytest.Item],
           selected: Selected, kept: Mapping[str, Mapping[str, list[int]]],
           settings: Settings) -> Design:
    """Run the checks on the selected rollouts (``sweep``: every shard's items), and order
    a sequential run's items look by look."""
    # A rollout that declares metrics only has no outcome row for the design check to read.
    outcomes = [(plan, keys) for plan, keys in selected.values()
                if not plan.declaration.metrics_only]
    # A rollout's reference arm is what its other arms are compared with: it adds no test.
    compared = [(plan, keys) for plan, keys in outcomes
                if not plan.arm or plan.arm != plan.declaration.reference_arm]
    outcomes = compared or outcomes
    # Arms are compared twin by twin with their reference arm: a paired design.
    paired = settings.paired or any(plan.arm for plan, _ in selected.values())
    m = sum(len(keys) * len(plan.declaration.tested()) for plan, keys in outcomes)
    replicates = min(plan.total for plan, _ in (outcomes or selected.values()))
    cells = sum(len(keys) for _, keys in selected.values())
    design = Design(replicates, m, None, None)
    if not m:
        if settings.plan_only:
            design.lines = words.plan_head_metrics_only(
                episodes=sum(len(keys) * plan.total for plan, keys in selected.values()),
                rollouts=len(selected), cells=cells, replicates=replicates)
    elif settings.plan_only or not settings.allow_underpowered or settings.agreement_from:
        # Only the plan prints these checks, and only a run that does not allow an
        # underpowered design is refused by them.
        if settings.agreement_from and paired:
            check, said, design.agreement_refusal, kappa = _agreement_check(
                config, replicates, m, settings, paired)
        else:
            check, said, kappa = None, None, 1.0
        # Arms are compared with their reference arm in this session, not the baseline.
        baseline = None if any(plan.arm for plan, _ in selected.values()) else (
            _baseline_of(config, settings))
        rates: Rates | None = None
        if baseline is not None:
            from ..review.rates import baseline_counts

            rates = (str(baseline.name), baseline_counts(baseline, [
                (plan.rollout_id, key, event) for plan, keys in outcomes
                for key in sorted(keys) for event in plan.declaration.tested()]))
            check = _rates_check(config, rates, replicates, settings, paired, kappa)
        elif check is None:
            check = _design_check(config, replicates, m, settings, paired)
        design.check = check
        design.lines = words.plan_head(
            episodes=sum(len(keys) * plan.total for plan, keys in selected.values()),
            rollouts=len(selected), cells=cells, replicates=replicates, shown=check.shown,
            worst_base_rate=check.worst_base_rate, paired=paired, q=settings.q,
            m=m, max_mde=settings.max_mde, direction=check.direction)
        if check.line:
            design.lines.append(check.line)
        if said is not None:
            design.lines.append(said)
        design.margin = _margin_check(config, replicates, m, settings, paired, kappa, rates)
        if design.margin is not None:
            design.lines.append(design.margin.line)
        notes = [c.note for c in (check, design.margin) if c is not None and c.note]
        if notes and not settings.plan_only:
            config.stash[DESIGN_NOTE_KEY] = "; ".join(notes)
    from .sequential import declared

    note, design.sequential_refusal = declared(
        config, settings, {rid: plan.declaration for rid, (plan, _) in selected.items()})
    if note is not None:
        design.lines.append(note)
    design.planned = {rid: (keys, plan.total) for rid, (plan, keys) in selected.items()}
    if any(plan.declaration.targets for plan, _ in selected.values()):
        from .targets import target_design

        target_lines, design.target_refusal = target_design(selected, settings)
        design.lines.extend(target_lines)
    if settings.plan_only and any(plan.declaration.metrics for plan, _ in selected.values()):
        design.lines.extend(_metric_limits(config, selected, settings))
    if settings.sequential and design.sequential_refusal is None:
        _sequential(config, design, items, selected, kept, settings, cells)
    if settings.shard is not None:
        design.lines.append(shards.plan_line(settings.shard, items, sweep))
    return design


def _metric_limits(config: pytest.Config, selected: Selected,
                   settings: Settings) -> list[str]:
    """--prove-plan: each metric row's detection limit, from the baseline's values."""
    from ..review.metrics import planned_limits
    from .session import SESSION_KEY

    session = config.stash.get(SESSION_KEY, None)
    baseline = None if session is None else session.baseline
    if baseline is None:
        return words.metric_limit_lines([], None)
    found = planned_limits(baseline, {rid: (plan.declaration, keys, plan.total)
                                      for rid, (plan, keys) in selected.items()},
                           paired=settings.paired, q=settings.q)
    return words.metric_limit_lines(found, baseline.name, sequential=settings.sequential)


def _sequential_plan(config: pytest.Config, replicates: int, m: int,
                     settings: Settings) -> tuple[Any, float | None]:
    """The sequential design (paired) and, with a margin, the replicates a condition is
    expected to run until shown within it, remembered in pytest's cache as the design check
    is: every xdist worker collects the same items and would compute the same design (about
    2 s of CPU each at 16 tests), so the first to take the lock computes it and the others
    read it.  What a worker reads only words the plan, orders the items and refuses an
    underpowered design; the controller decides the looks on a design it computes itself."""
    from ..stats import SEQUENTIAL_VERSION, design_from_dict, sequential_design

    margin = settings.margin
    key = _key("sequential-design", f"{replicates}-{m}-{settings.q}-{settings.max_mde}-"
                                     f"{'' if margin is None else margin}")

    def cached() -> tuple[Any, float | None] | None:
        cache = getattr(config, "cache", None)
        found = None if cache is None else cache.get(key, None)
        if not isinstance(found, dict):
            return None
        try:
            plan = design_from_dict(found.get("design"))
        except ValueError:
            return None  # damaged, or written by another version: computed again
        within = found.get("within")
        if (plan.replicates, plan.m, plan.q, plan.max_mde, plan.paired, plan.version) != (
                replicates, m, settings.q, settings.max_mde, True, SEQUENTIAL_VERSION):
            return None  # another design, or one an older method recorded
        if margin is None:
            return plan, None
        if not isinstance(within, (int, float)) or not 0 < within <= plan.replicates:
            return None
        return plan, float(within)

    found = cached()
    if found is not None:
        return found
    with _one_worker(config, settings):
        found = cached()
        if found is not None:
            return found
        plan = sequential_design(replicates, m, paired=True, q=settings.q,
                                 max_mde=settings.max_mde)
        within: float | None = None
        if margin is not None:
            # A condition stops once shown within the margin, not for futility.
            from ..stats import sequential_margin_expected

            within = sequential_margin_expected(plan.looks, margin, settings.q,
                                                paired=True, nuisance=0.24)
        _remember(config, key, {"design": plan.to_dict(), "within": within})
        return plan, within


def _sequential(config: pytest.Config, design: Design, items: list[pytest.Item],
                selected: Selected, kept: Mapping[str, Mapping[str, list[int]]],
                settings: Settings, cells: int) -> None:
    """--prove-sequential: the plan's line (the maximum and expected episodes), why the run
    is refused (or None), the replicates a condition is expected to run when nothing
    changed, and the items put in the order of the looks."""
    replicates = design.replicates
    sizes = sorted({plan.total for plan, _ in selected.values()})
    sequential, within = _sequential_plan(config, replicates, design.m, settings)
    if len(sizes) > 1:
        design.sequential_refusal = words.sequential_sizes(sizes)
    elif not sequential.ok and not settings.allow_underpowered:
        design.sequential_refusal = words.sequential_underpowered(
            sequential, replicates, design.m, settings.max_mde)
    partial = next((f"{plan.label} [{key}]" for rid, (plan, keys) in selected.items()
                    for key in sorted(keys)
                    if len(set(kept.get(rid, {}).get(key, ()))) < plan.total
                    and kept.get(rid, {}).get(key)), None)
    if partial is not None and design.sequential_refusal is None:
        design.sequential_refusal = words.sequential_partial(partial)
    _in_looks(items, sequential.looks)
    design.lines.append(words.sequential_line(sequential, replicates, cells, settings.max_mde))
    expected = round(sequential.expected_unchanged)
    if settings.margin is not None and within is not None:
        from ..stats import sequential_margin_looks, sequential_margin_shares

        chosen = sequential_margin_looks(sequential.looks)
        shares = sequential_margin_shares(sequential.looks)
        design.lines.append(words.sequential_margin_line(
            [sequential.looks[i] for i in chosen], [shares[i] for i in chosen], settings.q,
            settings.margin, within, cells))
        expected = round(within)
    design.planned = {rid: (keys, expected) for rid, (_, keys) in selected.items()}


def _in_looks(items: list[pytest.Item], looks: tuple[int, ...]) -> None:
    """Order the rollout items look by look, and within a look replicate by replicate across
    conditions, so that the looks fill in order: one process runs each look's replicates
    before the next look's, and xdist's load scheduling, which hands each worker a run of
    consecutive items, hands out the first look first. Other items keep their places; the
    order is the same on every worker (xdist requires it)."""
    places = [i for i, item in enumerate(items) if PLAN_KEY in item.stash]
    rollouts = [items[i] for i in places]

    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        position, item = pair
        first = item.stash[PLAN_KEY].replicates[0]
        return bisect.bisect_right(looks, first), first, position

    ordered = [item for _, item in sorted(enumerate(rollouts), key=key)]
    for place, item in zip(places, ordered, strict=True):
        items[place] = item
