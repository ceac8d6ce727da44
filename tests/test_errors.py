"""Bad input gets a clear error naming the file, line, test or value, and the fix."""

from __future__ import annotations

import ast
import builtins
import fnmatch
import importlib
import pkgutil
import re
import textwrap
from pathlib import Path

import pytest

import pytest_prove
from pytest_prove.errors import NOT_ERRORS, USER_ERRORS, ProveError
from pytest_prove.store import Store, StoreError, StoreWarning

from .conftest import INI, inline_session, load


def _rollout(pytester: pytest.Pytester, body: str, **decl: str) -> None:
    pytester.makeini(INI)
    args = "".join(f", {k}={v}" for k, v in decl.items())
    pytester.makepyfile(test_r=textwrap.dedent(
        f"""
        import pytest
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["unresolved"],
                       successes=["resolved"]{args})
        @pytest.mark.parametrize("ticket", ["refund"])
        def test_r(ticket, prove_seed):
        {textwrap.indent(textwrap.dedent(body), '    ')}
        """))


def test_malformed_toml_names_file_and_line(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("prove_bad.toml").write_text(
        'target = "agent:rollout"\nreplicates = 10\n[axes.ticket\nvalues = ["a"]\n')
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*prove_bad.toml: malformed TOML*line 3*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error stops the session


def test_spec_without_declare_says_what_to_add(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("prove_nodecl.toml").write_text('target = "agent:rollout"\n')
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*prove_nodecl.toml: the sweep spec needs a [[]declare[]] table*"])


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_spec_unknown_axis_type_names_the_line(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("prove_axis.toml").write_text(textwrap.dedent(
        """
        target = "agent:rollout"
        [axes.temperature]
        type = "ordinal"
        values = [1, 2]
        [declare]
        failures = ["bad"]
        """))
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*prove_axis.toml:3: axis 'temperature' has type 'ordinal'*"])


def test_spec_target_that_does_not_import(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("prove_imp.toml").write_text(textwrap.dedent(
        """
        target = "no_such_module:rollout"
        [declare]
        failures = ["bad"]
        """))
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*cannot import target module 'no_such_module'*"])


def test_undeclared_outcome(pytester: pytest.Pytester) -> None:
    _rollout(pytester, 'return prove.Episode("resolvd")')
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*test_r.py::test_r[[]refund-r000[]]: outcome 'resolvd' is not declared; "
        "declared: unresolved, resolved*"])
    run = load(pytester)
    assert {r["error"]["kind"] for r in run.episodes} == {"contract"}


def test_t_outside_horizon(pytester: pytest.Pytester) -> None:
    _rollout(pytester, 'return prove.Episode("resolved", t=12, horizon=10)')
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*Episode t must be within [[]0, horizon[]], got t=12 with "
                                 "horizon=10*"])


def test_meta_that_is_not_json(pytester: pytest.Pytester) -> None:
    _rollout(pytester, 'return prove.Episode("resolved", meta={"when": object()})')
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*Episode meta must be JSON-serialisable*object*"])


def test_wrong_return_type(pytester: pytest.Pytester) -> None:
    _rollout(pytester, 'return "resolved"')
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*a rollout must return prove.Episode(outcome, ...), got 'resolved' (str); "
        "return prove.Episode('resolved') instead*"])


def test_a_raising_rollout_fails_its_item_and_is_stored(pytester: pytest.Pytester) -> None:
    _rollout(pytester, 'raise ConnectionError("the model endpoint hung up")')
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*ConnectionError: the model endpoint hung up*"])
    errors = [r["error"] for r in load(pytester).episodes]
    assert [(e["kind"], e["type"], e["message"]) for e in errors] == [
        ("exception", "ConnectionError", "the model endpoint hung up")] * 2


def test_no_outcome_skips_and_is_stored(pytester: pytest.Pytester) -> None:
    _rollout(pytester, 'raise prove.NoOutcome("rate limited")')
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*no outcome: rate limited*"])
    records = load(pytester).episodes
    assert [(r["outcome"], r["error"]["kind"]) for r in records] == [(None, "no_outcome")] * 2


def test_bad_declaration_is_an_error_at_import(pytester: pytest.Pytester) -> None:
    _rollout(pytester, 'return prove.Episode("resolved")', outcomes='["resolved"]')
    result = pytester.runpytest()
    result.stdout.fnmatch_lines([
        "*unresolved must be among the declared outcomes (resolved); add it to outcomes*"])


