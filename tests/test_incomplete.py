"""What did not finish says so (issue 29, finding 6, items 2 and 4).

A report of an incomplete run says it is incomplete, and a condition that never ran is
not worded as one left out on purpose; a merge killed before its final manifest fails
``check``; a session whose final manifest could not be written (the disk full after its
last episode) says so, as the manifest on disk does, and names the baseline it could not
save.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_prove.cli import main
from pytest_prove.store import Store
from pytest_prove.store.writer import RunWriter

from .conftest import BOT, INI
from .test_shard import SWEEP, cli, gather, shard

#: Stops the session at the first item of the password ticket, as a kill would cut it.
STOP = """
import os
import pytest

def pytest_runtest_call(item):
    if os.environ.get("STOP_AT_PASSWORD") and "password" in item.nodeid:
        pytest.exit("stopped", returncode=0)
"""


@pytest.fixture
def cut(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A baseline 'b' and a run 'cut' against it that stopped before password ran."""
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    pytester.makeconftest(STOP)
    monkeypatch.setenv("BOT_REPLICATES", "6")
    assert pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=b").ret == 0
    monkeypatch.setenv("STOP_AT_PASSWORD", "1")
    pytester.runpytest("-p", "no:randomly", "--prove-baseline=b", "--prove-name=cut")
    monkeypatch.delenv("STOP_AT_PASSWORD")
    store = pytester.path / ".prove"
    assert Store(store).load("cut").status == "incomplete"
    return store


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_a_report_of_an_incomplete_run_says_so(
        cut: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for suffix in ("md", "html", "json"):
        out = cut.parent / f"r.{suffix}"
        assert main(["--store", str(cut), "report", "baseline:b", "cut", "--out", str(out)]) == 0
        said = capsys.readouterr().out
        assert "incomplete: run 'cut' is incomplete" in said, said
        text = out.read_text()
        if suffix == "json":
            document = json.loads(text)
            assert document["runs"]["after"] == {"name": "cut", "status": "incomplete"}
            assert any("run 'cut' is incomplete" in r for r in document["incomplete"])
            continue
        assert "Incomplete" in text and "is incomplete" in text, text
        # password never ran, and the run did not mean to leave it out.
        assert "left out of the verdict" not in text, text
        assert "Never ran" in text and "ticket=password" in text


def test_a_merge_killed_before_its_final_manifest_fails_check(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=SWEEP)
    for k in (1, 2):
        assert shard(pytester, k, 2, f"s{k}", "--prove-salt=nightly").ret == 0
    store = gather(pytester, ["s1", "s2"])

    class Killed(BaseException):
        pass

    real = RunWriter.write_manifest

    def killed_at_the_end(self: RunWriter, **updates: Any) -> None:
        if "ended" in updates:  # the final manifest: the process dies here
            raise Killed
        real(self, **updates)

    monkeypatch.setattr(RunWriter, "write_manifest", killed_at_the_end)
    with pytest.raises(Killed):
        main(["--store", str(store), "merge", "part-1", "part-2", "--name", "whole"])
    monkeypatch.setattr(RunWriter, "write_manifest", real)
    capsys.readouterr()
    code, out, _ = cli(store, capsys, "merge", "part-1", "part-2", "--name", "again")
    assert code == 0, out
    code, out, _ = cli(store, capsys, "merge", "part-1", "part-2", "--name", "twice")
    assert code == 0, out
    # The same shards merged twice, both finished: the check passes (a run against itself is
    # refused for another reason, so the control is a second merge).
    code, out, _ = cli(store, capsys, "check", "again", "twice")
    assert code == 0 and "check failed" not in out, out
    code, out, _ = cli(store, capsys, "check", "again", "whole")
    assert code == 4, out
    assert out.splitlines()[0].startswith(
        "check failed: run 'whole' is a merge that stopped before writing its final manifest")
    assert "ran only part of its sweep, on purpose" not in out


def test_a_disk_full_at_the_final_manifest_is_said_as_the_disk_has_it(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills after the last episode: the final manifest cannot be written. The
    summary said '(complete)' while the manifest on disk said incomplete, and the baseline
    asked for was not mentioned."""
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    monkeypatch.setenv("BOT_REPLICATES", "4")
    real = RunWriter.write_manifest

    def full_at_the_end(self: RunWriter, **updates: Any) -> None:
        if updates.get("ended"):  # the final manifest
            self.manifest.update(updates)  # as the writer does, before its write fails
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, **updates)

    monkeypatch.setattr(RunWriter, "write_manifest", full_at_the_end)
    seen: set[str] = set()
    for quiet in ((), ("-q",)):
        result = pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=b", *quiet)
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        text = result.stdout.str()
        run = Store(pytester.path / ".prove").runs()
        on_disk = {str(m["name"]): str(m["status"]) for _, m in run}
        # The run this session made (two sessions in one second have ids that sort by their
        # random tail, so the largest id is not always the newest).
        name, = set(on_disk) - seen
        seen.add(name)
        assert on_disk[name] == "incomplete"
        assert f"run '{name}' (incomplete)" in text, text
        assert "(complete)" not in text
        result.stdout.fnmatch_lines([
            f"*not saved: baseline 'b': the store could not be written, so run '{name}' is "
            f"incomplete on disk; once there is room, pytest --prove-resume={name} "
            "--prove-save-baseline=b completes it*"])
    assert not (pytester.path / ".prove" / "baselines").exists()
    # Once there is room, the command it gives completes the run and saves the baseline.
    monkeypatch.setattr(RunWriter, "write_manifest", real)
    result = pytester.runpytest("-p", "no:randomly", f"--prove-resume={name}",
                                "--prove-save-baseline=b")
    assert result.ret == 0, result.stdout.str()
    assert (pytester.path / ".prove" / "baselines" / "b.baseline").exists()
