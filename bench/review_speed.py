"""The CPU of ``review()`` on a large comparison, this tree against another revision, and
whether both give the same review (issue 14, item 5).

    python bench/review_speed.py                       # 500 conditions x 200 replicates
    python bench/review_speed.py --old main --conditions 100

Writes bench/million.py's store (a compact baseline and a run of the same sweep, one
condition in fifty worse), extracts the package of revision ``--old`` with ``git archive``,
and in a fresh process for each tree reads both runs and times ``review()`` with the gate's
arguments (CPU seconds, best of ``--repeat``).  Each process also reviews a mixed copy of the
same runs: one episode in seven made a plain dict, one in thirteen errored, timed out or
without an outcome, a few with injected faults or without a case id, so that the fast path for
the store's ``StoredEpisode`` objects and the one for dicts are both read, side by side in one
condition.  Each review is reduced to a fingerprint (the repr of everything but the runs);
the two trees must print the same ones.  The figure is the ratio of this tree's CPU to the
other's, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from bench.million import build  # noqa: E402

CHILD = """
import dataclasses, gc, hashlib, time, warnings
from pathlib import Path
from pytest_prove.store import Store
from pytest_prove.review import review
from pytest_prove.store.episodes import plain

store = Store(Path(ROOT))
base = store.load_baseline("base")
run = store.read(store.resolve("after"))


def mixed(source, shift):
    out = []
    for i, record in enumerate(source.episodes):
        j = i + shift
        if j % 7 == 0:
            record = plain(record)
        if j % 13 == 0:
            record = dict(plain(record), outcome=None,
                          error={"kind": ("exception", "episode_timeout", "no_outcome",
                                          "crashed")[j % 4], "message": "x"})
        if j % 17 == 0:
            record = dict(plain(record), chaos={"calls": j % 5, "by_kind": {
                "timeout": j % 3, "rate_limit": 0}})
        if j % 11 == 0:
            record = dict(plain(record), meta=None if j % 2 else {})
        out.append(record)
    return dataclasses.replace(source, episodes=tuple(out))


def fingerprint(done):
    parts = [repr(getattr(done, f.name)) for f in dataclasses.fields(done)
             if f.name not in ("before", "after")]
    return hashlib.sha256("\\n".join(parts).encode()).hexdigest()[:16]


def gate(b, a, **extra):
    return review(b, a, events=None, q=0.05, max_mde=0.2, fail_on={"worse"},
                  missing="test", **extra)


times = []
for _ in range(REPEAT):
    gc.collect()
    start = time.process_time()
    done = gate(base, run)
    times.append(time.process_time() - start)
prints = {"as stored": fingerprint(done)}
mb, ma = mixed(base, 0), mixed(run, 3)
for name, extra in (("mixed", {"chaos_differs": True}),
                    ("mixed, missing ignored", {"chaos_differs": True, "missing": "ignore"})):
    try:
        if "ignored" in name:
            done = review(mb, ma, events=None, q=0.05, max_mde=0.2, fail_on={"worse"},
                          missing="ignore", chaos_differs=True)
        else:
            done = gate(mb, ma, **extra)
        prints[name] = fingerprint(done)
    except Exception as error:  # a refusal is a result too
        prints[name] = f"{type(error).__name__}: {error}"[:300]
mixed_cases = dataclasses.replace(ma, episodes=ma.episodes + (
    dict(plain(ma.episodes[0]), replicate=10**6, meta={"case_id": "zzz"}),))
try:
    gate(mb, mixed_cases, chaos_differs=True)
    prints["case mix"] = "accepted"
except Exception as error:
    prints["case mix"] = f"{type(error).__name__}: {error}"[:300]
print("RESULT", json.dumps({"cpu": times, "prints": prints, "n": len(base.episodes)}))
"""


def child(root: Path, source: Path, repeat: int) -> dict[str, object]:
    code = (f"import json\nROOT = {str(root)!r}\nREPEAT = {repeat}\n"
            + textwrap.dedent(CHILD))
    env = dict(os.environ, PYTHONPATH=str(source))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, cwd=source, check=False)
    if done.returncode:
        sys.exit(f"the review in {source} failed:\n{done.stdout}\n{done.stderr}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    found: dict[str, object] = json.loads(line.removeprefix("RESULT "))
    return found


def extract(revision: str, into: Path) -> Path:
    """The package as it is at ``revision`` (``git archive``), in ``into``."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(HERE), "archive", revision, "pytest_prove"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", type=int, default=500)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--old", default="main", help="the revision to compare with")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="prove-review-") as tmp:
        root = Path(tmp) / "store"
        build(root, args.conditions, args.replicates)
        old = extract(args.old, Path(tmp) / "old")
        results = {"old": child(root, old, args.repeat), "new": child(root, HERE, args.repeat)}
    n = results["new"]["n"]
    print(f"review() of {args.conditions:,} conditions x {args.replicates} replicates "
          f"({n:,} + {n:,} episodes), CPU seconds, best of {args.repeat}:")
    best = {}
    for name, found in results.items():
        cpu = found["cpu"]
        assert isinstance(cpu, list)
        best[name] = min(cpu)
        label = f"{args.old}" if name == "old" else "this tree"
        print(f"  {label:<12} {best[name]:6.2f} s   (runs: "
              f"{', '.join(f'{c:.2f}' for c in cpu)})")
    print(f"  ratio this tree / {args.old}: {best['new'] / best['old']:.2f}")
    same = results["old"]["prints"] == results["new"]["prints"]
    prints = results["new"]["prints"]
    assert isinstance(prints, dict)
    for name, value in prints.items():
        print(f"  {name:<24} {value}")
    if not same:
        print("  DIFFERENT from", args.old, ":", results["old"]["prints"])
        sys.exit(1)
    print(f"  identical reviews: yes ({len(prints)} cases)")


if __name__ == "__main__":
    main()
