"""A stand-in for a model provider: an OpenAI-compatible chat endpoint on 127.0.0.1.

Its answer depends only on the request's ``seed`` and its prompt, so that an episode run
twice on one seed gets the same answers: without faults, twins agree.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: The share of (seed, prompt) pairs the model answers badly.
WRONG = {"billing": 0.08, "outage": 0.15}


def _answer(seed: int, prompt: str) -> str:
    ticket = prompt.rsplit(" ", 1)[-1]
    digest = hashlib.blake2b(f"{seed}:{prompt}".encode(), digest_size=8).digest()
    draw = int.from_bytes(digest, "big") / 2**64
    return "wrong" if draw < WRONG.get(ticket, 0.1) else "ok"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        reply = json.dumps({
            "id": "chatcmpl-local", "object": "chat.completion", "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": _answer(int(body.get("seed", 0)), prompt)}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 1, "total_tokens": 21},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        return


@contextmanager
def serve() -> Iterator[str]:
    """Serve on a free port of 127.0.0.1 for the block; yields the base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
