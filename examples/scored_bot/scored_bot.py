"""A simulated support agent that answers a ticket, with a latency and a judge's score.

Everything is drawn from the episode's seed, so twins (the same replicate before and after a
change) answer alike. ``PROMPT=terse`` stands for a prompt change that makes refund answers
30% slower and leaves their quality as it was.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    resolved: bool
    latency_s: float  # seconds the agent took
    judge: int  # a grader's score, 1 (useless) to 5 (perfect)


def answer(ticket: str, seed: int) -> Answer:
    rng = random.Random(seed)
    latency = rng.lognormvariate(0.0, 0.5)
    if os.environ.get("PROMPT") == "terse" and ticket == "refund":
        latency *= 1.3
    judge = rng.choice([1, 2, 3, 3, 4, 4, 5])
    return Answer(resolved=rng.random() < 0.9, latency_s=latency, judge=judge)
