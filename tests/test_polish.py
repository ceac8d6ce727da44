"""What a user reads, polished (issue 34 item 5): each line here was seen wrong by a new
user, and each test failed before its fix."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_prove.cli import main
from pytest_prove.declare.prices import Prices
from pytest_prove.report.figures import cost_figure, forest_plot
from pytest_prove.report.terminal import format_comparison
from pytest_prove.review.cost import ConditionCost, ModelUsage, RunCost, compare_costs
from pytest_prove.stats import Flip, Fragility, RowInput, compare

from ._helpers_speed import copy_project, saved_project
from .conftest import BOT, INI

#: conftest.py's ini, each condition's replicates (40 by default) run as one block: 2 items a
#: session, not 80; the same replicates, seeds and episodes, and what is checked here is
#: what the outputs say.
BLOCKS_INI = INI + "addopts = --prove-concurrency=40\n"


@pytest.fixture
def usual_umask() -> Iterator[None]:
    mask = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(mask)


@pytest.fixture(scope="module")
def _base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """conftest.py's bot (its default rates and replicates) with baseline 'base' saved from
    it: saved once for the module, in this process; each test that reads it has a copy."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("BOT_REPLICATES", "REFUND_FAIL"):
            patch.delenv(name, raising=False)
        return saved_project(tmp_path_factory.mktemp("base"),
                             {"tox.ini": BLOCKS_INI, "test_bot.py": BOT},
                             "-p", "no:randomly", "--prove-save-baseline=base")


@pytest.fixture
def base(pytester: pytest.Pytester, _base: Path) -> pytest.Pytester:
    """This test's copy of the bot with baseline 'base'."""
    copy_project(_base, pytester.path)
    return pytester


def _cli(project: pytest.Pytester, capsys: pytest.CaptureFixture[str],
         *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--store", str(project.path / ".prove"), *args])
    return code, capsys.readouterr().out


def test_reports_are_readable_as_any_file_written(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        usual_umask: None) -> None:
    pytester.makeini(BLOCKS_INI)
    pytester.makepyfile(test_bot=BOT)
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=first",
                              "--prove-report=session.html").ret == 0
    modes = {}
    for suffix in ("html", "json", "md"):
        code, _ = _cli(pytester, capsys, "report", "first", "--out", f"one.{suffix}")
        assert code == 0
        modes[suffix] = stat.S_IMODE(os.stat(pytester.path / f"one.{suffix}").st_mode)
    modes["session"] = stat.S_IMODE(os.stat(pytester.path / "session.html").st_mode)
    assert modes == dict.fromkeys(modes, 0o644)  # HTML and JSON were 0600, markdown 0644


def test_show_prints_the_command_as_a_shell_reads_it(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini(BLOCKS_INI)
    pytester.makepyfile(test_bot=BOT)
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=first").ret == 0
    # What the run records is the process's argv (here the outer pytest's, in-process):
    # written as a shell gave it, with one word that holds spaces.
    manifest = next((pytester.path / ".prove" / "runs").glob("*/manifest.json"))
    document = json.loads(manifest.read_text(encoding="utf-8"))
    document["command"] = ["pytest", "-k", "refund and not password"]
    manifest.write_text(json.dumps(document), encoding="utf-8")
    code, out = _cli(pytester, capsys, "show", "first")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("command: "))
    assert "-k 'refund and not password'" in line  # it read -k refund and not password


def test_the_session_report_names_the_command_that_chooses_the_axes(
        pytester: pytest.Pytester, base: pytest.Pytester) -> None:
    assert pytester.runpytest("-p", "no:randomly", "--prove-baseline=base",
                              "--prove-report=page.html").ret == 0
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    assert "choose the axes with --x and --y" not in page  # flags pytest does not take
    assert "pytest-prove report ... --x AXIS --y AXIS draws other axes" in page


