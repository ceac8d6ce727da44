"""The public API as users type it: tests/typing_checks.py passes mypy --strict.

mypy runs through its API, in this process, with the project's configuration (pyproject's
``[tool.mypy]``: strict, so ``warn_unused_ignores`` too) and its cache in the checkout, where
``mypy`` itself keeps it: the first run in a fresh clone takes some seconds, later ones about
one.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from mypy import api as mypy_api

import pytest_prove as prove

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "tests" / "typing_checks.py"


# Slow on a fresh clone: mypy's cache is cold (10 s of CPU, against 2 s warm), and in the full
# suite it is best started early, with the other slow tests, than met last by one worker.
@pytest.mark.slow
def test_the_public_api_type_checks_as_users_write_it() -> None:
    out, err, status = mypy_api.run([
        "--config-file", str(ROOT / "pyproject.toml"),
        "--cache-dir", str(ROOT / ".mypy_cache"),
        "--no-error-summary", "--show-error-codes",
        str(CHECKS),
    ])
    assert (status, out, err) == (0, "", ""), f"mypy on {CHECKS.name}:\n{out}{err}"


def test_the_typing_checks_take_the_fixtures_as_the_plugin_returns_them(
        pytestconfig: pytest.Config) -> None:
    """mypy cannot see through a fixture: typing_checks.py annotates each ``prove_*``
    argument by hand, and this holds those annotations to the plugin's fixtures."""
    tree = ast.parse(CHECKS.read_text(encoding="utf-8"))
    used: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in node.args.args:
                if arg.arg.startswith("prove_") and arg.annotation is not None:
                    used.setdefault(arg.arg, set()).add(ast.unparse(arg.annotation))
    assert set(used) == {"prove_arm", "prove_block", "prove_cfg", "prove_replicate",
                         "prove_seed"}
    returned: dict[str, set[str]] = {}
    for plugin in pytestconfig.pluginmanager.get_plugins():
        for name in used:
            fixture = getattr(plugin, name, None)
            if fixture is not None and hasattr(fixture, "__wrapped__"):  # @pytest.fixture's
                returned.setdefault(name, set()).add(
                    str(inspect.signature(fixture).return_annotation))
    assert returned == used


def test_a_bare_rollout_decorator_is_refused_at_run_time_too() -> None:
    """typing_checks.py has mypy refuse ``@prove.rollout`` without its declaration; at run
    time it is refused with what to write (it has no failures nor successes to declare)."""

    def rollout(prove_seed: int) -> prove.Episode:
        return prove.Episode("resolved")

    with pytest.raises(TypeError, match=r"@prove.rollout needs its declaration: "
                                        r"@prove.rollout\(failures=\[...\]"):
        prove.rollout(rollout)  # type: ignore[arg-type]
    assert not hasattr(rollout, "__prove_rollout__")
