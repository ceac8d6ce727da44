"""What a fresh pytest session with a small rollout costs, this package against another revision.

    python bench/startup.py                 # against the revision before scipy.stats left
    python bench/startup.py --old 38f4939   # against any revision
    python bench/startup.py --instructions  # also count instructions under callgrind

For each of this tree's package and the package at ``--old`` (``git archive``), in the same
run and alternately: the CPU (user + system) of a fresh ``python -m pytest`` session of one
rollout of 16 replicates whose design check is computed (``-p no:cacheprovider``: nothing
read from an earlier session), as one process and under ``-n 2`` (the controller and both
workers counted), median of ``--repeat``; the CPU that importing the statistics engine
takes (``import pytest_prove.stats``, numpy imported before); and with
``--instructions`` the instructions of one single-process session (callgrind: the same
figure on a busy machine).  Prints each figure and after / before.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

ROLLOUT = """
import random

import pytest_prove as prove


@prove.rollout(replicates=16, failures=["bad"], successes=["good"])
def test_agent(prove_seed):
    return prove.Episode("good" if random.Random(prove_seed).random() < 0.9 else "bad")
"""

SESSION = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--prove-max-mde=0.6"]


def _env(code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k != "PYTHONDONTWRITEBYTECODE" and not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(code)
    return env


def cpu(code: Path, project: Path, extra: list[str]) -> float:
    """User + system CPU seconds of one session and every process it started."""
    before = os.times()
    done = subprocess.run([sys.executable, *SESSION, *extra], cwd=project, env=_env(code),
                          capture_output=True, text=True, check=False)
    after = os.times()
    if done.returncode != 0:
        sys.exit(f"the session with {code} failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return (after.children_user - before.children_user
            + after.children_system - before.children_system)


def import_seconds(code: Path, cwd: Path) -> float:
    """The CPU seconds importing pytest_prove.stats takes (numpy already imported, as the
    plugin's store has it): CPU, not ``-X importtime``'s wall clock, which a loaded
    machine inflates."""
    # cwd: not this checkout, whose package ``python -c`` would import first
    done = subprocess.run([sys.executable, "-c", IMPORT], env=_env(code), cwd=cwd,
                          capture_output=True, text=True, check=True)
    return float(done.stdout)


IMPORT = ("import time, numpy; t = time.process_time(); import pytest_prove.stats; "
          "print(time.process_time() - t)")


def instructions(code: Path, project: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="prove-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               sys.executable, *SESSION, "-p", "no:xdist"], cwd=project,
                              env=_env(code), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"valgrind failed:\n{done.stderr[-2000:]}")
        found = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        if found is None:
            sys.exit("callgrind wrote no instruction total")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="38f4939",
                        help="the revision to compare with (default: before this change)")
    parser.add_argument("--repeat", type=int, default=5, help="sessions of each kind")
    parser.add_argument("--instructions", action="store_true",
                        help="also count one session's instructions under callgrind (slow)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prove-startup-") as tmp:
        root = Path(tmp)
        old = root / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(HERE), "archive", options.old,
                                  "pytest_prove"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        project = root / "project"
        project.mkdir()
        (project / "pytest.ini").write_text("[pytest]\n")
        (project / "test_agent.py").write_text(textwrap.dedent(ROLLOUT))
        trees = {"before": old, "after": HERE}
        for code in trees.values():  # byte code compiled once, outside the figures
            cpu(code, project, ["-p", "no:xdist"])
        print(f"a fresh session: one rollout of 16 replicates, its design check computed; "
              f"before = {options.old}, after = this tree; median of {options.repeat}")
        for label, extra in (("one process", ["-p", "no:xdist"]), ("-n 2", ["-n", "2"])):
            seconds: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(options.repeat):
                for name, code in trees.items():
                    seconds[name].append(cpu(code, project, extra))
            b, a = (statistics.median(seconds[n]) for n in ("before", "after"))
            print(f"CPU, {label:<12} before {b:6.2f} s  after {a:6.2f} s  "
                  f"after/before {a / b:5.2f}")
        b, a = (statistics.median(import_seconds(trees[n], project)
                                  for _ in range(options.repeat))
                for n in ("before", "after"))
        print(f"import pytest_prove.stats  before {b:6.2f} s  after {a:6.2f} s  "
              f"after/before {a / b:5.2f}  (CPU, numpy imported before)")
        if options.instructions:
            b_i, a_i = (instructions(trees[n], project) for n in ("before", "after"))
            print(f"instructions, one process  before {b_i:,}  after {a_i:,}  "
                  f"after/before {a_i / b_i:5.2f}  (callgrind)")


if __name__ == "__main__":
    main()
