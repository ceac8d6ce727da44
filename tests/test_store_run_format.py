"""Run format 2 (issue 14, item 5): a run's line keeps the usage of an episode that used
one model flat, ``{"input": 9, "output": 4, "model": "m", "calls": 2}``, and every reader
takes it as the ``by_model`` of that model; anything else is written as format 1 wrote it.
A run of format 1 is read as before, and a resumed one goes on in format 1."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_prove.declare.seeds import derive_seed
from pytest_prove.record import StoreError
from pytest_prove.store import RUN_FORMAT, Store
from pytest_prove.store.episodes import StoredTokens, plain
from pytest_prove.store.writer import lean_record

from .conftest import fitted

SALT = "s4lt"


def _record(replicate: int, tokens: dict[str, Any] | None, **more: Any) -> dict[str, Any]:
    key = '{"ticket":"refund"}'
    return {"rollout": "t", "condition": {"ticket": "refund"}, "condition_key": key,
            "replicate": replicate, "seed": derive_seed(SALT, "t", key, replicate),
            "outcome": "resolved", "t": 2, "horizon": 5, "meta": None, "error": None,
            "duration": 0.25, "tokens": tokens, **more}


ONE = {"input": 90, "output": 12, "by_model": {"sim-1": {"input": 90, "output": 12,
                                                          "calls": 3}}}
#: Usage that stays as format 1 wrote it, and why.
KEPT = {
    "two models": {"input": 3, "output": 2, "by_model": {
        "a": {"input": 1, "output": 1, "calls": 1}, "b": {"input": 2, "output": 1, "calls": 1}}},
    "totals not the model's": {"input": 5, "output": 2, "by_model": {
        "a": {"input": 4, "output": 2, "calls": 1}}},
    "a model's input missing": {"input": 5, "output": 2, "by_model": {"a": {"output": 2}}},
    "a field besides the counts": {"input": 5, "output": 2, "by_model": {
        "a": {"input": 5, "output": 2, "calls": 1, "cached": 3}}},
    "a model without a name": {"input": 5, "output": 2, "by_model": {
        "": {"input": 5, "output": 2, "calls": 1}}},
    "no model": {"input": 5, "output": 2},
    "a field besides the totals": {"input": 5, "output": 2, "cached": 1, "by_model": {
        "a": {"input": 5, "output": 2, "calls": 1}}},
}


def _write(tmp_path: Path, records: list[dict[str, Any]]) -> tuple[Store, Path]:
    store = Store(tmp_path)
    writer = store.new_run(name="r", salt=SALT, manifest={"rollouts": {"t": {
        "label": "t", "declaration": {"outcomes": ["resolved"]}}}})
    writer.append(records)
    writer.write_manifest(**fitted({}, records))
    writer.close()
    return store, writer.directory


def _lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "episodes.jsonl").read_text().splitlines()]


def test_a_new_run_writes_one_models_usage_flat_and_reads_it_as_by_model(
        tmp_path: Path) -> None:
    records = [_record(0, ONE), _record(1, {**ONE, "by_model": {"sim-1": {
        "input": 90, "output": 12}}}), _record(2, None),
        *(_record(3 + i, tokens) for i, tokens in enumerate(KEPT.values()))]
    store, run = _write(tmp_path, records)
    assert json.loads((run / "manifest.json").read_text())["format"] == RUN_FORMAT == 2
    lines = _lines(run)
    assert lines[0]["tokens"] == {"input": 90, "output": 12, "model": "sim-1", "calls": 3}
    assert lines[1]["tokens"] == {"input": 90, "output": 12, "model": "sim-1"}
    assert lines[2]["tokens"] is None
    assert [line["tokens"] for line in lines[3:]] == list(KEPT.values())
    read = store.read(run).episodes
    assert [plain(r) for r in read] == records
    tokens = read[0]["tokens"]
    assert type(tokens) is StoredTokens and list(tokens) == ["input", "output", "by_model"]
    assert "model" not in tokens and "calls" not in tokens and tokens.get("model") is None
    assert tokens["by_model"]["sim-1"]["calls"] == 3 and len(tokens) == 3
    assert dict(tokens["by_model"]["sim-1"]) == {"input": 90, "output": 12, "calls": 3}
    with pytest.raises(KeyError):
        tokens["model"]
    assert pickle.loads(pickle.dumps(read[0])) == records[0]


def test_records_read_from_a_run_of_format_1_are_written_flat(tmp_path: Path) -> None:
    """A merge writes the episodes it read (from shards of either format)."""
    old = tmp_path / "old" / "runs" / "o"
    old.mkdir(parents=True)
    (old / "manifest.json").write_text(json.dumps(
        {"format": 1, "run_id": "o", "name": "o", "salt": SALT, "status": "complete"}))
    records = [_record(0, ONE), _record(1, KEPT["two models"])]
    (old / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    read = Store(tmp_path / "old").read(old).episodes
    assert [plain(r) for r in read] == records
    store, run = _write(tmp_path / "new", list(read))
    assert [line["tokens"] for line in _lines(run)] == [
        {"input": 90, "output": 12, "model": "sim-1", "calls": 3}, KEPT["two models"]]
    assert [plain(r) for r in store.read(run).episodes] == records


def test_a_resumed_run_of_format_1_goes_on_in_format_1(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "o"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(
        {"format": 1, "run_id": "o", "name": "o", "salt": SALT, "status": "incomplete"}))
    (run / "episodes.jsonl").write_text(json.dumps(_record(0, ONE)) + "\n")
    store = Store(tmp_path)
    writer = store.reopen(store.read(run))
    writer.append([_record(1, ONE)])
    writer.write_manifest(status="complete")
    writer.close()
    assert json.loads((run / "manifest.json").read_text())["format"] == 1
    assert [line["tokens"] for line in _lines(run)] == [ONE, ONE]
    assert [plain(r) for r in store.read(run).episodes] == [_record(0, ONE), _record(1, ONE)]


@pytest.mark.parametrize(("tokens", "message"), [
    ({"input": 7, "output": 3, "model": ""},
     'tokens.model is "" (a string), expected the name of the one model used'),
    ({"input": 7, "output": 3, "model": ["m"]}, 'tokens.model is ["m"] (an array)'),
    ({"input": 7, "output": 3, "model": "m", "by_model": {"m": {}}},
     "tokens.by_model is {\"m\": {}} (an object), expected no by_model beside tokens.model"),
    # Named as the line has it (it holds no by_model).
    ({"input": 7, "output": 3, "model": "m", "calls": -1},
     "tokens.calls is -1 (an integer), expected an integer >= 0 (the model's calls)"),
    ({"input": 7, "output": 3, "model": "m", "calls": True},
     "tokens.calls is true, expected an integer >= 0"),
    ({"input": 7, "output": 3, "model": "m", "calls": None},
     "tokens.calls is null, expected an integer >= 0"),
    ({"input": -7, "output": 3, "model": "m"},
     "tokens.input is -7 (an integer), expected an integer >= 0"),
])
def test_flat_usage_that_is_wrong_is_named(tmp_path: Path, tokens: dict[str, Any],
                                           message: str) -> None:
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(
        {"format": 2, "run_id": "r", "name": "r", "salt": SALT, "status": "complete"}))
    good = json.dumps(lean_record(_record(0, ONE)))
    (run / "episodes.jsonl").write_text(f"{good}\n{json.dumps(_record(1, tokens))}\n")
    with pytest.raises(StoreError) as caught:
        Store(tmp_path).read(run)
    text = str(caught.value)
    assert text.startswith(f"{run / 'episodes.jsonl'}:2: "), text
    assert message in text, text
    assert "the file was edited or damaged" in text


def test_a_run_of_a_newer_format_is_refused_with_the_fix(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(
        {"format": RUN_FORMAT + 1, "run_id": "r", "name": "r", "salt": SALT,
         "status": "complete"}))
    (run / "episodes.jsonl").write_text("")
    with pytest.raises(StoreError, match=r"written in format 3 by a newer pytest-prove; "
                                         r"this one reads format 2 and older\. Upgrade"):
        Store(tmp_path).read(run)


_counts = st.integers(0, 2**63)


@st.composite
def usages(draw: st.DrawFn) -> dict[str, Any] | None:
    """Usage as the runner, a plugin or a person might store it."""
    if draw(st.booleans()):
        return None
    tin, tout = draw(_counts), draw(_counts)
    tokens: dict[str, Any] = {"input": tin, "output": tout}
    kind = draw(st.sampled_from(["one", "one, other totals", "many", "none"]))
    names = st.text(min_size=0, max_size=4)
    if kind == "one":
        use = {"input": tin, "output": tout}
        if draw(st.booleans()):
            use["calls"] = draw(_counts)
        tokens["by_model"] = {draw(names): use}
    elif kind != "none":
        models = draw(st.dictionaries(names, st.fixed_dictionaries(
            {"input": _counts, "output": _counts}, optional={"calls": _counts}),
            min_size=1, max_size=3))
        order = ("input", "output", "calls")  # as the runner writes them
        tokens["by_model"] = {m: {k: use[k] for k in order if k in use}
                              for m, use in models.items()}
    return tokens


# Each example writes two runs and a baseline: 40 examples of up to 12 records (6 on average,
# hypothesis's mean list size) check about as many usages as 80 of up to 6 did (3.5 on
# average), with half the writing.
@settings(max_examples=40, deadline=None)
@given(usage=st.lists(usages(), min_size=1, max_size=12))
def test_any_usage_written_in_format_2_reads_back_as_it_was(
        tmp_path_factory: pytest.TempPathFactory, usage: list[dict[str, Any] | None]) -> None:
    # The bytes written are what this checks, not that they reach the disk: the writer's
    # eight fsyncs an example (1.4 s of waiting in all) are skipped.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", lambda fd: None)
        _round_trip(tmp_path_factory, usage)


def _round_trip(tmp_path_factory: pytest.TempPathFactory,
                usage: list[dict[str, Any] | None]) -> None:
    records = [_record(i, tokens) for i, tokens in enumerate(usage)]
    store, run = _write(tmp_path_factory.mktemp("f2"), records)
    read = store.read(run).episodes
    assert [plain(r) for r in read] == records
    # Written again (as a merge does), the lines are the same.
    _, run2 = _write(tmp_path_factory.mktemp("f2"), list(read))
    assert (run2 / "episodes.jsonl").read_bytes() == (run / "episodes.jsonl").read_bytes()
    # And a compact baseline of them reads as the run does.
    base = store.load_baseline(store.write_baseline("b", store.read(run)).stem)
    assert sorted((plain(r) for r in base.episodes), key=lambda r: r["replicate"]) == [
        {**{k: v for k, v in r.items() if k != "duration"},  # a compact baseline keeps none
         "tokens": _compacted(r["tokens"])} for r in records]


def _compacted(tokens: dict[str, Any] | None) -> dict[str, Any] | None:
    """Usage as a compact baseline keeps it: a model's missing counts are 0."""
    if tokens is None or "by_model" not in tokens:
        return tokens
    return {**tokens, "by_model": {m: {"input": u.get("input", 0), "output": u.get("output", 0),
                                       "calls": u.get("calls", 0)}
                                   for m, u in tokens["by_model"].items()}}


