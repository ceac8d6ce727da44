"""Fault injection (chaos= and [chaos]): bad declarations stop collection by name; faults are
injected at the httpx and requests transports, drawn from the episode's seed, so that twins
get the same faults in one process, under -n 2 and in blocks of concurrent replicates;
they are stored with each episode; every call stays on 127.0.0.1."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

import pytest_prove.stats  # noqa: F401 - loaded once, before pytester's in-process runs
from pytest_prove.declare.chaos import ChaosConfig, ChaosError, chaos_differences
from pytest_prove.store import Run

from .conftest import INI, JSONHandler, load, local_server

pytest.importorskip("httpx")
pytest.importorskip("requests")

#: Written into every project: any connection to an address other than 127.0.0.1 (or ::1)
#: is refused and written down in network-guard.log, which every test reads.
GUARD = textwrap.dedent(
    """
    import socket
    from pathlib import Path

    LOG = Path(__file__).parent / "network-guard.log"
    LOCAL = {"127.0.0.1", "::1", "localhost"}
    _connect = socket.socket.connect


    def _guarded(self, address):
        host = address[0] if isinstance(address, tuple) else None
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in LOCAL:
            with LOG.open("a") as log:
                log.write(f"{address!r}\\n")
            raise ConnectionRefusedError(f"network guard: {address!r} is not 127.0.0.1")
        return _connect(self, address)


    def pytest_configure(config):
        socket.socket.connect = _guarded


    def pytest_unconfigure(config):
        socket.socket.connect = _connect
    """
)


class _Handler(JSONHandler):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        self.server.calls.append(self.path)  # type: ignore[attr-defined]
        self.answer({"ok": True})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls.append(self.path)  # type: ignore[attr-defined]
        self.answer({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "resolved"}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        })


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    with local_server(_Handler) as httpd:
        yield httpd


@pytest.fixture
def project(pytester: pytest.Pytester, server: ThreadingHTTPServer) -> Iterator[pytest.Pytester]:
    pytester.makeconftest(GUARD)
    pytester._monkeypatch.setenv("CHAOS_PORT", str(server.server_address[1]))
    yield pytester
    guard = pytester.path / "network-guard.log"
    assert not guard.exists(), f"a request left 127.0.0.1: {guard.read_text()}"


CHAOS = {"faults": {"http_429": 0.15, "http_500": 0.05, "http_502": 0.05, "http_503": 0.05,
                    "read_timeout": 0.05, "connect_error": 0.05},
         "latency_s": [0, 0.002], "retry_after_s": 0.001, "hosts": ["127.0.0.1"]}

#: A sync agent (httpx then requests) and an async one (httpx, yielding between calls so
#: that concurrent replicates interleave); each says what every call gave it. Its httpx
#: clients are made with verify=False: every call is plain http to 127.0.0.1, and a client
#: made with TLS verification loads the CA bundle, 22 ms of CPU a client and episode.
AGENTS = textwrap.dedent(
    """
    import asyncio
    import json
    import os

    import httpx
    import requests
    import pytest_prove as prove

    BASE = "http://127.0.0.1:" + os.environ["CHAOS_PORT"]
    CHAOS = json.loads(os.environ["CHAOS"])


    @prove.rollout(replicates=8, failures=["failed"], successes=["ok"], id="sync",
                   chaos=CHAOS, axes={"kind": ["sync"]})
    def sync_agent(cfg, seed):
        seen = []
        with httpx.Client(timeout=5, verify=False) as client:
            for i in range(seed % 3 + 2):
                try:
                    seen.append(client.get(f"{BASE}/a/{i}").status_code)
                except httpx.TransportError as exc:
                    seen.append(type(exc).__name__)
        with requests.Session() as session:
            for i in range(2):
                try:
                    seen.append(session.get(f"{BASE}/b/{i}", timeout=5).status_code)
                except requests.RequestException as exc:
                    seen.append(type(exc).__name__)
        return prove.Episode("ok" if all(s == 200 for s in seen) else "failed",
                             meta={"seen": seen})


    @prove.rollout(replicates=8, failures=["failed"], successes=["ok"], id="async",
                   chaos=CHAOS, axes={"kind": ["async"]})
    async def async_agent(cfg, seed):
        seen = []
        async with httpx.AsyncClient(timeout=5, verify=False) as client:
            for i in range(seed % 3 + 2):
                await asyncio.sleep(0)
                try:
                    seen.append((await client.get(f"{BASE}/c/{i}")).status_code)
                except httpx.TransportError as exc:
                    seen.append(type(exc).__name__)
        return prove.Episode("ok" if all(s == 200 for s in seen) else "failed",
                             meta={"seen": seen})
    """
)

#: What an agent sees of each fault.
SEEN = {"http_429": [429], "http_500": [500], "http_502": [502], "http_503": [503],
        "read_timeout": ["ReadTimeout"], "connect_error": ["ConnectError", "ConnectionError"]}


def _agents(pytester: pytest.Pytester, chaos: dict[str, Any]) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agents=AGENTS)
    pytester._monkeypatch.setenv("CHAOS", json.dumps(chaos))


def _faults(run: Run) -> dict[tuple[str, int], str]:
    """Every episode's stored faults and the calls it logged, as text, by replicate."""
    return {(str(r["rollout"]), int(r["replicate"])): json.dumps(
                [r["chaos"]["faults"], r["chaos"]["by_kind"], r["chaos"]["calls"]])
            for r in run.episodes}


