"""Every fenced block of README.md and docs/**/*.md is checked the way pytest-prove reads it.

tests/docblocks.py finds the blocks and sorts them; here each kind is checked, one test a
block (its id is ``file:line`` of the fence), so that a documented format or command cannot
break without a failing test:

- a command (``pytest ...``, ``python -m pytest ...``, ``pytest-prove ...``, ``python -m
  pytest_prove ...``, in a shell or console block or a workflow's ``run:``): pytest's own
  parser with the plugin's options, then the plugin's ``pytest_configure`` up to the point
  where it opens the store (every check of the options that needs no stored run); the
  command line's own parser for ``pytest-prove``;
- a sweep spec (TOML with ``target``): the spec loader, then a pytester session that plans
  it and one that runs it on two replicates, with the target module the page shows (a
  python block whose first line is ``# .../NAME.py``) or a stub;
- a part of a spec (TOML without ``target``, e.g. ``[capture]`` or ``[chaos]``): completed
  with a target, 200 replicates and a ``[declare]`` table where it has none, loaded, and run
  on two replicates;
- configuration (``ini``, a TOML block with ``[tool...]``): a pytester session with
  ``--strict-config`` under it (unknown ``prove_*`` keys and bad values stop it), the
  command line's reading of the same file, and the price reader;
- python with ``prove.rollout(``: a pytester test module that is planned (the decorator
  runs and its arguments are checked; a decorator shown without its function gets one);
  any other python block is compiled;
- YAML: parsed, and every ``run:`` command in it checked as above; JSON: parsed.

A command shown being refused on purpose ends with ``# docs-test: refused`` and must be
refused.

``python -m pytest tests/test_docs.py -rs`` lists the blocks left out and why.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import re
import shlex
import subprocess
import textwrap
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import pytest_prove.plugin as plugin
from pytest_prove import cli
from pytest_prove.config.project import IniError, fill_defaults, project_settings
from pytest_prove.declare.prices import PriceError, find_prices
from pytest_prove.declare.spec import SpecError
from pytest_prove.declare.sweep import load_spec
from pytest_prove.plugin.state import disown_all

from .conftest import inline_session
from .docblocks import (
    KINDS,
    LEFT_OUT,
    Block,
    Command,
    all_blocks,
    blocks_of,
    commands_in,
    commands_of_text,
    doc_files,
    module_name,
    product_command,
)

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = all_blocks(ROOT)
QUIET = ("-p", "no:cacheprovider")


# --------------------------------------------------------------------------- commands


class StoreReachedError(Exception):
    """pytest_configure got as far as opening the store: every option check passed."""


def _refuse_store(*args: object, **kwargs: object) -> None:
    raise StoreReachedError


def pytest_problem(pytester: pytest.Pytester, args: list[str]) -> str | None:
    """What pytest (or the plugin, before it reads a stored run) says against ``args``."""
    try:
        config = pytester.parseconfig(*args)
    except pytest.UsageError as exc:
        return " ".join(line.strip() for line in str(exc).splitlines()
                        if "error:" in line) or str(exc)
    except Exception as exc:  # noqa: BLE001 - e.g. -p naming a plugin that is not installed
        return f"{type(exc).__name__}: {exc}"
    with pytest.MonkeyPatch.context() as patch:
        # The store is the project's: the documented baseline or run is not here, so the
        # configure hook is stopped where it would open it.
        patch.setattr(plugin, "Store", _refuse_store)
        try:
            plugin.pytest_configure(config)
        except StoreReachedError:
            return None
        except pytest.UsageError as exc:
            return str(exc)
        finally:
            disown_all(config)
    # The harness's own assumption broke: say so rather than pass what it did not check.
    return "pytest_configure returned without opening the store: tests/test_docs.py no " \
           "longer knows where the plugin's option checks end"


def cli_problem(args: list[str]) -> str | None:
    """What the ``pytest-prove`` command's parser says against ``args`` (nothing is run)."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            cli.build_parser().parse_args(args)
    except SystemExit as exc:
        if exc.code:
            return errors.getvalue().strip().splitlines()[-1]
    return None


