"""The one base of every error a user can cause and fix, and the list of them all.

Each message says what was expected, what was found and what to do.  The command line
catches :class:`ProveError` and prints the message (exit 1); the plugin turns it into a
usage error or a failed item; nothing a user did ends in a traceback.  The subclasses
stay ``ValueError`` where they were, so code that caught that keeps working.

Each error class lives beside the code that raises it; :data:`USER_ERRORS` below names every
one of them, and :data:`NOT_ERRORS` every other exception class of the package, with why it
is not a :class:`ProveError`.  They are listed by name, not imported: this module is at the
bottom of the layers (docs/architecture.md) and imports nothing of the package.
``tests/test_errors.py`` walks every module of the package and fails on an exception class
that is in neither list, on one of :data:`USER_ERRORS` that does not derive from
:class:`ProveError`, and on one of :data:`NOT_ERRORS` that does.  So a new error class is
added to :data:`USER_ERRORS` with it, and derives from :class:`ProveError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["NOT_ERRORS", "USER_ERRORS", "ProveError"]


class ProveError(Exception):
    """Bad input, a bad name, a damaged file or a refused request: the message says the fix."""


#: Every error class a user can cause, by name, with what the user did.
USER_ERRORS: Final[Mapping[str, str]] = {
    "ProveError": "the base of them all",
    # What a project declares (declare/, inifile.py).
    "SpecError": "a rollout's declaration or a sweep spec that cannot be used",
    "RolloutContractError": "a rollout returned what it may not (not an Episode, an "
                            "undeclared outcome, a bad t, horizon or meta)",
    "CaptureError": "a capture setting that cannot be used",
    "ChaosError": "a chaos setting that cannot be used",
    "MetricError": "a metric declared twice with two directions, or named badly",
    "TargetError": "a target (--prove-target, ini prove_targets, targets=, [targets]) "
                   "written wrongly or naming an event not declared",
    "PriceError": "a price declaration that cannot be read",
    "EnvironmentNameError": "a name in prove_record_env or prove_record_packages (or their "
                            "options) that is no variable's or package's name",
    "IniError": "a configuration file, or a value in it, that cannot be read",
    # What is stored (record.py, store/).
    "StoreError": "an unknown run or baseline, a bad name, a damaged line",
    "BaselineIntegrityError": "a baseline cut, edited or damaged since it was saved",
    "RunBusyError": "a run being written by a session, asked to be pruned",
    # What is asked of stored runs (review/, report/).
    "RefusalError": "a question these runs cannot answer (nothing to compare)",
    "EpisodeNotFoundError": "an episode name (pytest-prove episode) no stored episode has, "
                            "or several",
    "TuiError": "pytest-prove tui without textual installed, without a terminal, or with --json",
    "GraderError": "a grader (grader=, --grader) that cannot be imported or is not a function",
    "DeclarationError": "a rollout declared otherwise in the two runs compared",
    "CaseMixError": "a condition whose episodes recorded more than one case_id",
    "AxisError": "an axis asked of the HTML report (--x, --y) that no condition has",
    "ServeError": "pytest-prove serve asked to listen on an address other than the "
                  "loopback, or on a port it cannot have",
    "_NotFoundError": "a path of pytest-prove serve that names no page, run or episode (its "
                 "404; never leaves the server)",
}

#: The package's other exception classes, by name, and why each is not a ProveError: none is
#: an error a user made.
NOT_ERRORS: Final[Mapping[str, str]] = {
    "NoOutcome": "raised by a rollout on purpose to end an episode without an outcome: the "
                 "episode is stored and its item skipped",
    "Stopped": "control flow: the session was stopped (Ctrl-C) in the middle of a block; it "
               "carries the finished replicates to be kept, then its cause is raised",
    "EpisodeTimeout": "control flow: raised into a rollout's thread at its deadline; a "
                      "BaseException, so that the rollout's own `except Exception` lets it by",
    "BlockInterrupted": "control flow: an item's block was stopped; the item reports what it "
                        "finished and the session ends after it",
    "StoreWarning": "a warning (warnings.warn), never raised: something was read with a loss",
    "NetworkBlockedError": "an OSError raised into the project's own call when --prove-plan "
                           "imports it with the network blocked; the plan names the place "
                           "and exits 4",
    "CacheMiss": "raised into the agent's HTTP call when a replayed episode makes a call the "
                 "cache does not hold; the episode then ends as an error naming the call",
    "_UnkeyableError": "control flow inside collection: caught by the hook that raised it, "
                       "which refuses the session with its message (a usage error)",
}
