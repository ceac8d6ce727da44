"""``--prove-report`` and the CI step summary, from pytest; the renderers' escaping."""

from __future__ import annotations

import json
import tomllib
from fnmatch import fnmatch
from importlib import resources
from pathlib import Path

import pytest

from pytest_prove.cli import main
from pytest_prove.errors import ProveError
from pytest_prove.report.html import AxisError, render_html, render_run_html, worst_first
from pytest_prove.report.json import comparison_document
from pytest_prove.report.markdown import render_markdown
from pytest_prove.review import Labels, Review
from pytest_prove.review.describe import describe
from pytest_prove.stats import RowInput, clopper_pearson_interval, compare
from pytest_prove.store import Store

from .conftest import load, reviewed


def _baseline(bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # A fixed salt: REFUND_FAIL 0.1 -> 0.8 below takes about 14 of refund's 20 twins apart,
    # all one way; the gate needs 6 (mid-p 0.5^6 under Holm's 0.025), and on a new salt 5 or
    # fewer came 4.3e-5 of the time. This salt takes 13 apart.
    monkeypatch.setenv("BOT_REPLICATES", "20")
    bot.runpytest("-p", "no:cacheprovider", "--prove-save-baseline", "base",
                  "--prove-salt=report").assert_outcomes(passed=40)


# The command line's tests write every kind from stored runs; here pytest writes one.
@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
@pytest.mark.parametrize("suffix", [".json"])
def test_prove_report_is_written_after_the_comparison(
        bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    _baseline(bot, monkeypatch)
    summary = bot.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("REFUND_FAIL", "0.8")
    result = bot.runpytest("-p", "no:cacheprovider", "--prove-baseline", "base",
                           f"--prove-report=out/report{suffix}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the worse verdict fails the session
    result.stdout.fnmatch_lines(["worse: 1 condition got worse*",
                                 f"report written to out*report{suffix}"])
    text = (bot.path / "out" / f"report{suffix}").read_text()
    if suffix == ".json":
        doc = json.loads(text)
        assert doc["schema_version"] == 1 and doc["verdict"] == "worse"
        assert doc["before"] == "baseline:base"
    elif suffix == ".md":
        assert text.startswith("### pytest-prove: worse")
    else:
        assert "<table class=\"grid\" role=\"grid\"" in text
    assert summary.read_text().startswith("### pytest-prove: worse")


@pytest.mark.parametrize("suffix", [".html", ".md", ".json"])
def test_prove_report_without_a_baseline_describes_the_run(
        bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    """A session with no baseline writes the run on its own: each condition's rate of each
    event with its Clopper-Pearson interval (it used to write nothing)."""
    monkeypatch.setenv("BOT_REPLICATES", "12")
    result = bot.runpytest("-p", "no:cacheprovider", f"--prove-report=r{suffix}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"report of this run alone written to r{suffix} (no "
                                 "baseline: each condition's rates with exact intervals)"])
    text = (bot.path / f"r{suffix}").read_text()
    run = load(bot)
    counted = {(str(r["condition"]["ticket"]), str(r["outcome"])) for r in run.episodes}
    if suffix == ".json":
        doc = json.loads(text)
        assert doc["kind"] == "run" and doc["run"] == run.name and doc["episodes"] == 24
        assert "Clopper-Pearson" in doc["method"]
        assert {(r["condition"], r["event"]) for r in doc["rows"]} == {
            (f"ticket={t}", e) for t in ("refund", "password") for e in ("unresolved",
                                                                          "resolved")}
        for row in doc["rows"]:
            ticket = row["condition"].split("=")[1]
            x = sum(1 for r in run.episodes if r["condition"]["ticket"] == ticket
                    and r["outcome"] == row["event"])
            assert (row["x"], row["n"]) == (x, 12)
            low, high = clopper_pearson_interval(x, 12)
            assert (row["interval"]["low"], row["interval"]["high"]) == (low, high)
    elif suffix == ".md":
        assert text.startswith(f"### pytest-prove: run <code>{run.name}</code>")
        assert "| ticket=refund | refund | unresolved |" in text
    else:
        assert "Clopper-Pearson" in text and '<table class="grid" role="grid"' in text
    assert counted  # the run held episodes to describe


def test_prove_report_suffix_is_checked_at_the_door(bot: pytest.Pytester) -> None:
    result = bot.runpytest("-p", "no:cacheprovider", "--prove-report=r.pdf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*expected a file ending in .html, .md or .json, got 'r.pdf'*"])


def _hostile() -> Review:
    label = "ticket=<b>x</b>|y"
    comparison = compare([
        RowInput(label, "unresolved", "rise", 2, 50, 30, 50),
        RowInput("ticket=plain", "unresolved", "rise", 5, 50, 6, 50),
    ])
    labels = Labels(
        before="base", after="</script><script>alert(1)</script>",
        axes={label: {"ticket": "<b>x</b>|y"}, "ticket=plain": {"ticket": "plain"}},
        cases={label: "<script>alert('case')</script>"},
    )
    return reviewed(comparison, labels)


def test_html_escapes_everything_a_rollout_wrote() -> None:
    page = render_html(_hostile())
    assert "<script>alert" not in page
    assert "<b>x</b>" not in page
    assert "&lt;script&gt;alert(&#x27;case&#x27;)&lt;/script&gt;" in page
    data = page.split('<script type="application/json" id="prove-data">', 1)[1]
    data = data.split("</script>", 1)[0]
    assert "<" not in data and ">" not in data and "&" not in data
    assert "\\u003cscript\\u003ealert('case')" in data
    # Colour marks the flagged row only.
    assert page.count('class="cell worse') == 1 and 'class="cell "' in page


def test_the_page_copies_the_css_and_js_shipped_as_package_data() -> None:
    """The HTML report's stylesheet and script are files of the package (report/static/),
    read with importlib.resources, each copied whole into the page; pyproject.toml declares
    every file there as package data, so that a wheel carries them."""
    static = resources.files("pytest_prove.report") / "static"
    css = (static / "report.css").read_text(encoding="utf-8")
    js = (static / "report.js").read_text(encoding="utf-8")
    assert css.startswith(":root{color-scheme:light dark;") and css.endswith("}\n")
    assert "JSON.parse(document.getElementById('prove-data').textContent)" in js
    head, _, body = render_html(_hostile()).partition("</head>")  # one run's page too: _page
    assert head.count("<style>") == 1 and f"<style>\n{css}</style>" in head
    assert body.count("<script>") == 1 and f"<script>\n{js}</script>" in body
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]
    shipped = sorted(f.name for f in static.iterdir())
    assert shipped == ["report.css", "report.js"]
    assert all(any(fnmatch(f"static/{name}", pattern)
                   for pattern in declared["pytest_prove.report"]) for name in shipped)


def test_markdown_and_json_escape_and_carry_the_schema() -> None:
    found = _hostile()
    text = render_markdown(found, verbose=True)
    assert "<script>" not in text and "<b>" not in text
    assert "ticket=&lt;b&gt;x&lt;/b&gt;\\|y" in text
    doc = comparison_document(found)
    assert doc["schema_version"] == 1
    assert doc["comparison"]["rows"][0]["condition"] == "ticket=<b>x</b>|y"
    json.dumps(doc)  # plain data


def test_heat_map_axes_default_and_choice(tmp_path: Path) -> None:
    rows = [RowInput(f"tone={t}, ticket={k}", "unresolved", "rise", 5, 50, 6, 50)
            for t in ("kind", "terse") for k in ("refund", "password", "shipping")]
    axes = {r.condition: dict(part.split("=") for part in r.condition.split(", "))
            for r in rows}
    found = reviewed(compare(rows), Labels(before="a", after="b", axes=axes))
    page = render_html(found)
    head = page.split("<tbody>", 1)[0]
    assert ">refund</th>" not in head  # default: tone across (first axis), ticket down
    assert ">kind</th>" in head and ">terse</th>" in head
    page = render_html(found, x="ticket", y="tone")
    head = page.split("<tbody>", 1)[0]
    assert ">refund</th>" in head and ">password</th>" in head and ">shipping</th>" in head
    # An axis no condition has is the user's error (a ProveError: the command line says it
    # and exits 1), and still a ValueError for a caller that caught that.
    with pytest.raises(ProveError, match="--x 'size' is not an axis of these runs; axes: "
                                         "tone, ticket") as refused:
        render_html(found, x="size")
    assert isinstance(refused.value, AxisError) and isinstance(refused.value, ValueError)


def test_a_report_is_replaced_whole_or_not_at_all(tmp_path: Path) -> None:
    """On a disk too full for the new report, the old one is kept as it was and no temporary
    file is left (the report used to be truncated first, then written)."""
    from pytest_prove.report.files import write_report

    from .test_store_writes import _tmpfs

    rows = [RowInput(f"ticket=t{i}", "unresolved", "rise", 5, 50, 6, 50) for i in range(400)]
    found = reviewed(compare(rows), Labels(before="a", after="b"))
    with _tmpfs(tmp_path / "small", "64k") as small:
        target = small / "r.html"
        target.write_text("the old report\n")
        with pytest.raises(OSError, match="No space left"):
            write_report(target, found)
        assert target.read_text() == "the old report\n"
        assert sorted(p.name for p in small.iterdir()) == ["r.html"]
        written = write_report(small / "r.json", reviewed(compare(rows[:3]), Labels("a", "b")))
        assert json.loads(written.read_text())["after"] == "b"


def test_the_worst_cell_comes_first() -> None:
    """Counted worse rows by Holm-adjusted p, then rows leaning worse by their change over
    their limit; rows that got better, or did not move, are not candidates."""
    rows = compare([
        RowInput("c=better", "unresolved", "rise", 30, 100, 10, 100),
        RowInput("c=slightly", "unresolved", "rise", 10, 100, 14, 100),
        RowInput("c=some", "unresolved", "rise", 10, 100, 32, 100),
        RowInput("c=most", "unresolved", "rise", 10, 100, 60, 100),
        RowInput("c=same", "unresolved", "rise", 10, 100, 10, 100),
        RowInput("c=less", "resolved", "fall", 90, 100, 85, 100),
    ]).rows
    order = [rows[i].condition for i in worst_first(rows)]
    assert order[:2] == ["c=most", "c=some"]  # both counted, the smaller Holm p first
    assert rows[worst_first(rows)[0]].p_holm <= rows[worst_first(rows)[1]].p_holm
    # Then the uncounted rows leaning worse, the one nearer its limit first.
    rest = [rows[i] for i in worst_first(rows)[2:]]
    assert {r.condition for r in rest} == {"c=slightly", "c=less"}
    ratios = [abs(r.change) / (r.rise if r.worse_when == "rise" else r.fall).value
              for r in rest]  # type: ignore[operator]
    assert ratios == sorted(ratios, reverse=True)
    assert worst_first([r for r in rows if r.condition in ("c=better", "c=same")]) == []


DECLARED = """
import random

import pytest
import pytest_prove as prove


@prove.rollout(replicates=6, failures=["bad"], successes=["good"])
@pytest.mark.parametrize("tone", ["terse", pytest.param("kind", id="k")])
@pytest.mark.parametrize("size", [10, 2, 5])
def test_sized(size, tone, prove_seed):
    return prove.Episode("bad" if random.Random(prove_seed).random() < 0.3 else "good")


@prove.rollout(replicates=4, failures=["bad"], successes=["good"],
               axes={"level": ["high", "low", "mid"]})
def leveled(cfg, seed):
    return prove.Episode("bad" if seed % 3 == 0 else "good")
"""


def _header_values(page: str, grid: int = 0) -> list[str]:
    head = page.split('<table class="grid"')[grid + 1].split("</thead>", 1)[0]
    return [cell.split("</th>", 1)[0] for cell in head.split('<th scope="col">')[2:]]


def _row_values(page: str, grid: int = 0) -> list[str]:
    body = page.split('<table class="grid"')[grid + 1].split("</tbody>", 1)[0]
    return [cell.split("</th>", 1)[0] for cell in body.split('<th scope="row">')[1:]]


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_axis_values_come_in_the_order_the_sweep_declared(pytester: pytest.Pytester) -> None:
    """Not sorted (10, 2, 5 stays so; terse before kind), for parametrize, for axes=, in one
    run's report and in a comparison, however pytest-prove ordered the rows."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_declared=DECLARED)
    assert pytester.runpytest("-p", "no:cacheprovider", "--prove-save-baseline=b").ret == 0
    store = pytester.path / ".prove"
    run = Store(store).load("latest")
    plan = run.manifest["plan"]
    assert plan["test_declared.py::test_sized"]["axes"] == {
        "size": {"0": 10, "1": 2, "2": 5}, "tone": {"0": "terse", "1": "kind"}}
    page = render_run_html(describe(run), x="size", y="tone")
    # The two rollouts share the page: rollout is an axis too, so the grids split by it.
    assert ["10", "2", "5"] in [_header_values(page, g) for g in range(4)]
    assert ["terse", "kind"] in [_row_values(page, g) for g in range(4)]
    page = render_run_html(describe(run), x="level", y="size")
    assert ["high", "low", "mid"] in [_header_values(page, g) for g in range(4)]
    assert pytester.runpytest("-p", "no:cacheprovider", "--prove-baseline=b").ret == 0
    out = pytester.path / "c.html"
    assert main(["--store", str(store), "report", "b", "latest", "--out", str(out),
                 "--x", "tone", "--y", "size"]) == 0
    page = out.read_text()
    assert ["terse", "kind"] in [_header_values(page, g) for g in range(4)]
    assert ["10", "2", "5"] in [_row_values(page, g) for g in range(4)]


def test_report_of_one_run_from_the_command_line(
        bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BOT_REPLICATES", "10")
    assert bot.runpytest("-p", "no:cacheprovider", "--prove-name=one").ret == 0
    capsys.readouterr()
    store = str(bot.path / ".prove")
    out = bot.path / "one.json"
    assert main(["--store", store, "report", "one", "--out", str(out), "--event",
                 "unresolved"]) == 0
    assert capsys.readouterr().out.startswith(
        f"report of run one written to {out}: 2 rates with 95% exact intervals")
    doc = json.loads(out.read_text())
    assert [r["event"] for r in doc["rows"]] == ["unresolved", "unresolved"]
    assert main(["--store", store, "--json", "report", "one", "--out",
                 str(bot.path / "one.html")]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "run"
    # Bad input: an unknown run, an undeclared event, an unknown suffix; no traceback.
    for args in (["nope", "--out", "x.html"], ["one", "--out", "x.html", "--event", "lost"],
                 ["one", "--out", "x.pdf"]):
        assert main(["--store", store, "report", *args]) == 1
        err = capsys.readouterr().err
        assert err.startswith("pytest-prove report: ") and "Traceback" not in err


def test_an_empty_cell_of_one_run_says_it_has_no_rate(pytester: pytest.Pytester) -> None:
    """A one-run page compares nothing; a condition with no rate (not run, or no episode
    with an outcome) read "not compared" there, as if its neighbours had been."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_declared=DECLARED)
    pytester.runpytest("-p", "no:cacheprovider", "test_declared.py::test_sized",
                       "-k", "not (2 and terse)")
    run = Store(pytester.path / ".prove").load("latest")
    page = render_run_html(describe(run), x="size", y="tone")
    assert "not compared" not in page
    assert page.count('class="cell empty" tabindex="-1">no rate</td>') == 2  # bad and good

