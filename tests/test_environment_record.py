"""Each run records the environment that identifies the agent (issue 31 item 4, issue 33
item 2): the declared environment variables (secrets as digests only), the model names seen
in spans, the versions of the packages named, pytest-prove's, Python's and the platform.
``show`` prints it; every comparison says what differs, with the stale-baseline warning for
a difference not declared as the change; every printed replay command sets the recorded
variables.  Runs saved before it was recorded read as "not recorded".
"""

from __future__ import annotations

import json
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest

import pytest_prove.stats  # noqa: F401 - loaded once, before pytester's in-process runs
from pytest_prove.cli import main
from pytest_prove.declare.environment import (
    EnvironmentNameError,
    parse_variable_names,
    secret_digest,
)
from pytest_prove.report.replay import replay_command
from pytest_prove.review.environment import environment_review
from pytest_prove.review.flips import replay_target
from pytest_prove.store import Store

from .conftest import load

#: An agent whose answer depends on AGENT_MODEL and whose prompt is SUPPORT_BOT_PROMPT; with
#: CAPTURE on, each episode emits a span naming the model served (SERVED_MODEL, which the
#: user does not declare: a provider's change behind a name).
AGENT = textwrap.dedent(
    """
    import os
    import random

    import pytest
    import pytest_prove as prove

    RATE = {"agent-large": 0.1, "agent-mini": 0.9}  # most twins flip


    @prove.rollout(replicates=10, failures=["unresolved"], successes=["resolved"], CAPTURE)
    @pytest.mark.parametrize("ticket", ["refund", "password"])
    def test_agent(ticket, prove_seed):
        model = os.environ.get("AGENT_MODEL", "agent-large")
        if CAPTURE_ON:
            from opentelemetry import trace

            with trace.get_tracer("agent").start_as_current_span("chat") as span:
                span.set_attribute("gen_ai.request.model", model)
                span.set_attribute("gen_ai.response.model",
                                   os.environ.get("SERVED_MODEL", model + "-2024-08-06"))
        rng = random.Random(prove_seed)
        return prove.Episode("unresolved" if rng.random() < RATE[model] else "resolved")
    """
)

INI = textwrap.dedent(
    """
    [pytest]
    prove_allow_underpowered = true
    prove_record_env = AGENT_MODEL SUPPORT_BOT_PROMPT OPENAI_API_KEY UNSET_VAR
    prove_record_packages = pytest no-such-package-here
    """
)

SECRET = "sk-do-not-store-this-value"


def _project(pytester: pytest.Pytester, capture: bool = False) -> None:
    pytester.makeini(INI)
    source = AGENT.replace("CAPTURE_ON", str(capture))
    pytester.makepyfile(test_agent=source.replace("CAPTURE", "capture={}" if capture
                                                  else "id='agent'"))


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("AGENT_MODEL", "agent-large")
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "it's terse, really")  # a space and a quote
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("UNSET_VAR", raising=False)
    monkeypatch.delenv("SERVED_MODEL", raising=False)
    return monkeypatch


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(list(args))
    return status, capsys.readouterr().out


def _every_file(root: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace")
                     for p in sorted(root.rglob("*")) if p.is_file())


def test_a_run_records_the_declared_environment_and_never_a_secret(
        pytester: pytest.Pytester, env: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester)
    result = pytester.runpytest("--prove-save-baseline=current")
    assert result.ret == 0, result.stdout.str()
    record = load(pytester).manifest["environment"]
    assert record["variables"] == {
        "AGENT_MODEL": {"value": "agent-large"},
        "SUPPORT_BOT_PROMPT": {"value": "it's terse, really"},
        "OPENAI_API_KEY": {"digest": secret_digest(SECRET)},
        "UNSET_VAR": {"unset": True}}
    assert record["packages"]["pytest"] == pytest.__version__
    assert record["packages"]["no-such-package-here"] is None
    assert record["packages"]["pytest-prove"] and record["packages"]["python"]
    assert record["platform"] and record["system"]
    # The baseline's header carries it too, and no file of the store holds the secret.
    assert Store(pytester.path / ".prove").load_baseline("current").manifest[
        "environment"] == record
    stored = _every_file(pytester.path / ".prove")
    assert SECRET not in stored and secret_digest(SECRET) in stored
    # show prints it (the secret as its digest).
    env.chdir(pytester.path)
    status, out = _cli(capsys, "show", "latest")
    assert status == 0
    assert ("environment: AGENT_MODEL='agent-large', SUPPORT_BOT_PROMPT=\"it's terse, "
            f"really\", OPENAI_API_KEY=secret, digest {secret_digest(SECRET)}, "
            "UNSET_VAR=unset") in out
    assert f"pytest {pytest.__version__}, no-such-package-here not installed" in out
    assert SECRET not in out
    status, out = _cli(capsys, "show", "latest", "--json")
    assert json.loads(out)["environment"] == record


