"""The package's build and version (issue 29, finding 6, item 8).

pyproject.toml's ``license = "MIT"`` (an SPDX expression, PEP 639) is read by setuptools 77
and later only, so the build needs that; the version is written once, in pyproject.toml,
and ``pytest_prove.__version__`` (which the xdist worker check compares) reads it from the
installed metadata, or from pyproject.toml in a checkout that is not installed.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import pytest_prove

PYPROJECT = tomllib.loads(
    (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_build_needs_a_setuptools_that_reads_an_spdx_license() -> None:
    assert PYPROJECT["project"]["license"] == "MIT"
    found = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    minimum = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", found[0]) if found else None
    assert minimum is not None and int(minimum.group(1)) >= 77, found


def test_the_version_is_pyprojects(monkeypatch: pytest.MonkeyPatch) -> None:
    written = PYPROJECT["project"]["version"]
    assert pytest_prove.__version__ == written
    # Without installed metadata (a checkout on sys.path), the same, from pyproject.toml.
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert pytest_prove._version() == written
