"""Offline inputs of the topology tools: node-facts files, ``sinfo``/``scontrol --json`` output and
free-GPU files. Pure parsing; problems raise ``InputProblem`` carrying file, line and field so the
CLI can turn them into ``railgang.errors.InputError``.

Free-GPU file (``railgang place --free``), one line per host list, ``#`` comments::

    gpu[001-004]   all        # every GPU free
    gpu005         0-3        # indices, ranges and commas
    gpu006         0,2,4,6
    gpu[007-008]   none

A JSON object ``{"gpu[001-004]": "all", "gpu005": [0, 1, 2, 3]}`` is accepted too.

Every file is read through ``read_text`` or ``iter_lines`` and parsed with ``parse_json`` /
``parse_toml``: railgang's one bounded reader (``railgang.topology.files``, re-exported here),
so ``/dev/zero``, a FIFO, a 50 MB paste of repeats or JSON nested 100,000 deep is refused with one
line instead of hanging or exhausting memory.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from railgang.topology.conf import expand_hosts

if TYPE_CHECKING:  # fabric (networkx) is imported where facts are built, not by readers of
    # plain lines (trace readers, `railgang sim --help`)
    from railgang.topology.fabric import Fabric, NodeFacts
from railgang.topology.files import (
    MAX_LINE_BYTES,
    MAX_TEXT_BYTES,
    InputProblem,
    iter_lines,
    parse_json,
    parse_toml,
    read_text,
)

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_TEXT_BYTES",
    "FactsTable",
    "InputProblem",
    "cap_list",
    "facts_from_slurm_json",
    "iter_lines",
    "parse_facts",
    "parse_free",
    "read_text",
    "write_atomic",
    "write_if_changed",
]



def cap_list(items: Iterable[str], limit: int = 10) -> list[str]:
    """The first ``limit`` items and, when there are more, a last "… and N more" entry."""
    out: list[str] = []
    extra = 0
    for item in items:
        if len(out) < limit:
            out.append(item)
        else:
            extra += 1
    if extra:
        out.append(f"… and {extra} more")
    return out


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old or the new file, never a torn one,
    and two writers at once (two daemons, two ``discover -o``) each replace it whole: every writer
    gets its own temporary file beside ``path`` (a fixed ``.tmp`` name lets one writer rename away
    the other's half-written file) and ``os.replace`` swaps it in. ``OSError`` when it cannot."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the file is read by other users' CLIs
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise



def write_if_changed(path: str | Path, text: str) -> bool:
    """:func:`write_atomic` unless ``path`` already holds ``text`` (files slurmctld's plugins
    re-read, such as the grants and fleet files, change only when their content does), creating
    its directory; True when written."""
    target = Path(path)
    try:
        if target.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, text)
    return True

@dataclass(frozen=True)
class FactsTable:
    """Facts for named nodes plus a default for every other node."""

    default: NodeFacts
    nodes: Mapping[str, NodeFacts]

    def for_nodes(self, names: Iterable[str]) -> dict[str, NodeFacts]:
        """Facts for exactly ``names``: the listed entry, or the default renamed."""
        return {n: self.nodes.get(n) or replace(self.default, name=n) for n in names}


_FACT_KEYS = {"gpus": int, "gpu_type": str, "gpu_mem_gb": float, "nvlink_domain": str, "nvlink": bool}


def _facts_from(entry: Mapping[str, Any], base: NodeFacts, path: str, field: str) -> NodeFacts:
    changes: dict[str, Any] = {}
    for key, value in entry.items():
        kind = _FACT_KEYS.get(key)
        if kind is None:
            raise InputProblem(f"unknown key {key!r} (expected {', '.join(sorted(_FACT_KEYS))})",
                               path=path, field=field)
        ok = isinstance(value, bool) if kind is bool else (
            isinstance(value, int | float) and not isinstance(value, bool) if kind in (int, float)
            else isinstance(value, str))
        if not ok or (kind is int and (not isinstance(value, int) or value < 1)) or (
                kind is float and value <= 0):
            raise InputProblem(f"{key} = {value!r} is not a valid {kind.__name__}", path=path, field=field)
        changes[key] = kind(value)
    return replace(base, **changes)


def parse_facts(text: str, path: str) -> FactsTable:
    """A static node-facts file (TOML if ``path`` ends in .toml, else JSON)::

        [defaults]
        gpus = 8
        gpu_type = "h100"
        gpu_mem_gb = 80
        [nodes."gpu[001-016]"]
        nvlink_domain = "nvl1"
    """
    from railgang.topology.fabric import NodeFacts

    data = (parse_toml(text, path, "facts file") if path.endswith(".toml")
            else parse_json(text, path, "facts file"))
    if not isinstance(data, dict):
        raise InputProblem("expected a table with [defaults] and [nodes]", path=path)
    unknown = set(data) - {"defaults", "nodes"}
    if unknown:
        raise InputProblem(f"unknown section(s) {sorted(unknown)}", path=path)
    defaults = data.get("defaults", {})
    nodes = data.get("nodes", {})
    if not isinstance(defaults, dict) or not isinstance(nodes, dict):
        raise InputProblem("[defaults] and [nodes] must be tables", path=path)
    default = _facts_from(defaults, NodeFacts(name="*"), path, "defaults")
    out: dict[str, NodeFacts] = {}
    for expr, entry in nodes.items():
        if not isinstance(entry, dict):
            raise InputProblem("must be a table of facts", path=path, field=f"nodes.{expr}")
        try:
            names = expand_hosts(expr)
        except ValueError as exc:
            raise InputProblem(str(exc), path=path, field=f"nodes.{expr}") from exc
        for name in names:
            out[name] = _facts_from(entry, replace(default, name=name), path, f"nodes.{expr}")
    return FactsTable(default, out)


def _features(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return _features(value.get("active") or value.get("total") or "")
    return [f for f in str(value or "").split(",") if f]


def facts_from_slurm_json(text: str, path: str = "<slurm json>", default_gpus: int = 8) -> dict[str, NodeFacts]:
    """Node facts from ``scontrol show nodes --json`` or ``sinfo --json`` (Slurm 22.05+ shapes).

    GPU count and type come from gres (``gpu:h100:8(S:0-1)``); node features may refine them:
    ``gpumem_<GB>``, ``nvlink``, ``pcie``/``no_nvlink``, ``nvl_<domain>`` (``topology/node_facts.py``).
    """
    from railgang.topology.node_facts import node_facts_from_gres

    data = parse_json(text, path, "Slurm JSON")
    out: dict[str, NodeFacts] = {}
    if isinstance(data, dict) and isinstance(data.get("nodes"), list):
        for node in data["nodes"]:
            if isinstance(node, dict) and isinstance(node.get("name"), str):
                gres = node.get("gres") or ""
                out[node["name"]] = node_facts_from_gres(node["name"], str(gres), _features(
                    node.get("active_features") or node.get("features")), default_gpus=default_gpus)
    elif isinstance(data, dict) and isinstance(data.get("sinfo"), list):
        for row in data["sinfo"]:
            if not isinstance(row, dict):
                continue
            names = (row.get("nodes") or {}).get("nodes") or []
            gres = row.get("gres") or {}
            gres_text = gres.get("total", "") if isinstance(gres, dict) else str(gres)
            feats = _features(row.get("features"))
            for name in names:
                if isinstance(name, str):
                    out[name] = node_facts_from_gres(name, str(gres_text), feats, default_gpus=default_gpus)
    else:
        raise InputProblem("expected 'nodes' (scontrol --json) or 'sinfo' (sinfo --json)", path=path)
    return out


_INDEXES = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")


def _indices(spec: str, gpus: int, path: str, line: int | None, node: str) -> frozenset[int]:
    spec = spec.strip().lower()
    if spec == "all":
        return frozenset(range(gpus))
    if spec in ("none", "-", ""):
        return frozenset()
    if not _INDEXES.match(spec):
        raise InputProblem(f"GPU list {spec!r} is not 'all', 'none' or like 0-3,6", path=path, line=line, field=node)
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        a, b = int(lo), int(hi or lo)
        if a > b or b >= gpus:
            raise InputProblem(f"GPU range {part!r} outside 0-{gpus - 1}", path=path, line=line, field=node)
        out.update(range(a, b + 1))
    return frozenset(out)


def parse_free(text: str, path: str, fabric: Fabric) -> tuple[dict[str, frozenset[int]], tuple[str, ...]]:
    """Free GPUs per node from a free-GPU file, and warnings for nodes not in the fabric (skipped)."""
    entries: list[tuple[int | None, str, str]] = []
    if text.lstrip().startswith("{"):
        data = parse_json(text, path, "free-GPU file")
        if not isinstance(data, dict):
            raise InputProblem("expected an object of host list -> GPUs", path=path)
        for key, value in data.items():
            if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
                spec = ",".join(str(v) for v in value) if value else "none"
            elif isinstance(value, str):
                spec = value
            else:
                raise InputProblem(f"{value!r} is not 'all', 'none' or a list of indices", path=path, field=key)
            entries.append((None, key, spec))
    else:
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise InputProblem("expected 'HOSTLIST GPUS'", path=path, line=number)
            entries.append((number, parts[0], parts[1]))
    if not entries:  # an empty file is a mistake far more often than "every GPU busy" (say "none")
        raise InputProblem("names no nodes (empty, or comments only); write 'HOSTLIST none' for busy "
                           "nodes", path=path)
    free: dict[str, frozenset[int]] = {}
    unknown: list[str] = []
    for where, expr, spec in entries:
        try:
            names = expand_hosts(expr)
        except ValueError as exc:
            raise InputProblem(str(exc), path=path, line=where, field="hosts") from exc
        for name in names:
            if name not in fabric:
                unknown.append(name)
                continue
            free[name] = _indices(spec, fabric.facts(name).gpus, path, where, name)
    warnings = (f"{path}: {len(unknown)} node(s) not in the topology, skipped: "
                f"{', '.join(cap_list(unknown, 5))}",) if unknown else ()
    return free, warnings
