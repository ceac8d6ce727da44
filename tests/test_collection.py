"""Both rollout forms become cells x replicates items with readable ids."""

from __future__ import annotations

import textwrap

import pytest


def test_decorator_collects_cells_times_replicates(bot: pytest.Pytester) -> None:
    result = bot.runpytest("--collect-only", "-q", "--prove-replicates", "3")
    result.stdout.fnmatch_lines([
        "test_bot.py::test_bot[refund-r000]",
        "test_bot.py::test_bot[refund-r001]",
        "test_bot.py::test_bot[refund-r002]",
        "test_bot.py::test_bot[password-r000]",
        "test_bot.py::test_bot[password-r001]",
        "test_bot.py::test_bot[password-r002]",
        "6 tests collected*",
    ])


def test_replicate_ids_are_padded_to_the_sweep(bot: pytest.Pytester) -> None:
    result = bot.runpytest("--collect-only", "-q", "--prove-replicates", "1200", "-k",
                           "refund and r0017")
    result.stdout.fnmatch_lines(["test_bot.py::test_bot[refund-r0017]",
                                 "*1/2400 tests collected (2399 deselected)*"])


def test_k_selects_conditions_and_replicates(bot: pytest.Pytester) -> None:
    result = bot.runpytest("-k", "password and r00", "--prove-replicates", "20",
                           "-p", "no:randomly")
    result.assert_outcomes(passed=10)


def test_concurrency_makes_blocks(bot: pytest.Pytester) -> None:
    result = bot.runpytest("--collect-only", "-q", "--prove-replicates", "10",
                           "--prove-concurrency", "4")
    result.stdout.fnmatch_lines([
        "test_bot.py::test_bot[refund-r000-003]",
        "test_bot.py::test_bot[refund-r004-007]",
        "test_bot.py::test_bot[refund-r008-009]",
        "*6 tests collected*",
    ])


SPEC = textwrap.dedent(
    """
    target = "agent:rollout"
    target_id = "support-bot"
    t_unit = "steps"
    replicates = 4

    [axes.ticket]
    type = "categorical"
    values = ["refund", "password"]

    [axes.temperature]
    type = "continuous"
    values = [0.0, 0.7]

    [declare]
    outcomes = ["resolved", "unresolved", "timeout"]
    failures = ["unresolved", "timeout"]
    successes = ["resolved"]
    """
)

AGENT = textwrap.dedent(
    """
    import random
    from pytest_prove import Episode

    def rollout(cfg, seed):
        rng = random.Random(seed)
        bad = rng.random() < 0.2 + cfg["temperature"] / 10
        return Episode("unresolved" if bad else "resolved", t=3, horizon=5,
                       meta={"case_id": cfg["ticket"]})
    """
)


def test_toml_spec_collects_and_runs(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    specs = pytester.mkdir("specs")
    (specs / "prove_support.toml").write_text(SPEC)
    (specs / "agent.py").write_text(AGENT)
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "specs/prove_support.toml::support-bot[refund-0.0-r000]",
        "specs/prove_support.toml::support-bot[password-0.7-r003]",
        "*16 tests collected*",
    ])
    result = pytester.runpytest("-q")
    result.assert_outcomes(passed=16)
    from pytest_prove.store import Store

    run = Store(pytester.path / ".prove").load("latest")
    assert len(run.episodes) == 16
    assert {r["rollout"] for r in run.episodes} == {"support-bot"}
    assert {r["condition_key"] for r in run.episodes} == {
        '{"temperature":0.0,"ticket":"refund"}', '{"temperature":0.7,"ticket":"refund"}',
        '{"temperature":0.0,"ticket":"password"}', '{"temperature":0.7,"ticket":"password"}'}


def test_spec_listed_in_ini_is_collected(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\nprove_specs = sweep.toml\n")
    pytester.path.joinpath("sweep.toml").write_text(SPEC)
    pytester.path.joinpath("agent.py").write_text(AGENT)
    result = pytester.runpytest("--collect-only", "-q", "sweep.toml")
    result.stdout.fnmatch_lines(["*16 tests collected*"])


def test_axes_form_on_a_plain_function(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_axes=textwrap.dedent(
        """
        import pytest_prove as prove

        @prove.rollout(replicates=3, failures=["bad"], successes=["good"],
                       axes={"ticket": ["refund", "password"]})
        def support(cfg, seed):
            return prove.Episode("bad" if seed % 3 == 0 else "good",
                                 meta={"case_id": cfg["ticket"]})
        """))
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "test_axes.py::support[refund-r000]",
        "*6 tests collected*",
    ])
    pytester.runpytest().assert_outcomes(passed=6)


