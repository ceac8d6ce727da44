"""``--prove-cache``: a sweep's HTTP calls recorded, then answered again with the server
gone; a replay never passes for evidence, never serves one replicate another's responses,
and never stores a secret header."""

from __future__ import annotations

import json
import random
import textwrap
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_prove.cli import main
from pytest_prove.store import Store

from .conftest import JSONHandler, local_server

pytest.importorskip("httpx")
pytest.importorskip("requests")

SECRET = "sk-live-0123456789abcdef"


class Model(JSONHandler):
    """A model server that answers differently on every call (as a model at temperature 1
    does): a replay can only match the recording if it serves the recorded responses."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.calls.append((self.path, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        draw = random.random()
        reply = json.dumps({"answer": "ok" if draw < 0.7 else "no", "draw": draw,
                            "seed": body["seed"],
                            "usage": {"input": random.randint(1, 900)}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "session=cookie-value-42")
        self.send_header("X-Api-Key-Echo", SECRET)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


AGENT = textwrap.dedent(
    f"""
    import os
    import ssl

    import httpx
    import pytest
    import requests
    import pytest_prove as prove

    URL = os.environ["MODEL_URL"]
    # One TLS context for every client: building one loads the system's CA certificates,
    # 20 ms of CPU that each client made here otherwise spent again (none is used: http).
    TLS = ssl.create_default_context()
    HEADERS = {{"Authorization": "Bearer {SECRET}", "api-key": "{SECRET}"}}


    def ask(ticket, seed, turn):
        body = {{"ticket": ticket, "seed": seed, "turn": turn}}
        if turn == 0:
            with httpx.Client(verify=TLS) as client:
                reply = client.post(URL + "/v1/chat", json=body, headers=HEADERS)
        else:
            reply = requests.post(URL + "/v1/chat", json=body, headers=HEADERS, timeout=30)
        reply.raise_for_status()
        return reply.json()


    @prove.rollout(replicates=6, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        first, second = ask(ticket, prove_seed, 0), ask(ticket, prove_seed, 1)
        assert first["seed"] == second["seed"] == prove_seed  # never another's response
        prove.usage("model-a", first["usage"]["input"] + second["usage"]["input"], 7)
        both = first["answer"] == second["answer"] == "ok"
        return prove.Episode("resolved" if both else "unresolved",
                             meta={{"draws": [first["draw"], second["draw"]]}})
    """
)


@pytest.fixture
def model() -> Iterator[ThreadingHTTPServer]:
    with local_server(Model) as server:
        yield server


def _project(pytester: pytest.Pytester, server: ThreadingHTTPServer,
             monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("MODEL_URL", f"http://127.0.0.1:{server.server_address[1]}")
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\n")
    pytester.makepyfile(test_agent=AGENT)
    return pytester


def _endings(pytester: pytest.Pytester, name: str, rollout: str | None = None
             ) -> dict[tuple[str, int], tuple[object, ...]]:
    """Each episode of the run ``name`` (of the rollout ``rollout`` only, if given)."""
    return {(str(r["condition_key"]), int(r["replicate"])): (
        r["seed"], r["outcome"], dict(r["tokens"] or {}).get("input"),
        tuple((r.get("meta") or {}).get("draws") or ()), bool(r.get("replayed")))
        for r in Store(pytester.path / ".prove").open(name).episodes
        if rollout is None or r["rollout"] == rollout}


def _everything_stored(root: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace")
                     for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("workers", [
    # a second or more of CPU (bench/suite_time.py), with the checks of
    # _a_replay_is_not_evidence_and_a_miss_names_the_call (a slow test of its own before)
    pytest.param([], id="one-process", marks=pytest.mark.slow),
    # Two workers, four replicates at once in each: the sessions of
    # test_a_real_openai_client_replays_under_xdist_with_concurrency, whose project holds
    # this agent too (a pair of xdist sessions of its own, merged into those).
])
def test_a_recorded_sweep_replays_with_the_server_gone(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], workers: list[str]) -> None:
    """Its recorded run and replay are also _a_replay_is_not_evidence_and_a_miss_names_the_call's
    (a test of its own, which recorded and replayed the same sweep again)."""
    with local_server(Model) as server:
        _project(pytester, server, monkeypatch)
        recorded = pytester.runpytest("-p", "no:randomly", "--prove-cache=record",
                                      "--prove-name=recorded", *workers)
        assert recorded.ret == pytest.ExitCode.OK, recorded.stdout.str()
        calls = len(server.calls)  # type: ignore[attr-defined]
    assert calls == 24  # 12 episodes, two calls each, all of them to the server
    # The server is gone: a call that reached the network would fail the episode.
    replayed = pytester.runpytest("-p", "no:randomly", "--prove-cache=replay",
                                  "--prove-name=replayed", *workers)
    assert replayed.ret == pytest.ExitCode.OK, replayed.stdout.str()
    _check_the_replay(pytester)
    _a_replay_is_not_evidence_and_a_miss_names_the_call(pytester, capsys)


def _check_the_replay(pytester: pytest.Pytester) -> None:
    """What a replay of AGENT's recorded run (named 'recorded', its replay 'replayed') must
    hold: every episode ended as recorded, on the very draws, and no secret was stored."""
    before, after = (_endings(pytester, name, rollout="test_agent.py::test_agent")
                     for name in ("recorded", "replayed"))
    assert before.keys() == after.keys() and len(before) == 12
    for key in before:
        assert after[key][:4] == before[key][:4]  # seed, outcome, tokens, the very draws
        assert after[key][4] and not before[key][4]  # marked replayed, and only the replay
    draws = [d for ending in before.values() for d in ending[3]]
    assert len(set(draws)) == len(draws)  # every call its own response: none was shared

    stored = _everything_stored(pytester.path / ".prove")
    assert SECRET not in stored and "cookie-value-42" not in stored
    assert "Bearer" not in stored


def _a_replay_is_not_evidence_and_a_miss_names_the_call(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """Was a test of its own: AGENT's sweep is recorded as 'recorded' and replayed as
    'replayed' (the server is gone now, which a replay never calls)."""
    for flag in ("--prove-save-baseline=base", "--prove-baseline=base"):
        refused = pytester.runpytest("-p", "no:randomly", "--prove-cache=replay", flag)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        refused.stderr.fnmatch_lines([f"*--prove-cache=replay with {flag.split('=')[0]}: a "
                                      "replayed run is not evidence*"])
    capsys.readouterr()  # what the in-process sessions printed
    code = main(["--store", str(pytester.path / ".prove"), "check", "recorded", "replayed"])
    _, err = capsys.readouterr()
    assert code == 1 and "replayed holds 12 replayed episode(s)" in err
    assert "is not evidence" in err

    # Another salt: other seeds, whose calls were never recorded.
    missed = pytester.runpytest("-p", "no:randomly", "--prove-cache=replay",
                                "--prove-salt=elsewhere", "--prove-name=missed")
    assert missed.ret == pytest.ExitCode.TESTS_FAILED
    errors = [r["error"] for r in Store(pytester.path / ".prove").open("missed").episodes]
    assert len(errors) == 12 and all(e["type"] == "CacheMiss" for e in errors)  # type: ignore[index]
    assert all("call 1 of this episode, POST http://127.0.0.1:" in e["message"]  # type: ignore[index]
               and "nothing was recorded for this episode" in e["message"]  # type: ignore[index]
               for e in errors)


def test_replay_live_sends_a_miss_to_the_server_and_records_it(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        model: ThreadingHTTPServer) -> None:
    _project(pytester, model, monkeypatch)
    result = pytester.runpytest("-p", "no:randomly", "--prove-cache=replay-live",
                                "--prove-salt=fresh", "--prove-name=live")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert len(model.calls) == 24  # type: ignore[attr-defined]
    again = pytester.runpytest("-p", "no:randomly", "--prove-cache=replay",
                               "--prove-salt=fresh", "--prove-name=again")
    assert again.ret == pytest.ExitCode.OK
    assert len(model.calls) == 24  # type: ignore[attr-defined]
    first, second = _endings(pytester, "live"), _endings(pytester, "again")
    assert {k: v[:4] for k, v in first.items()} == {k: v[:4] for k, v in second.items()}


def test_prune_empties_the_cache_and_bad_values_are_refused(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], model: ThreadingHTTPServer) -> None:
    _project(pytester, model, monkeypatch)
    nothing = pytester.runpytest("-p", "no:randomly", "--prove-cache=replay")
    assert nothing.ret == pytest.ExitCode.USAGE_ERROR
    nothing.stderr.fnmatch_lines(["*nothing was recorded in*run the sweep with "
                                  "--prove-cache=record first*"])
    bad = pytester.runpytest("--prove-cache=sometimes")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--prove-cache (or ini prove_cache): expected one of record, "
                              "replay, replay-live, off, got 'sometimes'*"])
    assert pytester.runpytest("-p", "no:randomly", "--prove-cache=record").ret == 0
    store = str(pytester.path / ".prove")
    assert main(["--store", store, "prune", "--cache", "--dry-run"]) == 0
    assert "would remove the cache of HTTP calls" in capsys.readouterr().out
    assert (pytester.path / ".prove" / "cache").is_dir()
    assert main(["--store", store, "prune", "--cache"]) == 0
    assert "removed the cache of HTTP calls" in capsys.readouterr().out
    assert not (pytester.path / ".prove" / "cache").exists()


class ChatModel(JSONHandler):
    """An OpenAI-compatible chat endpoint whose answers and usage are drawn afresh on every
    call (a model at temperature 1)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.calls.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        self.answer({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
            "model": "gpt-fake-1",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant",
                "content": random.choice(["resolved", "unresolved", "resolved"])}}],
            "usage": {"prompt_tokens": random.randint(10, 999), "completion_tokens": 3,
                      "total_tokens": 50}})


