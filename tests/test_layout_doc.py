"""docs/layout.md names every room of railgang/ and every phase of the core (issue 34 item 6).

The rooms are read from the tree, so a new folder of Python code, a new module loose in
``daemon/`` or a new file in ``core/phases/`` fails here until the page gives it its line. A
name counts when it is written as code: `` `daemon/sim/traces/` `` (or with ``railgang/`` in
front), `` `daemon/loop.py` ``, `` `phases/place.py` ``.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "railgang"
DOC = ROOT / "docs" / "layout.md"


def _py(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def rooms() -> list[str]:
    """Every folder of railgang/ that holds Python code, relative to railgang/ (``daemon/sim``)."""
    return sorted({p.parent.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")
                   if "__pycache__" not in p.parts})


def loose_modules() -> list[str]:
    """The modules directly in ``daemon/`` (each a room of its own: the seam, the loop, the
    settings, the clock …)."""
    return [f"daemon/{p.name}" for p in _py(PKG / "daemon")]


def phases() -> list[str]:
    return [p.name for p in _py(PKG / "daemon" / "core" / "phases")]


def _named(doc: str, pattern: str) -> bool:
    return re.search(pattern, doc) is not None


def test_the_tree_is_read() -> None:
    found = rooms()
    assert len(found) > 25 and "daemon/core/phases" in found and "daemon/cli" in found
    assert "daemon/loop.py" in loose_modules() and "place.py" in phases()


def test_every_room_is_in_layout_md() -> None:
    doc = DOC.read_text(encoding="utf-8")
    missing = [f"{room}/" for room in rooms()
               if not _named(doc, rf"`(?:railgang/)?{re.escape(room)}/`")]
    missing += [m for m in loose_modules() if not _named(doc, rf"`(?:railgang/)?{re.escape(m)}`")]
    assert not missing, f"docs/layout.md: give each its line: {missing}"


def test_every_phase_is_in_layout_md() -> None:
    doc = DOC.read_text(encoding="utf-8")
    missing = [name for name in phases()
               if not _named(doc, rf"`(?:(?:railgang/)?daemon/core/|core/)?phases/{re.escape(name)}`")]
    assert not missing, f"docs/layout.md: name each phase with one line: {missing}"
