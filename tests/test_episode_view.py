"""``pytest-prove episode RUN ITEM``: one stored episode whole, and beside its twin."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from pytest_prove.cli import main
from pytest_prove.report.episode import episode_lines
from pytest_prove.review.episode import Found, find_episode
from pytest_prove.store import Store

from ._helpers_speed import copy_project, saved_project
from .conftest import inline_session

#: Twins that go apart at their second step when ESCALATE is set; a traceback and a
#: terminal escape in what the rollout wrote.  (Spans are captured only in a process of
#: their own, tests/test_capture_global.py; their lines are checked on a stored record.)
AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    ESCALATE = os.environ.get("ESCALATE") == "1"


    @prove.rollout(replicates=12, failures=["unresolved"], successes=["resolved"],
                   t_unit="steps", metrics={"judge": "higher"})
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_bot(ticket, prove_seed):
        rng = random.Random(prove_seed)
        with prove.step("read_case"):
            pass
        if ESCALATE and ticket == "refund" and prove_seed % 2 == 0:
            with prove.step("escalate\\x1b[31m"):
                pass
            if prove_seed % 4 == 0:
                raise RuntimeError("the queue is gone")
            return prove.Episode("unresolved", metrics={"judge": 1.0})
        with prove.step("answer"):
            prove.usage("model-a", 120, 30)
        return prove.Episode("resolved", metrics={"judge": 4.0 + rng.random()})
    """
)


@pytest.fixture(scope="module")
def _twins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs 'first' and 'second' (ESCALATE set) of the agent on one fixed salt: made once for
    the module, in this process (the same files, options and salt in every test: the same
    episodes), and copied into each test's project."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("ESCALATE", raising=False)
        root = saved_project(tmp_path_factory.mktemp("twins"),
                             {"tox.ini": "[pytest]\nprove_allow_underpowered = true\n",
                              "test_bot.py": AGENT},
                             "-p", "no:randomly", "--prove-name=first", "--prove-salt=fixed")
    code, out = inline_session(root, "-p", "no:randomly", "--prove-name=second",
                               "--prove-salt=fixed", env={"ESCALATE": "1"})
    assert code == pytest.ExitCode.TESTS_FAILED, out  # the raising replicates fail
    return root


@pytest.fixture
def twins(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
          _twins: Path) -> pytest.Pytester:
    copy_project(_twins, pytester.path)
    monkeypatch.setenv("ESCALATE", "1")  # as after the second run
    return pytester


