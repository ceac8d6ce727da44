"""What the controller keeps a byte an episode (issue 14, item 5: its memory): the endings of
the run it writes and the replicates pytest's selection kept, checked against the sets and
Counters they replace; and the reports of a rollout item under -n 2, whose properties the
controller shares between its call and teardown reports."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_prove.store.tally import ENDINGS, Endings, ReplicateSet
from pytest_prove.wire import spans, unspan


def test_endings_count_as_a_dict_of_identities_does() -> None:
    rng = random.Random(7)
    endings = Endings()
    reference: dict[tuple[str, str, int], str] = {}
    for _ in range(3000):
        rollout = rng.choice(["a", "b"])
        key = rng.choice(["k1", "k2", "k3"])
        # Mostly small replicate numbers; some far off, some negative (a hand-edited run).
        replicate = rng.choice([rng.randrange(200), rng.randrange(10**9), -rng.randrange(5)])
        end = rng.choice(ENDINGS)
        endings.put(rollout, key, replicate, end)
        reference[(rollout, key, replicate)] = end  # a replaced one counts where it stands
    tally = Counter(reference.values())
    assert len(endings) == len(reference)
    assert {e: endings.count(e) for e in ENDINGS} == {e: tally[e] for e in ENDINGS}
    assert endings.keys() == set(reference)
    for (rollout, key, replicate), end in reference.items():
        assert endings.get(rollout, key, replicate) == end
    assert endings.get("a", "nope", 0) is None
    for rollout in ("a", "b", "c"):
        for key in ("k1", "k2", "k3"):
            below = sum(1 for r, k, n in reference if (r, k) == (rollout, key) and 0 <= n < 150)
            assert endings.held(rollout, key, 150) == below
            some = {0, 5, 149, 10**9 - 1, -1}
            assert endings.held(rollout, key, some) == sum(
                1 for n in some if (rollout, key, n) in reference)


def test_a_far_off_replicate_makes_no_huge_array() -> None:
    endings = Endings()
    endings.put("a", "k", 10**12, "errored")
    replicates = ReplicateSet([3, 10**12])
    assert endings.held("a", "k", 10**13) == 1 and 10**12 in replicates
    assert len(replicates._codes.array) < 10_000  # type: ignore[attr-defined]


def test_a_replicate_set_is_a_set() -> None:
    rng = random.Random(3)
    numbers = [rng.randrange(300) for _ in range(200)] + [10**8, 7, 7]
    found = ReplicateSet(numbers)
    assert len(found) == len(set(numbers))
    assert list(found) == sorted(set(numbers))
    assert all(n in found for n in numbers) and 301 not in found and "7" not in found
    assert found.missing_below(320) == sorted(set(range(320)) - set(numbers))
    assert ReplicateSet().missing_below(3) == [0, 1, 2]


def test_a_replicate_set_updated_at_once_is_one_added_to_a_number_at_a_time() -> None:
    # update() marks a run of numbers in one go when each would have gone in the array
    # taken one by one; the set, its size, its order and where each number lives must be
    # those of add() called for each number in turn.
    rng = random.Random(11)
    batches = [list(range(100_000)), list(range(5000, 0, -1)), [0, 9000, 4095, 4096, 8191],
               [4096 * 3, 1], [2, -1, 3], [10**9, 5], list(range(300)) * 2, [], ["7", 8.0]]
    for _ in range(200):
        size = rng.randrange(1, 40)
        batches.append([rng.choice([rng.randrange(300), rng.randrange(20_000),
                                    rng.randrange(10**7), -rng.randrange(3)])
                        for _ in range(size)])
    for seed in range(60):
        pick = random.Random(seed)
        updated, added = ReplicateSet(), ReplicateSet()
        for batch in pick.sample(batches, 4):
            updated.update(batch)
            for number in batch:
                added.add(int(number))
            assert len(updated) == len(added)
            assert list(updated) == list(added)
            codes, reference = updated._codes, added._codes  # type: ignore[attr-defined]
            assert bytes(codes.array) == bytes(reference.array)
            assert codes.sparse == reference.sparse


#: Records, at the end of the controller's session, what its kept reports carry.
INSPECT = """
import json

def pytest_terminal_summary(terminalreporter, config):
    if hasattr(config, "workerinput"):
        return
    by_item = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) in ("setup", "call", "teardown"):
                by_item.setdefault(report.nodeid, {})[report.when] = report
    seen = []
    for nodeid, reports in sorted(by_item.items()):
        call, teardown = reports.get("call"), reports.get("teardown")
        seen.append({
            "nodeid": nodeid,
            # Emptied once the controller took what it carried (a rollout's declaration,
            # sent once a process, stays on that one report).
            "attribute": any(vars(r).get("prove", None) == {} for r in reports.values()),
            "shared": call is not None and teardown is not None
                      and call.user_properties is teardown.user_properties,
            "alike": all(vars(r).get(name) is vars(reports["setup"]).get(name)
                         for r in (call, teardown) for name in ("location", "keywords", "_id")),
            "properties": [list(p) for p in teardown.user_properties],
        })
    with open("kept.json", "w") as fh:
        json.dump(seen, fh)
