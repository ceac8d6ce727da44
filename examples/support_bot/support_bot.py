"""A simulated support agent: three kinds of ticket, two prompt versions, seeded.

It stands in for an LLM agent so that the example runs anywhere, offline, in
seconds.  Like a real agent it takes steps (read the ticket, look things up,
reply), can run out of steps, and fails some tickets more often than others.
Everything it does is drawn from ``random.Random(seed)``, so one seed always
gives the same episode.

The prompt version is the change under test: ``SUPPORT_BOT_PROMPT=terse``
switches to a shorter prompt on a cheaper model ("sim-model-mini") that saves tokens
but gives up on refunds more often. ``SUPPORT_BOT_PROVIDER=v2`` simulates the provider
changing the model behind its name: every prompt version gives up on refunds 0.15 more often
(docs/arms.md, the drift check).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import pytest_prove as prove

#: Per prompt version and ticket kind: the chance the agent gives up unresolved.
GIVES_UP = {
    "careful": {"refund": 0.20, "password": 0.05, "shipping": 0.12},
    "terse": {"refund": 0.42, "password": 0.05, "shipping": 0.13},
}
#: What the simulated provider's v2 adds to every version's chance of giving up, per ticket.
PROVIDER_V2 = {"refund": 0.15, "password": 0.0, "shipping": 0.0}
#: The most steps an episode may take before it times out.
MAX_STEPS = 12
#: Tokens a step costs, per prompt version (the terse prompt is cheaper).
TOKENS_PER_STEP = {"careful": 900, "terse": 500}
#: The model each version calls: the terse prompt goes with the cheaper model.
MODEL = {"careful": "sim-model", "terse": "sim-model-mini"}


@dataclass(frozen=True)
class Reply:
    resolved: bool
    timed_out: bool
    steps: int


def prompt_version() -> str:
    version = os.environ.get("SUPPORT_BOT_PROMPT", "careful")
    if version not in GIVES_UP:
        raise ValueError(
            f"SUPPORT_BOT_PROMPT={version!r} is not a prompt version; use one of "
            f"{', '.join(GIVES_UP)}"
        )
    return version


def handle(ticket: str, seed: int, version: str | None = None) -> Reply:
    """Work one ticket on one seed and say how it ended."""
    version = version or prompt_version()
    rng = random.Random(seed)
    gives_up = GIVES_UP[version][ticket]
    if os.environ.get("SUPPORT_BOT_PROVIDER", "v1") == "v2":
        gives_up += PROVIDER_V2[ticket]
    give_up_draw = rng.random()
    lookups = rng.randint(1, MAX_STEPS)  # how many lookups this ticket needs on this seed
    with prove.step("read_ticket"):
        pass
    steps = 1
    for _ in range(lookups):
        if steps >= MAX_STEPS:
            return Reply(resolved=False, timed_out=True, steps=steps)
        with prove.step("lookup"):
            pass
        steps += 1
    prove.usage(MODEL[version], input=TOKENS_PER_STEP[version] * steps, output=80 * steps)
    with prove.step("reply"):
        pass
    return Reply(resolved=give_up_draw >= gives_up, timed_out=False, steps=steps + 1)
