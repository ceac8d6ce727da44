"""How close together the arms of one replicate run (issue 31, docs/arms.md).

Writes a rollout with two arms into a temporary folder, whose episodes take a few
milliseconds each (drawn from the seed, so the work is uneven, as an agent's is), runs it
under each setting asked for (default: ``-n 2``; also one process, and
``--prove-concurrency=4``), reads the stored run, and prints the distribution of the time
between the two arms' episodes of one replicate finishing (each episode's ``finished``
stamp): its minimum, median, 90th and 99th percentiles and maximum, and the same in episodes
(how many episodes of the run finished in between, a measure free of the machine's speed).

Usage: ``python bench/arms_interleave.py [--replicates 200] [--ms 5] [--all]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from datetime import datetime
from pathlib import Path

ROLLOUT = """
import random
import time

import pytest
import pytest_prove as prove


@prove.rollout(replicates={replicates}, failures=["bad"], successes=["ok"], id="bench",
               arms=["current", "cheaper"])
@pytest.mark.parametrize("ticket", ["refund", "password", "shipping"])
def test_bench(ticket, prove_seed, prove_arm):
    rng = random.Random(prove_seed)
    time.sleep(rng.random() * {ms} / 1000 * (2 if prove_arm == "cheaper" else 1))
    return prove.Episode("bad" if rng.random() < 0.2 else "ok")
"""


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(folder: Path, args: list[str]) -> tuple[list[float], list[int]]:
    """Run the rollout with ``args``; the gaps between the arms of each replicate, in
    seconds and in episodes finished in between."""
    store = folder / ".prove"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
                    "--prove-allow-underpowered", f"--prove-store={store}", *args],
                   cwd=folder, env=env, check=False, capture_output=True)
    run = max((store / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    ended: dict[tuple[str, int], dict[str, float]] = {}
    order: list[float] = []
    with (run / "episodes.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            at = _stamp(record["finished"])
            order.append(at)
            arm = record["rollout"].rpartition("@arm:")[2]
            ended.setdefault((record["condition_key"], record["replicate"]), {})[arm] = at
    order.sort()
    seconds, between = [], []
    for arms in ended.values():
        if len(arms) == 2:
            first, last = sorted(arms.values())
            seconds.append(last - first)
            between.append(sum(1 for t in order if first < t < last))
    return seconds, between


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--ms", type=float, default=5.0, help="the most an episode sleeps")
    parser.add_argument("--all", action="store_true",
                        help="also one process and --prove-concurrency=4 under -n 2")
    opts = parser.parse_args()
    settings = [("-n 2", ["-n", "2"])]
    if opts.all:
        settings += [("one process", []),
                     ("-n 2 --prove-concurrency=4", ["-n", "2", "--prove-concurrency=4"])]
    print(f"arms' episodes of one replicate: the time between the two finishing, over "
          f"3 conditions x {opts.replicates} replicates (episodes sleep up to {opts.ms} ms, "
          "the cheaper arm twice as long)")
    for name, args in settings:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            (folder / "test_bench.py").write_text(textwrap.dedent(ROLLOUT).format(
                replicates=opts.replicates, ms=opts.ms), encoding="utf-8")
            seconds, between = measure(folder, args)
        if not seconds:
            print(f"{name}: no replicate holds both arms (did the session fail?)")
            continue
        ms = [s * 1000 for s in seconds]
        print(f"{name}: {len(ms)} replicates; ms between the arms: min {min(ms):.1f}, "
              f"median {statistics.median(ms):.1f}, p90 {_quantile(ms, 0.9):.1f}, "
              f"p99 {_quantile(ms, 0.99):.1f}, max {max(ms):.1f}; episodes finished in "
              f"between: median {statistics.median(between):.0f}, "
              f"p99 {_quantile([float(b) for b in between], 0.99):.0f}, max {max(between)}")


if __name__ == "__main__":
    main()
