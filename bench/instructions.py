"""What an item costs with pytest-prove installed, in instructions (callgrind).

    python bench/instructions.py              # 5,000 items a session
    python bench/instructions.py --n 1000     # quicker
    python bench/instructions.py --keep DIR   # keep callgrind's files for callgrind_annotate
    python bench/instructions.py --sessions d --counted DIR   # a, b, c from files kept before

Four pytest sessions, each in one process (``-p no:xdist``), counted by valgrind's callgrind,
whose instruction counts, unlike seconds, do not move with the machine's load:

(a) ``--n`` plain test functions (``def test_0``, ``def test_1``, ...), ``-p no:prove``;
(b) the same session with the plugin;
(c) ``@pytest.mark.parametrize("i", range(n))`` over the same trivial work, ``-p no:prove``;
(d) the same work as a ``@prove.rollout`` of ``--n`` replicates (each an item, seeded,
    stored).

Each session is also counted with a tenth of the items, and the difference over the items
between the two is the cost of one item (the interpreter's, pytest's and the plugin's start
cancel out).  Prints each session's instructions per item and the ratios b/a (target: at
most 1.01: a test that is not a rollout pays nothing measurable for the plugin) and d/c
(target: at most 1.05), measured in the same run; and the whole sessions' ratios beside
them.  Each count takes one to three minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

FUNCTION = """
def test_{i}():
    assert random.Random({i}).random() < 2
"""

PARAMETRIZED = """
import random

import pytest


@pytest.mark.parametrize("i", range({n}))
def test_plain(i):
    assert random.Random(i).random() < 2
"""

ROLLOUT = """
import random

import pytest_prove as prove


@prove.rollout(replicates={n}, failures=["bad"], successes=["good"])
def test_sweep(prove_seed):
    ok = random.Random(prove_seed).random() < 2
    return prove.Episode("good" if ok else "bad")
"""

#: name -> (file, arguments, what it is)
SESSIONS = {
    "a": ("test_functions.py", ["-p", "no:prove"], "plain tests, -p no:prove"),
    "b": ("test_functions.py", [], "plain tests, the plugin installed"),
    "c": ("test_parametrized.py", ["-p", "no:prove"], "plain parametrize, -p no:prove"),
    "d": ("test_rollout.py", ["--prove-allow-underpowered"], "the same as a rollout"),
}


def write(project: Path, n: int) -> None:
    project.mkdir(parents=True)
    (project / "pytest.ini").write_text("[pytest]\n")
    functions = "import random\n" + "".join(FUNCTION.format(i=i) for i in range(n))
    (project / "test_functions.py").write_text(functions)
    (project / "test_parametrized.py").write_text(textwrap.dedent(PARAMETRIZED.format(n=n)))
    (project / "test_rollout.py").write_text(textwrap.dedent(ROLLOUT.format(n=n)))


def count(project: Path, name: str, keep: Path | None, tag: str) -> int:
    """The instructions of session ``name`` in ``project`` (its byte code compiled and its
    design check cached by an uncounted run first)."""
    test_file, extra, _ = SESSIONS[name]
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("PYTEST_")}
    env["PYTHONHASHSEED"] = "0"  # the same dicts and sets, the same count, run after run
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:randomly",
            test_file, *extra]
    first = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True,
                           check=False)
    if first.returncode != 0:
        sys.exit(f"session {name} failed:\n{first.stdout[-3000:]}{first.stderr[-2000:]}")
    with tempfile.TemporaryDirectory(prefix="prove-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               *args], cwd=project, env=env, capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            sys.exit(f"valgrind, session {name}, failed:\n{done.stderr[-2000:]}")
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(out, keep / f"callgrind.{name}.{tag}")
        return _total(out.read_text())


def _total(text: str) -> int:
    found = re.search(r"^(?:summary|totals): (\d+)", text, re.MULTILINE)
    if found is None:
        sys.exit("callgrind wrote no instruction total")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000, help="items a session")
    parser.add_argument("--keep", type=Path, default=None,
                        help="a folder to keep callgrind's output files in")
    parser.add_argument("--sessions", default="abcd", help="which sessions to count")
    parser.add_argument("--jobs", type=int, default=1,
                        help="counts run at once (the counts do not depend on it)")
    parser.add_argument("--counted", type=Path, default=None,
                        help="a --keep folder of an earlier run: the sessions not counted now "
                        "are read from its files of the same sizes")
    options = parser.parse_args()
    small = max(1, options.n // 10)
    totals: dict[str, tuple[int, int]] = {}
    with tempfile.TemporaryDirectory(prefix="prove-instructions-") as tmp:
        jobs = []
        for name in options.sessions:
            for size in (options.n, small):
                project = Path(tmp) / f"{name}-{size}"
                write(project, size)
                jobs.append((project, name, options.keep, str(size)))
        with ThreadPoolExecutor(options.jobs) as pool:
            counted = list(pool.map(lambda job: count(*job), jobs))
        for i, name in enumerate(options.sessions):
            totals[name] = (counted[2 * i], counted[2 * i + 1])
            print(f"({name}) {SESSIONS[name][2]:<36} {totals[name][0]:>15,} instructions, "
                  f"{(totals[name][0] - totals[name][1]) / (options.n - small):>11,.0f} "
                  "an item", flush=True)
    if options.counted is not None:
        for name in SESSIONS:
            files = [options.counted / f"callgrind.{name}.{size}" for size in (options.n, small)]
            if name not in totals and all(f.exists() for f in files):
                big, little = (_total(f.read_text()) for f in files)
                totals[name] = (big, little)
                print(f"({name}) {SESSIONS[name][2]:<36} {big:>15,} instructions, "
                      f"{(big - little) / (options.n - small):>11,.0f} an item "
                      f"(counted before: {options.counted})", flush=True)
    per_item = {k: (big - little) / (options.n - small) for k, (big, little) in totals.items()}
    print(f"{options.n:,} items a session; an item's cost is the difference from a session "
          f"of {small:,} items, over the {options.n - small:,} items between them")
    for top, bottom, target, what in (("b", "a", 1.01, "a plain test with the plugin"),
                                      ("d", "c", 1.05, "a rollout item over parametrize")):
        if top in per_item and bottom in per_item:
            ratio = per_item[top] / per_item[bottom]
            whole = totals[top][0] / totals[bottom][0]
            verdict = "met" if ratio <= target else "NOT met"
            print(f"{top}/{bottom} {what:<34} {ratio:6.3f} an item (target <= {target}: "
                  f"{verdict}); whole sessions {whole:6.3f}")


if __name__ == "__main__":
    main()
