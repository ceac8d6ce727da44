"""Spans reach the episode that started them, without content, each value bounded."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry.sdk.trace import TracerProvider

from pytest_prove.running.recording import EpisodeLog, recording
from pytest_prove.traces._otel import EpisodeSpanProcessor
from pytest_prove.traces.capture import CaptureConfig, CaptureError


@pytest.fixture
def tracer() -> object:
    provider = TracerProvider()
    provider.add_span_processor(EpisodeSpanProcessor())
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
                          "response_model": None}]


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
