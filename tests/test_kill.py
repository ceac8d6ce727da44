"""A session killed with SIGKILL loses nothing it finished; --prove-resume ends the job.

This runs pytest in a subprocess: SIGKILL cannot be sent to an in-process run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from .conftest import INI, load

SLOW = textwrap.dedent(
    """
    import os
    import time
    import pytest
    import pytest_prove as prove

    @prove.rollout(replicates=60, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_slow(ticket, prove_seed):
        time.sleep(float(os.environ.get("NAP", "0")))  # the killed session's: 0.02 s
        return prove.Episode("resolved" if prove_seed % 4 else "unresolved",
                             meta={"case_id": ticket})
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["single", "xdist"])
def test_sigkill_midway_then_resume(pytester: pytest.Pytester, workers: list[str]) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_slow=SLOW)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--prove-name", "cut",
         *workers],
        cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
        # Slow enough to be killed midway; the resume below need not wait.
        env={**os.environ, "NAP": "0.02"})
    runs = pytester.path / ".prove" / "runs"
    deadline = time.monotonic() + 60
    lines = 0
    while time.monotonic() < deadline and lines < 30:
        files = list(runs.glob("*/episodes.jsonl")) if runs.exists() else []
        lines = files[0].read_bytes().count(b"\n") if files else 0
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert 30 <= lines < 120, f"the session was not killed midway ({lines} lines)"

    run = load(pytester, "cut")
    raw = (run.path / "episodes.jsonl").read_bytes()
    whole = raw.split(b"\n")
    assert whole[-1] == b"", "the last line was left partial"
    records = [json.loads(line) for line in whole[:-1]]
    assert len(records) == len(run.episodes)  # no duplicates, nothing unreadable
    assert run.status == "incomplete"
    stored = {(r["condition_key"], r["replicate"]) for r in records}

    result = pytester.runpytest("--prove-resume", "cut", *workers)
    result.assert_outcomes(passed=120 - len(stored))
    finished = load(pytester, "cut")
    assert finished.status == "complete"
    assert len(finished.episodes) == 120
    keys = [(r["condition_key"], r["replicate"]) for r in finished.episodes]
    assert len(set(keys)) == 120
    # The episodes stored before the kill were kept as they were, seeds and all.
    before = {(r["condition_key"], r["replicate"]): r["seed"] for r in records}
    after = {(r["condition_key"], r["replicate"]): r["seed"] for r in finished.episodes}
    assert all(after[k] == v for k, v in before.items())
