"""Seeds: where every replicate's randomness comes from.

The seed of one episode is a stable hash of four things: the run's salt, the
rollout's id, the condition's key and the replicate number.  It is the same on
every platform, process and Python version (BLAKE2b over UTF-8 text, read as a
big-endian unsigned 64-bit integer), so a run paired with a baseline, which
takes the baseline's salt, gives every episode a twin on the same seed.
"""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["ARM_MARK", "arm_rollout", "derive_seed", "new_salt", "split_arm"]

#: Separates the four parts; it cannot occur in a salt, an id or a key.
_SEP = "\x1f"

#: What joins a rollout's id and one of its arms (``support@arm:cheaper``): each arm is
#: stored as a rollout of its own, and every arm of a replicate runs on the seed of the
#: rollout's own id (a declared id may not hold it).
ARM_MARK = "@arm:"


def arm_rollout(rollout_id: str, arm: str) -> str:
    """The id arm ``arm`` of rollout ``rollout_id`` is stored under."""
    return f"{rollout_id}{ARM_MARK}{arm}"


def split_arm(rollout_id: str) -> tuple[str, str | None]:
    """``(the rollout's own id, its arm)`` of a stored rollout id; no arm: ``(id, None)``."""
    base, mark, arm = rollout_id.rpartition(ARM_MARK)
    return (base, arm) if mark and base and arm.isidentifier() else (rollout_id, None)


def new_salt() -> str:
    """A fresh salt for a run that is not paired with anything: 16 hex digits."""
    return secrets.token_hex(8)


def derive_seed(salt: str, rollout_id: str, condition_key: str, replicate: int) -> int:
    """The seed of one (rollout, condition, replicate) in a run with this salt.

    Returns an integer in ``[0, 2**64)``.  APIs that take smaller seeds can use
    ``seed % 2**32``; the low bits are as well mixed as the high ones.  The arms of a
    rollout (``support@arm:cheaper``) share the seed of the rollout's own id, so that every
    arm of a replicate runs on one seed.
    """
    rollout_id = split_arm(rollout_id)[0]
    if replicate < 0:
        raise ValueError(f"replicate must be >= 0, got {replicate}")
    parts = (("salt", salt), ("rollout id", rollout_id), ("condition key", condition_key))
    for name, part in parts:
        if _SEP in part:
            raise ValueError(f"the {name} {part!r} contains the reserved character U+001F")
    text = _SEP.join((salt, rollout_id, condition_key, str(int(replicate))))
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")
