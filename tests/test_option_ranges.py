"""Option values are checked before anything runs (issue 29, finding 6, item 1).

Every numeric prove option, and its ini twin, has a documented range; outside it the
session stops with a usage error naming the option, the value and the range. Before,
``--prove-q=1e-300`` kept a paired design check searching for minutes,
``--prove-margin=1e-300`` ended in an INTERNALERROR (ZeroDivisionError), and 10**18
replicates never finished collecting. A ``--prove-event`` that names no declared outcome
is refused at collection, before any rollout runs (it was refused at the end, once the
sweep had spent its tokens).
"""

from __future__ import annotations

import pytest

from pytest_prove.plugin.options import VALUE_OPTIONS

from .conftest import BOT, INI

#: option, a value below its range (or not allowed), a value above it, and the range's text.
NUMERIC = {
    "--prove-q": ("1e-300", "0.6", "from 1e-06 to 0.5"),
    "--prove-max-mde": ("1e-300", "1", "from 0.001 to 0.999"),
    "--prove-margin": ("1e-300", "0.9999", "from 0.001 to 0.999"),
    "--prove-replicates": ("0", "1000000000000000000", "from 1 to 100,000"),
    "--prove-concurrency": ("0", "1000000000000000000", "from 1 to 10,000"),
    "--prove-token-cap": ("0", "10000000000000000000", "from 1 to 1,000,000,000,000,000,000"),
    "--prove-output-token-cap": ("-5", "10000000000000000000",
                                 "from 1 to 1,000,000,000,000,000,000"),
    "--prove-episode-timeout": ("-1", "inf", "above 0"),
    "--prove-max-errored": ("-0.1", "1.5", "between 0 and 1"),
}
#: Options that take a value that is not a number.
WORDS = {"--prove-store", "--prove-report", "--prove-name", "--prove-baseline",
         "--prove-save-baseline", "--prove-resume", "--prove-replay", "--prove-event",
         "--prove-fail-on", "--prove-missing", "--prove-plan-from", "--prove-shard",
         "--prove-salt", "--prove-chaos", "--prove-metrics",
         "--prove-metric-margin", "--prove-record-env", "--prove-record-packages",
         "--prove-target",  # a target's rate is checked by its parser: test_targets_gate.py
         "--prove-agreement-from",  # run names: tests/test_twins.py
         "--prove-cache",  # a mode word: tests/test_cache.py
         "--prove-live",  # a mode word: tests/test_live.py
         "--prove-design-rates"}  # a mode word: tests/test_design_rates_plugin.py
INI_TWINS = {"prove_q": "--prove-q", "prove_max_mde": "--prove-max-mde",
             "prove_margin": "--prove-margin", "prove_episode_timeout": "--prove-episode-timeout"}


def test_every_numeric_option_is_checked_here() -> None:
    """A new option taking a number must get a range and a row above."""
    assert set(NUMERIC) | WORDS == set(VALUE_OPTIONS)
    assert not set(NUMERIC) & WORDS


@pytest.mark.parametrize("option", sorted(NUMERIC))
def test_a_numeric_option_out_of_its_range_is_a_usage_error(
        pytester: pytest.Pytester, option: str) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    low, high, allowed = NUMERIC[option]
    for value in (low, high):
        result = pytester.runpytest("-p", "no:cacheprovider", f"{option}={value}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (option, value, result.stdout.str())
        result.stderr.fnmatch_lines([f"*argument {option}: expected *{allowed}*got '{value}'*"])
    assert not (pytester.path / ".prove").exists()  # nothing ran, nothing was stored


@pytest.mark.parametrize("name", sorted(INI_TWINS))
def test_an_ini_value_out_of_its_range_is_a_usage_error(
        pytester: pytest.Pytester, name: str) -> None:
    pytester.makeini(f"{INI}{name} = 1e-300\n" if name != "prove_episode_timeout"
                     else f"{INI}{name} = -3\n")
    pytester.makepyfile(test_bot=BOT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    allowed = NUMERIC[INI_TWINS[name]][2]
    result.stderr.fnmatch_lines([f"*ini option {name}: expected *{allowed}*got '*'*"])


def test_the_stopping_values_of_issue_29_are_refused_at_once(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two values the issue found: a hang in the paired design check, and a
    ZeroDivisionError out of the margin's design check (an INTERNALERROR)."""
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    monkeypatch.setenv("BOT_REPLICATES", "4")
    assert pytester.runpytest("--prove-save-baseline=base").ret == 0
    for option in ("--prove-q=1e-300", "--prove-margin=1e-300"):
        result = pytester.runpytest("--prove-baseline=base", option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_an_undeclared_event_is_refused_before_any_rollout_runs(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_REPLICATES", "4")
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT, conftest="""
        import pathlib

        def pytest_runtest_call(item):
            pathlib.Path("ran").touch()
    """)
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-event=unresolvd",
                                "--prove-event=resolved")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([
        "*--prove-event names 'unresolvd', which no rollout this session runs declares*"
        "declared: 'resolved', 'unresolved'*"])
    assert not (pytester.path / "ran").exists()
    assert not (pytester.path / ".prove" / "runs").exists() or not any(
        (pytester.path / ".prove" / "runs").iterdir())
    # A declared event runs as before.
    assert pytester.runpytest("-p", "no:cacheprovider", "--prove-event=unresolved").ret == 0
