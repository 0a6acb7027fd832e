"""The observation captured from the 22.05 test cluster (data/), shared by the unit tests."""

from __future__ import annotations

from pathlib import Path

from railgang.daemon.slurm.cli.records import (
    parse_sinfo,
    parse_squeue,
    parse_sshare,
    topology_from_show,
)
from railgang.daemon.slurm.cli.snapshot import Observation, build_observation
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf

DATA = Path(__file__).parent / "data"
NOW = 1796057400.0  # a few seconds after the capture; the leases run to 1796057975


def observation(now: float = NOW) -> Observation:
    jobs, job_notes = parse_squeue((DATA / "squeue_mixed.json").read_text())
    nodes, node_notes = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    shares, _ = parse_sshare((DATA / "sshare.txt").read_text())
    topo = topology_from_show((DATA / "scontrol_topology.txt").read_text())
    fabric = fabric_from_conf(parse_topology(topo, "show"))
    return build_observation(now, jobs, nodes, fabric, shares, [*job_notes, *node_notes])
