"""A real framework that instruments itself: a pydantic-ai agent (its spans through the global
OpenTelemetry API) makes two model calls, a tool call and then the answer, with the real openai
client against a server on 127.0.0.1 that this test starts.  The tokens stored per episode are
the server's two answers', counted once: not again from pydantic-ai's agent span that sums them,
nor from its chat spans when the openai instrumentor's client spans sit under them."""

from __future__ import annotations

import contextlib
import json
import re
import textwrap
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

import pytest_prove.stats  # noqa: F401 - loaded once, before pytester's in-process runs
from pytest_prove.store import Run

from .conftest import INI, JSONHandler, capture_session, load, local_server
from .test_capture_global import Session, sessions_in_one_process

pytest.importorskip("pydantic_ai")
pytest.importorskip("openai")
pytest.importorskip("opentelemetry.instrumentation.openai_v2")

SECRET = "SECRET-PROMPT-c41d"


def usage_of(seed: int, call: int) -> tuple[int, int]:
    """What the server says call 1 (the tool call) or 2 (the answer) of a seed's episode used."""
    return 100 * call + seed % 50, 10 * call + seed % 7


class _Handler(JSONHandler):
    """An OpenAI-compatible chat endpoint: asks for the tool ``lookup`` first, then answers."""

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        messages = body["messages"]
        prompt = " ".join(str(m.get("content")) for m in messages if m["role"] == "user")
        seed = int(re.search(r"seed (\d+)", prompt).group(1))  # type: ignore[union-attr]
        call = 2 if any(m["role"] == "tool" for m in messages) else 1
        self.server.calls.append((seed, call))  # type: ignore[attr-defined]
        tokens_in, tokens_out = usage_of(seed, call)
        if call == 1:
            message: dict[str, object] = {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {
                    "name": "lookup", "arguments": json.dumps({"ticket": "refund"})}}]}
        else:
            message = {"role": "assistant", "content": "resolved"}
        self.answer({
            "id": f"chatcmpl-{seed}-{call}", "object": "chat.completion", "created": 1,
            "model": body["model"],
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if call == 1 else "stop"}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                      "total_tokens": tokens_in + tokens_out},
        })


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    with local_server(_Handler) as httpd:
        yield httpd


AGENT = textwrap.dedent(
    """
    import os
    import ssl

    import pytest
    import pytest_prove as prove
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    BASE = "http://127.0.0.1:" + os.environ["FAKE_OPENAI_PORT"] + "/v1"
    # One TLS context for every client: building one loads the system's CA certificates,
    # 20 ms of CPU that each episode's client spent again otherwise (none is used: http).
    TLS = ssl.create_default_context()
    # True: pydantic-ai's agent span also carries the sum of its calls as gen_ai.usage.*
    # (a setting of each agent: one session can hold both kinds, an axis of the rollout)
    SUMMED = [value == "1" for value in os.environ["AGENT_SPAN_USAGE"].split(",")]


    def lookup(ticket: str) -> str:
        \"\"\"The policy for a ticket.\"\"\"
        return "refund approved"


    @prove.rollout(replicates=4, failures=["unresolved"], successes=["resolved"],
                   capture={"instrument": INSTRUMENT})
    @pytest.mark.parametrize("summed", SUMMED)
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    async def test_agent(ticket, summed, prove_seed):
        client = AsyncOpenAI(base_url=BASE, api_key="none", max_retries=0, timeout=10,
                             http_client=DefaultAsyncHttpxClient(verify=TLS))
        model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=client))
        agent = Agent(model, tools=[lookup])
        agent.instrument = InstrumentationSettings(
            use_aggregated_usage_attribute_names=not summed)
        result = await agent.run(f"SECRET-PROMPT-c41d {ticket} seed {prove_seed}")
        return prove.Episode(result.output, meta={"case_id": ticket})
    """
)


