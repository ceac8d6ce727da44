"""The environment a run records (declare/environment.py): its options and ini values.

``--prove-record-env`` (ini ``prove_record_env``) names the environment variables that are
part of the agent, ``--prove-record-packages`` (ini ``prove_record_packages``) the packages
whose versions identify it.  The controller reads them once, before anything runs, and the
run records them as its tests start (workers run in the controller's environment, and
record nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ..declare.environment import (
    EnvironmentNameError,
    changed_variables,
    parse_package_names,
    parse_variable_names,
)
from .options import option_group

__all__ = ["add_options", "check_resumed", "recorded_names"]


def add_options(parser: pytest.Parser) -> None:
    group = option_group(parser, "reports")
    group.addoption("--prove-record-env", metavar="NAMES", default=None,
                    help="environment variables that are part of the agent (e.g. "
                         "'AGENT_MODEL SUPPORT_BOT_PROMPT'): their values are recorded with "
                         "the run, compared with the baseline's and put before every replay "
                         "command; a name holding KEY, TOKEN, SECRET, PASSWORD or AUTH is "
                         "recorded as a short digest, never its value; default: ini "
                         "prove_record_env")
    group.addoption("--prove-record-packages", metavar="NAMES", default=None,
                    help="packages whose installed versions are recorded with the run and "
                         "compared with the baseline's (e.g. 'openai langgraph'; "
                         "pytest-prove's and Python's are always); default: ini "
                         "prove_record_packages")
    parser.addini("prove_record_env", "environment variables recorded with each run (see "
                  "--prove-record-env)", default="")
    parser.addini("prove_record_packages", "packages whose versions are recorded with each "
                  "run (see --prove-record-packages)", default="")


def recorded_names(config: pytest.Config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The variables and packages this session records, from the options or else the ini;
    a usage error, before anything runs, for a name that cannot be one."""
    found: list[tuple[str, ...]] = []
    for option, ini, parse in (("prove_record_env", "prove_record_env", parse_variable_names),
                               ("prove_record_packages", "prove_record_packages",
                                parse_package_names)):
        given = getattr(config.option, option, None)
        where = (f"--{option.replace('_', '-')}" if given is not None
                 else f"ini option {ini}" + (f" in {config.inipath}" if config.inipath else ""))
        text = given if given is not None else str(config.getini(ini))
        try:
            found.append(parse(text, where))
        except EnvironmentNameError as exc:
            raise pytest.UsageError(str(exc)) from None
    return found[0], found[1]


def check_resumed(manifest: Mapping[str, Any], variables: tuple[str, ...]) -> None:
    """Refuse, before anything runs, to resume a run in another declared environment: its
    episodes would mix two agents under one record (a usage error naming each variable,
    its recorded value and this session's, never a secret's)."""
    found = manifest.get("environment")
    differ = [d for d in changed_variables(found) if d[0] in variables]
    if not differ:
        return
    said = "; ".join(f"{name} was {was}, is {now}" for name, was, now in differ)
    raise pytest.UsageError(
        f"run {manifest.get('name')!r} was recorded in another environment than this "
        f"session's ({said}), and resuming it would mix two agents in one run; set the "
        "variables back as recorded (pytest-prove show prints them), or start a new run "
        "without --prove-resume")
