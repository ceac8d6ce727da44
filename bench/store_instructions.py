"""Instructions an episode that reading the store takes, counted by valgrind (cachegrind):
a figure that, unlike seconds of CPU, does not move with the machine's load.

    python bench/store_instructions.py                  # 100 conditions x 200 replicates
    python bench/store_instructions.py --conditions 20  # quicker
    python bench/store_instructions.py --old 618c736    # and the package at a revision

For each of a run (``Store.read``) as this version writes it (format 2) and as earlier ones
did (format 1), a compact baseline and a baseline in JSON lines (format 1) of the same
synthetic sweep as ``bench/store_read.py``, a child process reads
the file once and three times under ``valgrind --tool=cachegrind --cache-sim=no``; the
difference, over two reads and the episodes, is what one episode's read costs (building
the files and starting Python cancel out).  Beside it, the same for a ``json.loads`` loop
over the run's lines, keeping its dicts with the collector paused as the store pauses it.
With ``--old REV``, the package as it is at revision REV (``git archive``) is counted too,
on the same files (but for the run of format 2, which a package before it refuses: there
the old package's read of format 1 is the reference).  Needs valgrind on the PATH; each
count takes about a minute.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "bench"))

WHAT = {"run": "a run, Store.read (format 2)", "run1": "a run of format 1",
        "compact": "a compact baseline (format 2)",
        "legacy": "a baseline in JSON lines (format 1)",
        "json": "json.loads over the run's lines (no checks)"}


def child(root: Path, what: str, reads: int, code: Path) -> None:
    """Read ``what`` of the store at ``root`` ``reads`` times (in the process valgrind
    counts), with the package in ``code``."""
    sys.path.insert(0, str(code))
    from pytest_prove.store import Store

    assert Path(sys.modules["pytest_prove"].__file__ or "").is_relative_to(code)

    store = Store(root)
    run_dir = root / "runs" / ("20261129T101703Z-old1" if what == "run1" else
                               "20261129T101703Z-1cdd")
    lines = (run_dir / "episodes.jsonl").read_bytes().splitlines() if what == "json" else []
    for _ in range(reads):
        if what == "json":
            gc.disable()
            got: object = [json.loads(line) for line in lines]
            gc.enable()
        elif what in ("run", "run1"):
            got = store.read(run_dir)
        else:
            got = store.load_baseline("new" if what == "compact" else "old")
        del got


def build(root: Path, conditions: int, replicates: int) -> int:
    from store_read import sweep, write_run

    from pytest_prove.store import Store

    manifest, episodes = sweep(conditions, replicates, 0)
    run_dir = root / "runs" / manifest["run_id"]
    write_run(run_dir, manifest, episodes)
    old = root / "runs" / "20261129T101703Z-old1"
    write_run(old, {**manifest, "run_id": old.name}, episodes, old=True)
    store = Store(root)
    run = store.read(run_dir)
    store.write_baseline("old", run, compact=False)
    store.write_baseline("new", run)
    return len(episodes)


def instructions(root: Path, what: str, reads: int, code: Path) -> int:
    done = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         sys.executable, __file__, "--child", str(root), what, str(reads), str(code)],
        capture_output=True, text=True, check=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", type=int, default=100)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--old", help="a revision whose package is counted too")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        root, what, reads, code = args.child
        child(Path(root), what, int(reads), Path(code))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on the PATH (apt install valgrind)")
    with tempfile.TemporaryDirectory(prefix="prove-instr-") as tmp:
        root = Path(tmp)
        n = build(root, args.conditions, args.replicates)
        codes = {"this tree": HERE}
        if args.old:
            from review_speed import extract

            codes[args.old] = extract(args.old, root / "old")
        print(f"{args.conditions:,} conditions x {args.replicates} replicates, no steps "
              f"({n:,} episodes): instructions an episode, one read")
        counted: dict[tuple[str, str], float] = {}
        for what, label in WHAT.items():
            for name, code in codes.items():
                if (what == "json" or what == "run") and name != "this tree":
                    continue
                once = instructions(root, what, 1, code)
                thrice = instructions(root, what, 3, code)
                counted[what, name] = (thrice - once) / 2 / n
                print(f"  {label + ',':<46}{name + ':':<12}{counted[what, name]:>9,.0f}",
                      flush=True)
        plain = counted["json", "this tree"]
        for (what, name), count in counted.items():
            if what != "json":
                old = counted.get((what if what != "run" else "run1", args.old or ""))
                print(f"  {WHAT[what]}, {name}: {plain / count:.2f} x fewer than json.loads"
                      + (f"; {count / old:.3f} x {args.old}'s"
                         + (" of format 1" if what == "run" else "")
                         if old is not None and name != args.old else ""))


if __name__ == "__main__":
    main()