#: The one-process scenarios (ids of test_pydantic_ai_tokens_are_the_servers_counted_once),
#: each (instrument, summed): they share one subprocess (sessions_in_one_process), in this
#: order, since importing pydantic-ai, openai and the SDK is most of what each cost (they
#: were a subprocess each).  Each session calls a server of its own.
ONE_PROCESS = {"pydantic-ai": ([], [False, True]),
               "with-openai-instrumentor": (["openai"], [True])}


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[dict[str, tuple[Session, list[tuple[int, int]]]]]:
    projects = {name: {"pytest.ini": INI,
                       "test_agent.py": AGENT.replace("INSTRUMENT", json.dumps(instrument))}
                for name, (instrument, _) in ONE_PROCESS.items()}
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(local_server(_Handler)) for name in projects}
        env: dict[str, dict[str, str | None]] = {
            name: {"FAKE_OPENAI_PORT": str(servers[name].server_address[1]),
                   "AGENT_SPAN_USAGE": ",".join(str(int(s)) for s in summed)}
            for name, (_, summed) in ONE_PROCESS.items()}
        found = sessions_in_one_process(tmp_path_factory.mktemp("pydantic-ai"), projects,
                                        dict.fromkeys(projects, ("-p", "no:xdist")), env)
        yield {name: (found[name], list(servers[name].calls))  # type: ignore[attr-defined]
               for name in projects}


@pytest.mark.slow  # a subprocess, or xdist workers
@pytest.mark.parametrize(("instrument", "summed", "args"), [
    # Agents with the sum on their span and without it, in one session (this was two,
    # "pydantic-ai" and "pydantic-ai-summing").  It and the next one share a subprocess
    # (ONE_PROCESS).
    ([], [False, True], ["-p", "no:xdist"]),
    (["openai"], [True], ["-p", "no:xdist"]),
    # One worker: counting once is each episode's, in the worker that ran it; -n 1 goes
    # through the worker's capture and its hand-off to the controller as -n 2 does, with
    # one process less (two workers capture in test_capture_openai.py and
    # test_capture_global.py).
    (["openai"], [True], ["-n", "1", "--prove-concurrency", "4"]),
], ids=["pydantic-ai", "with-openai-instrumentor", "with-openai-instrumentor-xdist-blocks"])
def test_pydantic_ai_tokens_are_the_servers_counted_once(
        pytester: pytest.Pytester, request: pytest.FixtureRequest, instrument: list[str],
        summed: list[bool], args: list[str]) -> None:
    name = request.node.callspec.id
    if name in ONE_PROCESS:
        assert ONE_PROCESS[name] == (instrument, summed)
        session, calls = request.getfixturevalue("one_process")[name]
        assert session.ret == pytest.ExitCode.OK, session.out
        _check(session.run(), calls, session.root, instrument, summed)
        return
    server = request.getfixturevalue("server")
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=AGENT.replace("INSTRUMENT", json.dumps(instrument)))
    pytester._monkeypatch.setenv("FAKE_OPENAI_PORT", str(server.server_address[1]))
    pytester._monkeypatch.setenv("AGENT_SPAN_USAGE", ",".join(str(int(s)) for s in summed))
    result = capture_session(pytester, *args, timeout=180)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    _check(load(pytester), server.calls, pytester.path,  # type: ignore[attr-defined]
           instrument, summed)


def _check(run: Run, calls: list[tuple[int, int]], root: Path, instrument: list[str],
           summed: list[bool]) -> None:
    """A session's stored run (its project in ``root``), against the calls its server saw."""
    assert len(run.episodes) == 8 * len(summed)
    assert sorted({r["condition"]["summed"] for r in run.episodes}) == summed
    # Two calls an episode reached the server, each one once.
    assert sorted(calls) == sorted((r["seed"], call) for r in run.episodes for call in (1, 2))
    for record in run.episodes:
        seed = record["seed"]
        (in1, out1), (in2, out2) = usage_of(seed, 1), usage_of(seed, 2)
        assert record["tokens"] == {"input": in1 + in2, "output": out1 + out2,
                                    "by_model": {"gpt-test": {"input": in1 + in2,
                                                              "output": out1 + out2,
                                                              "calls": 2}}}, seed
        # What made counting once needed is stored: pydantic-ai's chat spans (and the
        # client's under them), and its agent span with the sum when asked.
        with_usage = [s for s in record["spans"]
                      if "gen_ai.usage.input_tokens" in s["attributes"]]
        assert len(with_usage) == 2 * (1 + len(instrument)) + record["condition"]["summed"]
        assert any(s["attributes"].get("gen_ai.tool.name") == "lookup" for s in record["spans"])
    assert run.manifest["capture"] == {"global": "installed", "instrumented": instrument,
                                       "missing": {}}
    for path in Path(root / ".prove").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