def _cli(project: pytest.Pytester, capsys: pytest.CaptureFixture[str],
         *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--store", str(project.path / ".prove"), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _seed_items(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    code, out, _ = _cli(project, capsys, "episode", "second", "refund-r000", "--json")
    assert code == 0
    seeds = {}
    for replicate in range(12):
        code, out, _ = _cli(project, capsys, "episode", "second", f"refund-r{replicate:03d}",
                            "--json")
        seeds[f"refund-r{replicate:03d}"] = json.loads(out)["episode"]["seed"]
    return seeds


def test_one_episode_reads_whole_with_its_replay(
        twins: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    seeds = _seed_items(twins, capsys)
    calm = next(i for i, s in seeds.items() if s % 2 == 1)
    code, out, _ = _cli(twins, capsys, "episode", "second", calm)
    assert code == 0
    assert f"episode test_bot.py::test_bot[{calm}] of run 'second' (salt fixed)" in out
    assert f"condition ticket=refund, replicate {int(calm[-3:])}, seed {seeds[calm]}" in out
    assert "ended:\n  resolved\n" in out
    assert "  1 read_case" in out and "  2 answer" in out
    assert "spans:\n  none captured\n" in out
    assert "120 in, 30 out" in out and "model-a: 120 in, 30 out" in out
    assert "judge 4." in out
    assert f"replay: pytest 'test_bot.py::test_bot[{calm}]' --prove-replay=second" in out

    raised = next(i for i, s in seeds.items() if s % 4 == 0)
    code, out, _ = _cli(twins, capsys, "episode", "second", f"test_bot[{raised}]")
    assert code == 0
    assert "error:\n  exception: RuntimeError: the queue is gone" in out
    assert 'raise RuntimeError("the queue is gone")' in out  # the traceback's end
    assert "escalate\\x1b[31m" in out and "\x1b" not in out  # the escape written as typed


def test_twins_side_by_side_say_where_they_first_differ(
        twins: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    seeds = _seed_items(twins, capsys)
    apart = next(i for i, s in seeds.items() if s % 4 == 2)
    code, out, _ = _cli(twins, capsys, "episode", "first", apart, "--twin", "second")
    assert code == 0
    assert "first difference: step 2: answer | escalate\\x1b[31m" in out
    marked = [line for line in out.splitlines() if line.startswith(">")]
    assert len(marked) == 1 and "2 answer" in marked[0] and "2 escalate" in marked[0]
    assert "left  replay: pytest" in out and "--prove-replay=first" in out
    assert "right replay: pytest" in out and "--prove-replay=second" in out

    same = next(i for i, s in seeds.items() if s % 2 == 1)
    code, out, _ = _cli(twins, capsys, "episode", "first", same, "--twin", "second", "--json")
    document = json.loads(out)
    assert document["command"] == "episode"
    assert document["first_difference"] == {
        "where": "none", "index": None,
        "text": "the same steps and spans, and the same ending"}
    assert document["episode"]["seed"] == document["twin"]["episode"]["seed"] == seeds[same]


def test_flips_points_at_the_side_by_side_view(
        twins: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(twins, capsys, "flips", "first", "second")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("read a pair side by side:"))
    command = line.split(": ", 1)[1].split()
    assert command[:3] == ["pytest-prove", "episode", "first"] and command[-2:] == [
        "--twin", "second"]
    code, out, _ = _cli(twins, capsys, *command[1:3], command[3].strip("'"), *command[4:])
    assert code == 0 and "first difference: step 2:" in out


def test_a_name_that_is_not_there_or_ambiguous_is_refused_with_the_fix(
        twins: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(twins, capsys, "episode", "second", "refund-r099")
    assert code == 1
    assert "run 'second' holds no episode named 'refund-r099'" in err
    assert "named like 'test_bot.py::test_bot[refund-r000]'" in err
    code, _, err = _cli(twins, capsys, "episode", "second", "r003")
    assert code == 1
    assert "'r003' names 2 episodes of run 'second'" in err and "refund-r003" in err
    code, _, err = _cli(twins, capsys, "episode", "second", "  ")
    assert code == 1 and "name the episode to show" in err
    code, _, err = _cli(twins, capsys, "episode", "nope", "refund-r001")
    assert code == 1 and "no run named 'nope'" in err


def test_a_twin_from_another_salt_is_said_not_to_be_one(
        twins: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    result = twins.runpytest("-p", "no:randomly", "--prove-name=other", "--prove-salt=moved")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    code, out, _ = _cli(twins, capsys, "episode", "first", "password-r001", "--twin", "other")
    assert code == 0
    assert "first difference: they ran on different seeds" in out
    assert "these are not twins" in out


def test_spans_are_listed_with_their_attributes_events_and_what_was_dropped(
        twins: pytest.Pytester) -> None:
    run = Store(twins.path / ".prove").open("second")
    found = find_episode(run, "password-r001")
    span = {"name": "chat", "span_id": "01", "parent_id": None, "start": 0.25,
            "duration": 1.5, "status": "error", "status_message": "rate limited\x1b[2J",
            "attributes": {"gen_ai.request.model": "model-a",
                           "gen_ai.prompt": "x" * 400,
                           **{f"extra.{i:02d}": i for i in range(14)}},
            "events": [{"name": "retry", "attributes": {"attempt": 2}}]}
    record = {**dict(found.record), "spans": [span], "spans_dropped": 3}
    lines = episode_lines(Found(run, record, found.item, found.replay), verbose=False)
    text = "\n".join(lines)
    assert "  1 chat  at 0.250 s, took 1.500 s, error: rate limited\\x1b[2J" in text
    assert "gen_ai.request.model = model-a" in text
    assert "... 4 more (-v shows every one)" in text  # 16 attributes, 12 shown
    assert "event retry" in text and "attempt = 2" in text
    assert "and 3 more, dropped past the cap" in text
    assert max(len(line) for line in lines) < 240  # a long attribute is cut, not spilled
    every = "\n".join(episode_lines(Found(run, record, found.item, found.replay),
                                    verbose=True))
    assert "extra.13 = 13" in every and "more (-v shows" not in every


def test_a_compact_baseline_and_the_html_report_read_the_same_twins(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_bot=AGENT.replace("replicates=12", "replicates=40"))
    saved = pytester.runpytest("-p", "no:randomly", "--prove-save-baseline=base")
    assert saved.ret == pytest.ExitCode.OK, saved.stdout.str()
    same = pytester.runpytest("-p", "no:randomly", "--prove-baseline=base",
                              "--prove-name=same")
    assert same.ret == pytest.ExitCode.OK
    monkeypatch.setenv("ESCALATE", "1")
    worse = pytester.runpytest("-p", "no:randomly", "--prove-baseline=base",
                               "--prove-name=worse")
    assert worse.ret == pytest.ExitCode.TESTS_FAILED

    code, out, _ = _cli(pytester, capsys, "flips", "base", "worse")
    line = next(x for x in out.splitlines() if x.startswith("read a pair side by side:"))
    words = line.split(": ", 1)[1].split()
    assert words[2] == "baseline:base"
    code, out, err = _cli(pytester, capsys, "episode", words[2], words[3].strip("'"),
                          "--twin", "worse")
    assert code == 0, err
    assert "(a compact baseline keeps only how many steps and the last one's name)" in out
    assert "  2 steps, the last answer (a compact baseline" in out

    page = pytester.path / "worse.html"
    code, _, err = _cli(pytester, capsys, "report", "base", "worse", "--out", str(page))
    assert code == 0, err
    text = page.read_text(encoding="utf-8")
    assert "<h2>Twins that ended differently</h2>" in text
    assert text.count("<details><summary>r") == 5  # the first five of ticket=refund
    section = text.split("<h2>Twins that ended differently</h2>")[1].split("</section>")[0]
    assert "ticket=refund: " in section and "ticket=password" not in section
    assert "escalate\\x1b[31m" in text and "\x1b" not in text
    assert "pytest-prove episode baseline:base" in text

    calm = pytester.path / "same.html"
    code, _, _ = _cli(pytester, capsys, "report", "base", "same", "--out", str(calm))
    assert code == 0
    assert "Twins that ended differently" not in calm.read_text(encoding="utf-8")
