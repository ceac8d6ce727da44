"""What identifies the agent's environment, as each run records it.

A run records, in its manifest's ``environment`` (and so in a baseline's header):

- ``variables``: the environment variables the user declares as part of the agent (ini
  ``prove_record_env = AGENT_MODEL SUPPORT_BOT_PROMPT``, ``--prove-record-env``), each as
  ``{"value": TEXT}``, ``{"unset": true}``, or, for a name that looks secret (it holds
  KEY, TOKEN, SECRET, PASSWORD or AUTH), ``{"digest": "sha256:<12 hex>"}``: a short digest
  that tells two values apart and never the value;
- ``packages``: the versions of the packages the user names (ini
  ``prove_record_packages``, ``--prove-record-packages``), pytest-prove's and Python's own
  (``null`` for a package not installed);
- ``platform``: the operating system and machine, as :func:`platform.platform` says, and
  ``system``, the same without versions (``Linux x86_64``: what two runs are compared on);
- ``models``: the model names seen in captured spans (``gen_ai.request.model``,
  ``gen_ai.response.model``), each with how many spans named it in the run.

Only the standard library: the store (which writes it), the review (which compares two) and
the plugin (which reads the names) all import this module.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shlex
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any, Final

from ..errors import ProveError

__all__ = ["MODEL_ATTRIBUTES", "SECRET_MARKS", "EnvironmentNameError", "add_models",
           "changed_variables", "environment_record", "is_secret", "parse_package_names",
           "parse_variable_names", "replay_environment", "secret_digest", "shell_prefix"]

#: A name holding one of these (in any case) is recorded as a digest, never its value.
SECRET_MARKS: Final = ("KEY", "TOKEN", "SECRET", "PASSWORD", "AUTH")
#: The span attributes whose model names a run counts, and the key each is counted under.
MODEL_ATTRIBUTES: Final = (("gen_ai.request.model", "request"),
                           ("gen_ai.response.model", "response"))
#: The packages every run records besides those named.
OWN_PACKAGES: Final = ("pytest-prove",)

_VARIABLE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: A distribution's name as PEP 508 spells it.
_PACKAGE: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z")
_DIGEST_HEX: Final = 12


class EnvironmentNameError(ProveError, ValueError):
    """A name in prove_record_env or prove_record_packages that cannot be one."""


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[\s,]+", text.strip()) if w]


def parse_variable_names(text: str, where: str = "prove_record_env") -> tuple[str, ...]:
    """The environment variables named in ``text`` (separated by spaces or commas), each
    once, in order; a word that is no variable's name is refused, naming it and the fix."""
    names: list[str] = []
    for word in _words(text):
        if not _VARIABLE.match(word):
            raise EnvironmentNameError(
                f"{where}: {word!r} is not an environment variable's name (letters, digits "
                "and _, not starting with a digit); name the variables as the shell does, "
                "separated by spaces, e.g. prove_record_env = AGENT_MODEL SUPPORT_BOT_PROMPT "
                "(a value is read from the environment, never written here)")
        if word not in names:
            names.append(word)
    return tuple(names)


def parse_package_names(text: str, where: str = "prove_record_packages") -> tuple[str, ...]:
    """The packages named in ``text`` (separated by spaces or commas), each once; a word
    that is no distribution's name (a version pin, a path) is refused with the fix."""
    names: list[str] = []
    for word in _words(text):
        if not _PACKAGE.match(word):
            raise EnvironmentNameError(
                f"{where}: {word!r} is not a package's name; name installed distributions "
                "as pip does, without versions, separated by spaces, e.g. "
                "prove_record_packages = openai langgraph")
        if word not in names:
            names.append(word)
    return tuple(names)


def is_secret(name: str) -> bool:
    """Whether a variable's name looks secret: its value is recorded as a digest."""
    upper = name.upper()
    return any(mark in upper for mark in SECRET_MARKS)


def secret_digest(value: str) -> str:
    """A short digest of a secret value: enough to tell two values apart, not to read one."""
    found = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"sha256:{found[:_DIGEST_HEX]}"


def _variable(name: str, environ: Mapping[str, str]) -> dict[str, Any]:
    value = environ.get(name)
    if value is None:
        return {"unset": True}
    if is_secret(name):
        return {"digest": secret_digest(value)}
    return {"value": value.encode("utf-8", "backslashreplace").decode("utf-8")}


