"""The GitHub Actions workflow in docs/quickstart.md parses, installs pytest-prove from the
checkout, and its gate command is one pytest accepts here (planned, not run)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent


def _yaml_blocks() -> list[str]:
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    return re.findall(r"```yaml\n(.*?)```", text, re.S)


def test_the_quickstart_workflow_installs_from_the_checkout_and_its_gate_runs() -> None:
    workflow, fragment = _yaml_blocks()
    steps = yaml.safe_load(workflow)["jobs"]["gate"]["steps"]
    assert [s["uses"].split("@")[0] for s in steps if "uses" in s] == [
        "actions/checkout", "actions/setup-python", "actions/upload-artifact"]
    install, gate = (s["run"] for s in steps if "run" in s)
    assert install == "python -m pip install ."  # the checkout, not a name on an index
    command = shlex.split(gate)
    assert command[:3] == ["python", "-m", "pytest"]
    report = next(a.split("=", 1)[1] for a in command if a.startswith("--prove-report="))
    assert steps[-1]["with"]["path"] == report
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_"))}
    done = subprocess.run([sys.executable, *command[1:], "--prove-plan", "-p", "no:randomly",
                           "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pytest-prove plan: 600 episodes" in done.stdout
    # The steps a project of one's own adds parse too, and install pytest-prove from a wheel.
    steps = yaml.safe_load(textwrap.dedent(fragment))
    assert steps[0]["run"].startswith("python -m pip install vendor/pytest_prove-")


EXAMPLE = ROOT / "examples" / "support_bot"


def _quickstart_commands() -> list[tuple[dict[str, str], list[str]]]:
    """The quickstart's ``pytest`` commands, each with the environment it sets."""
    text = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            env = {}
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                key, value = words.pop(0).split("=", 1)
                env[key] = value
            if words[:1] == ["pytest"]:
                found.append((env, words[1:]))
    return found


def _committed_baselines() -> set[str]:
    """The example's baselines in version control (the folder's files, outside git)."""
    folder = EXAMPLE / ".prove" / "baselines"
    try:
        listed = subprocess.run(["git", "ls-files", "--", str(folder)], cwd=ROOT,
                                capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return {path.stem for path in folder.iterdir()}
    return {Path(line).stem for line in listed.splitlines() if line}


def test_the_quickstart_saves_no_baseline_over_the_committed_one(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quickstart had the reader run ``--prove-save-baseline=current`` in the example,
    which overwrote its committed baseline: every later number then differed from the
    pages. Its commands, run in a copy of the example, leave every committed file as it was,
    and the verdict read against the committed baseline is the one the page shows."""
    commands = _quickstart_commands()
    in_example = [(env, args) for env, args in commands if "examples/support_bot" in args]
    assert len(in_example) >= 3, commands
    committed = _committed_baselines()
    assert "current" in committed
    for _, args in in_example:
        saved = {a.split("=", 1)[1] for a in args if a.startswith("--prove-save-baseline=")}
        if "--prove-update-baseline" in args:
            saved |= {a.split("=", 1)[1] for a in args if a.startswith("--prove-baseline=")}
        assert not saved & committed, f"pytest {shlex.join(args)} saves over {saved & committed}"
    # Run them, in a copy of the example where the page's paths hold.
    copy = pytester.path / "examples" / "support_bot"
    tracked = {}
    for source in EXAMPLE.rglob("*"):
        relative = source.relative_to(EXAMPLE)
        if source.is_dir() or "__pycache__" in relative.parts or "runs" in relative.parts:
            continue
        if relative.parts[:2] == (".prove", "baselines") and source.stem not in committed:
            continue
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes(source.read_bytes())
        tracked[relative] = source.read_bytes()
    page = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    for env, args in in_example:
        with monkeypatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            result = pytester.runpytest(*args, "-p", "no:randomly", "-p", "no:cacheprovider")
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), (
            result.stdout.str())
        verdict = next((line for line in result.stdout.lines
                        if line.startswith(("worse:", "no significant change:"))), None)
        if verdict is not None:
            assert verdict in page, verdict  # the numbers are the page's
    for relative, content in tracked.items():
        assert (copy / relative).read_bytes() == content, f"the quickstart changed {relative}"