OPENAI_AGENT = textwrap.dedent(
    f"""
    import os
    import ssl

    import openai
    import pytest
    import pytest_prove as prove

    # One TLS context for every client (see AGENT): 20 ms of CPU an episode otherwise.
    TLS = ssl.create_default_context()


    @prove.rollout(replicates=8, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    async def test_agent(ticket, prove_seed):
        client = openai.AsyncOpenAI(base_url=os.environ["MODEL_URL"], api_key="{SECRET}",
                                    max_retries=0,
                                    http_client=openai.DefaultAsyncHttpxClient(verify=TLS))
        said = [{{"role": "user", "content": f"{{ticket}} {{prove_seed}}"}}]
        reply = await client.chat.completions.create(model="gpt-fake", messages=said)
        prove.usage(reply.model, reply.usage.prompt_tokens, reply.usage.completion_tokens)
        return prove.Episode(reply.choices[0].message.content)
    """
)


@pytest.mark.slow  # openai is imported by the worker of two inner xdist sessions
def test_a_real_openai_client_replays_under_xdist_with_concurrency(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The project also holds AGENT (httpx and requests), so these two sessions are
    test_a_recorded_sweep_replays_with_the_server_gone's under xdist, four replicates at
    once (its [xdist-concurrency] variant, two xdist sessions of its own), and that test's
    checks are made of them too.  One worker: recording and replaying are each episode's,
    in the worker that runs it, and -n 1 goes through the worker's cache and its hand-off
    to the controller as -n 2 did, with two processes less that each imported openai (one
    file per episode, written under a temporary name and renamed: two workers never write
    one file)."""
    pytest.importorskip("openai")
    pytester.makeini("[pytest]\nprove_allow_underpowered = true\nasyncio_mode = auto\n"
                     "asyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_openai_agent=OPENAI_AGENT.replace('"MODEL_URL"', '"OPENAI_URL"'),
                        test_agent=AGENT)
    args = ("-p", "no:randomly", "-n", "1", "--prove-concurrency=4")
    with local_server(ChatModel) as server, local_server(Model) as model:
        monkeypatch.setenv("OPENAI_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
        monkeypatch.setenv("MODEL_URL", f"http://127.0.0.1:{model.server_address[1]}")
        recorded = pytester.runpytest(*args, "--prove-cache=record", "--prove-name=recorded")
        assert recorded.ret == pytest.ExitCode.OK, recorded.stdout.str()
        assert len(server.calls) == 16  # type: ignore[attr-defined]
        assert len(model.calls) == 24  # type: ignore[attr-defined] # AGENT's 12 episodes, 2 calls each
    replayed = pytester.runpytest(*args, "--prove-cache=replay", "--prove-name=replayed")
    assert replayed.ret == pytest.ExitCode.OK, replayed.stdout.str()
    rollout = "test_openai_agent.py::test_agent"
    before, after = (_endings(pytester, name, rollout=rollout)
                     for name in ("recorded", "replayed"))
    assert len(before) == 16
    assert {k: v[:3] for k, v in before.items()} == {k: v[:3] for k, v in after.items()}
    assert all(v[4] for v in after.values())
    assert SECRET not in _everything_stored(pytester.path / ".prove")
    _check_the_replay(pytester)
