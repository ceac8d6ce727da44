"""Compact baselines (format 2): what they keep, their size, old baselines beside them, and
damaged ones refused by file, line and field with the fix."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_prove.cli import main
from pytest_prove.record import steps_of
from pytest_prove.review.steps import endings
from pytest_prove.store import Store, StoreError
from pytest_prove.store.episodes import plain

from .conftest import fitted

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "support_bot" / ".prove"
#: The example's baseline as committed before format 2 (JSON lines, every field kept).
LEGACY = Path(__file__).resolve().parent / "data" / "support_bot_current.jsonl"
FIX = ("restore the file from version control, or save the baseline again with "
       "--prove-save-baseline b")

#: What a compact baseline keeps of each episode.
KEPT = ("rollout", "condition", "condition_key", "replicate", "seed", "outcome", "error", "t",
        "horizon", "tokens")


@pytest.fixture
def example(tmp_path: Path) -> Store:
    """A store with the example's baseline 'current' as it was committed in format 1."""
    (tmp_path / ".prove" / "baselines").mkdir(parents=True)
    shutil.copy(LEGACY, tmp_path / ".prove" / "baselines" / "current.jsonl")
    return Store(tmp_path / ".prove")


def test_the_committed_example_baseline_holds_what_format_1_did(example: Store) -> None:
    """examples/support_bot's baseline, converted to format 2, reads as the old file did."""
    compact = Store(EXAMPLE).load_baseline("current")
    legacy = example.load_baseline("current")
    assert compact.path.name == "current.baseline" and legacy.path.name == "current.jsonl"
    assert compact.manifest == legacy.manifest
    assert [{k: r.get(k) for k in KEPT} for r in compact.episodes] == [
        {k: r.get(k) for k in KEPT} for r in legacy.episodes]
    assert compact.path.stat().st_size / len(compact.episodes) <= 40


def test_seeds_are_derived_when_read_and_are_the_salts(example: Store) -> None:
    """A compact baseline keeps no seeds: loading it derives none (each episode holds its
    condition's shared deriver), and each seed read is the one its salt derives, the same
    as the JSON-lines file holds, also through ``get``, ``dict`` and equality."""
    from pytest_prove.declare.seeds import derive_seed
    from pytest_prove.store.episodes import SeedOf, StoredEpisode

    saved = example.write_baseline("compact", example.load_baseline("current"))
    assert saved.suffix == ".baseline"
    compact = Store(example.root).load_baseline("compact")
    legacy = example.load_baseline("current")
    fast = [r for r in compact.episodes if type(r) is StoredEpisode]
    assert len(fast) > len(compact.episodes) // 2
    assert all(isinstance(r.seed, SeedOf) for r in fast)  # nothing derived while loading
    salt = compact.salt
    for record, old in zip(compact.episodes, legacy.episodes, strict=True):
        want = derive_seed(salt, record["rollout"], record["condition_key"],
                           record["replicate"])
        assert record["seed"] == want == old["seed"] and record.get("seed") == want
        assert dict(record)["seed"] == want
    assert all(type(r.seed) is int for r in fast)  # derived once, then kept
    first = fast[0]
    assert first == {**dict(first)} and dict(first)["seed"] == first["seed"]


def test_episodes_whose_seeds_are_not_yet_derived_pickle_and_copy(example: Store) -> None:
    """An episode of a compact baseline, its seed not yet derived, pickles and deep-copies
    as it did when its seed was derived while loading: to a record equal to it."""
    import copy
    import pickle

    example.write_baseline("compact", example.load_baseline("current"))
    want = [plain(r) for r in Store(example.root).load_baseline("compact").episodes]
    legacy = example.load_baseline("current")
    for again in (lambda r: pickle.loads(pickle.dumps(r)), copy.deepcopy):
        compact = Store(example.root).load_baseline("compact")
        copied = [again(r) for r in compact.episodes]
        assert [plain(r) for r in copied] == want
        assert [r["seed"] for r in copied] == [r["seed"] for r in legacy.episodes]


