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