@pytest.mark.parametrize("name", ["m", ""])
def test_a_compact_baseline_keeps_one_models_usage_that_is_not_the_totals(
        tmp_path: Path, name: str) -> None:
    """Bug: such usage was saved as IN,OUT,MODEL:IN:OUT:CALLS, which the reader took for
    IN,OUT,MODEL:CALLS and refused, so the baseline could not be loaded."""
    odd = {"input": 5, "output": 2, "by_model": {name: {"input": 4, "output": 1, "calls": 2}}}
    records = [_record(0, odd), _record(1, ONE), _record(2, odd)]
    store, run = _write(tmp_path, records)
    base = store.load_baseline(store.write_baseline("b", store.read(run)).stem)
    assert [plain(r)["tokens"] for r in base.episodes] == [odd, ONE, odd]


def test_episodes_read_back_are_written_again_beside_a_lone_surrogate(tmp_path: Path) -> None:
    """Bug: a merge writes the episodes it read, some read as dicts (a model name with a
    lone surrogate, which only JSON's escapes hold) and some as the store's read-only
    mappings; the batch written with those escapes (no UTF-8) raised TypeError for the
    mappings, a traceback out of ``pytest-prove merge``."""
    odd = {"input": 9, "output": 4, "by_model": {"m\ud800": {"input": 9, "output": 4,
                                                            "calls": 1}}}
    records = [_record(0, KEPT["two models"]), _record(1, odd), _record(2, ONE)]
    store, run = _write(tmp_path / "a", records)
    read = store.read(run).episodes
    assert type(read[0]) is not dict and type(read[1]) is dict  # both ways of reading
    again, run2 = _write(tmp_path / "b", list(read))
    assert [plain(r) for r in again.read(run2).episodes] == records
    assert (run2 / "episodes.jsonl").read_bytes().isascii()