def _case(record: dict[str, object]) -> object:
    return (record.get("meta") or {}).get("case_id")  # type: ignore[attr-defined]


def test_the_committed_example_baseline_is_read_and_saved_compact(example: Store) -> None:
    old = example.load_baseline("current")
    assert len(old.episodes) == 600
    path = example.write_baseline("b", old)
    assert path.name == "b.baseline"
    assert path.stat().st_size / 600 <= 40  # issue 14: at most 40 bytes an episode
    new = example.load_baseline("b")
    assert new.is_baseline and new.manifest["salt"] == old.manifest["salt"]
    assert len(new.episodes) == len(old.episodes)
    for before, after in zip(old.episodes, new.episodes, strict=True):
        assert {k: before.get(k) for k in KEPT} == {k: after.get(k) for k in KEPT}
        assert _case(before) == _case(after)
        assert steps_of(before) == steps_of(after)
    # where reads the same endings of either
    assert endings(old, "unresolved") == endings(new, "unresolved")
    # a text file, one line a condition or an episode, sorted
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["pytest_prove_baseline"] == 3
    assert len(lines) == 1 + 3 + 600
    assert [line for line in lines if line.startswith("@")] == sorted(
        line for line in lines if line.startswith("@"))


def test_saving_again_replaces_the_json_lines_file(example: Store) -> None:
    run = example.load_baseline("current")
    path = example.write_baseline("current", run)
    assert not (example.baselines_dir / "current.jsonl").exists()
    assert example.baselines() == ["current"]
    assert example.load_baseline("current").path == path
    first = path.read_bytes()
    example.write_baseline("current", example.load_baseline("current"))
    # Only the time it was saved changed: the same run gives the same lines.
    assert first.split(b"\n")[1:] == path.read_bytes().split(b"\n")[1:]


def test_saving_over_a_json_lines_baseline_says_it_replaced_it(example: Store) -> None:
    from pytest_prove.store.baselines import save_baseline
    run = example.load_baseline("current")
    saved = save_baseline(example, "current", run, missing=0)
    assert saved.saved
    said = saved.text
    assert said.startswith("baseline 'current' replaced by run ") and "current.baseline" in said
    assert example.baselines() == ["current"]


def test_a_baseline_in_both_formats_is_refused_with_the_fix(example: Store) -> None:
    (example.baselines_dir / "current.baseline").write_text(
        (example.baselines_dir / "current.jsonl").read_text())
    with pytest.raises(StoreError, match=r"baseline 'current' is in two files, .*"
                       r"current\.baseline and .*current\.jsonl; delete the one"):
        example.load_baseline("current")


