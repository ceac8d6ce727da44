"""The statistics engine is a pure library: it must import and work where pytest cannot."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_stats_import_and_compare_without_pytest() -> None:
    # A subprocess, because this process has pytest imported already: the child poisons
    # sys.modules so that any "import pytest" raises ImportError, then uses the engine end to
    # end. The package's own __init__ (the plugin's public face) re-exports pytest-facing
    # names, so the child stands in an empty parent package: what is proven is that
    # nothing under pytest_prove/stats needs pytest, the store or the plugin.
    script = textwrap.dedent(
        f"""
        import sys, types
        sys.modules["pytest"] = None
        sys.modules["_pytest"] = None
        try:
            import pytest  # noqa: F401
        except ImportError:
            pass
        else:
            raise SystemExit("the pytest blocker did not work")
        parent = types.ModuleType("pytest_prove")
        parent.__path__ = [{str(ROOT / "pytest_prove")!r}]
        sys.modules["pytest_prove"] = parent
        from pytest_prove.stats import RowInput, compare, design_check
        result = compare([RowInput("ticket=refund", "unresolved", "rise", 19, 190, 67, 190)])
        assert result.verdict.word == "worse", result.verdict.word
        assert design_check(190, 16, paired=False).ok
        loaded = sorted(name for name in sys.modules if name.startswith("pytest_prove."))
        strays = [name for name in loaded if not name.startswith("pytest_prove.stats")]
        assert not strays, strays
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")
