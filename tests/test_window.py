"""The window of replicates (``--prove-concurrency=K``): K in flight across items, items ahead
started in a bounded window, and every replicate that ran stored once, with its own item."""

from __future__ import annotations

import textwrap
from collections import Counter
from typing import Any

import pytest

from .conftest import INI, load

#: A rollout that counts the replicates in flight (a shared counter, no timing) and writes
#: one line per call: the replicate's condition, number and how many ran at its start.
COUNTING = textwrap.dedent(
    """
    import asyncio
    import threading
    import pytest
    import pytest_prove as prove

    LOCK = threading.Lock()
    NOW = [0]

    def enter(ticket, replicate):
        with LOCK:
            NOW[0] += 1
            with open("calls", "a") as fh:
                fh.write(f"{{ticket}} {{replicate}} {{NOW[0]}}\\n")

    def leave():
        with LOCK:
            NOW[0] -= 1

    @prove.rollout(replicates={replicates}, failures=["bad"], successes=["good"])
    @pytest.mark.parametrize("ticket", ["a", "b", "c"])
    {prefix}def test_count(ticket, prove_replicate):
        enter(ticket, prove_replicate)
        try:
            {body}
        finally:
            leave()
        return prove.Episode("good" if prove_replicate % 4 else "bad")
    """
)


def _calls(pytester: pytest.Pytester) -> list[tuple[str, int, int]]:
    path = pytester.path / "calls"
    lines = path.read_text().split("\n") if path.exists() else []
    return [(a, int(b), int(c)) for a, b, c in (line.split() for line in lines if line)]


def _counting(pytester: pytest.Pytester, *, is_async: bool, body: str = "pass",
              replicates: int = 24) -> None:
    pytester.makeini(INI)
    prefix = "async " if is_async else ""
    if is_async and body == "pass":
        body = "await asyncio.sleep(0)"
    pytester.makepyfile(test_count=COUNTING.format(replicates=replicates, prefix=prefix,
                                                   body=body))


@pytest.mark.parametrize("is_async", [False, True], ids=["threads", "asyncio"])
def test_the_window_never_exceeds_k_and_stores_each_replicate_once(
        pytester: pytest.Pytester, is_async: bool) -> None:
    _counting(pytester, is_async=is_async)
    result = pytester.runpytest("--prove-concurrency", "4", "-p", "no:randomly")
    result.assert_outcomes(passed=18)
    calls = _calls(pytester)
    assert len(calls) == 72
    assert max(c for _, _, c in calls) <= 4
    stored = Counter((r["condition"]["ticket"], r["replicate"]) for r in load(pytester).episodes)
    assert len(stored) == 72 and set(stored.values()) == {1}
    assert stored.keys() == {(t, r) for t, r, _ in calls}


