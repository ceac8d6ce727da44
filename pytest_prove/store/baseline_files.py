"""A baseline's file, read and written whole: a compact baseline (:mod:`.compact`, format 3
with its digest; format 2, without one, is still read) or one in JSON lines (format 1).

Its first line is its header (the format, the digest and the run's manifest); a baseline is
read checked against that header and its digest (:mod:`.integrity`), and written to a
temporary file then renamed, so it is never half-written.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Final

from ..record import StoreError, baseline_fix, check_header, check_manifest, identity, utc_now
from .compact import COMPACT_FORMAT, compact_body, header_line
from .integrity import DIGEST_KEY, body_digest, check_digest, check_structure
from .reading import StoreWarning, check_format, json_of, read_episodes
from .runs import LEGACY_SUFFIX, Run
from .writer import atomic_write, dump_line

__all__ = ["BASELINE_FORMAT", "read_baseline", "write_baseline_file"]

#: The format version of the baselines this code writes and reads; a newer one is refused
#: with the fix.
BASELINE_FORMAT: Final = COMPACT_FORMAT
#: The first baseline format whose header holds a digest of the file (:mod:`.integrity`).
_DIGESTED: Final = 3


def write_baseline_file(path: Path, name: str, run: Run, *, compact: bool = True) -> Path:
    """Write ``run`` as the baseline ``name`` at ``path``, replacing any old one in one
    step: in the compact format (and then a JSON-lines file of the same name is deleted),
    or, with ``compact=False``, in JSON lines beside it, every field kept (format 1)."""
    legacy = path.with_suffix(LEGACY_SUFFIX)
    manifest = dict(run.manifest)
    manifest["baseline_name"] = name
    manifest["saved"] = utc_now()
    if compact:
        body = compact_body(str(manifest["salt"]), run.episodes)
        # The digest of the manifest as it will be read back (JSON's types, escapes).
        written = json.loads(header_line(manifest))
        header = {"pytest_prove_baseline": BASELINE_FORMAT,
                  DIGEST_KEY: body_digest(written, body.encode("utf-8")),
                  "manifest": manifest}
        atomic_write(path, header_line(header) + "\n" + body)
        legacy.unlink(missing_ok=True)
        return path
    header = {"pytest_prove_baseline": 1, "manifest": manifest}
    ordered = sorted(run.episodes, key=identity)
    text = dump_line(header) + "\n" + "".join(dump_line(r) + "\n" for r in ordered)
    atomic_write(legacy, text)
    path.unlink(missing_ok=True)
    return legacy


def read_baseline(path: Path, name: str | None = None) -> Run:
    """The baseline in the file at ``path`` (``name``: what it is called, by default its
    file's stem), read whole and checked: every line (by file and line), then its body
    against its header (:func:`.integrity.check_structure`: complete, every planned
    condition and replicate, the counts), then its digest (format 3 on).  Anything else is
    a :class:`StoreError` naming the file and the fix; never a thinner baseline."""
    name = path.stem if name is None else name
    fix = baseline_fix(name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    header, found, manifest = _baseline_manifest(path, data, fix)
    try:
        episodes, notes = read_episodes(path, manifest["salt"], fix, skip_first=found == 1,
                                        unique=True, data=data, manifest=manifest)
    except RecursionError:
        # Every line's own reader names a line nested too deeply; this is the last guard.
        raise StoreError(f"{path}: nested too deeply to read (JSON arrays or objects "
                         f"thousands of levels deep); the file was edited or damaged: "
                         f"{fix}") from None
    try:
        check_structure(path, name, manifest, episodes)
    except StoreError as exc:
        # A baseline is written whole, in one step: a cut tail lost episodes.
        if notes:
            raise type(exc)(f"{exc} ({'; '.join(notes)})") from None
        raise
    if found >= _DIGESTED:
        end = data.find(b"\n")
        check_digest(path, name, header, manifest, data[end + 1:] if end >= 0 else b"")
    for note in notes:
        warnings.warn(StoreWarning(note), stacklevel=2)
    return Run(
        run_id=str(manifest.get("run_id", name)),
        name=name,
        manifest=manifest,
        episodes=tuple(episodes),
        path=path,
        notes=tuple(notes),
    )


def _baseline_manifest(path: Path, data: bytes, fix: str
                       ) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """The header, the format and the manifest in a baseline's first line, checked, or an
    error naming line 1."""
    where = f"{path}:1"
    end = data.find(b"\n")  # not data.split(b"\n", 1), which copies the rest of the file
    header = json_of(path, lambda: data if end < 0 else data[:end], lambda exc: (
        f"{where}: the first line must be the baseline's header, and it is not JSON "
        f"({exc}); the file was edited or damaged: {fix}"))
    check_header(header, where, fix)
    found = header["pytest_prove_baseline"]
    check_format(found, BASELINE_FORMAT, path, fix)
    return header, found, check_manifest(header["manifest"], where, fix, prefix="manifest.")

