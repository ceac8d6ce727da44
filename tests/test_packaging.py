"""The package's build and version (issue 29, finding 6, item 8).

pyproject.toml's ``license = "MIT"`` (an SPDX expression, PEP 639) is read by setuptools 77
and later only, so the build needs that; the version is written once, in pyproject.toml,
and ``pytest_prove.__version__`` (which the xdist worker check compares) reads it from the
installed metadata, or from pyproject.toml in a checkout that is not installed.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import pytest_prove

PYPROJECT = tomllib.loads(
    (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_build_needs_a_setuptools_that_reads_an_spdx_license() -> None:
    assert PYPROJECT["project"]["license"] == "MIT"
    found = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    minimum = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", found[0]) if found else None
    assert minimum is not None and int(minimum.group(1)) >= 77, found


def test_the_version_is_pyprojects(monkeypatch: pytest.MonkeyPatch) -> None:
    written = PYPROJECT["project"]["version"]
    assert pytest_prove.__version__ == written
    # Without installed metadata (a checkout on sys.path), the same, from pyproject.toml.
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    assert pytest_prove._version() == written


# ---------------------------------------------------------------------------
# what the package index shows (issue 35, item 5)

ROOT = Path(__file__).resolve().parent.parent
URLS = PYPROJECT["project"]["urls"]
#: README.md's links into the repository start with one of these (a file, or a folder).
_BLOB = URLS["Repository"] + "/blob/main/"
_TREE = URLS["Repository"] + "/tree/main/"
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _github_anchor(heading: str) -> str:
    """The id GitHub gives a markdown heading: lower case, punctuation other than ``-`` and
    ``_`` dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    fenced = False
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(_github_anchor(line.lstrip("#")))
    return found


def readme_link_problems(text: str, root: Path = ROOT) -> list[str]:
    """Every link of a README that would be broken on the package index, where a relative
    link has no repository beside it: a relative link, or a link into the repository that
    names no file or folder of this checkout, or an anchor no heading of that page makes."""
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        for target in _LINK.findall(line):
            if target.startswith((_BLOB, _TREE)):
                path, _, anchor = target.removeprefix(_BLOB).removeprefix(_TREE).partition("#")
                where = root / path
                if not where.exists():
                    problems.append(f"README.md:{number}: {target} names {path}, which "
                                    "does not exist")
                elif anchor and anchor not in _anchors(where):
                    problems.append(f"README.md:{number}: {target}: {path} has no heading "
                                    f"#{anchor}")
            elif not target.startswith(("https://", "http://", "mailto:")):
                problems.append(f"README.md:{number}: relative link {target} is broken on "
                                f"the package index; write it as {_BLOB}{target}")
    return problems


def test_the_metadata_names_the_project_its_authors_and_what_it_runs_on() -> None:
    project = PYPROJECT["project"]
    assert {"Homepage", "Documentation", "Repository", "Issues", "Changelog"} <= set(URLS)
    assert all(url.startswith("https://") for url in URLS.values()), URLS
    assert project["authors"], "authors"
    classifiers = project["classifiers"]
    assert any(c.startswith("Development Status :: ") for c in classifiers), classifiers
    floor = re.fullmatch(r">=3\.(\d+)", project["requires-python"])
    assert floor is not None
    tox = (ROOT / "tox.ini").read_text(encoding="utf-8")
    tested = {int(m) for m in re.findall(r"\bpy3(\d+)\b", tox)}
    # Each Python version tox tests is named, and none below the floor.
    named = {int(m) for m in re.findall(r"Python :: 3\.(\d+)$", "\n".join(classifiers),
                                        re.MULTILINE)}
    assert tested and tested <= named, (tested, named)
    assert min(named) >= int(floor.group(1)), named
    changelog = ROOT / "CHANGELOG.md"
    assert "## Unreleased" in changelog.read_text(encoding="utf-8")
    assert URLS["Changelog"] == _BLOB + "CHANGELOG.md"


def test_every_readme_link_works_on_the_package_index() -> None:
    readme = (ROOT / PYPROJECT["project"]["readme"]).read_text(encoding="utf-8")
    assert _LINK.search(readme), "README.md has links: the check reads them"
    assert readme_link_problems(readme) == []


def test_the_readme_link_check_finds_a_relative_link_a_missing_file_and_anchor() -> None:
    bad = ("[a](docs/spec.md) [b](" + _BLOB + "docs/nothing.md) [c](" + _BLOB
           + "docs/scale.md#no-such-heading) [d](" + _BLOB + "docs/scale.md#shards)")
    found = readme_link_problems(bad)
    assert len(found) == 3, found
    assert "relative link docs/spec.md" in found[0]
    assert "docs/nothing.md, which does not exist" in found[1]
    assert "has no heading #no-such-heading" in found[2]


def _build_site(config: Path, site: Path) -> None:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    build(load_config(str(config), site_dir=str(site)))


def test_the_docs_build_as_a_site_with_no_broken_link_or_anchor(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    _build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    assert (tmp_path / "site" / "statistics" / "index.html").exists()


def test_the_strict_site_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    import shutil

    from mkdocs.exceptions import Abort

    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "chaos.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[gone](scale.md#no-such-heading)\n",
                    encoding="utf-8")
    with pytest.raises(Abort, match="strict mode"):
        _build_site(tmp_path / "mkdocs.yml", tmp_path / "site")
