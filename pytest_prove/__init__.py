"""pytest-prove: did this change make my agent fail more often, and where?

The public face: declare a rollout, return an episode, record steps and usage.
"""

from __future__ import annotations

from .api import rollout
from .episode import Episode, NoOutcome, RolloutContractError
from .recording import step, usage
from .seeds import derive_seed

__all__ = [
    "Episode",
    "NoOutcome",
    "RolloutContractError",
    "__version__",
    "derive_seed",
    "rollout",
    "step",
    "usage",
]

__version__ = "0.1.0"
