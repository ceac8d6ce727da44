"""The pytest-prove section of the terminal at each verbosity (issue 13, item 7): -q gives
the verdict line, every reason the gate failed and where things were written, nothing else;
the default adds the rows that matter and how they were tested; -v every row. The gate's
failed reports, which come after pytest's progress reached 100%, get a line of their own.
Run on the bundled example, whose terse prompt makes refund tickets worse."""

from __future__ import annotations

import re

import pytest

#: The example's 600 replicates in blocks of 50 (12 items, not 600): the same replicates,
#: seeds and verdict, and the same sections, at a fraction of the per-item cost.
BLOCKS = "--prove-concurrency=50"


def _section(text: str) -> list[str]:
    """The lines of the pytest-prove section, up to the next section's rule."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if " pytest-prove " in line
                 and line.startswith("="))
    end = next(i for i in range(start + 1, len(lines))
               if re.match(r"=|FAILED |\d+ (passed|failed)", lines[i]))
    return lines[start + 1:end]


#: Under xdist ONE worker: the quiet section and the gate's line after the 100% are the
#: controller's, written the same whatever the number of workers that report to it; -n 1
#: takes that path with one interpreter start less than -n 2.
@pytest.mark.parametrize("workers", [pytest.param([], id="one-process"),
                                     pytest.param(["-n", "1"], id="xdist",
                                                  marks=pytest.mark.slow)])
def test_quiet_says_the_verdict_and_where_and_nothing_else(
        example: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]) -> None:
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "terse")
    result = example.runpytest(BLOCKS, "-q", "-p", "no:randomly", "--prove-baseline=current",
                               "--prove-report=r.html", *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    section = _section(result.stdout.str())
    assert len(section) == 3, section
    assert section[0].startswith("worse: 1 condition got worse (ticket=refund unresolved")
    assert section[1].startswith("run '") and " (complete) stored in .prove/runs/" in section[1]
    assert section[2] == "report written to r.html"
    assert (example.path / "r.html").is_file()
    # The gate's failure is counted, on a line of its own after pytest's 100%.
    text = result.stdout.str()
    assert "%]F" not in text
    result.stdout.fnmatch_lines(["*?100%?", "pytest-prove gate F", "", "*= FAILURES =*"])
    result.stdout.fnmatch_lines(["1 failed, 12 passed in *"])


def test_quiet_never_hides_why_the_gate_failed(example: pytest.Pytester) -> None:
    result = example.runpytest(BLOCKS, "-q", "-p", "no:cacheprovider",
                               "--prove-baseline=current", "-k", "no_such_test")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    section = _section(result.stdout.str())
    assert len(section) == 1, section
    assert section[0].startswith("pytest-prove: gate failed: no rollout ran in this session")


def test_quiet_on_a_gate_that_passes_and_a_saved_baseline(example: pytest.Pytester) -> None:
    result = example.runpytest(BLOCKS, "-q", "-p", "no:randomly", "--prove-baseline=current",
                               "--prove-save-baseline=again")
    assert result.ret == pytest.ExitCode.OK
    section = _section(result.stdout.str())
    assert [line.split(":")[0].split(" ")[0] for line in section] == [
        "no", "run", "baseline"], section
    assert section[0].startswith("no significant change: ")
    assert section[2].startswith("baseline 'again' saved from run ")
    assert "pytest-prove gate" not in result.stdout.str()


def test_default_and_verbose_say_more(example: pytest.Pytester,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "terse")
    result = example.runpytest(BLOCKS, "-p", "no:randomly", "--prove-baseline=current")
    section = _section(result.stdout.str())
    assert section[0].startswith("worse: ")
    assert any(line.startswith("method: ") for line in section)
    assert any(line.startswith("tokens: ") for line in section)
    assert sum(line.startswith("ticket=") for line in section) == 2  # the rows that moved
    assert "%]F" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*?100%?", "pytest-prove gate F", "", "*= FAILURES =*"])
    result = example.runpytest(BLOCKS, "-v", "-p", "no:randomly", "--prove-baseline=current")
    section = _section(result.stdout.str())
    assert sum(line.startswith("ticket=") for line in section) == 9  # every row
    result.stdout.fnmatch_lines(["*::prove-gate?ticket=refund? FAILED*"])