def test_the_options_override_the_ini(pytester: pytest.Pytester,
                                      env: pytest.MonkeyPatch) -> None:
    _project(pytester)
    result = pytester.runpytest("--prove-record-env=AGENT_MODEL",
                                "--prove-record-packages=")
    assert result.ret == 0, result.stdout.str()
    record = load(pytester).manifest["environment"]
    assert record["variables"] == {"AGENT_MODEL": {"value": "agent-large"}}
    assert set(record["packages"]) == {"pytest-prove", "python"}


@pytest.mark.parametrize(("where", "args", "named"), [
    ("ini", (), "ini option prove_record_env in *tox.ini: '2FAST' is not an environment "
                "variable's name*e.g. prove_record_env = AGENT_MODEL SUPPORT_BOT_PROMPT*"),
    ("option", ("--prove-record-env=AGENT-MODEL",),
     "--prove-record-env: 'AGENT-MODEL' is not an environment variable's name*"),
    ("option", ("--prove-record-packages=openai==1.4",),
     "--prove-record-packages: 'openai==1.4' is not a package's name*without versions*"),
])
def test_a_bad_name_is_refused_before_anything_runs(
        pytester: pytest.Pytester, env: pytest.MonkeyPatch, where: str,
        args: tuple[str, ...], named: str) -> None:
    _project(pytester)
    if where == "ini":
        pytester.makeini(INI.replace("AGENT_MODEL SUPPORT", "AGENT_MODEL 2FAST SUPPORT"))
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{named}"])
    assert "Traceback" not in result.stderr.str()
    assert not (pytester.path / ".prove").exists()


def test_names_are_parsed_once_each() -> None:
    assert parse_variable_names("A, B  A\n_C") == ("A", "B", "_C")
    with pytest.raises(EnvironmentNameError, match="'A=1' is not an environment variable"):
        parse_variable_names("A=1")


def test_a_difference_is_said_beside_the_verdict_and_never_changes_it(
        pytester: pytest.Pytester, env: pytest.MonkeyPatch) -> None:
    _project(pytester)
    assert pytester.runpytest("--prove-save-baseline=current").ret == 0
    env.setenv("AGENT_MODEL", "agent-mini")
    env.setenv("OPENAI_API_KEY", SECRET + "-2")
    result = pytester.runpytest("--prove-baseline=current", "--prove-report=r.json")
    out = result.stdout.str()
    assert ("environment: the environment differs from baseline:current's: AGENT_MODEL "
            "agent-large -> agent-mini; OPENAI_API_KEY (secret, digest "
            f"{secret_digest(SECRET)}) -> (secret, digest {secret_digest(SECRET + '-2')}) "
            "(this does not change the verdict)") in out
    assert "stale" not in out  # only declared variables differ: the change under test
    document = json.loads((pytester.path / "r.json").read_text())
    said = document["environment"]
    assert said["differs"] and not said["stale_warning"]
    first = said["differences"][0]
    assert (first["name"], first["before"], first["after"], first["declared"]) == (
        "AGENT_MODEL", "agent-large", "agent-mini", True)
    assert said["refresh"] == "pytest --prove-baseline=current --prove-update-baseline"
    assert SECRET not in (pytester.path / "r.json").read_text()
    # The same comparison without the difference: the verdict is the one the rates give.
    env.setenv("AGENT_MODEL", "agent-large")
    env.setenv("OPENAI_API_KEY", SECRET)
    again = pytester.runpytest("--prove-baseline=current")
    assert again.ret == 0
    assert "environment" not in again.stdout.str()