def _check_run(run: Run, server_calls: int) -> None:
    """Each fault reached the agent as the client's own response or error; the server saw
    every numbered call but the faulted ones."""
    sent = 0
    for record in run.episodes:
        assert record["error"] is None, record["error"]
        chaos, seen = record["chaos"], record["meta"]["seen"]
        assert chaos["calls"] == len(seen) == len(chaos["log"])
        for entry, got in zip(chaos["log"], seen, strict=True):
            if "fault" in entry:
                assert got in SEEN[entry["fault"]], (entry, got)
            else:
                assert got == entry["status"] == 200
        assert sum(chaos["by_kind"].values()) == len(chaos["faults"])
        sent += chaos["calls"] - len(chaos["faults"])
    assert sent == server_calls


@pytest.mark.slow
def test_twins_get_the_same_faults_in_one_process_under_xdist_and_in_blocks(
        project: pytest.Pytester, server: ThreadingHTTPServer) -> None:
    _agents(project, CHAOS)
    runs: dict[str, dict[tuple[str, int], str]] = {}
    for name, args in (
            ("one", ["-p", "no:randomly"]),
            ("blocks", ["--prove-concurrency", "4"]),
            ("xdist", ["-n", "2"])):
        before = len(server.calls)  # type: ignore[attr-defined]
        argv = ["-p", "no:cacheprovider", "--prove-salt", "twins", "--prove-name", name, *args]
        result = project.runpytest(*argv)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        run = load(project, name)
        assert len(run.episodes) == 16
        _check_run(run, len(server.calls) - before)  # type: ignore[attr-defined]
        runs[name] = _faults(run)
    assert runs["one"] == runs["blocks"] == runs["xdist"]
    kinds = {json.loads(f)[0][i]["kind"] for f in runs["one"].values()
             for i in range(len(json.loads(f)[0]))}
    assert kinds == set(SEEN)  # every fault was drawn at least once
    declared = load(project, "one").manifest["rollouts"]["sync"]["declaration"]["chaos"]
    assert declared == {**CHAOS, "latency_s": [0.0, 0.002]}


