"""A site-like local cluster (issue 35 item 1): the rules a real site runs, on six nodes.

The plain cluster has one partition over identical nodes, so no Slurm rule narrows where a job
may run. This one has what sites have (docs/devcluster.md, "The site-like cluster"):

- three GPU types (typed GRES and node features): ``n[01-02]`` h100, ``n[03-04]`` a100,
  ``n[05-06]`` v100, 8 GPUs each;
- CPUs and memory that run out before GPUs do: the a100 nodes have 32 GB (eight GPUs at
  ``--mem-per-gpu=8G`` do not fit), the v100 nodes 8 CPUs (``--cpus-per-gpu=2`` fills them
  at four GPUs);
- partitions ``gpu`` (every node, the default), ``short`` (``n[03-06]``, overlapping ``gpu``,
  a 30 minute MaxTime and a higher PriorityTier) and ``big`` (the h100 nodes);
- QOS ``capped`` (GrpTRES ``gres/gpu=16``, MaxTRESPerUser ``gres/gpu=8``), limits enforced;
- reservation ``team_b`` on ``n06`` for account team-b (jobs outside it may not use n06);
- license ``fluent:2``.

Pure: the lines slurm.conf gets, and the commands that make the QOS and the reservation once
slurmctld and slurmdbd run (``DevCluster.up`` runs them).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SITE_LICENSES", "SITE_POOLS", "SITE_QOS", "SITE_RESERVATION", "SiteNode",
           "site_commands", "site_conf_lines", "site_node", "site_nodes", "site_partitions"]

SITE_POOLS = "h100=2,a100=2,v100=2"  # parse_pools text: typed GRES and features per GPU type
SITE_LICENSES = "fluent:2"
SITE_QOS = "capped"
SITE_RESERVATION = "team_b"


@dataclass(frozen=True)
class SiteNode:
    cpus: int
    memory_mb: int


# by node name: h100 roomy, a100 memory-bound, v100 CPU-bound
_NODES = {"n01": SiteNode(32, 262144), "n02": SiteNode(32, 262144),
          "n03": SiteNode(32, 32768), "n04": SiteNode(32, 32768),
          "n05": SiteNode(8, 65536), "n06": SiteNode(8, 65536)}


def site_nodes() -> dict[str, SiteNode]:
    return dict(_NODES)


def site_node(name: str) -> str:
    """The ``CPUs= RealMemory=`` a site node's NodeName line gets ("" for a node not in it)."""
    n = _NODES.get(name)
    return f" CPUs={n.cpus} RealMemory={n.memory_mb}" if n else ""


def site_conf_lines() -> list[str]:
    """slurm.conf lines beside the plain cluster's (before the node lines); its QOS limits are
    enforced by ``AccountingStorageEnforce=associations,limits,qos`` (layout.py)."""
    return [f"Licenses={SITE_LICENSES}"]


def site_partitions(billing: str) -> list[str]:
    return [f"PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE PriorityTier=1 State=UP{billing}",
            f"PartitionName=short Nodes=n[03-06] MaxTime=30 PriorityTier=10 State=UP{billing}",
            f"PartitionName=big Nodes=n[01-02] MaxTime=INFINITE PriorityTier=1 State=UP{billing}"]


def site_commands() -> list[list[str]]:
    """sacctmgr and scontrol argv (program name first) that add the QOS and the reservation."""
    mgr, ctl = "/usr/bin/sacctmgr", "/usr/bin/scontrol"
    return [
        [mgr, "-i", "add", "qos", SITE_QOS],
        [mgr, "-i", "modify", "qos", SITE_QOS, "set", "GrpTRES=gres/gpu=16",
         "MaxTRESPerUser=gres/gpu=8"],
        [mgr, "-i", "modify", "user", "root", "set", f"qos+={SITE_QOS}"],
        [ctl, "create", "reservation", f"ReservationName={SITE_RESERVATION}", "Accounts=team-b",
         "Nodes=n06", "StartTime=now", "Duration=infinite"],
    ]
