"""The topology package is pure: nothing but topology/cli.py may import the daemon (its errors and
CLI helpers), the DB or Slurm, and nothing imports subprocess or sockets (STYLE.md: pure core, thin
shells)."""

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
    # the shell shares the CLI's errors, exit codes and --json helper with every other command
    shell = {"railgang.errors", "railgang.daemon.cli_common"}
    allowed = shell if path.name == "cli.py" and path.parent == ROOT else set()
    bad = {m for m in _imports(path) if m.startswith(FORBIDDEN) and m not in allowed}
    assert not bad, f"{path.name} imports {sorted(bad)}"
