"""``@prove.rollout``: declare a rollout on a test or on a ``fn(cfg, seed)``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar

import pytest

from .declare.spec import Axis, Declaration, SpecError

__all__ = ["ROLLOUT_ATTR", "declaration_of", "declared", "listen", "rollout"]

F = TypeVar("F", bound=Callable[..., Any])

#: The attribute a decorated function carries its declaration in.
ROLLOUT_ATTR: Final = "__prove_rollout__"

#: The kinds of rollout this process has declared: "test" (on a test function) and "axes"
#: (on a ``fn(cfg, seed)``).  The plugin registers the collection hooks of a kind only once
#: one exists (:func:`listen`): a session of plain tests pays nothing for them per item.
_DECLARED: set[str] = set()
_LISTENERS: list[Callable[[str], None]] = []


def declared(kind: str) -> bool:
    """Whether this process has declared a rollout of ``kind`` ("test" or "axes")."""
    return kind in _DECLARED


def listen(callback: Callable[[str], None]) -> Callable[[], None]:
    """Have ``callback(kind)`` called when the first rollout of a kind is declared; returns
    what stops it."""
    _LISTENERS.append(callback)

    def stop() -> None:
        if callback in _LISTENERS:
            _LISTENERS.remove(callback)

    return stop


def _note_declared(kind: str) -> None:
    if kind in _DECLARED:
        return
    _DECLARED.add(kind)
    for callback in list(_LISTENERS):
        callback(kind)


def _axes(axes: Mapping[str, Any]) -> tuple[Axis, ...]:
    found: list[Axis] = []
    for name, spec in axes.items():
        if isinstance(spec, Mapping):
            kind = spec.get("type", "categorical")
            values = spec.get("values")
        else:
            kind, values = "categorical", spec
        if isinstance(values, str) or not isinstance(values, Iterable):
            raise SpecError(f"axis {name!r} needs a list of values, got {values!r}")
        found.append(Axis(name, tuple(values), kind))
    return tuple(found)


def rollout(
    # A positional argument is never valid (a bare ``@prove.rollout`` has nothing to
    # declare): typed None so that a type checker refuses it, and kept so that it is
    # refused at run time with what to write instead of Python's own message.
    fn: None = None,
    /,
    *,
    replicates: int = 100,
    failures: Iterable[str] = (),
    successes: Iterable[str] = (),
    outcomes: Iterable[str] = (),
    t_unit: str | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,
    axes: Mapping[str, Any] | None = None,
    id: str | None = None,  # noqa: A002 - it is the rollout's id
    capture: Mapping[str, Any] | None = None,
    chaos: Mapping[str, Any] | None = None,
    sequential: bool | None = None,
    metrics: Mapping[str, str] | None = None,
    targets: Mapping[str, str] | None = None,
    keep_answers: bool = False,
    grader: str | None = None,
    arms: Iterable[str] | None = None,
    reference: str | None = None,
) -> Callable[[F], F]:
    """Declare a rollout.

    On a test function (its axes are its ``pytest.mark.parametrize`` arguments)::

        @prove.rollout(replicates=200, failures=["unresolved"], successes=["resolved"])
        @pytest.mark.parametrize("ticket", ["refund", "password"])
        def test_support(ticket, prove_seed):
            return prove.Episode("resolved" if handle(ticket, prove_seed) else "unresolved")

    Or on a plain ``fn(cfg, seed)`` with ``axes={"ticket": ["refund", "password"]}``,
    which the plugin collects like a sweep spec.  ``id`` names the rollout in the
    store (default: its test node id); keep it stable so that baselines pair.
    ``chaos`` injects seeded faults into the episodes' HTTP calls (docs/chaos.md).
    ``sequential=True`` stops each condition once it is decided against the baseline, as
    ``--prove-sequential`` does (docs/statistics.md, "Sequential runs"); a session is
    sequential only when every rollout it selects asks for it.
    ``metrics={"judge": "higher", "latency_s": "lower"}`` declares the numbers its episodes
    report (``prove.Episode(outcome, metrics={...})``) and which way is better: each is
    tested per condition against the baseline, and one that moved the worse way fails the
    gate (docs/statistics.md, "Metric rows"). When only scores matter, declare metrics and no
    outcomes and return ``prove.Episode(metrics={...})``: the metric rows are then the whole
    comparison (docs/metrics.md, "Metrics without an outcome").
    ``targets={"unresolved": "<= 0.10", "pass^8": ">= 0.5"}`` sets absolute targets each
    condition must meet, no baseline needed; ``"ticket=refund: resolved": ">= 0.9"`` holds
    one to a condition (docs/targets.md).
    ``keep_answers=True`` stores each episode's ``answer`` (``prove.Episode(outcome,
    answer=...)``) so that ``pytest-prove regrade`` can grade it again; ``grader=
    "module:function"`` grades an episode that returns an answer and no outcome, and keeps
    the answers (docs/grading.md).
    ``arms=["current", "cheaper"]`` runs every (condition, replicate) once per arm, on one
    seed, and compares each arm with the reference arm (the first, or ``reference=``) in the
    same session, as a baseline comparison would; the test takes its arm from the
    ``prove_arm`` fixture, a ``fn(cfg, seed)`` from ``cfg["arm"]`` (docs/arms.md).
    """
    if fn is not None:
        raise TypeError(
            "@prove.rollout needs its declaration: @prove.rollout(failures=[...], "
            "successes=[...], replicates=N)"
        )
    try:
        declaration = Declaration(
            failures=tuple(failures),
            successes=tuple(successes),
            outcomes=tuple(outcomes),
            replicates=replicates,
            t_unit=t_unit,
            concurrency=concurrency,
            timeout=timeout,
            axes=None if axes is None else _axes(axes),
            rollout_id=id,
            capture=capture,
            chaos=chaos,
            sequential=sequential,
            metrics=metrics or (),
            targets=targets or (),
            keep_answers=keep_answers,
            grader=grader,
            arms=() if arms is None else arms,  # type: ignore[arg-type]  # checked there
            reference=reference,
        )
    except SpecError as exc:
        # The user's declaration is wrong: pytest shows their line and the message, not the
        # plugin's frames that found it.
        __tracebackhide__ = True
        raise exc.with_traceback(None) from None

    def decorate(target: F) -> F:
        if not callable(target):
            raise TypeError(f"@prove.rollout decorates a function, got {target!r}")
        setattr(target, ROLLOUT_ATTR, declaration)
        _note_declared("test" if declaration.axes is None else "axes")
        if declaration.axes is None:
            # A test function: one item per replicate needs the block parameter (and one
            # per arm the arm's).
            used = ("prove_block", "prove_arm") if declaration.arms else ("prove_block",)
            return pytest.mark.usefixtures(*used)(target)  # type: ignore[no-any-return]
        return target

    return decorate


def declaration_of(obj: object) -> Declaration | None:
    """The declaration ``@prove.rollout`` attached to ``obj``, if any."""
    found = getattr(obj, ROLLOUT_ATTR, None)
    return found if isinstance(found, Declaration) else None
