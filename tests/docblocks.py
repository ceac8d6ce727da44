"""The fenced code blocks of README.md, docs/**/*.md and examples/**/*.md, found and
classified for tests/test_docs.py, which checks each one the way pytest-prove reads it.

Nothing here names a block: every block of every page is found and sorted by what it shows,
so a page or a block added later is checked without touching the tests.

A block is left out only by a visible rule, and the test says why (``pytest -rs``):

- the HTML comment ``<!-- docs-test: skip, WHY -->`` on the nearest non-blank line above
  its fence;
- output: a block without a language whose lines carry no shell prompt (``$ ``);
- shell steps that run no pytest-prove command (``pip install``, ``git add``, ``cd``);
- a language this harness has no reader for.

A command that a page shows being refused on purpose says so at the end of its line,
``$ pytest --prove-shard=4/3   # docs-test: refused``: the test then fails if it is accepted.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "Command", "all_blocks", "blocks_of", "commands_in", "doc_files",
           "product_command"]

#: ``<!-- docs-test: skip, the reason -->`` above a fence leaves its block out, for the reason.
SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*,\s*(?P<why>.+?)\s*-->\s*$")
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
#: A shell prompt in a console block: ``$ cmd``, or ``job1$ cmd`` (a prompt naming a host).
_PROMPT = re.compile(r"^[\w./~-]*\$ (?P<command>.*)$")
#: A GitHub Actions expression, ``${{ matrix.shard }}``: it stands for a value, here 1.
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}")
_SHELL_LANGS = {"bash", "sh", "shell", "console", "zsh", "shell-session"}
_PYTHON = re.compile(r"^python(3(\.\d+)?)?$")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it is, its language and its text (indent removed)."""

    path: str  # relative to the repository, with forward slashes
    line: int  # the line of its opening fence, counted from 1
    lang: str
    text: str
    skip: str | None = None
    source: Path | None = None  # the page itself, where the block's neighbours are read

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    def where(self, index: int | None = None) -> str:
        """``file:line`` of the block, or of its line ``index`` (0 for its first)."""
        return f"{self.path}:{self.line if index is None else self.line + 1 + index}"

    @property
    def kind(self) -> str:
        """What the block shows; :data:`LEFT_OUT` kinds are not checked."""
        lang = self.lang.lower()
        if lang == "toml":
            return _toml_kind(self.text)
        if lang in ("ini", "cfg"):
            return "ini"
        if lang in ("python", "py"):
            if re.search(r"\bprove\.rollout\(", self.text):
                return "rollout"
            return "module" if module_name(self) else "python"
        if lang in ("yaml", "yml"):
            return "yaml"
        if lang == "json":
            return "json"
        if lang in _SHELL_LANGS or (lang in ("", "text") and _has_prompt(self.text)):
            return "commands" if any(product_command(c.argv)[0] for c in commands_in(self)) \
                else "shell"
        if lang in ("", "text", "output", "plain", "console-output"):
            return "output"
        return "other"


#: Every kind a block can be: those checked, then those left out.
KINDS = ("commands", "yaml", "json", "spec", "spec-fragment", "pyproject", "ini", "rollout",
         "module", "python", "output", "shell", "other")
#: Kinds that are listed as left out, and why.
LEFT_OUT = {
    "output": "output or a diagram: a block without a language and without a shell prompt "
              "($ )",
    "shell": "shell steps only (install, build, start a server): no pytest or pytest-prove "
             "command to parse",
    "other": "no reader for this language",
}


def _toml_kind(text: str) -> str:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return "spec"  # the spec check names the TOML error
    if "tool" in data:
        return "pyproject"
    return "spec" if "target" in data else "spec-fragment"


def _has_prompt(text: str) -> bool:
    return any(_PROMPT.match(line) for line in text.splitlines())


def module_name(block: Block) -> str | None:
    """``agent`` for a python block whose first line is ``# specs/agent.py``: the block is
    that file, which a spec in the same page may name as its target."""
    first = block.text.lstrip("\n").split("\n", 1)[0]
    found = re.fullmatch(r"#\s*(?:[\w.-]+/)*(?P<name>[A-Za-z_]\w*)\.py\s*", first)
    return found["name"] if found else None


