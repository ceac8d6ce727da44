"""A sweep's end: the garbage collector stops walking the objects the session still holds.

Once the last test of a session has run, pytest collects garbage twice more (its
``unraisableexception`` plugin, in ``pytest_unconfigure`` and again in the config's cleanup),
and the interpreter two or three times as it exits.  Each pass walks every object still
tracked, and a sweep of 100,000 items leaves millions of them alive to the end (the items,
their reports, the terminal's statistics): these passes were most of the 10-25 s between
the last episode and the exit (``bench/sweep.py``, figure 3), in each worker and then in the
controller, which waits for the workers to exit.

So at ``pytest_sessionfinish`` of a session that ran rollouts the objects alive are frozen
(``gc.freeze``: moved where no collection looks).  A collection of the two younger
generations first finalizes what the last tests left behind (it walks only the objects made
since the last collections, not the session's millions), so that pytest still reports their
unraisable exceptions; garbage already promoted to the oldest generation is not looked for
again, as a full collection would have (this is what costs).  After pytest's last collection
the objects are unfrozen, so that a session run in-process (pytester) leaves its interpreter
as it found it; when the interpreter exits they are frozen again, and its own passes skip them
(the language does not promise a finalizer to objects still alive at exit:
https://docs.python.org/3/reference/datamodel.html#object.__del__).
"""

from __future__ import annotations

import atexit
import gc

import pytest

from ..store.reading import heap_frozen

__all__ = ["install", "settle"]

#: Set once this session froze the objects alive; its cleanup unfreezes them.
FROZEN_KEY = pytest.StashKey[bool]()


def install(config: pytest.Config) -> None:
    """From ``pytest_configure``: unfreeze in the config's cleanup.

    This plugin's ``pytest_configure`` runs before pytest's own ``unraisableexception`` one
    (a plugin registered later is called first), so this cleanup is registered first and
    runs last, after pytest's final collection."""
    config.add_cleanup(lambda: _thaw(config))


def settle(config: pytest.Config) -> None:
    """Finalize the young garbage, then freeze every object alive."""
    if gc.get_freeze_count():  # frozen by someone else, who decides when to unfreeze
        return
    gc.collect(1)
    gc.freeze()
    heap_frozen(True)
    config.stash[FROZEN_KEY] = True
    atexit.unregister(gc.freeze)  # registered once however many sessions a process runs
    atexit.register(gc.freeze)


def _thaw(config: pytest.Config) -> None:
    if config.stash.get(FROZEN_KEY, False):
        del config.stash[FROZEN_KEY]
        gc.unfreeze()
        heap_frozen(False)
