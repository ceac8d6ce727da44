"""Prices, `pytest-prove cost` and `plan`, and --prove-plan-from, on runs made by real sweeps."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap

import pytest

import pytest_prove.stats  # noqa: F401 - loaded once, before pytester's in-process runs
from pytest_prove.cli import main
from pytest_prove.report.figures import COST_DRAWN, cost_figure
from pytest_prove.review.cost import (
    ConditionCost,
    ModelUsage,
    PriceError,
    Prices,
    RunCost,
    compare_costs,
    cost_of,
    estimate_plan,
    parse_price_lines,
)

from .conftest import INI, load

#: refund episodes use 300 input / 30 output tokens of big-model a call, 2 calls;
#: password ones 100 / 10 of small-model, 1 call. MODEL_SUFFIX renames the model.
AGENT = textwrap.dedent(
    """
    import os

    import pytest
    import pytest_prove as prove

    SMALL = os.environ.get("SMALL_ONLY") == "1"


    @prove.rollout(replicates=10, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        if ticket == "refund" and not SMALL:
            prove.usage("big-model", input=300, output=30)
            prove.usage("big-model", input=300, output=30)
        else:
            prove.usage("small-model", input=100, output=10)
        return prove.Episode("resolved", meta={"case_id": ticket})
    """
)
PRICES = "prove_prices =\n    big-model = 10.00 30.00\n    small-model = 1.00 2.00\n"


@pytest.fixture
def agent(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI + PRICES)
    pytester.makepyfile(test_agent=AGENT)
    return pytester


def _cli(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run the command line in the project folder (where it finds the prices)."""
    pytester.chdir()
    capsys.readouterr()  # drop what the pytest runs before printed
    code = main(["--store", str(pytester.path / ".prove"), *args])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


@pytest.mark.slow
def test_cost_of_a_sweep_by_model_and_condition(agent: pytest.Pytester,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # Under xdist, ONE worker: each episode's tokens reach the controller with its report
    # (a worker sends no totals of its own, wire.py), so one worker takes the path two would,
    # with one interpreter start less.
    result = agent.runpytest("-n", "1", "--prove-name", "both")
    assert result.ret == 0
    # 10 refund episodes: 6,000 in / 600 out of big-model = $0.06 + $0.018;
    # 10 password episodes: 1,000 in / 100 out of small-model = $0.001 + $0.0002.
    result.stdout.fnmatch_lines(["*tokens: 7,000 input and 700 output in 30 calls "
                                 "(big-model, small-model), $0.0792*"])
    assert load(agent).manifest["prices"] == {"big-model": [10.0, 30.0],
                                              "small-model": [1.0, 2.0]}
    out = _cli(agent, capsys, "cost", "both")
    lines = out.splitlines()
    assert lines[0] == ("run 'both' (complete): 7,000 input and 700 output tokens in 30 calls "
                        "over 20 episodes, $0.0792")
    assert any(line.split() == ["big-model", "6,000", "in", "600", "out", "20", "calls",
                                "$0.0780"] for line in lines), out
    assert any(line.split()[:5] == ["ticket=refund", "600", "in", "60", "out"] for line in lines)
    doc = json.loads(_cli(agent, capsys, "cost", "both", "--json"))
    assert doc["input"] == 7000 and doc["price"] == pytest.approx(0.0792)


@pytest.mark.slow
def test_cost_of_two_runs_gives_the_ratio_per_episode(agent: pytest.Pytester,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert agent.runpytest("-p", "no:xdist", "--prove-name", "before",
                           "--prove-save-baseline", "before").ret == 0
    agent._monkeypatch.setenv("SMALL_ONLY", "1")
    assert agent.runpytest("-p", "no:xdist", "--prove-name", "after",
                           "--prove-baseline", "before").ret == 0
    out = _cli(agent, capsys, "cost", "baseline:before", "after")
    lines = out.splitlines()
    # The verdict first: refund's 10 twins each cost $0.0078 -> $0.00012 (all 10 differences
    # negative: exact two-sided p = 2/2**10, x2 by Holm = 0.0039); password's are unchanged.
    assert lines[:5] == [
        "cost per episode changed significantly: cheaper in 1 of 2 conditions (Holm over 2 "
        "conditions at q=0.05)",
        "  ticket=password: no significant change, 0% ($0, 95% interval $0 to $0), not "
        "significant (p=1.000, Holm)",
        "  ticket=refund: cheaper, -98% (-$0.0077, 95% interval -$0.0077 to -$0.0077), "
        "significant (p=0.004, Holm)",
        "how: paired on twins (the runs share their salt, so each replicate ran on one seed "
        "before and after): Wilcoxon signed-rank per condition; the shift is the "
        "Hodges-Lehmann estimate, its share of the baseline's mean per episode; an episode "
        "without tokens spent nothing",
        ""]
    # refund episodes 660 -> 110 tokens (1/6), password ones unchanged: median of the 20.
    assert lines[5] == ("'after' uses 0.58x the tokens of 'baseline:before' per episode "
                        "(median over 20 shared episodes; 0.17x to 1.00x)")
    assert "price per episode $0.0040 -> $0.0001 (-97%)" in out


#: Each episode asks big-model for 200 to 400 input tokens (a tenth of that out), drawn from
#: its seed, so twins on one seed use the same; LONGER stretches refund's.
NOISY_AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    LONGER = float(os.environ.get("LONGER", "1"))


    @prove.rollout(replicates=30, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        tokens = random.Random(prove_seed).randint(200, 400)
        if ticket == "refund":
            tokens = round(tokens * LONGER)
        prove.usage("big-model", input=tokens, output=tokens // 10)
        return prove.Episode("resolved", meta={"case_id": ticket})
    """
)


#: Each condition's 30 replicates as one block (2 items a session, not 60): the same
#: replicates, seeds and episodes, each with its own tokens; what is checked is the test of cost.
NOISY_BLOCKS = "--prove-concurrency=30"


@pytest.fixture
def noisy(pytester: pytest.Pytester) -> pytest.Pytester:
    """The noisy agent's baseline 'before', on a fixed salt; then refund made 30% longer."""
    pytester.makeini(INI + PRICES)
    pytester.makepyfile(test_agent=NOISY_AGENT)
    assert pytester.runpytest(NOISY_BLOCKS, "-p", "no:xdist", "--prove-salt=cost",
                              "--prove-name", "before", "--prove-save-baseline",
                              "before").ret == 0
    pytester._monkeypatch.setenv("LONGER", "1.3")
    return pytester


def _condition_lines(out: str) -> dict[str, str]:
    return {line.split(":")[0].strip(): line.split(":", 1)[1].strip()
            for line in out.splitlines() if line.startswith("  ticket=")
            and ("changed" in line or "costlier" in line or "cheaper" in line
                 or "no significant change" in line)}


@pytest.mark.slow
def test_cost_of_twins_says_which_condition_got_costlier(noisy: pytest.Pytester,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """Paired (the second run takes the baseline's salt): refund's 30 twins each cost 30%
    more, password's the same: one condition costlier, named, with its share and interval."""
    assert noisy.runpytest(NOISY_BLOCKS, "-p", "no:xdist", "--prove-name", "after",
                           "--prove-baseline", "before").ret == 0
    out = _cli(noisy, capsys, "cost", "baseline:before", "after")
    assert out.splitlines()[0] == ("cost per episode changed significantly: costlier in 1 of 2 "
                                   "conditions (Holm over 2 conditions at q=0.05)")
    found = _condition_lines(out)
    assert found["ticket=password"].startswith("no significant change, 0% ($0, ")
    # the shift (Hodges-Lehmann) over the baseline's mean: 30%, give or take the two
    # estimates' difference on 30 episodes
    assert re.fullmatch(r"costlier, \+(29|30|31)% \(\+\$0\.00\d\d, 95% interval "
                        r"\+\$0\.00\d\d to \+\$0\.00\d\d\), significant \(p<0\.001, Holm\)",
                        found["ticket=refund"]), found
    assert "how: paired on twins" in out
    doc = json.loads(_cli(noisy, capsys, "cost", "baseline:before", "after", "--json"))
    test = doc["test"]
    assert (test["unit"], test["paired"], test["alpha"]) == ("price", True, 0.05)
    rows = {row["condition"]: row for row in test["conditions"]}
    assert rows["ticket=refund"]["verdict"] == "costlier"
    assert rows["ticket=refund"]["relative"] == pytest.approx(0.3, abs=0.015)
    assert rows["ticket=refund"]["low"] <= rows["ticket=refund"]["shift"] \
        <= rows["ticket=refund"]["high"]
    assert rows["ticket=refund"]["n_before"] == rows["ticket=refund"]["n_after"] == 30
    assert rows["ticket=password"]["verdict"] == "no significant change"
    assert rows["ticket=password"]["p_holm"] == 1.0


@pytest.mark.slow
def test_cost_of_runs_on_other_seeds_is_tested_unpaired(noisy: pytest.Pytester,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """Another salt: no twins, so each condition's episodes are compared as two samples; a
    stricter --alpha is the family's; without prices, tokens are tested and it says why."""
    assert noisy.runpytest(NOISY_BLOCKS, "-p", "no:xdist", "--prove-salt=elsewhere",
                           "--prove-name", "after").ret == 0
    out = _cli(noisy, capsys, "cost", "baseline:before", "after", "--alpha", "0.01")
    assert out.splitlines()[0] == ("cost per episode changed significantly: costlier in 1 of 2 "
                                   "conditions (Holm over 2 conditions at q=0.01)")
    found = _condition_lines(out)
    assert found["ticket=refund"].startswith("costlier, +")
    assert found["ticket=password"].startswith("no significant change, ")
    assert "how: unpaired (the runs have different salts, so no episode has a twin): " \
           "Wilcoxon-Mann-Whitney rank-sum per condition" in out


@pytest.mark.slow
def test_cost_without_prices_tests_tokens_per_episode(pytester: pytest.Pytester,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=NOISY_AGENT)
    assert pytester.runpytest(NOISY_BLOCKS, "-p", "no:xdist", "--prove-salt=cost", "--prove-name",
                              "before").ret == 0
    pytester._monkeypatch.setenv("LONGER", "1.3")
    assert pytester.runpytest(NOISY_BLOCKS, "-p", "no:xdist", "--prove-salt=cost", "--prove-name",
                              "after").ret == 0
    out = _cli(pytester, capsys, "cost", "before", "after")
    assert out.splitlines()[0] == ("tokens per episode changed significantly: costlier in 1 "
                                   "of 2 conditions (Holm over 2 conditions at q=0.05)")
    refund = _condition_lines(out)["ticket=refund"]
    assert re.fullmatch(r"costlier, \+(29|30|31)% \(\+\d\d tokens, 95% interval \+\d\d "
                        r"tokens to \+\d\d\d? tokens\), significant \(p<0\.001, Holm\)",
                        refund), refund
    assert "tokens, not price: no prices declared (declare them in prove_prices" in out


def test_plan_from_an_earlier_run(agent: pytest.Pytester,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert agent.runpytest("-p", "no:xdist", "--prove-name", "pilot").ret == 0
    out = _cli(agent, capsys, "plan", "--from", "pilot", "--replicates", "200")
    # 200 x (600 + 100) input, 200 x (60 + 10) output; 200 x ($0.0078 + $0.00012).
    assert out.splitlines()[0] == ("expected cost: 140,000 input and 14,000 output tokens over "
                                   "400 episodes, $1.58 (per-condition means of run 'pilot')")
    result = agent.runpytest("--prove-plan", "--prove-plan-from", "pilot",
                             "--prove-replicates", "200")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["pytest-prove plan: 400 episodes*", "design check:*",
                                 "expected cost: 140,000 input and 14,000 output tokens over "
                                 "400 episodes, $1.58 (per-condition means of run 'pilot')"])


def test_plan_without_a_source_says_how(agent: pytest.Pytester) -> None:
    result = agent.runpytest("--prove-plan")
    result.stdout.fnmatch_lines(["expected cost: add --prove-plan-from RUN*"])
    missing = agent.runpytest("--prove-plan", "--prove-plan-from", "nope")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--prove-plan-from: no run named 'nope'*"])


def test_price_lines() -> None:
    prices = parse_price_lines(["gpt-4.1-mini = 0.40 1.60", "# a comment", "",
                                "gpt-4.1 = 2, 8"], "pytest.ini prove_prices")
    mini = prices.for_model("gpt-4.1-mini-2025-04-14")
    assert mini is not None and mini.input_per_million == 0.40
    full = prices.for_model("gpt-4.1")
    assert full is not None and full.of(1_000_000, 1_000_000) == 10.0
    assert prices.for_model("gpt-4o") is None
    with pytest.raises(PriceError, match=r"pytest.ini prove_prices: the price of 'm' needs two"):
        parse_price_lines(["m = 1"], "pytest.ini prove_prices")
    with pytest.raises(PriceError, match="cannot read the price line 'nonsense'"):
        parse_price_lines(["nonsense"], "x")


def test_unpriced_models_are_named(agent: pytest.Pytester) -> None:
    agent.makeini(INI + "prove_prices =\n    big-model = 10.00 30.00\n")
    assert agent.runpytest("-p", "no:xdist").ret == 0
    run = load(agent)
    cost = cost_of(run, Prices())
    assert cost.price is None and cost.unpriced == ("big-model", "small-model")
    plan = estimate_plan(run, {"unknown-rollout": (["{}"], 5)}, Prices())
    assert plan.unknown == ("unknown-rollout",) and plan.input == 0


def _run_cost(name: str, per_condition: dict[str, int]) -> RunCost:
    conditions = tuple(
        ConditionCost(rollout="agent", condition_key=key, label=f"case={key}", episodes=10,
                      models=(ModelUsage("m", input=10 * tokens, output=0, calls=10,
                                         price=None),))
        for key, tokens in per_condition.items())
    return RunCost(run=name, status="complete", episodes=10 * len(conditions),
                   with_tokens=10 * len(conditions),
                   models=(ModelUsage("m", input=sum(c.input for c in conditions), output=0,
                                      calls=10 * len(conditions), price=None),),
                   conditions=conditions,
                   per_episode={("agent", key, r): (tokens, 0)
                                for key, tokens in per_condition.items() for r in range(10)},
                   prices=Prices(), unpriced=("m",))


def test_a_cost_figure_of_many_conditions_draws_the_costliest_and_names_the_rest() -> None:
    import random
    import re

    rng = random.Random(7)
    keys = [f"c{i:03d}" for i in range(300)]
    before = {k: rng.randrange(100, 10_000) for k in keys}
    after = {k: rng.randrange(100, 10_000) for k in keys}
    page = cost_figure(compare_costs(_run_cost("baseline:nightly", before),
                                     _run_cost("pr-7", after)))
    drawn = re.findall(r'<g class="cg" data-condition="case=(c\d+)">', page)
    # Every bar is drawn in both figures' place: tokens only here (no prices declared).
    assert len(drawn) == COST_DRAWN
    most = {k: max(before[k], after[k]) for k in keys}
    assert [most[k] for k in drawn] == sorted((most[k] for k in drawn), reverse=True)
    assert min(most[k] for k in drawn) >= max(most[k] for k in keys if k not in drawn)
    assert (f"drawn: the {COST_DRAWN} conditions of 300 that take the most tokens per episode"
            in page)
    assert "<code>pytest-prove cost baseline:nightly pr-7</code> lists every one" in page
    # The table a screen reader reads holds what is drawn, no more.
    assert page.count("<tr><td>case=") == 2 * COST_DRAWN

    few = {k: before[k] for k in keys[:5]}
    small = cost_figure(compare_costs(_run_cost("a", few), _run_cost("b", few)))
    assert re.findall(r'data-condition="case=(c\d+)"', small) == keys[:5]
    assert "drawn: the" not in small


def test_token_totals_past_2_to_the_53_are_printed_exactly() -> None:
    """Bug: totals were printed through a float, so a count past 2**53 lost its last digits
    (the JSON document had them right)."""
    from pytest_prove.report.cost import format_cost

    total = 10 * (2**60 + 1)
    text = "\n".join(format_cost(_run_cost("big", {"c": 2**60 + 1})))
    assert f"run 'big' (complete): {total:,} input and 0 output tokens in 10 calls" in text
    assert f"  m  {total:,} in" in text


def test_cost_test_names_what_it_could_not_compare_and_an_interval_it_cannot_bound() -> None:
    """Conditions in one run only are named, not tested; two episodes a side give no finite
    95% interval, which reads unbounded (and null in JSON), not as a range of two values."""
    from pytest_prove.report.cost import cost_test_document, format_cost_test
    from pytest_prove.review.cost import cost_shifts

    before = _run_cost("a", {"same": 100, "gone": 200})
    after = _run_cost("b", {"same": 100, "new": 50})
    test = cost_shifts(before, after)
    assert test is not None and not test.paired and test.unit == "tokens"
    lines = format_cost_test(test)
    assert lines[0] == ("tokens per episode: no significant change in 1 condition (Holm over 1 "
                        "condition at q=0.05)")
    assert lines[1].startswith("  case=same: no significant change, 0% (0 tokens, ")
    assert "not compared (in one run only, or no twin in the other): case=gone, case=new" \
        in lines
    assert lines[-1] == ("tokens, not price: no prices declared (declare them in prove_prices "
                         "to test the price per episode)")
    few = {("agent", "same", r): (tokens, 0) for r, tokens in enumerate((10, 20))}
    small = cost_shifts(dataclasses.replace(before, per_episode=few),
                        dataclasses.replace(after, per_episode={
                            k: (v[0] * 3, 0) for k, v in few.items()}))
    assert small is not None
    assert "95% interval unbounded to unbounded" in format_cost_test(small)[1]
    row = cost_test_document(small)["conditions"][0]
    assert (row["low"], row["high"], row["verdict"]) == (None, None, "no significant change")
    json.dumps(cost_test_document(small), allow_nan=False)
