"""The suite's own rules (tests/conftest.py): in CI a declared module that cannot be imported,
or Chromium missing, fails the test that needed it; outside CI it stays a skip."""

from __future__ import annotations

import re
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from .conftest import DECLARED, NO_CHROMIUM, YAML_UP_FRONT, missing_in_ci

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

#: Three ways a test can miss what CI must have, and one it may miss anywhere.
PROJECT = textwrap.dedent(
    f"""
    import sys

    import pytest

    sys.modules["yaml"] = None  # as if pyyaml (the test extra) were not installed


    def test_declared_module():
        pytest.importorskip("yaml")


    def test_declared_submodule():
        sys.modules["lifelines.statistics"] = None
        pytest.importorskip("lifelines.statistics")


    def test_undeclared_module():
        pytest.importorskip("no_such_module_here")


    @pytest.mark.skipif(True, reason={NO_CHROMIUM!r})
    def test_browser():
        pass
    """
)

MODULE_LEVEL = ('import sys\nimport pytest\nsys.modules["yaml"] = None\n'
                'pytest.importorskip("yaml")\n')


def _names(spec: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0].lower() for line in spec}


def test_every_declared_distribution_has_its_module_named() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    declared = _names(project["dependencies"]) | _names(project["optional-dependencies"]["test"])
    declared.discard("tomli")  # only below Python 3.11, which the package does not support
    assert declared == set(DECLARED)


@pytest.mark.parametrize("ci", ["true", "1", ""])
def test_a_missing_declared_module_fails_in_ci_and_skips_elsewhere(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makepyfile(test_env=PROJECT, test_module_level=MODULE_LEVEL)
    # The inner session loads this suite's conftest as a plugin: its hooks are the rule.
    result = pytester.runpytest("-p", "tests.conftest", "-p", "no:cacheprovider", "-rfEs",
                                "--continue-on-collection-errors")
    if ci:
        # The browser test fails at setup (where skipif is decided): an error.
        result.assert_outcomes(failed=2, skipped=1, errors=2)
        result.stdout.fnmatch_lines([
            "*yaml (from pyyaml, which pyproject.toml declares) cannot be imported: in CI*",
            "*lifelines.statistics (from lifelines, which pyproject.toml declares)*",
            f"*{NO_CHROMIUM}: in CI the HTML report's browser tests must run*",
        ])
        assert result.ret == pytest.ExitCode.TESTS_FAILED
    else:
        result.assert_outcomes(skipped=5)
        assert result.ret == pytest.ExitCode.OK


def test_only_a_declared_module_or_chromium_is_missing_in_ci() -> None:
    assert missing_in_ci("could not import 'yaml': No module named 'yaml'") is not None
    assert missing_in_ci("could not import 'playwright.sync_api': no") is not None
    assert missing_in_ci("could not import 'opentelemetry': no") is not None
    assert missing_in_ci("could not import 'pytest_randomly': no") is None
    assert missing_in_ci("git is not installed") is None
    assert missing_in_ci(NO_CHROMIUM) is not None
    assert sys.modules.get("yaml", sys) is not None  # the inner session's None was undone


def test_yaml_is_imported_before_any_pytester_snapshot() -> None:
    """libyaml's C extension keeps the classes of the first import: a yaml first imported
    inside a pytester test, dropped at its teardown and imported again, broke mkdocs'
    loader in the docs-site tests (an order-dependent failure under -m "not slow")."""
    yaml = pytest.importorskip("yaml")
    assert YAML_UP_FRONT
    if yaml.__with_libyaml__:
        assert yaml.load("a: 1", Loader=yaml.CSafeLoader) == {"a": 1}


def test_the_package_is_compiled_before_any_test_starts_a_process() -> None:
    """tests/conftest.py compiles the package once, in the controller, so that every process a
    test starts loads bytecode instead of compiling the package again (under
    PYTHONDONTWRITEBYTECODE nothing else writes it): each module's cached file is there and
    not older than its source."""
    import importlib.util
    import os

    import pytest_prove

    package = Path(pytest_prove.__file__).resolve().parent
    if not os.access(package, os.W_OK):
        pytest.skip(f"{package} cannot be written: the suite runs without its bytecode")
    stale = [str(source.relative_to(package)) for source in sorted(package.rglob("*.py"))
             if not (cached := Path(importlib.util.cache_from_source(str(source)))).exists()
             or cached.stat().st_mtime < source.stat().st_mtime]
    assert stale == []
