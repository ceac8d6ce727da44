"""Arms against a stale baseline, simulated (issue 31's acceptance; docs/arms.md).

Each sweep is a run with two arms, ``cur`` and ``new``, over 3 conditions of N replicates,
read by the same code a session reads it with (``review.arms.arms_review``: pairing, exact
McNemar mid-p, Holm, the verdict word). The arms of a replicate share its seed: with
chance RHO they share the draw that decides the outcome (twins that end alike), else they
draw apart. Four settings, each over --sweeps sweeps on fixed seeds:

* null: nothing changed; the share of sweeps whose verdict is worse or safer (a false
  alarm) should be at most q + 2 s.e.;
* moved: ``new`` fails more by --max-mde in one condition; the share whose verdict is worse
  and names that condition should be at least 0.80 - 2 s.e.;
* drift, arms: nothing changed in the code, but between an earlier run and this one the
  world moved every arm's rate in one condition by DRIFT: the arms, run side by side
  today, keep the null's size;
* drift, baseline: the same unchanged code read against a baseline recorded before the drift
  (the earlier run's ``cur``, on the same seeds): the share of false alarms it raises.

Usage: ``python bench/arms_simulation.py [--sweeps 2000] [--replicates 200] [--rho 0.5]``.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path
from typing import Any

from pytest_prove.declare.spec import condition_key
from pytest_prove.review import review
from pytest_prove.review.arms import arms_review
from pytest_prove.store import Run
from pytest_prove.store.arms import one_arm

RATES = {"refund": 0.20, "password": 0.10, "shipping": 0.30}
ARMS = ("cur", "new")


def _run(name: str, rates: dict[str, dict[str, float]], n: int, seed: int,
         rho: float) -> Run:
    """A complete run with both arms; replicate r of every condition on seed (seed, r)."""
    declaration = {"outcomes": ["bad", "ok"], "failures": ["bad"], "successes": ["ok"],
                   "replicates": n, "t_unit": None, "axes": None, "arms": list(ARMS),
                   "reference": "cur"}
    episodes: list[dict[str, Any]] = []
    for ticket, by_arm in rates.items():
        condition = {"ticket": ticket}
        key = condition_key(condition)
        for r in range(n):
            rng = random.Random(f"{seed}-{ticket}-{r}")  # the replicate's seed
            shared, alike = rng.random(), rng.random() < rho
            for arm in ARMS:
                draw = shared if alike else rng.random()
                episodes.append({"rollout": f"x@arm:{arm}", "condition": condition,
                                 "condition_key": key, "replicate": r, "seed": r,
                                 "outcome": "bad" if draw < by_arm[arm] else "ok",
                                 "error": None})
    keys = [condition_key({"ticket": t}) for t in rates]
    manifest = {
        "format": 2, "run_id": name, "name": name, "salt": "s", "status": "complete",
        "rollouts": {f"x@arm:{a}": {"label": "x", "declaration": declaration,
                                    "node": "t.py::x", "path": "t.py"} for a in ARMS},
        "plan": {f"x@arm:{a}": {"replicates": n, "conditions": keys, "node": "t.py::x",
                                "path": "t.py"} for a in ARMS},
        "selection": {"deselected": {}, "skipped": {}, "paths": ["."], "narrowed": False,
                      "ignored": [], "skipped_files": []}}
    return Run(run_id=name, name=name, manifest=manifest, episodes=tuple(episodes),
               path=Path("sim"))


def _rates(new: dict[str, float] | None = None, drift: dict[str, float] | None = None
           ) -> dict[str, dict[str, float]]:
    drift = drift or {}
    return {t: {"cur": p + drift.get(t, 0.0), "new": (new or {}).get(t, p) + drift.get(t, 0.0)}
            for t, p in RATES.items()}


def _share(hits: int, sweeps: int) -> str:
    share = hits / sweeps
    return f"{share:.4f} (s.e. {math.sqrt(share * (1 - share) / sweeps):.4f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=2000)
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--q", type=float, default=0.05)
    parser.add_argument("--max-mde", type=float, default=0.20)
    parser.add_argument("--drift", type=float, default=0.15)
    opts = parser.parse_args()
    asked: dict[str, Any] = {"q": opts.q, "max_mde": opts.max_mde, "events": None,
                             "fail_on": {"worse"}}
    n, sweeps, rho = opts.replicates, opts.sweeps, opts.rho
    counts = {"null": 0, "moved": 0, "drift, arms": 0, "drift, baseline": 0}
    started = time.perf_counter()
    for sweep in range(sweeps):
        word = arms_review(_run("a", _rates(), n, sweep, rho), **asked).comparison
        counts["null"] += word is not None and word.verdict.word in ("worse", "safer")
        moved = arms_review(_run("b", _rates(new={"refund": RATES["refund"] + opts.max_mde}),
                                 n, sweep, rho), **asked).comparison
        counts["moved"] += moved is not None and moved.verdict.word == "worse" and any(
            "refund" in row.condition for row in moved.verdict.worse)
        drift = {"shipping": opts.drift}
        today = _run("today", _rates(drift=drift), n, sweep, rho)
        found = arms_review(today, **asked).comparison
        counts["drift, arms"] += found is not None and found.verdict.word in ("worse", "safer")
        earlier = _run("earlier", _rates(), n, sweep, rho)  # the baseline, before the drift
        stale = review(one_arm(earlier, "cur"), one_arm(today, "new"), **asked).comparison
        counts["drift, baseline"] += stale is not None and stale.verdict.word in (
            "worse", "safer")
    print(f"{sweeps} sweeps of 3 conditions x {n} replicates, twins alike with chance {rho}, "
          f"q {opts.q}, max_mde {opts.max_mde}, drift {opts.drift} "
          f"({time.perf_counter() - started:.0f} s)")
    print(f"null, arms: false worse-or-safer {_share(counts['null'], sweeps)}; "
          f"at most q + 2 s.e. = {opts.q + 2 * math.sqrt(opts.q * (1 - opts.q) / sweeps):.4f}")
    print(f"moved by max_mde in one condition, arms: detected {_share(counts['moved'], sweeps)}"
          f"; at least 0.80 - 2 s.e. = {0.8 - 2 * math.sqrt(0.16 / sweeps):.4f}")
    print(f"drift on every arm, arms side by side: false worse-or-safer "
          f"{_share(counts['drift, arms'], sweeps)}")
    print(f"drift, the same unchanged code against a baseline recorded before it: false "
          f"worse-or-safer {_share(counts['drift, baseline'], sweeps)}")


if __name__ == "__main__":
    main()
