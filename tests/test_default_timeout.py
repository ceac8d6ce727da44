"""A rollout that never returns no longer hangs a session that set no timeout (issue 29,
finding 6, item 7).

A sync rollout without ``timeout=``, ``--prove-episode-timeout`` or ini
``prove_episode_timeout`` gets the built-in default (``DEFAULT_EPISODE_TIMEOUT``, 30
minutes); ``0``, ``none`` or ``off`` switch every timeout off on purpose. The tests never
wait for the default: they shrink it, or see whether a replicate ran under a timeout from
the thread it ran in (without one, a single replicate runs inline, in the main thread).
"""

from __future__ import annotations

import pytest

from pytest_prove.config import values
from pytest_prove.store import Store

from .conftest import INI

#: Says which thread it ran in; with SPIN set, spins (in its own code, where a timeout can
#: stop it) for that many seconds first, as a rollout that does not return would.
AGENT = """
import os
import threading
import time

import pytest_prove as prove


@prove.rollout(replicates=1, failures=["thread"], successes=["main"])
def test_agent(prove_seed):
    until = time.monotonic() + float(os.environ.get("SPIN", "0"))
    while time.monotonic() < until:
        pass
    main = threading.current_thread() is threading.main_thread()
    return prove.Episode("main" if main else "thread")
"""


def _endings(pytester: pytest.Pytester) -> list[str]:
    run = Store(pytester.path / ".prove").load("latest")
    return [e.get("outcome") or e["error"]["kind"] for e in run.episodes]


def test_a_rollout_that_does_not_return_is_stopped_by_the_default(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT)
    monkeypatch.setattr(values, "DEFAULT_EPISODE_TIMEOUT", 0.2)
    monkeypatch.setenv("SPIN", "60")  # far past the default: it does not return in time
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    assert _endings(pytester) == ["episode_timeout"]


def test_the_default_applies_and_0_or_none_switch_it_off(
        pytester: pytest.Pytester) -> None:
    assert values.DEFAULT_EPISODE_TIMEOUT == 1800.0  # the documented value
    pytester.makepyfile(test_agent=AGENT)
    pytester.makeini(INI)
    assert pytester.runpytest("-p", "no:randomly").ret == 0
    assert _endings(pytester) == ["thread"]  # under the default timeout
    for off in ("--prove-episode-timeout=0", "--prove-episode-timeout=none"):
        assert pytester.runpytest("-p", "no:randomly", off).ret == 0
        assert _endings(pytester) == ["main"]  # no timeout: inline
    pytester.makeini(INI + "prove_episode_timeout = off\n")
    assert pytester.runpytest("-p", "no:randomly").ret == 0
    assert _endings(pytester) == ["main"]
    # A timeout given beats the ini's off.
    assert pytester.runpytest("-p", "no:randomly", "--prove-episode-timeout=600").ret == 0
    assert _endings(pytester) == ["thread"]