@pytest.mark.parametrize("option", ["--prove-baseline", "--prove-resume"])
def test_unknown_names_list_what_exists(bot: pytest.Pytester, option: str) -> None:
    bot.runpytest("--prove-name", "first", "--prove-save-baseline", "kept")
    result = bot.runpytest(option, "nosuch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    if option == "--prove-baseline":
        result.stderr.fnmatch_lines(["*no baseline named 'nosuch'*baselines: kept*"])
    else:
        result.stderr.fnmatch_lines(["*no run named 'nosuch'*runs: first (or 'latest')*"])


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "we..ird"])
@pytest.mark.parametrize("option", ["--prove-name", "--prove-baseline",
                                    "--prove-save-baseline"])
def test_names_cannot_escape_the_store(bot: pytest.Pytester, option: str, name: str) -> None:
    result = bot.runpytest(option, name)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}*{name}*"])
    assert not (bot.path / ".prove").exists()


def test_truncated_last_line_is_read_with_a_warning(bot: pytest.Pytester) -> None:
    bot.runpytest("--prove-name", "cut").assert_outcomes(passed=80)
    path = load(bot, "cut").path / "episodes.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the last line loses its end
    with pytest.warns(StoreWarning, match=r"episodes.jsonl: line 80 is truncated"):
        run = Store(bot.path / ".prove").load("cut")
    assert len(run.episodes) == 79


def test_corrupt_middle_line_names_file_and_line(bot: pytest.Pytester) -> None:
    bot.runpytest("--prove-name", "bad").assert_outcomes(passed=80)
    path = load(bot, "bad").path / "episodes.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[4] = "{not json\n"
    path.write_text("".join(lines))
    with pytest.raises(StoreError, match=r"episodes.jsonl:5: corrupt line"):
        Store(bot.path / ".prove").load("bad")


def test_baseline_from_a_newer_version_is_refused(bot: pytest.Pytester) -> None:
    bot.runpytest("--prove-save-baseline", "new").assert_outcomes(passed=80)
    path = bot.path / ".prove" / "baselines" / "new.baseline"
    lines = path.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"pytest_prove_baseline":3', '"pytest_prove_baseline":99')
    path.write_text("".join(lines))
    result = bot.runpytest("--prove-baseline", "new")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*new.baseline: written in format 99 by a newer pytest-prove*"
                                 "Upgrade pytest-prove*"])


MIXED = textwrap.dedent(
    """
    import pytest
    import pytest_prove as prove

    CASES = ["refund", "password", "shipping"]

    @prove.rollout(replicates=30, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("temperature", [0.0])
    def test_mixed(temperature, prove_seed):
        case = CASES[prove_seed % 3]  # the case picked from the seed: wrong
        return prove.Episode("resolved", meta={"case_id": case})
    """
)


def test_mixed_case_ids_are_refused_by_name(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_mixed=MIXED)
    # A fixed salt: the case is the seed mod 3, and the refusal names all three; on a new
    # salt one of them was missing from the 30 replicates 1.6e-5 of the time. This salt
    # gives each 8 or more.
    pytester.runpytest("--prove-save-baseline", "mixed",
                       "--prove-salt=mixed").assert_outcomes(passed=30)
    result = pytester.runpytest("--prove-baseline", "mixed")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "pytest-prove: refused to compare: condition temperature=0.0 of test_mixed in run "
        "'mixed' ran 3 cases (password, refund, shipping)*Each case must be its own "
        "condition*never from the seed"])


