"""Writing the store under stress: two sessions on one run, a full disk, counts that agree,
run folders made exclusively, and no write through a symbolic link (issue 10, findings 4,
5, 9 and 11)."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_prove.cli import main
from pytest_prove.declare.seeds import derive_seed
from pytest_prove.store import Store, StoreError

from .conftest import BOT, INI, load

SLOW = textwrap.dedent(
    """
    import os
    import time
    import pytest
    import pytest_prove as prove

    @prove.rollout(replicates=int(os.environ.get("N", "40")), failures=["unresolved"],
                   successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_slow(ticket, prove_seed, prove_replicate):
        time.sleep(float(os.environ.get("NAP", "0")))
        go, deadline = os.environ.get("GO"), time.monotonic() + 300
        while go and prove_replicate >= 20 and not os.path.exists(go):
            if time.monotonic() > deadline:  # the test gave up: end, do not hang
                break
            time.sleep(0.01)
        return prove.Episode("resolved" if prove_seed % 4 else "unresolved",
                             meta={"pad": "x" * int(os.environ.get("PAD", "0"))})
    """
)


def _pytest(cwd: Path, *args: str, env: dict[str, str] | None = None,
            **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=cwd,
        env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True, **kwargs)  # type: ignore[call-overload]


def _lines(run_dir: Path) -> list[dict[str, object]]:
    raw = (run_dir / "episodes.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in raw.splitlines()]


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_two_resumes_of_one_run_at_once(pytester: pytest.Pytester,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The second session refuses before it runs anything; no line is written twice.

    Subprocesses: the two sessions must run at the same time.  The first holds the run
    until the file GO exists (its replicates from 20 on wait for it), so the second starts
    while it writes however slow the machine (a nap let the first finish first at load 40).
    """
    pytester.makeini(INI)
    pytester.makepyfile(test_slow=SLOW)
    monkeypatch.setenv("N", "40")
    go = pytester.path / "go"
    monkeypatch.setenv("GO", str(go))
    assert pytester.runpytest("--prove-name", "cut", "-k", "r000 or r001").ret == 0
    first = _pytest(pytester.path, "--prove-resume", "cut")
    try:
        run_dir = load(pytester, "cut").path
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(_lines(run_dir)) < 8:
            time.sleep(0.02)
        assert first.poll() is None, "the first session ended before the second started"
        second = _pytest(pytester.path, "--prove-resume", "cut")
        out, _ = second.communicate(timeout=300)
    finally:
        go.touch()
    assert second.returncode == pytest.ExitCode.USAGE_ERROR, out
    assert "is being written by another session right now" in out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    first.communicate(timeout=300)
    assert first.returncode == 0
    lines = _lines(run_dir)
    keys = [(r["condition_key"], r["replicate"]) for r in lines]
    assert len(keys) == len(set(keys)) == 80
    assert load(pytester, "cut").status == "complete"


def _limited(max_bytes: int) -> None:
    # A file may not grow past max_bytes; writes beyond fail with EFBIG instead of a signal.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
# Under xdist with one worker: the controller writes the episodes, whatever the workers
# (was -n 2: the same controller path, a worker's start-up more).
@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["single", "xdist"])
def test_a_full_file_system_ends_in_one_clear_message(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      workers: list[str]) -> None:
    """RLIMIT_FSIZE stands for a full disk (a subprocess: the limit is per process)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_slow=SLOW)
    # 100 episodes of some 1.6 kB each: the file is full after a few dozen, the resume
    # writes the rest (was 400 of 0.5 kB: 4 times the items for the same check).
    monkeypatch.setenv("N", "50")
    monkeypatch.setenv("PAD", "1500")
    proc = _pytest(pytester.path, "--prove-name", "full", *workers,
                   preexec_fn=lambda: _limited(60_000))
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    assert out.count("pytest-prove: ") == 1, out
    assert "cannot write episodes" in out and "--prove-resume=full" in out
    run = load(pytester, "full")
    stored = len(run.episodes)
    assert 0 < stored < 100
    raw = (run.path / "episodes.jsonl").read_bytes()
    assert raw.endswith(b"\n")  # a failed write is cut back to whole lines
    # Once there is room again, the resume completes the run (under xdist as above).
    result = pytester.runpytest("--prove-resume", "full", *workers)
    assert result.ret == 0
    run = load(pytester, "full")
    assert run.status == "complete" and len(run.episodes) == 100


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_store_on_a_200_kb_tmpfs(pytester: pytest.Pytester,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_slow=SLOW)
    # 300 episodes of some 1.6 kB each: the 200 kB are full after about 120 (was 800 of
    # 0.6 kB: 2.7 times the items for the same check).
    monkeypatch.setenv("N", "150")
    monkeypatch.setenv("PAD", "1500")
    with _tmpfs(pytester.path / "small", "200k") as small:
        result = pytester.runpytest(f"--prove-store={small}", "--prove-name", "full")
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        text = result.stdout.str()
        assert "INTERNALERROR" not in text and "Traceback" not in text
        result.stdout.fnmatch_lines(["pytest-prove: *cannot write episodes (No space left on "
                                     "device)*--prove-resume=full*"])
        run = Store(small).load("full")
        assert 0 < len(run.episodes) < 300
        assert (run.path / "episodes.jsonl").read_bytes().endswith(b"\n")


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_counts_agree_for_a_killed_run_and_check_says_incomplete(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_slow=SLOW)
    proc = _pytest(pytester.path, "--prove-name", "killed", env={"N": "100", "NAP": "0.01"})
    runs = pytester.path / ".prove" / "runs"
    deadline = time.monotonic() + 60
    stored = 0
    while time.monotonic() < deadline and stored < 30:
        files = list(runs.glob("*/episodes.jsonl")) if runs.exists() else []
        stored = files[0].read_bytes().count(b"\n") if files else 0
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    stored = len(load(pytester, "killed").episodes)
    store = str(pytester.path / ".prove")
    capsys.readouterr()
    # Before the fix: 0 episodes (the manifest's counts of the first episode).
    assert main(["--store", store, "--json", "runs"]) == 0
    listed = json.loads(capsys.readouterr().out)["runs"]
    assert [r["episodes"] for r in listed] == [stored]
    assert listed[0]["status"] == "incomplete"
    # Before the fix: "check passed", exit 0.
    pytester.runpytest("--prove-name", "whole", "--prove-save-baseline", "whole")
    code = main(["--store", store, "check", "baseline:whole", "killed"])
    out = capsys.readouterr().out
    assert code == 4, out
    assert "check failed" in out and "incomplete" in out
    # The plan was in the manifest from the first episode on, so the check can count.
    assert f"{200 - stored} replicates it selected have no episode" in out


def test_counts_after_a_resume_past_a_crash_match_show(pytester: pytest.Pytester,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT.replace(
        "    rng = random.Random(prove_seed)",
        "    if os.environ.get('CRASH') and prove_seed % 7 == 0:\n"
        "        raise RuntimeError('flaky')\n"
        "    rng = random.Random(prove_seed)"))
    os.environ["CRASH"] = "1"
    try:
        pytester.runpytest("--prove-name", "r")
    finally:
        del os.environ["CRASH"]
    errored = sum(1 for r in load(pytester, "r").episodes if r["error"])
    assert errored > 0
    result = pytester.runpytest("--prove-resume", "r")
    result.stdout.fnmatch_lines(["*run 'r' (complete): 80 episodes, 80 with an outcome, "
                                 "0 with none, 0 errored*"])
    capsys.readouterr()
    main(["--store", str(pytester.path / ".prove"), "show", "r"])
    assert "80 episodes, 80 with an outcome, 0 with none, 0 errored" in capsys.readouterr().out
    assert load(pytester, "r").manifest["counts"]["episodes"] == 80


def test_resuming_a_complete_run_exits_0(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    pytester.runpytest("--prove-name", "done")
    result = pytester.runpytest("--prove-resume", "done")
    assert result.ret == pytest.ExitCode.OK  # was 5, "no tests collected"
    result.stdout.fnmatch_lines(["*nothing left to run: run 'done' already holds every "
                                 "planned replicate*"])


def _record(replicate: int, salt: str = "s") -> dict[str, object]:
    return {"rollout": "r", "condition": {}, "condition_key": "{}", "replicate": replicate,
            "seed": derive_seed(salt, "r", "{}", replicate), "outcome": "ok", "t": None,
            "horizon": None, "meta": {}, "error": None}


def test_run_folders_are_created_exclusively(tmp_path: Path) -> None:
    store = Store(tmp_path)
    one = store.new_run(name=None, salt="s", manifest={})
    two = store.new_run(name=None, salt="s", manifest={})
    two.manifest["run_id"] = one.run_id  # forced collision: same second, same suffix
    two.manifest["name"] = one.run_id
    two.directory = one.directory
    one.append([_record(0)])
    two.append([_record(1)])
    assert one.directory != two.directory
    assert two.run_id.startswith(one.run_id + "-") and two.manifest["name"] == two.run_id
    assert len((one.directory / "episodes.jsonl").read_text().splitlines()) == 1
    assert len((two.directory / "episodes.jsonl").read_text().splitlines()) == 1
    one.close()
    two.close()


def test_resume_does_not_write_through_a_symlink(pytester: pytest.Pytester,
                                                 tmp_path: Path) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    pytester.runpytest("--prove-name", "cut", "-k", "refund")
    run_dir = load(pytester, "cut").path
    outside = tmp_path / "outside.txt"
    outside.write_bytes((run_dir / "episodes.jsonl").read_bytes())
    before = outside.read_bytes()
    (run_dir / "episodes.jsonl").unlink()
    (run_dir / "episodes.jsonl").symlink_to(outside)
    result = pytester.runpytest("--prove-resume", "cut")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*episodes.jsonl is a symbolic link*"])
    assert outside.read_bytes() == before


def test_lock_file_symlink_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path)
    writer = store.new_run(name="x", salt="s", manifest={})
    writer.append([_record(0)])
    writer.close()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    lock = writer.directory / "episodes.jsonl.lock"
    lock.unlink()
    lock.symlink_to(victim)
    run = store.read(writer.directory)
    with pytest.raises(StoreError, match="symbolic link"):
        store.reopen(run)
    assert victim.read_text() == "keep me"


def test_save_baseline_over_a_wider_one_says_replaced_and_what_it_dropped(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_REPLICATES", "10")  # what is stored, not a verdict
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    pytester.runpytest("--prove-save-baseline", "current")
    result = pytester.runpytest("-k", "refund", "--prove-name", "narrow")
    assert result.ret == 0
    # A -k run is incomplete, and is not saved; a narrower complete sweep is.
    pytester.makepyfile(test_bot=BOT.replace('["refund", "password"]', '["refund"]'))
    result = pytester.runpytest("--prove-save-baseline", "current", "--prove-name", "only")
    result.stdout.fnmatch_lines(["*baseline 'current' replaced by run 'only'*; it no longer "
                                 "holds 1 condition(s) the old baseline had (ticket=password)*"])


def test_a_read_only_store(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    with _tmpfs(pytester.path / "ro", "1m") as ro:
        assert pytester.runpytest(f"--prove-store={ro}", "--prove-name", "r",
                                  "-k", "refund").ret == 0
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        result = pytester.runpytest(f"--prove-store={ro}")
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.stdout.fnmatch_lines(["pytest-prove: *cannot write the run (Read-only file "
                                     "system); make the store writable*(nothing was stored)"])
        result = pytester.runpytest(f"--prove-store={ro}", "--prove-resume", "r")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*cannot lock the run (Read-only file system)*"])
        assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_full_disk_before_the_first_episode_leaves_no_folder(pytester: pytest.Pytester) -> None:
    """Nothing to resume, so the message says to run again, and nothing half-made is left."""
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    with _tmpfs(pytester.path / "tiny", "100k") as tiny:
        (tiny / "s" / "runs").mkdir(parents=True)
        with contextlib.suppress(OSError), (tiny / "fill").open("wb") as fh:
            fh.write(b"\0" * 200_000)
        result = pytester.runpytest(f"--prove-store={tiny / 's'}")
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        result.stdout.fnmatch_lines(["pytest-prove: *cannot write the run (No space left on "
                                     "device)*then run again (nothing was stored)"])
        assert "--prove-resume" not in result.stdout.str().split("pytest-prove:", 1)[1]
        assert list((tiny / "s" / "runs").iterdir()) == []


def test_runs_counts_the_lines_of_a_run_whose_manifest_has_no_counts(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """A manifest from an older pytest-prove had no counts: `runs` said 0 episodes."""
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    pytester.runpytest("--prove-name", "old")
    path = load(pytester, "old").path / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["counts"]
    path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["--store", str(pytester.path / ".prove"), "--json", "runs"]) == 0
    assert [r["episodes"] for r in json.loads(capsys.readouterr().out)["runs"]] == [80]