@pytest.mark.slow  # a second or more of CPU (bench/suite_time.py)
def test_an_undeclared_difference_warns_of_a_stale_baseline_under_xdist(
        pytester: pytest.Pytester, env: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Under -n 2 the workers run in the controller's environment, which the controller
    records once; the models seen in the workers' spans are counted as episodes are stored
    (capture runs in the workers, so this process keeps no tracer provider).  With -q, only
    the stale-baseline warning is kept.  The baseline is saved through one worker (the
    worker's spans counted on the controller as with two; a worker start less), the run
    compared with it on two."""
    _project(pytester, capture=True)
    result = pytester.runpytest("-n", "1", "--prove-save-baseline=current")
    assert result.ret == 0, result.stdout.str()
    baseline = Store(pytester.path / ".prove").load_baseline("current").manifest[
        "environment"]
    assert baseline["models"] == {"request": {"agent-large": 20},
                                  "response": {"agent-large-2024-08-06": 20}}
    assert baseline["variables"]["AGENT_MODEL"] == {"value": "agent-large"}
    env.setenv("SERVED_MODEL", "agent-large-2025-01-01")  # the provider moved, undeclared
    result = pytester.runpytest("-n", "2", "--prove-baseline=current")
    result.stdout.fnmatch_lines([
        "environment: the environment differs from baseline:current's: model seen "
        "agent-large-2024-08-06 -> agent-large-2025-01-01 (this does not change the "
        "verdict)",
        "stale baseline?: model seen was not declared as the change: if you did not change "
        "this, the baseline may be stale: refresh it with pytest --prove-baseline=current "
        "--prove-update-baseline"])
    env.chdir(pytester.path)
    status, out = _cli(capsys, "diff", "baseline:current", "latest")
    assert status == 0 and "the baseline may be stale" in out
    status, out = _cli(capsys, "check", "baseline:current", "latest", "--json")
    assert json.loads(out)["environment"]["stale_warning"] is True
    status, out = _cli(capsys, "show", "latest")
    assert "models seen in spans: agent-large (20 spans, request), agent-large-2025-01-01 " \
           "(20 spans, response)" in out
    for name in ("r.html", "r.md"):
        status, _ = _cli(capsys, "report", "baseline:current", "latest", "--out", name)
        assert status == 0
    page = (pytester.path / "r.html").read_text()
    assert "model seen agent-large-2024-08-06 -> agent-large-2025-01-01 (this" in page
    assert "the baseline may be stale: refresh it with pytest --prove-baseline=current" in page
    summary = (pytester.path / "r.md").read_text()
    assert "Stale baseline?: model seen was not declared as the change" in summary
    # -q keeps only the stale-baseline warning (was its own test, which saved the same
    # baseline under -n 2 again); one worker: the output under xdist is the controller's.
    env.setenv("AGENT_MODEL", "agent-mini")
    result = pytester.runpytest("-n", "1", "-q", "--prove-baseline=current")
    text = result.stdout.str()
    assert "the environment differs" not in text
    result.stdout.fnmatch_lines([
        "stale baseline?: model seen was not declared as the change (the declared change is "
        "AGENT_MODEL; the rest may follow from it): if you did not change this, the baseline "
        "may be stale: refresh it with pytest --prove-baseline=current --prove-update-baseline"])


def test_replay_commands_carry_the_recorded_variables(
        pytester: pytest.Pytester, env: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester)
    assert pytester.runpytest("--prove-save-baseline=current").ret == 0
    env.setenv("AGENT_MODEL", "agent-mini")
    pytester.runpytest("--prove-baseline=current")
    env.chdir(pytester.path)
    status, out = _cli(capsys, "flips", "baseline:current", "latest")
    assert status == 0
    commands = [line.strip() for line in out.splitlines() if "--prove-replay=" in line]
    assert commands
    for command in commands:
        assert command.startswith("env -u UNSET_VAR AGENT_MODEL=agent-mini "
                                  "SUPPORT_BOT_PROMPT='it'\"'\"'s terse, really' pytest ")
        assert command.endswith("# first: export OPENAI_API_KEY=... (recorded as a digest, "
                                "not its value)")
        assert SECRET not in command
    # Pasted into a shell, the prefix sets each value as recorded (the comment is inert).
    words = shlex.split(commands[0], comments=True)
    assert words[:5] == ["env", "-u", "UNSET_VAR", "AGENT_MODEL=agent-mini",
                         "SUPPORT_BOT_PROMPT=it's terse, really"]
    # A real shell parses the quoting (a subprocess: that is what a user pastes into); the
    # command it runs prints the variables it was given instead of replaying.
    printer = """sh -c 'printf "%s|" "$AGENT_MODEL" "$SUPPORT_BOT_PROMPT" "${UNSET_VAR-u}"'"""
    shown = subprocess.run(["sh", "-c", commands[0].replace("pytest", printer, 1)],
                           capture_output=True, text=True, check=True,
                           env={"PATH": "/usr/bin:/bin", "UNSET_VAR": "set"})
    assert shown.stdout == "agent-mini|it's terse, really|u|"


def test_a_run_without_the_record_reads_as_not_recorded(
        pytester: pytest.Pytester, env: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A run (or baseline) saved by a pytest-prove that did not record the environment."""
    _project(pytester)
    assert pytester.runpytest("--prove-name=old").ret == 0
    manifest_path = load(pytester, "old").path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["environment"]
    manifest_path.write_text(json.dumps(manifest))
    assert pytester.runpytest("--prove-name=new").ret == 0
    env.chdir(pytester.path)
    status, out = _cli(capsys, "show", "old")
    assert status == 0 and "environment: not recorded" in out
    status, out = _cli(capsys, "diff", "old", "new")
    assert status == 0
    assert ("environment: the environment of old is not recorded (it was made by a "
            "pytest-prove that did not record the environment), so the two runs' "
            "environments were not compared") in out
    status, out = _cli(capsys, "diff", "old", "new", "--json")
    said = json.loads(out)["environment"]
    assert said["recorded"] == {"before": False, "after": True} and not said["differences"]
    old = load(pytester, "old")
    replay = replay_target(old, old.episodes[0])
    assert replay is not None and replay.env == () and replay.unset == ()
    assert replay_command(replay).startswith("pytest 'test_agent.py::test_agent[")
    review = environment_review(load(pytester, "old"), load(pytester, "old"))
    assert review.before_record is None and not review.differences


def test_merged_shards_keep_one_environment_and_refuse_two(
        pytester: pytest.Pytester, env: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester)
    for k in (1, 2):
        result = pytester.runpytest(f"--prove-shard={k}/2", "--prove-salt=one",
                                    f"--prove-name=part-{k}")
        assert result.ret == 0, result.stdout.str()
    env.setenv("AGENT_MODEL", "agent-mini")
    assert pytester.runpytest("--prove-shard=2/2", "--prove-salt=one",
                              "--prove-name=other").ret == 0
    env.chdir(pytester.path)
    status, _ = _cli(capsys, "merge", "part-1", "part-2", "--name", "all")
    assert status == 0
    merged = load(pytester, "all").manifest["environment"]
    assert merged["variables"] == load(pytester, "part-1").manifest["environment"]["variables"]
    capsys.readouterr()
    status = main(["merge", "part-1", "other", "--name", "mixed"])
    err = capsys.readouterr().err
    assert status == 1
    assert "differ in recorded environment (declared variables, packages, system)" in err


@pytest.mark.slow
def test_the_example_records_its_prompt_and_replays_with_it(
        example: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled example declares SUPPORT_BOT_PROMPT: against its committed baseline (saved
    before runs recorded their environment) it says "not recorded"; against a baseline of
    the careful prompt it names the change; a replay command from flips, run with the
    variables it sets, ends as stored (without them, the careful prompt would run)."""
    monkeypatch.delenv("SUPPORT_BOT_PROMPT", raising=False)
    small = ["-p", "no:randomly", "--prove-replicates=30", "--prove-allow-underpowered"]
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "terse")
    result = example.runpytest(*small, "-k", "refund", "--prove-baseline=current")
    result.stdout.fnmatch_lines([
        "environment: the environment of baseline:current is not recorded (it was made by a "
        "pytest-prove that did not record the environment), so the two runs' environments "
        "were not compared (a run records it now, and a baseline saved from one keeps it)"])
    monkeypatch.delenv("SUPPORT_BOT_PROMPT")
    # A fixed salt: flips needs a twin the terse prompt turned (about 6 of the 90 at 30
    # replicates), and on a new salt none turned 8.9e-4 of the time; this salt turns 6.
    assert example.runpytest(*small, "--prove-save-baseline=careful",
                             "--prove-salt=env-record").ret == 0
    monkeypatch.setenv("SUPPORT_BOT_PROMPT", "terse")
    result = example.runpytest(*small, "--prove-baseline=careful")
    result.stdout.fnmatch_lines([
        "environment: the environment differs from baseline:careful's: SUPPORT_BOT_PROMPT "
        "unset -> terse (this does not change the verdict)"])
    monkeypatch.chdir(example.path)
    status, out = _cli(capsys, "flips", "baseline:careful", "latest")
    assert status == 0
    commands = [line.strip() for line in out.splitlines() if "--prove-replay=" in line]
    assert commands and all(c.startswith("SUPPORT_BOT_PROMPT=terse pytest 'test_support.py::")
                            for c in commands)
    # Replayed as pasted: the variables the command sets, then its pytest arguments.
    words = shlex.split(commands[0])
    assigned = dict(w.split("=", 1) for w in words[:words.index("pytest")])
    monkeypatch.delenv("SUPPORT_BOT_PROMPT")
    for name, value in assigned.items():
        monkeypatch.setenv(name, value)
    replayed = example.runpytest(*words[words.index("pytest") + 1:])
    replayed.stdout.fnmatch_lines(["replayed 1 episode(s) of run * 1 ended as stored*"])
    assert "environment differs" not in replayed.stdout.str()
    # Without them the careful prompt runs, and the flipped twin ends as the baseline's did.
    for name in assigned:
        monkeypatch.delenv(name)
    bare = example.runpytest(*words[words.index("pytest") + 1:])
    bare.stdout.fnmatch_lines([
        "replayed 1 episode(s) of run * 1 ended differently*",
        "note: this session's environment differs from the one run * recorded: "
        "SUPPORT_BOT_PROMPT was 'terse', is unset; an ending may differ for that alone: set "
        "them as the replay commands of pytest-prove flips and show do"])


def test_a_run_is_resumed_only_in_the_environment_it_recorded(
        pytester: pytest.Pytester, env: pytest.MonkeyPatch) -> None:
    _project(pytester)
    assert pytester.runpytest("-k", "refund", "--prove-name=half").ret == 0
    env.setenv("AGENT_MODEL", "agent-mini")
    env.setenv("OPENAI_API_KEY", SECRET + "-2")
    refused = pytester.runpytest("--prove-resume=half")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([
        "*run 'half' was recorded in another environment than this session's (AGENT_MODEL "
        "was 'agent-large', is 'agent-mini'; OPENAI_API_KEY was a secret (digest "
        f"{secret_digest(SECRET)}), is a secret (digest {secret_digest(SECRET + '-2')})), "
        "and resuming it would mix two agents in one run; set the variables back as "
        "recorded*"])
    assert SECRET not in refused.stderr.str()
    assert len(load(pytester, "half").episodes) == 10  # nothing was added
    env.setenv("AGENT_MODEL", "agent-large")
    env.setenv("OPENAI_API_KEY", SECRET)
    resumed = pytester.runpytest("--prove-resume=half")
    assert resumed.ret == 0, resumed.stdout.str()
    assert load(pytester, "half").status == "complete"