@pytest.mark.parametrize("is_async", [False, True], ids=["threads", "asyncio"])
def test_an_item_waiting_for_one_replicate_lets_the_items_ahead_run(
        pytester: pytest.Pytester, is_async: bool) -> None:
    # Replicate 0 waits until a replicate of the next item has started: with a block and a
    # barrier (before the window) it waited out its 30 s and ended "bad".
    pytester.makeini(INI)
    wait = ("await asyncio.wait_for(asyncio.to_thread(AHEAD.wait, 30), 60)" if is_async
            else "AHEAD.wait(30)")
    pytester.makepyfile(test_ahead=textwrap.dedent(
        f"""
        import asyncio
        import threading
        import pytest_prove as prove

        AHEAD = threading.Event()

        @prove.rollout(replicates=6, failures=["bad"], successes=["good"])
        {"async " if is_async else ""}def test_ahead(prove_replicate):
            if prove_replicate == 0:
                {wait}
                return prove.Episode("good" if AHEAD.is_set() else "bad")
            if prove_replicate >= 2:
                AHEAD.set()
            return prove.Episode("good")
        """))
    result = pytester.runpytest("--prove-concurrency", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    run = load(pytester)
    assert sorted(r["replicate"] for r in run.episodes) == list(range(6))
    assert {r["outcome"] for r in run.episodes} == {"good"}
    # Each episode names the item it belongs to, wherever it ran.
    assert {r["replicate"]: r["item"].rsplit("[", 1)[1] for r in run.episodes} == {
        0: "r000-001]", 1: "r000-001]", 2: "r002-003]", 3: "r002-003]", 4: "r004-005]",
        5: "r004-005]"}


def test_k_selects_only_the_selected_items_to_run_ahead(pytester: pytest.Pytester) -> None:
    _counting(pytester, is_async=False)
    result = pytester.runpytest("--prove-concurrency", "4", "-p", "no:randomly", "-k",
                                "not b")
    result.assert_outcomes(passed=12)
    assert {t for t, _, _ in _calls(pytester)} == {"a", "c"}
    assert len(_calls(pytester)) == len(load(pytester).episodes) == 48


def test_a_timeout_inside_the_window_ends_that_replicate_alone(
        pytester: pytest.Pytester) -> None:
    _counting(pytester, is_async=False, replicates=8, body=(
        "while ticket == 'b' and prove_replicate == 5:\n"
        "                import time; time.sleep(0.01)"))
    result = pytester.runpytest("--prove-concurrency", "4", "-p", "no:randomly",
                                "--prove-episode-timeout", "0.5")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(["*Timeout: *test_count[[]b-r004-007[]] (replicate 5)*"])
    run = load(pytester)
    assert len(run.episodes) == 24
    ended = {(r["condition"]["ticket"], r["replicate"]): r["error"] for r in run.episodes}
    assert ended.pop(("b", 5))["kind"] == "episode_timeout"
    assert set(map(type, ended.values())) == {type(None)}


@pytest.mark.parametrize(("is_async", "dist"), [(False, "no:xdist"), (True, "no:xdist"),
                                               (False, "-n 2")],
                         ids=["threads", "asyncio", "threads-xdist"])
def test_the_token_cap_stores_every_replicate_that_ran_ahead(
        pytester: pytest.Pytester, is_async: bool, dist: str) -> None:
    _counting(pytester, is_async=is_async, body='prove.usage("m", input=100)')
    where = dist.split() if dist.startswith("-n") else ["-p", dist]
    result = pytester.runpytest("--prove-concurrency", "4", "-p", "no:randomly",
                                "--prove-token-cap", "250", *where)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*token cap reached*"])
    calls = _calls(pytester)
    stored = Counter((r["condition"]["ticket"], r["replicate"]) for r in load(pytester).episodes)
    # Nothing ran unaccounted: each replicate that was called is stored, once.
    assert stored.keys() == {(t, r) for t, r, _ in calls} and set(stored.values()) == {1}
    assert len(calls) < 72


@pytest.mark.parametrize("dist", ["no:xdist", "-n 2"])
def test_x_stores_what_ran_ahead_with_its_own_item(pytester: pytest.Pytester,
                                                   dist: str) -> None:
    _counting(pytester, is_async=False, body=(
        "if ticket == 'a' and prove_replicate == 1:\n"
        "                raise ValueError('boom')"))
    where = dist.split() if dist.startswith("-n") else ["-p", dist]
    result = pytester.runpytest("--prove-concurrency", "4", "-p", "no:randomly", "-x", *where)
    assert result.parseoutcomes()["failed"] == 1
    calls = _calls(pytester)
    run = load(pytester)
    stored = Counter((r["condition"]["ticket"], r["replicate"]) for r in run.episodes)
    assert stored.keys() == {(t, r) for t, r, _ in calls} and set(stored.values()) == {1}
    for record in run.episodes:
        first = record["replicate"] // 4 * 4
        assert record["item"].endswith(f"[{record['condition']['ticket']}-r"
                                       f"{first:03d}-{first + 3:03d}]")
    if len(calls) > 4 and not dist.startswith("-n"):  # ran ahead of the failing item: said
        result.stdout.fnmatch_lines(["*pytest-prove: the session stopped: *stored*"])


def test_ctrl_c_keeps_what_ran_ahead_and_says_so(pytester: pytest.Pytester) -> None:
    # Replicate 0 raises KeyboardInterrupt once the last replicate, two items ahead, ran.
    pytester.makeini(INI)
    pytester.makepyfile(test_cut=textwrap.dedent(
        """
        import threading
        import pytest_prove as prove

        LAST = threading.Event()

        @prove.rollout(replicates=6, failures=["bad"], successes=["good"])
        def test_cut(prove_replicate):
            if prove_replicate == 0:
                LAST.wait(30)
                raise KeyboardInterrupt
            if prove_replicate == 5:
                threading.Timer(0, LAST.set).start()
            return prove.Episode("good")
        """))
    result = pytester.runpytest("--prove-concurrency", "2", "-p", "no:randomly",
                                "--prove-name", "cut", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    run = load(pytester, "cut")
    assert run.status == "incomplete"
    by = Counter(r["replicate"] for r in run.episodes)
    # The one Ctrl-C stopped is stored by nobody (run again on resume); every other, once.
    # Replicate 5 may still be returning when the signal comes: after Ctrl-C a thread is
    # not waited for, and the summary says it was left running.
    assert set(by.values()) == {1} and by.keys() in ({1, 2, 3, 4, 5}, {1, 2, 3, 4})
    for record in run.episodes:
        first = record["replicate"] // 2 * 2
        assert record["outcome"] == "good"
        assert record["item"].endswith(f"[r{first:03d}-{first + 1:03d}]")
    said = ("*pytest-prove: the session stopped: 4 replicates that ran ahead*stored"
            if 5 in by else "*pytest-prove: the session stopped: 3 replicates that ran "
            "ahead*stored; 1 still running were left*")
    result.stdout.fnmatch_lines([said])


@pytest.mark.parametrize("dist", ["load", "worksteal"])
def test_under_xdist_each_worker_keeps_k_and_every_replicate_is_stored_once(
        pytester: pytest.Pytester, dist: str) -> None:
    # worksteal takes queued items back from a worker: never one whose replicates started.
    _counting(pytester, is_async=False)
    result = pytester.runpytest("--prove-concurrency", "4", "-p", "no:randomly", "-n", "2",
                                "--dist", dist)
    result.assert_outcomes(passed=18)
    calls = _calls(pytester)
    assert len(calls) == 72
    assert max(c for _, _, c in calls) <= 4  # each worker counts its own
    stored = Counter((r["condition"]["ticket"], r["replicate"]) for r in load(pytester).episodes)
    assert len(stored) == 72 and set(stored.values()) == {1}


SEQUENTIAL = textwrap.dedent(
    """
    import os
    import random
    import threading

    import pytest
    import pytest_prove as prove

    RATES = {"a": float(os.environ.get("RATE_A", "0.1")), "b": 0.1, "c": 0.1, "d": 0.1}
    LOCK = threading.Lock()


    @prove.rollout(replicates=220, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["a", "b", "c", "d"])
    def test_sweep(ticket, prove_seed, prove_replicate):
        with LOCK, open("calls", "a") as fh:
            fh.write(f"{ticket} {prove_replicate} 0\\n")
        rng = random.Random(prove_seed)
        return prove.Episode("unresolved" if rng.random() < RATES[ticket] else "resolved")
    """
)


@pytest.mark.slow
def test_sequential_looks_count_and_store_what_ran_ahead(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_sweep=SEQUENTIAL)
    monkeypatch.delenv("RATE_A", raising=False)
    saved = pytester.runpytest("-p", "no:xdist", "-p", "no:randomly", "--prove-concurrency=55",
                               "--prove-save-baseline=base", "-q")
    assert saved.ret == 0, saved.stdout.str()
    (pytester.path / "calls").unlink()
    monkeypatch.setenv("RATE_A", "0.6")
    result = pytester.runpytest("-p", "no:xdist", "-p", "no:randomly", "--prove-concurrency=11",
                                "--prove-baseline=base", "--prove-sequential")
    assert result.ret == 1, result.stdout.str()
    calls = _calls(pytester)
    stored = Counter((r["condition"]["ticket"], r["replicate"]) for r in load(pytester).episodes)
    # Every replicate that ran, ahead of a look or not, is stored once; the looks stopped
    # each condition early, so most never started.
    assert stored.keys() == {(t, r) for t, r, _ in calls} and set(stored.values()) == {1}
    per = Counter(t for t, _ in stored)
    assert per["a"] < 220 and sum(per.values()) < 880, per


def test_an_async_replicate_that_blocks_the_loop_times_out_and_the_rest_run_on(
        pytester: pytest.Pytester) -> None:
    # A sync sleep in async code blocks the window's one loop: its replicates end as timed
    # out (the watchdog, not asyncio.timeout, which needs the loop), and the next item's
    # replicates run on a new loop.
    pytester.makeini(INI)
    pytester.makepyfile(test_block=textwrap.dedent(
        """
        import asyncio
        import time
        import pytest_prove as prove

        @prove.rollout(replicates=6, failures=["bad"], successes=["good"])
        async def test_block(prove_replicate):
            if prove_replicate == 1:
                time.sleep(2)
            await asyncio.sleep(0)
            return prove.Episode("good")
        """))
    result = pytester.runpytest("--prove-concurrency", "2", "-p", "no:randomly",
                                "--prove-episode-timeout", "0.3")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*(replicate 1): still running after 0.3 s*its event loop "
                                 "was blocked*"])
    by = {r["replicate"]: r for r in load(pytester).episodes}
    assert sorted(by) == list(range(6))
    assert by[1]["error"]["kind"] == "episode_timeout"
    # Replicates 0 and 2 may have been on the blocked loop too; once it is left, every
    # later one runs on the new loop.
    assert by[4]["outcome"] == by[5]["outcome"] == "good"


