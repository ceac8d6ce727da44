"""A two-call triage agent on the openai client: read the ticket, then answer it."""

from __future__ import annotations

from typing import Any


def triage(client: Any, ticket: str, seed: int) -> bool:
    """Whether the agent resolved ``ticket``: both of its model calls answered well.

    It leaves retries to the client (``max_retries``), as most agents do; a call that
    still fails raises, and the rollout says what that means.
    """
    for step in ("read", "answer"):
        reply = client.chat.completions.create(
            model="local-model", seed=seed,
            messages=[{"role": "user", "content": f"{step} {ticket}"}])
        if reply.choices[0].message.content != "ok":
            return False
    return True
