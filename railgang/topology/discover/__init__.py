"""``railgang topology discover``: topology.conf and fabric facts from ``ibnetdiscover`` output.

One file per idea: ``ibnetdiscover`` parses both output forms, ``maps`` reads the node name map
and the rail map, ``classify`` finds hosts, switch levels, rails, link rates and what does not
fit, ``emit`` writes topology.conf and the facts, ``generate`` writes ibnetdiscover text for
regular fabrics (tests, benchmark). See docs/topology.md, "Discovery".
"""

from railgang.topology.discover.classify import FabricFacts, Hca, Problem, SwitchInfo, classify
from railgang.topology.discover.emit import (
    FACTS_FORMAT,
    SlurmSwitch,
    facts_json,
    render_conf,
    slurm_tree,
)
from railgang.topology.discover.generate import GeneratedFabric, Shape, generate_ibnetdiscover
from railgang.topology.discover.ibnetdiscover import Device, Discovery, Link, parse_ibnetdiscover
from railgang.topology.discover.maps import RailMap, parse_node_name_map, parse_rail_map

__all__ = [
    "FACTS_FORMAT",
    "Device",
    "Discovery",
    "FabricFacts",
    "GeneratedFabric",
    "Hca",
    "Link",
    "Problem",
    "RailMap",
    "Shape",
    "SlurmSwitch",
    "SwitchInfo",
    "classify",
    "facts_json",
    "generate_ibnetdiscover",
    "parse_ibnetdiscover",
    "parse_node_name_map",
    "parse_rail_map",
    "render_conf",
    "slurm_tree",
]
