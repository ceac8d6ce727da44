"""``--prove-report`` and the CI step summary, from pytest; the renderers' escaping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_prove.report.html import render_html
from pytest_prove.report.json import comparison_document
from pytest_prove.report.markdown import render_markdown
from pytest_prove.review import Labels, Review
from pytest_prove.stats import RowInput, compare

from .conftest import reviewed


def _baseline(bot: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_REPLICATES", "20")
    bot.runpytest("-p", "no:cacheprovider", "--prove-save-baseline", "base").assert_outcomes(
        passed=40)


# The command line's tests write every kind from stored runs; here pytest writes one.
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


def test_prove_report_without_a_baseline_says_why(bot: pytest.Pytester,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOT_REPLICATES", "5")
    result = bot.runpytest("-p", "no:cacheprovider", "--prove-report=r.html")
    result.stdout.fnmatch_lines(["no report written to r.html: nothing was compared*"])
    assert not (bot.path / "r.html").exists()


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
