"""Metric values in the store (issue 30): a run's line and a compact baseline's keep them,
read back as they were written; a damaged value is refused naming the file, the line and
the field, as every other damaged field is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_prove.declare.seeds import derive_seed
from pytest_prove.record import StoreError, check_record
from pytest_prove.store.compact import compact_body
from pytest_prove.store.compact_reader import read_compact

FIX = "restore the file"
SALT, ROLLOUT, KEY = "5a1t", "t.py::t", '{"c":1}'


def _episode(replicate: int, **extra: object) -> dict[str, object]:
    return {"rollout": ROLLOUT, "condition": {"c": 1}, "condition_key": KEY,
            "replicate": replicate, "seed": derive_seed(SALT, ROLLOUT, KEY, replicate),
            "outcome": "ok", "error": None, **extra}


def _read(body: str, tmp_path: Path) -> list[dict[str, object]]:
    data = ('{"pytest_prove_baseline":2}\n' + body).encode("utf-8")
    return [dict(r) for r in read_compact(tmp_path / "b.baseline", data, SALT, FIX)[0]]


def test_compact_lines_keep_each_episodes_metrics(tmp_path: Path) -> None:
    episodes = [_episode(0, metrics={"judge": 3.0, "latency_s": 0.1 + 0.2}),
                _episode(1, metrics={"judge": 5.0, "latency_s": 1e-9}),
                _episode(2)]  # an episode of a run from before metrics: no field at all
    body = compact_body(SALT, episodes)
    assert body.splitlines()[1].endswith(" ~1:3.0,2:0.30000000000000004")
    assert not body.splitlines()[3].count("~")
    read = _read(body, tmp_path)
    assert [r.get("metrics") for r in read] == [
        {"judge": 3.0, "latency_s": 0.30000000000000004}, {"judge": 5.0, "latency_s": 1e-9},
        None]


@pytest.mark.parametrize("field", ["~1:x", "~9:1.0", "~1:nan", "~1:1.0,1:2.0", "~"])
def test_a_damaged_metrics_field_is_refused_by_line(tmp_path: Path, field: str) -> None:
    body = compact_body(SALT, [_episode(0, metrics={"judge": 3.0})])
    lines = body.splitlines()
    lines[1] = lines[1].rsplit(" ", 1)[0] + " " + field
    with pytest.raises(StoreError, match=r"b\.baseline:3: the metrics \(last field\) are .*, "
                                         r"expected '~' then NAME:VALUE pairs"):
        _read("\n".join(lines) + "\n", tmp_path)


@pytest.mark.parametrize("metrics", [{"judge": "0.8"}, {"judge": True}, {"judge": None},
                                     ["judge"]])
def test_a_runs_line_with_a_bad_metric_is_refused(metrics: object) -> None:
    record = json.loads(json.dumps(_episode(0, metrics=metrics)))
    with pytest.raises(StoreError, match=r"r\.jsonl:4: metrics"):
        check_record(record, "r.jsonl:4")
