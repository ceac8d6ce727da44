"""A session pays for scipy.stats only when a statistic that needs it runs.

Importing scipy.stats cost about 0.7 s of CPU, more than a small session does in all, and
every session with a rollout (its design check) and every xdist worker paid it.  These tests
run in subprocesses on purpose: what a fresh interpreter has imported (its ``sys.modules``) is
the point, and an in-process session shares this process's modules, scipy.stats included.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: Each process of the inner session (the controller, each xdist worker) writes the modules it
#: imported, as it ends, to modules-<worker id>.txt (named by its workerinput: under an outer
#: xdist run, PYTEST_XDIST_WORKER is the outer worker's).
RECORDER = """
import sys


def pytest_unconfigure(config):
    name = getattr(config, "workerinput", {}).get("workerid", "main")
    with open(f"modules-{name}.txt", "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
"""

ROLLOUT = """
import random

import pytest

import pytest_prove as prove


@prove.rollout(replicates=16, failures=["bad"], successes=["good"])
@pytest.mark.parametrize("tool", ["a", "b"])
def test_agent(prove_seed, tool):
    return prove.Episode("good" if random.Random(prove_seed).random() < 0.9 else "bad")
"""


def _modules(pytester: pytest.Pytester) -> dict[str, set[str]]:
    return {path.stem.removeprefix("modules-"): set(path.read_text().split())
            for path in pytester.path.glob("modules-*.txt")}


@pytest.mark.slow
@pytest.mark.parametrize("dist", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_a_sweep_with_a_design_check_never_imports_scipy_stats(
        pytester: pytest.Pytester, dist: tuple[str, ...]) -> None:
    pytester.makeconftest(RECORDER)
    pytester.makepyfile(test_agent=ROLLOUT)
    # No cache: the design check is computed, not read from an earlier session's.  It passes
    # (16 replicates detect a rise of 0.6), so the rollout runs.
    result = pytester.runpytest_subprocess("-p", "prove", "-p", "no:cacheprovider",
                                           "--prove-max-mde=0.6", *dist, timeout=120)
    result.assert_outcomes(passed=32)
    seen = _modules(pytester)
    assert set(seen) == ({"main", "gw0", "gw1"} if dist else {"main"})
    # the engine computed the check (under xdist, where the items are collected: a worker)
    assert any("pytest_prove.stats._design" in modules for modules in seen.values())
    for process, modules in seen.items():
        assert "scipy.stats" not in modules, process
        assert "scipy.optimize" not in modules, process


def test_importing_the_plugin_imports_no_scipy() -> None:
    code = ("import sys, pytest_prove.plugin; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=dict(os.environ))
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_one_xdist_worker_computes_the_design_check_and_the_other_reads_it(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORDER)
    pytester.makepyfile(test_agent=ROLLOUT)
    result = pytester.runpytest_subprocess("-p", "prove", "--prove-max-mde=0.6", "-n", "2",
                                           timeout=120)
    result.assert_outcomes(passed=32)
    seen = _modules(pytester)
    computed = sorted(w for w in ("gw0", "gw1") if "pytest_prove.stats._design" in seen[w])
    assert len(computed) == 1, computed
    other = "gw1" if computed == ["gw0"] else "gw0"
    assert "scipy.special" not in seen[other]
    assert "pytest_prove.stats" not in seen[other]


@pytest.mark.slow
def test_a_refused_design_under_xdist_is_said_once_whoever_computed_it(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(RECORDER)
    pytester.makepyfile(test_agent=ROLLOUT)
    result = pytester.runpytest_subprocess("-p", "prove", "-n", "2", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # as when one process refuses
    said = [line for line in result.outlines + result.errlines if "design check failed" in line]
    assert len(said) == 1, said
    assert "with 16 replicates a condition and 2 tests" in said[0]
    seen = _modules(pytester)
    assert sum("pytest_prove.stats._design" in seen[w] for w in ("gw0", "gw1")) == 1
