"""daemon/core imports only the standard library, numpy, topology and the org tree's rules (STYLE 1)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[3] / "daemon" / "core"
ALLOWED_THIRD_PARTY = {"numpy"}
ALLOWED_RAILGANG = ("railgang.daemon.core", "railgang.topology", "railgang.org")


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


FILES = sorted(CORE.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CORE)) for p in FILES])
def test_core_module_imports_only_stdlib_numpy_topology_and_core(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "railgang":
            assert name.startswith(ALLOWED_RAILGANG), f"{path.name} imports {name}"
        else:
            assert top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY, f"{path.name}: {name}"


def test_boundary_test_sees_the_core_files() -> None:
    names = {p.name for p in FILES}
    assert {"cycle.py", "snapshot.py", "actions.py", "reasons.py", "job.py"} <= names