def test_fixtures_give_the_episode_its_seed_replicate_and_condition(
        pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_fx=textwrap.dedent(
        """
        import pytest
        import pytest_prove as prove

        @prove.rollout(replicates=4, failures=["bad"], successes=["good"],
                       concurrency=2)
        @pytest.mark.parametrize("ticket", ["refund"])
        def test_fx(ticket, prove_seed, prove_replicate, prove_cfg):
            assert prove_cfg == {"ticket": "refund"}
            return prove.Episode("good", meta={"seed": prove_seed,
                                               "replicate": prove_replicate})
        """))
    pytester.runpytest().assert_outcomes(passed=2)
    from pytest_prove.store import Store

    run = Store(pytester.path / ".prove").load("latest")
    assert sorted(r["replicate"] for r in run.episodes) == [0, 1, 2, 3]
    for record in run.episodes:
        assert record["meta"]["seed"] == record["seed"]
        assert record["meta"]["replicate"] == record["replicate"]
    assert len({r["seed"] for r in run.episodes}) == 4


def test_a_fixture_built_on_prove_seed_sees_the_episodes_seed(pytester: pytest.Pytester) -> None:
    # The plugin hands rollout items its own values up front; a user's fixture that asks
    # for them through pytest must get the same ones.
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_fx=textwrap.dedent(
        """
        import pytest
        import pytest_prove as prove

        @pytest.fixture
        def agent(prove_seed, prove_cfg, prove_replicate):
            return {"seed": prove_seed, "cfg": prove_cfg, "replicate": prove_replicate}

        @prove.rollout(replicates=3, failures=["bad"], successes=["good"])
        @pytest.mark.parametrize("ticket", ["refund", "login"])
        def test_fx(ticket, agent, prove_seed, prove_block):
            assert agent["cfg"] == {"ticket": ticket}
            assert prove_block == (agent["replicate"],)
            return prove.Episode("good", meta={"fixture_seed": agent["seed"],
                                               "seed": prove_seed,
                                               "replicate": agent["replicate"]})
        """))
    pytester.runpytest().assert_outcomes(passed=6)
    from pytest_prove.store import Store

    run = Store(pytester.path / ".prove").load("latest")
    assert len(run.episodes) == 6
    for record in run.episodes:
        assert record["meta"]["fixture_seed"] == record["meta"]["seed"] == record["seed"]
        assert record["meta"]["replicate"] == record["replicate"]
    assert len({r["seed"] for r in run.episodes}) == 6


def test_equal_but_different_parameters_are_different_conditions(
        pytester: pytest.Pytester) -> None:
    # 1, 1.0 and True compare equal in Python; as conditions they are three.
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_eq=textwrap.dedent(
        """
        import pytest
        import pytest_prove as prove

        from decimal import Decimal

        VALUES = [1, 1.0, True, 0.0, -0.0, (1, 2), (1.0, 2.0), (True, 2),
                  Decimal("0.5"), Decimal("0.50")]

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        @pytest.mark.parametrize("x", VALUES, ids=[f"v{i}" for i in range(len(VALUES))])
        def test_eq(x):
            return prove.Episode("good")
        """))
    pytester.runpytest().assert_outcomes(passed=20)
    from pytest_prove.store import Store

    run = Store(pytester.path / ".prove").load("latest")
    keys = [r["condition_key"] for r in run.episodes]
    assert len(keys) == 20
    assert sorted(set(keys)) == sorted([
        '{"x":1}', '{"x":1.0}', '{"x":true}', '{"x":0.0}', '{"x":-0.0}', '{"x":"(1, 2)"}',
        '{"x":"(1.0, 2.0)"}', '{"x":"(True, 2)"}', '{"x":"Decimal(\'0.5\')"}',
        '{"x":"Decimal(\'0.50\')"}'])
    assert len({r["seed"] for r in run.episodes}) == 20


@pytest.mark.slow
def test_a_rollouts_fixtures_do_not_change_what_the_manifest_records(
        pytester: pytest.Pytester) -> None:
    # The manifest's packages and commit are read before any test runs: a rollout that
    # fakes subprocess.run (as agents under test often do) must not reach them.
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_sp=textwrap.dedent(
        """
        import subprocess
        import pytest
        import pytest_prove as prove

        @pytest.fixture(autouse=True)
        def no_shell(monkeypatch):
            def fake(*args, **kwargs):
                return subprocess.CompletedProcess(args, 0, stdout="canned tool output\\n")
            monkeypatch.setattr(subprocess, "run", fake)

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        def test_sp():
            return prove.Episode("good")
        """))
    pytester.runpytest().assert_outcomes(passed=2)
    from pytest_prove.store import Store

    run = Store(pytester.path / ".prove").load("latest")
    assert run.manifest["git_commit"] != "canned tool output"
    assert run.manifest["packages"]["pytest"] == pytest.__version__