def test_a_baseline_is_saved_from_a_run_whose_model_name_holds_a_lone_surrogate(
        tmp_path: Path) -> None:
    """Bug: prove.usage takes any string for a model's name, and a run stores one with a
    lone surrogate (in JSON's escapes); saving a baseline from that run raised
    UnicodeEncodeError (a traceback at the end of the session), since the baseline's
    block line was written without the escapes, and nothing was saved."""
    odd = {"input": 9, "output": 4, "by_model": {"m\ud800": {"input": 9, "output": 4,
                                                            "calls": 1}}}
    records = [_record(0, odd), _record(1, ONE)]
    store, run = _write(tmp_path, records)
    path = store.write_baseline("b", store.read(run))
    assert path.read_bytes().isascii()
    base = store.load_baseline("b").episodes
    assert [plain(r)["tokens"] for r in base] == [odd, ONE]


RESUMED = """
import os
import pytest_prove as prove

@prove.rollout(replicates=4, failures=["bad"], successes=["good"])
def test_agent(prove_replicate):
    prove.usage("sim-1", input=90, output=12)
    if prove_replicate == 3:
        prove.usage("sim-2", input=1, output=1)
    if prove_replicate % 2 and os.environ.get("FLAKY") == "1":
        raise RuntimeError("upstream down")
    return prove.Episode("good")
"""


