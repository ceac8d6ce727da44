"""Reading the store, and the size of a saved baseline (issue 14, items 4 and 5).

    python bench/store_read.py                  # 1,000 conditions x 200 replicates
    python bench/store_read.py --conditions 100 # quicker

Prints, for a synthetic sweep without steps (and one with ten steps an episode), the
episodes a second of CPU that ``Store.read`` of a run (as this version writes it, format 2,
and as earlier ones did, format 1), ``Store.load_baseline`` of a compact baseline and of a
JSON-lines one (format 1) read, beside a plain ``json.loads`` loop over the same lines (and
msgspec's decoder alone, into dicts); the bytes an episode read takes in memory
(tracemalloc); and the bytes an episode takes in a saved baseline,
for the bundled example and for the sweep, in each format, against the targets (>= 300,000
episodes/s of CPU, or 2.3 times json.loads on a busier machine; <= 40 bytes an episode).
The targets are for the sweep without steps, in the formats this version writes; the other
figures are printed for what they are.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import sys
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from pytest_prove.declare.seeds import derive_seed  # noqa: E402
from pytest_prove.declare.spec import condition_key  # noqa: E402
from pytest_prove.store import RUN_FORMAT, Store  # noqa: E402
from pytest_prove.store.writer import dump_line, lean_record  # noqa: E402

SALT = "02c25847222c56d6"
OUTCOMES = ("resolved", "unresolved", "timeout")


def condition_of(c: int) -> tuple[dict[str, Any], str]:
    """The bench's condition number ``c`` and its key."""
    condition = {"case": f"case-{c:04d}", "temperature": 0.7}
    return condition, condition_key(condition)


def episode(condition: dict[str, Any], key: str, r: int, steps: int, *, worse: bool = False
            ) -> dict[str, Any]:
    """Replicate ``r`` of a condition, as a run stores it; with ``worse``, a third of its
    resolved episodes end unresolved instead (a run that got worse there)."""
    x = derive_seed(SALT, "support", key, r)
    t = 3 + x % 11
    outcome = OUTCOMES[(x >> 8) % 3 if x % 5 else 0]
    if worse and outcome == "resolved" and (x >> 40) % 3 == 0:
        outcome = "unresolved"
    record: dict[str, Any] = {
        "rollout": "support", "condition": condition, "condition_key": key,
        "replicate": r, "seed": x, "outcome": outcome,
        "t": t, "horizon": 13, "meta": {"case_id": condition["case"]}, "error": None,
        "duration": round((x % 997) / 1e5, 6),
        "tokens": {"input": 900 * t + x % 800, "output": 80 * t + (x >> 16) % 90,
                   "by_model": {"sim-model": {"input": 900 * t + x % 800,
                                              "output": 80 * t + (x >> 16) % 90,
                                              "calls": 1 + (x >> 24) % 3}}},
        "finished": "2026-11-29T10:17:07.381405Z",
        "item": f"test_support.py::test_support[{condition['case']}-r{r:03d}]"}
    if steps:
        record["steps"] = [{"name": "lookup", "duration": 1e-06}] * (steps - 1) + [
            {"name": "reply", "duration": 0.0}]
    return record


def manifest_of(conditions: int, replicates: int, *, run_id: str = "20261129T101703Z-1cdd",
                name: str = "sweep") -> dict[str, Any]:
    """A complete run's manifest: one rollout, ``conditions`` x ``replicates``."""
    keys = [condition_of(c)[1] for c in range(conditions)]
    n = conditions * replicates
    declaration = {"outcomes": list(OUTCOMES), "failures": ["unresolved", "timeout"],
                   "successes": ["resolved"], "replicates": replicates, "t_unit": "steps",
                   "axes": None}
    return {"format": RUN_FORMAT, "run_id": run_id, "name": name, "salt": SALT,
            "started": "2026-11-29T10:17:03.050857Z", "ended": "2026-11-29T10:17:11.053523Z",
            "status": "complete", "paired_with": None,
            "rollouts": {"support": {"label": "test_support", "declaration": declaration}},
            "counts": {"episodes": n, "with_outcome": n, "no_outcome": 0, "errored": 0},
            "plan": {"support": {"replicates": replicates, "conditions": keys}},
            "missing": 0}


def sweep(conditions: int, replicates: int, steps: int
          ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A complete run's manifest and episodes: one rollout, ``conditions`` x ``replicates``."""
    episodes = []
    for c in range(conditions):
        condition, key = condition_of(c)
        episodes.extend(episode(condition, key, r, steps) for r in range(replicates))
    return manifest_of(conditions, replicates), episodes


def run_line(record: dict[str, Any]) -> str:
    """An episode's line in a run, as this version's writer writes it (format 2)."""
    return dump_line(lean_record(record))


def write_run(run_dir: Path, manifest: dict[str, Any], episodes: list[dict[str, Any]], *,
              old: bool = False) -> None:
    """A run's folder, as this version writes it or, with ``old``, in format 1."""
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "format": 1} if old else
                                                      manifest), encoding="utf-8")
    line = dump_line if old else run_line
    (run_dir / "episodes.jsonl").write_text("".join(line(r) + "\n" for r in episodes),
                                            encoding="utf-8")


