"""Every way a rollout can end is stored once, and its siblings in a block with it.

A rollout may end with a BaseException that is not an Exception (``sys.exit()``,
``asyncio.CancelledError``, ``GeneratorExit``): its item fails, its episode is
stored as errored, and the session goes on.  Ctrl-C (KeyboardInterrupt) stops the
session, and what finished before it is kept for ``--prove-resume``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from pytest_prove.store import Store

from .conftest import INI, as_in_a_terminal, load

ENDINGS = {
    "SystemExit": "sys.exit()",
    "CancelledError": "raise asyncio.CancelledError()",
    "GeneratorExit": "raise GeneratorExit()",
}


def _block(pytester: pytest.Pytester, ending: str, *, is_async: bool, replicate: int = 2,
           wait_for_siblings: bool = False) -> None:
    """A rollout of 5 replicates where ``replicate`` ends with ``ending``."""
    pytester.makeini(INI)
    pause = "await asyncio.sleep(0.001)" if is_async else "time.sleep(0.001)"
    wait = (f"while len(FINISHED) < 4 and time.monotonic() < DEADLINE: {pause}"
            if wait_for_siblings else "pass")
    pytester.makepyfile(test_block=textwrap.dedent(
        f"""
        import asyncio
        import sys
        import time
        import pytest
        import pytest_prove as prove

        FINISHED = []
        DEADLINE = time.monotonic() + 30

        @prove.rollout(replicates=5, failures=["bad"], successes=["good"])
        {"async " if is_async else ""}def test_block(prove_replicate):
            if prove_replicate == {replicate}:
                {wait}
                {ending}
            FINISHED.append(prove_replicate)
            return prove.Episode("good", meta={{"case_id": "c"}})
        """))


def test_sys_exit_fails_its_item_and_the_session_goes_on(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_exit=textwrap.dedent(
        """
        import sys
        import pytest
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        @pytest.mark.parametrize("ticket", ["refund", "password"])
        def test_exit(ticket, prove_replicate):
            if ticket == "refund" and prove_replicate == 0:
                sys.exit(3)
            return prove.Episode("good", meta={"case_id": ticket})
        """))
    result = pytester.runpytest()
    result.assert_outcomes(failed=1, passed=3)
    result.stdout.fnmatch_lines(["*SystemExit: 3*",
                                 "*run '*' (complete): 4 episodes, 3 with an outcome*1 errored*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = load(pytester)
    assert run.status == "complete"
    errors = [r["error"] for r in run.episodes if r["error"] is not None]
    assert len(run.episodes) == 4
    assert [(e["kind"], e["type"], e["message"]) for e in errors] == [
        ("exception", "SystemExit", "3")]


@pytest.mark.parametrize("is_async", [False, True], ids=["threads", "asyncio"])
@pytest.mark.parametrize("name", list(ENDINGS))
def test_a_base_exception_in_a_block_keeps_every_sibling(pytester: pytest.Pytester, name: str,
                                                         is_async: bool) -> None:
    _block(pytester, ENDINGS[name], is_async=is_async)
    result = pytester.runpytest("--prove-concurrency", "5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{name}*", "*run '*' (complete): 5 episodes*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = load(pytester)
    ended = {r["replicate"]: (r["outcome"], (r["error"] or {}).get("type"))
             for r in run.episodes}
    assert ended == {0: ("good", None), 1: ("good", None), 2: (None, name),
                     3: ("good", None), 4: ("good", None)}
    assert run.episodes[[r["replicate"] for r in run.episodes].index(2)]["error"]["kind"] \
        == "exception"


UNRENDERABLE_CONFTEST = textwrap.dedent(
    """
    import ast

    _parse = ast.parse


    def _parse_or_fail(source, *args, **kwargs):
        # CPython 3.11's AST constructor can raise this SystemError while pytest reads a
        # frame's source to render a traceback (python/cpython#106905, pytest-dev/pytest#10763):
        # stood in for when pytest parses the rollout's module ("source" is the name pytest
        # gives; its assertion rewriting parses the file under its own name).
        if "UNRENDERABLE" in str(source) and args[:1] == ("source",):
            raise SystemError("AST constructor recursion depth mismatch (before=102, after=37)")
        return _parse(source, *args, **kwargs)


    def pytest_configure(config):
        ast.parse = _parse_or_fail


    def pytest_unconfigure(config):
        ast.parse = _parse
    """
)


@pytest.mark.parametrize("args", [
    pytest.param([], id="one-process"),
    # Through xdist's worker and controller (the failure rendered on the worker, its report
    # serialised to the controller): -n 1 takes that path, one worker start less than -n 2.
    pytest.param(["-n", "1"], id="xdist"),
    pytest.param(["--prove-concurrency=3"], id="block")])
def test_a_failure_pytest_cannot_render_is_an_ordinary_stored_failure(
        pytester: pytest.Pytester, args: list[str]) -> None:
    """Rendering a rollout's traceback raised (SystemError from CPython 3.11's AST
    constructor): an INTERNALERROR ended the sweep, left the run incomplete and stored no
    episode for the failure. Now the item fails as any failure does, shown as Python prints
    it, and the sweep goes on."""
    pytester.makeini(INI)
    pytester.makeconftest(UNRENDERABLE_CONFTEST)
    pytester.makepyfile(test_agent=textwrap.dedent("""
        # UNRENDERABLE
        import pytest_prove as prove


        @prove.rollout(replicates=3, failures=["unresolved"], successes=["resolved"])
        def test_agent(prove_replicate):
            if prove_replicate == 1:
                raise RuntimeError("Event loop is closed")
            return prove.Episode("resolved")
    """))
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly", *args)
    text = result.stdout.str()
    assert "INTERNALERROR" not in text, text
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.stdout.fnmatch_lines([
        "*pytest-prove: pytest could not render this failure: SystemError: AST constructor "
        "recursion depth mismatch*",
        "*raise RuntimeError(\"Event loop is closed\")",
        "FAILED test_agent.py::test_agent* - RuntimeError: Event loop is closed"])
    run = load(pytester)
    assert run.manifest["status"] == "complete"
    ended = sorted((r["replicate"], r["outcome"] or r["error"]["type"]) for r in run.episodes)
    assert ended == [(0, "resolved"), (1, "RuntimeError"), (2, "resolved")]


def test_pytest_skip_in_a_rollout_is_an_episode_with_no_outcome(
        pytester: pytest.Pytester) -> None:
    _block(pytester, 'pytest.skip("no sandbox for this case")', is_async=False)
    result = pytester.runpytest("--prove-concurrency", "5")
    result.assert_outcomes(passed=1)  # as with prove.NoOutcome: skipped when all are
    run = load(pytester)
    ended = {r["replicate"]: (r["error"] or {}).get("kind") for r in run.episodes}
    assert ended == {0: None, 1: None, 2: "no_outcome", 3: None, 4: None}
    assert run.status == "complete"


def test_pytest_exit_in_a_block_stops_the_session_and_keeps_the_rest(
        pytester: pytest.Pytester) -> None:
    _block(pytester, 'pytest.exit("enough")', is_async=False, wait_for_siblings=True)
    result = pytester.runpytest("--prove-concurrency", "5")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*Interrupted: Exit in test_block.py::test_block[[]r000-004[]]*"])
    run = load(pytester)
    assert run.status == "incomplete"
    assert sorted(r["replicate"] for r in run.episodes) == [0, 1, 3, 4]


@pytest.mark.parametrize("is_async", [False, True], ids=["threads", "asyncio"])
def test_ctrl_c_in_a_block_keeps_what_finished(pytester: pytest.Pytester,
                                               is_async: bool) -> None:
    _block(pytester, "raise KeyboardInterrupt", is_async=is_async, wait_for_siblings=True)
    # In process, told not to re-raise the session's KeyboardInterrupt into this test (as
    # it does by default, for a real Ctrl-C).
    result = pytester.runpytest("--prove-concurrency", "5", "--prove-name", "cut",
                                no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*KeyboardInterrupt*"])
    run = load(pytester, "cut")
    assert run.status == "incomplete"
    assert sorted(r["replicate"] for r in run.episodes) == [0, 1, 3, 4]
    assert all(r["outcome"] == "good" for r in run.episodes)

    before = {r["replicate"]: r["finished"] for r in run.episodes}

    _block(pytester, "pass", is_async=is_async)
    resumed = pytester.runpytest("--prove-concurrency", "5", "--prove-resume", "cut")
    resumed.assert_outcomes(passed=1)
    finished = load(pytester, "cut")
    assert finished.status == "complete"
    assert sorted(r["replicate"] for r in finished.episodes) == [0, 1, 2, 3, 4]
    assert all(r["outcome"] == "good" for r in finished.episodes)
    # Only the interrupted replicate ran again: the others are the episodes stored before.
    assert {r["replicate"]: r["finished"] for r in finished.episodes if r["replicate"] != 2} \
        == before


def test_ctrl_c_in_one_replicate_stores_nothing_for_it(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_one=textwrap.dedent(
        """
        import pytest_prove as prove

        @prove.rollout(replicates=3, failures=["bad"], successes=["good"])
        def test_one(prove_replicate):
            if prove_replicate == 1:
                raise KeyboardInterrupt
            return prove.Episode("good", meta={"case_id": "c"})
        """))
    result = pytester.runpytest(no_reraise_ctrlc=True)  # else re-raised into this test
    assert result.ret == pytest.ExitCode.INTERRUPTED
    run = load(pytester)
    assert run.status == "incomplete"
    assert [r["replicate"] for r in run.episodes] == [0]


@pytest.mark.slow
@pytest.mark.parametrize("is_async", [False, True], ids=["threads", "asyncio"])
def test_a_real_ctrl_c_keeps_the_finished_siblings(pytester: pytest.Pytester,
                                                   is_async: bool) -> None:
    # SIGINT reaches the main thread while it waits for the block (threads), or cancels
    # asyncio.run's main task: only a subprocess can be sent it.
    pytester.makeini(INI)
    # Replicate 2 ends only once the session is over: one that gave up after a while, or when
    # told to by this test after Ctrl-C, ended on a loaded machine before the signal was
    # handled, and the session ran on to "complete".  (The asyncio one is cancelled by
    # Ctrl-C; the thread cannot be, and the interpreter's exit waits for it.)
    #
    # Ctrl-C is sent once the four siblings have *ended*, not once their bodies wrote the
    # file: a sibling's episode is stored when its thread has handed its result back, after
    # the body returns, and on a loaded machine a signal sent between the two (the file
    # read, the thread not yet scheduled again) found 1 of 4 siblings stored.  Replicate 2
    # says "parked" once every other replicate thread is back waiting for work (nothing but
    # threading's waits above the thread's loop: its result was handed back).  The asyncio
    # siblings need no such wait: a task stores its result in the step its body returns
    # in, and Ctrl-C cancels at an await.
    pytester.makeconftest(
        "import sys\n"
        "import threading\n"
        "import time\n"
        "from pathlib import Path\n\n"
        "SESSION_OVER = threading.Event()\n\n\n"
        "def pytest_unconfigure(config):\n"
        "    SESSION_OVER.set()\n\n\n"
        "def parked(frame):\n"
        "    while frame is not None and frame.f_code.co_filename == threading.__file__:\n"
        "        frame = frame.f_back\n"
        "    return frame is not None and frame.f_code.co_name == '_loop'\n\n\n"
        "def siblings_ended():\n"
        "    me = threading.current_thread()\n"
        "    while True:\n"
        "        done = Path('finished').read_text().split() if Path('finished').exists() else []\n"
        "        frames = sys._current_frames()\n"
        "        others = [frames.get(t.ident) for t in threading.enumerate()\n"
        "                  if t.name == 'prove-replicate' and t is not me]\n"
        "        if len(done) == 4 and all(parked(f) for f in others):\n"
        "            Path('parked').write_text('yes')\n"
        "            return\n"
        "        time.sleep(0.005)\n")
    wait = ("await asyncio.Event().wait()" if is_async
            else "siblings_ended()\n                SESSION_OVER.wait()")
    pytester.makepyfile(test_slow=textwrap.dedent(
        f"""
        import asyncio
        import pytest_prove as prove
        from conftest import SESSION_OVER, siblings_ended

        @prove.rollout(replicates=5, failures=["bad"], successes=["good"])
        {"async " if is_async else ""}def test_slow(prove_replicate):
            if prove_replicate == 2:
                {wait}
            with open("finished", "a") as fh:
                fh.write(f"{{prove_replicate}}\\n")
            return prove.Episode("good", meta={{"case_id": "c"}})
        """))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--prove-name", "cut",
         "--prove-concurrency", "5"],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        preexec_fn=as_in_a_terminal)
    finished = pytester.path / "finished"

    def done() -> list[str]:
        return finished.read_text().split() if finished.exists() else []

    # Until the four siblings ended (threads: replicate 2 saw them parked), or the session
    # ended without them (however long a loaded machine takes to start pytest).
    parked = pytester.path / "parked"

    def ready() -> bool:
        return len(done()) == 4 and (is_async or parked.exists())

    while proc.poll() is None and not ready():
        time.sleep(0.01)
    if not ready():  # Ctrl-C now would check nothing
        out, _ = proc.communicate()
        pytest.fail(f"siblings not done: {done()}; the session said:\n{out.decode()}")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out.decode()
    # The session's own words go with any failure below: in one CI run on a loaded machine
    # the session exited as interrupted with no run stored, and its output tells why.
    said = f"finished: {finished.read_text().split()}; the session said:\n{out.decode()}"
    runs = Store(pytester.path / ".prove").runs()
    assert [manifest.get("name") for _, manifest in runs] == ["cut"], said
    run = load(pytester, "cut")
    assert run.status == "incomplete", said
    assert sorted(r["replicate"] for r in run.episodes) == [0, 1, 3, 4], said
