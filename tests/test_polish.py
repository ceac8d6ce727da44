"""What a user reads, polished (issue 34 item 5): each line here was seen wrong by a new
user, and each test failed before its fix."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from pytest_prove.cli import main

from .conftest import BOT, INI


@pytest.fixture
def usual_umask() -> Iterator[None]:
    mask = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(mask)


def _cli(project: pytest.Pytester, capsys: pytest.CaptureFixture[str],
         *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--store", str(project.path / ".prove"), *args])
    return code, capsys.readouterr().out


def test_reports_are_readable_as_any_file_written(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        usual_umask: None) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=first",
                              "--prove-report=session.html").ret == 0
    modes = {}
    for suffix in ("html", "json", "md"):
        code, _ = _cli(pytester, capsys, "report", "first", "--out", f"one.{suffix}")
        assert code == 0
        modes[suffix] = stat.S_IMODE(os.stat(pytester.path / f"one.{suffix}").st_mode)
    modes["session"] = stat.S_IMODE(os.stat(pytester.path / "session.html").st_mode)
    assert modes == dict.fromkeys(modes, 0o644)  # HTML and JSON were 0600, markdown 0644


def test_show_prints_the_command_as_a_shell_reads_it(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=first").ret == 0
    # What the run records is the process's argv (here the outer pytest's, in-process):
    # written as a shell gave it, with one word that holds spaces.
    manifest = next((pytester.path / ".prove" / "runs").glob("*/manifest.json"))
    document = json.loads(manifest.read_text(encoding="utf-8"))
    document["command"] = ["pytest", "-k", "refund and not password"]
    manifest.write_text(json.dumps(document), encoding="utf-8")
    code, out = _cli(pytester, capsys, "show", "first")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("command: "))
    assert "-k 'refund and not password'" in line  # it read -k refund and not password


def test_the_session_report_names_the_command_that_chooses_the_axes(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    assert pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=base").ret == 0
    assert pytester.runpytest("-p", "no:randomly", "--prove-baseline=base",
                              "--prove-report=page.html").ret == 0
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    assert "choose the axes with --x and --y" not in page  # flags pytest does not take
    assert "pytest-prove report ... --x AXIS --y AXIS draws other axes" in page


@pytest.mark.slow  # a fresh interpreter (a second of CPU)
def test_listing_runs_imports_no_statistics(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_REPLICATES", "4")
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    assert pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=base").ret == 0
    assert pytester.runpytest("-p", "no:randomly", "--prove-baseline=base").ret == 0
    # A subprocess, because only a fresh interpreter has a clean module table: this one
    # imported numpy and scipy before any test ran (tests/conftest.py), and an in-process
    # check could not tell what listing the runs imports.
    code = textwrap.dedent(f"""
        import sys
        from pytest_prove.cli import main
        status = main(["--store", {str(pytester.path / '.prove')!r}, "runs"])
        status += main(["--store", {str(pytester.path / '.prove')!r}, "runs", "--json"])
        heavy = sorted(m for m in ("numpy", "scipy", "pytest") if m in sys.modules)
        print("imported:", heavy)
        sys.exit(status)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "2 run(s) and 1 baseline(s)" in done.stdout  # it did list them
    assert "imported: []" in done.stdout  # numpy and scipy took 0.9 s of CPU before


def test_help_shows_the_options_in_a_few_headed_groups(pytester: pytest.Pytester) -> None:
    shown = pytester.runpytest("--help").stdout.str()
    headed: dict[str, list[str]] = {}
    heading = ""
    for line in shown.splitlines():
        if line.startswith("[pytest]"):
            break  # the ini values follow, in a section of their own
        if line and not line.startswith(" ") and line.endswith(":"):
            heading = line
        elif (found := re.match(r"  (--prove-[a-z-]+)", line)) is not None:
            headed.setdefault(heading, []).append(found[1])
    # One flat group of every option before (36 of them under one heading).
    assert 3 <= len(headed) <= 6, list(headed)
    assert all(h.startswith("pytest-prove") for h in headed), list(headed)
    assert all(len(options) <= 16 for options in headed.values()), headed
    where = {option: h for h, options in headed.items() for option in options}
    # Options that belong together are shown together.
    assert where["--prove-baseline"] == where["--prove-save-baseline"] \
        == where["--prove-update-baseline"]
    assert where["--prove-q"] == where["--prove-max-mde"] == where["--prove-fail-on"] \
        == where["--prove-margin"]
    assert where["--prove-replicates"] == where["--prove-concurrency"] \
        == where["--prove-shard"] == where["--prove-live"]
    assert where["--prove-report"] == where["--prove-record-env"]
    assert len({where["--prove-baseline"], where["--prove-q"], where["--prove-replicates"],
                where["--prove-report"]}) == 4