def test_a_sweep_too_large_to_collect_is_refused_by_name(pytester: pytest.Pytester) -> None:
    """10^9 conditions ended in a MemoryError; now a collection error says why, at once."""
    pytester.makepyfile(agent="import pytest_prove as prove\n\n"
                              "def rollout(cfg, seed):\n    return prove.Episode('ok')\n")
    values = ", ".join(str(i) for i in range(178))
    axes = "".join(f'[axes.{a}]\ntype = "categorical"\nvalues = [{values}]\n' for a in "abcd")
    pytester.path.joinpath("prove_huge.toml").write_text(
        f'target = "agent:rollout"\nreplicates = 200\n{axes}'
        '[declare]\nfailures = ["bad"]\nsuccesses = ["ok"]\n')
    result = pytester.runpytest("--co")
    result.stdout.fnmatch_lines(["*prove_huge.toml: 1,003,875,856 conditions x 200 items each "
                                 "= 200,775,171,200 items, more than the 1,000,000*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "MemoryError" not in result.stdout.str()
    # The decorator form says the same, naming the function.
    pytester.makepyfile(test_axes=textwrap.dedent(
        """
        import pytest_prove as prove

        @prove.rollout(replicates=200, failures=["bad"], successes=["ok"],
                       axes={a: list(range(178)) for a in "abcd"})
        def huge(cfg, seed):
            return prove.Episode("ok")
        """))
    result = pytester.runpytest("--co", "test_axes.py")
    result.stdout.fnmatch_lines(["*huge: 1,003,875,856 conditions x 200 items each*"])


SPEC_HEAD = 'target = "agent:rollout"\nreplicates = 2\n'
SPEC_DECLARE = '\n[declare]\nfailures = ["unresolved"]\nsuccesses = ["resolved"]\n'

IDS = ["t_unit", "concurrency", "timeout", "outcome-named-timeout", "capture"]
#: Each bad spec value, by id: the spec, and how its refusal names the line (in a file
#: prove_x.toml, where the session below writes each as prove_<id>.toml).
BAD_SPECS = dict(zip(IDS, [
    # t_unit was not checked: a number was stored as the rollout's unit.
    (SPEC_HEAD + "t_unit = 5\n" + SPEC_DECLARE,
     'prove_x.toml:3: t_unit must be a word naming what t counts, e.g. "steps", got 5'),
    # These named the file but not the line.
    (SPEC_HEAD + "concurrency = 0\n" + SPEC_DECLARE,
     "prove_x.toml:3: concurrency must be an int >= 1, got 0"),
    (SPEC_HEAD + "timeout = -1\n" + SPEC_DECLARE,
     "prove_x.toml:3: timeout must be a number of seconds above 0, got -1"),
    # An outcome named like a key ("timeout") still points at the outcomes' line.
    (SPEC_HEAD + SPEC_DECLARE.replace('["unresolved"]', '["unresolved", "timeout"]')
     + 'outcomes = ["resolved", "unresolved"]\n',
     "prove_x.toml:7: timeout must be among the declared outcomes (resolved, unresolved); "
     "add it to outcomes"),
    # A bad [capture] failed every item's setup, each with a traceback.
    (SPEC_HEAD + SPEC_DECLARE + '\n[capture]\ninstruments = ["openai_v2"]\n',
     "prove_x.toml:8: [[]capture[]]: unknown capture key 'instruments'; known keys: instrument, "
     "content, max_observation_bytes"),
], strict=True))


@pytest.fixture(scope="module")
def _bad_specs_session(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One session, in this process, collecting every spec of BAD_SPECS (a file each): what
    it printed.  Each spec's collection error is its own, as in a session of its own (was a
    session a spec)."""
    root = tmp_path_factory.mktemp("bad_specs")
    (root / "agent.py").write_text(textwrap.dedent("""
        import pytest_prove as prove

        def rollout(cfg, seed):
            return prove.Episode("resolved")
    """))
    for name, (spec, _) in BAD_SPECS.items():
        (root / f"prove_{name}.toml").write_text(spec)
    code, out = inline_session(root)
    assert code == pytest.ExitCode.INTERRUPTED, out  # a collection error stops the session
    assert f"{len(BAD_SPECS)} errors" in out, out
    return out


@pytest.mark.parametrize("name", list(BAD_SPECS))
def test_spec_values_are_checked_at_collection_by_line(_bad_specs_session: str,
                                                       name: str) -> None:
    message = BAD_SPECS[name][1].replace("prove_x.toml", f"prove_{name}.toml")
    lines = _bad_specs_session.splitlines()
    assert any(fnmatch.fnmatch(line, f"*{message}*") for line in lines), _bad_specs_session
    assert "Traceback" not in _bad_specs_session


# One base, listed in one place (pytest_prove/errors.py).

def _modules() -> list[str]:
    """Every module of the package by dotted name (``__main__`` runs the command: left out,
    as it defines no class)."""
    found = [pytest_prove.__name__]
    for info in pkgutil.walk_packages(pytest_prove.__path__, pytest_prove.__name__ + "."):
        if not info.name.endswith(".__main__"):
            found.append(info.name)
    return found


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined at the top of a module of the package, by name."""
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BaseException)
                    and value.__module__ == name):
                where = f"{name}.{value.__qualname__}"
                other = found.setdefault(value.__name__, value)
                assert other is value, (
                    f"two exception classes are named {value.__name__} "
                    f"({other.__module__} and {where}); errors.py lists them by name: "
                    "rename one")
    return found


