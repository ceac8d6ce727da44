"""A big sweep against plain pytest and pytest-xdist (issue 14, item 5).

    python bench/sweep.py                    # 100,000 items, 2 repeats of each session
    python bench/sweep.py --items 10000      # quicker
    python bench/sweep.py --only collect     # figure 1 alone (no -n sessions)

In a temporary folder it writes a trivial rollout of ``--items`` replicates and a plain
parametrized test of as many items doing the same work, and prints four figures, each
against its plain counterpart measured in the same run (the lowest of ``--repeat``
sessions of each kind, taken alternately):

1. collection (``pytest --collect-only -q``): CPU time of the sweep's over the plain test's
   (the plain one with ``-p no:prove``); target at most 1.15;
2. the sweep under ``-n 2`` against the plain test under ``-n 2``: CPU time of the whole
   process tree (the controller and both workers), and wall time beside it; target at
   most 1.25;
3. the time from the last test report the controller receives to the end of its process
   (storing, closing the run, the terminal summary, the workers' shutdown, the interpreter's
   exit), wall and the controller's CPU, beside the plain session's; target under 3 s;
4. the controller's peak resident memory (``ru_maxrss`` of the pytest process), and what
   the sweep's adds per episode over the plain session's; target at most 0.5 KB.

CPU times come from ``getrusage``, so they move less than wall time when the machine is
shared; the load average is printed too.  Every session runs through a small wrapper that
runs ``pytest.main`` in its own process and writes these figures to a JSON file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

PLAIN = """
import random
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_plain(i):
    assert random.Random(i).random() < 2
"""

SWEEP = """
import random
import pytest_prove as prove

@prove.rollout(replicates={n}, failures=["bad"], successes=["good"])
def test_sweep(prove_seed):
    ok = random.Random(prove_seed).random() < 2
    return prove.Episode("good" if ok else "bad")
"""

#: Runs pytest in this process and writes its figures to $BENCH_OUT when it exits.
WRAPPER = """
import atexit, json, os, resource, sys, time

import pytest


class Probe:
    last = None

    def pytest_runtest_logreport(self, report):
        Probe.last = (time.time(), time.process_time())


def figures():
    me = resource.getrusage(resource.RUSAGE_SELF)
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped by xdist's teardown
    last = Probe.last or (None, None)
    with open(os.environ["BENCH_OUT"], "w") as fh:
        json.dump({"maxrss_kb": me.ru_maxrss, "cpu": me.ru_utime + me.ru_stime,
                   "last_wall": last[0], "last_cpu": last[1],
                   "workers_cpu": workers.ru_utime + workers.ru_stime}, fh)


