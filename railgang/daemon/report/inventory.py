"""The fleet the report counts against: every node known to the ledger, busy or idle.

A pool's size is the GPUs of its nodes, from (in this order) ``node_states`` (what sinfo showed:
node, GPU type, GPUs; written by the daemon's collector and by ``sim --ledger``), else the GPUs
that sent telemetry in the window (DCGM reports idle GPUs too) with the node's type taken from
the segments that ran on it, or from the only pool when there is one. Counting only the nodes
that ran jobs (what the report did before issue 23) made a 512-GPU fleet read as 104 GPUs and
56 % allocated instead of 11 %.

Down and drained nodes: each node's ``node_states`` rows make intervals (a row lasts until the
node's next row); the ones in a down or drain state that overlap the window are listed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from railgang.daemon.report.data import NodeRecord
from railgang.daemon.report.model import NodeRow

UNAVAILABLE = ("down", "drain", "drained", "draining", "fail", "failing", "maint", "future",
               "not_responding", "power_down", "powered_down", "reboot")


@dataclass(frozen=True, slots=True)
class Inventory:
    pool_of: dict[str, str]  # node -> GPU type
    gpus_of: dict[str, int]  # node -> GPUs
    source: dict[str, str]  # pool -> "inventory" | "telemetry"

    def pool_gpus(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for node, pool in self.pool_of.items():
            out[pool] += self.gpus_of.get(node, 0)
        return dict(out)

    def nodes_of(self, pool: str) -> list[str]:
        return sorted(n for n, p in self.pool_of.items() if p == pool)


def inventory(records: Sequence[NodeRecord], telemetry_sizes: Mapping[str, int],
              busy_pools: Mapping[str, Sequence[str]]) -> Inventory:
    """Nodes from ``node_states`` (each node's last row), then telemetry-only nodes placed in
    the pool their segments say (or the only pool)."""
    pool_of: dict[str, str] = {}
    gpus_of: dict[str, int] = {}
    source: dict[str, str] = {}
    for r in records:  # in (node, time) order: the last row wins
        if r.state == "gone":  # left sinfo (db/repositories/nodes.py GONE): not in the fleet
            pool_of.pop(r.node, None)
            gpus_of.pop(r.node, None)
            continue
        pool_of[r.node], gpus_of[r.node] = r.gpu_type, r.gpus
        source[r.gpu_type] = "inventory"
    ran_on = {n: pool for pool, nodes in busy_pools.items() for n in nodes}
    pools = set(busy_pools) | set(pool_of.values())
    only = next(iter(pools)) if len(pools) == 1 else None
    for node, gpus in telemetry_sizes.items():
        if node in pool_of:
            continue
        pool = ran_on.get(node, only)
        if pool is None:
            continue
        pool_of[node], gpus_of[node] = pool, gpus
        source.setdefault(pool, "telemetry")
    return Inventory(pool_of, gpus_of, source)


def unavailable_nodes(records: Sequence[NodeRecord], since: int, until: int) -> list[NodeRow]:
    """Down/drained intervals overlapping the window, longest first."""
    by_node: dict[str, list[NodeRecord]] = defaultdict(list)
    for r in records:
        by_node[r.node].append(r)
    rows = []
    for node, recs in by_node.items():
        for i, r in enumerate(recs):
            base = base_state(r.state)
            if base not in UNAVAILABLE:
                continue
            end = recs[i + 1].at if i + 1 < len(recs) else None
            lo, hi = max(r.at, since), min(end if end is not None else until, until)
            if hi <= lo:
                continue
            rows.append(NodeRow(node, r.gpu_type, r.gpus, base, r.reason, r.at, end,
                                round(r.gpus * (hi - lo) / 3600, 3)))
    return sorted(rows, key=lambda x: (-x.lost_gpu_h, x.node, x.since))


# a run that ended this close to one of its nodes going down was ended by the fault: Slurm kills
# a failed node's jobs when it marks the node down, railgang's hang detection a little later
FAULT_BEFORE_S, FAULT_AFTER_S = 60, 900


def base_state(state: str) -> str:
    return state.lower().rstrip("*~#!%$@^-+").split("+")[0]


def down_starts(records: Sequence[NodeRecord]) -> dict[str, list[int]]:
    """node -> the times it went down (rows in (node, time) order; drained is no fault)."""
    out: dict[str, list[int]] = defaultdict(list)
    was: dict[str, bool] = {}
    for r in records:
        down = base_state(r.state) in ("down", "fail", "failing", "not_responding")
        if down and not was.get(r.node, False):
            out[r.node].append(r.at)
        was[r.node] = down
    return dict(out)


def ended_by_fault(nodes: Sequence[str], end: int, starts: Mapping[str, Sequence[int]]) -> bool:
    """Whether a run on ``nodes`` that ended at ``end`` ended because one of them went down."""
    return any(d - FAULT_BEFORE_S <= end <= d + FAULT_AFTER_S
               for n in nodes for d in starts.get(n, ()))


__all__ = ["UNAVAILABLE", "Inventory", "base_state", "down_starts", "ended_by_fault", "inventory",
           "unavailable_nodes"]
