"""A run of 1,000,000 episodes compared against a baseline of the same size (issue 14, item 5).

    python bench/million.py                            # 5,000 conditions x 200 replicates
    python bench/million.py --conditions 500           # a tenth, quicker

Writes, in a temporary store, a compact baseline and a run of the same sweep (bench/
store_read.py's synthetic episodes, no steps, the same salt so twins pair), the run's
resolved episodes made unresolved in a third of cases in one condition in fifty, so that
rows count and the verdict is "worse" (the fragility search runs too).  Then, each in a fresh
process, it measures the peak resident memory (ru_maxrss) and the CPU seconds (user +
system) of:

* ``pytest-prove check baseline:base after``: the command line, reading both, reviewing
  and printing the verdict;
* the gate's path, as a session ends: ``Store.load_baseline``, ``Store.read`` of the run and
  ``review()`` with the gate's arguments (``plugin/session.py``);
* a process that only imports the same modules, the floor the other two stand on.

Targets: a peak under 1.5 GB and under 30 s of CPU.
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

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from bench.store_read import condition_of, episode, manifest_of, run_line  # noqa: E402
from pytest_prove.store.compact import dump_compact  # noqa: E402
from pytest_prove.store.writer import dump_line  # noqa: E402

PEAK_TARGET = 1.5e9
CPU_TARGET = 30.0
#: One condition in this many got worse in the run.
CHANGED_EVERY = 50


def build(root: Path, conditions: int, replicates: int) -> None:
    """The baseline ``base`` and the run ``after``, written a condition at a time."""
    manifest = manifest_of(conditions, replicates, run_id="20261129T101703Z-base",
                           name="base")
    manifest["baseline_name"] = "base"
    manifest["saved"] = "2026-11-29T10:20:00.000000Z"
    header = {"pytest_prove_baseline": 2, "manifest": manifest}
    run_dir = root / "runs" / "20261130T090000Z-aft1"
    run_dir.mkdir(parents=True)
    (root / "baselines").mkdir()
    after_manifest = manifest_of(conditions, replicates, run_id=run_dir.name, name="after")
    after_manifest["paired_with"] = {"baseline": "base"}
    (run_dir / "manifest.json").write_text(json.dumps(after_manifest), encoding="utf-8")
    made = sorted((condition_of(c)[1], c) for c in range(conditions))
    with (root / "baselines" / "base.baseline").open("w", encoding="utf-8") as base, \
            (run_dir / "episodes.jsonl").open("w", encoding="utf-8") as run:
        base.write(dump_line(header) + "\n")
        for key, c in made:
            condition = condition_of(c)[0]
            records = [episode(condition, key, r, 0) for r in range(replicates)]
            # A block of the compact format is the lines after the header of one
            # condition's own file.
            base.write(dump_compact(header, records).split("\n", 1)[1])
            worse = c % CHANGED_EVERY == 0
            run.write("".join(run_line(episode(condition, key, r, 0, worse=worse)) + "\n"
                              for r in range(replicates)))


CHILDREN = {
    "imports only": """
        import pytest_prove.cli, pytest_prove.review, pytest_prove.store
        import pytest_prove.report.terminal
        """,
    "gate path (read both, review)": """
        import warnings
        from pathlib import Path
        from pytest_prove.store import Store
        from pytest_prove.review import review
        store = Store(Path(ROOT))
        base = store.load_baseline("base")
        run = store.read(store.resolve("after"))
        done = review(base, run, events=None, q=0.05, max_mde=0.2, fail_on={"worse"},
                      missing="test")
        print(f"{len(base.episodes):,} + {len(run.episodes):,} episodes; verdict:",
              done.comparison.verdict.word, "; gate failed:", done.gate.failed)
        """,
}


def measure(label: str, argv: list[str]) -> tuple[float, float, float, str]:
    """Peak RSS (bytes), CPU seconds and wall seconds of the process ``argv``, and its
    output's first line."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 4):  # check exits 4 when the verdict fails the gate
        sys.exit(f"{label} failed ({child.returncode}):\n{out}")
    first = next((line for line in out.splitlines() if line.strip()), "")
    # ru_maxrss is in KiB on Linux.
    return usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, wall, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", type=int, default=5000)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--keep", metavar="DIR",
                        help="build the store here and keep it; if it is there, reuse it")
    args = parser.parse_args()
    n = args.conditions * args.replicates
    with tempfile.TemporaryDirectory(prefix="prove-million-") as tmp:
        root = Path(args.keep or tmp) / "store"
        start = time.perf_counter()
        if not (root / "baselines" / "base.baseline").is_file():
            build(root, args.conditions, args.replicates)
        sizes = {p.name: p.stat().st_size for p in (
            root / "baselines" / "base.baseline",
            root / "runs" / "20261130T090000Z-aft1" / "episodes.jsonl")}
        print(f"{args.conditions:,} conditions x {args.replicates} replicates = {n:,} "
              f"episodes, no steps; built in {time.perf_counter() - start:.0f} s "
              f"(baseline {sizes['base.baseline'] / 1e6:.0f} MB, run "
              f"{sizes['episodes.jsonl'] / 1e6:.0f} MB)")
        os.environ["PYTHONPATH"] = str(HERE)
        runs = [(label, [sys.executable, "-c", "ROOT = " + repr(str(root)) + "\n"
                         + textwrap.dedent(code)]) for label, code in CHILDREN.items()]
        runs.append(("pytest-prove check baseline:base after",
                     [sys.executable, "-m", "pytest_prove", "check", "baseline:base", "after",
                      "--store", str(root)]))
        for label, argv in runs:
            peak, cpu, wall, first = measure(label, argv)
            verdict = ""
            if label != "imports only":
                verdict = (f"   peak < 1.5 GB: {'met' if peak < PEAK_TARGET else 'NOT MET'}; "
                           f"CPU < 30 s: {'met' if cpu < CPU_TARGET else 'NOT MET'}")
            print(f"  {label + ':':<42} peak {peak / 1e9:5.2f} GB, {cpu:5.1f} s of CPU "
                  f"({wall:.1f} s wall){verdict}")
            if first:
                print(f"      {first[:110]}")
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  (this process's own peak: {own / 1e9:.2f} GB)")


if __name__ == "__main__":
    main()
