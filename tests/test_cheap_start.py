"""A session pays for scipy.stats only when a statistic that needs it runs.

Importing scipy.stats cost about 0.7 s of CPU, more than a small session does in all, and
every session with a rollout (its design check) and every xdist worker paid it.  These tests
run in subprocesses on purpose: what a fresh interpreter has imported (its ``sys.modules``) is
the point, and an in-process session shares this process's modules, scipy.stats included.
"""

from __future__ import annotations

import json
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


def _computed_without_scipy_stats(seen: dict[str, set[str]]) -> None:
    """The engine computed the design check in some process, and none imported scipy.stats
    or scipy.optimize."""
    assert any("pytest_prove.stats._design" in modules for modules in seen.values())
    for process, modules in seen.items():
        assert "scipy.stats" not in modules, process
        assert "scipy.optimize" not in modules, process


@pytest.mark.slow
def test_a_sweep_with_a_design_check_never_imports_scipy_stats(
        pytester: pytest.Pytester) -> None:
    """In one process; under xdist (where the items are collected: a worker computes the
    check), test_one_xdist_worker_computes_the_design_check_and_the_other_reads_it."""
    pytester.makeconftest(RECORDER)
    pytester.makepyfile(test_agent=ROLLOUT)
    # No cache: the design check is computed, not read from an earlier session's.  It passes
    # (16 replicates detect a rise of 0.6), so the rollout runs.
    result = pytester.runpytest_subprocess("-p", "prove", "-p", "no:cacheprovider",
                                           "--prove-max-mde=0.6", timeout=120)
    result.assert_outcomes(passed=32)
    seen = _modules(pytester)
    assert set(seen) == {"main"}
    _computed_without_scipy_stats(seen)


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
    # A fresh folder: no earlier session's check in the cache, so a worker computes it (this
    # was also test_a_sweep_with_a_design_check_never_imports_scipy_stats[xdist], the same
    # session with the cache off).
    result = pytester.runpytest_subprocess("-p", "prove", "--prove-max-mde=0.6", "-n", "2",
                                           timeout=120)
    result.assert_outcomes(passed=32)
    seen = _modules(pytester)
    assert set(seen) == {"main", "gw0", "gw1"}
    _computed_without_scipy_stats(seen)
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


#: Records, as each test runs, the plugin's hook implementations that run for every item.
HOOKS_SEEN = """
PER_ITEM = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
            "pytest_pyfunc_call", "pytest_runtest_teardown", "pytest_runtest_makereport",
            "pytest_runtest_logreport", "pytest_report_teststatus")


def pytest_runtest_call(item):
    found = set()
    for hook in PER_ITEM:
        for impl in getattr(item.config.hook, hook).get_hookimpls():
            module = getattr(impl.plugin, "__name__", type(impl.plugin).__module__)
            if module.startswith("pytest_prove"):
                found.add(f"{hook} {impl.plugin_name}")
    with open("hooks.txt", "a") as out:
        out.write(f"{item.name}: {sorted(found)}\\n")
"""

PLAIN = """
import pytest


def test_one():
    pass


@pytest.mark.parametrize("i", range(3))
def test_many(i):
    pass
"""


def test_plain_tests_run_none_of_the_plugins_hooks(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(HOOKS_SEEN)
    pytester.makepyfile(test_plain=PLAIN)
    pytester.runpytest("-p", "no:xdist").assert_outcomes(passed=4)
    seen = (pytester.path / "hooks.txt").read_text().splitlines()
    assert seen == [f"{name}: []" for name in
                    ("test_one", "test_many[0]", "test_many[1]", "test_many[2]")]


def test_beside_a_rollout_plain_tests_keep_the_plugins_hooks(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(HOOKS_SEEN)
    pytester.makepyfile(test_plain=PLAIN, test_agent=ROLLOUT)
    result = pytester.runpytest("-p", "no:xdist", "--prove-allow-underpowered")
    result.assert_outcomes(passed=36)
    seen = next(line for line in (pytester.path / "hooks.txt").read_text().splitlines()
                if line.startswith("test_one: "))
    for hook in ("pytest_runtest_setup prove_calls", "pytest_pyfunc_call prove_calls",
                 "pytest_runtest_makereport prove_rollout_reports",
                 "pytest_runtest_logreport prove_session_reports"):
        assert hook in seen, hook


def test_a_session_without_rollouts_reads_no_provenance(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """What made a run (a git process, each package's metadata) is read only by a session
    that may store one: plain tests, and rollouts all deselected, pay nothing for it; a
    sweep reads it once and keeps it in its manifest (in-process sessions: the call is
    counted in this process's module)."""
    from pytest_prove.store import recorder

    calls: list[object] = []
    real = recorder.provenance
    monkeypatch.setattr(recorder, "provenance",
                        lambda root: calls.append(root) or real(root))
    pytester.makepyfile(test_plain=PLAIN, test_agent=ROLLOUT)
    pytester.runpytest("-p", "no:xdist", "test_plain.py").assert_outcomes(passed=4)
    pytester.runpytest("-p", "no:xdist", "-k", "not agent").assert_outcomes(passed=4)
    assert calls == []
    swept = pytester.runpytest("-p", "no:xdist", "--prove-allow-underpowered")
    swept.assert_outcomes(passed=36)
    assert calls == [pytester.path]
    manifest = next((pytester.path / ".prove" / "runs").glob("*/manifest.json"))
    recorded = json.loads(manifest.read_text())
    assert recorded["packages"]["pytest"] == pytest.__version__
    assert "git_commit" in recorded
