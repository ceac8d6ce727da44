"""The support agent's two prompt versions side by side, in one session (docs/arms.md).

Run it by its path (pytest collects a file named on its command line whatever its name; a
plain ``pytest examples/support_bot`` leaves it out, so the committed baseline's session is
unchanged)::

    pytest examples/support_bot/side_by_side.py -n 2

Every ticket kind and replicate runs once per arm on one seed, ``default`` (the careful
prompt on sim-model) and ``terse`` (the shorter prompt on sim-model-mini), and the session
compares ``terse`` with ``default`` as it would compare a run with a baseline.
``SUPPORT_BOT_ARMS=default,again`` runs the careful prompt against itself: an A/A check
that passes and prints how often the twins ended alike.
"""

from __future__ import annotations

import os

import pytest
from support_bot import MAX_STEPS, handle

import pytest_prove as prove

#: Each arm's prompt version in support_bot.py: ``again`` is the careful prompt once more,
#: for an A/A check (``SUPPORT_BOT_ARMS=default,again``: nothing differs but the arm's name).
PROMPT = {"default": "careful", "terse": "terse", "again": "careful"}
#: The arms this session runs, the reference first.
ARMS = os.environ.get("SUPPORT_BOT_ARMS", "default,terse").split(",")


@prove.rollout(
    replicates=200,
    outcomes=["resolved", "unresolved", "timeout"],
    failures=["unresolved", "timeout"],
    successes=["resolved"],
    t_unit="steps",
    id="support-arms",
    arms=ARMS,
)
@pytest.mark.parametrize("ticket", ["refund", "password", "shipping"])
def test_support(ticket: str, prove_seed: int, prove_arm: str) -> prove.Episode:
    reply = handle(ticket, seed=prove_seed, version=PROMPT[prove_arm])
    if reply.timed_out:
        outcome = "timeout"
    elif reply.resolved:
        outcome = "resolved"
    else:
        outcome = "unresolved"
    return prove.Episode(outcome, t=reply.steps, horizon=MAX_STEPS + 1,
                         meta={"case_id": ticket})
