"""Outcome, event and axis names are shown as text in the terminal (issue 29, finding 6,
item 3).

A rollout's declared outcomes reached the terminal raw in the method line of the session's
summary ("X is the complement of Y over the declared outcomes") and in ``diff``'s next
step: an ESC sequence recoloured or cleared the screen, an OSC 8 sequence ending in BEL
made a hidden link, U+202E reversed the line. Every output must show them as escapes.
"""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from pytest_prove.cli import main

from .conftest import INI

#: ESC (a colour, an OSC 8 link ended by BEL) and a right-to-left override.
BAD = "bad\x1b[31m\x1b]8;;http://127.0.0.1:9/\x07x\u202e"
GOOD = "good\x1b[2J\u202e"
AXIS = "tick\x1b[1met\u202e"
RAW = re.compile("[\x1b\x07\u202e]")

# JSON's string escapes are TOML's basic string escapes.
SPEC = textwrap.dedent(
    f"""
    target = "agent:rollout"
    target_id = "hostile"
    replicates = 20

    [axes.{json.dumps(AXIS)}]
    values = ["v1", "v2"]

    [declare]
    failures = [{json.dumps(BAD)}]
    successes = [{json.dumps(GOOD)}]
    """
)

AGENT = textwrap.dedent(
    f"""
    import os
    import random

    import pytest_prove as prove

    BAD, GOOD = {BAD!r}, {GOOD!r}


    def rollout(cfg, seed):
        rng = random.Random(seed)
        failing = float(os.environ.get("FAIL", "0.1"))
        return prove.Episode(BAD if rng.random() < failing else GOOD)
    """
)


def _raw(text: str) -> list[str]:
    return [line for line in text.splitlines() if RAW.search(line)]


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_outcome_event_and_axis_names_reach_no_terminal_raw(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini(INI)
    (pytester.path / "prove_hostile.toml").write_text(SPEC)
    (pytester.path / "agent.py").write_text(AGENT)
    # A fixed salt: every run below must fail its gate, and FAIL 0.1 -> 0.7 takes about 12
    # of a condition's 20 twins apart, all one way; the gate needs 6 in one of the two (mid-p
    # 0.5^6 under Holm's 0.025), and on a new salt both had 5 or fewer 2.6e-6 of the time
    # (0.0016 each). This salt takes 10 and 13 apart.
    result = pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=b",
                                "--prove-salt=names")
    assert result.ret == 0, result.stdout.str()
    monkeypatch.setenv("FAIL", "0.7")
    shown = []
    for flags in ((), ("-v",), ("-q",), ("-rf",)):
        result = pytester.runpytest("-p", "no:randomly", "--prove-baseline=b", *flags)
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
        shown.append(result.stdout.str() + result.stderr.str())
    assert "complement of" in shown[1]  # the method line (-v) that printed them raw
    assert "\\x1b[31m" in shown[0] and "\\u202e" in shown[0]  # shown, as escapes
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()
    event = BAD
    for args in (["diff", "b", "latest"], ["diff", "b", "latest", "-v"],
                 ["check", "b", "latest"], ["show", "latest"], ["flips", "b", "latest"],
                 ["report", "b", "latest", "--out", "r.md"],
                 ["report", "latest", "--out", "one.md"],
                 ["diff", "b", "latest", "--event", event],
                 ["diff", "b", "latest", "--event", "nope"],
                 ["report", "b", "latest", "--out", "r.html", "--x", "nope"]):
        main(args)
        out = capsys.readouterr()
        shown.append(out.out + out.err)
    shown.append((pytester.path / "r.md").read_text())
    shown.append((pytester.path / "one.md").read_text())
    raw = [line for text in shown for line in _raw(text)]
    assert not raw, raw[:5]
    assert any("tick\\x1b[1met\\u202e=v1" in text for text in shown)  # the axis, escaped
