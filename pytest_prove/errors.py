"""The one base of every error a user can cause and fix.

Each message says what was expected, what was found and what to do.  The command line
catches :class:`ProveError` and prints the message (exit 1); the plugin turns it into a
usage error or a failed item; nothing a user did ends in a traceback.  The subclasses
stay ``ValueError`` where they were, so code that caught that keeps working.
"""

from __future__ import annotations

__all__ = ["ProveError"]


class ProveError(Exception):
    """Bad input, a bad name, a damaged file or a refused request: the message says the fix."""
