"""How every renderer writes a number (proportions with 3 decimals, signed changes, q, a
price), a table of text, and a text that came from a rollout (on one line, with nothing a
terminal would act on)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pytest_prove.stats import Row

__all__ = ["REPORT_SCHEMA_VERSION", "TableLine", "money", "plain_text", "power_text", "q_text",
           "rate", "signed", "status_text", "table", "terminal_text", "wrapped"]

#: The shape of every JSON document the reports and the command line write.
REPORT_SCHEMA_VERSION: Final = 1


def rate(value: float) -> str:
    """A proportion, as 0.059."""
    return f"{value:.3f}"


def power_text(value: float) -> str:
    """A power (a probability of catching or showing something), with two decimals rounded
    down, never to the nearest: a power of 0.7992 reads 0.79, so a figure printed beside a
    threshold (0.80, "4 times in 5") is below it exactly when the power is."""
    hundredths = math.floor(value * 100.0)
    if hundredths / 100.0 > value:  # value * 100 rounded up in floating point
        hundredths -= 1
    return f"{max(hundredths, 0) / 100.0:.2f}"


def signed(value: float) -> str:
    """A change with its sign, as +0.195; a change that rounds to nothing reads 0.000."""
    return "0.000" if abs(value) < 5e-4 else f"{value:+.3f}"


def q_text(value: float) -> str:
    """An adjusted p-value, as 0.012, or <0.001 below that."""
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def status_text(row: Row, *, counted: str, leaning: str, blind: str, either: str) -> str:
    """Where a row stands, in a renderer's words: counted by the verdict (``counted``, with
    ``{direction}``), else flagged (``leaning``, with ``{leaning}``; plain ``flagged`` when
    it leans neither way), else blind to a change of the size asked (``blind``, with
    ``{blind}``: the directions it cannot see, joined by ``either``), else ``unchanged``."""
    if row.counted:
        return counted.format(direction=row.direction)
    if row.flag:
        return leaning.format(leaning=row.leaning) if row.leaning != "none" else "flagged"
    if row.blind:
        return blind.format(blind=either.join(row.blind))
    return "unchanged"


def money(value: float | None, *, tiny: bool = False) -> str:
    """A price in dollars: four decimals below $1 ($0.0165), else two with thousands
    separated ($1,234.50); ``no price`` for None. With ``tiny``, a price above 0 but below
    $0.0001 gets two significant digits ($0.000012) where four decimals would read $0.0000
    (the HTML report's cost figure; the ``cost`` command's lines keep four decimals)."""
    if value is None:
        return "no price"
    if tiny and 0 < value < 1e-4:
        return f"${value:.{1 - math.floor(math.log10(value))}f}"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


class TableLine(str):
    """A line of a table: :func:`wrapped` never breaks it (its columns would no longer line
    up); a terminal may still fold it."""

    __slots__ = ()


def table(header: Sequence[str], rows: Sequence[Sequence[str]],
          numeric: frozenset[int] = frozenset()) -> list[str]:
    """Columns padded to their widest cell; the ``numeric`` ones right-aligned."""
    widths = [max(len(str(line[i])) for line in [header, *rows]) for i in range(len(header))]
    return [TableLine("  ".join((str(c).rjust(w) if i in numeric else str(c).ljust(w))
                                for i, (c, w) in enumerate(zip(line, widths, strict=True)))
                      .rstrip())
            for line in [header, *rows]]


def wrapped(lines: Iterable[str], width: int) -> list[str]:
    """``lines`` for a terminal ``width`` columns wide: a longer line of prose broken where
    a space is, never inside a word (a terminal folds it wherever the edge falls), its
    continuation indented by two spaces; a line of a table (:class:`TableLine`) and a word
    longer than the width are left whole."""
    found: list[str] = []
    for line in lines:
        if len(line) <= width or isinstance(line, TableLine) or width < 20:
            found.append(line)
            continue
        for part in line.split("\n"):  # a message's own lines are kept
            found.extend(textwrap.wrap(part, width, subsequent_indent="  ",
                                       break_long_words=False, break_on_hyphens=False)
                         or [part])
    return found


def _escaped(char: str) -> str:
    return char if char.isprintable() else ascii(char)[1:-1]


def plain_text(value: object) -> str:
    """``value`` whole, its lines kept, every other character that is not printable written
    as its Python escape (as :func:`terminal_text` writes them): for a message that may quote
    what a rollout wrote, such as an error the command line prints."""
    text = str(value)
    if text.isprintable():
        return text
    return "\n".join("".join(map(_escaped, line)) for line in text.split("\n"))


def _fitting(pieces: Iterable[str], room: int) -> list[str]:
    taken: list[str] = []
    for piece in pieces:
        room -= len(piece)
        if room < 0:
            break
        taken.append(piece)
    return taken


def terminal_text(value: object, limit: int = 80) -> str:
    """``value`` on one line of at most ``limit`` characters, every character that is not
    printable (C0 and C1 controls, ESC, DEL, line and paragraph separators, bidi overrides
    and other format characters, lone surrogates) written as its Python escape, so that
    ``"\\x1b[31m"`` reads as typed; a longer value keeps its start and end around an
    ellipsis, since both tell conditions apart."""
    text = str(value)
    if len(text) <= limit and text.isprintable():
        return text
    # Only the ends can be shown, so only they are escaped: a value may be megabytes long.
    ends = text if len(text) <= 2 * limit else text[:limit] + text[-limit:]
    pieces = [_escaped(c) for c in ends]
    if len(text) <= 2 * limit and sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    room = limit - 1  # one for the ellipsis
    head = _fitting(pieces, room - room // 3)
    tail = _fitting(reversed(pieces[len(head):]), room - sum(map(len, head)))
    return "".join(head) + "\u2026" + "".join(reversed(tail))