@pytest.mark.slow
def test_every_rate_zero_gives_the_outcomes_of_a_run_without_chaos(
        project: pytest.Pytester, server: ThreadingHTTPServer) -> None:
    _agents(project, {"faults": dict.fromkeys(SEEN, 0)})
    common = ["-p", "no:randomly", "--prove-salt", "zero"]
    assert project.runpytest(*common, "--prove-name", "zero").ret == pytest.ExitCode.OK
    assert project.runpytest(*common, "--prove-name", "off",
                             "--prove-chaos", "off").ret == pytest.ExitCode.OK
    zero, off = load(project, "zero"), load(project, "off")

    def outcomes(run: Run) -> dict[tuple[str, int], Any]:
        return {(r["rollout"], r["replicate"]): (r["outcome"], r["meta"]) for r in run.episodes}

    assert outcomes(zero) == outcomes(off)
    assert all(r["chaos"]["faults"] == [] and r["chaos"]["calls"] > 0 for r in zero.episodes)
    assert all("chaos" not in r for r in off.episodes)
    assert "chaos" in zero.manifest["rollouts"]["sync"]["declaration"]
    assert "chaos" not in off.manifest["rollouts"]["sync"]["declaration"]


@pytest.mark.slow
def test_calls_to_other_hosts_pass_untouched(project: pytest.Pytester,
                                             server: ThreadingHTTPServer) -> None:
    _agents(project, {"faults": {"http_500": 1.0}, "hosts": ["api.example.com", "*:1"]})
    result = project.runpytest("-p", "no:randomly", "-k", "not async")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    run = load(project)
    assert {r["outcome"] for r in run.episodes} == {"ok"}
    assert all(r["chaos"] == {"calls": 0, "by_kind": {}, "faults": [], "log": []}
               for r in run.episodes)


def test_the_network_guard_sees_a_request_that_leaves_127_0_0_1(
        pytester: pytest.Pytester) -> None:
    """The guard every test here relies on: a call to another address is refused and
    written down (this test reads the log itself, then removes it)."""
    pytester.makeconftest(GUARD)
    pytester.makeini(INI)
    pytester.makepyfile(test_out="""
        import httpx
        import pytest_prove as prove

        @prove.rollout(replicates=1, failures=["failed"], successes=["ok"])
        def test_out():
            try:
                httpx.get("http://192.0.2.1:9/", timeout=2)
            except Exception as exc:
                return prove.Episode("failed", meta={"why": str(exc)})
            return prove.Episode("ok")
    """)
    assert pytester.runpytest("-p", "no:randomly").ret == pytest.ExitCode.OK
    guard = pytester.path / "network-guard.log"
    assert "192.0.2.1" in guard.read_text()
    assert "network guard" in load(pytester).episodes[0]["meta"]["why"]


# ---- the declaration


def _literal(text: str) -> str:
    """``text`` as an fnmatch pattern that matches it ('*' still matches anything)."""
    return text.replace("[", "[[]")


#: A bad [chaos] table, and what collection says of it (each in a spec file of its own).
BAD_TABLES = {
    "unknown_key": ("[chaos]\nfaults = {http_429 = 0.1}\nlatency = [0, 1]\n",
                    "[chaos]: unknown chaos key 'latency'; known keys: faults, latency_s, "
                    "hosts, retry_after_s"),
    "rate": ("[chaos]\nfaults = {http_429 = 1.5}\n",
             "[chaos]: the rate of http_429 must be a number in [0, 1] (a share of calls), "
             "got 1.5"),
    "unknown_fault": ("[chaos.faults]\nhttp_418 = 0.1\n",
                      "[chaos]: unknown fault 'http_418'; known faults: http_429, http_500, "
                      "http_502, http_503, read_timeout, connect_error"),
    "sum": ("[chaos]\nfaults = {http_429 = 0.7, http_500 = 0.5}\n",
            "[chaos]: the fault rates add up to 1.2, more than every call*"),
    "latency": ("[chaos]\nlatency_s = [2, 1]\n",
                "[chaos]: latency_s must be [low, high], seconds with 0 <= low <= high <= "
                "3600, e.g. [0, 0.5]; got [2, 1]"),
    "url": ("[chaos]\nhosts = [\"https://api.openai.com/v1\"]\n",
            "[chaos]: hosts has 'https://api.openai.com/v1', a URL; give the host alone*"),
    "hosts_string": ("[chaos]\nhosts = \"api.openai.com\"\n",
                     "[chaos]: hosts must be a list of host patterns*"),
}