@functools.lru_cache(maxsize=256)
def _version(name: str) -> str | None:
    """The installed version of ``name``, read once a process (each read parses the
    package's metadata file, about a millisecond): what a process imported does not change
    when a package is upgraded under it."""
    try:
        return metadata.version(name)
    except (metadata.PackageNotFoundError, ValueError):
        return None


def environment_record(variables: Iterable[str], packages: Iterable[str],
                       environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The environment of a run as its manifest keeps it (``models`` empty: they are
    counted as episodes are stored, :func:`add_models`)."""
    env = os.environ if environ is None else environ
    found: dict[str, str | None] = {name: _version(name)
                                    for name in (*OWN_PACKAGES, *packages)}
    found["python"] = platform.python_version()
    return {"variables": {name: _variable(name, env) for name in variables},
            "packages": found, "platform": platform.platform(),
            "system": f"{platform.system()} {platform.machine()}".strip(), "models": {}}


def add_models(models: dict[str, dict[str, int]], spans: object) -> None:
    """Count the model names ``spans`` (an episode's stored spans) name, into ``models``
    (``{"request": {name: spans}, "response": {...}}``)."""
    if not isinstance(spans, list):
        return
    for span in spans:
        attributes = span.get("attributes") if isinstance(span, dict) else None
        if not isinstance(attributes, dict):
            continue
        for attribute, kind in MODEL_ATTRIBUTES:
            name = attributes.get(attribute)
            if isinstance(name, str) and name:
                seen = models.setdefault(kind, {})
                seen[name] = seen.get(name, 0) + 1


def replay_environment(record: object) -> tuple[tuple[tuple[str, str | None], ...],
                                                tuple[str, ...]]:
    """What a replay of a run needs set: ``(name, value)`` for each declared variable that
    was set (value None for a secret, recorded only as a digest), and the names that were
    unset; nothing for a run without the record."""
    variables = record.get("variables") if isinstance(record, dict) else None
    if not isinstance(variables, dict):
        return (), ()
    given: list[tuple[str, str | None]] = []
    unset: list[str] = []
    for name, entry in variables.items():
        if not isinstance(entry, dict) or not _VARIABLE.match(str(name)):
            continue
        if entry.get("unset"):
            unset.append(str(name))
        elif isinstance(entry.get("value"), str):
            given.append((str(name), entry["value"]))
        else:
            given.append((str(name), None))
    return tuple(given), tuple(unset)


def shell_prefix(env: Iterable[tuple[str, str | None]],
                 unset: Iterable[str] = ()) -> tuple[str, tuple[str, ...]]:
    """The words a POSIX shell command is prefixed with to run in a recorded environment
    (``env -u NAME`` for a variable that was unset, then ``NAME=VALUE`` quoted), and the
    secret variables it cannot set (to be exported by hand)."""
    unset = list(unset)
    words = ["env", *(w for name in unset for w in ("-u", name))] if unset else []
    secrets = []
    for name, value in env:
        if value is None:
            secrets.append(name)
        else:
            words.append(f"{name}={shlex.quote(value)}")
    return " ".join(words), tuple(secrets)


def _shown(entry: object) -> str:
    """A recorded variable as a person reads it (a secret as its digest)."""
    if not isinstance(entry, Mapping):
        return "not recorded"
    if entry.get("unset"):
        return "unset"
    if isinstance(entry.get("digest"), str):
        return f"a secret (digest {entry['digest']})"
    return repr(entry.get("value"))


def changed_variables(record: object, environ: Mapping[str, str] | None = None,
                      ) -> list[tuple[str, str, str]]:
    """The declared variables a run recorded (``record``: its manifest's environment) whose
    value differs in this process: ``(name, as recorded, as now)``, a secret as its digest."""
    variables = record.get("variables") if isinstance(record, Mapping) else None
    if not isinstance(variables, Mapping):
        return []
    env = os.environ if environ is None else environ
    names = [str(n) for n in variables if _VARIABLE.match(str(n))]
    now = {name: _variable(name, env) for name in names}
    return [(name, _shown(variables[name]), _shown(now[name])) for name in names
            if variables[name] != now[name]]