def cpu_rate(n: int, work: Callable[[], object], repeat: int = 5) -> float:
    """Episodes a second of CPU (the best of ``repeat``: on a shared machine the speed
    varies by a fifth from one second to the next)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        result = work()
        best = min(best, time.process_time() - start)
        del result  # freed outside the timed region: reading is what is measured
    return n / best


def held(n: int, work: Callable[[], object]) -> float:
    """Bytes an episode that what ``work`` returns holds in memory (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        result = work()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del result
    return size / n


def json_loop(lines: list[bytes]) -> Callable[[], object]:
    loads = json.loads
    return lambda: [loads(line) for line in lines]


def decoder_alone(n: int, lines: list[bytes]) -> str:
    """What msgspec's decoder alone does over the same lines, into plain dicts (the parser
    the store uses, without its typed decode, checks and sharing)."""
    import msgspec

    decode = msgspec.json.Decoder().decode
    return f"; msgspec into dicts alone: {cpu_rate(n, lambda: [decode(x) for x in lines]):,.0f}/s"


def verdict(rate: float, plain: float, target: bool = True) -> str:
    """Against the target, 300,000 a second; and as a ratio to json.loads, since the target
    was set where json.loads read 130,000 of these lines a second (2.3 times that), and on a
    busy machine both fall.  Without ``target``, the ratio alone."""
    if not target:
        return f"{rate / plain:.1f} x json.loads"
    return (f"target >= 300,000/s: {'met' if rate >= 300_000 else 'NOT MET'}; "
            f"{rate / plain:.1f} x json.loads (>= 2.3 x: "
            f"{'met' if rate / plain >= 2.3 else 'NOT MET'})")


def body_lines(path: Path, skip: int) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n")[skip:] if line]


def measure(root: Path, conditions: int, replicates: int, steps: int) -> None:
    manifest, episodes = sweep(conditions, replicates, steps)
    n = len(episodes)
    run_dir = root / "runs" / manifest["run_id"]
    write_run(run_dir, manifest, episodes)
    old_dir = root / "runs" / "20261129T101703Z-old1"
    write_run(old_dir, {**manifest, "run_id": old_dir.name}, episodes, old=True)
    store = Store(root)
    run = store.read(run_dir)
    legacy = store.write_baseline("old", run, compact=False)
    compact = store.write_baseline("new", run)
    what = f"{conditions:,} conditions x {replicates} replicates, {steps or 'no'} steps"
    target = not steps
    print(f"\n{what} ({n:,} episodes)" + ("" if target else
                                          ": no target (they are for episodes without steps)"))
    run_lines = body_lines(run_dir / "episodes.jsonl", 0)
    plain = cpu_rate(n, json_loop(run_lines))
    rate = cpu_rate(n, lambda: store.read(run_dir))
    print(f"  json.loads alone over the run's lines: {plain:>10,.0f} episodes/s of CPU"
          f"{decoder_alone(n, run_lines)}")
    print(f"  run, Store.read (format 2):      {rate:>10,.0f} episodes/s of CPU   "
          f"{verdict(rate, plain, target)}")
    old_plain = cpu_rate(n, json_loop(body_lines(old_dir / "episodes.jsonl", 0)))
    rate = cpu_rate(n, lambda: store.read(old_dir))
    print(f"  run of format 1 (as written before this version): {rate:>10,.0f} episodes/s "
          f"of CPU   {verdict(rate, old_plain, False)} over its own lines")
    old_lines = body_lines(legacy, 1)
    plain = cpu_rate(n, json_loop(old_lines))
    rate = cpu_rate(n, lambda: store.load_baseline("old"))
    print(f"  baseline, JSON lines (format 1, read for old baselines; saved ones are "
          f"compact): {rate:>10,.0f} episodes/s of CPU   {verdict(rate, plain, False)}")
    rate = cpu_rate(n, lambda: store.load_baseline("new"))
    print(f"  baseline, compact (format 3):    {rate:>10,.0f} episodes/s of CPU   "
          f"{verdict(rate, plain, target)} (beside json.loads over format 1's lines)")
    if not steps:
        print(f"  held in memory: a run {held(n, lambda: store.read(run_dir)):,.0f} bytes an "
              f"episode (format 1: {held(n, lambda: store.read(old_dir)):,.0f}), a compact "
              f"baseline {held(n, lambda: store.load_baseline('new')):,.0f}; json.loads's "
              f"dicts {held(n, json_loop(run_lines)):,.0f}")
    for label, path in (("JSON lines (format 1)", legacy), ("compact (format 3)", compact)):
        size = path.stat().st_size
        said = ("" if path is legacy else
                f"   target <= 40: {'met' if size / n <= 40 else 'NOT MET'}")
        print(f"  saved baseline, {label + ':':<23}{size / n:>7.1f} bytes an episode "
              f"({size:,} bytes){said}")


def example(root: Path) -> None:
    """The example's baseline as committed in format 1 (tests/data), saved compact."""
    (root / "baselines").mkdir(parents=True)
    legacy = root / "baselines" / "old.jsonl"
    shutil.copy(HERE / "tests" / "data" / "support_bot_current.jsonl", legacy)
    store = Store(root)
    base = store.load_baseline("old")
    n = len(base.episodes)
    old_size = legacy.stat().st_size
    size = store.write_baseline("new", base).stat().st_size
    committed = HERE / "examples" / "support_bot" / ".prove" / "baselines" / "current.baseline"
    print(f"bundled example (examples/support_bot, baseline 'current', {n} episodes with steps)")
    print(f"  saved baseline, JSON lines (format 1): {old_size / n:>7.1f} bytes an episode "
          f"({old_size:,} bytes)")
    print(f"  saved baseline, compact (format 3):    {size / n:>7.1f} bytes an episode "
          f"({size:,} bytes; committed: {committed.stat().st_size:,})   target <= 40: "
          f"{'met' if size / n <= 40 else 'NOT MET'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", type=int, default=1000)
    parser.add_argument("--replicates", type=int, default=200)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="prove-bench-") as tmp:
        example(Path(tmp) / "example")
        measure(Path(tmp) / "sweep", args.conditions, args.replicates, 0)
        measure(Path(tmp) / "steps", max(1, args.conditions // 4), args.replicates, 10)


if __name__ == "__main__":
    main()