def test_a_bad_chaos_table_stops_collection_naming_the_file_and_line(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(agent="def rollout(cfg, seed):\n    pass\n")
    for name, (table, _) in BAD_TABLES.items():
        pytester.makefile(".toml", **{f"prove_{name}": 'target = "agent:rollout"\n'
                          'replicates = 2\n[declare]\nfailures = ["failed"]\n'
                          'successes = ["ok"]\n' + table})
    result = pytester.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines_random([f"*prove_{name}.toml:6: {_literal(message)}"
                                        for name, (_, message) in BAD_TABLES.items()])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_bad_chaos_argument_is_the_test_files_collection_error(
        pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent="""
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["failed"], successes=["ok"],
                       chaos={"faults": {"http_429": -0.1}})
        def test_agent():
            return prove.Episode("ok")
    """)
    result = pytester.runpytest("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_agent.py*",
                                 "*chaos=: the rate of http_429 must be a number in [[]0, 1]*"])
    assert "INTERNALERROR" not in result.stdout.str()


@pytest.mark.parametrize(("args", "ini", "message"), [
    (["--prove-chaos", "maybe"], "", "*--prove-chaos: expected on or off, got 'maybe'*"),
    ([], "prove_chaos = sometimes\n", "*ini option prove_chaos: expected on or off, got "
     "'sometimes'*"),
], ids=["option", "ini"])
def test_a_bad_chaos_switch_is_a_usage_error(pytester: pytest.Pytester, args: list[str],
                                             ini: str, message: str) -> None:
    pytester.makeini(INI + ini)
    pytester.makepyfile(test_agent="def test_a():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_the_draw_is_a_function_of_seed_and_call_with_the_declared_rates() -> None:
    config = ChaosConfig.from_mapping({"faults": {"http_429": 0.05, "read_timeout": 0.2},
                                       "latency_s": [0.1, 0.3]}, "here")
    draws = [config.draw(seed, i) for seed in range(200) for i in range(50)]
    assert draws == [config.draw(seed, i) for seed in range(200) for i in range(50)]
    n = len(draws)
    for kind, rate in (("http_429", 0.05), ("read_timeout", 0.2)):
        # Within five standard deviations of the declared rate (fixed draws: no flakes).
        found = sum(1 for fault, _ in draws if fault == kind)
        assert abs(found - rate * n) < 5 * (rate * (1 - rate) * n) ** 0.5, (kind, found)
    assert all(0.1 <= delay <= 0.3 for _, delay in draws)
    assert config.draw(1, 0) != config.draw(2, 0) or config.draw(1, 1) != config.draw(2, 1)


def test_host_patterns() -> None:
    config = ChaosConfig.from_mapping({"hosts": ["*.openai.com", "localhost:8080"]}, "here")
    assert config.matches("api.openai.com", None)
    assert config.matches("API.OpenAI.com", 443)
    assert not config.matches("openai.com.evil.net", None)
    assert config.matches("localhost", 8080)
    assert not config.matches("localhost", 8081)
    assert not config.matches("localhost", None)
    assert ChaosConfig.from_mapping({}, "here").matches("anything", 1)
    with pytest.raises(ChaosError, match="hosts has 'a b', which is not a host pattern"):
        ChaosConfig.from_mapping({"hosts": ["a b"]}, "here")


def test_chaos_differences_name_each_rollout() -> None:
    with_chaos = {"r": {"declaration": {"chaos": ChaosConfig.from_mapping(
        {"faults": {"http_429": 0.05}}, "x").to_json()}}, "s": {"declaration": {}}}
    without = {"r": {"declaration": {}}, "s": {"declaration": {}}, "t": {"declaration": {}}}
    assert chaos_differences(without, with_chaos) == [("r", "none", "http_429 0.05")]
    assert chaos_differences(with_chaos, with_chaos) == []


# ---- the real openai client, and pairing with a baseline

OPENAI_AGENT = textwrap.dedent(
    """
    import os

    import openai
    import pytest
    import pytest_prove as prove

    BASE = "http://127.0.0.1:" + os.environ["CHAOS_PORT"] + "/v1"


    @prove.rollout(replicates=12, failures=["unresolved"], successes=["resolved"],
                   chaos={"faults": {"http_429": 0.3}, "retry_after_s": 0.001,
                          "hosts": ["127.0.0.1"]})
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        # One retry: a call whose two attempts both get a 429 fails the episode. Its
        # httpx client is openai's default one without TLS verification (plain http to
        # 127.0.0.1; loading the CA bundle was 23 ms of CPU an episode).
        client = openai.OpenAI(base_url=BASE, api_key="none", max_retries=1, timeout=10,
                               http_client=openai.DefaultHttpxClient(verify=False))
        try:
            for step in range(2):
                reply = client.chat.completions.create(
                    model="gpt-test", messages=[{"role": "user", "content": ticket}])
        except openai.RateLimitError:
            return prove.Episode("unresolved", meta={"case_id": ticket})
        return prove.Episode(reply.choices[0].message.content, meta={"case_id": ticket})
    """
)


@pytest.mark.slow
def test_openai_retries_429s_and_only_episodes_with_faults_change(
        project: pytest.Pytester, server: ThreadingHTTPServer) -> None:
    pytest.importorskip("openai")
    project.makeini(INI)
    project.makepyfile(test_agent=OPENAI_AGENT)
    calm = project.runpytest("-p", "no:xdist", "--prove-chaos", "off",
                             "--prove-salt", "calm", "--prove-save-baseline", "calm",
                             "--prove-name", "calm")
    assert calm.ret == pytest.ExitCode.OK, calm.stdout.str()
    seen_calm = len(server.calls)  # type: ignore[attr-defined]
    assert seen_calm == 24 * 2
    faulty = project.runpytest("-p", "no:xdist", "--prove-baseline", "calm",
                               "--prove-chaos", "on", "--prove-name", "faulty",
                               "--prove-report=faulty.json")
    # Compared as asked: the gate reads the faults' effect on the agent.
    assert faulty.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), faulty.stdout.str()
    faulty.stdout.fnmatch_lines([
        "*faults differ: compared as asked (test_agent.py::test_agent: none in baseline:calm, "
        "http_429 0.3 on 127.0.0.1 in faulty): the difference measures what these faults do "
        "to the agent",
        "*faults injected in faulty: * fault(s) in * HTTP calls (http_429 *); * of 24 "
        "episodes had at least one. By condition: ticket=password *; ticket=refund *"])
    before = {r["replicate"] + 100 * (r["condition"]["ticket"] == "refund"): r
              for r in load(project, "calm").episodes}
    after = {r["replicate"] + 100 * (r["condition"]["ticket"] == "refund"): r
             for r in load(project, "faulty").episodes}
    assert before.keys() == after.keys() and len(after) == 24
    sent = 0
    changed = retried = 0
    for key, record in after.items():
        assert "chaos" not in before[key]
        chaos = record["chaos"]
        log = chaos["log"]
        faults = sum(chaos["by_kind"].values())
        assert [f["call"] for f in chaos["faults"]] == [e["call"] for e in log if "fault" in e]
        sent += chaos["calls"] - faults
        if record["outcome"] == "resolved":
            # The client's own retries: every 429 is followed by the same request again.
            assert chaos["calls"] == 2 + faults
            for entry in log:
                if "fault" in entry:
                    following = log[entry["call"] + 1]
                    assert (following["method"], following["path"]) == (
                        entry["method"], entry["path"]) == ("POST", "/v1/chat/completions")
                    retried += 1
        else:
            assert [e.get("fault") for e in log[-2:]] == ["http_429", "http_429"]
        if faults == 0:
            assert record["outcome"] == before[key]["outcome"]
            assert chaos["calls"] == 2
        changed += record["outcome"] != before[key]["outcome"]
    # Every call the server did not see is a stored fault, and the other way round.
    assert sent == len(server.calls) - seen_calm  # type: ignore[attr-defined]
    assert retried > 0 and changed > 0
    document = json.loads((project.path / "faulty.json").read_text())["chaos"]
    assert document["differs"] == [{"rollout": "test_agent.py::test_agent", "before": "none",
                                    "after": "http_429 0.3 on 127.0.0.1"}]
    counted = document["faults"]["after"]
    assert sum(c["faults"] for c in counted.values()) == sum(
        sum(r["chaos"]["by_kind"].values()) for r in after.values())
    assert "before" not in document["faults"]