#: What :func:`pytest_problem` said of each command line, in this process.  It depends on the
#: arguments alone (each is parsed in an empty pytester folder, in this environment), and
#: the pages show the same command many times (49 distinct of 83): each is parsed once, at
#: 45 ms of CPU a parse.
_PYTEST_PROBLEMS: dict[tuple[str, ...], str | None] = {}


def check_commands(block: Block, request: pytest.FixtureRequest,
                   commands: list[Command]) -> int:
    """Parse every pytest-prove and pytest command; fail naming each that is refused.
    Returns how many were checked."""
    problems, checked = [], 0
    for command in commands:
        program, args = product_command(command.argv)
        if program is None:
            continue
        checked += 1
        if program == "pytest":
            if tuple(args) not in _PYTEST_PROBLEMS:
                _PYTEST_PROBLEMS[tuple(args)] = pytest_problem(
                    request.getfixturevalue("pytester"), args)
            problem = _PYTEST_PROBLEMS[tuple(args)]
        else:
            problem = cli_problem(args)
        if command.refused:
            problem = None if problem else "shown as refused (# docs-test: refused), but " \
                                           "pytest-prove accepts it"
        if problem:
            problems.append(f"{block.where(command.index)}: {shlex.join(command.argv)}\n"
                            f"    {problem}")
    if problems:
        pytest.fail("documented commands pytest-prove does not take as shown:\n"
                    + "\n".join(problems), pytrace=False)
    return checked


def check_shell(block: Block, request: pytest.FixtureRequest) -> None:
    assert check_commands(block, request, commands_in(block)) > 0


def _runs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "run" and isinstance(value, str):
                yield value
            else:
                yield from _runs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _runs(value)


