"""The store's fast reader (msgspec, pytest_prove/store/episodes.py) reads exactly what
json.loads and check_record read, line for line: the same records, value for value and
type for type (an int stays an int, however large; a float a float), the same refusals with
the same messages, and records that behave as the dicts they stand for."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_prove.declare.seeds import derive_seed
from pytest_prove.record import RUN_FIX, StoreError, check_record, check_seed, nested_tokens
from pytest_prove.store import Store, StoreWarning
from pytest_prove.store.episodes import StoredEpisode, plain
from pytest_prove.store.writer import dump_line, lean_record

SALT = "5a1t"


def reference(path: Path, salt: str) -> list[dict[str, Any]]:
    """What the store read before msgspec: each whole line by json.loads, blank lines
    skipped, one model's usage written flat (format 2) read as ``by_model``, checked, the
    last line of an episode winning."""
    text = path.read_bytes().decode("utf-8")
    lines = text[:text.rfind("\n") + 1].split("\n")[:-1]
    by_key: dict[tuple[str, str, int], dict[str, Any]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise StoreError(f"{where}: corrupt line ({exc}); the file was edited or "
                             f"damaged: {RUN_FIX}") from None
        if type(value) is dict and type(value.get("tokens")) is dict:
            value["tokens"] = nested_tokens(value["tokens"], where, RUN_FIX)  # format 2
        record = check_record(value, where)
        check_seed(record, salt, where)
        key = (record["rollout"], record["condition_key"], record["replicate"])
        by_key.pop(key, None)
        by_key[key] = value
    return list(by_key.values())


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 == 1.0 == True for ==)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return (list(a) == list(b) or sorted(a) == sorted(b)) and all(
            same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@pytest.fixture(scope="module", autouse=True, params=["no plan", "planned"])
def planned(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Every test twice: runs whose manifest names no plan, and runs whose plan and
    declarations name the rollouts, condition keys and outcomes of their lines (then the
    reader decodes those as the strings they are)."""
    global PLANNED  # read by write_run, for every test of the module
    PLANNED = request.param == "planned"
    yield PLANNED
    PLANNED = False


PLANNED = False


def plan_of(text: str, keep: Callable[[str], bool] = lambda key: True
            ) -> dict[str, Any]:
    """The plan and declarations a manifest gives for the lines of ``text``: their
    rollouts, the condition keys ``keep`` keeps and the outcomes (lines json.loads cannot
    read, and empty strings, left out)."""
    plan: dict[str, Any] = {}
    outcomes: dict[str, set[str]] = {}
    for line in text.split("\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        rollout = record.get("rollout") if type(record) is dict else None
        key = record.get("condition_key") if type(record) is dict else None
        if type(rollout) is not str or not rollout or type(key) is not str or not key:
            continue
        conditions = plan.setdefault(rollout, {"replicates": 400, "conditions": []})
        if keep(key) and key not in conditions["conditions"]:
            conditions["conditions"].append(key)
        outcome = record.get("outcome")
        found = outcomes.setdefault(rollout, set())
        if type(outcome) is str and outcome:
            found.add(outcome)
    return {"plan": plan, "rollouts": {
        name: {"label": name, "declaration": {"outcomes": sorted(outcomes[name]) or ["ok"]}}
        for name in plan}}


def write_run(root: Path, text: str, salt: str = SALT,
              keep: Callable[[str], bool] | None = None, planned: bool | None = None) -> Path:
    """The run ``r1`` of these lines; its manifest names their plan if the module's
    ``planned`` fixture (or ``planned``, given) or ``keep`` says so."""
    run = root / "runs" / "r1"
    run.mkdir(parents=True, exist_ok=True)
    manifest = {"format": 1, "run_id": "r1", "name": "r1", "salt": salt, "status": "complete"}
    if (PLANNED if planned is None else planned) or keep is not None:
        manifest.update(plan_of(text.encode("utf-8", "surrogatepass").decode(
            "utf-8", "replace"), keep or (lambda key: True)))
    (run / "manifest.json").write_text(json.dumps(manifest))
    (run / "episodes.jsonl").write_bytes(text.encode("utf-8", "surrogatepass"))
    return run


def read(root: Path) -> tuple[list[Mapping[str, Any]] | None, str | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWarning)
        try:
            return list(Store(root).read(root / "runs" / "r1").episodes), None
        except StoreError as exc:
            return None, str(exc)


def expected(root: Path) -> tuple[list[dict[str, Any]] | None, str | None]:
    try:
        return reference(root / "runs" / "r1" / "episodes.jsonl", SALT), None
    except StoreError as exc:
        return None, str(exc)


# ---- generated episodes

_text = st.text(st.characters(exclude_characters="\x1f", exclude_categories=("Cs",)),
                max_size=6)
_ints = st.integers(min_value=0, max_value=2**80)
_numbers = st.one_of(st.none(), _ints, st.floats(min_value=0, max_value=1e300,
                                                 allow_nan=False, allow_infinity=False))
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**90, max_value=2**90),
              st.floats(allow_nan=False, allow_infinity=False), _text),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(_text, inner, max_size=3)), max_leaves=6)