@pytest.mark.slow  # a fresh interpreter (a second of CPU)
def test_listing_runs_imports_no_statistics(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_REPLICATES", "4")
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=BOT)
    assert pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=base").ret == 0
    assert pytester.runpytest("-p", "no:randomly", "--prove-baseline=base").ret == 0
    # A subprocess, because only a fresh interpreter has a clean module table: this one
    # imported numpy and scipy before any test ran (tests/conftest.py), and an in-process
    # check could not tell what listing the runs imports.
    code = textwrap.dedent(f"""
        import sys
        from pytest_prove.cli import main
        status = main(["--store", {str(pytester.path / '.prove')!r}, "runs"])
        status += main(["--store", {str(pytester.path / '.prove')!r}, "runs", "--json"])
        heavy = sorted(m for m in ("numpy", "scipy", "pytest") if m in sys.modules)
        print("imported:", heavy)
        sys.exit(status)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "2 run(s) and 1 baseline(s)" in done.stdout  # it did list them
    assert "imported: []" in done.stdout  # numpy and scipy took 0.9 s of CPU before


def test_help_shows_the_options_in_a_few_headed_groups(pytester: pytest.Pytester) -> None:
    shown = pytester.runpytest("--help").stdout.str()
    headed: dict[str, list[str]] = {}
    heading = ""
    for line in shown.splitlines():
        if line.startswith("[pytest]"):
            break  # the ini values follow, in a section of their own
        if line and not line.startswith(" ") and line.endswith(":"):
            heading = line
        elif (found := re.match(r"  (--prove-[a-z-]+)", line)) is not None:
            headed.setdefault(heading, []).append(found[1])
    # One flat group of every option before (36 of them under one heading).
    assert 3 <= len(headed) <= 6, list(headed)
    assert all(h.startswith("pytest-prove") for h in headed), list(headed)
    assert all(len(options) <= 16 for options in headed.values()), headed
    where = {option: h for h, options in headed.items() for option in options}
    # Options that belong together are shown together.
    assert where["--prove-baseline"] == where["--prove-save-baseline"] \
        == where["--prove-update-baseline"]
    assert where["--prove-q"] == where["--prove-max-mde"] == where["--prove-fail-on"] \
        == where["--prove-margin"]
    assert where["--prove-replicates"] == where["--prove-concurrency"] \
        == where["--prove-shard"] == where["--prove-live"]
    assert where["--prove-report"] == where["--prove-record-env"]
    assert len({where["--prove-baseline"], where["--prove-q"], where["--prove-replicates"],
                where["--prove-report"]}) == 4


def _section(text: str) -> list[str]:
    """The lines of the pytest-prove section of a session's output."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("=") and " pytest-prove " in line)
    end = next(i for i in range(start + 1, len(lines))
               if re.match(r"=|FAILED |\d+ (passed|failed)", lines[i]))
    return lines[start + 1:end]


#: A project conftest that makes the session's terminal reporter believe it writes to a
#: terminal 80 columns wide (pytester's output is a capture, never a terminal).
AS_A_TERMINAL = textwrap.dedent("""
    import pytest

    @pytest.hookimpl(trylast=True)
    def pytest_configure(config):
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        reporter.isatty = type(reporter.isatty)(True)  # pytest's CallableBool
        reporter._tw.fullwidth = 80
""")


def test_a_default_run_says_its_method_in_a_few_lines_and_v_in_full(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        base: pytest.Pytester) -> None:
    section = _section(pytester.runpytest("-p", "no:randomly",
                                          "--prove-baseline=base").stdout.str())
    method = [line for line in section
              if line.startswith(("method:", "paired limits assume", "rise/fall"))]
    # Six terminal lines of method before (the method line alone was 480 characters).
    assert method and sum(-(-len(line) // 80) for line in method) <= 3, method
    assert "-v" in method[-1]  # where the rest is
    verbose = _section(pytester.runpytest("-p", "no:randomly", "--prove-baseline=base",
                                          "-v").stdout.str())
    full = "\n".join(verbose)
    assert "Clopper-Pearson" in full and "paired limits assume" in full


def test_the_summary_wraps_at_word_boundaries_on_a_terminal(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        base: pytest.Pytester) -> None:
    pytester.makeconftest(AS_A_TERMINAL)
    monkeypatch.setenv("REFUND_FAIL", "0.5")
    section = _section(pytester.runpytest("-p", "no:randomly", "--prove-baseline=base",
                                          "-v", "--prove-live=off").stdout.str())
    table = [line for line in section if line.startswith(("condition ", "ticket="))]
    prose = [line for line in section if line not in table]
    assert len(table) == 3  # the table's lines are never wrapped
    assert all(len(line) <= 80 for line in prose), [x for x in prose if len(x) > 80]
    text = " ".join(line.strip() for line in section)
    # Wrapped where a space was: the words are whole (the verdict line, cut by the terminal
    # mid-word before, and the method, cut mid-word at 80 columns).
    assert "paired McNemar mid-p, Holm q 0.05 over 2 tests" in text
    assert "intervals: exact (Clopper-Pearson bounds, union bound)" in text
    assert any(line.startswith("  ") for line in prose)  # a continued line is indented


def test_the_fragility_line_names_whole_conditions() -> None:
    rows = [RowInput(condition=f"task=order tool_fail=0.{i}", event="wrong", worse_when="rise",
                     x_before=2, n_before=40, x_after=20, n_after=40) for i in range(6)]
    comparison = compare(rows, q=0.05, max_mde=0.2)
    moves = tuple(Flip(f"task=order_with_a_long_name tool_fail=0.{i}", "wrong", 3, "fewer")
                  for i in range(6))
    detail = "; ".join(f"3 after episodes of {m.condition} made to not record wrong"
                       for m in moves)
    assert len(detail) > 240  # what the line cut to 240 characters, mid-word, before
    comparison = dataclasses.replace(comparison, verdict=dataclasses.replace(
        comparison.verdict, fragility=Fragility(18, False, detail, moves)))
    line = next(x for x in format_comparison(comparison, before="a", after="b")
                if x.startswith("fragility: "))
    assert "\u2026" not in line
    assert line.endswith("; and 3 more")
    assert line.count("made to not record wrong") == 3
    for move in moves[:3]:
        assert f"of {move.condition} made to" in line


#: Two tickets whose failure rate FAIL sets (both get worse together).
TWO_WORSE = BOT.replace('RATES = {"refund": float(os.environ.get("REFUND_FAIL", "0.1")), '
                        '"password": 0.1}',
                        'RATES = dict.fromkeys(["refund", "password"], '
                        'float(os.environ.get("FAIL", "0.1")))')


#: Each condition's replicates (30 or 40) in one block: 2 or 4 items a session, not 80 or 120;
#: the same replicates, seeds and episodes, and what is checked is what the report says.
WHOLE_BLOCKS = "--prove-concurrency=40"


def test_each_failing_condition_says_its_own_rows_not_the_verdict_again(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    assert TWO_WORSE != BOT
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=TWO_WORSE)
    assert pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=base",
                              WHOLE_BLOCKS).ret == 0
    monkeypatch.setenv("FAIL", "0.8")
    result = pytester.runpytest("-p", "no:randomly", "--prove-baseline=base", "-rf",
                                "--junitxml=j.xml", WHOLE_BLOCKS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    verdict = next(x for x in _section(result.stdout.str()) if x.startswith("worse: "))
    assert verdict.startswith("worse: 2 conditions got worse")
    suite = ET.parse(pytester.path / "j.xml").getroot().find("testsuite")
    assert suite is not None
    texts = {case.get("name"): failure.text or "" for case in suite.iter("testcase")
             for failure in case.findall("failure")}
    assert set(texts) == {"prove-gate[ticket=refund]", "prove-gate[ticket=password]"}
    for name, text in texts.items():
        own = name.removeprefix("prove-gate[").removesuffix("]")
        other = ({"ticket=refund", "ticket=password"} - {own}).pop()
        assert verdict not in text  # the whole verdict, once per condition, before
        assert text.startswith(f"worse: {own} unresolved 0.")
        assert other not in text, text
    # The short summary names each condition's own change.
    result.stdout.fnmatch_lines(["FAILED *prove-gate?ticket=refund? - worse: ticket=*"])


#: Two axes: the refund tickets (of either tone) fail at the rate FAIL says.
TWO_AXES = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=30, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("tone", ["terse", "kind"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_bot(ticket, tone, prove_seed):
        rng = random.Random(prove_seed)
        rate = float(os.environ.get("FAIL", "0.1")) if ticket == "refund" else 0.1
        return prove.Episode("unresolved" if rng.random() < rate else "resolved")
    """
)

#: Two axes of a condition joined as a list joins conditions: what no output may read.
RUN_TOGETHER = re.compile(r"(ticket|tone)=\w+, (ticket|tone)=")


def test_a_condition_of_two_axes_reads_as_one_unit_in_a_list(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=TWO_AXES)
    assert pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=base",
                              WHOLE_BLOCKS).ret == 0
    monkeypatch.setenv("FAIL", "0.9")
    result = pytester.runpytest("-p", "no:randomly", "--prove-baseline=base", "-rf",
                                "--junitxml=j.xml", "--prove-report=session.md", WHOLE_BLOCKS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    terminal = result.stdout.str()
    verdict = next(x for x in _section(terminal) if x.startswith("worse: "))
    # worse: 2 conditions got worse (ticket=refund, tone=terse unresolved ..., ticket=...
    listed = verdict.partition("(")[2].partition(")")[0].split(", ")
    assert len(listed) == 2 and all(x.startswith("ticket=refund tone=") for x in listed), verdict
    code, _ = _cli(pytester, capsys, "report", "base", "latest", "--out", "r.html")
    assert code == 0
    code, diff = _cli(pytester, capsys, "diff", "base", "latest")
    assert code == 0
    texts = {"terminal": terminal, "diff": diff,
             "junit": (pytester.path / "j.xml").read_text(encoding="utf-8"),
             "markdown": (pytester.path / "session.md").read_text(encoding="utf-8"),
             "html": (pytester.path / "r.html").read_text(encoding="utf-8")}
    for where, text in texts.items():
        assert "ticket=refund tone=terse" in text, where
        assert RUN_TOGETHER.search(text) is None, (where, RUN_TOGETHER.search(text))
    assert 'name="prove-gate[ticket=refund tone=terse]"' in texts["junit"]
    # --condition takes a label as the outputs write it, and as they wrote it before.
    for asked in ("ticket=refund tone=terse", "ticket=refund, tone=terse", "tone=terse"):
        code, doc = _cli(pytester, capsys, "flips", "base", "latest", "--json",
                         "--condition", asked)
        assert code == 0, asked
        chosen = {r["condition"] for r in json.loads(doc)["rows"]}
        assert chosen == ({"ticket=refund tone=terse", "ticket=password tone=terse"}
                          if asked == "tone=terse" else {"ticket=refund tone=terse"}), asked


def test_no_figure_cuts_two_labels_to_one(pytester: pytest.Pytester) -> None:
    # Two conditions alike for 40 characters: cut at 24, both read
    # "task=order_lookup tool_f…".
    long = "task=order_lookup_for_returned_items tool_fail="
    labels = [f"{long}0.0", f"{long}0.5", "task=refund tool_fail=0.0"]
    costs = [
        RunCost(run=name, status="complete", episodes=30, with_tokens=30,
                models=(ModelUsage("m", input=3000, output=0, calls=30, price=None),),
                conditions=tuple(
                    ConditionCost(rollout="agent", condition_key=label, label=label,
                                  episodes=10, models=(ModelUsage("m", input=1000 * (k + 1),
                                                                  output=0, calls=10,
                                                                  price=None),))
                    for k, label in enumerate(labels)),
                per_episode={("agent", label, r): (100 * (k + 1), 0)
                             for k, label in enumerate(labels) for r in range(10)},
                prices=Prices(), unpriced=("m",))
        for name in ("before", "after")]
    page = cost_figure(compare_costs(*costs))
    shown = re.findall(r'<text class="lab"[^>]*>(?:<title>([^<]*)</title>)?([^<]*)</text>',
                       page)
    assert len(shown) == 3
    assert len({text for _, text in shown}) == 3, shown  # two read alike before
    assert {title for title, _ in shown} == set(labels)  # the whole label, on hover
    rows = [RowInput(condition=label, event="wrong", worse_when="rise", x_before=2,
                     n_before=40, x_after=2 + 6 * k, n_after=40)
            for k, label in enumerate(labels)]
    comparison = compare(rows, q=0.05, max_mde=0.2)
    svg = forest_plot("wrong", comparison.rows, [0, 1, 2], level=comparison.level)
    drawn = re.findall(r'<text class="lab"[^>]*>([^<]*)</text>', svg)
    assert len(drawn) == 3 and len(set(drawn)) == 3, drawn


#: The seeded agent of conftest.py, its episodes taking steps (prove.step) as they go.
STEPPED = BOT.replace("    outcome = ", "    for _ in range(rng.randint(1, 6)):\n"
                      "        with prove.step('lookup'):\n"
                      "            pass\n"
                      "    outcome = ")


def test_the_step_section_and_the_grid_use_one_word_for_a_row_that_did_not_change(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Enough replicates that the grid can see 0.20 in every row (unchanged, not blind), too
    # few failures for the log-rank to see a hazard ratio of 2.
    assert STEPPED != BOT
    monkeypatch.setenv("BOT_REPLICATES", "150")
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=STEPPED)
    # In blocks of 50 replicates (6 items a session, not 300): the same replicates, seeds and
    # episodes; what is checked is the report's words.
    blocks = "--prove-concurrency=50"
    assert pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=base",
                              blocks).ret == 0
    assert pytester.runpytest("-p", "no:randomly", "--prove-baseline=base", blocks).ret == 0
    code, _ = _cli(pytester, capsys, "report", "base", "latest", "--out", "r.html")
    assert code == 0
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    # The rows' word (the grid's details and the table of every row): unchanged, not blind.
    assert re.search(r">unchanged<", page) and "could not see a" not in page
    steps = re.findall(r'<div class="logrank">(.*?)</div>', page, flags=re.S)
    assert steps, "no step section"
    for said in steps:
        # "too small to tell" before: a verdict word, of another meaning than the grid's.
        assert "too small to tell" not in said and "no significant change" not in said, said
        assert said.startswith("<p>unchanged") or said.startswith("<p>different"), said


def test_every_forest_plot_draws_its_rows_in_the_grids_order(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=TWO_AXES.replace(
        'failures=["unresolved"], successes=["resolved"]',
        'outcomes=["resolved", "unresolved", "timeout"], failures=["unresolved", "timeout"], '
        'successes=["resolved"]').replace(
        'return prove.Episode("unresolved" if rng.random() < rate else "resolved")',
        'draw = rng.random()\n'
        '    return prove.Episode("unresolved" if draw < rate else "timeout" '
        'if draw > 1 - rate / 2 else "resolved")'))
    assert pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=base",
                              WHOLE_BLOCKS).ret == 0
    monkeypatch.setenv("FAIL", "0.6")
    assert pytester.runpytest("-p", "no:randomly", "--prove-baseline=base",
                              WHOLE_BLOCKS).ret == 1
    code, _ = _cli(pytester, capsys, "report", "base", "latest", "--out", "r.html",
                   "--x", "ticket", "--y", "tone")
    assert code == 0
    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    found = re.search(r'<script type="application/json" id="prove-data">(.*?)</script>', page,
                      flags=re.S)
    assert found is not None
    document = json.loads(found[1])
    condition = {i: r["condition"] for i, r in enumerate(document["rows"])}
    sections = re.findall(r'<section class="event".*?</section>', page, flags=re.S)
    assert len(sections) == 3  # unresolved, timeout, resolved
    orders = []
    for section in sections:
        grid = [condition[int(i)] for table in
                re.findall(r'<table class="grid".*?</table>', section, flags=re.S)
                for i in re.findall(r'<td role="gridcell"[^>]*data-i="(\d+)"', table)]
        plot = [condition[int(i)] for i in re.findall(r'<g class="fr[^"]*" data-i="(\d+)"',
                                                      section)]
        assert plot == grid  # the grid's reading order: rows of tone, across ticket
        orders.append(plot)
    assert orders[0] == orders[1] == orders[2]  # each event's plot had an order of its own


@pytest.mark.parametrize("args", [["--store", "runs", "where", "latest"],
                                  ["--store=runs", "where", "latest"],
                                  ["--sto", "runs", "where", "latest"],
                                  ["where", "latest", "--store", "runs"]])
def test_a_store_named_like_a_command_is_still_a_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        args: list[str]) -> None:
    # main() reads which command runs before it loads the later commands' modules: a store
    # folder named "runs" must not be taken for the command (which would leave 'where'
    # unknown, a usage error, exit 2).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert main(args) == 1  # refused: no run in that store
    assert "pytest-prove where:" in capsys.readouterr().err
