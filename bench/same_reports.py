"""The bundled example's JSON reports, from both front doors, with what changes run to run
taken out: for checking that a refactoring of the read side changed no figure.

    python bench/same_reports.py OUT.json         # write the normalised reports
    python bench/same_reports.py OUT.json --diff OLD.json   # ... and compare with OLD
    python bench/same_reports.py OUT.json --env SUPPORT_BOT_PROMPT=terse   # a worse agent

It copies ``examples/support_bot`` (with its committed baseline) to a temporary folder, runs
the sweep there with ``--prove-baseline=current --prove-report=r.json`` and then
``pytest-prove report baseline:current latest --out r2.json``, and keeps both documents with
run ids, names, paths and timestamps replaced by placeholders.  Exit 1 when ``--diff``
finds a difference (printed as the paths of the differing fields).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
_RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{4}(-[0-9a-f]{4})*")
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z?")


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):
        return _STAMP.sub("<time>", _RUN_ID.sub("<run>", value))
    return value


def reports(env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "support_bot"
        shutil.copytree(HERE / "examples" / "support_bot", project)
        session = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
             "--prove-baseline=current", "--prove-report=r.json"],
            cwd=project, capture_output=True, text=True, check=False,
            env={**os.environ, **env})
        if not (project / "r.json").is_file():
            raise SystemExit(f"the session wrote no report:\n{session.stdout}{session.stderr}")
        command = subprocess.run(
            [sys.executable, "-m", "pytest_prove", "--store", ".prove", "report",
             "baseline:current", "latest", "--out", "r2.json"],
            cwd=project, capture_output=True, text=True, check=False)
        if not (project / "r2.json").is_file():
            raise SystemExit(f"the command wrote no report:\n{command.stdout}{command.stderr}")
        return {
            "session": _normal(json.loads((project / "r.json").read_text())),
            "session_exit": session.returncode,
            "command": _normal(json.loads((project / "r2.json").read_text())),
            "command_exit": command.returncode,
        }


def _differences(old: Any, new: Any, where: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            found += _differences(old.get(key), new.get(key), f"{where}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True))
                for d in _differences(a, b, f"{where}[{i}]")]
    return [] if old == new else [f"{where or '.'}: {old!r} -> {new!r}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--diff", type=Path, default=None)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the sweep (repeatable)")
    args = parser.parse_args()
    found = reports(dict(item.split("=", 1) for item in args.env))
    args.out.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}: session exit {found['session_exit']}, command exit "
          f"{found['command_exit']}, verdict {found['session'].get('verdict')!r}")
    if args.diff is None:
        return 0
    differences = _differences(json.loads(args.diff.read_text()), found)
    for line in differences:
        print(line)
    print(f"{len(differences)} difference(s) from {args.diff}")
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