def test_every_ending_and_token_shape_survives(example: Store) -> None:
    base = example.load_baseline("current")
    first = dict(base.episodes[0])
    salt = base.manifest["salt"]
    from pytest_prove.declare.seeds import derive_seed
    key = first["condition_key"]
    varied = [
        {**first, "replicate": 1, "outcome": None, "error": {"kind": "exception",
         "type": "RuntimeError", "message": "down\nhard", "traceback": "tb"}, "t": None,
         "horizon": None, "meta": None, "tokens": None, "steps": [],
         "item": "test_a.py::test_b[refund-r001]"},
        {**first, "replicate": 2, "outcome": None, "error": {"kind": "no_outcome"},
         "t": 2.5, "horizon": 7.25, "meta": {"case_id": 17, "other": 1},
         "tokens": {"input": 5, "output": 6}, "item": "test_a.py::test_b[refund-r002]"},
        {**first, "replicate": 3, "tokens": {"input": 10, "output": 20, "by_model": {
            "a": {"input": 4, "output": 5, "calls": 1}, "b b": {"input": 6, "output": 15,
                                                               "calls": 2}}},
         "steps": [{"name": "x"}, {"duration": 1.0}], "item": "test_a.py::test_b[r002-004]"},
        {**first, "replicate": 4, "attempts": 3, "earlier": [
            {"outcome": None, "error": {"kind": "exception", "type": "E"}},
            {"outcome": "unresolved", "error": None}]},
    ]
    for record in varied:
        record["seed"] = derive_seed(salt, record["rollout"], key, record["replicate"])
    run = type(base)(base.run_id, base.name, fitted(base.manifest, (first, *varied)),
                     (first, *varied), base.path)
    back = example.load_baseline(example.write_baseline("b", run).stem).episodes
    assert [r["replicate"] for r in back] == [0, 1, 2, 3, 4]
    one, two, three, four = back[1:]
    assert one["error"] == {"kind": "exception", "type": "RuntimeError",
                            "message": "down\nhard"}  # no traceback
    assert (one["outcome"], one["t"], one["horizon"], one["meta"], one["tokens"]) == (
        None, None, None, None, None)
    assert steps_of(one) == (0, None)
    assert two["error"] == {"kind": "no_outcome"} and (two["t"], two["horizon"]) == (2.5, 7.25)
    assert two["meta"] == {"case_id": 17}
    assert two["tokens"] == {"input": 5, "output": 6}
    assert three["tokens"] == varied[2]["tokens"]
    assert steps_of(three) == (2, None)
    assert four["attempts"] == 3 and [e["error"] for e in four["earlier"]] == [
        {"kind": "exception", "type": "E"}, None]
    assert four["earlier"][1]["outcome"] == "unresolved"
    # the item a replay runs: by pattern for those named after their replicate
    assert [r.get("item") for r in back] == [None, "test_a.py::test_b[refund-r001]",
                                             "test_a.py::test_b[refund-r002]",
                                             "test_a.py::test_b[r002-004]", None]
    lines = example.baseline_path("b").read_text(encoding="utf-8").splitlines()
    assert lines[3].split(" ")[7] == lines[4].split(" ")[7]  # one pattern for both
    assert lines[3].split(" ")[7].endswith("*")


# ---- damage


def _compact(example: Store) -> Path:
    return example.write_baseline("b", example.load_baseline("current"))


def _line(number: int, text: str) -> Callable[[list[str]], None]:
    def change(lines: list[str]) -> None:
        lines[number - 1] = text
    return change


def _field(number: int, index: int, value: str) -> Callable[[list[str]], None]:
    def change(lines: list[str]) -> None:
        fields = lines[number - 1].split(" ")
        fields[index] = value
        lines[number - 1] = " ".join(fields)
    return change


def _salt(lines: list[str]) -> None:
    header = json.loads(lines[0])
    header["manifest"]["salt"] = "0123456789abcdef"
    lines[0] = json.dumps(header)


def _newer(lines: list[str]) -> None:
    header = json.loads(lines[0])
    header["pytest_prove_baseline"] = 4
    lines[0] = json.dumps(header)


def _sign(path: Path) -> None:
    """Give an edited baseline the digest of what it now holds, as saving it would: the
    tests of what its reader makes of a line that is unusual but valid."""
    from pytest_prove.store.integrity import body_digest

    head, _, body = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    header["digest"] = body_digest(header["manifest"], body)
    path.write_bytes(json.dumps(header).encode() + b"\n" + body)


