"""The real openai client, instrumented by opentelemetry-instrumentation-openai-v2, against
an OpenAI-compatible server on 127.0.0.1 that this test starts: the stored tokens are the
server's, the prompt is nowhere in the store, in one process and with -n 2."""

from __future__ import annotations

import contextlib
import json
import textwrap
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

import pytest_prove.stats  # noqa: F401 - loaded once, before pytester's in-process runs
from pytest_prove.store import Run

from .conftest import INI, JSONHandler, load, local_server
from .test_capture_global import Session, sessions_in_one_process

pytest.importorskip("openai")
pytest.importorskip("opentelemetry.instrumentation.openai_v2")

#: What the server says every call used.
INPUT, OUTPUT = 123, 45
SECRET = "SECRET-PROMPT-7f3a"


class _Handler(JSONHandler):
    calls: list[str]

    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls.append(body["model"])  # type: ignore[attr-defined]
        self.answer({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": body["model"] + "-2025-01-01",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "resolved"}}],
            "usage": {"prompt_tokens": INPUT, "completion_tokens": OUTPUT,
                      "total_tokens": INPUT + OUTPUT},
        })


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    with local_server(_Handler) as httpd:
        yield httpd


AGENT = textwrap.dedent(
    """
    import os
    import ssl

    import openai
    import pytest
    import pytest_prove as prove

    BASE = "http://127.0.0.1:" + os.environ["FAKE_OPENAI_PORT"] + "/v1"
    # One TLS context for every client: building one loads the system's CA certificates,
    # 20 ms of CPU that each episode's client spent again otherwise (none is used: http).
    TLS = ssl.create_default_context()


    def calls_of(seed):
        return seed % 3 + 1


    @prove.rollout(replicates=8, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        client = openai.OpenAI(base_url=BASE, api_key="none", max_retries=0, timeout=10,
                               http_client=openai.DefaultHttpxClient(verify=TLS))
        for _ in range(calls_of(prove_seed)):
            reply = client.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": "SECRET-PROMPT-7f3a " + ticket}])
        # Reported by hand too: spans already counted gpt-test, so this is not added.
        prove.usage("gpt-test", input=1, output=1)
        return prove.Episode(reply.choices[0].message.content, meta={"case_id": ticket,
                             "calls": calls_of(prove_seed)})


    @prove.rollout(replicates=8, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["shipping"])
    async def test_async_agent(ticket, prove_seed):
        client = openai.AsyncOpenAI(base_url=BASE, api_key="none", max_retries=0, timeout=10,
                                    http_client=openai.DefaultAsyncHttpxClient(verify=TLS))
        for _ in range(calls_of(prove_seed)):
            reply = await client.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": "SECRET-PROMPT-7f3a " + ticket}])
        return prove.Episode(reply.choices[0].message.content, meta={"case_id": ticket,
                             "calls": calls_of(prove_seed)})
    """
)


def _ini(instrument: str, ini: str = "") -> str:
    return (INI + f"prove_capture_instrument = {instrument}\n"
            "prove_prices =\n    gpt-test = 2.00 8.00\n" + ini)


def _project(pytester: pytest.Pytester, server: ThreadingHTTPServer, instrument: str,
             ini: str = "") -> None:
    pytester.makeini(_ini(instrument, ini))
    pytester.makepyfile(test_agent=AGENT)
    pytester._monkeypatch.setenv("FAKE_OPENAI_PORT", str(server.server_address[1]))


