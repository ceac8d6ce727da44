"""pytest-prove: did this change make my agent fail more often, and where?

The public face: declare a rollout, return an episode, record steps and usage.
``rollout`` is imported on first use, so that reading stored runs (the command
line, the statistics) never imports pytest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .declare.episode import Episode, NoOutcome, RolloutContractError
from .declare.seeds import derive_seed
from .running.recording import step, usage

if TYPE_CHECKING:
    from .api import rollout

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


def __getattr__(name: str) -> Any:
    if name == "rollout":
        from .api import rollout

        return rollout
    raise AttributeError(f"module 'pytest_prove' has no attribute {name!r}")
