"""TOML sweep specs: a ``prove_*.toml`` file names a target ``fn(cfg, seed)`` and declares
it as ``@prove.rollout`` would (:class:`~.spec.Declaration`); :func:`load_spec` reads and
checks one, every error naming the file and, where it can, the line."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

from .capture import CaptureConfig
from .chaos import ChaosConfig
from .metrics import MetricError, directions
from .spec import Axis, Declaration, SpecError, _table
from .targets import TargetError, parse_targets

__all__ = ["SweepSpec", "load_spec"]


# TOML sweep specs


@final
@dataclass(frozen=True, slots=True)
class SweepSpec:
    """A ``prove_*.toml`` file: a target ``fn(cfg, seed)`` and its declaration."""

    path: Path
    target: str
    target_id: str
    declaration: Declaration


_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_TOP_KEYS = {"target", "target_id", "t_unit", "replicates", "concurrency", "timeout", "axes",
             "declare", "capture", "chaos", "sequential", "metrics", "targets", "arms",
             "reference"}


def _line_of(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    return None


def load_spec(path: Path) -> SweepSpec:
    """Read and check a sweep spec; every error names the file and, where it can, the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the sweep spec: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message ends "(at line L, column C)"; keep it, with the file in front.
        raise SpecError(f"{path}: malformed TOML: {exc}") from None

    def where(needle: str) -> str:
        line = _line_of(text, needle)
        return f"{path}:{line}" if line else str(path)

    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise SpecError(
            f"{where(unknown[0])}: unknown key {unknown[0]!r} in the sweep spec; "
            f"known keys: {', '.join(sorted(_TOP_KEYS))}"
        )
    target = data.get("target")
    if not isinstance(target, str) or not _TARGET.match(target):
        raise SpecError(
            f"{where('target')}: target must be 'module:function' naming fn(cfg, seed), "
            f"got {target!r}"
        )
    target_id = data.get("target_id", target)
    if not isinstance(target_id, str) or not target_id:
        raise SpecError(f"{where('target_id')}: target_id must be a non-empty string")
    declare = data.get("declare")
    if declare is None and data.get("metrics"):
        declare = {}  # metrics only: no outcomes to declare
    if not isinstance(declare, dict):
        raise SpecError(
            f"{path}: the sweep spec needs a [declare] table with outcomes, failures "
            "and successes, or, when only scores matter, a [metrics] table alone"
        )
    unknown = sorted(set(declare) - {"outcomes", "failures", "successes"})
    if unknown:
        raise SpecError(f"{where(unknown[0])}: unknown key {unknown[0]!r} in [declare]")
    axes_table = data.get("axes", {})
    if not isinstance(axes_table, dict):
        raise SpecError(f"{where('axes')}: axes must be tables, [axes.NAME]")
    axes: list[Axis] = []
    for name, table in axes_table.items():
        if not isinstance(table, dict):
            raise SpecError(f"{where(f'axes.{name}')}: [axes.{name}] must be a table")
        kind = table.get("type", "categorical")
        if kind not in ("categorical", "continuous"):
            raise SpecError(
                f"{where(f'axes.{name}')}: axis {name!r} has type {kind!r}; "
                "use \"categorical\" or \"continuous\""
            )
        values = table.get("values")
        if not isinstance(values, list):
            raise SpecError(f"{where(f'axes.{name}')}: axis {name!r} needs values = [...]")
        try:
            axes.append(Axis(name, tuple(values), kind))
        except SpecError as exc:
            raise SpecError(f"{where(f'axes.{name}')}: {exc}") from None

    def table_at(key: str) -> str:
        line = where(f"[{key}]") if f"[{key}]" in text else where(key)
        return f"{line}: [{key}]"

    capture = (None if "capture" not in data else
               _table(CaptureConfig.from_mapping, data["capture"], table_at("capture")))
    chaos = (None if "chaos" not in data else
             _table(ChaosConfig.from_mapping, data["chaos"], table_at("chaos")))
    try:
        metrics = directions(data.get("metrics"), table_at("metrics"))
    except MetricError as exc:
        raise SpecError(str(exc)) from None
    try:
        targets = parse_targets(data.get("targets"), table_at("targets"))
    except TargetError as exc:
        raise SpecError(_at_line(str(exc), text, path)) from None
    try:
        declaration = Declaration(
            metrics=metrics,
            targets=targets,
            failures=tuple(_seq(declare.get("failures"))),
            successes=tuple(_seq(declare.get("successes"))),
            outcomes=tuple(_seq(declare.get("outcomes"))),
            replicates=data.get("replicates", 100),
            t_unit=data.get("t_unit"),
            concurrency=data.get("concurrency"),
            timeout=data.get("timeout"),
            sequential=data.get("sequential"),
            arms=_arms(data.get("arms")),
            reference=data.get("reference"),
            axes=tuple(axes),
            rollout_id=target_id,
            capture=capture,
            chaos=chaos,
        )
    except SpecError as exc:
        # Point at the line of the key the message is about (an outcome's own name may
        # begin it, so the phrases are read first).
        message = str(exc)
        if message.startswith(str(path)):  # a target's, which names its place already
            raise SpecError(_at_line(message, text, path)) from None
        key = next((needle for phrase, needle in (
            ("must be among the declared outcomes", "outcomes"),
            ("cannot be both a failure and a success", "successes"),
            ("at least one failure or success", "[declare]")) if phrase in message), None)
        key = key or next((k for k in ("replicates", "concurrency", "timeout", "t_unit",
                                       "sequential", "failures", "successes", "outcomes",
                                       "arms", "reference")
                           if message.startswith((f"{k} must ", f"{k} names ", f"{k} lists ",
                                                  f"{k} "))), None)
        if key is None and message.startswith("arm "):
            key = "arms"
        raise SpecError(f"{where(key) if key else path}: {exc}") from None
    return SweepSpec(path=path, target=target, target_id=target_id, declaration=declaration)


def _at_line(message: str, text: str, path: Path) -> str:
    """A target's message pointing at the line of the target it quotes (the first line
    after ``[targets]`` that holds its event), where it can be found."""
    quoted = re.search(r"'([^']*)'", message.split("[targets]", 1)[-1])
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "[targets]"), None)
    if quoted is None or start is None:
        return message
    event = re.split(r"<=|>=|:", quoted.group(1))[-1 if ":" in quoted.group(1) else 0]
    event = re.split(r"<=|>=", event)[0].strip()
    line = next((i + 1 for i in range(start + 1, len(lines)) if event and event in lines[i]),
                None)
    if line is None:
        return message
    return re.sub(r"^.*?: \[targets\]", f"{path}:{line}: [targets]", message, count=1)




def _arms(value: object) -> Any:
    """A spec's ``arms``: an array (checked by the declaration), or nothing."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SpecError(f'arms must be an array of names, e.g. arms = ["current", "cheaper"], '
                        f"got {value!r}")
    return tuple(value)


def _seq(value: object) -> Sequence[str]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SpecError(f"outcome lists must be arrays of strings, got {value!r}")
    return tuple(value)