@st.composite
def episodes(draw: st.DrawFn) -> dict[str, Any]:
    """An episode as a runner, a plugin or a person might have written it."""
    rollout = draw(st.sampled_from(["test_a.py::t", "t\u00e9st_\u2603.py::b"]))
    condition = draw(st.dictionaries(_text, st.one_of(
        st.none(), st.booleans(), st.integers(-2**70, 2**70), _text,
        st.floats(allow_nan=False, allow_infinity=False)), max_size=2))
    key = json.dumps(condition, sort_keys=True, ensure_ascii=False)
    replicate = draw(st.integers(0, 3))
    record: dict[str, Any] = {"rollout": rollout, "condition": condition,
                              "condition_key": key, "replicate": replicate,
                              "seed": derive_seed(SALT, rollout, key, replicate)}
    # In the order the runner writes the fields: such a line is written back byte for byte.
    errored = draw(st.booleans())
    record["outcome"] = None if errored else draw(st.sampled_from(
        ["resolved", "\u00e9chec", "x" * 40]))
    t, horizon = draw(_numbers), draw(_numbers)
    if t is not None and horizon is not None and t > horizon:
        t, horizon = horizon, t
    record.update(t=t, horizon=horizon)
    record["meta"] = draw(st.one_of(st.none(), st.dictionaries(_text, _json, max_size=2),
                                    st.builds(lambda c: {"case_id": c},
                                              st.one_of(_text, _ints))))
    record["error"] = None if not errored else {
        "kind": draw(st.sampled_from(["exception", "no_outcome"])), "message": draw(_text)}
    record["duration"] = draw(_numbers)
    if draw(st.booleans()):
        tin, tout = draw(_ints), draw(_ints)
        tokens: dict[str, Any] = {"input": tin, "output": tout}
        models = draw(st.dictionaries(_text, st.builds(
            lambda i, o, c: {"input": i, "output": o, "calls": c}, _ints, _ints,
            st.integers(0, 5)), max_size=2))
        if draw(st.booleans()):  # one model, whose totals are its own (as the runner has it)
            models = {draw(_text): {"input": tin, "output": tout, "calls": draw(_ints)}}
        if models:
            tokens["by_model"] = models
        record["tokens"] = tokens
    else:
        record["tokens"] = None
    record["steps"] = draw(st.lists(st.builds(
        lambda n, d: {"name": n, "duration": d}, _text, _numbers), max_size=3))
    record["finished"] = "2026-12-02T10:00:00.000000Z"
    if draw(st.booleans()):
        record["item"] = f"test_a.py::t[{replicate}]"
    if draw(st.booleans()):
        record["note"] = draw(_json)  # a field this version does not know
    return record


