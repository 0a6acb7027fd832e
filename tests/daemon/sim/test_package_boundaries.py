"""A folder holds what its name says (STYLE 17): the simulator's backend lives in daemon/sim/,
and the real backends in daemon/slurm/ never import the simulator (no import cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3] / "daemon"
SLURM_FILES = sorted((ROOT / "slurm").rglob("*.py"))


def _imports(path: Path) -> list[str]:
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("path", SLURM_FILES, ids=[str(p.relative_to(ROOT)) for p in SLURM_FILES])
def test_slurm_backends_do_not_import_the_simulator(path: Path) -> None:
    assert not [m for m in _imports(path) if m.startswith("railgang.daemon.sim")]


def test_the_simulated_cluster_is_not_in_the_slurm_folder() -> None:
    assert not (ROOT / "slurm" / "sim.py").exists()
    assert (ROOT / "sim" / "backend.py").is_file()