@pytest.mark.slow
def test_a_baseline_without_chaos_is_refused_unless_asked(
        project: pytest.Pytester, server: ThreadingHTTPServer,
        capsys: pytest.CaptureFixture[str]) -> None:
    _agents(project, CHAOS)
    common = ["-p", "no:randomly", "--prove-replicates", "3"]
    assert project.runpytest(*common, "--prove-chaos", "off", "--prove-save-baseline",
                             "calm", "--prove-name", "calm").ret == pytest.ExitCode.OK
    seen = len(server.calls)  # type: ignore[attr-defined]
    refused = project.runpytest(*common, "--prove-baseline", "calm")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([
        "*refused to compare: the faults injected differ (rollout async: none in 'baseline "
        "calm', http_429 0.15, * on 127.0.0.1 in 'this run'; rollout sync: *). A run with "
        "faults is compared "
        "with one without them (or with other faults) only when you ask for it*"
        "--prove-chaos on (or off)*"])
    assert len(server.calls) == seen  # type: ignore[attr-defined] - nothing ran
    assert "no rollout ran" not in refused.stdout.str()  # the refusal is the one reason
    # Under xdist the workers collect, and refuse the same way (-n 1: a worker's refusal
    # reaches the controller the same way whatever the number of workers; one start less).
    refused = project.runpytest(*common, "-n", "1", "--prove-baseline", "calm")
    assert refused.ret != pytest.ExitCode.OK
    refused.stdout.fnmatch_lines(["*refused to compare: the faults injected differ (rollout "
                                  "async: none in 'baseline calm'*"])
    assert len(server.calls) == seen  # type: ignore[attr-defined]
    # A resumed run keeps the faults it started with, whatever --prove-chaos says.
    assert project.runpytest(*common, "-k", "not async", "--prove-name",
                             "half").ret == pytest.ExitCode.OK
    resumed = project.runpytest(*common, "--prove-resume=half", "--prove-chaos", "off")
    assert resumed.ret == pytest.ExitCode.USAGE_ERROR
    resumed.stderr.fnmatch_lines(["*--prove-resume: the faults injected differ (rollout async: "
                                  "http_429 0.15, * in run half, none now); a resumed run "
                                  "keeps the chaos it started with*"])
    # The same chaos in both runs is compared as any two runs are.
    for name in ("storm", "storm2"):
        assert project.runpytest(*common, "--prove-name", name).ret == pytest.ExitCode.OK
    from pytest_prove.cli import main

    store = str(project.path / ".prove")
    assert main(["--store", store, "diff", "storm", "storm2"]) == 0
    capsys.readouterr()
    assert main(["--store", store, "diff", "calm", "storm"]) == 1
    assert "refused to compare: the faults injected differ" in capsys.readouterr().err
    assert main(["--store", store, "diff", "calm", "storm", "--chaos-differs"]) == 0
    out = capsys.readouterr().out
    assert "faults differ: compared as asked (async: none in calm, http_429 0.15" in out
    assert "faults injected in storm: " in out
    assert main(["--store", store, "show", "storm"]) == 0
    shown = capsys.readouterr().out
    assert "; chaos: http_429 0.15, http_500 0.05" in shown
    assert "faults injected (chaos): " in shown
    assert shown.count("with faults") == 1 and "kind=sync" in shown
