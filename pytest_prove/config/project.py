"""The project's pytest configuration, read the way pytest finds it, without importing pytest.

So that ``pytest-prove`` and a pytest session give one answer on one project, the command
line reads the same ``prove_*`` values the session does: from the first of ``pytest.ini``,
``.pytest.ini``, ``pyproject.toml`` (``[tool.pytest.ini_options]``, or ``[tool.pytest]``),
``tox.ini`` (``[pytest]``) and ``setup.cfg`` (``[tool:pytest]``) found in the working
directory or the nearest folder above it that has one (pytest's rule when no path is
given). The folder of that file is the rootdir, which a relative ``prove_store`` is read
from. Flags on the command line override every value.
"""

from __future__ import annotations

import argparse
import configparser
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from ..errors import ProveError
from .ini import FROM_INI, INI, given_or_ini

__all__ = ["IniError", "ProjectSettings", "fill_defaults", "project_settings"]


class IniError(ProveError, ValueError):
    """A configuration file that cannot be read, or a value in it that is not valid."""


@final
@dataclass(frozen=True, slots=True)
class ProjectSettings:
    """Where the project's configuration is, and its ``prove_*`` values as text."""

    rootdir: Path
    inifile: Path | None = None
    values: Mapping[str, str] = field(default_factory=dict)
    #: ``--prove-*`` options found in the file's addopts (``=VALUE`` or `` VALUE``): they
    #: beat its values.
    addopts: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        """The value as written (stripped; ``""`` when empty), or None when not set."""
        value = self.values.get(name)
        return value.strip() if isinstance(value, str) else None

    def where(self, name: str) -> str:
        """How an error names a value: the file and the option."""
        return f"{self.inifile or 'the configuration'}: {name}"

    def store(self) -> Path:
        """The store a session would use: ``--prove-store`` in addopts (relative to the
        working directory, as pytest reads it), else prove_store (relative to the rootdir,
        the rootdir itself when empty), else ``.prove`` there."""
        flag = self.addopts.get("prove_store")
        if flag is not None:
            return Path.cwd() / flag
        return self.rootdir / str(INI["prove_store"].value(self.get("prove_store")))


def _ini_section(path: Path, section: str) -> dict[str, str] | None:
    # As pytest's own reader: keys keep their case, no [DEFAULT] section leaks into others,
    # a byte order mark is allowed.
    parser = configparser.ConfigParser(interpolation=None, default_section="\0none")
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(path.read_text(encoding="utf-8-sig"), source=str(path))
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise IniError(f"cannot read {path}: {exc}") from None
    if not parser.has_section(section):
        return None
    return {key: value for key, value in parser.items(section)}


def _toml_section(path: Path) -> dict[str, str] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise IniError(f"cannot read {path}: {exc}") from None
    tool = data.get("tool")
    pytest_table = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(pytest_table, dict):
        return None
    legacy = pytest_table.get("ini_options")
    if isinstance(legacy, dict):
        if set(pytest_table) - {"ini_options"}:
            raise IniError(f"{path}: use either [tool.pytest] or [tool.pytest.ini_options], "
                           "not both (pytest refuses both too)")
        return {str(k): _text(v) for k, v in legacy.items()}
    # pytest's native table: its prove_* values are strings, as the plugin declares them.
    for key, value in pytest_table.items():
        if str(key).startswith("prove_") and not isinstance(value, str):
            raise IniError(f"{path}: [tool.pytest] {key} expects a string, got "
                           f"{type(value).__name__} {value!r}; write it in quotes")
    return {str(k): _text(v) for k, v in pytest_table.items()}


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


def _found_in(folder: Path) -> tuple[Path, dict[str, str]] | None:
    for name in ("pytest.ini", ".pytest.ini"):
        path = folder / name
        if path.is_file():
            return path, _ini_section(path, "pytest") or {}
    candidates = (("pyproject.toml", None), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"))
    for name, section in candidates:
        path = folder / name
        if not path.is_file():
            continue
        found = _toml_section(path) if section is None else _ini_section(path, section)
        if found is not None:
            return path, found
    return None


_FLAGS = {"--prove-store": "prove_store", "--prove-q": "prove_q",
          "--prove-max-mde": "prove_max_mde", "--prove-fail-on": "prove_fail_on",
          "--prove-missing": "prove_missing", "--prove-margin": "prove_margin"}


def _addopts(text: str) -> dict[str, str]:
    """The ``--prove-*`` options of an addopts line, by the ini name they override, in both
    forms pytest takes there (``--prove-max-mde=0.25`` and ``--prove-max-mde 0.25``); the
    last one given wins, as on pytest's command line."""
    try:
        words = shlex.split(text)
    except ValueError:
        return {}
    found = {}
    for index, word in enumerate(words):
        if word == "--":
            break
        flag, equals, value = word.partition("=")
        if flag not in _FLAGS:
            continue
        if equals:
            found[_FLAGS[flag]] = value
        elif index + 1 < len(words):
            found[_FLAGS[flag]] = words[index + 1]
    return found


def project_settings(start: Path | None = None) -> ProjectSettings:
    """The configuration pytest would read for a session started in ``start`` (default:
    the working directory). With no configuration file, the rootdir is, as pytest has it,
    the nearest folder up with a ``setup.py``, else with a ``pyproject.toml``, else
    ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        found = _found_in(folder)
        if found is not None:
            path, values = found
            return ProjectSettings(rootdir=folder, inifile=path,
                                   values={k: v for k, v in values.items()
                                           if k.startswith("prove_")},
                                   addopts=_addopts(values.get("addopts", "")))
    for marker in ("setup.py", "pyproject.toml"):
        for folder in (here, *here.parents):
            if (folder / marker).is_file():
                return ProjectSettings(rootdir=folder)
    return ProjectSettings(rootdir=here)


def fill_defaults(args: argparse.Namespace, project: ProjectSettings) -> None:
    """Fill what the command line left unsaid (``None``) from the project's configuration,
    so that both front doors give one answer; a bad value names its file."""
    if getattr(args, "store", None) is None:
        args.store = str(project.store())

    def read(option: str) -> Any:
        try:
            return INI[option].value(project.addopts.get(option, project.get(option)))
        except argparse.ArgumentTypeError as exc:
            raise IniError(f"{project.where(option)}: {exc}; fix it there, or give the "
                           "option on the command line") from None

    # The command's options among them (--max-mde is read into max_mde): fail_on left None
    # means the defaults (values.gate_fails_on).
    asked = [(option, getattr(args, option.removeprefix("prove_"))) for option in FROM_INI
             if hasattr(args, option.removeprefix("prove_"))]
    for option, value in given_or_ini(asked, read).items():
        setattr(args, option.removeprefix("prove_"), value)
