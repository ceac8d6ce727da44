"""``python -m pytest_prove``: the same command as ``pytest-prove``."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