@pytest.mark.slow
def test_a_warm_session_that_compares_nothing_never_imports_the_engine(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy and scipy cost about 1 s of CPU to import. A session that compares nothing imports
    them only for a design check it has not cached yet, and only when the check is read: by
    the plan, or by a run that does not allow an underpowered design. Printing a cached
    check's limit used to import them in every session (the overhead bench caught it), and
    every xdist worker imported them for a check a run allowing underpowered designs never
    reads."""
    from .conftest import BOT

    pytester.makepyfile(test_bot=BOT)
    pytester.makeconftest("""
        import sys

        def pytest_unconfigure(config):
            with open("engine.txt", "a") as fh:
                fh.write(f"{'numpy' in sys.modules} {'scipy' in sys.modules}\\n")
    """)
    # A subprocess each: whether a module was imported is a question about a fresh process.
    monkeypatch.setenv("BOT_REPLICATES", "400")  # a design that passes the check
    # Each condition's 400 replicates as one block: 2 items to collect, not 800 (the design
    # check reads the replicates, not the items).
    for _ in range(2):
        assert pytester.runpytest_subprocess("-p", "no:xdist", "--prove-concurrency=400",
                                             "--prove-plan").ret == 0
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    monkeypatch.setenv("BOT_REPLICATES", "3")
    assert pytester.runpytest_subprocess("-p", "no:xdist", "-p", "no:cacheprovider").ret == 0
    cold, warm, allowed = (pytester.path / "engine.txt").read_text().splitlines()
    assert cold == "True True"  # the first plan computed the design check
    assert warm == "False False", "a warm session imported the engine"
    assert allowed == "False False", "a run that never reads the design check imported the engine"


SAMPLE = """
import pytest
import pytest_prove as prove

@prove.rollout(replicates=3, failures=["bad"], successes=["good"])
@pytest.mark.parametrize("x", [1, 1.0, True, None, "a"])
@pytest.mark.parametrize("y", [0.5, -0.0, 0.0])
def test_a(x, y, prove_seed, prove_replicate, prove_block):
    return prove.Episode("good", meta={"seed": prove_seed, "replicate": prove_replicate,
                                       "block": list(prove_block)})

@prove.rollout(replicates=2, failures=["bad"], successes=["good"])
def test_b(prove_seed):
    return prove.Episode("good", meta={"seed": prove_seed})

class TestOne:
    @prove.rollout(replicates=2, failures=["bad"], successes=["good"], id="one")
    @pytest.mark.parametrize("t", ["p", (1, 2)])
    def test_m(self, t, prove_seed, prove_cfg):
        assert prove_cfg == {"t": t if isinstance(t, str) else repr(t)}
        return prove.Episode("good", meta={"seed": prove_seed})

class TestTwo:
    @prove.rollout(replicates=2, failures=["bad"], successes=["good"], id="two")
    def test_m(self, prove_seed):
        return prove.Episode("good", meta={"seed": prove_seed})
"""


@pytest.mark.parametrize("concurrency", [1, 2])
def test_every_item_plan_and_seed_is_the_one_its_parameters_define(
        pytester: pytest.Pytester, concurrency: int) -> None:
    # Collection works out what items share once (a function's declaration, a condition's
    # key) and hands the plugin's own arguments over at setup; every item's plan must
    # still be what its own parameters say, and every seed derive_seed's.
    from pytest_prove.declare.seeds import derive_seed
    from pytest_prove.declare.spec import condition_key
    from pytest_prove.plugin.state import PLAN_KEY
    from pytest_prove.store import Store

    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_sample=SAMPLE)
    option = f"--prove-concurrency={concurrency}"
    items, _ = pytester.inline_genitems("-p", "no:randomly", option)
    ids = {"test_sample.py::test_a": "test_sample.py::test_a",
           "test_sample.py::TestOne::test_m": "one", "test_sample.py::TestTwo::test_m": "two",
           "test_sample.py::test_b": "test_sample.py::test_b"}
    totals = {"test_a": 3, "test_b": 2, "test_m": 2}
    expected = {}
    for item in items:
        params = dict(item.callspec.params)  # type: ignore[attr-defined]
        block = params.pop("prove_block")
        condition = {k: v if v is None or isinstance(v, str | int | float) else repr(v)
                     for k, v in params.items()}
        plan = item.stash[PLAN_KEY]
        node = item.nodeid.split("[", 1)[0]
        assert plan.rollout_id == ids[node]
        assert plan.label == item.originalname  # type: ignore[attr-defined]
        assert plan.total == totals[plan.label]
        assert plan.replicates == block
        assert [(k, type(v), repr(v)) for k, v in plan.condition.items()] == \
            [(k, type(v), repr(v)) for k, v in condition.items()]
        assert plan.condition_key == condition_key(condition)
        assert plan.declaration.replicates == totals[plan.label]
        expected.update({(plan.rollout_id, plan.condition_key, r): item.nodeid for r in block})
    assert len(expected) == 15 * 3 + 2 + 2 * 2 + 2
    assert len({item.nodeid for item in items}) == len(items)

    pytester.runpytest("-p", "no:randomly", option).assert_outcomes(
        passed=len(items))
    run = Store(pytester.path / ".prove").load("latest")
    found = {(r["rollout"], r["condition_key"], r["replicate"]): r for r in run.episodes}
    assert set(found) == set(expected)
    for (rollout, key, replicate), record in found.items():
        seed = derive_seed(run.salt, rollout, key, replicate)
        assert record["seed"] == seed
        assert record["meta"]["seed"] == seed
        assert record["item"] == expected[(rollout, key, replicate)]
        if rollout.endswith("test_a"):
            assert record["meta"]["replicate"] == replicate
            assert replicate in record["meta"]["block"]


def test_a_rollout_tests_own_arguments_skip_the_fixture_machinery(
        pytester: pytest.Pytester) -> None:
    # The plugin hands a rollout test prove_seed, prove_block, prove_replicate and
    # prove_cfg itself: pytest sets none of them up as fixtures (each costs more than a
    # trivial episode), unless a fixture of the test's asks for one.
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_own=textwrap.dedent(
        """
        import pytest
        import pytest_prove as prove

        @pytest.fixture
        def agent(prove_cfg):
            return dict(prove_cfg)

        @prove.rollout(replicates=2, failures=["bad"], successes=["good"])
        @pytest.mark.parametrize("ticket", ["refund"])
        def test_own(ticket, prove_seed, prove_block, prove_replicate, prove_cfg, agent):
            assert agent == prove_cfg == {"ticket": ticket}
            return prove.Episode("good")
        """))
    result = pytester.runpytest("--setup-show", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    setups = [line for line in result.outlines if "SETUP" in line]
    assert any("agent" in line for line in setups)
    assert any("prove_cfg" in line for line in setups)  # asked for by agent
    assert not [line for line in setups
                if any(name in line for name in ("prove_seed", "prove_block", "prove_replicate"))]


def test_the_ids_of_a_sweeps_blocks_are_each_blocks_own() -> None:
    from pytest_prove.plugin.items import block_id, block_ids, blocks

    for replicates in (0, 1, 7, 999, 1000, 1001, 12_345):
        for concurrency in (1, 2, 4, 1000):
            chunks = blocks(replicates, concurrency)
            assert block_ids(chunks, replicates) == [block_id(b, replicates) for b in chunks]
    assert block_ids([(0,), (1, 2)], 3) == ["r000", "r001-002"]


#: Says, at the end of collection, which of the plugin's collection hooks are registered.
_HOOKS_SEEN = """
def pytest_collection_finish(session):
    manager = session.config.pluginmanager
    print("registered:", ",".join(name for name in ("prove_test_rollouts", "prove_axes_items")
                                  if manager.get_plugin(name) is not None) or "none")
"""


@pytest.mark.slow
def test_collection_hooks_are_registered_only_once_a_rollout_is_declared(
        pytester: pytest.Pytester) -> None:
    """A session of plain tests never calls the hooks that make a rollout's items (no cost
    an item, bench/instructions.py); a rollout declared as pytest imports its module
    registers them in time for that module's own items.  A subprocess: which rollouts a
    process has declared is the process's, and this one has declared many."""
    pytester.makeconftest(_HOOKS_SEEN)
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-s", "-p", "no:xdist", "-p", "no:randomly",
                                           "test_plain.py", timeout=120)
    result.stdout.fnmatch_lines(["registered: none"])
    result.assert_outcomes(passed=1)
    pytester.makepyfile(test_rollouts=textwrap.dedent("""
        import pytest
        import pytest_prove as prove


        def test_plain():
            pass


        @prove.rollout(replicates=3, failures=["bad"], successes=["good"])
        @pytest.mark.parametrize("ticket", ["refund"])
        def test_bot(ticket, prove_seed):
            return prove.Episode("good")


        @prove.rollout(replicates=2, failures=["bad"], successes=["good"],
                       axes={"ticket": ["refund", "password"]})
        def agent(cfg, seed):
            return prove.Episode("good")
    """))
    result = pytester.runpytest_subprocess("-s", "-p", "no:xdist", "-p", "no:randomly",
                                           "--prove-allow-underpowered", "test_plain.py",
                                           "test_rollouts.py", timeout=120)
    result.stdout.fnmatch_lines(["registered: prove_test_rollouts,prove_axes_items"])
    result.assert_outcomes(passed=2 + 3 + 4)
