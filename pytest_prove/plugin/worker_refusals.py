"""Why an xdist worker refuses to run the session it was given: its process already ran
one (an execnet socket server keeps it), or its pytest-prove is not the controller's."""

from __future__ import annotations

__all__ = ["other_version", "reused_worker"]

#: How many xdist worker sessions this process has configured: more than one only when an
#: execnet socket server is used again (xdist starts every other kind of worker afresh).
_WORKER_SESSIONS = [0]


def reused_worker() -> str | None:
    """Why a worker whose process already ran a session refuses to run this one, else None.

    execnet's socket server runs each connection's worker in its own process and keeps the
    modules it imported: the rollouts would run as they were imported the first time, not as
    their files read now, and the verdict would be about code no longer there."""
    _WORKER_SESSIONS[0] += 1
    if _WORKER_SESSIONS[0] == 1:
        return None
    return ("this xdist worker's process already ran a pytest session: an execnet socket "
            "server keeps its process, and the modules it imported, from one run to the "
            "next, so the rollouts could run as they were imported then rather than as "
            "their files read now. Start a fresh socket server for each run (see "
            "docs/scale.md, Remote workers)")


def other_version(controller: str | None) -> str | None:
    """Why a worker whose pytest-prove is not the controller's refuses to run, else None:
    a remote host can have another one installed, and the episodes it sent would then be
    made by one version's rules and checked, stored and compared by another's."""
    import pytest_prove

    mine = pytest_prove.__version__
    if controller == mine:
        return None
    theirs = ("a pytest-prove that sends no version (older than this one)"
              if controller is None else f"pytest-prove {controller}")
    wanted = "" if controller is None else f" (pip install pytest-prove=={controller})"
    return (f"this xdist worker runs pytest-prove {mine} and the controller {theirs}: the "
            "episodes it sent would be made by one version's rules and stored by another's. "
            f"Install the same pytest-prove on every host the workers run on{wanted}")