def test_every_exception_class_of_the_package_is_listed_in_errors_py() -> None:
    found = _exception_classes()
    assert found, "the walk found no exception class at all"
    assert {"ProveError", "SpecError", "Stopped"} <= set(found)
    unlisted = sorted(set(found) - set(USER_ERRORS) - set(NOT_ERRORS))
    assert not unlisted, (
        f"exception classes not listed in pytest_prove/errors.py: {unlisted}; derive each "
        "from ProveError and add it to USER_ERRORS (an error a user can cause), or add it "
        "to NOT_ERRORS with why it is not one")
    gone = sorted((set(USER_ERRORS) | set(NOT_ERRORS)) - set(found))
    assert not gone, f"errors.py lists classes the package no longer has: {gone}"
    assert not set(USER_ERRORS) & set(NOT_ERRORS)
    assert all(reason.strip() for reason in (*USER_ERRORS.values(), *NOT_ERRORS.values()))


def test_every_user_error_derives_from_prove_error() -> None:
    found = _exception_classes()
    outside = sorted(name for name in USER_ERRORS
                     if name in found and not issubclass(found[name], ProveError))
    assert outside == [], (
        f"user errors that do not derive from ProveError: {outside}; derive them from "
        "pytest_prove.errors.ProveError")


def test_no_other_exception_class_derives_from_prove_error() -> None:
    found = _exception_classes()
    inside = sorted(name for name in NOT_ERRORS
                    if name in found and issubclass(found[name], ProveError))
    assert not inside, f"{inside} derive from ProveError: list them in USER_ERRORS instead"


#: A class statement inside a function, a class or any other block starts its own line,
#: indented: a compound statement never follows a colon or a semicolon on one line.
_INDENTED_CLASS = re.compile(r"^[ \t]+class\s", re.MULTILINE)


def _nested_exception_classes(source: str, names: set[str]) -> list[tuple[int, str]]:
    """The classes of ``source`` below its top level whose bases name an exception."""
    if not _INDENTED_CLASS.search(source):
        return []  # no nested class at all: the parse and the walk (0.6 s of CPU) spared
    tree = ast.parse(source)
    top = {id(node) for node in tree.body}
    nested = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and id(node) not in top:
            bases = {base.attr if isinstance(base, ast.Attribute) else
                     base.id if isinstance(base, ast.Name) else "" for base in node.bases}
            if bases & names or any(b.endswith(("Error", "Exception")) for b in bases):
                nested.append((node.lineno, node.name))
    return nested


def test_no_exception_class_is_hidden_inside_a_function_or_class() -> None:
    """The walk above sees a module's top-level classes only: a class nested in a function or
    another class, whose bases name an exception, is read from the source instead."""
    names = set(_exception_classes()) | {name for name, value in vars(builtins).items()
                                         if isinstance(value, type)
                                         and issubclass(value, BaseException)}
    # The reading finds each way of nesting one (and a top-level class is not nested).
    sample = textwrap.dedent("""
        class Top(ValueError):
            class InClass(errors.ProveError):
                pass
        def f():
            @dataclass
            class InFunction(KeyError): pass
        if TYPE_CHECKING:
          class InBlock(SomeError):
              pass
        """)
    assert _nested_exception_classes(sample, names | {"ProveError"}) == [
        (3, "InClass"), (7, "InFunction"), (9, "InBlock")]
    package = Path(pytest_prove.__file__).parent
    nested = [f"{path.relative_to(package)}:{line} {name}"
              for path in sorted(package.rglob("*.py"))
              for line, name in _nested_exception_classes(path.read_text(encoding="utf-8"),
                                                          names)]
    assert not nested, f"exception classes nested where the walk cannot list them: {nested}"
