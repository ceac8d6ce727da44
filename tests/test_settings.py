"""The options' one home (issue 35): the ``prove_*`` ini values are one table that the plugin
registers and reads and the command line fills its defaults from, so both front doors read a
value alike and refuse a bad one in the same words; and the ``prove_rollout`` marker's help
says what the marker does."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from pytest_prove.config.ini import INI
from pytest_prove.config.project import IniError, fill_defaults, project_settings
from pytest_prove.config.values import gate_fails_on
from pytest_prove.plugin.state import SETTINGS_KEY

#: The ini values both front doors read: the command line's name for each, and the
#: session's (an attribute of Settings).
BOTH = {"prove_q": ("q", "q"), "prove_max_mde": ("max_mde", "max_mde"),
        "prove_margin": ("margin", "margin"), "prove_fail_on": ("fail_on", "fail_on"),
        "prove_missing": ("missing", "missing"),
        "prove_max_errored": ("max_errored", "max_errored"),
        "prove_allow_underpowered": ("allow_underpowered", "allow_underpowered")}

#: For each: a value read, an empty one (the default, or refused), and one refused.
WRITTEN = [(name, text) for name, texts in {
    "prove_q": ("0.1", "", "2"),
    "prove_max_mde": ("0.3", "", "lots"),
    "prove_margin": ("0.05", "", "7"),
    "prove_fail_on": ("not-within,no-too-small", "", "bogus"),
    "prove_missing": ("ignore", "", "maybe"),
    "prove_max_errored": ("0.5", "", "2"),
    "prove_allow_underpowered": ("yes", "", "maybe"),
}.items() for text in texts]
#: What each door refuses: the values above out of range or not of their kind, and an empty
#: one where the table parses it (a number, a switch: pytest refuses an empty bool).
REFUSED = {"2", "lots", "7", "bogus", "maybe", ("prove_q", ""), ("prove_max_mde", ""),
           ("prove_allow_underpowered", "")}


def _session(pytester: pytest.Pytester) -> Any:
    """The value each ini value of BOTH has in a session, or the parser's words refusing it."""
    try:
        config = pytester.parseconfigure("-p", "no:cacheprovider")
    except pytest.UsageError as exc:
        return str(exc).split(": ", 1)
    settings = config.stash[SETTINGS_KEY]
    found = {name: getattr(settings, attribute) for name, (_, attribute) in BOTH.items()}
    found["prove_fail_on"] = settings.fail_on
    return found


def _command_line(pytester: pytest.Pytester) -> Any:
    """The same as the command line reads it (its flags left unsaid)."""
    args = argparse.Namespace(store=None, **{option: None for option, _ in BOTH.values()})
    try:
        fill_defaults(args, project_settings(pytester.path))
    except IniError as exc:
        where, _, rest = str(exc).partition(": ")
        name, _, words = rest.partition(": ")
        assert where == str(pytester.path / "tox.ini"), exc  # pytester.makeini writes it
        return [f"ini option {name}", words.removesuffix(
            "; fix it there, or give the option on the command line")]
    found = {name: getattr(args, option) for name, (option, _) in BOTH.items()}
    found["prove_fail_on"] = gate_fails_on(args.fail_on, margin=args.margin is not None)
    return found


@pytest.mark.parametrize(("name", "text"), WRITTEN)
def test_both_front_doors_read_an_ini_value_alike(pytester: pytest.Pytester, name: str,
                                                  text: str) -> None:
    pytester.makeini(f"[pytest]\n{name} = {text}\n")
    session, command_line = _session(pytester), _command_line(pytester)
    if text in REFUSED or (name, text) in REFUSED:
        # Refused by both, naming the value, in the table parser's words (a switch is read
        # by pytest in the session, so only the first words are the same).
        assert session[0] == command_line[0] == f"ini option {name}", (session, command_line)
        if INI[name].kind == "bool":
            assert session[1].startswith("expected true or false"), session
            assert command_line[1] == f"expected true or false, got {text!r}"
        else:
            assert session[1] == command_line[1] and session[1].startswith("expected")
        return
    assert session == command_line
    if text:
        assert session[name] != _session_without_ini(pytester)[name]  # the value was read


def _session_without_ini(pytester: pytest.Pytester) -> dict[str, Any]:
    pytester.makeini("[pytest]\n")
    found: dict[str, Any] = _session(pytester)
    return found


def test_every_row_of_the_table_is_registered_with_its_help_and_default(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini("[pytest]\n")
    config = pytester.parseconfig("-p", "no:cacheprovider")
    for row in INI.values():
        assert config.getini(row.name) == row.default, row.name
    monkeypatch.setenv("COLUMNS", "300")
    shown = " ".join(pytester.runpytest("--help").stdout.str().split())
    for row in INI.values():
        assert f"{row.name} ({row.kind}): {' '.join(row.help.split())}" in shown, row.name


def test_the_rollout_marker_says_what_it_does(pytester: pytest.Pytester) -> None:
    """Its help said @prove.rollout sets it; nothing does, so ``-m prove_rollout`` ran no
    rollout while the help promised it would select them."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_agent="""
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        def test_agent(prove_seed):
            return prove.Episode("good")
    """)
    shown = pytester.runpytest("--markers", "-p", "no:cacheprovider").stdout.str()
    line = next(t for t in shown.splitlines() if t.startswith("@pytest.mark.prove_rollout:"))
    assert "not set by pytest-prove" in line and "selects no rollout" in line, line
    selected = pytester.runpytest("-m", "prove_rollout", "-p", "no:cacheprovider")
    selected.assert_outcomes()  # the help's word: no rollout was selected
    assert selected.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "2 deselected" in selected.stdout.str()


def test_a_bad_sequential_switch_is_named(pytester: pytest.Pytester) -> None:
    """Read by the session only; pytest's own refusal named neither the option nor the fix."""
    pytester.makeini("[pytest]\nprove_sequential = maybe\n")
    with pytest.raises(pytest.UsageError,
                       match=r"^ini option prove_sequential: expected true or false"):
        pytester.parseconfigure("-p", "no:cacheprovider")


def test_options_a_replay_does_not_take_are_refused_before_any_run_is_read(
        pytester: pytest.Pytester) -> None:
    """An option combination is refused with the settings, before the store is read: it was
    refused only once the baseline had been loaded, so a missing one hid the real mistake."""
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-replay=latest",
                                "--prove-baseline=nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--prove-replay=latest runs episodes of that run again on their own seeds and "
            "stores nothing, so it takes no --prove-baseline; drop it, or drop --prove-replay"
            ) in result.stderr.str()
