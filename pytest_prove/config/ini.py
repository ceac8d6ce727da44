"""The ``prove_*`` ini values, in one table both front doors read.

The plugin registers each row with pytest (``parser.addini``) and reads a session's values
through it; the command line (``pytest-prove``) fills what its flags leave unsaid from the same
rows (:func:`pytest_prove.config.project.fill_defaults`). So a value means the same, is checked
by the same parser and has the same default on both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, final

from .values import (
    chaos_switch,
    design_rates,
    error_rate,
    fail_on,
    margin,
    max_mde,
    metric_list,
    metric_margins,
    missing_mode,
    seconds,
    share,
    switch,
    target_lines,
)

__all__ = ["FROM_INI", "INI", "PARSED", "IniValue", "given_or_ini"]


class _Parsed:
    """The marker of a value that is parsed even when left empty (an empty one is refused)."""

    def __repr__(self) -> str:
        return "PARSED"


PARSED: Final = _Parsed()


@final
@dataclass(frozen=True, slots=True)
class IniValue:
    """One ini value: its name, its help, its default as pytest is given it, its kind
    (pytest's ``type=``) and the parser that checks it (``argparse.ArgumentTypeError`` with
    what was expected and got)."""

    name: str
    help: str
    default: str | bool | list[str]
    parse: Callable[[str], Any] = str
    kind: Literal["string", "bool", "paths"] = "string"
    #: What a value left empty means (``prove_margin =``); :data:`PARSED`: it is parsed as
    #: written, so an empty one is refused (``prove_q =``).
    if_empty: Any = PARSED

    def value(self, text: str | None) -> Any:
        """The value ``text`` is read as (None: not written, so the default's)."""
        if text is None:
            if not isinstance(self.default, str):
                return self.default
            text = self.default
        if self.if_empty is PARSED:
            return self.parse(text)
        text = text.strip()
        return self.parse(text) if text else self.if_empty


#: Every ``prove_*`` ini value the plugin registers here, in the order ``pytest --help`` lists
#: them (the token prices and the span capture register their own: plugin/budget.py,
#: traces/capture.py).
INI: Final[Mapping[str, IniValue]] = {value.name: value for value in (
    IniValue("prove_store", "folder of runs and baselines (relative to rootdir)",
             default=".prove"),
    IniValue("prove_specs", "sweep spec files to collect besides prove_*.toml",
             default=[], kind="paths"),
    IniValue("prove_q", "default for --prove-q", default="0.05", parse=error_rate),
    IniValue("prove_max_mde", "default for --prove-max-mde", default="0.20", parse=max_mde),
    IniValue("prove_fail_on", "verdicts that fail besides worse and too-small (and "
             "not-within with a margin); no-WORD leaves one out", default="", parse=fail_on,
             if_empty=None),  # None: the defaults (values.gate_fails_on)
    IniValue("prove_max_errored", "default for --prove-max-errored (share of a "
             "condition's episodes without an outcome a baseline may hold)",
             default="0.25", parse=share, if_empty=0.25),
    IniValue("prove_margin", "default for --prove-margin (empty: no margin)", default="",
             parse=margin, if_empty=None),
    IniValue("prove_episode_timeout", "default for --prove-episode-timeout (seconds; "
             "empty: 1800 for a sync rollout without timeout=; 0 or none: no timeout)",
             default="", parse=seconds, if_empty=None),
    IniValue("prove_missing", "default for --prove-missing: test or ignore",
             default="test", parse=missing_mode, if_empty="test"),
    IniValue("prove_allow_underpowered", "default for --prove-allow-underpowered",
             default=False, parse=switch, kind="bool"),
    IniValue("prove_chaos", "default for --prove-chaos: on or off", default="on",
             parse=chaos_switch, if_empty=True),
    IniValue("prove_design_rates", "default for --prove-design-rates: any (every base "
             "rate, the worst case) or baseline (each test's base rate within its 99% "
             "interval from the baseline)",
             default="any", parse=design_rates, if_empty=True),
    IniValue("prove_sequential", "default for --prove-sequential", default=False,
             parse=switch, kind="bool"),
    IniValue("prove_metrics", "default for --prove-metrics: built-in metrics by name "
             "(duration, tokens, cost) and NAME=higher or NAME=lower for your own",
             default="", parse=metric_list, if_empty=()),
    IniValue("prove_metric_margin", "default for --prove-metric-margin: NAME=SIZE or "
             "NAME=PERCENT% each (empty: no metric margin)",
             default="", parse=metric_margins, if_empty={}),
    IniValue("prove_targets", "absolute targets, one a line: EVENT<=RATE or EVENT>=RATE "
             "(pass^K, pass@K; AXIS=VALUE: before one holds it to a condition)",
             default="", parse=target_lines, if_empty=()),
)}


#: The options whose default is the ini value of the same name, on both front doors (the
#: plugin reads ``--prove-max-mde`` into ``prove_max_mde``, the command line ``--max-mde`` into
#: ``max_mde``), in the order a session reads them (the first bad one is the one named).
FROM_INI: Final = ("prove_q", "prove_max_mde", "prove_margin", "prove_fail_on",
                   "prove_max_errored", "prove_missing", "prove_chaos",
                   "prove_allow_underpowered")


def given_or_ini(given: Iterable[tuple[str, Any]], read: Callable[[str], Any]) -> dict[str, Any]:
    """Each option ``given`` names (by its ini value's name) as it was given, else (None: left
    unsaid) its ini value as ``read`` reads it: the one rule both front doors read a value by.
    ``read`` raises what its front door says of a bad value; a value given is not read."""
    return {name: value if value is not None else read(name) for name, value in given}