#: Replicates that note when they start; the first item's teardown (pytest's own thread busy
#: outside the window) waits until every replicate of the items ahead has started.
AHEAD_WHILE_BUSY = textwrap.dedent(
    """
    import threading
    import pytest
    import pytest_prove as prove

    STARTED = set()
    ALL_AHEAD = threading.Event()

    @prove.rollout(replicates=20, failures=["bad"], successes=["good"])
    def test_ahead(prove_replicate):
        STARTED.add(prove_replicate)
        if STARTED >= set(range(2, 20)):
            ALL_AHEAD.set()
        return prove.Episode("good")
    """
)

AHEAD_CONFTEST = textwrap.dedent(
    """
    def pytest_runtest_teardown(item):
        if item.name.endswith("r000-001]"):
            import test_ahead
            print("all ahead started:", test_ahead.ALL_AHEAD.wait(60))
    """
)


def test_the_window_starts_items_ahead_while_pytest_is_busy_between_items(
        pytester: pytest.Pytester) -> None:
    """Every replicate within the window's bound is queued at once, and the window starts
    the next as one ends, in the thread that ended it: with K queued at a time, nothing more
    started while pytest's own thread was busy between items (its reports, xdist's
    messages), and a loaded worker's window ran dry (bench/io_bound.py)."""
    pytester.makeini(INI)
    pytester.makeconftest(AHEAD_CONFTEST)
    pytester.makepyfile(test_ahead=AHEAD_WHILE_BUSY)
    result = pytester.runpytest("--prove-concurrency", "2", "-p", "no:randomly", "-s")
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(["*all ahead started: True*"])
    stored = Counter(r["replicate"] for r in load(pytester).episodes)
    assert stored == Counter(range(20))


