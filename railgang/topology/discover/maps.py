"""The two files an administrator may add to a capture: the OpenSM/ibnetdiscover node name map
(GUID -> name, for HCAs whose NodeDescription is the vendor default) and a rail map (node -> HCA
-> rail, for fabrics where HCA names do not say which rail a port is on).

Node name map (``infiniband-diags/man/common/sec_node-name-map.rst``)::

    # comment
    0x0008f10400411a08 "SW1"
    0x506b4b03003fa9b6 "node018 HCA-1"
    H-003048c74e4a0000 x5570comp1      (also read: GUID with a type prefix, bare name)

Rail map, JSON, TOML or YAML (by suffix), host lists allowed, ``"*"`` for every node::

    {"*": {"mlx5_0": 0, "mlx5_3": 1, "mlx5_4": 2, "mlx5_5": 3},
     "gpu[001-004]": {"mlx5_0": 0, "mlx5_1": 1}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import yaml

from railgang.topology.conf import expand_hosts
from railgang.topology.discover.ibnetdiscover import normal_guid
from railgang.topology.files import InputProblem, parse_json, parse_toml

__all__ = ["RailMap", "parse_node_name_map", "parse_rail_map"]

# OpenSM's `0x<guid> "<name>"`, and the `H-<guid> <name>` that site scripts write (X5's map).
_MAP_LINE = re.compile(r'^(?:[SHR]-)?(?:0x)?([0-9A-Fa-f]{1,16})\s+(?:"([^"]*)"|([^"\s#]+))\s*(?:#.*)?$')

RailMap = Mapping[str, Mapping[str, int]]
"""Node name (or ``*``) -> HCA name -> rail."""


def parse_node_name_map(text: str, path: str) -> dict[str, str]:
    """GUID (16 hex digits) -> name; a line that is not ``<guid> "<name>"`` is an error."""
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _MAP_LINE.match(line)
        if m is None:
            raise InputProblem('expected `<guid> "<name>"` (e.g. 0x0008f10400411a08 "SW1")',
                               path=path, line=number)
        out[normal_guid(m.group(1))] = (m.group(2) if m.group(2) is not None else m.group(3)).strip()
    if not out:
        raise InputProblem("empty node name map: no `<guid> \"<name>\"` line", path=path)
    return out


def _load(text: str, path: str) -> Any:
    kind = "TOML" if path.endswith(".toml") else "YAML" if path.endswith((".yaml", ".yml")) else "JSON"
    if kind == "TOML":
        return parse_toml(text, path, "rail map")
    if kind == "JSON":
        return parse_json(text, path, "rail map")
    try:
        return yaml.safe_load(text)
    except RecursionError as exc:
        raise InputProblem("rail map is nested too deep", path=path) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = getattr(exc, "lineno", None) or (mark.line + 1 if mark is not None else None)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputProblem(f"not valid {kind}: {first}", path=path, line=line) from exc


def parse_rail_map(text: str, path: str) -> RailMap:
    """Node -> HCA -> rail from JSON, TOML or YAML; every rail a non-negative integer."""
    data = _load(text, path)
    if not isinstance(data, dict) or not data:
        raise InputProblem('expected a table of host list -> {HCA: rail}, e.g. {"*": {"mlx5_0": 0}}', path=path)
    out: dict[str, Mapping[str, int]] = {}
    for expr, hcas in data.items():
        if not isinstance(hcas, dict) or not hcas:
            raise InputProblem("must map HCA names to rails", path=path, field=expr)
        for hca, rail in hcas.items():
            if not isinstance(rail, int) or isinstance(rail, bool) or rail < 0:
                raise InputProblem(f"rail of {hca!r} must be a non-negative integer, got {rail!r}",
                                   path=path, field=expr)
        try:
            names = ("*",) if expr == "*" else expand_hosts(expr)
        except ValueError as exc:
            raise InputProblem(str(exc), path=path, field=expr) from exc
        table = MappingProxyType(dict(hcas))
        for name in names:
            out[name] = table
    return MappingProxyType(out)
