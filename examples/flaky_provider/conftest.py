import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The agent and the local provider sit beside the tests.
sys.path.insert(0, str(Path(__file__).parent))

from provider import serve


@pytest.fixture(scope="session")
def provider_url() -> Iterator[str]:
    """An OpenAI-compatible server on 127.0.0.1, one per process (each xdist worker
    starts its own)."""
    with serve() as url:
        yield url


@pytest.fixture(scope="session")
def client(provider_url: str) -> Any:
    """One openai client per process, retrying a failed call TRIAGE_RETRIES times (2, the
    client's default, unless set)."""
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=provider_url, api_key="local", timeout=10,
                         max_retries=int(os.environ.get("TRIAGE_RETRIES", "2")))