"""


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_the_controller_keeps_one_list_of_properties_an_item(bot: pytest.Pytester,
                                                             workers: list[str]) -> None:
    """Every rollout item's call and teardown reports share one list of properties, equal to
    what --junitxml wrote, and the setup report's location, keywords and id; no report keeps
    an emptied ``prove`` attribute (together about 1.5 KB an item on the controller)."""
    bot.makeconftest(INSPECT)
    result = bot.runpytest("--junitxml=j.xml", "-p", "no:randomly", *workers)
    assert result.ret == 0, result.stdout.str()
    kept = json.loads((bot.path / "kept.json").read_text())
    assert len(kept) == 80
    assert not any(k["attribute"] for k in kept)
    assert all(k["shared"] and k["alike"] for k in kept)
    import xml.etree.ElementTree as ET

    written = {f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}":
               [[p.get("name"), p.get("value")] for p in case.iter("property")]
               for case in ET.parse(bot.path / "j.xml").getroot().iter("testcase")}
    for k in kept:
        assert [[name, str(value)] for name, value in k["properties"]] == written[k["nodeid"]]
        assert [name for name, _ in k["properties"]] == [
            "prove_replicate", "prove_seed", "prove_outcome"]


def test_replicates_that_come_from_far_ahead_are_held_once_the_array_reaches_them() -> None:
    # Under -n 2 one worker starts at replicate 0 and the other far ahead, so the controller
    # first sees numbers past the array's reach (kept aside), then the array grows over them.
    # They used to be lost then: a 100,000-episode sweep that stored every episode was
    # closed 'incomplete' with 7,618 missing.
    endings = Endings()
    replicates = ReplicateSet()
    order = [n for pair in zip(range(20_000), range(20_000, 40_000), strict=True) for n in pair]
    for n in order:
        endings.put("a", "k", n, "with_outcome")
        replicates.add(n)
    assert endings.held("a", "k", 40_000) == 40_000 == len(endings)
    assert endings.held("a", "k", range(29_990, 30_010)) == 20
    assert endings.get("a", "k", 30_000) == "with_outcome"
    assert len(replicates) == 40_000 and 30_000 in replicates
    assert replicates.missing_below(40_001) == [40_000]
    assert list(replicates) == list(range(40_000))
    # Stored again, an episode replaces the one before it rather than adding to the count.
    endings.put("a", "k", 30_001, "errored")
    assert len(endings) == 40_000 and endings.count("errored") == 1
    # At once, over numbers kept aside before.
    at_once = ReplicateSet([9_000])
    at_once.update(range(9_000))
    assert len(at_once) == 9_001 and at_once.missing_below(9_001) == []


@pytest.mark.parametrize("seed", range(6))
def test_endings_from_workers_at_any_pace_count_as_a_dict_does(seed: int) -> None:
    # Several workers, each walking its own stretch of replicates at its own pace, some
    # numbers stored twice: every count and lookup as a dict of identities gives them.
    rng = random.Random(seed)
    starts = sorted(rng.sample(range(0, 30_000, 500), 4))
    streams = [iter(range(a, a + rng.randrange(200, 9_000))) for a in starts]
    endings, replicates = Endings(), ReplicateSet()
    reference: dict[int, str] = {}
    while streams:
        stream = rng.choice(streams)
        for _ in range(rng.randrange(1, 400)):
            n = next(stream, None)
            if n is None:
                streams.remove(stream)
                break
            end = rng.choice(ENDINGS)
            endings.put("a", "k", n, end)
            replicates.add(n)
            reference[n] = end
    top = max(reference) + 1
    assert endings.held("a", "k", top) == len(reference) == len(endings) == len(replicates)
    ends = list(reference.values())
    assert {e: endings.count(e) for e in ENDINGS} == {e: ends.count(e) for e in ENDINGS}
    assert all(endings.get("a", "k", n) == end for n, end in reference.items())
    assert list(replicates) == sorted(reference)
    assert replicates.missing_below(top) == sorted(set(range(top)) - set(reference))


# No deadline: a wall-clock bound, which a loaded machine broke (433 ms at load 47).
@settings(deadline=None)
@given(st.lists(st.integers(-5, 60), max_size=80))
def test_spans_give_back_the_numbers_in_their_order(numbers: list[int]) -> None:
    pairs = spans(numbers)
    assert [n for run in unspan(pairs) for n in run] == numbers
    assert all(start < stop for start, stop in pairs)
    # Adjacent runs do not continue each other (else they would be one pair).
    assert all(a[1] != b[0] for a, b in itertools.pairwise(pairs))


def test_a_long_run_of_numbers_is_one_span() -> None:
    # Once, not in every example above: it took most of each example's time.
    assert spans(range(100_000)) == [[0, 100_000]]
