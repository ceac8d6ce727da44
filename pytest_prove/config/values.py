"""Option values checked at the door: the ``type=`` callables of pytest's options and the CLI's.

Each raises ``argparse.ArgumentTypeError`` with what was expected and what was got, which
argparse (and so pytest) turns into a usage error naming the option.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Final

from ..declare.metrics import MetricError, MetricMargin, parse_metric_list, parse_metric_margins
from ..declare.targets import Target, TargetError, parse_target, parse_target_lines
from ..record import MISSING_MODES, Missing
from ..store import StoreError, check_name, check_run_name

__all__ = ["CONCURRENCY_RANGE", "DEFAULT_EPISODE_TIMEOUT", "DEFAULT_FAIL_ON", "FAIL_ON",
           "MARGIN_FAIL_ON", "MARGIN_RANGE", "MAX_MDE_RANGE", "NO_TIMEOUT", "Q_RANGE",
           "REPLICATES_RANGE", "TOKENS_RANGE", "agreement_runs", "concurrency", "count",
           "design_rates", "error_rate", "fail_on",
           "fraction", "gate_fails_on", "margin", "max_mde", "missing_mode", "new_run_name",
           "positive_int", "replay_name", "replicates", "report_path", "run_name", "salt_word",
           "seconds", "shard", "share", "store_name", "switch", "target", "target_lines",
           "tokens"]

#: The verdicts a session or ``check`` can be told to fail on (not-within: some condition
#: not shown within --prove-margin; missed: a target row that misses its target, which
#: fails by default; not-met: one too small to tell, not shown to meet its target).
FAIL_ON: Final = ("worse", "too-small", "not-within", "missed", "not-met")
#: What fails when nothing says otherwise: a significant worsening, a comparison too small to
#: tell (some row could not have shown a change of max_mde), and with a margin, a condition
#: not shown within it (naming a margin asks for that claim). ``--prove-fail-on`` adds to
#: these; a word written ``no-WORD`` takes one out on purpose, and the gate then says so.
DEFAULT_FAIL_ON: Final = frozenset({"worse", "too-small"})
MARGIN_FAIL_ON: Final = frozenset({"worse", "too-small", "not-within"})

# The range of each numeric option, both ends allowed (docs/configuration.md lists them).
# Outside them the statistics cannot answer in time or at all: q = 1e-300 kept the design
# check searching for minutes, a margin of 1e-300 divided by zero, 10**18 replicates never
# finished collecting. The ends are far beyond any sweep that could be run.
#: The error rate q (--prove-q, ini prove_q; the command line's --q and --alpha).
Q_RANGE: Final = (1e-6, 0.5)
#: The largest change you accept not seeing (--prove-max-mde, ini prove_max_mde).
MAX_MDE_RANGE: Final = (0.001, 0.999)
#: The non-inferiority margin D (--prove-margin, ini prove_margin).
MARGIN_RANGE: Final = (0.001, 0.999)
#: Replicates a condition (--prove-replicates): a sweep holds at most 1,000,000 items.
REPLICATES_RANGE: Final = (1, 100_000)
#: Replicates run at once in an item (--prove-concurrency).
CONCURRENCY_RANGE: Final = (1, 10_000)
#: A token cap (--prove-token-cap, --prove-output-token-cap): up to 10**18, as stored.
TOKENS_RANGE: Final = (1, 10**18)


def _shown(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _in_range(text: str, bounds: tuple[float, float], what: str, note: str = "") -> float:
    low, high = bounds
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and low <= value <= high):
        raise argparse.ArgumentTypeError(
            f"expected {what} from {_shown(low)} to {_shown(high)}{note}, got {text!r}")
    return value


def _whole_in_range(text: str, bounds: tuple[int, int], what: str) -> int:
    low, high = bounds
    try:
        value = int(text.strip().replace("_", "").replace(",", ""))
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(
            f"expected {what}, a whole number from {_shown(low)} to {_shown(high)}, "
            f"got {text!r}")
    return value


def error_rate(text: str) -> float:
    """The error rate q of the flags and the verdict (or the command line's --alpha)."""
    return _in_range(text, Q_RANGE, "an error rate")


def max_mde(text: str) -> float:
    """The largest change in a proportion you accept not being able to see."""
    return _in_range(text, MAX_MDE_RANGE, "a change in a failure rate")


def replicates(text: str) -> int:
    """Replicates a condition (--prove-replicates)."""
    return _whole_in_range(text, REPLICATES_RANGE, "replicates a condition")


def concurrency(text: str) -> int:
    """Replicates run at once in an item (--prove-concurrency)."""
    return _whole_in_range(text, CONCURRENCY_RANGE, "replicates at once")


def tokens(text: str) -> int:
    """A number of tokens (--prove-token-cap, --prove-output-token-cap)."""
    return _whole_in_range(text, TOKENS_RANGE, "a number of tokens")


def positive_int(text: str) -> int:
    """A whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


#: The episode timeout of a sync rollout that sets none (--prove-episode-timeout, ini
#: prove_episode_timeout, timeout=): 30 minutes. A healthy agent episode ends in seconds to
#: minutes, so this never stops one that is working, yet a rollout that never returns
#: (a lost socket, a loop waiting for a reply that will not come) no longer hangs the
#: session, and a CI job is left hours to report what it ran (GitHub's ends at 6 hours).
DEFAULT_EPISODE_TIMEOUT: Final = 1800.0
#: The words that switch the episode timeout off on purpose.
NO_TIMEOUT: Final = ("0", "none", "off")


def seconds(text: str) -> float:
    """A number of seconds above 0, or 0 for none (``0``, ``none`` or ``off``): the episode
    timeout (``--prove-episode-timeout``, ini ``prove_episode_timeout``)."""
    if text.strip().lower() in NO_TIMEOUT:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds above 0, or 0 (none, off) for no timeout, got "
            f"{text!r}")
    return value


def fraction(text: str) -> float:
    """A number strictly between 0 and 1 (an error rate, a change in a proportion)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {value}")
    return value


def margin(text: str) -> float:
    """A non-inferiority margin D: the largest rise toward worse you accept."""
    return _in_range(text, MARGIN_RANGE, "a margin D", " (the largest rise in a failure rate "
                     "you accept, e.g. 0.05)")


def count(text: str) -> int:
    """A whole number, 0 or more (how many runs to keep)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a whole number, 0 or more, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, got {value}")
    return value


def store_name(text: str) -> str:
    """A run or baseline name that cannot escape the store."""
    try:
        return check_name(text)
    except StoreError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def new_run_name(text: str) -> str:
    """A name for a new run: not ``latest``, not shaped like a run id (--prove-name)."""
    try:
        return check_run_name(text)
    except StoreError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_name(text: str) -> str:
    """A run name, or ``latest``."""
    return text if text == "latest" else store_name(text)


def replay_name(text: str) -> str:
    """A run as every front door names one: a name, a run id, latest or baseline:NAME."""
    if text.startswith("baseline:"):
        return "baseline:" + store_name(text.removeprefix("baseline:"))
    return run_name(text)


def agreement_runs(text: str) -> tuple[str, ...]:
    """--prove-agreement-from: RUN (read against the run it was paired with), or A,B (two
    runs of one salt, as ``pytest-prove aa`` reads them)."""
    names = tuple(part.strip() for part in text.split(","))
    if not 1 <= len(names) <= 2 or not all(names):
        raise argparse.ArgumentTypeError(
            f"expected RUN or A,B (two runs on one salt), got {text!r}")
    return tuple(replay_name(name) for name in names)


def report_path(text: str) -> Path:
    """A report file whose suffix names its kind (--prove-report)."""
    path = Path(text)
    if path.suffix.lower() not in (".html", ".htm", ".md", ".json"):
        raise argparse.ArgumentTypeError(
            f"expected a file ending in .html, .md or .json, got {text!r}")
    return path


def switch(text: str) -> bool:
    """A bool ini value, as pytest reads one (true/false, yes/no, on/off, 1/0; an empty one
    is refused, as pytest refuses it)."""
    word = text.strip().lower()
    if word in ("true", "yes", "on", "1", "y", "t"):
        return True
    if word in ("false", "no", "off", "0", "n", "f"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def missing_mode(text: str) -> Missing:
    """How episodes without an outcome are read: test (the default) or ignore."""
    word = text.strip()
    if word == "test":
        return "test"
    if word == "ignore":
        return "ignore"
    raise argparse.ArgumentTypeError(
        f"expected one of {', '.join(MISSING_MODES)}, got {text!r} (test: a rise in episodes "
        "without an outcome is worse; ignore: they are infrastructure, leave them out)")


def chaos_switch(text: str) -> bool:
    """--prove-chaos: on (inject the faults rollouts declare) or off (inject none)."""
    word = text.strip().lower()
    if word in ("on", "off"):
        return word == "on"
    raise argparse.ArgumentTypeError(
        f"expected on or off, got {text!r} (on: inject the faults each rollout's chaos "
        "declares; off: inject none)")


def design_rates(text: str) -> bool:
    """--prove-design-rates: baseline (the design check reads each test's base rate from
    the baseline, within its exact 99% interval) or any (every base rate from 0 to 1)."""
    word = text.strip().lower()
    if word in ("baseline", "any"):
        return word == "baseline"
    raise argparse.ArgumentTypeError(
        f"expected baseline or any, got {text!r} (baseline: the design check reads each "
        "test's base rate within its 99% interval from the baseline; any: every base rate)")


def fail_on(text: str) -> frozenset[str]:
    """A comma-separated set of verdicts: worse, too-small, not-within add to what fails;
    ``no-worse``, ``no-too-small``, ``no-not-within`` take one out on purpose (see
    :func:`gate_fails_on`)."""
    words = frozenset(w.strip() for w in text.split(",") if w.strip())
    known = set(FAIL_ON) | {f"no-{w}" for w in FAIL_ON}
    unknown = sorted(words - known)
    if unknown or not words:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {', '.join(FAIL_ON)} (each adds to what "
            "fails), or no-WORD to leave one out on purpose (e.g. no-worse), got "
            f"{text!r}")
    both = sorted(w for w in FAIL_ON if w in words and f"no-{w}" in words)
    if both:
        raise argparse.ArgumentTypeError(
            f"{both[0]} and no-{both[0]} both given in {text!r}; keep one")
    return words


def gate_fails_on(asked: frozenset[str] | None, *, margin: bool) -> frozenset[str]:
    """The verdicts a gate fails on: the defaults (:data:`DEFAULT_FAIL_ON`, or
    :data:`MARGIN_FAIL_ON` with a margin), plus each word ``asked`` names, less each it names
    as ``no-WORD``. ``worse`` is never dropped by leaving it out, only by ``no-worse``."""
    found = set(MARGIN_FAIL_ON if margin else DEFAULT_FAIL_ON)
    for word in asked or ():
        if word == "no-missed":
            found.add(word)  # target rows fail on missed unless told not to: kept as said
        elif word.startswith("no-"):
            found.discard(word.removeprefix("no-"))
        else:
            found.add(word)
    return frozenset(found)


def share(text: str) -> float:
    """A share of a condition's episodes, 0 <= F <= 1 (--prove-max-errored)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise argparse.ArgumentTypeError(
            f"expected a share of a condition's episodes between 0 and 1 (e.g. 0.1), got "
            f"{text!r}")
    return value


