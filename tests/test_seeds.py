"""Seeds are stable across processes, machines and versions, and twins share them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_prove.declare.seeds import derive_seed, new_salt

from .conftest import load


def test_pinned_values() -> None:
    # Pinned so that a change of derivation cannot pass unnoticed: every stored
    # baseline would lose its pairing.  BLAKE2b-64 of "salt\x1frollout\x1fkey\x1frep".
    assert derive_seed("0123456789abcdef", "support", '{"ticket":"refund"}', 0) == \
        PINNED[0]
    assert derive_seed("0123456789abcdef", "support", '{"ticket":"refund"}', 17) == \
        PINNED[1]
    assert derive_seed("salt", "tests/test_a.py::test_b", "{}", 199) == PINNED[2]


PINNED = (10922953472659182898, 863527281228857530, 5780582063119380256)


@pytest.mark.slow
def test_seed_is_the_same_in_another_process() -> None:
    code = ("from pytest_prove.declare.seeds import derive_seed;"
            "print(derive_seed('s', 'r', '{\"a\":1}', 3))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "123", "PATH": ""})
    assert int(out.stdout) == derive_seed("s", "r", '{"a":1}', 3)


def test_seeds_are_64_bit_and_distinct() -> None:
    salt = new_salt()
    seeds = {derive_seed(salt, "r", "{}", i) for i in range(10_000)}
    assert len(seeds) == 10_000
    assert all(0 <= s < 2**64 for s in seeds)
    assert max(seeds) > 2**63  # the top bit is used


def test_every_part_changes_the_seed() -> None:
    base = derive_seed("a", "b", "c", 1)
    assert len({base, derive_seed("x", "b", "c", 1), derive_seed("a", "x", "c", 1),
                derive_seed("a", "b", "x", 1), derive_seed("a", "b", "c", 2)}) == 5


def test_reserved_separator_is_refused() -> None:
    with pytest.raises(ValueError, match="reserved"):
        derive_seed("a\x1fb", "r", "{}", 0)


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_twins_of_a_paired_run_carry_identical_seeds(bot: pytest.Pytester) -> None:
    bot.runpytest("--prove-save-baseline", "base").assert_outcomes(passed=80)
    bot.runpytest("--prove-baseline", "base", "--prove-name", "after").assert_outcomes(
        passed=80)
    from pytest_prove.store import Store

    baseline = Store(bot.path / ".prove").load_baseline("base")
    after = load(bot, "after")
    assert after.salt == baseline.salt
    before = {(r["condition_key"], r["replicate"]): r["seed"] for r in baseline.episodes}
    twins = {(r["condition_key"], r["replicate"]): r["seed"] for r in after.episodes}
    assert before == twins
    assert len(before) == 80
    # An unpaired run draws a new salt, so its seeds differ.
    bot.runpytest("--prove-name", "other").assert_outcomes(passed=80)
    other = load(bot, "other")
    assert other.salt != baseline.salt
    assert not set(before.values()) & {r["seed"] for r in other.episodes}
