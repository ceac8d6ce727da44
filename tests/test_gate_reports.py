"""A failed gate is a failed test report pytest counts (issue 13, item 1): the last line,
-rf, --junitxml and --lf see it, in one process and under -n 2; a passed gate adds nothing.
Run on the bundled example, whose terse prompt makes refund tickets worse."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


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


def test_a_design_failure_stays_a_usage_error_without_a_report(
        pytester: pytest.Pytester) -> None:
    from .conftest import BOT

    pytester.makepyfile(test_bot=BOT)
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    assert pytester.runpytest("-p", "no:cacheprovider", "--prove-save-baseline=b").ret == 0
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--prove-baseline=b")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "prove::gate" not in result.stdout.str() and "1 failed" not in result.stdout.str()


ODD = '''
import os
import random

import pytest
import pytest_prove as prove

LABELS = ["a[1]", "a(1)", "p::q", "p:q", "x · b", "y · b"]


@prove.rollout(replicates=int(os.environ.get("N", "60")), failures=["unresolved"],
               successes=["resolved"], outcomes=["resolved", "unresolved", "escalated"])
@pytest.mark.parametrize("label", LABELS)
def test_odd(label, prove_seed):
    bad = os.environ.get("BAD") == "1"
    rng = random.Random(prove_seed)
    return prove.Episode("unresolved" if rng.random() < (0.9 if bad else 0.1) else "resolved")
'''


def test_every_failed_condition_has_a_report_of_its_own(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels that read alike once made safe for a node id (a[1] and a(1), p::q and p:q)
    get one report each; a label with " · " in it is kept whole."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_odd=ODD)
    assert pytester.runpytest("-p", "no:cacheprovider", "--prove-save-baseline=b").ret == 0
    monkeypatch.setenv("BAD", "1")
    result = pytester.runpytest("-p", "no:cacheprovider", "-rf", "--prove-baseline=b",
                                "--junitxml=j.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    failed = sorted(line.split(" - ")[0] for line in result.stdout.lines
                    if line.startswith("FAILED "))
    assert len(failed) == 6 and len(set(failed)) == 6, failed
    assert any("label=x · b]" in f for f in failed) and any("label=y · b]" in f for f in failed)
    suite = ET.parse(pytester.path / "j.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "6"
    assert all(len(case.findall("failure")) <= 1 for case in suite.iter("testcase"))


def test_a_baseline_not_saved_is_a_failure_pytest_counts(pytester: pytest.Pytester) -> None:
    from .conftest import BOT

    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_bot=BOT)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rf", "-k", "refund",
                                "--prove-save-baseline=partial")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED prove::gate - gate failed: not saved: *"])
