"""What the test suite costs, per file, in CPU time as well as wall time.

On a loaded machine the wall-clock ``--durations`` of a test says more about its neighbours
than about the test; the CPU time it spends (this process, plus every child process it waited
for: pytester's subprocess sessions, the xdist workers those start) does not depend on the
load.  This runs the given pytest arguments in this process, one test after another (no
``-n``: a worker's CPU time would be lost), and prints per test file the number of tests, the
sum of their setup + call + teardown wall time, and the sum of their CPU time; then the same
for the tests not marked ``slow`` (the developer's loop).

    python bench/suite_time.py tests/test_timeout.py tests/test_gate.py
    python bench/suite_time.py --json /tmp/after.json tests/test_timeout.py
    python bench/suite_time.py --compare /tmp/before.json /tmp/after.json

Before and after in one sitting: check the old commit out in a ``git worktree`` and run this
script from there with ``PYTHONPATH`` pointing at that worktree (``--json`` each time), then
``--compare`` the two files.  CPU time counts a child process only once it has been waited
for, which every subprocess a test starts is by the end of that test.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import Any

import pytest


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Timer:
    """A pytest plugin noting each test's wall and CPU time, by node id."""

    def __init__(self) -> None:
        self.tests: dict[str, dict[str, Any]] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: Any) -> Generator[None, object, object]:
        cpu, children, wall = time.process_time(), _children_cpu(), time.perf_counter()
        result = yield
        self.tests.setdefault(item.nodeid, {}).update({
            "file": item.nodeid.split("::", 1)[0],
            "slow": item.get_closest_marker("slow") is not None,
            "wall": time.perf_counter() - wall,
            "cpu": (time.process_time() - cpu) + (_children_cpu() - children),
        })
        return result

    def pytest_runtest_logreport(self, report: Any) -> None:
        entry = self.tests.setdefault(report.nodeid, {})
        entry.setdefault("outcomes", []).append(f"{report.when}:{report.outcome}")
        entry["durations"] = entry.get("durations", 0.0) + report.duration


def per_file(tests: dict[str, dict[str, Any]], *, slow: bool | None = None
             ) -> dict[str, dict[str, float]]:
    """Per test file: the count of tests, the sums of wall and CPU seconds (``slow`` None:
    all tests; False: those not marked slow; True: those marked slow)."""
    files: dict[str, dict[str, float]] = {}
    for entry in tests.values():
        if "file" not in entry or (slow is not None and entry["slow"] != slow):
            continue
        row = files.setdefault(entry["file"], {"tests": 0, "wall": 0.0, "cpu": 0.0})
        row["tests"] += 1
        row["wall"] += entry["wall"]
        row["cpu"] += entry["cpu"]
    return files


def _table(files: dict[str, dict[str, float]], title: str) -> Iterable[str]:
    yield f"{title}:"
    yield f"  {'file':<44} {'tests':>6} {'wall s':>9} {'cpu s':>9}"
    for name, row in sorted(files.items(), key=lambda kv: -kv[1]["cpu"]):
        yield f"  {name:<44} {int(row['tests']):>6} {row['wall']:>9.1f} {row['cpu']:>9.1f}"
    total = {key: sum(row[key] for row in files.values()) for key in ("tests", "wall", "cpu")}
    yield f"  {'total':<44} {int(total['tests']):>6} {total['wall']:>9.1f} {total['cpu']:>9.1f}"


#: The line between the developer's loop and the slow tests: a test that takes this much CPU
#: or more (its own and its child processes') on a quiet machine is marked ``slow``.
SLOW_CPU = 1.0


def over_the_line(tests: dict[str, dict[str, Any]]) -> list[str]:
    """The tests not marked slow that took :data:`SLOW_CPU` seconds of CPU or more, costliest
    first: mark them ``@pytest.mark.slow`` (or make them cheaper)."""
    heavy = [(entry["cpu"], name) for name, entry in tests.items()
             if "file" in entry and not entry["slow"] and entry["cpu"] >= SLOW_CPU]
    return [f"  {cpu:6.1f} s  {name}" for cpu, name in sorted(heavy, reverse=True)]


def report(tests: dict[str, dict[str, Any]]) -> str:
    lines = [*_table(per_file(tests), "all tests"), "",
             *_table(per_file(tests, slow=False), 'not marked slow (-m "not slow")')]
    heavy = over_the_line(tests)
    lines += ["", f"not marked slow, and {SLOW_CPU:g} s of CPU or more: {len(heavy)}", *heavy]
    return "\n".join(lines)


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> str:
    """Per file, before and after: tests, CPU seconds, and after's share of before's."""
    old, new = per_file(before), per_file(after)
    lines = [f"{'file':<44} {'tests':>11} {'cpu s before':>13} {'after':>8} {'ratio':>6}"]
    for name in sorted(set(old) | set(new), key=lambda n: -old.get(n, {"cpu": 0})["cpu"]):
        a, b = old.get(name, {"tests": 0, "cpu": 0.0}), new.get(name, {"tests": 0, "cpu": 0.0})
        ratio = f"{b['cpu'] / a['cpu']:.2f}" if a["cpu"] else "-"
        tests = f"{int(a['tests'])}->{int(b['tests'])}"
        lines.append(f"{name:<44} {tests:>11} {a['cpu']:>13.1f} {b['cpu']:>8.1f} {ratio:>6}")
    ta, tb = sum(r["cpu"] for r in old.values()), sum(r["cpu"] for r in new.values())
    na, nb = sum(r["tests"] for r in old.values()), sum(r["tests"] for r in new.values())
    lines.append(f"{'total':<44} {f'{int(na)}->{int(nb)}':>11} {ta:>13.1f} {tb:>8.1f} "
                 f"{tb / ta if ta else 0:>6.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="also write every test's figures here")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"),
                        help="compare two --json files instead of running tests")
    args, pytest_args = parser.parse_known_args(argv)
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        print(compare(before, after))
        return 0
    timer = Timer()
    code = pytest.main(["-p", "no:cacheprovider", "-q", *pytest_args], plugins=[timer])
    print()
    print(report(timer.tests))
    if args.json:
        args.json.write_text(json.dumps(timer.tests, indent=1))
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
