"""--prove-sequential's design, computed by one xdist worker and read by the other from
pytest's cache (as the design check is); a damaged entry is computed again, never read."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .test_sequential import SWEEP

#: Each xdist worker that computes a sequential design writes a line to computed-<worker>.txt.
#: Only on a worker: the sessions below run their controller in this process, which imports
#: this conftest too, and a replaced package function must not outlive the test here (this
#: process's own count is kept by ``counted`` below, undone by monkeypatch).
COUNTING = textwrap.dedent(
    """
    import os
    import pytest_prove.stats as stats

    if os.environ.get("PYTEST_XDIST_WORKER"):
        _design = stats.sequential_design

        def _counted(*args, **kwargs):
            name = os.environ["PYTEST_XDIST_WORKER"]
            with open(f"computed-{name}.txt", "a") as fh:
                fh.write("design\\n")
            return _design(*args, **kwargs)

        stats.sequential_design = _counted
    """
)


def _computed(root: Path) -> dict[str, int]:
    return {path.stem.split("-", 1)[1]: len(path.read_text().split())
            for path in root.glob("computed-*.txt")}


@pytest.fixture
def sweep(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The sweep at 12 replicates a condition (its design is underpowered, and allowed: the
    design is computed all the same), its baseline saved."""
    monkeypatch.setenv("REPLICATES", "12")
    # The sessions' controller is this process, never a worker, even when this test runs in
    # a worker of an outer xdist session (whose worker name the inner workers would inherit).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("RATE_A", raising=False)
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_sweep=SWEEP)
    saved = pytester.runpytest("-p", "no:xdist", "--prove-save-baseline=base", "-q")
    assert saved.ret == 0, saved.stdout.str()
    pytester.makeconftest(COUNTING)
    return pytester


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times this process computes a sequential design (the plugin looks
    ``pytest_prove.stats.sequential_design`` up when it computes one)."""
    import pytest_prove.stats as stats

    calls: list[int] = []
    design = stats.sequential_design

    def _counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return design(*args, **kwargs)

    monkeypatch.setattr(stats, "sequential_design", _counted)
    return calls


def _entry(root: Path) -> Path:
    found = list((root / ".pytest_cache" / "v" / "prove" / "sequential-design").iterdir())
    assert len(found) == 1, found
    return found[0]


@pytest.mark.slow  # two xdist workers start
def test_one_worker_computes_the_sequential_design_and_the_other_reads_it(
        sweep: pytest.Pytester) -> None:
    # Two workers: the point is that one computes and the other reads.  (--prove-plan runs
    # in one process: a run it is.)
    run = sweep.runpytest("-n", "2", "--prove-sequential", "--prove-baseline=base")
    assert run.ret == 0, run.stdout.str()
    workers = {k: v for k, v in _computed(sweep.path).items() if k.startswith("gw")}
    assert sum(workers.values()) == 1, workers  # one worker computed it, the other read it
    stored = json.loads(_entry(sweep.path).read_text())
    assert stored["design"]["replicates"] == 12 and stored["design"]["looks"][-1] == 12


def test_a_damaged_entry_is_computed_again(sweep: pytest.Pytester, counted: list[int]) -> None:
    plan = ("-p", "no:xdist", "--prove-plan", "--prove-sequential", "--prove-baseline=base")
    first = sweep.runpytest(*plan)
    assert first.ret == 0, first.stdout.str()
    line = [x for x in first.outlines if "sequential: at most" in x]
    assert len(line) == 1, first.outlines
    assert counted, "the first plan computed no design"
    entry = _entry(sweep.path)
    good = json.loads(entry.read_text())
    for damage in ({"design": {**good["design"], "looks": [4, 2]}},
                   {"design": {**good["design"], "version": 1}},
                   # readable again by a stored run's review, but an older method's
                   {"design": {**good["design"], "version": 2}},
                   {"design": "garbage"}, ["not", "a", "mapping"]):
        entry.write_text(json.dumps(damage))
        counted.clear()
        again = sweep.runpytest(*plan)
        assert again.ret == 0, again.stdout.str()
        assert [x for x in again.outlines if "sequential: at most" in x] == line, damage
        assert len(counted) >= 1, damage  # computed again
        assert json.loads(entry.read_text()) == good  # and wrote it back whole
    counted.clear()
    read = sweep.runpytest(*plan)  # a whole entry is read, not computed
    assert [x for x in read.outlines if "sequential: at most" in x] == line
    assert counted == []


def test_an_entry_another_version_wrote_is_computed_again(
        sweep: pytest.Pytester, counted: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """A release may change a design's method or figures (the unpaired futility rule did):
    the design check and the sequential design are remembered under the pytest-prove version
    that computed them, so an upgraded pytest-prove never reads what the previous one wrote."""
    import pytest_prove

    plan = ("-p", "no:xdist", "--prove-plan", "--prove-sequential", "--prove-baseline=base")
    monkeypatch.setattr(pytest_prove, "__version__", "0.0.1")
    first = sweep.runpytest(*plan)
    assert first.ret == 0, first.stdout.str()
    assert counted, "the first plan computed no design"
    counted.clear()
    assert sweep.runpytest(*plan).ret == 0
    assert counted == []  # the same version reads its entry
    monkeypatch.setattr(pytest_prove, "__version__", "0.0.2")
    again = sweep.runpytest(*plan)
    assert again.ret == 0, again.stdout.str()
    assert len(counted) >= 1  # another version's entry is not read
    names = sorted(p.name for p in (sweep.path / ".pytest_cache" / "v" / "prove" /
                                    "sequential-design").iterdir())
    assert [n.split("-", 1)[0] for n in names] == ["0.0.1", "0.0.2"], names
    checks = sorted(p.name.split("-", 1)[0] for p in (sweep.path / ".pytest_cache" / "v" /
                                                       "prove" / "design").iterdir())
    assert checks == ["0.0.1", "0.0.2"], checks