# The records are drawn once and read in both kinds of run (their drawing costs as much as
# their checks): the test takes ``planned`` itself instead of the module's fixture running it
# once per kind, each drawing its own 60.
@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
@pytest.mark.parametrize("planned", ["both"])
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=st.lists(episodes(), min_size=1, max_size=8), ascii_only=st.booleans(),
       lean=st.booleans())
def test_the_same_records_as_json_loads(tmp_path_factory: pytest.TempPathFactory,
                                        planned: str, records: list[dict[str, Any]],
                                        ascii_only: bool, lean: bool) -> None:
    written = [lean_record(r) for r in records] if lean else records  # format 2, or 1
    lines = [json.dumps(r, ensure_ascii=ascii_only, separators=(",", ":"))
             if ascii_only else dump_line(r) for r in written]
    for plan in (False, True):
        root = tmp_path_factory.mktemp("fast")
        write_run(root, "".join(line + "\n" for line in lines), planned=plan)
        got, error = read(root)
        want, want_error = expected(root)
        assert error == want_error
        assert got is not None and want is not None
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert same(a, b), (plain(a), b)
            assert a == b and b == a
            # What the store writes of a record read back is what it wrote of the line.
            assert json.loads(dump_line(a)) == b
        # Episodes as the runner writes them come back byte for byte.
        assert [dump_line(a) for a in got] == [dump_line(b) for b in want]


def _line(**changes: Any) -> str:
    condition = {"ticket": "refund"}
    key = json.dumps(condition)
    record: dict[str, Any] = {
        "rollout": "t", "condition": condition, "condition_key": key, "replicate": 2,
        "seed": derive_seed(SALT, "t", key, 2), "outcome": "resolved", "t": 3,
        "horizon": 5, "meta": {"case_id": "refund"}, "error": None, "duration": 0.5,
        "tokens": {"input": 7, "output": 3,
                   "by_model": {"m": {"input": 7, "output": 3, "calls": 1}}},
        "steps": [], "finished": "2026-12-02T10:00:00.000000Z"}
    record.update(changes)
    return json.dumps({k: v for k, v in record.items() if v != "DROP"})