def shard(text: str) -> tuple[int, int]:
    """``K/N``: slice K of N of the sweep, 1 <= K <= N (--prove-shard)."""
    head, sep, tail = text.strip().partition("/")
    try:
        index, total = int(head), int(tail)
    except ValueError:
        index = total = 0
    if not sep or total < 1 or not 1 <= index <= total:
        raise argparse.ArgumentTypeError(
            f"expected K/N with 1 <= K <= N (slice K of N, e.g. 2/3), got {text!r}")
    return index, total


def salt_word(text: str) -> str:
    """A salt the user names (--prove-salt): a plain word every shard of a sweep is given."""
    try:
        return check_name(text, "salt")
    except StoreError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def metric_list(text: str) -> tuple[tuple[str, str], ...]:
    """--prove-metrics and ini prove_metrics: built-in metrics by name, others as
    ``NAME=higher`` or ``NAME=lower`` (see declare/metrics.py)."""
    try:
        return parse_metric_list(text, "metrics")
    except MetricError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("metrics: ")) from None


def metric_margins(text: str) -> dict[str, MetricMargin]:
    """--prove-metric-margin and ini prove_metric_margin: NAME=SIZE or NAME=PERCENT% each."""
    try:
        return parse_metric_margins(text, "margin")
    except MetricError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("margin: ")) from None


def target(text: str) -> Target:
    """--prove-target: one absolute target, ``[AXIS=VALUE: ]EVENT<=RATE`` or ``>=RATE``
    (see declare/targets.py)."""
    try:
        return parse_target(text, "--prove-target")
    except TargetError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--prove-target: ")) from None


def target_lines(text: str) -> tuple[Target, ...]:
    """ini prove_targets: one target a line."""
    try:
        return parse_target_lines(text, "ini prove_targets")
    except TargetError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("ini prove_targets, ")) \
            from None
