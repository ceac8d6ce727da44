"""Helpers that let several tests share one inner session instead of each running its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import inline_session


def saved_project(root: Path, files: dict[str, str], *argv: str) -> Path:
    """A project in ``root`` with ``files`` (path: text; its ini as ``tox.ini``, the file
    ``pytester.makeini`` writes), after one session run in this process with ``argv`` (saving
    a baseline, say), which must pass.  A module-scoped fixture builds it once; each test then
    works on its own copy (:func:`copy_project`)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    code, out = inline_session(root, *argv)
    assert code == pytest.ExitCode.OK, out
    return root


def copy_project(source: Path, target: Path) -> Path:
    """Every file of ``source`` (its ``.prove`` store too) copied into ``target``, without
    bytecode caches: the state a test would have had after running the same session there."""
    shutil.copytree(source, target, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return target


def copy_with_baseline(source: Path, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                       baseline: str, knobs: tuple[str, ...] = ()) -> pytest.Pytester:
    """``pytester``'s project made a copy of ``source`` (a project saved once for a module,
    :func:`saved_project`), with the environment variables ``knobs`` unset and baseline
    ``baseline`` there."""
    for name in knobs:
        monkeypatch.delenv(name, raising=False)
    copy_project(source, pytester.path)
    assert (pytester.path / ".prove" / "baselines" / f"{baseline}.baseline").is_file()
    return pytester
