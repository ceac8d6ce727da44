"""Time the HTML report of 1,000 conditions x 4 events: writing it, and Chromium rendering it.

Two runs of a rollout with two axes (50 tickets x 20 tones = 1,000 conditions), 60 replicates
each, every episode with steps and token usage, four events per condition (unresolved,
timeout, resolved, no outcome); 40 conditions get worse. The runs are made from the records
of a small real run (the one tests/test_report_figures.py makes), copied with new
conditions and outcomes, so the report holds everything it draws: 4 grids and 4 forest plots
of 1,000 lines, step curves for two failures and the cost bars of 1,000 conditions.

Printed: the seconds (wall, and CPU of this process) to review the runs, to gather the
figures and to write the page, its
size, and for each of 3 loads in headless Chromium the milliseconds from navigation start
until the page has loaded and painted twice (``performance.now()`` in a second
``requestAnimationFrame`` after the load event), with the median. The issue asks for under
2,000 ms. Run: python bench/report_html.py [--keep DIR] [--steps MAX]
(episodes take 1 to MAX steps, evenly; 9 unless told).
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_prove.report.files import write_report
from pytest_prove.review import review
from pytest_prove.store import Run, Store
from pytest_prove.store.episodes import plain
from tests.conftest import CHROMIUM
from tests.test_report_figures import AGENT, INI
from tests.test_report_html import ARGS

TICKETS, TONES, REPLICATES, WORSE = 50, 20, 60, 40
#: Steps an episode takes, drawn evenly from 1 to this (``--steps N``); an episode that takes
#: them all ends in a timeout.
MAX_STEPS = 9


def _template_runs(root: Path) -> tuple[Run, Run]:
    (root / "pytest.ini").write_text(INI)
    (root / "test_bot.py").write_text(AGENT)
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
            "-n", "0"]
    env = {k: v for k, v in os.environ.items() if k != "WORSE"}
    subprocess.run([*base, "--prove-save-baseline=base"], cwd=root, env=env, check=True,
                   capture_output=True)
    subprocess.run([*base, "--prove-baseline=base", "--prove-name=worse"], cwd=root,
                   env={**env, "WORSE": "1"}, check=False, capture_output=True)
    store = Store(root / ".prove")
    return store.open("baseline:base"), store.open("worse")


def _records(template: Run, worse: bool, max_steps: int) -> tuple[dict[str, Any], ...]:
    # The store hands out read-only episodes: start each record from a plain dict of one,
    # without a compact baseline's step count (the steps are set below).
    sample = {k: v for k, v in plain(template.episodes[0]).items()
              if k not in ("step_count", "last_step")}
    rng = random.Random(7)
    out = []
    for t in range(TICKETS):
        for v in range(TONES):
            c = t * TONES + v
            condition = {"ticket": f"t{t:02d}", "tone": f"v{v:02d}"}
            key = json.dumps(condition, sort_keys=True, separators=(",", ":"))
            fail = 0.45 if (worse and c % (TICKETS * TONES // WORSE) == 0) else 0.12
            for replicate in range(REPLICATES):
                record = plain(sample)
                draw, steps = rng.random(), rng.randint(1, max_steps)
                record.update(condition=condition, condition_key=key, replicate=replicate,
                              meta={"case_id": f"case{c}"}, t=steps,
                              steps=[{"name": "lookup", "duration": 0.0}] * steps)
                model = "model-b" if worse else "model-a"
                use = {"input": 250 * steps, "output": 40 * steps, "calls": steps}
                record["tokens"] = {"input": use["input"], "output": use["output"],
                                    "by_model": {model: use}}
                if draw < 0.06:
                    record.update(outcome=None, error={"kind": "no_outcome", "message": "-"})
                else:
                    record.update(error=None, outcome="unresolved" if draw < 0.06 + fail else
                                  "timeout" if steps >= max_steps else "resolved")
                out.append(record)
    return tuple(out)


def _load_ms(page: Any, path: Path) -> float:
    page.goto("about:blank")
    page.goto(path.as_uri(), wait_until="load")
    return float(page.evaluate(
        "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame("
        "() => done(performance.now()))))"))


def main() -> int:
    keep = Path(sys.argv[sys.argv.index("--keep") + 1]) if "--keep" in sys.argv else None
    max_steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv \
        else MAX_STEPS
    root = Path(tempfile.mkdtemp(prefix="pictures-bench-"))
    try:
        before_t, after_t = _template_runs(root)
        before = dataclasses.replace(before_t, episodes=_records(before_t, False, max_steps))
        after = dataclasses.replace(after_t, episodes=_records(after_t, True, max_steps))
        print(f"runs: {TICKETS * TONES} conditions x {REPLICATES} replicates, "
              f"{len(before.episodes)} episodes each, 1 to {max_steps} steps each")
        start, cpu = time.perf_counter(), time.process_time()
        done = review(before, after, events=None, q=0.05, max_mde=0.2, fail_on={"worse"})
        rows = done.require_comparison().rows
        print(f"review: {time.perf_counter() - start:.1f} s ({time.process_time() - cpu:.1f} s "
              f"CPU), {len(rows)} rows, "
              f"{len({r.event for r in rows})} events, verdict "
              f"{done.require_comparison().verdict.word}")
        path = (keep or root) / "report.html"
        start, cpu = time.perf_counter(), time.process_time()
        cwd = os.getcwd()
        os.chdir(root)  # where the prices are, as `pytest-prove report` would run
        try:
            write_report(path, done, x="tone", y="ticket")
        finally:
            os.chdir(cwd)
        print(f"figures and page written: {time.perf_counter() - start:.1f} s "
              f"({time.process_time() - cpu:.1f} s CPU), "
              f"{path.stat().st_size / 1e6:.1f} MB")
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            times = [_load_ms(page, path) for _ in range(3)]
            marks = page.locator("g.fr").count()
            browser.close()
        print(f"Chromium, load and paint: {', '.join(f'{t:.0f}' for t in times)} ms; median "
              f"{statistics.median(times):.0f} ms (the issue asks < 2000 ms); {marks} forest "
              f"marks; script errors: {len(errors)}")
        return 0 if not errors else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
