"""xdist workers in folders of their own, which cannot see the controller's folder or store.

Two kinds of worker: a real socket gateway (``--tx socket=127.0.0.1:PORT//chdir=DIR``, to an
execnet socket server each test starts on 127.0.0.1 in a folder of its own) and a local one
in another folder (``--tx popen//chdir=DIR``).  Each worker gets its own copy of the project
(what a checkout on another machine is); the store is given as a relative path, which on a
worker would name a folder in the worker's copy.  No traffic leaves 127.0.0.1.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from execnet import gateway_socket

from pytest_prove.store import Run, Store

from .conftest import BOT, INI
from .test_cap import SPENDER
from .test_xdist import NO_STORE_ON_WORKERS

#: Written into every worker's copy: the worker notes the folder it ran in and its
#: rootdir, in that folder, so that a test can tell the workers really ran elsewhere.
WHERE_WORKERS_RAN = textwrap.dedent(
    """
    import os

    def pytest_sessionstart(session):
        config = session.config
        if hasattr(config, "workerinput"):
            name = f"ran-{config.workerinput['workerid']}.txt"
            with open(name, "w") as fh:
                fh.write(f"{os.getcwd()}\\n{config.rootpath}\\n")
    """
)

#: The store, as a path relative to the folder pytest runs in.
STORE = "kept"

#: The seeded agent with its refund failure rate written into the file (a worker does not
#: see the controller's environment).
BOT_AT = BOT.replace('float(os.environ.get("REFUND_FAIL", "0.1"))', "{rate}").replace(
    'int(os.environ.get("BOT_REPLICATES", "40"))', "40")


@dataclass(frozen=True)
class Worker:
    home: Path  # the worker's copy of the project: its cwd and rootdir
    tx: str  # the --tx value that reaches it


def _serve(folder: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """An execnet socket server on 127.0.0.1 (a port the system picks) running in
    ``folder``; its port is read from the first line it prints."""
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-u", "-m", "execnet.script.socketserver", "127.0.0.1:0"],
            cwd=folder, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"\('127\.0\.0\.1', (\d+)\)", log.read_text(errors="replace"))
        if found:
            return server, int(found.group(1))
        if server.poll() is not None:
            break
        time.sleep(0.05)
    server.kill()
    server.wait()
    pytest.fail(f"the execnet socket server did not start:\n{log.read_text(errors='replace')}")


@pytest.fixture
def workers(request: pytest.FixtureRequest,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Worker]]:
    """Two workers, each in a folder of its own, reached through socket servers (or, with
    the parameter "popen", started by xdist itself); the servers are killed at teardown,
    whatever the test did."""
    kind = getattr(request, "param", "socket")
    servers: list[subprocess.Popen[bytes]] = []
    found = []
    try:
        for n in range(2):
            home = tmp_path_factory.mktemp(f"remote-worker{n}-")
            if kind == "socket":
                server, port = _serve(home, home.parent / f"{home.name}.log")
                servers.append(server)
                found.append(Worker(home, f"socket=127.0.0.1:{port}//chdir={home}"))
            else:
                found.append(Worker(home, f"popen//chdir={home}"))
        yield found
    finally:
        for server in servers:
            server.kill()
            server.wait(timeout=30)


def copy_project(pytester: pytest.Pytester, workers: list[Worker]) -> None:
    """Each worker gets the project as it is now (its files, none of its runs)."""
    for worker in workers:
        for source in pytester.path.iterdir():
            if source.is_file() and source.suffix in (".py", ".ini"):
                shutil.copy2(source, worker.home / source.name)


def run_remote(pytester: pytest.Pytester, workers: list[Worker],
               *args: str) -> pytest.RunResult:
    """The session in this process.  execnet leaves the controller's end of each socket
    gateway open when the gateway ends (to the garbage collector: an unraisable
    ResourceWarning in this session), so the sockets it opens here are noted and closed
    once the session is over (it ran in a subprocess of its own for that: a controller's
    start-up, about 0.8 s of CPU a session)."""
    copy_project(pytester, workers)
    opened: list[socket.socket] = []
    create_io = gateway_socket.create_io

    def noting(*a: Any, **k: Any) -> Any:
        io = create_io(*a, **k)
        opened.append(io.sock)
        return io

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gateway_socket, "create_io", noting)
        try:
            return pytester.runpytest("--dist=load", *(f"--tx={w.tx}" for w in workers),
                                      f"--prove-store={STORE}", *args)
        finally:
            for sock in opened:
                sock.close()


def stored(pytester: pytest.Pytester, name: str = "latest") -> Run:
    return Store(pytester.path / STORE).load(name)


def assert_ran_elsewhere(pytester: pytest.Pytester, workers: list[Worker]) -> None:
    """Each worker ran in its own folder, with that folder as rootdir, and wrote no store
    there; the controller's folder holds no worker's note."""
    for worker in workers:
        notes = list(worker.home.glob("ran-*.txt"))
        assert len(notes) == 1, notes
        cwd, rootdir = notes[0].read_text().splitlines()
        assert Path(cwd).resolve() == Path(rootdir).resolve() == worker.home.resolve()
        assert not (worker.home / STORE).exists()
        assert not (worker.home / ".prove").exists()
    assert not list(pytester.path.glob("ran-*.txt"))


@pytest.fixture
def project(pytester: pytest.Pytester) -> Callable[[str], None]:
    """Writes the seeded agent at a refund failure rate, with the workers' conftest."""
    pytester.makeini(INI)
    pytester.makeconftest(NO_STORE_ON_WORKERS + WHERE_WORKERS_RAN)

    def write(rate: str) -> None:
        pytester.makepyfile(test_bot=BOT_AT.replace("{rate}", rate))

    return write


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
@pytest.mark.parametrize("workers", ["socket"], indirect=True)
def test_every_episode_lands_once_in_the_controllers_store(
        pytester: pytest.Pytester, project: Callable[[str], None],
        workers: list[Worker]) -> None:
    """Through socket servers (popen workers in folders of their own:
    test_the_verdict_equals_the_local_runs' remote run, which was this test's [popen]
    variant, a session of its own)."""
    project("0.1")
    result = run_remote(pytester, workers, "--prove-replicates=20")
    result.assert_outcomes(passed=40)
    _landed_once(pytester, workers, result, 40)
    _a_socket_server_used_again_is_refused(pytester, project, workers)


