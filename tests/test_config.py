"""One configuration (issue 13, item 2): the command line reads the prove_* values a session
reads, from the file pytest finds, without importing pytest; flags override them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_prove.cli import main
from pytest_prove.config.project import project_settings

from .conftest import BOT

#: Each condition's 30 replicates in one block (2 items a session, not 60): the same
#: replicates, seeds and episodes; what is checked is which settings were read.
BLOCKS = "--prove-concurrency=30"


def _verdict(text: str) -> str:
    for word in ("worse", "safer", "no significant change", "too small to tell"):
        if f"{word}:" in text:
            return word
    raise AssertionError(text)


@pytest.mark.parametrize("where", ["pyproject.toml", "tox.ini", "setup.cfg", "pytest.ini"])
def test_the_session_and_the_command_line_give_one_answer(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], where: str) -> None:
    values = {"prove_store": "agent-runs", "prove_max_mde": "0.40",
              "prove_allow_underpowered": "true"}
    if where == "pyproject.toml":
        body = "[tool.pytest.ini_options]\n" + "".join(f'{k} = "{v}"\n' for k, v in values.items())
    else:
        section = {"tox.ini": "pytest", "setup.cfg": "tool:pytest", "pytest.ini": "pytest"}[where]
        body = f"[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())
    (pytester.path / where).write_text(body)
    pytester.makepyfile(test_bot=BOT)
    monkeypatch.setenv("BOT_REPLICATES", "30")
    # A fixed salt: at 30 replicates whether every row can see 0.40 depends on the rates the
    # seeds give (a random salt made it "too small to tell" in one run of a few).
    assert pytester.runpytest("-p", "no:cacheprovider", "--prove-salt=config", BLOCKS,
                              "--prove-save-baseline=base").ret == 0
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-baseline=base", BLOCKS,
                                "--prove-name=again")
    session_word = _verdict(result.stdout.str())
    # At 30 replicates a change of 0.20 is out of sight, one of 0.40 is not: the session
    # said its word at 0.40 (the ini value), and so must the command line.
    assert session_word == "no significant change", result.stdout.str()
    (pytester.path / "sub").mkdir()
    monkeypatch.chdir(pytester.path / "sub")  # found upward, as pytest finds its rootdir
    capsys.readouterr()
    assert main(["diff", "baseline:base", "again"]) == 0
    assert _verdict(capsys.readouterr().out) == session_word
    assert main(["runs", "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)["runs"]}
    assert "again" in names
    # A flag beats the file.
    assert main(["diff", "baseline:base", "again", "--max-mde", "0.20"]) == 0
    assert _verdict(capsys.readouterr().out) == "too small to tell"


@pytest.mark.parametrize("form", ["=", " "], ids=["equals", "space"])
def test_addopts_in_either_form_give_one_answer_at_both_doors(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], form: str) -> None:
    """``addopts = --prove-max-mde 0.40`` (the space form) was honoured by the session and
    silently ignored by the command line, which read only ``--prove-max-mde=0.40``."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n"
                     f"addopts = -p no:cacheprovider --prove-max-mde{form}0.40 "
                     f"--prove-store{form}agent-runs\n")
    pytester.makepyfile(test_bot=BOT)
    monkeypatch.setenv("BOT_REPLICATES", "30")
    assert pytester.runpytest("--prove-salt=config", "--prove-save-baseline=base",
                              BLOCKS).ret == 0
    result = pytester.runpytest("--prove-baseline=base", "--prove-name=again", BLOCKS)
    # At 30 replicates a change of 0.20 is out of sight, one of 0.40 is not.
    session_word = _verdict(result.stdout.str())
    assert session_word == "no significant change", result.stdout.str()
    assert (pytester.path / "agent-runs" / "baselines").is_dir()
    found = project_settings(pytester.path)
    assert found.addopts == {"prove_max_mde": "0.40", "prove_store": "agent-runs"}
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()
    assert main(["diff", "baseline:base", "again"]) == 0
    assert _verdict(capsys.readouterr().out) == session_word


def test_a_bad_value_in_the_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.pytest.ini_options]
        prove_max_mde = "lots"
    """))
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "a", "b"]) == 1
    err = capsys.readouterr().err
    assert ("pyproject.toml: prove_max_mde: expected a change in a failure rate from 0.001 "
            "to 0.999, got 'lots'") in err
    assert "Traceback" not in err


def test_pytests_rules_for_which_file_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no pytest table
    (tmp_path / "tox.ini").write_text("[tox]\n")  # no [pytest]
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\nprove_store = from-setup-cfg\n")
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    found = project_settings(inner)
    assert found.inifile == tmp_path / "setup.cfg" and found.rootdir == tmp_path
    assert found.store() == tmp_path / "from-setup-cfg"
    (tmp_path / "a" / "pytest.ini").write_text("[pytest]\n")  # nearer, and empty: it wins
    found = project_settings(inner)
    assert found.inifile == tmp_path / "a" / "pytest.ini"
    assert found.store() == tmp_path / "a" / ".prove"


def test_the_file_is_read_as_pytest_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Keys keep their case, [DEFAULT] does not leak, a BOM is fine, addopts beats values,
    an empty prove_store is the rootdir; the session reads each of these the same way."""
    (tmp_path / "pytest.ini").write_bytes(
        "\ufeff[DEFAULT]\nprove_q = 0.3\n[pytest]\nPROVE_MAX_MDE = 0.4\nprove_store =\n"
        "addopts = -q --prove-fail-on=worse,too-small\n".encode())
    found = project_settings(tmp_path)
    assert found.get("prove_q") is None and found.get("prove_max_mde") is None
    assert found.store() == tmp_path
    import argparse

    from pytest_prove.config.project import fill_defaults

    args = argparse.Namespace(store=None, q=None, max_mde=None, missing=None, fail_on=None)
    fill_defaults(args, found)
    assert (args.q, args.max_mde, args.missing) == (0.05, 0.20, "test")
    assert args.fail_on == frozenset({"worse", "too-small"})


def test_pytests_native_table_wants_strings(tmp_path: Path) -> None:
    from pytest_prove.config.project import IniError

    (tmp_path / "pyproject.toml").write_text("[tool.pytest]\nprove_q = 0.3\n")
    with pytest.raises(IniError, match=r"\[tool.pytest\] prove_q expects a string, got float"):
        project_settings(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.pytest]\nprove_q = '0.3'\n")
    assert project_settings(tmp_path).get("prove_q") == "0.3"


def test_without_a_file_the_rootdir_is_where_setup_py_or_pyproject_is(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.black]\n")
    (tmp_path / "sub").mkdir()
    assert project_settings(tmp_path / "sub").store() == tmp_path / ".prove"


def test_both_front_doors_read_an_option_by_one_rule() -> None:
    """config.ini.given_or_ini: a value given wins and its ini value is not even read (a bad
    one there cannot refuse it); a value left unsaid (None) is the ini value's."""
    from pytest_prove.config.ini import FROM_INI, INI, given_or_ini

    read: list[str] = []

    def ini(name: str) -> float:
        read.append(name)
        return 0.3

    found = given_or_ini([("prove_q", 0.01), ("prove_margin", None)], ini)
    assert found == {"prove_q": 0.01, "prove_margin": 0.3}
    assert read == ["prove_margin"]
    assert set(FROM_INI) <= set(INI)  # each names a row of the one ini table
