"""What pytest-prove adds to a pytest run: a sweep against plain parametrized tests.

Runs, in the same process tree and alternately, two pytest sessions of 5,000 items
each in a temporary folder:

* plain: ``@pytest.mark.parametrize("i", range(5000))`` tests that do trivial work,
  with the plugin switched off (``-p no:prove``);
* seeded: the same tests, each also taking its seed from a fixture (a rollout takes
  ``prove_seed``, and one more fixture is a cost of pytest's, not of this plugin);
* sweep: a ``@prove.rollout`` of 5,000 replicates doing the same work and returning
  an Episode, each one seeded, validated, reported and appended to the store.

It prints each session's wall time (median of --repeat runs) and the ratio
sweep / plain.  Target: at most 1.3.  Usage: ``python bench/overhead.py [--n 5000]``.
Wall time on a shared machine moves by 20% from one session to the next; with
``--instructions`` it also counts, under Valgrind, the instructions one plain session
and one sweep execute, a figure that does not move (bench/instructions.py counts an
item's instructions alone, for plain tests with and without the plugin too).

The first sweep in a folder also runs the design check, which pytest-prove keeps
in pytest's cache (it depends only on the sizes): that cold run is printed on its
own line and left out of the median, as pytest's own first-run costs are.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PLAIN = """
import random
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_plain(i):
    assert random.Random(i).random() < 2
"""

#: The same tests, each also taking a seed from a fixture, as a rollout takes prove_seed.
SEEDED = """
import random
import pytest

@pytest.fixture
def seed(request):
    return request.node.callspec.params["i"]

@pytest.mark.parametrize("i", range({n}))
def test_seeded(i, seed):
    assert random.Random(seed).random() < 2
"""

SWEEP = """
import random
import pytest_prove as prove

@prove.rollout(replicates={n}, failures=["bad"], successes=["good"])
def test_sweep(prove_seed):
    ok = random.Random(prove_seed).random() < 2
    return prove.Episode("good" if ok else "bad")
"""


def timed(args: list[str], cwd: Path) -> float:
    # Python's ordinary behaviour: byte code is cached after the first import.  (Some
    # sandboxes set PYTHONDONTWRITEBYTECODE, which would recompile the plugin's source in
    # every sweep and never pytest's own, installed pre-compiled.)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q",
                           *args], cwd=cwd, capture_output=True, text=True, check=False,
                          env=env)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"pytest {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def instructions(args: list[str], cwd: Path) -> int:
    """Instructions one session executes, counted by Valgrind's callgrind: unlike wall
    time, the same on a busy machine as on an idle one (about 50 times slower to run)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="prove-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               sys.executable, "-m", "pytest", "-q", *args], cwd=cwd,
                              capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            sys.exit(f"valgrind pytest {' '.join(args)} failed:\n{done.stderr[-2000:]}")
        for line in out.read_text().splitlines():
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    sys.exit("callgrind wrote no instruction total")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="items per session")
    parser.add_argument("--repeat", type=int, default=3, help="sessions of each kind")
    parser.add_argument("--workers", default="0", help="xdist workers (-n) for both")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions of one plain session and one sweep "
                             "under valgrind (slow; not with --workers)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prove-bench-") as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        (root / "test_plain.py").write_text(textwrap.dedent(PLAIN.format(n=options.n)))
        (root / "test_sweep.py").write_text(textwrap.dedent(SWEEP.format(n=options.n)))
        (root / "test_seeded.py").write_text(textwrap.dedent(SEEDED.format(n=options.n)))
        dist = ["-n", options.workers] if options.workers != "0" else ["-p", "no:xdist"]
        cold = timed(["test_sweep.py", *dist], root)
        plain, seeded, sweep = [], [], []
        for _ in range(options.repeat):
            plain.append(timed(["test_plain.py", "-p", "no:prove", *dist], root))
            seeded.append(timed(["test_seeded.py", "-p", "no:prove", *dist], root))
            sweep.append(timed(["test_sweep.py", *dist], root))
        counted: tuple[int, int] | None = None
        if options.instructions:
            counted = (instructions(["test_plain.py", "-p", "no:prove", *dist], root),
                       instructions(["test_sweep.py", *dist], root))
        files = list((root / ".prove" / "runs").glob("*/episodes.jsonl"))
        stored = sum(p.read_bytes().count(b"\n") for p in files)
    p, s = statistics.median(plain), statistics.median(sweep)
    f = statistics.median(seeded)
    print(f"items per session      {options.n:,}  (workers: {options.workers})")
    print(f"plain pytest           {p:7.2f} s  (median of {options.repeat}: "
          f"{', '.join(f'{x:.2f}' for x in plain)})")
    print(f"plain, seed fixture    {f:7.2f} s  (median of {options.repeat}: "
          f"{', '.join(f'{x:.2f}' for x in seeded)})")
    print(f"pytest-prove sweep     {s:7.2f} s  (median of {options.repeat}: "
          f"{', '.join(f'{x:.2f}' for x in sweep)})")
    print(f"first sweep (cold)     {cold:7.2f} s  (computes and caches the design check)")
    print(f"episodes stored        {stored:,}  ({len(files)} runs)")
    pairs = sorted(b / a for a, b in zip(plain, sweep, strict=True))
    print(f"ratio sweep / plain    {s / p:7.3f}  (target: at most 1.3)")
    print(f"  per repeat           {', '.join(f'{r:.3f}' for r in pairs)}  (each sweep over "
          "the plain session run just before it, sorted)")
    print(f"ratio sweep / seeded   {s / f:7.3f}  (against tests that take a seed fixture too)")
    print(f"added per item         {(s - p) / options.n * 1e6:7.0f} us  (sweep minus plain, "
          "over the items)")
    if counted is not None:
        print(f"instructions           plain {counted[0]:,}, sweep {counted[1]:,}: ratio "
              f"{counted[1] / counted[0]:.3f}  (callgrind; the same on a busy machine)")


if __name__ == "__main__":
    main()