def doc_files(root: Path) -> list[Path]:
    """README.md, then every page under docs/ and examples/ (sub-folders too), in a stable
    order."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md")),
            *sorted((root / "examples").rglob("*.md"))]


def blocks_of(path: Path, root: Path) -> list[Block]:
    """Every fenced block of one page, with the skip comment above it if any."""
    lines = path.read_text(encoding="utf-8").splitlines()
    name = path.relative_to(root).as_posix()
    found = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        body = []
        end = index + 1
        while end < len(lines):
            closing = _FENCE.match(lines[end])
            if (closing and closing["fence"][0] == fence[0]
                    and len(closing["fence"]) >= len(fence) and not closing["lang"]
                    and lines[end].strip() == closing["fence"]):
                break
            line = lines[end]
            strip = len(line) - len(line.lstrip(" "))
            body.append(line[min(strip, indent):])
            end += 1
        above = next((lines[k] for k in range(index - 1, -1, -1) if lines[k].strip()), "")
        skip = SKIP.match(above)
        found.append(Block(path=name, line=index + 1, lang=opening["lang"],
                           text="\n".join(body) + "\n", skip=skip["why"] if skip else None,
                           source=path))
        index = end + 1
    return found


def all_blocks(root: Path) -> list[Block]:
    return [block for path in doc_files(root) for block in blocks_of(path, root)]


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class Command:
    """One simple command of a block: the block line it starts on, and its words."""

    index: int  # the line in the block, from 0
    argv: list[str] = field(default_factory=list)
    text: str = ""
    refused: bool = False  # shown being refused on purpose (``# docs-test: refused``)


def _logical_lines(block: Block) -> Iterator[tuple[int, str]]:
    """The command lines of a shell block with their continuations joined: the lines after
    a prompt in a console block (the rest is output), every line of a script otherwise."""
    lines = block.text.splitlines()
    prompted = _has_prompt(block.text)
    index = 0
    while index < len(lines):
        start, line = index, lines[index]
        index += 1
        if prompted:
            found = _PROMPT.match(line)
            if not found:
                continue
            line = found["command"]
        while line.endswith("\\") and index < len(lines):
            line = line[:-1] + " " + lines[index].strip()
            index += 1
        if line.strip():
            yield start, line


def split_commands(text: str) -> list[list[str]]:
    """A shell line cut into simple commands (at ``&&``, ``||``, ``;``, ``|``, ``&``), each
    without its redirections and its leading ``NAME=value`` assignments."""
    lexer = shlex.shlex(_EXPRESSION.sub("1", text), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    tokens = list(lexer)
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
            continue
        if token in ("&&", "||", ";", "|", "&", "(", ")"):
            commands.append([])
        elif token and set(token) <= set("<>&"):
            skip_next = True  # a redirection and its target
        else:
            commands[-1].append(token)
    cleaned = []
    for words in commands:
        while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
            words = words[1:]
        if words:
            cleaned.append(words)
    return cleaned


REFUSED = re.compile(r"#\s*docs-test:\s*refused\s*$")


def commands_in(block: Block) -> list[Command]:
    """The simple commands a shell or console block runs."""
    return [Command(index, words, text, refused=bool(REFUSED.search(text)))
            for index, text in _logical_lines(block) for words in split_commands(text)]


def commands_of_text(text: str, index: int) -> list[Command]:
    """The simple commands of a script given as one string (a workflow's ``run:``)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [Command(index, words, line)
            for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")
            for words in split_commands(line)]


def product_command(argv: list[str]) -> tuple[str | None, list[str]]:
    """``("pytest", args)``, ``("pytest-prove", args)``, or ``(None, argv)`` for any other
    program (pip, git, cd, echo)."""
    if not argv:
        return None, argv
    program = argv[0].rsplit("/", 1)[-1]
    if program in ("pytest", "py.test"):
        return "pytest", argv[1:]
    if program == "pytest-prove":
        return "pytest-prove", argv[1:]
    if _PYTHON.match(program) and argv[1:2] == ["-m"] and len(argv) > 2:
        if argv[2] == "pytest":
            return "pytest", argv[3:]
        if argv[2] == "pytest_prove":
            return "pytest-prove", argv[3:]
    return None, argv
