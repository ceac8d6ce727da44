"""A session run in-process leaves nothing of itself alive once it has ended.

A process may run pytest sessions one after another (pytester, a tool calling
``pytest.main``, an IDE's runner).  A cache of the plugin's keyed by the rollout function
kept every session's test module alive, and through the module's loader that session's
configuration, items, reports and hook records: 23 sessions of one test file held 470,000
objects, each later garbage collection of the process walked them all, and so did every
collection pytest runs at a session's end."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from .conftest import BOT, INI, inline_session


def _alive(root: Path) -> list[object]:
    gc.collect()
    return [o for o in gc.get_objects()
            if isinstance(o, pytest.Config) and o.rootpath == root]


def test_a_finished_session_leaves_no_configuration_alive(tmp_path: Path) -> None:
    """The objects this process held before the session are frozen (``gc.freeze``: kept
    in a generation no collection walks and ``gc.get_objects`` does not list) until the
    check is made: late in a full run, walking this worker's whole heap twice cost 2 s.
    A frozen object is never collected, so whatever it refers to stays alive and is seen:
    the plugin's module-level state, where the leak was, is among them."""
    (tmp_path / "pytest.ini").write_text(INI)
    (tmp_path / "test_bot.py").write_text(BOT)
    gc.freeze()
    try:
        code, out = inline_session(tmp_path, "-p", "no:xdist", "--prove-name", "first",
                                   env={"BOT_REPLICATES": "3"})
        assert code == 0, out
        assert "run 'first' (complete)" in out  # it ran rollouts, through the plugin's calls
        assert _alive(tmp_path) == []
    finally:
        gc.unfreeze()