def test_the_items_ahead_are_queued_when_an_items_own_replicates_end_before_it_waits(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """An item's replicates can all end before its thread reaches the window's wait (its
    thread descheduled on a loaded machine): the items ahead were queued only from inside
    that wait, so nothing was, and the window ran dry while pytest was busy between items
    (the test above then waited its 60 s and printed False).  Here the wait is entered only
    once the item's own replicates have ended, every time (in-process session: the class
    is this process's)."""
    from pytest_prove.running import window as running_window

    real = running_window.Window.wait

    def late(self: Any, tickets: Any, **kwargs: Any) -> Any:
        with self.lock:
            while any(t.state in (running_window.QUEUED, running_window.RUNNING)
                      for t in tickets):
                self.lock.wait(0.05)  # an ending wakes only the waiting item: polled
        return real(self, tickets, **kwargs)

    monkeypatch.setattr(running_window.Window, "wait", late)
    pytester.makeini(INI)
    pytester.makeconftest(AHEAD_CONFTEST.replace("wait(60)", "wait(30)"))
    pytester.makepyfile(test_ahead=AHEAD_WHILE_BUSY)
    result = pytester.runpytest("--prove-concurrency", "2", "-p", "no:randomly", "-s")
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(["*all ahead started: True*"])
    assert Counter(r["replicate"] for r in load(pytester).episodes) == Counter(range(20))
