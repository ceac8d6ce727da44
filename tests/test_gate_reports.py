"""A failed gate is a failed test report pytest counts (issue 13, item 1): the last line,
-rf, --junitxml and --lf see it, in one process and under -n 2; a passed gate adds nothing.
Run on the bundled example, whose terse prompt makes refund tickets worse."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "support_bot"


@pytest.fixture
def example(pytester: pytest.Pytester) -> pytest.Pytester:
    for source in EXAMPLE.rglob("*"):
        if "__pycache__" in source.parts or "runs" in source.relative_to(EXAMPLE).parts:
            continue
        target = pytester.path / source.relative_to(EXAMPLE)
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return pytester


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_failed_gate_is_a_failure_pytest_counts_and_lf_reruns(
        example: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]) -> None:
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "terse")
    result = example.runpytest_subprocess("-rf", "--junitxml=j.xml", "--prove-baseline=current",
                                          *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "FAILED test_support.py::test_support::prove-gate?ticket=refund? - worse: *",
        "*= 1 failed, 600 passed in *",
    ])
    suite = ET.parse(example.path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1" and suite.get("tests") == "601"
    failed = [case for case in suite.iter("testcase") if case.find("failure") is not None]
    assert [case.get("name") for case in failed] == ["prove-gate[ticket=refund]"]
    text = failed[0].find("failure").text or ""  # type: ignore[union-attr]
    assert "ticket=refund" in text and "unresolved 0.190 -> 0.425" in text
    # Each replicate says its seed and how it ended.
    first = next(case for case in suite.iter("testcase") if "refund-r000" in str(case.get("name")))
    props = {p.get("name"): p.get("value") for p in first.iter("property")}
    assert props["prove_replicate"] == "0" and props["prove_outcome"] in (
        "resolved", "unresolved", "timeout") and int(props["prove_seed"]) >= 0
    # --lf reruns the condition that got worse, on the baseline's seeds: worse again.
    result = example.runpytest_subprocess("--lf", "--prove-baseline=current", *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*= 1 failed, 200 passed*"])
    assert "refund" in result.stdout.str()
    # Fixed, it passes, and the gate leaves the --lf cache: the next --lf runs everything.
    monkeypatch.delenv("SUPPORT_BOT_PROMPT")
    result = example.runpytest_subprocess("--lf", "--prove-baseline=current", *workers)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*= 200 passed*"])
    result = example.runpytest_subprocess("--lf", "--prove-baseline=current", *workers)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*= 600 passed*"])


def test_a_gate_that_failed_for_no_one_condition(example: pytest.Pytester) -> None:
    """A gate that compared nothing fails as prove::gate, its reason said once."""
    result = example.runpytest_subprocess("-rf", "--prove-baseline=current", "-p",
                                          "no:cacheprovider", "-k", "no_such_test")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED prove::gate - gate failed: no rollout ran in this *",
                                 "*= 1 failed, 600 deselected in *"])
    assert "gate failed: gate failed" not in result.stdout.str()
