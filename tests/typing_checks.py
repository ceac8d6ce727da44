"""The public API as users write it, checked by mypy --strict (tests/test_typing.py).

This file is never run, and pytest does not collect it: mypy reads it, with the project's
configuration, and must find nothing, so that what a user's type checker says about their
rollouts stays true.  ``assert_type`` pins what the API returns; a line that must be
rejected carries ``# type: ignore[code]``, and ``warn_unused_ignores`` (in ``strict``) fails
the check the day such a line is accepted again.
"""

from __future__ import annotations

import contextlib
from typing import Any, assert_type

import pytest

import pytest_prove as prove
from pytest_prove.errors import ProveError


# A test function declared as a rollout keeps its own type: the decorator returns it as it was.
@prove.rollout(replicates=200, failures=["unresolved"], successes=["resolved"], concurrency=4,
               timeout=30.0, id="support", sequential=True)
@pytest.mark.parametrize("ticket", ["refund", "password"])
def check_a_test_declared_as_a_rollout(ticket: str, prove_seed: int) -> prove.Episode:
    with prove.step("read_case"):
        prove.usage("gpt-4o", input=120, output=30)
    return prove.Episode("resolved" if prove_seed % 2 else "unresolved", meta={"case_id": ticket})


assert_type(check_a_test_declared_as_a_rollout("refund", 1), prove.Episode)


# Arms: names in a list (or any iterable of str), a reference among them.
@prove.rollout(failures=["unresolved"], successes=["resolved"], arms=["current", "cheaper"],
               reference="current")
def check_a_rollout_with_arms(prove_seed: int, prove_arm: str) -> prove.Episode:
    return prove.Episode("resolved" if prove_arm == "current" else "unresolved")


@prove.rollout(failures=["unresolved"], successes=["resolved"])
async def check_an_async_rollout(prove_cfg: dict[str, Any], prove_replicate: int,
                                 prove_block: tuple[int, ...]) -> prove.Episode:
    return prove.Episode("resolved", t=len(prove_block), horizon=prove_replicate + 10)


async def check_an_async_rollout_keeps_its_type() -> None:
    assert_type(await check_an_async_rollout({}, 0, (0,)), prove.Episode)


# A sweep's ``fn(cfg, seed)`` with its axes, captured and under chaos.
@prove.rollout(failures=["crash"], outcomes=["crash", "done"], t_unit="steps",
               axes={"model": ["small", "large"], "temperature": {"type": "ordinal",
                                                                  "values": [0.0, 0.7]}},
               capture={"instrument": ["openai"]}, chaos={"faults": {"http_429": 0.05}},
               metrics={"judge": "higher", "latency_s": "lower"},
               targets={"crash": "<= 0.10", "model=small: no outcome": "<= 0.5"})
def check_a_sweep_target(cfg: dict[str, Any], seed: int) -> prove.Episode:
    if cfg["model"] == "small":
        raise prove.NoOutcome("rate limited")
    return prove.Episode("done", t=3, horizon=10)


assert_type(check_a_sweep_target({"model": "large"}, 7), prove.Episode)


def check_an_episode_and_the_helpers() -> None:
    episode = prove.Episode("resolved", t=2.5, horizon=10, meta={"case_id": 3})
    assert_type(episode.outcome, str | None)  # None: a rollout of metrics only
    assert_type(episode.t, float | int | None)
    assert_type(episode.horizon, float | int | None)
    assert_type(episode.meta, dict[str, Any])
    assert_type(episode.case_id, str | int | None)
    scored = prove.Episode("resolved", metrics={"judge": 0.8, "steps_to_answer": 6})
    assert_type(scored.metrics, dict[str, float])
    only = prove.Episode(metrics={"judge": 0.8})  # a rollout that declares metrics only
    assert_type(only.outcome, str | None)
    assert_type(prove.derive_seed("salt", "support", "ticket=refund", 0), int)
    assert_type(prove.usage("m", 1), None)
    assert_type(prove.__version__, str)
    with prove.step("plan") as entered:
        assert_type(entered, None)


def check_the_errors_a_user_catches() -> None:
    with contextlib.suppress(ProveError):
        raise prove.RolloutContractError("an outcome not declared")
    assert issubclass(prove.RolloutContractError, ValueError)
    assert_type(prove.NoOutcome("why").reason, str)


# What mypy must refuse.  A bare ``@prove.rollout`` is refused when the test runs (it has no
# failures nor successes to declare): it must be refused here too, not only then.
@prove.rollout  # type: ignore[arg-type]
def check_a_bare_rollout_is_refused(prove_seed: int) -> prove.Episode:
    return prove.Episode("resolved")


def check_arguments_of_the_wrong_type_are_refused() -> None:
    prove.rollout(replicates="100", failures=["x"])  # type: ignore[arg-type]
    prove.Episode(1)  # type: ignore[arg-type]
    prove.Episode("x", metrics=["judge"])  # type: ignore[arg-type]
    prove.rollout(failures=["x"], targets={"x": 0.1})  # type: ignore[dict-item]
    prove.usage("m", input="12")  # type: ignore[arg-type]
