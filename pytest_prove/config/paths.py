"""Option values that pytest would read as test paths before the plugin is loaded.

pytest picks its rootdir and ini file from the command line before it loads any
plugin, so it does not know yet that ``--prove-store DIR`` takes a value: ``DIR``
counts as a test path, and once it exists the rootdir moves to the common
ancestor of it and the real test paths.  Rollout ids (``sub/test_r.py::test_r``)
and ini options then change, and nothing matches the baseline.  Given as
``--prove-store=DIR`` the value stays one token with the option, and pytest
passes over it.  This module finds the separate form so that the session can
refuse it before anything runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["relative_to_root", "session_paths", "space_form_problem"]


def _names_a_path(value: str, invocation_dir: Path) -> bool:
    """Whether pytest's rootdir search would take ``value`` for an existing path."""
    if value.startswith("-"):
        return False
    path = Path(value.split("::", 1)[0])
    try:
        return (path if path.is_absolute() else invocation_dir / path).exists()
    except (OSError, ValueError):
        return False


def space_form_problem(args: Sequence[str], *, value_options: Iterable[str],
                       path_options: Iterable[str], invocation_dir: Path) -> str | None:
    """A message for the first ``--prove-OPTION VALUE`` that can move pytest's rootdir.

    Options that name a file or folder (``path_options``) are refused in the
    separate form always, so that a command that works today keeps working once
    the folder exists; any other option taking a value only when its value
    happens to name an existing path.
    """
    takes_value = set(value_options)
    paths = set(path_options)
    for index, arg in enumerate(args[:-1]):
        if arg == "--":
            break
        if arg not in takes_value:
            continue
        value = args[index + 1]
        if arg in paths or _names_a_path(value, invocation_dir):
            return (
                f"write {arg}={value} with '=' (not {arg} {value}): pytest chooses its "
                f"rootdir and ini file before pytest-prove is loaded, and takes a separate "
                f"{value!r} for a test path, which moves the rootdir, changes every "
                "rollout's id and leaves the ini file unread, so nothing would match the "
                "baseline"
            )
    return None


def relative_to_root(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` with forward slashes (as node ids are), else absolute."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def session_paths(args: Iterable[str], invocation_dir: Path, root: Path) -> list[str]:
    """The paths or node ids a session collected from, relative to its rootdir."""
    found = []
    for arg in args:
        path, sep, rest = str(arg).partition("::")
        where = Path(path) if Path(path).is_absolute() else invocation_dir / path
        relative = relative_to_root(where, root)
        found.append(f"{relative}{sep}{rest}" if sep else relative)
    return found
