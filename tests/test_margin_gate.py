"""--prove-margin end to end on the bundled example (issue 15): the terse prompt against the
committed baseline fails the gate and names the condition; the terse prompt against a fresh
baseline of itself, with the replicates the margin's design check asks, passes with the claim
in the output; the command line gives the same answer; bad margins are refused plainly."""

from __future__ import annotations

import json

import pytest

from pytest_prove.stats import margin_design_check

#: In blocks of 50 replicates (4 items a condition, not 200): the same replicates, seeds and
#: episodes; what is checked is the margin's verdict and how it is said.
BLOCKS = "--prove-concurrency=50"


@pytest.mark.slow
def test_terse_prompt_is_beyond_the_margin(example: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "terse")
    result = example.runpytest(
        BLOCKS, "-q", "-p", "no:randomly", "-k", "refund", "--prove-baseline=current",
        "--prove-margin=0.05", "--prove-allow-underpowered", "--prove-fail-on=not-within",
        "--prove-report=r.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = result.stdout.str()
    # Only the margin fails this gate (--prove-fail-on=not-within), and it names the condition.
    result.stdout.fnmatch_lines([
        "beyond margin 0.050: * got worse by more than 0.050: ticket=refund unresolved +*"])
    result.stdout.fnmatch_lines(["FAILED *::prove-gate?ticket=refund? - *"])
    assert "margin method: margin 0.05: exact unconditional test on Tango's score" in text
    assert "intersection-union test, Berger 1982" in text
    report = json.loads((example.path / "r.json").read_text())
    assert report["margin"] == "beyond margin"
    assert report["comparison"]["margin"]["margin"] == 0.05
    rows = {(r["condition"], r["event"]): r for r in report["comparison"]["rows"]}
    unresolved = rows[("ticket=refund", "unresolved")]["margin"]
    assert unresolved["within"] is False and unresolved["beyond"] is True
    assert unresolved["bound"] > 0.05 and unresolved["p"] > 0.05
    assert rows[("ticket=refund", "timeout")]["margin"]["within"] is True
    # The HTML cells and panel and the markdown table carry the margin too.
    with monkeypatch.context() as inside:
        inside.chdir(example.path)
        from pytest_prove.cli import main

        for out in ("r.html", "r.md"):
            assert main(["report", "baseline:current", "latest", "--margin", "0.05",
                         "--out", out]) == 0
    page = (example.path / "r.html").read_text()
    assert '<span class="mg">beyond, ≤ 0.290</span>' in page
    assert "upper bound (one-sided)" in page and 'class="verdict margin"' in page
    summary = (example.path / "r.md").read_text()
    assert "**beyond margin**: " in summary and "| margin p | bound | margin |" in summary


@pytest.mark.slow
def test_the_same_prompt_is_shown_within_the_margin(example: pytest.Pytester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "terse")
    # The example cut to one condition (3 tests) and a wide margin, so that the design stays
    # small for CI (a baseline is saved only from a whole sweep); the detection limits' design
    # check is told to accept what those replicates can see.
    test_file = example.path / "test_support.py"
    source = test_file.read_text()
    assert '["refund", "password", "shipping"]' in source
    test_file.write_text(source.replace('["refund", "password", "shipping"]', '["password"]'))
    chosen = [BLOCKS, "-p", "no:randomly", "--prove-max-mde=0.35"]
    needed = margin_design_check(10, 3, paired=True, margin=0.2).replicates_needed
    assert needed is not None and needed > 10
    saved = example.runpytest(*chosen, f"--prove-replicates={needed}",
                                         "--prove-save-baseline=terse")
    assert saved.ret == pytest.ExitCode.OK
    # One replicate fewer: the margin's design check stops the session before it runs (at
    # every base rate: the baseline's rates would let fewer do, test_design_rates_plugin.py).
    short = example.runpytest(*chosen, f"--prove-replicates={needed - 1}",
                              "--prove-baseline=terse", "--prove-margin=0.2",
                              "--prove-design-rates=any")
    assert short.ret == pytest.ExitCode.USAGE_ERROR
    short.stderr.fnmatch_lines([
        f"*design check failed for the margin: with {needed - 1} replicates a condition, *"
        f"use {needed} replicates a condition*"])
    result = example.runpytest(*chosen, f"--prove-replicates={needed}",
                                          "--prove-baseline=terse", "--prove-margin=0.2")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines([
        "within margin 0.200: every condition's change toward worse is shown to be below "
        "0.200 (3 tests, each at level 0.05, so the claim for all of them together holds at "
        "level 0.05); the largest upper bound is *"])
    # The command line reads the same runs and gives the same answer.
    with monkeypatch.context() as inside:
        inside.chdir(example.path)
        from pytest_prove.cli import main

        assert main(["check", "baseline:terse", "latest", "--margin", "0.2"]) == 0
        assert main(["check", "baseline:terse", "latest", "--margin", "0.001"]) == 4


@pytest.mark.slow
@pytest.mark.parametrize("value", ["0", "1", "-0.1", "nan", "five"])
def test_a_bad_margin_is_a_usage_error(example: pytest.Pytester, value: str) -> None:
    result = example.runpytest(f"--prove-margin={value}", "--co", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--prove-margin: expected a margin D from 0.001 to 0.999*"])


@pytest.mark.slow
def test_a_bad_ini_margin_names_the_setting(example: pytest.Pytester) -> None:
    ini = example.path / "pytest.ini"
    ini.write_text(ini.read_text() + "prove_margin = 1.5\n")
    result = example.runpytest("--co", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option prove_margin: expected a margin D*"])