def _landed_once(pytester: pytest.Pytester, workers: list[Worker], result: pytest.RunResult,
                 episodes: int, name: str = "latest") -> None:
    """The remote session ``result`` stored each of its ``episodes`` once in the
    controller's store, as the run ``name``, and nowhere else."""
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    run = stored(pytester, name)
    keys = Counter((r["condition_key"], r["replicate"]) for r in run.episodes)
    assert len(keys) == episodes and set(keys.values()) == {1}
    assert len((run.path / "episodes.jsonl").read_text().splitlines()) == episodes
    assert run.status == "complete"
    # The plan came from the workers' first reports: the manifest knows the whole sweep.
    assert run.manifest["plan"]
    assert_ran_elsewhere(pytester, workers)
    # Nothing of the store in the controller's default place either: only where it was put.
    assert not (pytester.path / ".prove").exists()


def _a_socket_server_used_again_is_refused(pytester: pytest.Pytester,
                                           project: Callable[[str], None],
                                           workers: list[Worker]) -> None:
    """Was test_a_socket_server_used_again_is_refused, whose first run (4 items on one
    server) cost a socket server's and a controller's process more: the servers above have
    each run a session now.  One socket server used again: the refusal is each worker
    process's own (a second server would cost a worker's start-up twice more and show
    nothing else)."""
    server = workers[:1]
    # The server's process still holds test_bot as first imported: rate 0.1, not 0.6.
    project("0.6")
    result = run_remote(pytester, server, "--prove-replicates=2", "--prove-name=again")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "*this xdist worker's process already ran a pytest session*"
        "Start a fresh socket server for each run*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes and "failed" not in outcomes
    assert len(Store(pytester.path / STORE).runs()) == 1  # the first run's, nothing more


#: Workers xdist starts itself in folders of their own (popen//chdir=), for tests whose
#: point is not the socket gateway: a socket server is a process more for each worker, and
#: the cap reaches its workers by another way (the command on xdist's channel, where popen
#: workers also see the controller's flag file).  The socket gateway itself:
#: test_every_episode_lands_once_in_the_controllers_store[socket] (which also uses a server
#: again: test_a_socket_server_used_again_is_refused was a test of its own) and
#: test_the_cap_stops_remote_workers[items].
POPEN = pytest.mark.parametrize("workers", ["popen"], indirect=True)