@pytest.mark.parametrize("old", [
    pytest.param(True, id="format 1", marks=pytest.mark.slow),  # a second or more of CPU
    pytest.param(False, id="format 2")])
def test_a_run_resumed_under_xdist_goes_on_in_its_own_format(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, old: bool) -> None:
    """A run of format 1 (as an earlier pytest-prove left it) resumed with -n 2 goes on in
    format 1, one of format 2 in format 2; either reads back as the runner made it. The
    run of format 2 (every run's format today) is resumed through one worker (-n 1: the
    worker's writer takes the run's format from the controller as with two; one start
    less); the old format's is resumed by two, each writing in it."""
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_agent=RESUMED)
    monkeypatch.setenv("FLAKY", "1")
    pytester.runpytest("-p", "no:randomly", "--prove-name", "r").assert_outcomes(
        passed=2, failed=2)
    run = next((pytester.path / ".prove" / "runs").glob("*/manifest.json")).parent
    if old:  # as an earlier pytest-prove wrote it
        manifest = json.loads((run / "manifest.json").read_text())
        (run / "manifest.json").write_text(json.dumps({**manifest, "format": 1}))
        lines = [plain(r) for r in Store(pytester.path / ".prove").read(run).episodes]
        (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    monkeypatch.setenv("FLAKY", "0")
    pytester.runpytest("-p", "no:randomly", "-n", "2" if old else "1", "--prove-resume", "r"
                       ).assert_outcomes(passed=2)
    assert json.loads((run / "manifest.json").read_text())["format"] == (1 if old else 2)
    written = [line["tokens"] for line in _lines(run)]
    assert len(written) == 6 and all(t is not None for t in written)
    assert all(("model" in t) is (not old and "sim-2" not in str(t)) for t in written)
    one = {"input": 90, "output": 12, "by_model": {"sim-1": {"input": 90, "output": 12,
                                                              "calls": 1}}}
    two = {"input": 91, "output": 13, "by_model": {
        "sim-1": {"input": 90, "output": 12, "calls": 1},
        "sim-2": {"input": 1, "output": 1, "calls": 1}}}
    read = sorted(Store(pytester.path / ".prove").read(run).episodes,
                  key=lambda r: r["replicate"])
    assert [(r["outcome"], plain(r["tokens"])) for r in read] == [
        ("good", one), ("good", one), ("good", one), ("good", two)]


def test_a_sessions_episodes_are_written_by_msgspec_as_json_and_read_back_alike(
        tmp_path: Path) -> None:
    """A session's new episodes (``fresh``) are encoded by msgspec: each line is the JSON of
    its record (floats may read otherwise, the same numbers), format 2's lean usage
    included, and one msgspec cannot write (a lone surrogate) is written by the json module;
    the run reads back as the same episodes written the json module's way."""
    records = [_record(0, ONE, duration=1e-05, meta={"big": 1e16, "text": "é\u2028<"}),
               _record(1, None, meta={"note": "\ud800"}),
               _record(2, KEPT["two models"])]
    fresh = Store(tmp_path / "fresh")
    writer = fresh.new_run(name="r", salt=SALT, manifest={"rollouts": {"t": {
        "label": "t", "declaration": {"outcomes": ["resolved"]}}}})
    for record in records:  # one a write, as a session stores them
        writer.append([record], fresh=True)
    writer.write_manifest(**fitted({}, records))
    writer.close()
    store, run = _write(tmp_path / "json", records)
    lines = (writer.directory / "episodes.jsonl").read_bytes().splitlines()
    assert b"\\ud800" in lines[1]  # the json module's escape, as before
    assert [json.loads(line) for line in lines] == _lines(run)
    read = [plain(r) for r in fresh.read(writer.directory).episodes]
    assert read == [plain(r) for r in store.read(run).episodes] == records
