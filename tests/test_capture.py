"""Spans reach the episode that started them, without content, each value bounded, and their
usage counts once per model call."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from pytest_prove.declare.spec import Declaration, SpecError
from pytest_prove.running.endings import close_log
from pytest_prove.running.recording import EpisodeLog, recording
from pytest_prove.store.writer import dump_line
from pytest_prove.traces import _otel
from pytest_prove.traces._otel import EpisodeSpanProcessor
from pytest_prove.traces.capture import CaptureConfig, CaptureError, _not_installed


@pytest.fixture
def tracer() -> object:
    provider = TracerProvider()
    processor = EpisodeSpanProcessor()
    processor.users = 1  # a session uses it
    provider.add_span_processor(processor)
    return provider.get_tracer("test")


def test_content_is_dropped_and_values_are_bounded(tracer: object) -> None:
    log = EpisodeLog(capture=CaptureConfig(max_observation_bytes=64))
    with recording(log), tracer.start_as_current_span("chat m") as span:  # type: ignore[attr-defined]
        span.set_attribute("gen_ai.request.model", "m")
        span.set_attribute("gen_ai.usage.prompt_tokens", 11)  # the older names
        span.set_attribute("gen_ai.usage.completion_tokens", 3)
        span.set_attribute("gen_ai.prompt.0.content", "a secret prompt")
        span.set_attribute("gen_ai.input.messages", "a secret prompt")
        span.set_attribute("note", "x" * 1000)
    (stored,) = log.spans
    attributes = stored["attributes"]
    assert "gen_ai.prompt.0.content" not in attributes
    assert "gen_ai.input.messages" not in attributes
    assert len(attributes["note"].encode()) <= 64 and attributes["note"].endswith("more bytes]")
    assert log.usage == [{"model": "m", "input": 11, "output": 3, "source": "span",
                          "response_model": None, "span": stored["span_id"]}]


def test_values_the_store_cannot_write_are_stored_as_text(tracer: object) -> None:
    """A lone surrogate (text decoded with surrogateescape) or a float JSON has no number for,
    anywhere in a span, neither breaks the rollout that ends the span nor the store's
    writing of the episode (before: UnicodeEncodeError raised out of ``span.end()`` into the
    rollout; NaN an INTERNALERROR when the episode was written)."""
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log), tracer.start_as_current_span("chat \ud800") as span:  # type: ignore[attr-defined]
        span.set_attribute("gen_ai.request.model", "m\udcff")
        span.set_attribute("gen_ai.usage.input_tokens", 5)
        span.set_attribute("gen_ai.request.temperature", float("nan"))
        span.set_attribute("scores", [1.5, float("inf")])
        span.set_attribute("tool.output", "bytes \udcff")
        span.set_attribute("names", ["a\ud800", "b"])
        span.add_event("retry \ud800", {"wait": float("-inf")})
    record: dict[str, object] = {}
    close_log(log, record)
    dump_line(record).encode()  # what the store does with every episode
    (stored,) = log.spans
    assert stored["name"] == "chat \\ud800"
    assert stored["attributes"]["gen_ai.request.temperature"] == "nan"
    assert stored["attributes"]["scores"] == [1.5, "inf"]
    assert stored["attributes"]["names"] == ["a\\ud800", "b"]
    assert stored["events"] == [{"name": "retry \\ud800", "attributes": {"wait": "-inf"}}]
    assert record["tokens"] == {"input": 5, "output": 0,  # type: ignore[comparison-overlap]
                                "by_model": {"m\\udcff": {"input": 5, "output": 0, "calls": 1}}}


def test_keys_and_event_names_are_bounded_too(tracer: object) -> None:
    """max_observation_bytes bounds every stored text, not only attribute values (before: a
    100 kB attribute key or event name was stored whole)."""
    log = EpisodeLog(capture=CaptureConfig(max_observation_bytes=64))
    with recording(log), tracer.start_as_current_span("chat") as span:  # type: ignore[attr-defined]
        span.set_attribute("k" * 100_000, 1)
        span.add_event("e" * 100_000, {"a" * 100_000: "v"})
    size = len(dump_line(log.spans[0]).encode())
    assert size < 1000, size


def test_content_kept_when_asked(tracer: object) -> None:
    log = EpisodeLog(capture=CaptureConfig(content=True))
    with recording(log), tracer.start_as_current_span("chat") as span:  # type: ignore[attr-defined]
        span.set_attribute("gen_ai.input.messages", "hello")
    assert log.spans[0]["attributes"]["gen_ai.input.messages"] == "hello"


def test_no_episode_or_no_capture_stores_nothing(tracer: object) -> None:
    with tracer.start_as_current_span("outside"):  # type: ignore[attr-defined]
        pass
    log = EpisodeLog()  # the rollout asked for no capture
    with recording(log), tracer.start_as_current_span("inside"):  # type: ignore[attr-defined]
        pass
    assert log.spans == []


def test_concurrent_tasks_keep_their_own_spans(tracer: object) -> None:
    async def episode(n: int) -> EpisodeLog:
        log = EpisodeLog(capture=CaptureConfig())
        with recording(log):
            for i in range(n):
                with tracer.start_as_current_span(f"ep{n}-{i}"):  # type: ignore[attr-defined]
                    await asyncio.sleep(0.001 * (5 - n))
        return log

    async def main() -> list[EpisodeLog]:
        return list(await asyncio.gather(*(episode(n) for n in range(1, 5))))

    for n, log in enumerate(asyncio.run(main()), start=1):
        assert [s["name"] for s in log.spans] == [f"ep{n}-{i}" for i in range(n)]


def test_bad_capture_settings_name_the_key() -> None:
    with pytest.raises(CaptureError, match=r"spec\.toml: instrument must be a list"):
        CaptureConfig.from_mapping({"instrument": "openai"}, "spec.toml")
    with pytest.raises(CaptureError, match="unknown capture key 'contents'"):
        CaptureConfig.from_mapping({"contents": False}, "spec.toml")


# ---------------------------------------------------------------------------
# usage counted once per model call


def _set_usage(span: object, model: str, tokens_in: int, tokens_out: int) -> None:
    span.set_attribute("gen_ai.request.model", model)  # type: ignore[attr-defined]
    span.set_attribute("gen_ai.usage.input_tokens", tokens_in)  # type: ignore[attr-defined]
    span.set_attribute("gen_ai.usage.output_tokens", tokens_out)  # type: ignore[attr-defined]


def _tokens_of(log: EpisodeLog) -> dict[str, object] | None:
    record: dict[str, object] = {}
    close_log(log, record)
    return record["tokens"]  # type: ignore[return-value]


def test_an_agent_span_summing_its_calls_is_not_counted_again(tracer: object) -> None:
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log), tracer.start_as_current_span("invoke_agent") as agent:  # type: ignore[attr-defined]
        for tokens_in, tokens_out in ((100, 10), (200, 20)):
            with tracer.start_as_current_span("chat m") as chat:  # type: ignore[attr-defined]
                _set_usage(chat, "m", tokens_in, tokens_out)
        _set_usage(agent, "m", 300, 30)  # the framework's aggregate
    assert _tokens_of(log) == {"input": 300, "output": 30,
                               "by_model": {"m": {"input": 300, "output": 30, "calls": 2}}}
    assert len(log.spans) == 3  # every span is stored; only the count leaves one out


def test_a_framework_span_and_the_client_span_of_one_call_count_once(tracer: object) -> None:
    """framework agent (aggregate) > framework chat (usage) > tool-less client chat (usage),
    with a span without usage between the agent and its chats: two calls."""
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log), tracer.start_as_current_span("invoke_agent") as agent:  # type: ignore[attr-defined]
        with tracer.start_as_current_span("agent step"):  # type: ignore[attr-defined]
            for tokens_in in (100, 200):
                with tracer.start_as_current_span("chat m") as framework:  # type: ignore[attr-defined]
                    with tracer.start_as_current_span("chat m") as client:  # type: ignore[attr-defined]
                        _set_usage(client, "m-2025", tokens_in, 1)
                    _set_usage(framework, "m", tokens_in, 1)
        _set_usage(agent, "m", 300, 2)
    assert _tokens_of(log) == {"input": 300, "output": 2,
                               "by_model": {"m-2025": {"input": 300, "output": 2, "calls": 2}}}


def test_calls_side_by_side_all_count_and_the_order_of_ends_does_not_matter(
        tracer: object) -> None:
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log):
        agent = tracer.start_span("invoke_agent")  # type: ignore[attr-defined]
        context = trace.set_span_in_context(agent)
        chats = [tracer.start_span("chat m", context=context) for _ in range(3)]  # type: ignore[attr-defined]
        _set_usage(agent, "m", 999, 99)
        agent.end()  # the parent ends before its children
        for chat in chats:
            _set_usage(chat, "m", 5, 1)
            chat.end()
    assert _tokens_of(log) == {"input": 15, "output": 3,
                               "by_model": {"m": {"input": 15, "output": 3, "calls": 3}}}


def test_a_span_started_in_a_thread_without_the_context_goes_with_its_parent(
        tracer: object) -> None:
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log), tracer.start_as_current_span("invoke_agent") as agent:  # type: ignore[attr-defined]
        parent = trace.set_span_in_context(agent)

        def call() -> None:  # a plain thread: no episode in its context
            with tracer.start_as_current_span("chat m", context=parent) as chat:  # type: ignore[attr-defined]
                _set_usage(chat, "m", 7, 1)

        thread = threading.Thread(target=call)
        thread.start()
        thread.join()
        _set_usage(agent, "m", 7, 1)
    assert [s["name"] for s in log.spans] == ["chat m", "invoke_agent"]
    assert _tokens_of(log) == {"input": 7, "output": 1,
                               "by_model": {"m": {"input": 7, "output": 1, "calls": 1}}}


def test_spans_after_the_episode_ended_are_left_out(tracer: object) -> None:
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log):
        late = tracer.start_span("left running")  # type: ignore[attr-defined]
        with tracer.start_as_current_span("chat m") as chat:  # type: ignore[attr-defined]
            _set_usage(chat, "m", 5, 1)
    tokens = _tokens_of(log)  # the episode's record is made here
    with recording(log):
        _set_usage(late, "m", 1000, 1000)
        late.end()
        with tracer.start_as_current_span("after") as after:  # type: ignore[attr-defined]
            _set_usage(after, "m", 1000, 1000)
    assert tokens == {"input": 5, "output": 1,
                      "by_model": {"m": {"input": 5, "output": 1, "calls": 1}}}
    assert [s["name"] for s in log.spans] == ["chat m"]
    assert len(log.usage) == 1


def test_stored_spans_are_bounded_and_the_rest_still_count(
        tracer: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_otel, "MAX_SPANS", 3)
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log):
        for _ in range(5):
            with tracer.start_as_current_span("chat m") as chat:  # type: ignore[attr-defined]
                _set_usage(chat, "m", 2, 1)
    record: dict[str, object] = {}
    close_log(log, record)
    assert len(record["spans"]) == 3 and record["spans_dropped"] == 2  # type: ignore[arg-type]
    assert record["tokens"] == {"input": 10, "output": 5,
                                "by_model": {"m": {"input": 10, "output": 5, "calls": 5}}}


def test_a_released_processor_does_nothing() -> None:
    provider = TracerProvider()
    processor = EpisodeSpanProcessor()
    provider.add_span_processor(processor)
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log), provider.get_tracer("t").start_as_current_span("chat"):
        pass
    assert log.spans == [] and log.parents == {}


def test_capture_settings_are_checked_where_they_are_declared() -> None:
    with pytest.raises(SpecError, match=r"capture=: instrument must be a list"):
        Declaration(failures=("x",), capture={"instrument": "openai"})
    with pytest.raises(SpecError, match=r"capture=: capture must be a table"):
        Declaration(failures=("x",), capture=["openai"])  # type: ignore[arg-type]
    assert Declaration(failures=("x",), capture={}).capture == CaptureConfig()


def test_an_instrumentor_not_installed_is_named_with_a_close_name() -> None:
    why = _not_installed("opneai", {"openai": object(), "httpx": object()})
    assert why == ("not installed: no opentelemetry_instrumentor entry point named 'opneai' "
                   "(installed: httpx, openai); did you mean 'openai'?")


def test_spans_with_usage_no_episode_takes_are_counted() -> None:
    """``lost`` counts spans with usage started outside every episode, and those ended or
    started after their episode's record; not spans without usage, nor a rollout's that
    does not capture, nor the session's own between items (before: a plain test's)."""
    provider = TracerProvider()
    processor = EpisodeSpanProcessor()
    processor.users = 1
    provider.add_span_processor(processor)
    tracer: Any = provider.get_tracer("test")
    log = EpisodeLog(capture=CaptureConfig())
    with recording(log):
        late = tracer.start_span("left running")
    close_log(log, {})  # the episode's record is made here
    with recording(log):
        _set_usage(late, "m", 1, 1)
        late.end()
        with tracer.start_as_current_span("after") as after:
            _set_usage(after, "m", 1, 1)
    with tracer.start_as_current_span("between items") as between:
        _set_usage(between, "m", 1, 1)  # the session's own code: not a loss
    processor.watching = 1  # a capturing item runs its episodes
    with tracer.start_as_current_span("outside") as outside:
        _set_usage(outside, "m", 1, 1)
    with tracer.start_as_current_span("no usage"):
        pass
    with recording(EpisodeLog()), tracer.start_as_current_span("uncaptured") as span:
        _set_usage(span, "m", 1, 1)
    assert processor.lost == {"outside": 1, "late": 2}


def test_a_span_goes_with_its_parents_episode_before_the_context_it_runs_in(
        tracer: Any) -> None:
    """A worker task started in the first episode's context (a shared client's queue) serves
    the calls of two episodes running at once, each call under its caller's span: each call
    is its caller's episode's (before: all of them went to the first episode)."""
    from opentelemetry import context as otel_context

    async def main() -> list[EpisodeLog]:
        queue: asyncio.Queue[tuple[Any, int, asyncio.Future[None]]] = asyncio.Queue()
        workers: list[asyncio.Task[None]] = []

        async def serve() -> None:
            while True:
                caller, tokens, done = await queue.get()
                with tracer.start_as_current_span("chat m", context=caller) as chat:
                    _set_usage(chat, "m", tokens, 1)
                done.set_result(None)

        async def episode(n: int) -> EpisodeLog:
            log = EpisodeLog(capture=CaptureConfig())
            with recording(log), tracer.start_as_current_span(f"agent {n}"):
                if not workers:
                    workers.append(asyncio.create_task(serve()))  # in this episode's context
                for _ in range(2):
                    done = asyncio.get_running_loop().create_future()
                    await queue.put((otel_context.get_current(), n, done))
                    await done
            return log

        logs = await asyncio.gather(episode(1), episode(2))
        workers[0].cancel()
        return list(logs)

    for n, log in enumerate(asyncio.run(main()), start=1):
        assert sorted(s["name"] for s in log.spans) == ["agent " + str(n), "chat m", "chat m"]
        assert _tokens_of(log) == {"input": 2 * n, "output": 2,
                                   "by_model": {"m": {"input": 2 * n, "output": 2, "calls": 2}}}
