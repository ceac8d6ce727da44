"""``--prove-plan`` as a dry run: the project is imported with the network blocked, an
import that touches it is named (exit 4), no rollout is called, and the network is given
back when the session ends."""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from .conftest import JSONHandler, local_server


class Counting(JSONHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.calls.append(self.path)  # type: ignore[attr-defined]
        self.answer({"ok": True})


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    with local_server(Counting) as running:
        yield running


ROLLOUT = textwrap.dedent(
    """
    import pathlib

    import pytest
    import pytest_prove as prove


    @prove.rollout(replicates=200, failures=["unresolved"], successes=["resolved"])
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_bot(ticket, prove_seed):
        with open(pathlib.Path(__file__).with_name("called.txt"), "a") as calls:
            calls.write("1\\n")
        return prove.Episode("resolved")
    """
)


def test_an_import_that_connects_is_named_and_the_plan_exits_4(
        pytester: pytest.Pytester, server: ThreadingHTTPServer) -> None:
    port = server.server_address[1]
    pytester.makepyfile(test_bot=ROLLOUT, test_client=textwrap.dedent(
        f"""
        import urllib.request

        try:  # what a client built at import does: the plan must not let it through
            urllib.request.urlopen("http://127.0.0.1:{port}/warm-up", timeout=10)
        except OSError:
            pass


        def test_plain():
            pass
        """))
    result = pytester.runpytest("--prove-plan", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines([
        "pytest-prove plan: 400 episodes*",
        "pytest-prove --prove-plan: the project touched the network when it was imported "
        "(1 place(s)):",
        f"  test_client.py:4 connected to 127.0.0.1:{port} while pytest-prove --prove-plan "
        "imported the project*",
    ])
    assert server.calls == []  # type: ignore[attr-defined]
    assert not (pytester.path / "called.txt").exists()  # no rollout ran
    # The session gave the network back to this process.
    with socket.create_connection(("127.0.0.1", port), timeout=30):
        pass


def test_a_conftest_that_looks_up_a_name_is_named_too(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import socket

        try:
            socket.getaddrinfo("model-provider.example", 443)
        except OSError:
            pass
        """)
    pytester.makepyfile(test_bot=ROLLOUT)
    result = pytester.runpytest("--prove-plan", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(["  conftest.py:4 looked up the address of "
                                 "'model-provider.example' while*"])


def test_a_quiet_project_gets_its_plan_and_no_rollout_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bot=ROLLOUT)
    result = pytester.runpytest("--prove-plan", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["pytest-prove plan: 400 episodes*", "design check:*"])
    assert "touched the network" not in result.stdout.str()
    assert not (pytester.path / "called.txt").exists()
    # Without --prove-plan nothing is blocked: the same session runs its rollouts.
    ran = pytester.runpytest("-p", "no:randomly", "-q", "--prove-replicates=2",
                             "--prove-allow-underpowered")
    assert ran.ret == pytest.ExitCode.OK
    assert (pytester.path / "called.txt").read_text().count("1") == 4
