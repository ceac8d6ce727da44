"""``t`` and ``horizon`` are bounded where an episode is made (issue 29, finding 6, item 5).

``prove.Episode(outcome, t=1e300)`` was stored, and ``pytest-prove where`` then died in an
OverflowError. Now such an episode is a contract error of its own, naming the value and the
range, and ``where`` (and ``compare``, and the HTML report's step curves) read a run an
older pytest-prove stored with such a value, leaving those episodes out by name.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from pytest_prove.cli import main
from pytest_prove.declare.episode import MAX_T, Episode, RolloutContractError
from pytest_prove.store import Store

from .conftest import INI

AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=6, failures=["unresolved"], successes=["resolved"],
                   t_unit="steps")
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_bot(ticket, prove_seed):
        rng = random.Random(prove_seed)
        t = float(os.environ.get("T", rng.randint(1, 9)))
        outcome = "unresolved" if rng.random() < 0.5 else "resolved"
        return prove.Episode(outcome, t=t, horizon=max(t, 10), meta={"case_id": ticket})
    """
)


@pytest.mark.parametrize(("t", "horizon"), [(1e300, 1e300), (5, 1e300), (10**13, 10**13)])
def test_t_and_horizon_past_the_range_are_refused(t: float, horizon: float) -> None:
    with pytest.raises(RolloutContractError, match=r"must be from 0 to 1e\+12 .*got "):
        Episode("resolved", t=t, horizon=horizon)
    Episode("resolved", t=MAX_T, horizon=MAX_T)  # the end of the range is allowed


def test_an_episode_with_a_huge_t_is_a_contract_error_of_its_own(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=AGENT)
    monkeypatch.setenv("T", "1e300")
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=12)
    result.stdout.fnmatch_lines(["*Episode t must be from 0 to 1e+12 (in the rollout's "
                                 "t_unit), got t=1e+300*"])
    run = Store(pytester.path / ".prove").load("latest")
    assert {e["error"]["kind"] for e in run.episodes} == {"contract"}
    assert all(e.get("t") is None for e in run.episodes)


def test_where_reads_an_old_run_that_stored_a_huge_t(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_bot=AGENT)
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=old").ret == 0
    assert pytester.runpytest("-p", "no:randomly", "--prove-name=new").ret == 0
    store = pytester.path / ".prove"
    # As an older pytest-prove stored it: t (and horizon) of 1e300 in two episodes.
    path = store / "runs" / Store(store).load("old").run_id / "episodes.jsonl"
    lines = path.read_text().splitlines()
    for index in (0, 7):
        record = json.loads(lines[index])
        record["t"] = record["horizon"] = 1e300
        lines[index] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    for event in ("unresolved", "resolved"):
        assert main(["--store", str(store), "where", "old", "--event", event]) == 0
        out = capsys.readouterr().out
        assert "t above 1e+12" in out, out
    assert main(["--store", str(store), "compare", "old", "new", "--event", "unresolved"]) == 0
    assert main(["--store", str(store), "report", "old", "new",
                 "--out", str(pytester.path / "r.html")]) == 0
