"""The support agent as a pytest-prove rollout: 3 ticket kinds x 200 replicates."""

from __future__ import annotations

import pytest
from support_bot import MAX_STEPS, handle

import pytest_prove as prove


@prove.rollout(
    replicates=200,
    outcomes=["resolved", "unresolved", "timeout"],
    failures=["unresolved", "timeout"],
    successes=["resolved"],
    t_unit="steps",
    id="support",
)
@pytest.mark.parametrize("ticket", ["refund", "password", "shipping"])
def test_support(ticket: str, prove_seed: int) -> prove.Episode:
    reply = handle(ticket, seed=prove_seed)
    if reply.timed_out:
        outcome = "timeout"
    elif reply.resolved:
        outcome = "resolved"
    else:
        outcome = "unresolved"
    return prove.Episode(outcome, t=reply.steps, horizon=MAX_STEPS + 1,
                         meta={"case_id": ticket})
