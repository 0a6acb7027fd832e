"""Shared paths and a one-call discovery helper for the discover tests."""

from __future__ import annotations

from pathlib import Path

from railgang.topology.discover import (
    FabricFacts,
    classify,
    parse_ibnetdiscover,
    parse_node_name_map,
)
from railgang.topology.inputs import iter_lines, read_text

DATA = Path(__file__).resolve().parents[1] / "data" / "ibnetdiscover"


def discover_file(name: str, name_map: str | None = None) -> FabricFacts:
    """Parse and classify one capture of DATA, with an optional node name map of DATA."""
    found = parse_ibnetdiscover(iter_lines(DATA / name, "capture"), name)
    names = parse_node_name_map(read_text(DATA / name_map, "map"), name_map) if name_map else None
    return classify(found, names)


def discover_text(text: str, name_map: str | None = None) -> FabricFacts:
    """Parse and classify ibnetdiscover text held in memory."""
    found = parse_ibnetdiscover(enumerate(text.splitlines(), start=1), "<text>")
    return classify(found, parse_node_name_map(name_map, "<map>") if name_map else None)
