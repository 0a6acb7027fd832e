"""What a backend that keeps its cluster from cycle to cycle already knows about the snapshot it
hands the core, so the core need not count it again (issue 12, speed; issue 22: kept behind this
one seam instead of in the model's fields and module-level caches).

The simulator updates these counts as jobs start and end and nodes change; the daemon's Slurm
backend builds a fresh snapshot every cycle and gives no index, so the core derives everything
from the snapshot itself. An index is only a shortcut: every field must equal what
:func:`rebuild` derives from the same snapshot (``tests/daemon/sim/test_snapshot_index.py``
replays traces and compares them at every cycle).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from railgang.daemon.core.model.job import RunningJob

if TYPE_CHECKING:
    from railgang.daemon.core.model.pools import Pools
    from railgang.daemon.core.model.snapshot import Node, Snapshot


@dataclass(frozen=True, slots=True)
class SnapshotIndex:
    """Counts of one snapshot that its backend kept up to date (see the module docstring)."""

    total_gpus: int  # GPUs on usable nodes
    free_gpus: int  # GPUs in ``Snapshot.free``
    held: Mapping[str, int]  # GPUs each account's running jobs hold
    elastic_running: tuple[RunningJob, ...]  # running jobs with an elastic range, by job id
    running_per_class: tuple[int, ...]  # running jobs per priority class (0 … 3)
    pools: Pools | None = None  # the usable nodes grouped by (GPU type, tier); None: derive


def usable_gpus(nodes: Mapping[str, Node]) -> int:
    """GPUs on the nodes that can run work."""
    return sum(n.gpus for n in nodes.values() if n.state.usable)


def held_by_account(running: Mapping[str, RunningJob]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in running.values():
        acc = r.job.request.account
        out[acc] = out.get(acc, 0) + r.gpus
    return out


def per_class(running: Mapping[str, RunningJob]) -> tuple[int, ...]:
    per = [0, 0, 0, 0]
    for r in running.values():
        per[r.priority_class] += 1
    return tuple(per)


def rebuild(snapshot: Snapshot) -> SnapshotIndex:
    """The index derived from the snapshot's own data: what any kept index must equal."""
    from railgang.daemon.core.model.pools import pools_of_nodes  # pools imports the snapshot

    return SnapshotIndex(
        total_gpus=usable_gpus(snapshot.nodes),
        free_gpus=sum(len(g) for g in snapshot.free.values()),
        held=held_by_account(snapshot.running),
        elastic_running=tuple(r for r in snapshot.running.values() if r.job.request.elastic),
        running_per_class=per_class(snapshot.running),
        pools=pools_of_nodes(snapshot.nodes),
    )


__all__ = ["SnapshotIndex", "held_by_account", "per_class", "rebuild", "usable_gpus"]
