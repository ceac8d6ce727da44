"""Spans emitted through the global OpenTelemetry API (an agent that instruments itself) are
stored with the episode they started in, its usage counted once per model call: with no
provider set (pytest-prove installs one), with the user's (its processor added), in one
process and under xdist with blocks; and capture settings are checked at collection.

Sessions that capture run in a subprocess: OpenTelemetry sets the global tracer provider once
per process, and this test process must not keep one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import pytest_prove.stats  # noqa: F401 - loaded once, before pytester's in-process runs
from pytest_prove.store import Run, Store

from .conftest import INI, INNER_PLUGINS, capture_session, load

#: An agent that makes two model calls through the global API, each with usage that depends
#: on the seed, inside an agent span that carries their sum too (as frameworks do); async
#: replicates and sync ones, and a rollout that does not capture.
AGENT = textwrap.dedent(
    """
    import asyncio
    import time

    import pytest
    import pytest_prove as prove
    from opentelemetry import trace

    tracer = trace.get_tracer("support-agent")  # at import, before any provider is set


    def usage_of(seed, call):
        return 100 * call + seed % 97, 10 * call + seed % 13


    def agent_span(seed):
        with tracer.start_as_current_span("invoke_agent support") as agent:
            total_in = total_out = 0
            for call in (1, 2):
                with tracer.start_as_current_span("chat sim-model") as chat:
                    tokens_in, tokens_out = usage_of(seed, call)
                    chat.set_attribute("gen_ai.request.model", "sim-model")
                    chat.set_attribute("gen_ai.usage.input_tokens", tokens_in)
                    chat.set_attribute("gen_ai.usage.output_tokens", tokens_out)
                    yield
                total_in, total_out = total_in + tokens_in, total_out + tokens_out
            agent.set_attribute("gen_ai.request.model", "sim-model")
            agent.set_attribute("gen_ai.usage.input_tokens", total_in)
            agent.set_attribute("gen_ai.usage.output_tokens", total_out)


    @prove.rollout(replicates=8, failures=["unresolved"], successes=["resolved"], CAPTURE)
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        for _ in agent_span(prove_seed):
            time.sleep(0.002)  # replicates of a block interleave
        return prove.Episode("resolved", meta={"case_id": ticket})


    @prove.rollout(replicates=8, failures=["unresolved"], successes=["resolved"], CAPTURE)
    @pytest.mark.parametrize("ticket", ["shipping"])
    async def test_async_agent(ticket, prove_seed):
        for _ in agent_span(prove_seed):
            await asyncio.sleep(0.002)
        return prove.Episode("resolved", meta={"case_id": ticket})


    @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"],
                   id="uncaptured")
    def test_uncaptured(prove_seed):
        for _ in agent_span(prove_seed):
            pass
        return prove.Episode("resolved")
    """
)


def _agent(pytester: pytest.Pytester, capture: str = "capture={}", ini: str = "") -> None:
    pytester.makeini(INI + ini)
    pytester.makepyfile(test_agent=AGENT.replace("CAPTURE", capture))


def _expected(seed: int) -> dict[str, object]:
    tokens_in = 100 + 200 + 2 * (seed % 97)
    tokens_out = 10 + 20 + 2 * (seed % 13)
    return {"input": tokens_in, "output": tokens_out,
            "by_model": {"sim-model": {"input": tokens_in, "output": tokens_out, "calls": 2}}}


#: Runs pytest sessions one after another in one process, each in its own project (the
#: first argument: a JSON list of {"root", "args", "env", "reset"}, an env value of null
#: unsets it; "reset": the process's global tracer provider is unset first), what each
#: printed in out.txt in its project; then prints their exit codes.  Each project's
#: modules are dropped from sys.modules after its session (two projects may both hold a
#: test_agent.py or a conftest.py), and its environment is restored.
DRIVER = textwrap.dedent(
    """
    import contextlib
    import json
    import os
    import sys

    import pytest

    with open(sys.argv[1]) as fh:
        sessions = json.load(fh)
    codes = []
    for session in sessions:
        if session["reset"]:
            # No tracer provider set, as in a fresh process: OpenTelemetry's own tests
            # reset these globals so (opentelemetry-test-utils' reset_trace_globals).
            from opentelemetry import trace
            from opentelemetry.util._once import Once

            trace._TRACER_PROVIDER_SET_ONCE = Once()
            trace._TRACER_PROVIDER = None
            trace._PROXY_TRACER_PROVIDER = trace.ProxyTracerProvider()
        root = session["root"]
        saved, modules, path = dict(os.environ), set(sys.modules), list(sys.path)
        sys.path.insert(0, root)  # as `python -m pytest` run in the project puts it first
        for key, value in session["env"].items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        with (open(os.path.join(root, "out.txt"), "w") as out, contextlib.chdir(root),
              contextlib.redirect_stdout(out), contextlib.redirect_stderr(out)):
            codes.append(int(pytest.main([f"--rootdir={root}", *session["args"]])))
        os.environ.clear()
        os.environ.update(saved)
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(root):
                del sys.modules[name]
    print("CODES " + json.dumps(codes))
    """
)


@dataclass(frozen=True)
class Session:
    """One session of :func:`sessions_in_one_process`: its project, exit code and output."""

    root: Path
    ret: int
    out: str

    @property
    def stdout(self) -> pytest.LineMatcher:
        return pytest.LineMatcher(self.out.splitlines())

    def run(self) -> Run:
        return Store(self.root / ".prove").load("latest")


def sessions_in_one_process(base: Path, projects: Mapping[str, Mapping[str, str]],
                            args: Mapping[str, Sequence[str]],
                            env: Mapping[str, Mapping[str, str | None]] | None = None,
                            process_env: Mapping[str, str] | None = None,
                            reset: Collection[str] = (),
                            ) -> dict[str, Session]:
    """Each project (name: {file name: text}) written under ``base`` and run by a pytest
    session of its own, in the order given, all in ONE subprocess: the sessions of a
    capturing process share its global tracer provider (set once a process, and never reset
    in this test process: OpenTelemetry has no public way to), so each scenario that starts
    from no provider set, or from the one an earlier session installed, can share one
    interpreter's start-up and one import of the SDK and the instrumented libraries, the cost
    of these tests.  A session named in ``reset`` starts with the global provider unset, as
    OpenTelemetry's own tests unset it (its private globals: in the subprocess only), so
    that its conftest can set a provider of the user's as in a process of its own.  The
    subprocess gets the environment pytester gives its sessions
    (:data:`conftest.INNER_PLUGINS`, no colour), then ``process_env``; each session also
    ``env[name]``."""
    for name, files in projects.items():
        for file, text in files.items():
            path = base / name / file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    plan = [{"root": str(base / name), "args": list(args.get(name, ())),
             "env": dict((env or {}).get(name, {})), "reset": name in reset}
            for name in projects]
    (base / "sessions.json").write_text(json.dumps(plan))
    (base / "driver.py").write_text(DRIVER)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environ.update({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTEST_ADDOPTS": INNER_PLUGINS,
                    "PY_COLORS": "0", "HOME": str(base), **(process_env or {})})
    done = subprocess.run([sys.executable, str(base / "driver.py"), str(base / "sessions.json")],
                          cwd=base, env=environ, capture_output=True, text=True, timeout=300,
                          check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith("CODES ")), None)
    assert line is not None, done.stdout + done.stderr
    codes = json.loads(line[len("CODES "):])
    return {name: Session(base / name, code, (base / name / "out.txt").read_text())
            for name, code in zip(projects, codes, strict=True)}


#: The scenarios that start from no tracer provider set (or from the one pytest-prove
#: installed in an earlier session), in one process: first a session that does not capture
#: (so its probe can tell that it imported no SDK), then the ini's capture (whose probe sees
#: the SDK imported), then spans through the global API, then spans no episode took.  All
#: with OTEL_TRACES_SAMPLER=always_off, for the user's exporters: it is not for the provider
#: pytest-prove installs (in the ini's session) to feed episodes.
#: Then, in the same process, each from no provider set (:data:`FRESH`: the global provider
#: unset before it, as in a process of its own, where each was before) and without
#: OTEL_TRACES_SAMPLER: a provider of the user's own that takes the processor, one that takes
#: none, one whose processors run in threads, one whose sampler drops spans, and the SDK
#: switched off (last: it asks for the openai instrumentor).
ONE_PROCESS = ("without-capture", "ini", "spans", "usage",
               "users-provider", "vendor", "threads", "sampler", "sdk-off")
FRESH = ONE_PROCESS[4:]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Session]:
    without = textwrap.dedent("""
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"],
                       id=None)
        def test_agent(prove_seed):
            return prove.Episode("resolved")
    """)
    captured = AGENT.replace("CAPTURE", "capture={}")
    projects = {
        "without-capture": {"pytest.ini": INI, "test_agent.py": without,
                            "conftest.py": SDK_PROBE},
        "ini": {"pytest.ini": INI + "prove_capture = true\n",
                "test_agent.py": AGENT.replace("CAPTURE", "id=None"), "conftest.py": SDK_PROBE},
        "spans": {"pytest.ini": INI, "test_agent.py": captured},
        "usage": {"pytest.ini": INI, "test_pooled.py": POOL},
        "users-provider": {"pytest.ini": INI, "test_agent.py": captured,
                           "conftest.py": USER_PROVIDER},
        "vendor": {"pytest.ini": INI, "test_agent.py": captured, "conftest.py": VENDOR_PROVIDER},
        "threads": {"pytest.ini": INI, "test_agent.py": captured,
                    "conftest.py": THREADED_PROVIDER},
        "sampler": {"pytest.ini": INI, "test_agent.py": captured,
                    "conftest.py": SAMPLING_PROVIDER},
        "sdk-off": {"pytest.ini": INI, "test_agent.py": AGENT.replace(
            "CAPTURE", 'capture={"instrument": ["openai"]}')},
    }
    assert tuple(projects) == ONE_PROCESS
    env: dict[str, dict[str, str | None]] = {
        name: {"OTEL_TRACES_SAMPLER": None} for name in FRESH}
    env["sdk-off"]["OTEL_SDK_DISABLED"] = "true"
    return sessions_in_one_process(
        tmp_path_factory.mktemp("one-process"), projects,
        dict.fromkeys(ONE_PROCESS, ("-p", "no:xdist")), env,
        process_env={"OTEL_TRACES_SAMPLER": "always_off"}, reset=FRESH)


def _check(where: pytest.Pytester | Session, how: str = "installed") -> None:
    run = where.run() if isinstance(where, Session) else load(where)
    captured = [r for r in run.episodes if r["rollout"] != "uncaptured"]
    assert len(captured) == 24
    for record in captured:
        # Its own seed's usage (a mix-up between replicates would show), the calls once each
        # and not again from the agent span.
        assert record["tokens"] == _expected(record["seed"]), record["seed"]
        assert sorted(s["name"] for s in record["spans"]) == [
            "chat sim-model", "chat sim-model", "invoke_agent support"]
    assert len({r["seed"] for r in captured}) == 24
    for record in (r for r in run.episodes if r["rollout"] == "uncaptured"):
        assert record["tokens"] is None and "spans" not in record
    assert run.manifest["capture"] == {"global": how, "instrumented": [], "missing": {}}


@pytest.mark.slow  # a subprocess, or xdist workers
@pytest.mark.parametrize("args", [["-p", "no:xdist"], ["-n", "2", "--prove-concurrency", "4"],
                                  ["-p", "no:xdist", "--prove-concurrency", "4"]],
                         ids=["one-process", "xdist-blocks", "one-process-window"])
def test_spans_through_the_global_api_are_stored_per_episode(
        pytester: pytest.Pytester, request: pytest.FixtureRequest, args: list[str]) -> None:
    """In one process with OTEL_TRACES_SAMPLER=always_off set, for the user's exporters: it
    is not for the provider that only feeds episodes (before: always_off there stored no
    span and no token, and the first line still said spans were stored).  This was
    test_a_sampler_in_the_environment_does_not_thin_the_provider_pytest_prove_installs, a
    subprocess of its own; a process capturing without it is test_two_sessions_in_one_
    process_share_one_inert_processor's, and the xdist workers'.  The one-process session
    is one of :data:`ONE_PROCESS`, after the ini's, whose session installed the provider
    with always_off set (and stored every episode's tokens: that test's check)."""
    result: pytest.RunResult | Session
    if "-n" in args:
        _agent(pytester)
        result = capture_session(pytester, *args)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        _check(pytester)
    else:
        result = request.getfixturevalue("one_process")["spans"]
        assert result.ret == pytest.ExitCode.OK, result.out
        _check(result)
    result.stdout.fnmatch_lines([
        "pytest-prove capture: spans through the global OpenTelemetry API stored with each "
        "episode (in a tracer provider pytest-prove installed: none was set)",
        "*tokens: * input and * output in 48 calls (sim-model)*"])


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_the_ini_can_switch_capture_on_for_every_rollout(
        one_process: dict[str, Session]) -> None:
    """And a session that captures imports the OpenTelemetry SDK (SDK_PROBE: what shows
    that test_a_session_without_capture_never_imports_the_sdk's probe can see it; was that
    test's [with-capture] case, a subprocess of its own).  One of :data:`ONE_PROCESS`, the
    first that captures: its session installs the provider, with always_off set."""
    result = one_process["ini"]
    assert result.ret == pytest.ExitCode.OK, result.out
    run = result.run()
    assert all(r["tokens"] == _expected(r["seed"]) for r in run.episodes)
    assert (result.root / "sdk.txt").read_text() == "True"


#: The user's own SDK provider, installed by a session fixture (so after collection), with an
#: exporter of theirs that must still see every span.
USER_PROVIDER = textwrap.dedent(
    """
    import pytest
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    EXPORTER = InMemorySpanExporter()


    @pytest.fixture(scope="session", autouse=True)
    def telemetry():
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
        yield
        with open("exported.txt", "w") as fh:
            fh.write(str(len(EXPORTER.get_finished_spans())))
    """
)


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_the_users_provider_gets_the_processor(one_process: dict[str, Session]) -> None:
    """One of :data:`FRESH` (was a subprocess of its own)."""
    result = one_process["users-provider"]
    assert result.ret == pytest.ExitCode.OK, result.out
    _check(result, how="added")
    result.stdout.fnmatch_lines(["pytest-prove capture: spans through the global OpenTelemetry "
                                 "API stored with each episode (added to your tracer provider)"])
    # The user's exporter saw every span too: 3 an episode, 26 episodes.
    assert (result.root / "exported.txt").read_text() == str(3 * 26)


#: A provider of another kind, set as conftest.py is imported.
VENDOR_PROVIDER = textwrap.dedent(
    """
    from opentelemetry import trace

    class VendorProvider(trace.NoOpTracerProvider):
        pass

    trace.set_tracer_provider(VendorProvider())
    """
)


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_a_provider_that_takes_no_processor_is_said_and_the_run_goes_on(
        one_process: dict[str, Session]) -> None:
    """One of :data:`FRESH` (was a subprocess of its own)."""
    result = one_process["vendor"]
    assert result.ret == pytest.ExitCode.OK, result.out
    result.stdout.fnmatch_lines([
        "pytest-prove capture: spans through the global OpenTelemetry API are not captured: the "
        "global tracer provider is conftest.VendorProvider, which takes no span processor *; "
        "the run goes on without them",
        "capture: spans through the global OpenTelemetry API were not captured; see the "
        "manifest's capture.global"])
    run = result.run()
    assert all(r["tokens"] is None for r in run.episodes)
    assert "conftest.VendorProvider" in run.manifest["capture"]["global"]


#: Two sessions in one process, as pytester's in-process runs make them: the second finds the
#: provider the first installed and takes up the same processor, which neither session leaves
#: active.
TWICE = textwrap.dedent(
    """
    import json
    import sys

    import pytest
    from opentelemetry import trace

    from pytest_prove.traces import _otel

    found = []
    for _ in range(2):
        code = pytest.main(["-q", "-p", "no:xdist", "-p", "no:cacheprovider"])
        provider = trace.get_tracer_provider()
        processors = provider._active_span_processor._span_processors  # the test's peek
        found.append({"code": int(code), "processors": len(processors),
                      "users": [p.users for p in processors]})
    print("RESULT " + json.dumps(found))
    """
)


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_two_sessions_in_one_process_share_one_inert_processor(
        pytester: pytest.Pytester) -> None:
    _agent(pytester)
    pytester.makepyfile(twice=TWICE)
    done = subprocess.run([sys.executable, "twice.py"], cwd=pytester.path, capture_output=True,
                          text=True, timeout=240, check=False)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    assert json.loads(line[len("RESULT "):]) == [{"code": 0, "processors": 1, "users": [0]}] * 2
    runs = sorted(p for p in (pytester.path / ".prove" / "runs").iterdir() if p.is_dir())
    assert len(runs) == 2
    for run in runs:
        records = Store(pytester.path / ".prove").read(run).episodes
        captured = [r for r in records if r["rollout"] != "uncaptured"]
        assert len(captured) == 24
        assert all(r["tokens"] == _expected(r["seed"]) for r in captured)


#: Writes, as the session ends, whether the OpenTelemetry SDK was imported.
SDK_PROBE = textwrap.dedent(
    """
    import sys

    def pytest_unconfigure(config):
        with open("sdk.txt", "w") as fh:
            fh.write(str("opentelemetry.sdk.trace" in sys.modules))
    """
)


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
@pytest.mark.parametrize(("capture", "imported"), [("id=None", "False")],
                         ids=["without-capture"])  # with capture: the ini test above
def test_a_session_without_capture_never_imports_the_sdk(one_process: dict[str, Session],
                                                         capture: str, imported: str) -> None:
    """The first session of :data:`ONE_PROCESS` (its project's rollout says ``capture``),
    so that nothing before it in its process imported the SDK."""
    result = one_process["without-capture"]
    assert result.ret == pytest.ExitCode.OK, result.out
    assert capture in (result.root / "test_agent.py").read_text()
    assert (result.root / "sdk.txt").read_text() == imported


# ---------------------------------------------------------------------------
# settings checked at collection (nothing captures here: these run in process)


def test_a_bad_capture_table_in_a_spec_stops_collection(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(agent="def run(cfg, seed):\n    return None\n")
    pytester.makefile(".toml", prove_sweep=textwrap.dedent("""
        target = "agent:run"
        replicates = 2

        [declare]
        failures = ["unresolved"]
        successes = ["resolved"]

        [capture]
        instrument = "openai"
    """))
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "no:xdist")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines([
        "*prove_sweep.toml:8: [[]capture[]]: instrument must be a list of instrumentor names*"
        "got 'openai'*"])
    result.assert_outcomes(errors=1)


def test_a_bad_capture_on_the_decorator_stops_collection(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_agent=textwrap.dedent("""
        import pytest_prove as prove

        @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"],
                       capture={"instrument": ["openai"], "contents": True})
        def test_agent(prove_seed):
            return prove.Episode("resolved")
    """))
    result = pytester.runpytest("-p", "no:xdist")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting test_agent.py*",
                                 "test_agent.py:3: in <module>",
                                 "*capture=: unknown capture key 'contents'; known keys: "
                                 "instrument, content, max_observation_bytes*"])
    # The user's line and the message; not the plugin's frames that found it (before:
    # api.py, the dataclass's __init__ and spec.py's __post_init__ were shown).
    result.stdout.no_fnmatch_line("*pytest_prove[/\\]*.py:*")
    result.stdout.no_fnmatch_line("*in __post_init__*")
    result.assert_outcomes(errors=1)


@pytest.mark.parametrize(("line", "message"), [
    ("prove_capture_max_observation_bytes = lots",
     "*ini option prove_capture_max_observation_bytes: expected a whole number >= 16, got "
     "'lots'*"),
    ("prove_capture_max_observation_bytes = 8",
     "*ini option prove_capture_max_observation_bytes: expected a whole number >= 16, got "
     "'8'*"),
    ("prove_capture_content = maybe",
     "*ini option prove_capture_content: expected true or false (invalid truth value "
     "'maybe')*"),
    ("prove_capture = sometimes",
     "*ini option prove_capture: expected true or false (invalid truth value 'sometimes')*"),
], ids=["bytes-word", "bytes-small", "content", "capture"])
def test_bad_capture_ini_values_stop_the_session_before_it_runs(
        pytester: pytest.Pytester, line: str, message: str) -> None:
    _agent(pytester, ini=line + "\n")
    result = pytester.runpytest("-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert not (pytester.path / ".prove").exists()


# ---------------------------------------------------------------------------
# what keeps spans from episodes is said, never a silent loss of tokens


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_the_sdk_switched_off_is_said(one_process: dict[str, Session]) -> None:
    """OTEL_SDK_DISABLED=true: no provider records a span (before: pytest-prove installed
    one anyway and said spans were stored with each episode; none was).  The last of
    :data:`FRESH` (was a subprocess of its own)."""
    result = one_process["sdk-off"]
    assert 'capture={"instrument": ["openai"]}' in (result.root / "test_agent.py").read_text()
    assert result.ret == pytest.ExitCode.OK, result.out
    result.stdout.fnmatch_lines([
        "pytest-prove capture: spans through the global OpenTelemetry API are not captured: "
        "OTEL_SDK_DISABLED is true, so the OpenTelemetry SDK records no span; unset it to "
        "capture; the run goes on without them",
        "pytest-prove capture: instrumentor 'openai' is not recording: OTEL_SDK_DISABLED is "
        "true*"])
    result.stdout.no_fnmatch_line("*stored with each episode*")
    capture = result.run().manifest["capture"]
    assert capture["global"].startswith("OTEL_SDK_DISABLED is true")
    assert capture["missing"]["openai"].startswith("not recording: OTEL_SDK_DISABLED")


#: The SDK's provider with its processors called in threads of its own.
THREADED_PROVIDER = textwrap.dedent(
    """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ConcurrentMultiSpanProcessor, TracerProvider

    trace.set_tracer_provider(
        TracerProvider(active_span_processor=ConcurrentMultiSpanProcessor()))
    """
)


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_a_provider_whose_processors_run_in_threads_is_said(
        one_process: dict[str, Session]) -> None:
    """The SDK's ConcurrentMultiSpanProcessor calls processors in threads of its own, where
    no episode's context is (before: the processor was added, every span was lost, and the
    first line said spans were stored).  One of :data:`FRESH` (was a subprocess of its
    own)."""
    result = one_process["threads"]
    assert result.ret == pytest.ExitCode.OK, result.out
    result.stdout.fnmatch_lines([
        "pytest-prove capture: spans through the global OpenTelemetry API are not captured: the "
        "global tracer provider opentelemetry.sdk.trace.TracerProvider runs its span "
        "processors in threads of its own (active_span_processor=ConcurrentMultiSpanProcessor)"
        "*; the run goes on without them"])
    assert "ConcurrentMultiSpanProcessor" in result.run().manifest["capture"]["global"]


#: The SDK's provider with a sampler that records a quarter of the traces.
SAMPLING_PROVIDER = textwrap.dedent(
    """
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    trace.set_tracer_provider(TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.25))))
    """
)


@pytest.mark.slow  # a subprocess: the global tracer provider is set once a process
def test_a_sampler_of_the_users_provider_that_drops_spans_is_said(
        one_process: dict[str, Session]) -> None:
    """One of :data:`FRESH` (was a subprocess of its own)."""
    result = one_process["sampler"]
    assert result.ret == pytest.ExitCode.OK, result.out
    result.stdout.fnmatch_lines([
        "pytest-prove capture: spans through the global OpenTelemetry API stored with each "
        "episode (added to your tracer provider)",
        "pytest-prove capture: your tracer provider's sampler (ParentBased{root:TraceIdRatio"
        "Based{0.25}*) may leave spans unrecorded; their usage is not counted*",
        "capture: your tracer provider's sampler (ParentBased*) may have left spans "
        "unrecorded, and their usage uncounted"])
    assert result.run().manifest["capture"]["sampler"].startswith(
        "ParentBased{root:TraceIdRatioBased{0.25}")


#: A rollout that calls its model in a thread pool, which does not copy the context.
POOL = textwrap.dedent(
    """
    from concurrent.futures import ThreadPoolExecutor

    import pytest_prove as prove
    from opentelemetry import trace

    tracer = trace.get_tracer("pooled-agent")


    def chat(tokens):
        with tracer.start_as_current_span("chat sim-model") as chat:
            chat.set_attribute("gen_ai.request.model", "sim-model")
            chat.set_attribute("gen_ai.usage.input_tokens", tokens)


    @prove.rollout(replicates=3, failures=["unresolved"], successes=["resolved"], capture={})
    def test_pooled(prove_seed):
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(chat, [10, 20]))
        return prove.Episode("resolved")


    def test_plain():
        chat(7)  # a plain test of the same session, between capturing items: not a loss


    @prove.rollout(replicates=2, failures=["unresolved"], successes=["resolved"],
                   id="uncaptured")
    def test_uncaptured(prove_seed):
        chat(5)  # not captured: not a loss
        return prove.Episode("resolved")


    @prove.rollout(replicates=1, failures=["unresolved"], successes=["resolved"], capture={},
                   id="last")
    def test_last(prove_seed):
        return prove.Episode("resolved")
    """
)


@pytest.mark.slow  # a subprocess, or xdist workers
@pytest.mark.parametrize("args", [["-p", "no:xdist"], ["-n", "2"]],
                         ids=["one-process", "xdist"])
def test_usage_spans_no_episode_took_are_counted_and_said(
        pytester: pytest.Pytester, request: pytest.FixtureRequest, args: list[str]) -> None:
    """Spans started in a thread without the episode's context are no episode's: their
    tokens are not counted, and the session says how many (before: nothing said).  In one
    process: the last session of :data:`ONE_PROCESS`, whose earlier sessions' spans are not
    counted again."""
    result: pytest.RunResult | Session
    if "-n" in args:
        pytester.makeini(INI)
        pytester.makepyfile(test_pooled=POOL)
        result = capture_session(pytester, *args)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        run = load(pytester)
    else:
        result = request.getfixturevalue("one_process")["usage"]
        assert result.ret == pytest.ExitCode.OK, result.out
        run = result.run()
    result.stdout.fnmatch_lines([
        "capture: 6 span(s) with token usage were started outside any episode (in a thread "
        "that did not copy the episode's context? *); their own usage is counted in no "
        "episode"])
    assert run.manifest["capture"]["lost"] == {"outside": 6}
    assert all(r["tokens"] is None for r in run.episodes)
