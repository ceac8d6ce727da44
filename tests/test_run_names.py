"""A new run's name cannot shadow another run (issue 29, finding 6, item 6).

``--prove-name=<another run's id>`` gave a second run that every command then found under
the first run's id, and ``--prove-name=latest`` a run that no command could name while a
newer one existed. Both are refused with the fix, as is ``pytest-prove merge --name`` so.
"""

from __future__ import annotations

import pytest

from pytest_prove.cli import main
from pytest_prove.store import Store

from .conftest import BOT, INI


def test_a_run_name_that_would_shadow_a_run_is_refused(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    monkeypatch.setenv("BOT_REPLICATES", "4")
    assert pytester.runpytest("-p", "no:randomly").ret == 0
    store = Store(pytester.path / ".prove")
    first = store.load("latest").run_id
    for name, said in ((first, "has the shape of a run id"),
                       ("latest", "is kept for the newest run")):
        result = pytester.runpytest("-p", "no:randomly", f"--prove-name={name}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        result.stderr.fnmatch_lines([f"*argument --prove-name: the run name '{name}' {said}*"])
        capsys.readouterr()
        code = main(["--store", str(store.root), "merge", first, "--name", name])
        assert code == 2 and said in capsys.readouterr().err
    # Nothing was stored, and the first run is still the one its id names.
    assert [m["run_id"] for _, m in store.runs()] == [first]
    assert store.load(first).run_id == first
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=latest-main").ret == 0
