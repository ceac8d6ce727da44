"""The scored agent as a rollout: its outcome, and two metrics with the way each is better."""

from __future__ import annotations

import pytest
from scored_bot import answer

import pytest_prove as prove


@prove.rollout(
    replicates=130,
    failures=["unresolved"],
    successes=["resolved"],
    id="scored",
    metrics={"judge": "higher", "latency_s": "lower"},
)
@pytest.mark.parametrize("ticket", ["refund", "password"])
def test_scored(ticket: str, prove_seed: int) -> prove.Episode:
    found = answer(ticket, prove_seed)
    return prove.Episode("resolved" if found.resolved else "unresolved",
                         metrics={"judge": found.judge, "latency_s": found.latency_s},
                         meta={"case_id": ticket})
