"""Latency-bound sweeps under ``--prove-concurrency`` against a hand-written bound (issue 36,
item 3).

    python bench/io_bound.py                     # 4,000 rollouts, K = 64, every case
    python bench/io_bound.py --rollouts 1000     # quicker
    python bench/io_bound.py --only sleep --no-xdist

Each rollout waits once: a lognormal wait of mean 50 ms (sigma 0.5, then 1.0), either as a
sleep (``time.sleep`` / ``asyncio.sleep``) or as a real HTTP call to a threading
``http.server`` on 127.0.0.1 that answers after that long (``urllib`` for sync rollouts,
``httpx`` for async ones).  For each case the bench measures, in the same run:

- the sweep: ``pytest --prove-concurrency=K`` on a rollout of ``--rollouts`` replicates (one
  condition), in one process and under ``-n 2``, and the same sweep with no wait at all;
  ``over`` is the first's wall time less the second's: what the waits cost the sweep;
- the bound: the same calls (same waits, same client code) through a thread pool of K
  (sync) or ``asyncio.gather`` under a semaphore of K (async); under ``-n 2``, 2 K.

It prints ``over / bound`` for each case (target at most 1.10) and both against the ideal,
sum(waits) / K.  ``over`` can be less than the bound: the waits overlap the session's own
work (collection, each item's setup and report), which the sweep without waits does alone;
so it also prints the stricter ``sweep / (sweep without waits + bound)``, which is 1.00
when nothing overlaps and the window adds nothing.  Wall times of a shared machine move:
``--repeat`` keeps the lowest of each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

#: The work of one rollout, shared by the sweep's rollouts and the bound (imported by both).
WORK = '''
import asyncio
import json
import os
import time
import urllib.request

WAITS = json.loads(open(os.environ["IO_WAITS"]).read())
MODE = os.environ["IO_MODE"]
URL = os.environ.get("IO_URL", "")
_clients = {}


def work_sync(i):
    wait = WAITS[i]
    if MODE == "none":
        return
    if MODE == "sleep":
        time.sleep(wait)
        return
    with urllib.request.urlopen(f"{URL}/?s={wait}", timeout=120) as answer:
        answer.read()


async def work_async(i):
    wait = WAITS[i]
    if MODE == "none":
        return
    if MODE == "sleep":
        await asyncio.sleep(wait)
        return
    import httpx

    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = httpx.AsyncClient(
            timeout=120,  # a loaded machine's server answers late; no call may fail
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=512))
    answer = await client.get(f"{URL}/?s={wait}")
    answer.read()
'''

SWEEP = '''
import pytest_prove as prove
from io_work import work_{kind}


@prove.rollout(replicates={n}, failures=["bad"], successes=["good"])
{prefix}def test_io(prove_replicate):
    {awaits}work_{kind}(prove_replicate)
    return prove.Episode("good")
'''


class _Slow(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        wait = float(self.path.partition("s=")[2] or 0)
        time.sleep(wait)
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        return


class _Server(ThreadingHTTPServer):
    # The listen backlog, set before the socket listens: with the default 5, 128 clients
    # connecting at once lose SYNs and wait for their retransmission (1 s, 3 s, ...).
    request_queue_size = 1024
    daemon_threads = True


def _server() -> tuple[ThreadingHTTPServer, str]:
    server = _Server(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _waits(n: int, sigma: float, seed: int) -> list[float]:
    mu = math.log(0.05) - sigma * sigma / 2  # mean 50 ms
    rng = random.Random(seed)
    return [rng.lognormvariate(mu, sigma) for _ in range(n)]


def _sweep(root: Path, kind: str, env: dict[str, str], k: int, workers: int) -> float:
    dist = ["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
                           "-p", "no:cacheprovider", f"test_{kind}.py",
                           f"--prove-concurrency={k}", *dist],
                          cwd=root, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the {kind} sweep failed ({done.returncode}):\n{done.stdout[-3000:]}"
                 f"{done.stderr[-3000:]}")
    return elapsed


def _bound(root: Path, kind: str, env: dict[str, str], n: int, k: int) -> float:
    """The same calls through a pool of k threads, or gather under a semaphore of k."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    sys.path.insert(0, str(root))
    sys.modules.pop("io_work", None)
    try:
        import io_work  # type: ignore[import-not-found]

        if kind == "sync":
            start = time.perf_counter()
            with ThreadPoolExecutor(max_workers=k) as pool:
                list(pool.map(io_work.work_sync, range(n)))
            return time.perf_counter() - start

        async def main() -> None:
            gate = asyncio.Semaphore(k)

            async def one(i: int) -> None:
                async with gate:
                    await io_work.work_async(i)

            await asyncio.gather(*(one(i) for i in range(n)))

        start = time.perf_counter()
        asyncio.run(main())
        return time.perf_counter() - start
    finally:
        sys.path.remove(str(root))
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=4000)
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1, help="sessions of each kind")
    parser.add_argument("--only", choices=["sleep", "http"], default=None)
    parser.add_argument("--no-xdist", action="store_true", help="leave out -n 2")
    parser.add_argument("--sigmas", default="0.5,1.0")
    options = parser.parse_args()
    n, k = options.rollouts, options.k
    server, url = _server()
    modes = [options.only] if options.only else ["sleep", "http"]
    workers_list = [1] if options.no_xdist else [1, 2]
    ratios: list[float] = []
    print(f"{n:,} rollouts, K = {k}, load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="prove-io-") as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\nprove_allow_underpowered = true\n")
        (root / "io_work.py").write_text(WORK)
        for kind in ("sync", "async"):
            (root / f"test_{kind}.py").write_text(textwrap.dedent(SWEEP.format(
                kind=kind, n=n, prefix="async " if kind == "async" else "",
                awaits="await " if kind == "async" else "")))
        base_env = {key: v for key, v in os.environ.items() if not key.startswith("PYTEST_")}
        for sigma in [float(s) for s in options.sigmas.split(",")]:
            waits = _waits(n, sigma, seed=36)
            path = root / f"waits-{sigma}.json"
            path.write_text(json.dumps(waits))
            ideal1 = sum(waits) / k
            for mode in modes:
                for kind in ("sync", "async"):
                    for workers in workers_list:
                        env = {**base_env, "IO_WAITS": str(path), "IO_URL": url}
                        bare = min(_sweep(root, kind, {**env, "IO_MODE": "none"}, k, workers)
                                   for _ in range(options.repeat))
                        full = min(_sweep(root, kind, {**env, "IO_MODE": mode}, k, workers)
                                   for _ in range(options.repeat))
                        inflight = k * workers
                        bound = min(_bound(root, kind, {"IO_WAITS": str(path),
                                                        "IO_MODE": mode, "IO_URL": url},
                                           n, inflight) for _ in range(options.repeat))
                        over = full - bare
                        ratio = over / bound
                        ratios.append(ratio)
                        ideal = ideal1 / workers
                        print(f"sigma {sigma} {mode:5} {kind:5} "
                              f"{'-n ' + str(workers) if workers > 1 else 'one process'}: "
                              f"sweep {full:.2f} s, without waits {bare:.2f} s, over "
                              f"{over:.2f} s; {'pool' if kind == 'sync' else 'gather'} of "
                              f"{inflight} {bound:.2f} s; ideal {ideal:.2f} s  "
                              f"over/bound {ratio:.2f}x (over/ideal {over / ideal:.2f}x, "
                              f"bound/ideal {bound / ideal:.2f}x; stricter, sweep / "
                              f"(without waits + bound) {full / (bare + bound):.2f}x)  "
                              f"target <= 1.10 "
                              f"{'MET' if ratio <= 1.10 else 'NOT MET'}", flush=True)
    server.shutdown()
    print(f"worst over/bound {max(ratios):.2f}x; load average at end "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
