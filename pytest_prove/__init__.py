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


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, the one place it is
    written); in a checkout that is not installed, read from its pyproject.toml. An xdist
    worker's is checked against the controller's (plugin/xdist.py)."""
    from importlib import metadata

    try:
        return metadata.version("pytest-prove")
    except metadata.PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    try:
        project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml")
                                .read_text(encoding="utf-8"))
        return str(project["project"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return "0+unknown"


__version__ = _version()


def __getattr__(name: str) -> Any:
    if name == "rollout":
        from .api import rollout

        return rollout
    raise AttributeError(f"module 'pytest_prove' has no attribute {name!r}")
