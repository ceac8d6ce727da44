"""The triage agent as a rollout, with 5% of its provider calls answered 429."""

from __future__ import annotations

from typing import Any

import pytest
from triage import triage

import pytest_prove as prove

openai = pytest.importorskip("openai")


@prove.rollout(
    replicates=200,
    outcomes=["resolved", "unresolved", "gave_up"],
    failures=["unresolved", "gave_up"],
    successes=["resolved"],
    id="triage",
    # 5% of the calls to the provider get a 429 asking to wait 0.1 s (a real provider asks
    # for longer; a short wait keeps the example quick).
    chaos={"faults": {"http_429": 0.05}, "retry_after_s": 0.1, "hosts": ["127.0.0.1"]},
)
@pytest.mark.parametrize("ticket", ["billing", "outage"])
def test_triage(ticket: str, prove_seed: int, client: Any) -> prove.Episode:
    try:
        resolved = triage(client, ticket, seed=prove_seed % 2**31)
    except openai.APIStatusError as exc:  # a 429 or 5xx the retries did not get past
        return prove.Episode("gave_up", meta={"case_id": ticket, "status": exc.status_code})
    return prove.Episode("resolved" if resolved else "unresolved", meta={"case_id": ticket})
