"""What capture keeps of a span: its bounded attributes and its token usage.

Shared by the pytest side of capture (:mod:`.capture`) and the OpenTelemetry span processor
(:mod:`._otel`), so that neither imports the other; it imports neither pytest nor the
OpenTelemetry SDK.  The settings themselves (:class:`CaptureConfig`) are declared in
:mod:`pytest_prove.declare.capture`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..declare.capture import DEFAULT_MAX_BYTES, CaptureConfig, CaptureError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["CONTENT_ENV", "DEFAULT_MAX_BYTES", "ENTRY_POINT_GROUP", "INSTALLED", "SDK_DISABLED",
           "YOURS", "CaptureConfig", "CaptureError", "sdk_disabled", "span_record",
           "usage_of_span"]

ENTRY_POINT_GROUP: Final = "opentelemetry_instrumentor"
#: How spans of the global OpenTelemetry API reach episodes: through a provider pytest-prove
#: installed (none was set), or through the user's, its processor added.
INSTALLED: Final = "installed"
YOURS: Final = "added"
CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Why nothing is captured when the OpenTelemetry SDK is switched off (its environment
#: variable, which every SDK TracerProvider reads when it is made).
SDK_DISABLED: Final = ("OTEL_SDK_DISABLED is true, so the OpenTelemetry SDK records no span; "
                       "unset it to capture")


def sdk_disabled() -> bool:
    """Whether OTEL_SDK_DISABLED switches the OpenTelemetry SDK off (as the SDK reads it)."""
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"

#: Attribute names that hold prompts, completions, tool arguments and results.
_CONTENT_PREFIXES = (
    "gen_ai.prompt", "gen_ai.completion", "gen_ai.input.messages", "gen_ai.output.messages",
    "gen_ai.system_instructions", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
    "gen_ai.tool.definitions", "llm.prompts", "llm.completions", "llm.input_messages",
    "llm.output_messages", "input.value", "output.value", "traceloop.entity.input",
    "traceloop.entity.output",
    # pydantic-ai's own spans: the run's messages and output, the tools' schemas and calls.
    "pydantic_ai.all_messages", "final_result", "model_request_parameters", "tool_arguments",
    "tool_response",
)
_CONTENT_SUFFIXES = (".content", ".message.content", ".body")


def _is_content(key: str) -> bool:
    return key.startswith(_CONTENT_PREFIXES) or key.endswith(_CONTENT_SUFFIXES)


def _text(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate becomes its escape, ``\\ud800``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _scalar(value: object) -> object:
    """A number, bool or None as stored; a float JSON has no number for (NaN, infinity)
    becomes its text, ``"nan"``, so that the store can write it."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _bounded(value: object, limit: int) -> object:
    """``value`` as stored: JSON-able, UTF-8-able, and at most ``limit`` bytes once
    encoded."""
    if isinstance(value, bool | int | float) or value is None:
        return _scalar(value)
    if isinstance(value, str):
        text = _text(value)
    elif isinstance(value, Sequence):
        items = [_text(v) if isinstance(v, str) else _scalar(v)
                 if isinstance(v, int | float | bool) else _text(str(v)) for v in value]
        encoded = json.dumps(items, ensure_ascii=False)
        if len(encoded.encode()) <= limit:
            return items
        text = encoded
    else:
        text = _text(str(value))
    data = text.encode()
    if len(data) <= limit:
        return text
    note = f"…[{len(data) - limit} more bytes]"
    return data[: max(0, limit - len(note.encode()))].decode("utf-8", "ignore") + note


def _key(key: object, limit: int) -> str:
    bounded = _bounded(str(key), limit)
    assert isinstance(bounded, str)
    return bounded


def _attributes(attributes: Mapping[str, Any] | None, config: CaptureConfig) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if not config.content and _is_content(key):
            continue
        kept[_key(key, config.max_observation_bytes)] = _bounded(
            value, config.max_observation_bytes)
    return kept


def span_record(span: ReadableSpan, config: CaptureConfig, started: float) -> dict[str, Any]:
    """A span as stored with its episode (times in seconds from the episode's start)."""
    context = span.context
    parent = span.parent
    start = (span.start_time or 0) / 1e9
    end = (span.end_time or span.start_time or 0) / 1e9
    record: dict[str, Any] = {
        "name": _bounded(span.name, config.max_observation_bytes),
        "span_id": f"{context.span_id:016x}" if context else None,
        "parent_id": f"{parent.span_id:016x}" if parent else None,
        "start": round(start - started, 6),
        "duration": round(end - start, 6),
        "status": span.status.status_code.name.lower(),
        "attributes": _attributes(span.attributes, config),
    }
    if span.status.description:
        record["status_message"] = _bounded(span.status.description,
                                            config.max_observation_bytes)
    if span.events:
        record["events"] = [{"name": _bounded(e.name, config.max_observation_bytes),
                             "attributes": _attributes(e.attributes, config)}
                            for e in span.events]
    return record


def _int(attributes: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def usage_of_span(attributes: Mapping[str, Any]) -> dict[str, Any] | None:
    """The token usage a span reports under the GenAI semantic conventions, if any."""
    tokens_in = _int(attributes, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
    tokens_out = _int(attributes, "gen_ai.usage.output_tokens",
                      "gen_ai.usage.completion_tokens")
    if tokens_in is None and tokens_out is None:
        return None
    request = attributes.get("gen_ai.request.model")
    response = attributes.get("gen_ai.response.model")
    model = request if isinstance(request, str) and request else (
        response if isinstance(response, str) and response else "unknown")
    return {"model": _text(model), "input": tokens_in or 0, "output": tokens_out or 0,
            "source": "span",
            "response_model": _text(response) if isinstance(response, str) else None}