def check_yaml(block: Block, request: pytest.FixtureRequest) -> None:
    yaml = pytest.importorskip("yaml")  # only these blocks need it: the test extra has it
    try:
        document = yaml.safe_load(textwrap.dedent(block.text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = block.where(mark.line) if mark is not None else block.where()
        pytest.fail(f"{at}: the YAML does not parse: {exc}", pytrace=False)
    lines = block.text.splitlines()
    commands = []
    for run in _runs(document):
        first = run.strip().split("\n", 1)[0][:30]
        index = next((i for i, line in enumerate(lines) if first and first in line), -1)
        commands += commands_of_text(run, index)
    check_commands(block, request, commands)


def check_json(block: Block, request: pytest.FixtureRequest) -> None:
    try:
        json.loads(block.text)
    except json.JSONDecodeError as exc:
        if "..." in block.text:
            pytest.skip(f"{block.id} left out: JSON shown with parts elided (...)")
        pytest.fail(f"{block.where(exc.lineno - 1)}: the JSON does not parse: {exc.msg}",
                    pytrace=False)


# --------------------------------------------------------------------------- sweep specs

#: What a part of a spec is completed with, when it lacks them.
FRAGMENT_HEAD = {"target": 'target = "doc_agent:rollout"',
                 "replicates": "replicates = 200"}  # 100, the default, fails the design check
FRAGMENT_DECLARE = '[declare]\nfailures = ["failed"]\nsuccesses = ["done"]\n'


def completed_spec(fragment: str) -> tuple[str, int]:
    """A part of a spec made whole: a target before it and a [declare] after it where it has
    none. Returns the text and the number of lines put before the fragment."""
    data = tomllib.loads(fragment)
    head = [line for key, line in FRAGMENT_HEAD.items() if key not in data]
    tail = "" if "declare" in data else "\n" + FRAGMENT_DECLARE
    return "".join(line + "\n" for line in head) + fragment + tail, len(head)


def _in_doc(message: str, path: Path, block: Block, offset: int) -> str:
    """The loader's ``prove_doc.toml:N`` as the page's line."""
    def line(found: re.Match[str]) -> str:
        index = int(found[1]) - 1 - offset
        return block.where(index) if 0 <= index < len(block.text.splitlines()) \
            else f"{block.id} (line {found[1]} of the spec it was completed into)"
    message = re.sub(re.escape(str(path)) + r":(\d+)", line, message)
    return message.replace(str(path), f"{block.id} (written as {path.name})")


def stub_module(function: str, outcome: str | None, metrics: Sequence[str] = ()) -> str:
    """A target for a spec whose module the page does not show: it ends every episode with
    the first outcome the spec declares (a spec of metrics only: with each metric 0.5)."""
    ending = (f"{outcome!r}, t=1, horizon=2" if outcome is not None
              else f"metrics={dict.fromkeys(metrics, 0.5)!r}")
    return textwrap.dedent(f"""\
        import pytest_prove as prove


        def {function}(cfg, seed):
            return prove.Episode({ending})
        """)


def write_module(root: Path, dotted: str, source: str) -> None:
    parts = dotted.split(".")
    for depth in range(1, len(parts)):
        package = root.joinpath(*parts[:depth])
        package.mkdir(exist_ok=True)
        (package / "__init__.py").touch()
    root.joinpath(*parts[:-1], parts[-1] + ".py").write_text(source, encoding="utf-8")


def shown_module(block: Block, name: str) -> str | None:
    """The python block of the same page that is the file ``name.py``, if it shows one."""
    if block.source is None:
        return None
    for other in blocks_of(block.source, block.source.parent):
        if other.lang.lower() in ("python", "py") and module_name(other) == name:
            return other.text
    return None


def _session_failure(block: Block, what: str, result: pytest.RunResult) -> str:
    lines = [*result.outlines, *result.errlines]
    return (f"{block.where()}: {what} (exit status {result.ret}):\n    "
            + "\n    ".join(lines[-25:]))


def check_spec(block: Block, request: pytest.FixtureRequest) -> None:
    pytester = request.getfixturevalue("pytester")
    text, offset = block.text, 0
    if block.kind == "spec-fragment":
        text, offset = completed_spec(block.text)
    path = pytester.path / "prove_doc.toml"
    path.write_text(text, encoding="utf-8")
    try:
        spec = load_spec(path)
    except SpecError as exc:
        pytest.fail(f"{block.where()}: the spec loader refuses it: "
                    f"{_in_doc(str(exc), path, block, offset)}", pytrace=False)
    module, _, function = spec.target.partition(":")
    declared = spec.declaration
    outcome = next(iter(declared.outcomes or (*declared.failures, *declared.successes)), None)
    source = shown_module(block, module.rsplit(".", 1)[-1]) or stub_module(
        function, outcome, list(declared.metric_directions))
    write_module(pytester.path, module, source)
    if block.kind == "spec":  # a part of one has the replicates it was completed with
        planned = pytester.runpytest("--prove-plan", *QUIET)
        if planned.ret != 0 or "pytest-prove plan:" not in planned.stdout.str():
            pytest.fail(_in_doc(_session_failure(block, "the spec's plan failed", planned),
                                path, block, offset), pytrace=False)
    ran = pytester.runpytest("--prove-replicates=2", "--prove-allow-underpowered", *QUIET)
    if ran.ret != 0 or not ran.parseoutcomes().get("passed"):
        pytest.fail(_in_doc(_session_failure(block, "a session running the spec failed", ran),
                            path, block, offset), pytrace=False)


# --------------------------------------------------------------------------- configuration

#: A rollout for a configuration file to be read under; it records usage so that prices
#: are read too.
CONFIG_ROLLOUT = textwrap.dedent("""\
    import pytest_prove as prove


    @prove.rollout(replicates=2, failures=["failed"], successes=["done"])
    def test_doc_config(prove_seed):
        prove.usage("doc-model", input=10, output=1)
        return prove.Episode("done")
    """)


def _config_file(block: Block) -> tuple[str, str]:
    """The file name a configuration block is written as, and its text."""
    if block.kind == "pyproject":
        return "pyproject.toml", block.text
    header = re.search(r"^\s*\[([^\]]+)\]", block.text, re.M)
    if header is None:
        return "pytest.ini", "[pytest]\n" + block.text  # a fragment of pytest.ini
    section = header[1].strip()
    return {"tool:pytest": "setup.cfg", "pytest": "pytest.ini"}.get(section, "tox.ini"), \
        block.text


def check_config(block: Block, request: pytest.FixtureRequest) -> None:
    pytester = request.getfixturevalue("pytester")
    name, text = _config_file(block)
    (pytester.path / name).write_text(text, encoding="utf-8")
    pytester.makepyfile(test_doc_config=CONFIG_ROLLOUT)
    result = pytester.runpytest("--strict-config", "--prove-allow-underpowered", *QUIET)
    if result.ret != 0:
        pytest.fail(_session_failure(block, f"a session under it as {name} failed", result),
                    pytrace=False)
    args = argparse.Namespace(store=None, q=None, max_mde=None, missing=None, margin=None,
                              fail_on=None)
    try:
        fill_defaults(args, project_settings(pytester.path))
        find_prices(pytester.path)
    except (IniError, PriceError) as exc:
        pytest.fail(f"{block.where()}: pytest-prove's command line refuses it as {name}: "
                    f"{exc}", pytrace=False)


# --------------------------------------------------------------------------- python

STUB_FUNCTION = "def test_doc_rollout(prove_seed):\n    raise NotImplementedError\n"
STUB_TARGET = "def rollout(cfg, seed):\n    raise NotImplementedError\n"


def compiled(block: Block, source: str) -> None:
    try:
        compile(source, block.id, "exec")
    except SyntaxError as exc:
        at = block.where((exc.lineno or 1) - 1)
        pytest.fail(f"{at}: the python does not compile: {exc.msg}", pytrace=False)


def check_python(block: Block, request: pytest.FixtureRequest) -> None:
    compiled(block, block.text)


def check_rollout(block: Block, request: pytest.FixtureRequest) -> None:
    source = block.text
    try:
        compile(source, block.id, "exec")
    except SyntaxError:
        # A decorator shown on its own: give it a function to decorate.
        if not source.rstrip().endswith(")") or "@" not in source:
            raise
        source += STUB_TARGET if re.search(r"\baxes\s*=", source) else STUB_FUNCTION
    compiled(block, source)
    pytester = request.getfixturevalue("pytester")
    pytester.makepyfile(test_doc="import pytest\nimport pytest_prove as prove\n\n" + source)
    result = pytester.runpytest("--prove-plan", *QUIET)
    if result.ret != 0 or "pytest-prove plan:" not in result.stdout.str():
        pytest.fail(_session_failure(block, "planning the rollout failed", result),
                    pytrace=False)


CHECKS = {
    "commands": check_shell,
    "yaml": check_yaml,
    "json": check_json,
    "spec": check_spec,
    "spec-fragment": check_spec,
    "pyproject": check_config,
    "ini": check_config,
    "rollout": check_rollout,
    "module": check_python,
    "python": check_python,
}


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_documented_block(block: Block, request: pytest.FixtureRequest) -> None:
    if block.skip:
        pytest.skip(f"{block.id} left out by its docs-test comment: {block.skip}")
    kind = block.kind
    if kind in LEFT_OUT:
        pytest.skip(f"{block.id} left out, {LEFT_OUT[kind]}")
    CHECKS[kind](block, request)


# --------------------------------------------------------------------------- names

_OPTION = re.compile(r"--prove-[a-z](?:[a-z0-9-]*[a-z0-9])?")
_INI = re.compile(r"^\s+(prove_\w+) \(", re.M)


def _docs_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in doc_files(ROOT))


@pytest.fixture(scope="module")
def pytest_help(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``pytest --help`` with the plugin, in an empty folder: the options that exist (in this
    process: a subprocess cost 0.9 s of CPU)."""
    code, out = inline_session(tmp_path_factory.mktemp("help"), "--help")
    assert code == pytest.ExitCode.OK, out
    return out


def test_every_option_the_docs_name_exists_and_every_option_is_named(
        pytest_help: str) -> None:
    """A ``--prove-*`` option the docs name that pytest does not know is a renamed or
    removed option; one pytest knows that no page names is undocumented."""
    named = set(_OPTION.findall(_docs_text()))
    known = set(_OPTION.findall(pytest_help))
    assert known, pytest_help
    assert named - known == set(), "options the docs name that pytest-prove does not have"
    assert known - named == set(), "options no page of README.md or docs/ names"


def test_every_ini_option_and_every_command_is_named_in_the_docs(pytest_help: str) -> None:
    text = _docs_text()
    ini = set(_INI.findall(pytest_help))
    assert "prove_store" in ini
    assert {name for name in ini if not re.search(rf"\b{name}\b", text)} == set(), \
        "ini options no page of README.md or docs/ names"
    assert {name for name in cli.all_commands() if f"pytest-prove {name}" not in text} == set(), \
        "pytest-prove commands no page of README.md or docs/ shows"


def _known_to_the_loader(tmp_path: Path, table: str) -> set[str]:
    """The keys (or faults) the spec loader knows, as its refusal of an unknown one lists."""
    path = tmp_path / "prove_keys.toml"
    path.write_text(f'target = "a:b"\n{table}\n[declare]\nfailures = ["x"]\n',
                    encoding="utf-8")
    with pytest.raises(SpecError) as refused:
        load_spec(path)
    listed = re.search(r"known (?:keys|faults): (.+)$", str(refused.value))
    assert listed, refused.value
    return set(listed[1].split(", "))


def test_every_spec_key_and_rollout_argument_is_named_in_the_docs(tmp_path: Path) -> None:
    text = _docs_text()
    keys = set()
    for table in ("zzz = 1", "[capture]\nzzz = 1", "[chaos]\nzzz = 1",
                  "[chaos]\nfaults = {zzz = 0.1}"):
        keys |= _known_to_the_loader(tmp_path, table)
    assert {"target", "instrument", "latency_s", "http_429"} <= keys
    assert {key for key in keys if f"`{key}" not in text and f"[{key}]" not in text} \
        == set(), "spec keys no page of README.md or docs/ names"
    import pytest_prove as prove

    arguments = {name for name, parameter in inspect.signature(prove.rollout).parameters.items()
                 if parameter.kind is inspect.Parameter.KEYWORD_ONLY}
    assert "replicates" in arguments
    assert {name for name in arguments if f"{name}=" not in text} == set(), \
        "@prove.rollout arguments no page of README.md or docs/ names"


# --------------------------------------------------------------------------- the workflow


def _yaml_blocks() -> list[str]:
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    return re.findall(r"```yaml\n(.*?)```", text, re.S)


def test_the_quickstart_workflow_installs_from_the_checkout_and_its_gate_runs(
        pytester: pytest.Pytester) -> None:
    yaml = pytest.importorskip("yaml")
    workflow, fragment = _yaml_blocks()
    steps = yaml.safe_load(workflow)["jobs"]["gate"]["steps"]
    assert [s["uses"].split("@")[0] for s in steps if "uses" in s] == [
        "actions/checkout", "actions/setup-python", "actions/upload-artifact"]
    install, gate = (s["run"] for s in steps if "run" in s)
    assert install == "python -m pip install ."  # the checkout, not a name on an index
    command = shlex.split(gate)
    assert command[:3] == ["python", "-m", "pytest"]
    report = next(a.split("=", 1)[1] for a in command if a.startswith("--prove-report="))
    assert steps[-1]["with"]["path"] == report
    # The gate's command planned in a copy of the example where its paths hold, in this
    # process and without its -n (as the quickstart's commands below, for the same reasons:
    # xdist changes no plan; the page's command line with -n is parsed by test_documented_block
    # for this block): a subprocess of the 600 items cost about 1.7 s of CPU.
    _copy_of_the_example(pytester, _committed_baselines())
    args = command[3:]
    alone = [a for i, a in enumerate(args) if a != "-n" and (i == 0 or args[i - 1] != "-n")]
    assert len(alone) == len(args) - 2 * args.count("-n"), args
    done = pytester.runpytest(*alone, "--prove-plan", "-p", "no:randomly", "-p",
                              "no:cacheprovider", "-p", "no:xdist")
    assert done.ret == 0, done.stdout.str() + done.stderr.str()
    assert "pytest-prove plan: 600 episodes" in done.stdout.str()
    # The steps a project of one's own adds parse too, and install pytest-prove from a wheel.
    steps = yaml.safe_load(textwrap.dedent(fragment))
    assert steps[0]["run"].startswith("python -m pip install vendor/pytest_prove-")


# --------------------------------------------------------------------------- the harness


def page(tmp_path: Path, text: str) -> list[Block]:
    """The blocks of a page written for a test of the harness itself."""
    path = tmp_path / "page.md"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return blocks_of(path, tmp_path)


def failure_of(block: Block, request: pytest.FixtureRequest) -> str:
    """The message the harness fails ``block`` with ("" when it passes)."""
    try:
        CHECKS[block.kind](block, request)
    except pytest.fail.Exception as exc:
        return str(exc)
    return ""


def test_every_page_has_its_blocks_found_and_every_kind_has_a_check() -> None:
    pages = {block.path for block in BLOCKS}
    assert {"README.md", "docs/spec.md", "docs/quickstart.md"} <= pages
    assert set(CHECKS) | set(LEFT_OUT) == set(KINDS)
    assert not set(CHECKS) & set(LEFT_OUT)
    assert {block.kind for block in BLOCKS} <= set(KINDS)
    # The README's tour: its rollout, its commands and its output are told apart.
    kinds = {block.kind for block in BLOCKS if block.path == "README.md"}
    assert {"commands", "output", "rollout"} <= kinds


def test_blocks_are_found_indented_with_their_skip_comment_and_their_prompts(
        tmp_path: Path) -> None:
    blocks = page(tmp_path, """\
        - in a list:

          ```toml
          [chaos]
          hosts = ["a"]
          ```

        <!-- docs-test: skip, shows a mistake on purpose -->

        ```bash
        pytest --prove-nope
        ```

        ```
        $ SUPPORT_BOT_PROMPT=terse pytest -q --prove-store=s \\
            --prove-name=x && echo $?   # 1
        no significant change
        gate$ python -m pytest_prove check baseline:b x --fail-on worse
        ```
        """)
    chaos, skipped, console = blocks
    assert (chaos.line, chaos.kind, chaos.text) == (3, "spec-fragment", '[chaos]\nhosts = ["a"]\n')
    assert skipped.skip == "shows a mistake on purpose"
    assert console.kind == "commands"
    assert [(c.index, product_command(c.argv)) for c in commands_in(console)] == [
        (0, ("pytest", ["-q", "--prove-store=s", "--prove-name=x"])),
        (0, (None, ["echo", "$?"])),
        (3, ("pytest-prove", ["check", "baseline:b", "x", "--fail-on", "worse"]))]


@pytest.mark.parametrize(("command", "said"), [
    ("pytest --prove-shard=4/3", "expected K/N"),
    ("pytest -n 2 --prove-nope=1", "unrecognized arguments: --prove-nope=1"),
    # Refused by the plugin's configure hook, past pytest's parser:
    ("pytest --prove-store store", "write --prove-store=store with '='"),
    ("pytest --prove-salt=w --prove-baseline=b", "--prove-salt=w names the salt"),
    ("pytest --prove-update-baseline", "add --prove-baseline NAME"),
    ("pytest-prove baseline-dif a b", "invalid choice: 'baseline-dif'"),
    ("python -m pytest_prove check a b --margin 2", "expected a margin D"),
    ("pytest -q --prove-name=x   # docs-test: refused", "shown as refused"),
])
def test_a_documented_command_pytest_prove_refuses_fails_naming_its_line(
        tmp_path: Path, request: pytest.FixtureRequest, command: str, said: str) -> None:
    block, = page(tmp_path, "text\n\n```console\n$ pytest -q --prove-name=ok\n"
                            "$ pytest --prove-q=2   # docs-test: refused\n"
                            f"$ {command}\noutput\n```\n")
    message = failure_of(block, request)
    assert f"page.md:6: {command.split('#')[0].strip()}" in message
    assert said in message
    # The command pytest-prove accepts, and the one shown refused that it refuses, pass.
    assert "page.md:4" not in message
    assert "page.md:5" not in message


def test_a_command_in_a_workflow_is_checked(tmp_path: Path,
                                            request: pytest.FixtureRequest) -> None:
    block, = page(tmp_path, """\
        ```yaml
        steps:
          - run: pip install .
          - run: >
              pytest -n 2 --prove-shard=${{ matrix.shard }}/3
              --prove-replicates=0
        ```
        """)
    message = failure_of(block, request)
    assert "page.md:5: pytest -n 2 --prove-shard=1/3 --prove-replicates=0" in message
    assert "expected replicates a condition, a whole number from 1" in message


@pytest.mark.parametrize(("spec", "said"), [
    # The format the loader accepts and collection refused (#29): a [capture] table.
    ('[capture]\ninstrument = ["openai"]\ncontent = true\n', ""),
    ('[capture]\ninstruments = ["openai"]\n', "page.md:3: [capture]: unknown capture key"),
    ('replicates = 0\n', "page.md:3: replicates must be >= 1, got 0"),
    ('[axes.t]\ntype = "ordinal"\nvalues = [1]\n', "page.md:3: axis 't' has type 'ordinal'"),
    ('target = "agent:rollout"\nreplicates = 200\n[declare]\nfailures = ["x"]\n'
     '```\n\n```python\n# agent.py\ndef rollout(cfg):\n    pass\n',
     "'rollout' has signature (cfg)"),
])
def test_a_documented_spec_is_loaded_and_collected(
        tmp_path: Path, request: pytest.FixtureRequest, spec: str, said: str) -> None:
    block = page(tmp_path, f"text\n```toml\n{spec}```\n")[0]
    message = failure_of(block, request)
    if said:
        assert said in message
    else:
        assert message == ""


def test_a_spec_runs_the_module_its_page_shows(tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    blocks = page(tmp_path, """\
        ```toml
        target = "bots.agent:rollout"
        replicates = 200
        [declare]
        failures = ["lost"]
        ```

        ```python
        # specs/bots/agent.py
        def rollout(cfg, seed):
            return "lost"  # not an Episode
        ```
        """)
    message = failure_of(blocks[0], request)
    assert "page.md:1: a session running the spec failed" in message
    assert "'lost'" in message


@pytest.mark.parametrize(("config", "said"), [
    ("[pytest]\nprove_q = 0.01\nprove_prices =\n    m = 1 2\n", ""),
    ("prove_q = 2\n", "ini option prove_q"),
    ("[pytest]\nprove_qq = 0.1\n", "Unknown config option: prove_qq"),
    ("prove_prices =\n    m = 1\n", "prove_prices"),
])
def test_a_documented_ini_is_read_by_a_session_and_the_command_line(
        tmp_path: Path, request: pytest.FixtureRequest, config: str, said: str) -> None:
    block, = page(tmp_path, f"```ini\n{config}```\n")
    message = failure_of(block, request)
    assert said in message if said else message == ""


def test_a_documented_rollout_runs_its_decorator(tmp_path: Path,
                                                 request: pytest.FixtureRequest) -> None:
    good, bad = page(tmp_path, """\
        ```python
        @prove.rollout(replicates=200, failures=["x"], successes=["y"])
        ```

        ```python
        @prove.rollout(replicates=200, failures=["x"], successes=["x"])
        def test_it(prove_seed):
            ...
        ```
        """)
    assert failure_of(good, request) == ""
    message = failure_of(bad, request)
    assert "page.md:5: planning the rollout failed" in message
    assert "both a failure and a success" in message
EXAMPLE = ROOT / "examples" / "support_bot"


def _quickstart_commands() -> list[tuple[dict[str, str], list[str]]]:
    """The quickstart's ``pytest`` commands, each with the environment it sets."""
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            env = {}
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                key, value = words.pop(0).split("=", 1)
                env[key] = value
            if words[:1] == ["pytest"]:
                found.append((env, words[1:]))
    return found


def _committed_baselines() -> set[str]:
    """The example's baselines in version control (the folder's files, outside git)."""
    folder = EXAMPLE / ".prove" / "baselines"
    try:
        listed = subprocess.run(["git", "ls-files", "--", str(folder)], cwd=ROOT,
                                capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return {path.stem for path in folder.iterdir()}
    return {Path(line).stem for line in listed.splitlines() if line}


def _copy_of_the_example(pytester: pytest.Pytester,
                         committed: set[str]) -> tuple[Path, dict[Path, bytes]]:
    """examples/support_bot copied to the same path under ``pytester.path`` (its committed
    baselines, no runs): the copy, and what each file holds."""
    copy = pytester.path / "examples" / "support_bot"
    tracked = {}
    for source in EXAMPLE.rglob("*"):
        relative = source.relative_to(EXAMPLE)
        if source.is_dir() or "__pycache__" in relative.parts or "runs" in relative.parts:
            continue
        if relative.parts[:2] == (".prove", "baselines") and source.stem not in committed:
            continue
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes(source.read_bytes())
        tracked[relative] = source.read_bytes()
    return copy, tracked


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_the_quickstart_saves_no_baseline_over_the_committed_one(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quickstart had the reader run ``--prove-save-baseline=current`` in the example,
    which overwrote its committed baseline: every later number then differed from the
    pages. Its commands, run in a copy of the example, leave every committed file as it was,
    and the verdict read against the committed baseline is the one the page shows."""
    commands = _quickstart_commands()
    in_example = [(env, args) for env, args in commands if "examples/support_bot" in args]
    assert len(in_example) >= 3, commands
    committed = _committed_baselines()
    assert "current" in committed
    for _, args in in_example:
        saved = {a.split("=", 1)[1] for a in args if a.startswith("--prove-save-baseline=")}
        if "--prove-update-baseline" in args:
            saved |= {a.split("=", 1)[1] for a in args if a.startswith("--prove-baseline=")}
        assert not saved & committed, f"pytest {shlex.join(args)} saves over {saved & committed}"
    # Run them, in a copy of the example where the page's paths hold.
    copy, tracked = _copy_of_the_example(pytester, committed)
    page = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    for env, args in in_example:
        # Run in one process, without the page's ``-n 2``: xdist changes neither what a run
        # stores nor its verdict (test_xdist.py::test_without_xdist_the_run_is_the_same; the
        # example under -n 2: test_summary.py), and a -n 2 session of the example's 600
        # items costs about 6 s of CPU against under 2 s in this process.
        alone = [a for i, a in enumerate(args)
                 if a != "-n" and (i == 0 or args[i - 1] != "-n")]
        assert len(alone) == len(args) - 2 * args.count("-n"), args
        with monkeypatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            result = pytester.runpytest(*alone, "-p", "no:randomly", "-p", "no:cacheprovider",
                                        "-p", "no:xdist")
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), (
            result.stdout.str())
        # The verdict line: the pytest-prove section's, after the FAILURES section (whose
        # text for a failing condition starts with "worse:" too).
        verdict = next((line for line in reversed(result.stdout.lines)
                        if line.startswith(("worse:", "no significant change:"))), None)
        if verdict is not None:
            assert verdict in page, verdict  # the numbers are the page's
    for relative, content in tracked.items():
        assert (copy / relative).read_bytes() == content, f"the quickstart changed {relative}"
