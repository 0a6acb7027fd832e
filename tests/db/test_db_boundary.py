"""The database is a room below the daemon: nothing in ``railgang/db`` imports ``railgang.daemon``
(issue 22), so the schema, the repositories and the migrations can be read, tested and reused
without the scheduler. What both need sits below them: ``railgang.errors``, ``railgang.org``
(the quota tree's rules), ``railgang.topology`` (the fleet vocabulary)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "railgang" / "db"
MODULES = sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_db_room_is_read_whole() -> None:
    assert len(MODULES) > 15


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_db_never_imports_the_daemon(path: Path) -> None:
    bad = sorted(m for m in _imports(path) if m.startswith(("railgang.daemon", "railgang.slurm_plugins")))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
