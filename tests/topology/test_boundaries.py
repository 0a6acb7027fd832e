"""The topology package is pure: nothing in it imports the daemon, the DB or Slurm, nor
subprocess or sockets (STYLE.md: pure core, thin shells). Its commands live with the other
commands (``railgang/daemon/cli/topology.py``), so the room below the daemon has no shell."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "topology"
FORBIDDEN = ("railgang.daemon", "railgang.db", "railgang.slurm_plugins", "pyslurm", "subprocess",
             "socket", "sqlalchemy", "requests")
MODULES = sorted(p for p in ROOT.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_pure_modules(path: Path) -> None:
    bad = {m for m in _imports(path) if m.startswith(FORBIDDEN)}
    assert not bad, f"{path.name} imports {sorted(bad)}"