#: Lines the fast decoder must refuse and hand on, each read the old way: accepted as
#: json.loads reads it, or refused with the old message.
LINES = {
    "big integers": _line(tokens={"input": 2**70, "output": 0}, meta={"n": -2**70}),
    "integer past uint64 in t": _line(t=2**64, horizon=2**65),
    "NaN": _line(duration=float("nan")),
    "infinity written as 1E400": _line().replace('"duration": 0.5', '"duration": 1E400'),
    "lone surrogate escape": _line(outcome="\ud800"),
    "negative replicate": _line(replicate=-1),
    "seed off by one": _line(seed=derive_seed(SALT, "t", '{"ticket": "refund"}', 2) + 1),
    "seed past 2**64": _line(seed=2**64),
    "t after horizon": _line(t=6),
    "empty outcome": _line(outcome=""),
    "no outcome, no error": _line(outcome=None),
    "outcome missing": _line(outcome="DROP"),
    "case id a float": _line(meta={"case_id": 1.5}),
    "negative tokens": _line(tokens={"input": -1, "output": 0}),
    "model's calls negative": _line(tokens={"input": 1, "output": 0,
                                            "by_model": {"m": {"calls": -1}}}),
    "by_model null": _line(tokens={"input": 1, "output": 0, "by_model": None}),
    "condition value a list": _line(condition={"ticket": ["refund"]}),
    "steps not a list": _line(steps={"name": "x"}),
    "a step not an object": _line(steps=[{"name": "x"}, 1]),
    "a step with a big integer": _line(steps=[{"name": "x", "n": 2**70}]),
    "a step with 1E400": _line(steps=[{"name": "x", "d": 0.5}]).replace(
        '"d": 0.5', '"d": 1E400'),
    "a step not UTF-8 escaped": _line(steps=[{"name": "caf\u00e9"}]),
    "unknown field": _line(worker="gw1"),
    "unknown field in tokens": _line(tokens={"input": 1, "output": 0, "cached": 4}),
    "one model flat": _line(tokens={"input": 7, "output": 3, "model": "m", "calls": 1}),
    "one model flat, no calls": _line(tokens={"input": 7, "output": 3, "model": "m"}),
    "one model flat, big totals": _line(tokens={"input": 2**70, "output": 3, "model": "m"}),
    "flat model empty": _line(tokens={"input": 7, "output": 3, "model": ""}),
    "flat model a number": _line(tokens={"input": 7, "output": 3, "model": 5}),
    "flat model and by_model": _line(tokens={"input": 7, "output": 3, "model": "m",
                                             "by_model": {"m": {"calls": 1}}}),
    "flat calls negative": _line(tokens={"input": 7, "output": 3, "model": "m",
                                         "calls": -1}),
    "flat calls a float": _line(tokens={"input": 7, "output": 3, "model": "m",
                                        "calls": 1.0}),
    "calls without a model": _line(tokens={"input": 7, "output": 3, "calls": 1}),
    "flat tokens with another field": _line(tokens={"input": 7, "output": 3, "model": "m",
                                                    "cached": 1}),
    "error and outcome": _line(error={"kind": "exception"}),
    "boolean replicate": _line(replicate=True),
    "not an object": "[1, 2]",
    "not JSON": '{"rollout": ',
    "byte order mark": "\ufeff" + _line(),
    "CRLF": _line() + "\r",
    "spaces around": "  " + _line() + "  ",
    "blank": "   ",
}


@pytest.mark.parametrize("line", LINES.values(), ids=LINES.keys())
def test_a_line_is_read_as_json_loads_reads_it(tmp_path: Path, line: str) -> None:
    write_run(tmp_path, _line(replicate=1, seed=derive_seed(
        SALT, "t", '{"ticket": "refund"}', 1)) + "\n" + line + "\n")
    got, error = read(tmp_path)
    want, want_error = expected(tmp_path)
    assert error == want_error
    if want is not None:
        assert got is not None and len(got) == len(want)
        assert all(same(a, b) for a, b in zip(got, want, strict=True))


def test_a_line_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    run = write_run(tmp_path, _line() + "\n")
    (run / "episodes.jsonl").write_bytes(b'{"rollout": "\xff"}\n' + _line().encode() + b"\n")
    got, error = read(tmp_path)
    assert got is None and error is not None
    assert error.startswith(f"{run / 'episodes.jsonl'}:1: corrupt line (")


