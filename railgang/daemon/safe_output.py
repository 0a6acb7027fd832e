"""Output that a user's text cannot turn into code: spreadsheet cells and terminal text.

Job names, Comments (labels), accounts, node reasons and trace rows are written by users; railgang
copies them into CSV files and onto operators' terminals (docs/security.md, "Output").

- **CSV** (:class:`CsvWriter`, every CSV railgang writes; :func:`csv_cell` for one cell): a *text* cell that starts with ``=``, ``+``, ``-``,
  ``@``, a tab or a carriage return is a formula to Excel, LibreOffice and Google Sheets
  (``=HYPERLINK(…)``, ``-2+3+cmd|' /C calc'!A0``), so it gets a leading ``'``, as OWASP's "CSV
  Injection" page advises; the csv module then quotes what needs quoting. Numbers railgang
  computes (``int``, ``float``, ``Decimal``) are written as numbers, negative ones too: only text
  is escaped, so a column of costs or deltas stays numeric in the sheet. A user's label that
  merely looks like a number (``-5``) is text and is escaped.
- **Terminal** (:func:`term_safe`, :func:`term_text`): C0 controls (newline and tab too: in a
  user's field they are not ours), ESC, DEL, the C1 controls (U+0080–U+009F, which some terminals
  read as CSI/OSC) and the bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069:
  "Trojan Source" reordering) are shown as ``\\x1b`` / ``\\u202e``; a backslash stays itself.
  Rich parses ``[red]`` in a ``str`` as markup, so a user's text reaches rich as a
  :class:`rich.text.Text` (:func:`term_text`), never as a markup string.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # rich is imported only by the commands that render with it
    from rich.text import Text

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def csv_cell(value: Any) -> Any:
    """One CSV cell: text that a spreadsheet would run as a formula gets a leading ``'``;
    numbers (``bool`` among them) and ``None`` pass unchanged, anything else as its text."""
    if value is None or isinstance(value, (int, float, Decimal)):
        return value
    text = value if isinstance(value, str) else str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def csv_row(values: Iterable[Any]) -> list[Any]:
    """:func:`csv_cell` of each value: what every railgang CSV writer hands ``writerow``."""
    return [csv_cell(v) for v in values]


class CsvWriter:
    """``csv.writer``'s ``writerow``/``writerows`` with every cell through :func:`csv_cell`.

    A field holding a carriage return is quoted whatever the line ending: ``csv.writer`` with
    ``lineterminator="\\n"`` quotes a field with ``\\n`` but not one with a lone ``\\r``, and
    a reader (and a spreadsheet) then splits the row in two, so a user's label could add rows.
    Each row is written with ``\\r\\n`` (which quotes both) and ends in ``lineterminator``."""

    def __init__(self, fh: TextIO, lineterminator: str = "\n") -> None:
        self._fh = fh
        self._end = lineterminator
        self._buf = io.StringIO()
        self._writer = csv.writer(self._buf, lineterminator="\r\n")

    def writerow(self, values: Iterable[Any]) -> None:
        self._buf.seek(0)
        self._buf.truncate()
        self._writer.writerow(csv_row(values))
        self._fh.write(self._buf.getvalue()[:-2] + self._end)

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def term_safe(text: object, *, newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\u202e``), so it
    cannot move the cursor, retitle the window, clear the screen or reorder a line. With
    ``newlines``, ``\\n`` is kept (for multi-line text that railgang itself laid out)."""
    s = str(text)
    if not newlines:
        return _UNSAFE.sub(_escape, s)
    return "\n".join(_UNSAFE.sub(_escape, part) for part in s.split("\n"))


def term_safe_data(data: Any) -> Any:
    """``data`` (JSON-like: dicts, lists, strings, numbers) with :func:`term_safe` applied to every
    string, keys too: for a renderer that lays out lines of its own from a record's fields."""
    if isinstance(data, str):
        return term_safe(data)
    if isinstance(data, dict):
        return {term_safe_data(k): term_safe_data(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(term_safe_data(v) for v in data)
    return data


def term_text(text: object, style: str = "") -> Text:
    """A rich :class:`~rich.text.Text` of ``text`` made safe: no markup is parsed from it and no
    control character reaches the terminal."""
    from rich.text import Text

    return Text(term_safe(text), style=style)


__all__ = ["FORMULA_START", "CsvWriter", "csv_cell", "csv_row", "term_safe", "term_safe_data", "term_text"]