#: Line 2 opens the first condition; lines 3 to 202 are its replicates 0 to 199.
DAMAGE: dict[str, tuple[Callable[[list[str]], None], str]] = {
    "replicate a word": (_field(3, 0, "zero"),
                         r"b\.baseline:3: the replicate \(field 1\) is \"zero\", expected an "
                         r"integer >= 0"),
    "negative replicate": (_field(3, 0, "-1"), r"b\.baseline:3: the replicate \(field 1\)"),
    "outcome past the values": (_field(4, 1, "99"),
                                r"b\.baseline:4: how it ended \(field 2\) is \"99\""),
    "unknown error kind": (_field(4, 1, "!0"), r"b\.baseline:4: how it ended \(field 2\)"),
    "t above horizon": (_field(5, 2, "14"),
                        r"b\.baseline:5: horizon \(field 4\) is \"13\", expected .*t at most"),
    "t not a number": (_field(5, 2, "nan"), r"b\.baseline:5: t \(field 3\) is \"nan\""),
    "negative tokens": (_field(6, 5, "-5,3"), r"b\.baseline:6: tokens \(field 6\)"),
    "steps zero": (_field(6, 6, "0"), r"b\.baseline:6: steps \(field 7\)"),
    "a field missing": (lambda lines: lines.__setitem__(6, lines[6].rsplit(" ", 1)[0]),
                        r"b\.baseline:7: the episode's line .* has 7 field\(s\)"),
    "duplicated replicate": (lambda lines: lines.insert(4, lines[3]),
                             r"b\.baseline:5: replicate 1 .* is also on line 4"),
    "duplicated condition": (lambda lines: lines.insert(202, lines[1]),
                             r"b\.baseline:203: the condition .* also starts on line 2"),
    "episode before any condition": (lambda lines: lines.pop(1),
                                     r"b\.baseline:2: an episode's line comes before any "
                                     r"condition's line"),
    "condition line not JSON": (_line(2, "@[oops"),
                                r"b\.baseline:2: the condition's line is not a JSON array"),
    "changed salt": (_salt, r"b\.baseline:2: seed \d+ is not the seed of replicate 0 .*"
                            r'salt "0123456789abcdef"'),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_compact_baseline_is_refused_by_line(example: Store, damage: str) -> None:
    path = _compact(example)
    lines = path.read_text(encoding="utf-8").splitlines()
    change, message = DAMAGE[damage]
    change(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(StoreError, match=message) as raised:
        example.load_baseline("b")
    assert FIX in str(raised.value)


def test_a_newer_format_asks_for_an_upgrade(example: Store) -> None:
    path = _compact(example)
    lines = path.read_text(encoding="utf-8").splitlines()
    _newer(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(StoreError, match=r"format 4 by a newer pytest-prove; .* Upgrade"):
        example.load_baseline("b")


def test_bytes_that_are_not_utf8_are_named_by_line(example: Store) -> None:
    path = _compact(example)
    data = path.read_bytes().split(b"\n")
    data[9] = b"\xff" + data[9]
    path.write_bytes(b"\n".join(data))
    with pytest.raises(StoreError, match=r"b\.baseline:10: not UTF-8 text"):
        example.load_baseline("b")


def test_crlf_line_ends_are_read(example: Store) -> None:
    path = _compact(example)
    lines = path.read_text(encoding="utf-8").splitlines()
    _field(3, 6, "-")(lines)  # an episode with no steps: its line ends with "-"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _sign(path)
    lf = example.load_baseline("b").episodes
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert example.load_baseline("b").episodes == lf


def test_a_truncated_baseline_is_refused_with_the_note(example: Store) -> None:
    """A baseline is written whole in one step: a cut tail lost an episode, and the gate
    would compare one replicate fewer without a word (issue 29)."""
    path = _compact(example)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(StoreError, match=r"b\.baseline: the baseline does not hold what its "
                       r"header says: .*holds 199 episode\(s\).* \(.*b\.baseline: line 604 "
                       r"is truncated") as raised:
        example.load_baseline("b")
    assert "pytest --prove-save-baseline b" in str(raised.value)


def test_a_damaged_compact_baseline_is_one_line_from_the_command_line(
        example: Store, capsys: pytest.CaptureFixture[str]) -> None:
    path = _compact(example)
    lines = path.read_text(encoding="utf-8").splitlines()
    DAMAGE["t above horizon"][0](lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["--store", str(example.root), "show", "baseline:b"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pytest-prove show: ") and "b.baseline:5: " in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(("written", "spelled"), [("0007", "r0007"), ("\u0667", "r00\u0667")])
def test_a_replicate_written_otherwise_names_its_item_as_written(
        example: Store, written: str, spelled: str) -> None:
    """A hand-edited replicate with a leading zero (or another script's digit) still reads
    as its number, and an item named after it keeps the replicate as the line spells it."""
    base = example.load_baseline("current")
    episodes = tuple({**dict(e), "item": f"test_a.py::t[r{e['replicate']:03d}]"}
                     for e in base.episodes)
    run = type(base)(base.run_id, base.name, base.manifest, episodes, base.path)
    path = example.write_baseline("b", run)
    lines = path.read_text(encoding="utf-8").split("\n")
    number = next(i for i, line in enumerate(lines) if line.startswith("7 "))
    assert lines[number].endswith("*")
    lines[number] = " ".join([written, *lines[number].split(" ")[1:]])
    path.write_text("\n".join(lines), encoding="utf-8")
    _sign(path)
    key = str(json.loads(next(line for line in lines if line.startswith("@"))[1:])[1])
    got = [e for e in example.load_baseline("b").episodes
           if e["replicate"] == 7 and e["condition_key"] == key]
    assert len(got) == 1
    assert got[0]["item"] == f"test_a.py::t[{spelled}]"


# ---- the reader's common lines against _fast, line by line

def _by_fast(path: Path, data: bytes, salt: str) -> list[Any] | str:
    """What the reader gave when every episode's line went through compact_reader._fast: the
    records (made plain, with their types), or the error."""
    from pytest_prove.store import compact_reader

    lines = data.decode("utf-8").split("\n")
    lines.pop()
    found: list[Any] = []
    block = None
    seen: dict[tuple[str, str], dict[int, int]] = {}
    try:
        for number in range(2, len(lines) + 1):
            line, where = lines[number - 1], f"{path}:{number}"
            if line[:1] == "@":
                block = compact_reader._block(line, where, salt, number, FIX)
                continue
            assert block is not None
            try:
                record = compact_reader._fast(line, block)
            except (ValueError, IndexError, TypeError, KeyError):
                if not line.strip():
                    continue
                compact_reader._diagnose(line, block, where, FIX)
            mine = seen.setdefault((block.rollout, block.key), {})
            if record["replicate"] in mine:
                return f"{where}: repeats line {mine[record['replicate']]}"
            mine[record["replicate"]] = number
            found.append(record)
    except StoreError as exc:
        return str(exc)
    return [_typed(r) for r in found]


def _typed(value: Any) -> Any:
    """``value`` made plain, each leaf beside its type (1 == 1.0 == True for ==)."""
    if isinstance(value, Mapping):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


_GOOD = 8  # each field's first values are good; the rest, rarer, are not
_FIELD_VALUES = {
    "end": ["0", "1", "2", "!4", "!4,0", "!4,1,0", "1", "0", "3", "!9", "9", "-", ""],
    "t": ["-", "0", "3", "12", "2.5", "3", "3", "12", "1e400", "nan", "+4", "1_2", "-1",
          "13.5"],
    "horizon": ["-", "13", "12", "13", "13.0", "13", "3", "13", "2.5", "inf", "x"],
    "case": ["-", "0", "5", "6", "0", "0", "5", "5", "9", "x", "3"],
    "tokens": ["-", "10,5", "10,5,5:1", "10,5,5:12", "+10,5,5:1", "1_0,5,5:1", "20,5,5:1",
               "10,5,5:4:5:1,6:6:0:1", "10,5,0:1", "10,5,5:1:2", "10,5,5", "10,5,7:1",
               "10,-5,5:1", "10,5,99:1", "10,5,5:-1", ""],
    "steps": ["-", "3", "3:9", "1:9", "-", "3", "2", "3:9", "0", "3:5", "x", "1:3"],
    "item": ["-", "8*", "5", "6", "8*", "8*", "-", "8*", "9*", "99", "0*", "3", "3*"],
}
_EARLIER = ["", "", "", "", "", " ^0", " ^!4", "", " x", " ^", " ^9"]
_REPLICATE = ["{}", "{}", "{}", "000{}", "00{}", "0{}", "{}", "{}", "+{}", "{}_0", "x", ""]


def _row(rng: np.random.Generator, good: bool) -> tuple[str, ...]:
    """A line's fields (the values before ``_GOOD`` if ``good``, else any), its earlier
    endings and its replicate's pattern."""
    columns = [*_FIELD_VALUES.values(), _EARLIER, _REPLICATE]
    return tuple(str(rng.choice(v[:_GOOD] if good else v)) for v in columns)


_EXAMPLES = [  # lines a search once found wrong, kept
    [("0", "3", "13", "5", "10,5,5:1", "3:9", "8*", "", "{}"),
     ("1", "12", "3", "-", "-", "-", "-", "", "{}")],
    [("0", "-", "-", "-", "-", "-", "-", "", "+{}")],
    [("0", "-", "-", "-", "-", "-", "-", "", "{}_0")],
    [("0", "-", "-", "-", "-", "-", "8*", "", "000{}"),
     ("1", "-", "-", "-", "10,5,5:4:5:1,6:6:0:1", "-", "8*", "", "00{}")],
]


def _drawn_rows() -> list[list[tuple[str, ...]]]:
    """150 lists of lines, drawn with numpy from a fixed seed (they were a hypothesis
    property of 150 examples, whose drawing cost twice the checks): 1 to 40 lines (6 on
    average, as hypothesis drew them; one of each end), each line good 15 times in 16."""
    rng = np.random.default_rng(434)
    sizes = [1, 40, *(int(min(40, rng.geometric(1 / 6))) for _ in range(148))]
    return [[_row(rng, good=bool(rng.random() >= 1 / 16)) for _ in range(size)]
            for size in sizes]


def test_common_lines_are_read_as_fast_reads_them(tmp_path: Path) -> None:
    """The lines the reader reads inline give the records, the types and the errors of
    the general path (compact_reader._fast, then _diagnose), each line alone."""
    from pytest_prove.declare.seeds import derive_seed
    from pytest_prove.store.compact_reader import read_compact

    salt, rollout, key = "5a1t", "t.py::t", '{"c": 1}'
    table = ["resolved", "unresolved", "timeout", "", "exception", "model-a", "model-b", 3,
             "t.py::t[\x1f3\x1f]", "lookup"]
    head = "@" + json.dumps([rollout, key, {"c": 1}, derive_seed(salt, rollout, key, 0),
                             table], ensure_ascii=False, separators=(",", ":"))
    # First each good value alone, so that the lines after find them in the block's tables.
    default = ["0", "-", "-", "-", "-", "-", "-"]
    alone = [" ".join((str(1000 + 10 * field + n), *default[:field], value,
                       *default[field + 1:]))
             for field, values in enumerate(_FIELD_VALUES.values())
             for n, value in enumerate(values[:_GOOD])]
    path = tmp_path / "b.baseline"
    for rows in _EXAMPLES + _drawn_rows():
        lines = alone + [" ".join((row[8].format(index), *row[:7])) + row[7]
                         for index, row in enumerate(rows)]
        text = "\n".join(['{"pytest_prove_baseline":2}', head, *lines]) + "\n"
        data = text.encode("utf-8")
        want = _by_fast(path, data, salt)
        try:
            got: list[Any] | str = [_typed(r)
                                    for r in read_compact(path, data, salt, FIX)[0]]
        except StoreError as exc:
            got = str(exc)
        if isinstance(want, str) and "repeats line" in want:
            assert isinstance(got, str) and "is also on line" in got, (rows, got)
        else:
            assert got == want, rows