def test_lines_longer_than_a_chunk_and_a_truncated_tail(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines cut across the reader's chunks are read whole, and the line a killed session
    left half written is skipped with a note naming it."""
    import pytest_prove.store.reading as store_reading

    monkeypatch.setattr(store_reading, "_CHUNK", 7)
    key = '{"ticket": "refund"}'
    lines = [_line(replicate=r, seed=derive_seed(SALT, "t", key, r)) for r in range(5)]
    run = write_run(tmp_path, "\n".join(lines) + "\n" + lines[0][:30])
    with pytest.warns(StoreWarning, match=r"episodes\.jsonl: line 6 is truncated"):
        episodes = Store(tmp_path).read(run).episodes
    assert [e["replicate"] for e in episodes] == [0, 1, 2, 3, 4]


def test_a_record_reads_as_the_dict_it_was_read_from(tmp_path: Path) -> None:
    line = _line(item="test_a.py::t[2]")
    write_run(tmp_path, line + "\n")
    got, _ = read(tmp_path)
    assert got is not None
    (record,) = got
    want = json.loads(line)
    assert isinstance(record, StoredEpisode) and isinstance(record, Mapping)
    assert list(record) == list(want) and len(record) == len(want)
    assert dict(record) == want and record == want and want == record
    assert (record != want) is False and (want != record) is False
    assert {**record} == want and dict(record.items()) == want
    assert record["tokens"]["by_model"]["m"]["calls"] == 1
    assert [name for name, _ in record["tokens"]["by_model"].items()] == ["m"]
    assert "spans" not in record and record.get("spans") is None
    assert record.get("spans", []) == []
    with pytest.raises(KeyError):
        record["spans"]
    assert "item" in record and record["error"] is None
    assert dump_line(record) == dump_line(want)
    assert repr(record) == repr(want)


def test_a_wrong_line_among_many_is_named(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines are decoded together, then one at a time when one of them fails: the error
    names the wrong line, in whichever chunk it falls, and lines read the slow way (an
    episode with an error) keep their place among the others."""
    import pytest_prove.store.reading as store_reading

    monkeypatch.setattr(store_reading, "_CHUNK", 1000)
    key = '{"ticket": "refund"}'
    lines = [_line(replicate=r, seed=derive_seed(SALT, "t", key, r)) for r in range(60)]
    lines[7] = _line(replicate=7, seed=derive_seed(SALT, "t", key, 7), outcome=None,
                     error={"kind": "exception", "type": "E", "message": "m"})
    run = write_run(tmp_path, "".join(line + "\n" for line in lines))
    got, error = read(tmp_path)
    assert error is None and got is not None
    assert [e["replicate"] for e in got] == list(range(60))
    assert got[7]["error"] == {"kind": "exception", "type": "E", "message": "m"}
    for number in (1, 2, 37, 60):
        bad = list(lines)
        bad[number - 1] = bad[number - 1].replace('"seed": ', '"seed": 1')
        write_run(tmp_path, "".join(line + "\n" for line in bad))
        got, error = read(tmp_path)
        assert got is None and error is not None
        assert error.startswith(f"{run / 'episodes.jsonl'}:{number}: "), error


def test_steps_are_read_when_asked_as_json_loads_reads_them(tmp_path: Path) -> None:
    """Steps stay raw JSON until read; read, they are what json.loads gives, kept."""
    steps = [{"name": "lookup", "duration": 1e-06, "depth": 1},
             {"name": "reply", "duration": 0.0, "error": "ValueError", "n": 2**70}]
    line = _line(steps=steps)
    write_run(tmp_path, line + "\n")
    got, _ = read(tmp_path)
    assert got is not None
    (record,) = got
    want = json.loads(line)
    assert "steps" in record and list(record) == list(want)
    assert same(record["steps"], want["steps"])
    assert record["steps"] is record["steps"]  # decoded once
    assert same(plain(record), want)
    assert dump_line(record) == dump_line(want)


def _records(*replicates: int) -> list[str]:
    key = '{"ticket": "refund"}'
    return [_line(replicate=r, seed=derive_seed(SALT, "t", key, r)) for r in replicates]


#: Files whose values, decoded together, would be as many as their lines, though a line
#: holds two values and two lines hold one between them: read line by line, each is
#: refused on the line that is wrong.
SHIFTED = {
    "two on a line": lambda a, b, c, d: [a + " " + b, c, d],
    "two on a line, one over two lines": (
        lambda a, b, c, d: [a + " " + b, c[:40], c[40:], d]),
    "one over two lines, two on a line": (
        lambda a, b, c, d: [a[:40], a[40:], b, c + "\t" + d]),
    "split after a brace": (
        lambda a, b, c, d: [a.replace('"meta": {', '"meta": {\n'), b + " " + c, d]),
    "blank line, two on a line": (lambda a, b, c, d: [a, "", b, c + d]),
}


@pytest.mark.parametrize("shift", SHIFTED.values(), ids=SHIFTED.keys())
def test_values_are_never_matched_to_the_wrong_lines(tmp_path: Path, shift: Any) -> None:
    lines: list[str] = shift(*_records(0, 1, 2, 3))
    write_run(tmp_path, "".join(line + "\n" for line in lines))
    got, error = read(tmp_path)
    _, want_error = expected(tmp_path)
    assert error == want_error and got is None and error is not None


def test_many_lines_decoded_together_are_the_lines_read_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Across the reader's chunks and the groups it decodes in one call, with lines read
    the slow way among them (an episode with an error, a field unknown here, a resumed
    episode), every record is the one json.loads reads from its line."""
    import pytest_prove.store.reading as store_reading

    monkeypatch.setattr(store_reading, "_CHUNK", 4000)
    key = '{"ticket": "refund"}'
    lines = _records(*range(300))
    lines[5] = _line(replicate=5, seed=derive_seed(SALT, "t", key, 5), outcome=None,
                     error={"kind": "exception", "type": "E", "message": "m"})
    lines[70] = _line(replicate=70, seed=derive_seed(SALT, "t", key, 70), worker="gw1")
    lines[130] = lines[128]  # resumed: the last line of an episode wins
    lines[200] = lines[200].replace('"ticket": "refund"', '"ticket":  "refund"', 1)
    write_run(tmp_path, "".join(line + "\n" for line in lines))
    got, error = read(tmp_path)
    want, want_error = expected(tmp_path)
    assert error is None and want_error is None and got is not None and want is not None
    assert len(got) == len(want) == 299
    assert all(same(a, b) for a, b in zip(got, want, strict=True))


def _ends_line_by_line(data: bytes, start: int, end: int) -> list[int] | None:
    """Where each line of ``data[start:end]`` ends when each is ``{`` to ``}``, found one
    line at a time (the rule the reader's numpy search keeps)."""
    ends = []
    while start < end:
        newline = data.index(b"\n", start, end)
        if data[start:start + 1] != b"{" or data[newline - 1:newline] != b"}":
            return None
        ends.append(newline)
        start = newline + 1
    return ends


# No run is written: once, not once per kind of run (the test takes ``planned`` itself).
@pytest.mark.parametrize("planned", ["no run"])
@given(lines=st.lists(st.text("{}x \r", max_size=6), max_size=8),
       before=st.text("{}x\n", max_size=4), after=st.text("{}x\n", max_size=4))
@settings(max_examples=400, deadline=None)
def test_line_ends_are_found_as_one_line_at_a_time_finds_them(
        planned: str, lines: list[str], before: str, after: str) -> None:
    """The reader finds the lines of a buffer, and whether each is one object, as a loop
    over its lines would: inside a larger buffer, whatever comes before and after."""
    from pytest_prove.store.decoding import _ends

    body = "".join(line + "\n" for line in lines).encode()
    data = bytearray(before.encode() + body + after.encode())
    start = len(before.encode())
    assert _ends(data, start, start + len(body)) == _ends_line_by_line(
        bytes(data), start, start + len(body))


# The run's plan is the one ``keep`` gives it, whatever the module's ``planned``: once, not
# once per kind of run (the test takes ``planned`` itself).
@pytest.mark.parametrize("planned", ["kept"])
@pytest.mark.parametrize("first", [0, 1, 150, 299])
def test_a_run_past_its_plan_is_read_as_a_run_without_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: int, planned: str) -> None:
    """A run whose lines go past what its manifest names (another condition from line
    ``first + 1``, an outcome not declared) is read from there as a run without a plan,
    every record the one json.loads reads, across chunks and groups."""
    import pytest_prove.store.reading as store_reading

    monkeypatch.setattr(store_reading, "_CHUNK", 4000)
    other = {"ticket": "shipping"}
    other_key = json.dumps(other)
    lines = _records(*range(300))
    for r in range(first, 300, 3):
        lines[r] = _line(replicate=r, condition=other, condition_key=other_key,
                         seed=derive_seed(SALT, "t", other_key, r),
                         outcome="escalated" if r % 2 else "resolved")
    text = "".join(line + "\n" for line in lines)
    write_run(tmp_path, text, keep=lambda key: key != other_key)
    manifest = json.loads((tmp_path / "runs" / "r1" / "manifest.json").read_text())
    assert manifest["plan"]["t"]["conditions"] == ['{"ticket": "refund"}']
    got, error = read(tmp_path)
    want, want_error = expected(tmp_path)
    assert error is None and want_error is None and got is not None and want is not None
    assert len(got) == len(want) == 300
    assert all(same(a, b) for a, b in zip(got, want, strict=True))
    assert all(type(r) is not dict for r in got)  # none read the slow way


def test_a_planned_run_is_decoded_with_its_plan_and_a_thin_plan_is_not(
        tmp_path: Path) -> None:
    """The reader decodes a run's names as its plan's strings when the plan holds enough
    episodes a condition to pay for it (its records then share those very strings), and
    reads a plan it cannot use (too thin, or not as this version writes it) as no plan."""
    from pytest_prove.store.reading import _known

    text = "".join(line + "\n" for line in _records(*range(40)))
    write_run(tmp_path, text, keep=lambda key: True)
    manifest = json.loads((tmp_path / "runs" / "r1" / "manifest.json").read_text())
    run = Store(tmp_path).read(tmp_path / "runs" / "r1")
    assert {type(r).__name__ for r in run.episodes} == {"_KnownLine"}
    assert len({id(r["condition_key"]) for r in run.episodes}) == 1
    assert _known(manifest) == (["t"], ['{"ticket": "refund"}'], ["resolved"])
    thin = {**manifest, "plan": {"t": {"replicates": 31, "conditions": ['{"a": 1}']}}}
    assert _known(thin) is None
    for broken in ({"t": {"replicates": "400", "conditions": ["k"]}},
                   {"t": {"replicates": 400, "conditions": [""]}},
                   {"t": {"replicates": 400, "conditions": "k"}},
                   {"u": {"replicates": 400, "conditions": ["k"]}}, [], None):
        assert _known({**manifest, "plan": broken}) is None, broken
    assert _known({k: v for k, v in manifest.items() if k != "rollouts"}) is None


@pytest.mark.parametrize("known", [(["t"], ['{"ticket": "refund"}'], []),
                                   (["t"], [], ["resolved"]), ([], [], []),
                                   (["t"], ['{"ticket": "refund"}'], ["\ud800"])],
                         ids=["no outcomes", "no conditions", "nothing", "a lone surrogate"])
def test_names_the_decoder_cannot_take_are_read_as_none(known: Any) -> None:
    """Names a plan gives that no decoder can be made of are read as no plan: every line
    still read."""
    from pytest_prove.store.decoding import LineDecoder

    decoder = LineDecoder(SALT, lambda line, number: None, known=known)
    data = "".join(line + "\n" for line in _records(0, 1, 2)).encode()
    assert decoder.read(data, 0, len(data), 0, text=True) == 3
    assert [r["replicate"] for r in decoder.episodes if r is not None] == [0, 1, 2]


def test_records_decoded_with_a_plan_pickle_and_copy(tmp_path: Path) -> None:
    """A record read with its run's plan pickles and deep-copies as one read without: to a
    record equal to the line json.loads reads."""
    import copy
    import pickle

    text = "".join(line + "\n" for line in _records(*range(40)))
    write_run(tmp_path, text, keep=lambda key: True)
    run = Store(tmp_path).read(tmp_path / "runs" / "r1")
    want, error = expected(tmp_path)
    assert error is None and want is not None
    for again in (lambda r: pickle.loads(pickle.dumps(r)), copy.deepcopy):
        copied = [again(r) for r in run.episodes]
        assert all(same(a, b) for a, b in zip(copied, want, strict=True))
        assert [dump_line(r) for r in copied] == [dump_line(r) for r in want]
