"""What a rollout asks capture for: ``[capture]`` in a sweep spec, ``capture=`` on
``@prove.rollout``, or the ini options ``prove_capture*``.

Checked where it is declared (a spec when it is read, the decorator when it runs, the ini
when the session is configured), so that a bad setting stops the session at collection,
naming the file or the test, before any episode runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

from ..errors import ProveError

__all__ = ["DEFAULT_MAX_BYTES", "KEYS", "CaptureConfig", "CaptureError"]

DEFAULT_MAX_BYTES: Final = 16384
#: The keys of a ``[capture]`` table.
KEYS: Final = ("instrument", "content", "max_observation_bytes")


class CaptureError(ProveError, ValueError):
    """A capture setting that cannot be used, naming where it was set and the fix."""


@final
@dataclass(frozen=True, slots=True)
class CaptureConfig:
    """What to capture: the spans every episode emits through the global OpenTelemetry API,
    and those of the instrumentors named in ``instrument`` (none is fine); whether prompts
    and completions are kept; the most bytes of any stored value."""

    instrument: tuple[str, ...] = ()
    content: bool = False
    max_observation_bytes: int = DEFAULT_MAX_BYTES

    @classmethod
    def from_mapping(cls, data: object, where: str) -> CaptureConfig:
        """The settings of a ``[capture]`` table (or a ``capture=`` mapping); ``where`` starts
        every error message."""
        if not isinstance(data, Mapping):
            raise CaptureError(f"{where}: capture must be a table of {', '.join(KEYS)}, e.g. "
                               f'{{"instrument": ["openai"]}} (or {{}} for the spans of the '
                               f"global OpenTelemetry API only); got {data!r:.120}")
        unknown = sorted(str(k) for k in set(data) - set(KEYS))
        if unknown:
            raise CaptureError(f"{where}: unknown capture key {unknown[0]!r}; known keys: "
                               f"{', '.join(KEYS)}")
        instrument: Any = data.get("instrument", ())
        if isinstance(instrument, str) or not isinstance(instrument, Sequence) or not all(
                isinstance(n, str) and n.strip() == n and n for n in instrument):
            raise CaptureError(f"{where}: instrument must be a list of instrumentor names "
                               f'(opentelemetry_instrumentor entry points), e.g. ["openai"], '
                               f"or [] for none; got {instrument!r:.120}")
        content = data.get("content", False)
        if not isinstance(content, bool):
            raise CaptureError(f"{where}: content must be true or false, got {content!r:.120}")
        limit = data.get("max_observation_bytes", DEFAULT_MAX_BYTES)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 16:
            raise CaptureError(f"{where}: max_observation_bytes must be a whole number >= 16, "
                               f"got {limit!r:.120}")
        return cls(tuple(dict.fromkeys(instrument)), content, limit)
