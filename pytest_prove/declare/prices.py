"""Declared prices: what each model costs, read from the pytest configuration.

There is no built-in price list: a price is what the user declared, per model, per
million input and per million output tokens, in ini (``prove_prices``, one
``MODEL = INPUT OUTPUT`` a line) or in ``pyproject.toml`` as
``[tool.pytest-prove.prices]``, ``MODEL = [INPUT, OUTPUT]``.  Kept apart from
:mod:`pytest_prove.review.cost` and :mod:`pytest_prove.report.cost` so that a session reads
its prices without loading the cost reports.
"""

from __future__ import annotations

import configparser
import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import final

from ..errors import ProveError

__all__ = ["Price", "PriceError", "Prices", "find_prices", "parse_price_lines", "price_of"]


class PriceError(ProveError, ValueError):
    """A price declaration that cannot be read, with where it is and the fix."""


@final
@dataclass(frozen=True, slots=True)
class Price:
    """What a model costs, in money per million input and per million output tokens."""

    input_per_million: float
    output_per_million: float

    def of(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.input_per_million
                + output_tokens * self.output_per_million) / 1e6


@final
@dataclass(frozen=True, slots=True)
class Prices:
    """Declared prices by model, and where they were declared."""

    by_model: Mapping[str, Price] = field(default_factory=dict)
    source: str | None = None

    def __bool__(self) -> bool:
        return bool(self.by_model)

    def for_model(self, model: str) -> Price | None:
        """The price of ``model``: its own, or that of the longest declared name it extends.

        Providers answer with dated names (``gpt-4.1-mini-2025-04-14``); a price declared
        for ``gpt-4.1-mini`` covers them, and ``gpt-4.1`` does not take ``gpt-4.1-mini``.
        """
        if model in self.by_model:
            return self.by_model[model]
        best = max((name for name in self.by_model if model.startswith(name + "-")),
                   key=len, default=None)
        return None if best is None else self.by_model[best]

    def to_json(self) -> dict[str, list[float]]:
        return {m: [p.input_per_million, p.output_per_million]
                for m, p in sorted(self.by_model.items())}


def price_of(model: str, values: Sequence[object], where: str) -> Price:
    if len(values) != 2:
        raise PriceError(f"{where}: the price of {model!r} needs two numbers, per million input "
                         f"and per million output tokens, e.g. '{model} = 0.40 1.60'; got "
                         f"{list(values)!r}")
    numbers: list[float] = []
    for value in values:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise PriceError(f"{where}: the price of {model!r} must be numbers, got "
                             f"{value!r}") from None
        if not math.isfinite(number) or number < 0:
            raise PriceError(f"{where}: the price of {model!r} must be >= 0, got {value!r}")
        numbers.append(number)
    return Price(numbers[0], numbers[1])


def parse_price_lines(lines: Iterable[str], where: str) -> Prices:
    """Read ``MODEL = INPUT OUTPUT`` lines (blank lines and ``#`` comments skipped)."""
    found: dict[str, Price] = {}
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        model, sep, rest = line.partition("=")
        model = model.strip()
        if not sep or not model:
            raise PriceError(f"{where}: cannot read the price line {raw.strip()!r}; write "
                             "'MODEL = INPUT OUTPUT' in money per million tokens, e.g. "
                             "'gpt-4.1-mini = 0.40 1.60'")
        found[model] = price_of(model, rest.replace(",", " ").split(), where)
    return Prices(found, where if found else None)


def _from_pyproject(path: Path) -> Prices:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PriceError(f"{path}: cannot read the prices: {exc}") from None
    table = data.get("tool", {}).get("pytest-prove", {}).get("prices")
    if table is not None:
        where = f"{path} [tool.pytest-prove.prices]"
        if not isinstance(table, dict):
            raise PriceError(f"{where} must be a table of MODEL = [INPUT, OUTPUT]")
        found = {}
        for model, value in table.items():
            if not isinstance(value, list):
                raise PriceError(f"{where}: {model} must be [INPUT, OUTPUT] per million tokens, "
                                 f"got {value!r}")
            found[str(model)] = price_of(str(model), value, where)
        return Prices(found, where)
    lines = data.get("tool", {}).get("pytest", {}).get("ini_options", {}).get("prove_prices")
    if lines is None:
        return Prices()
    if isinstance(lines, str):
        lines = lines.splitlines()
    return parse_price_lines([str(x) for x in lines], f"{path} prove_prices")


def _from_ini(path: Path, section: str) -> Prices | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error) as exc:
        raise PriceError(f"{path}: cannot read the prices: {exc}") from None
    if not parser.has_section(section):
        return None
    text = parser.get(section, "prove_prices", fallback=None)
    return Prices() if text is None else parse_price_lines(text.splitlines(),
                                                           f"{path} prove_prices")


def find_prices(start: Path) -> Prices:
    """The prices declared in the pytest configuration nearest ``start``, as pytest finds it.

    The first of ``pytest.ini``, ``pyproject.toml``, ``tox.ini``, ``setup.cfg`` in
    ``start`` or a parent that holds a pytest configuration wins.
    """
    for folder in (start, *start.parents):
        ini = folder / "pytest.ini"
        if ini.is_file():
            return _from_ini(ini, "pytest") or Prices()
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            prices = _from_pyproject(pyproject)
            if prices:
                return prices
        for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
            path = folder / name
            if path.is_file():
                found = _from_ini(path, section)
                if found is not None:
                    return found
    return Prices()
