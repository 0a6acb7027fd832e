"""The import graph of ``railgang/`` and ``benchmarks/`` has no circle (issue 34).

Every ``import`` and ``from ... import`` counts, at module level and inside functions (a lazy
import hides a circle, it does not break it); relative imports are resolved. ``from pkg import x``
points at ``pkg.x`` when that is a module, else at ``pkg``. A package's ``__init__`` importing its
own submodules (re-exports) is not an arrow: the package holds them.

``REMAINING`` lists the circles not yet broken, each to be moved out of this list by fixing the
structure; the test fails if a listed circle is gone, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("railgang", "benchmarks")

REMAINING: set[frozenset[str]] = set()  # issue 34: circles still to break (none left)


def _modules() -> dict[str, Path]:
    mods = {}
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _targets(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        return [base] + [f"{base}.{alias.name}" for alias in node.names]
    return []


def import_graph() -> nx.DiGraph:
    mods = _modules()
    graph = nx.DiGraph()
    for name, path in mods.items():
        graph.add_node(name)
        is_init = path.name == "__init__.py"
        package = name if is_init else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(node, package):
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if not target or target == name or (is_init and target.startswith(name + ".")):
                    continue
                graph.add_edge(name, target)
    return graph


def test_no_circle_outside_the_known_ones() -> None:
    graph = import_graph()
    circles = {frozenset(c) for c in nx.strongly_connected_components(graph) if len(c) > 1}
    new = circles - REMAINING
    assert not new, "circles of imports: " + "; ".join(" <-> ".join(sorted(c)) for c in new)
    gone = REMAINING - circles
    assert not gone, "broken, take out of REMAINING: " + "; ".join(" <-> ".join(sorted(c)) for c in gone)


# what a settings module (a room's ``config.py``, and ``daemon/config.py`` that gathers them) may
# import: settings, values and errors, never a component's working parts above its own room
SETTINGS_MAY_IMPORT = ("railgang.errors", "railgang.db.urls", "railgang.daemon.core.model",
                       "railgang.topology", "railgang.daemon.pricing")  # (pricing: a price table)


def _settings_modules(graph: nx.DiGraph) -> list[str]:
    return sorted(m for m in graph if m.startswith("railgang.") and m.endswith(".config"))


def _room(module: str) -> str:
    return module.rpartition(".")[0]


def test_no_setting_points_up_into_a_component() -> None:
    """A settings module imports other settings modules, its own room (the rules its settings
    build), the core's model, topology's values and the errors; ``daemon/config.py`` gathers the
    rooms' settings. Any other arrow is a setting reaching up into a component."""
    graph = import_graph()
    bad = []
    for mod in _settings_modules(graph):
        for target in graph.successors(mod):
            if not target.startswith("railgang."):
                continue
            own = mod != "railgang.daemon.config" and (  # the gatherer has no room of its own
                _room(target) == _room(mod) or target.startswith(_room(mod) + "."))
            ok = target.endswith(".config") or target.startswith(SETTINGS_MAY_IMPORT) or own
            if not ok:
                bad.append(f"{mod} -> {target}")
    assert not bad, "settings reaching up into components: " + "; ".join(bad)
