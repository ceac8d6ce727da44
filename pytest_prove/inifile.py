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
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from .errors import ProveError
from .options import fail_on, fraction, missing_mode

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

    def get(self, name: str) -> str | None:
        value = self.values.get(name)
        return value.strip() if isinstance(value, str) and value.strip() else None

    def where(self, name: str) -> str:
        """How an error names a value: the file and the option."""
        return f"{self.inifile or 'the configuration'}: {name}"

    def store(self) -> Path:
        """The store a session would use: prove_store, relative to the rootdir."""
        return self.rootdir / (self.get("prove_store") or ".prove")


def _ini_section(path: Path, section: str) -> dict[str, str] | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
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
    table: Any = pytest_table.get("ini_options", pytest_table)
    if not isinstance(table, dict):
        return None
    return {str(k): _text(v) for k, v in table.items()}


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


def project_settings(start: Path | None = None) -> ProjectSettings:
    """The configuration pytest would read for a session started in ``start`` (default:
    the working directory); with none found, the rootdir is ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        found = _found_in(folder)
        if found is not None:
            path, values = found
            return ProjectSettings(rootdir=folder, inifile=path,
                                   values={k: v for k, v in values.items()
                                           if k.startswith("prove_")})
    return ProjectSettings(rootdir=here)


#: Options whose default is the project's ini value, as the session reads it.
_FROM_INI: tuple[tuple[str, str, Callable[[str], Any], Any], ...] = (
    ("q", "prove_q", fraction, 0.05),
    ("max_mde", "prove_max_mde", fraction, 0.20),
    ("missing", "prove_missing", missing_mode, "test"),
    ("fail_on", "prove_fail_on", fail_on, frozenset({"worse"})),
)


def fill_defaults(args: argparse.Namespace, project: ProjectSettings) -> None:
    """Fill what the command line left unsaid (``None``) from the project's configuration,
    so that both front doors give one answer; a bad value names its file."""
    if getattr(args, "store", None) is None:
        args.store = str(project.store())
    for name, option, parse, builtin in _FROM_INI:
        if not hasattr(args, name) or getattr(args, name) is not None:
            continue
        raw = project.get(option)
        try:
            setattr(args, name, parse(raw) if raw is not None else builtin)
        except argparse.ArgumentTypeError as exc:
            raise IniError(f"{project.where(option)}: {exc}; fix it there, or give the "
                           "option on the command line") from None