@pytest.mark.slow
@POPEN
def test_the_verdict_equals_the_local_runs(pytester: pytest.Pytester,
                                           project: Callable[[str], None],
                                           workers: list[Worker]) -> None:
    extra = ["--prove-concurrency=3"]  # blocks of 3 replicates an item, on both sides
    project("0.1")
    # A fixed salt: 0.1 -> 0.6 takes about 20 of refund's 40 twins apart, all one way; the
    # gate needs 6 (mid-p 0.5^6 under Holm's 0.025), and on a new salt 5 or fewer came
    # 6.9e-7 of the time, not far below 1e-6. This salt takes 16 apart.
    pytester.runpytest("-p", "no:xdist", f"--prove-store={STORE}", "--prove-salt=remote",
                       "--prove-save-baseline=before").assert_outcomes(passed=80)
    project("0.6")  # the change under test: refunds fail far more often
    local = pytester.runpytest("-p", "no:xdist", f"--prove-store={STORE}",
                               "--prove-baseline=before", "--prove-name=local", *extra)
    remote = run_remote(pytester, workers, "--prove-baseline=before", "--prove-name=remote",
                        *extra)
    assert local.ret == remote.ret == pytest.ExitCode.TESTS_FAILED

    def verdict(result: pytest.RunResult) -> str:
        lines = result.stdout.lines
        start = lines.index(next(x for x in lines if "= pytest-prove =" in x))
        return next(x for x in lines[start + 1:] if x.strip())

    assert verdict(local).startswith("worse")
    assert verdict(remote) == verdict(local)

    def episodes(run: Run) -> list[tuple[object, ...]]:
        return sorted((r["condition_key"], r["replicate"], r["seed"], r["outcome"], r["t"])
                      for r in run.episodes)

    assert episodes(stored(pytester, "remote")) == episodes(stored(pytester, "local"))
    # What test_every_episode_lands_once_in_the_controllers_store[popen] checked.
    _landed_once(pytester, workers, remote, 80, "remote")


@pytest.mark.slow
@POPEN
def test_the_design_check_refuses_before_anything_runs(pytester: pytest.Pytester,
                                                       workers: list[Worker]) -> None:
    pytester.makeini("[pytest]\n")  # the design check is not relaxed
    pytester.makeconftest(NO_STORE_ON_WORKERS + WHERE_WORKERS_RAN)
    pytester.makepyfile(test_bot=BOT_AT.replace("{rate}", "0.1"))
    # One worker: the refusal is the whole session's, before any item runs; one worker in
    # a folder of its own goes through the same hand-off as two, with a process less.
    result = run_remote(pytester, workers[:1], "--prove-replicates=20")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "*design check failed: with 20 replicates a condition and 2 tests*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / STORE).exists()
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes and "failed" not in outcomes


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "extra"), [("socket", []),
                                                ("popen", ["--prove-concurrency=3"])],
                         ids=["items", "blocks"], indirect=["workers"])
def test_the_cap_stops_remote_workers(pytester: pytest.Pytester, workers: list[Worker],
                                      extra: list[str]) -> None:
    pytester.makeini(INI + "prove_prices =\n    sim-model = 2.00 8.00\n")
    pytester.makeconftest(NO_STORE_ON_WORKERS + WHERE_WORKERS_RAN)
    pytester.makepyfile(test_spend=SPENDER)
    result = run_remote(pytester, workers, "--prove-token-cap=1000", *extra)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    run = stored(pytester)
    assert run.status == "capped"
    spent = sum(r["tokens"]["input"] for r in run.episodes)
    per_item = 100 * (3 if extra else 1)
    # As with local workers (test_cap.py): once the controller has counted the item that
    # reached the cap, no item starts, and each worker finishes at most the one it is running
    # and, with blocks, the block its window started ahead of it (one, under a cap: README,
    # "Concurrency").  Without that block the bound failed at load (2,100 tokens, 7 blocks).
    ahead = per_item if extra else 0
    assert 1000 <= spent < 1000 + per_item + 2 * (per_item + ahead)
    assert all(r["error"] is None for r in run.episodes)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 1 and "errors" not in outcomes
    result.stdout.fnmatch_lines(["*token cap reached: the run used *input tokens of the 1,000*"])
    assert_ran_elsewhere(pytester, workers)