def _check_store(where: pytest.Pytester | Session, how: str = "installed",
                 missing: tuple[str, ...] = ()) -> None:
    run, root = (where.run(), where.root) if isinstance(where, Session) else (load(where),
                                                                               where.path)
    assert len(run.episodes) == 24
    for record in run.episodes:
        calls = record["meta"]["calls"]
        # The server's usage, once per call; the prove.usage report is not added on top.
        assert record["tokens"] == {"input": INPUT * calls, "output": OUTPUT * calls,
                                    "by_model": {"gpt-test": {"input": INPUT * calls,
                                                              "output": OUTPUT * calls,
                                                              "calls": calls}}}
        # Each episode holds its own spans, even when replicates ran at once.
        chats = [s for s in record["spans"] if s["name"] == "chat gpt-test"]
        assert len(chats) == calls
        assert all(s["attributes"]["gen_ai.usage.input_tokens"] == INPUT for s in chats)
    assert run.manifest["capture"]["instrumented"] == ["openai"]
    assert sorted(run.manifest["capture"]["missing"]) == sorted(missing)
    assert run.manifest["capture"]["global"].startswith(how)
    for path in Path(root / ".prove").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def _session(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """One process: a subprocess, since the global tracer provider is set once a process and
    the instrumentor patches the openai module for the rest of it.  Under -n 2: in this
    process, which only collects and reads what the workers report; the workers, processes
    of their own, are where capture is switched on (when an item is set up)."""
    if "-n" in args:
        return pytester.runpytest(*args)
    return pytester.runpytest_subprocess(*args, timeout=120)


@pytest.mark.slow  # a subprocess, or xdist workers
@pytest.mark.parametrize("args", [["-p", "no:xdist"], ["-n", "2", "--prove-concurrency", "4"]],
                         ids=["one-process", "xdist-blocks"])
def test_openai_tokens_are_the_servers(pytester: pytest.Pytester, server: ThreadingHTTPServer,
                                       request: pytest.FixtureRequest, args: list[str]) -> None:
    """Under xdist with two workers, in blocks: each worker instruments openai in its own
    process, and what two workers capture is merged (this was two sessions, [xdist] with one
    worker and [xdist-blocks], each importing openai and its instrumentor in every worker).
    The one-process session also says ``prove_capture_content = false``, which must keep
    the prompt out of every span and file (was test_content_is_kept_only_when_asked[false],
    a subprocess of its own); the xdist session also asks for an instrumentor that is not
    installed, which is named and the run goes on (was test_a_missing_instrumentor_is_named,
    xdist workers of its own, then the [xdist] session's).  The one-process session is the
    first of :data:`ONE_PROCESS`."""
    missing: tuple[str, ...] = ()
    result: pytest.RunResult | Session
    where: pytest.Pytester | Session = pytester
    calls: list[str] = server.calls  # type: ignore[attr-defined]
    if "-n" in args:
        missing = ("no-such-instrumentor",)
        _project(pytester, server, "openai no-such-instrumentor")
    else:
        where, calls = request.getfixturevalue("one_process")["tokens"]
    result = where if isinstance(where, Session) else _session(pytester, *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert len(calls) == sum((s % 3 + 1) for s in _seeds(where))
    _check_store(where, missing=missing)
    for record in _load(where).episodes:
        chats = [s for s in record["spans"] if s["name"] == "chat gpt-test"]
        kept = [json.dumps(s["attributes"]) for s in chats]
        assert not any(SECRET in text for text in kept), kept[0]
    result.stdout.fnmatch_lines(["*pytest-prove capture: spans through the global "
                                 "OpenTelemetry API and of openai stored with each episode (in "
                                 "a tracer provider pytest-prove installed: none was set)",
                                 "*tokens: * input and * output in * calls (gpt-test), $*"])
    if missing:  # what test_a_missing_instrumentor_is_named checked
        result.stdout.fnmatch_lines([
            "*pytest-prove capture: instrumentor 'no-such-instrumentor' is not installed: no "
            "opentelemetry_instrumentor entry point named 'no-such-instrumentor'*",
            "*capture: instrumentor 'no-such-instrumentor' did not run (not installed)*"])
        run = load(pytester)
        assert "not installed" in run.manifest["capture"]["missing"]["no-such-instrumentor"]
        assert run.manifest["capture"]["instrumented"] == ["openai"]
        assert all(r["tokens"]["input"] == INPUT * r["meta"]["calls"] for r in run.episodes)


def _load(where: pytest.Pytester | Session) -> Run:
    return where.run() if isinstance(where, Session) else load(where)


def _seeds(where: pytest.Pytester | Session) -> list[int]:
    return [int(r["seed"]) for r in _load(where).episodes]


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_instrumentors_still_capture_when_the_global_provider_takes_no_processor(
        one_process: dict[str, tuple[Session, list[str]]]) -> None:
    """A global provider of another kind: the instrumentor's spans go to a provider of the
    session's own, and are stored as before.  The last session of :data:`ONE_PROCESS`,
    after the global provider is unset as in a process of its own (it was one)."""
    result, calls = one_process["vendor"]
    assert (result.root / "conftest.py").read_text() == VENDOR_PROVIDER
    assert result.ret == pytest.ExitCode.OK, result.out
    assert len(calls) == sum(int(r["meta"]["calls"]) for r in result.run().episodes)
    _check_store(result, how="the global tracer provider is conftest.VendorProvider")
    result.stdout.fnmatch_lines(["pytest-prove capture: spans of openai stored with each episode",
                                 "pytest-prove capture: spans through the global OpenTelemetry "
                                 "API are not captured: *"])


SPEC_AGENT = textwrap.dedent(
    """
    import os
    import ssl

    import openai
    import pytest_prove as prove

    BASE = "http://127.0.0.1:" + os.environ["FAKE_OPENAI_PORT"] + "/v1"
    TLS = ssl.create_default_context()  # one for every client, as AGENT's


    def rollout(cfg, seed):
        client = openai.OpenAI(base_url=BASE, api_key="none", max_retries=0, timeout=10,
                               http_client=openai.DefaultHttpxClient(verify=TLS))
        calls = seed % 3 + 1
        for _ in range(calls):
            reply = client.chat.completions.create(
                model="gpt-test",
                messages=[{"role": "user", "content": "SECRET-PROMPT-7f3a " + cfg["ticket"]}])
        return prove.Episode(reply.choices[0].message.content,
                             meta={"case_id": cfg["ticket"], "calls": calls})
    """
)


SPEC = textwrap.dedent("""
    target = "spec_agent:rollout"
    target_id = "spec-agent"
    replicates = 4

    [axes.ticket]
    values = ["refund", "password"]

    [declare]
    failures = ["unresolved"]
    successes = ["resolved"]

    [capture]
    instrument = ["openai"]
""")

#: The sessions that start from no tracer provider set (or the one pytest-prove installed in
#: an earlier one) share one subprocess (sessions_in_one_process): importing openai and its
#: instrumentor is most of what each cost.  Each instruments openai afresh (the instrumentor
#: is switched off at the end of a session) and calls a server of its own.  In order: the
#: one-process session of test_openai_tokens_are_the_servers (content false), the spec's,
#: then test_content_is_kept_only_when_asked's (content true); last, with the global
#: provider unset first (as in a process of its own), a conftest that sets a provider that
#: takes no processor (test_instrumentors_still_capture_when_the_global_provider_takes_no_
#: processor's, a subprocess of its own before).
ONE_PROCESS = ("tokens", "spec", "content-true", "vendor")

#: A global provider of another kind, set as conftest.py is imported.
VENDOR_PROVIDER = textwrap.dedent(
    """
    from opentelemetry import trace

    class VendorProvider(trace.NoOpTracerProvider):
        pass

    trace.set_tracer_provider(VendorProvider())
    """
)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory
                ) -> dict[str, tuple[Session, list[str]]]:
    projects = {
        "tokens": {"pytest.ini": _ini("openai", "prove_capture_content = false\n"),
                   "test_agent.py": AGENT},
        "spec": {"pytest.ini": INI, "spec_agent.py": SPEC_AGENT, "prove_agent.toml": SPEC},
        "content-true": {"pytest.ini": INI + "prove_capture_instrument = openai\n"
                                             "prove_capture_content = true\n",
                         "test_agent.py": AGENT},
        "vendor": {"pytest.ini": _ini("openai"), "test_agent.py": AGENT,
                   "conftest.py": VENDOR_PROVIDER},
    }
    assert tuple(projects) == ONE_PROCESS
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(local_server(_Handler)) for name in projects}
        env: dict[str, dict[str, str | None]] = {
            name: {"FAKE_OPENAI_PORT": str(httpd.server_address[1]),
                   "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": None}
            for name, httpd in servers.items()}
        found = sessions_in_one_process(tmp_path_factory.mktemp("openai"), projects,
                                        dict.fromkeys(projects, ("-p", "no:xdist")), env,
                                        reset=("vendor",))
    return {name: (found[name], servers[name].calls)  # type: ignore[attr-defined]
            for name in projects}


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_a_spec_with_a_capture_table_stores_the_servers_tokens(
        one_process: dict[str, tuple[Session, list[str]]]) -> None:
    """A ``[capture]`` table in a sweep spec (it was refused for every spec: the parsed
    table was checked a second time as if it were still a mapping).  Its project's ini
    names no instrumentor: the spec's table is what switches openai on."""
    # A subprocess: the instrumentor patches the openai module for the rest of the process.
    result, calls = one_process["spec"]
    assert result.ret == pytest.ExitCode.OK, result.out
    run = result.run()
    assert len(calls) == sum(int(r["meta"]["calls"]) for r in run.episodes)
    assert len(run.episodes) == 8
    for record in run.episodes:
        calls = record["meta"]["calls"]
        assert record["tokens"]["input"] == INPUT * calls
        assert record["tokens"]["output"] == OUTPUT * calls
    assert run.manifest["capture"]["instrumented"] == ["openai"]


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
@pytest.mark.parametrize("content", ["true"])
def test_content_is_kept_only_when_asked(one_process: dict[str, tuple[Session, list[str]]],
                                         content: str) -> None:
    """``prove_capture_content = true`` kept no prompt with the openai-v2 instrumentor: the
    environment value set was ``true``, which opentelemetry-util-genai reads as "no
    content" (it wants a mode such as ``SPAN_ONLY``).  ``false`` is the one-process
    session of test_openai_tokens_are_the_servers (a subprocess less); the checks of
    ``false`` below stay, for a value added here.  The last session of
    :data:`ONE_PROCESS`: after two sessions that kept no content in the same process."""
    result, _ = one_process[f"content-{content}"]
    assert f"prove_capture_content = {content}\n" in (result.root / "pytest.ini").read_text()
    assert result.ret == pytest.ExitCode.OK, result.out
    run = result.run()
    assert len(run.episodes) == 24
    for record in run.episodes:
        chats = [s for s in record["spans"] if s["name"] == "chat gpt-test"]
        assert len(chats) == record["meta"]["calls"]
        kept = [json.dumps(s["attributes"]) for s in chats]
        if content == "true":
            assert all(SECRET in text for text in kept), kept[0]
        else:
            assert not any(SECRET in text for text in kept), kept[0]
    if content == "false":
        for path in Path(result.root / ".prove").rglob("*"):
            if path.is_file():
                assert SECRET.encode() not in path.read_bytes(), path
