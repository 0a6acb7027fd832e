"""CPUs and memory beside GPUs in the core (issue 35 item 2): a node's free room bounds how many
of its GPUs a job's ask lets it take, and two jobs started in one cycle never share the memory
one of them needs. Before: the core placed on free GPUs alone, and Slurm kept a job pinned to a
node whose memory was taken pending forever."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core import Node, Start, decide, make_snapshot
from railgang.daemon.core.model.needs import Needs
from railgang.daemon.core.model.room import NO_ASK, Ask, Room
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.core.core_builders import job

GB = 1024


def _snap(rooms: list[Room | None], *pending: object, free: int = 8):  # type: ignore[no-untyped-def]
    fabric = fabric_from_shape(len(rooms), 8, 1)
    names = list(fabric.nodes)
    nodes = [Node(n, 8, room=r) for n, r in zip(names, rooms, strict=True)]
    return names, make_snapshot(now=0.0, fabric=fabric, nodes=nodes,
                                free={n: frozenset(range(free)) for n in names},
                                pending=[p.build() for p in pending])  # type: ignore[attr-defined]


def _asking(name: str, gpus: int, ask: Ask, at: float = 0.0):  # type: ignore[no-untyped-def]
    return job(name).gpus(gpus).at(at).with_(needs=Needs(ask=ask))


def _starts(d: object) -> dict[str, set[str]]:
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}  # type: ignore[attr-defined]


def test_an_ask_bounds_the_gpus_a_node_gives() -> None:
    room = Room(cpus=8, mem_mb=32 * GB)
    assert Ask(mem_mb_per_gpu=8 * GB).gpus_on(room, 8) == 4
    assert Ask(cpus_per_gpu=2).gpus_on(room, 8) == 4
    assert Ask(mem_mb=40 * GB).gpus_on(room, 8) == 0
    assert Ask(exclusive=True).gpus_on(Room(8, 32 * GB, idle=False), 8) == 0
    assert NO_ASK.gpus_on(room, 8) == 8 and NO_ASK.empty
    assert Ask(mem_mb_per_gpu=8 * GB).short(room, 8) == "65536 MB of memory asked, 32768 MB free"
    assert Ask(cpus_per_gpu=2).after(room, 2) == Room(4, 32 * GB, idle=False)
    assert Ask(exclusive=True).after(room, 1) == Room(0, 0, idle=False)
    assert Needs(ask=Ask(mem_mb=1)).render() == ""  # never in the tag


@pytest.mark.parametrize("policy", ["fifo", "default"])
def test_a_memory_bound_job_goes_where_its_memory_fits(policy: str) -> None:
    """8 GPUs x 8 GB on the first node (32 GB free) is a Start Slurm never honours."""
    names, snap = _snap([Room(32, 32 * GB), Room(32, 128 * GB)],
                        _asking("x", 8, Ask(mem_mb_per_gpu=8 * GB)))
    d = decide(snap, get(policy), 0.0, random.Random(0))
    assert _starts(d) == {"x": {names[1]}}


def test_no_node_with_room_means_it_waits() -> None:
    _, snap = _snap([Room(4, 32 * GB)], _asking("x", 4, Ask(cpus_per_gpu=2)))
    d = decide(snap, get("fifo"), 0.0, random.Random(0))
    assert _starts(d) == {} and d.reason("x") is not None


def test_two_starts_in_one_cycle_do_not_share_memory() -> None:
    """Each 4-GPU job fits the node's 40 GB alone (32 GB); both fit its GPUs, not its memory."""
    _, snap = _snap([Room(32, 40 * GB), Room(32, 40 * GB)],
                        _asking("a", 4, Ask(mem_mb=32 * GB)), _asking("b", 4, Ask(mem_mb=32 * GB), at=1))
    d = decide(snap, get("fifo"), 0.0, random.Random(0))
    starts = _starts(d)
    assert set(starts) == {"a", "b"} and starts["a"] != starts["b"], starts


def test_an_exclusive_job_takes_only_a_node_nobody_runs_on() -> None:
    names, snap = _snap([Room(32, 64 * GB, idle=False), Room(32, 64 * GB)],
                        _asking("x", 2, Ask(exclusive=True)), _asking("y", 2, Ask(cpus=1), at=1))
    d = decide(snap, get("fifo"), 0.0, random.Random(0))
    starts = _starts(d)
    assert starts["x"] == {names[1]}
    assert starts["y"] == {names[0]}  # not beside the exclusive one: its room is all taken


def test_unknown_room_is_not_checked() -> None:
    names, snap = _snap([None], _asking("x", 8, Ask(mem_mb_per_gpu=64 * GB)))
    assert _starts(decide(snap, get("fifo"), 0.0, random.Random(0))) == {"x": {names[0]}}