atexit.register(figures)
sys.exit(pytest.main(sys.argv[1:], plugins=[Probe()]))
"""


def session(args: list[str], cwd: Path) -> dict[str, Any]:
    """One pytest session through the wrapper: its figures, with the process tree's CPU."""
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("PYTEST_")}
    out = cwd / "figures.json"
    env["BENCH_OUT"] = str(out)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen([sys.executable, str(cwd / "wrapper.py"), "-q", "-p",
                                  "no:randomly", *args], cwd=cwd, stdout=stdout,
                                 stderr=stderr, env=env)
        # wait4, not wait: the controller's CPU up to its very end (the interpreter's exit
        # comes after the wrapper's atexit figures), with its reaped workers'.
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        end_wall = time.time()
        elapsed = time.perf_counter() - start
        if child.returncode != 0:
            stdout.seek(0)
            stderr.seek(0)
            sys.exit(f"pytest {' '.join(args)} failed ({child.returncode}):\n"
                     f"{stdout.read()[-3000:].decode()}{stderr.read()[-3000:].decode()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    found: dict[str, Any] = json.loads(out.read_text())
    found["wall"] = elapsed
    found["tree_cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if found["last_wall"] is not None:
        found["tail_wall"] = end_wall - found["last_wall"]
        controller = usage.ru_utime + usage.ru_stime - found["workers_cpu"]
        found["tail_cpu"] = controller - found["last_cpu"]
    return found


def lowest(runs: list[dict[str, Any]], key: str) -> float:
    return min(float(r[key]) for r in runs)


def shown(runs: list[dict[str, Any]], key: str, unit: str = "s") -> str:
    return ", ".join(f"{float(r[key]):.2f}{unit}" for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="items in each session")
    parser.add_argument("--repeat", type=int, default=2, help="sessions of each kind")
    parser.add_argument("--workers", default="2", help="xdist workers (-n) for the sweep")
    parser.add_argument("--skip-collection", action="store_true",
                        help="leave out figure 1")
    parser.add_argument("--only", choices=["collect"], default=None,
                        help="print figure 1 alone and skip the -n sessions (figures 2-4)")
    parser.add_argument("--keep", metavar="DIR", default=None,
                        help="run in DIR (made if missing) and keep it, for profiling")
    options = parser.parse_args()
    if options.only == "collect" and options.skip_collection:
        parser.error("--only collect and --skip-collection leave nothing to run")
    n = options.items
    with tempfile.TemporaryDirectory(prefix="prove-sweep-") as tmp:
        root = Path(options.keep) if options.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        (root / "pytest.ini").write_text("[pytest]\n")
        (root / "wrapper.py").write_text(WRAPPER)
        (root / "test_plain.py").write_text(textwrap.dedent(PLAIN.format(n=n)))
        (root / "test_sweep.py").write_text(textwrap.dedent(SWEEP.format(n=n)))
        print(f"items per session  {n:,}   load average at start: "
              f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        # The design check's result is kept in pytest's cache (it depends on the sizes
        # alone): the plan computes it once, as a project's first session does, so that no
        # session below pays it.
        session(["test_sweep.py", "--prove-plan", "-p", "no:xdist"], root)

        if not options.skip_collection:
            plain_c, sweep_c = [], []
            for _ in range(options.repeat):
                plain_c.append(session(["--collect-only", "test_plain.py", "-p", "no:prove",
                                        "-p", "no:xdist"], root))
                sweep_c.append(session(["--collect-only", "test_sweep.py", "-p", "no:xdist"],
                                       root))
            ratio = lowest(sweep_c, "tree_cpu") / lowest(plain_c, "tree_cpu")
            print(f"1. collection --collect-only, CPU s: plain {shown(plain_c, 'tree_cpu')}; "
                  f"sweep {shown(sweep_c, 'tree_cpu')}", flush=True)
            print(f"   ratio sweep / plain (lowest each)  {ratio:.3f}   target <= 1.15  "
                  f"{'MET' if ratio <= 1.15 else 'NOT MET'}", flush=True)
        if options.only == "collect":
            print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
            return

        dist = ["-n", options.workers]
        plain, sweep = [], []
        for _ in range(options.repeat):
            plain.append(session(["test_plain.py", "-p", "no:prove", *dist], root))
            sweep.append(session(["test_sweep.py", *dist], root))
        runs = sorted((root / ".prove" / "runs").glob("*/"))
        stored = [(p / "episodes.jsonl").read_bytes().count(b"\n") for p in runs]
        manifests = [json.loads((p / "manifest.json").read_text()) for p in runs]
        status = [f"{m['status']}, {m.get('missing', 0):,} missing" for m in manifests]
    ratio = lowest(sweep, "tree_cpu") / lowest(plain, "tree_cpu")
    wall = lowest(sweep, "wall") / lowest(plain, "wall")
    print(f"2. -n {options.workers}, CPU s of the process tree: plain "
          f"{shown(plain, 'tree_cpu')}; sweep {shown(sweep, 'tree_cpu')}")
    print(f"   controller CPU s: plain {shown(plain, 'cpu')}; sweep {shown(sweep, 'cpu')}")
    print(f"   wall s: plain {shown(plain, 'wall')}; sweep {shown(sweep, 'wall')}  "
          f"(ratio of the lowest {wall:.3f})")
    print(f"   ratio sweep / plain, CPU (lowest each)  {ratio:.3f}   target <= 1.25  "
          f"{'MET' if ratio <= 1.25 else 'NOT MET'}")
    tail = lowest(sweep, "tail_wall")
    print(f"3. last report to exit, wall s: plain {shown(plain, 'tail_wall')}; sweep "
          f"{shown(sweep, 'tail_wall')}; controller CPU s: plain {shown(plain, 'tail_cpu')}; "
          f"sweep {shown(sweep, 'tail_cpu')}")
    print(f"   sweep (lowest)  {tail:.2f} s   target < 3 s  {'MET' if tail < 3 else 'NOT MET'}")
    rss_plain, rss_sweep = lowest(plain, "maxrss_kb"), lowest(sweep, "maxrss_kb")
    per = (rss_sweep - rss_plain) / n
    for r in (*plain, *sweep):
        r["maxrss_mb"] = r["maxrss_kb"] / 1024
    print(f"4. controller peak RSS MB: plain {shown(plain, 'maxrss_mb', '')}; sweep "
          f"{shown(sweep, 'maxrss_mb', '')}")
    print(f"   sweep over plain, per episode  {per:.3f} KB   target <= 0.5 KB  "
          f"{'MET' if per <= 0.5 else 'NOT MET'}")
    print(f"   episodes stored: {', '.join(f'{s:,}' for s in stored)} "
          f"({len(stored)} runs; {n:,} expected in each); runs closed: {'; '.join(status)}")
    if any(s != n for s in stored) or any(m["status"] != "complete" for m in manifests):
        sys.exit("a sweep's run does not hold every episode, or was not closed complete: "
                 "the figures above are not those of a whole sweep")
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
