"""Defragmentation (``CycleConfig.defrag``, core/phases/defrag.py) with the real placer.

Fabric: four NVL-style blocks of four 4-GPU nodes. Block b1 is free but for small jobs on
gb01 (-gb03); b2 and b3 are partly used (two GPUs free on gb05 and on gb09); b4 is full. A batch gang of TP 16 (one whole block) waits: no block is free, and a peer
may not evict a peer.
"""

from __future__ import annotations

import random

from railgang.daemon.core import CycleConfig, Migrate, Reason, Start, decide, topology_placer
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.preemption import PreemptionBudget
from railgang.daemon.core.model.snapshot import Snapshot, make_snapshot
from railgang.daemon.core.phases.defrag import DefragRules
from railgang.daemon.core.policies.registry import get
from tests.daemon.core.core_blocks import FAB, NAMES, NODES, PER
from tests.daemon.core.core_builders import job

NOW = 10_000.0
ON = DefragRules(enabled=True)
OPEN = PreemptionBudget(churn_cap=1.0)


def _run(jid: str, on: dict[str, tuple[int, ...]], *, work: float = 7200.0,
         evicted: float | None = None) -> RunningJob:
    g = sum(len(x) for x in on.values())
    j = job(jid).gpus(g).cls(3).at(0).work(work)
    if evicted is not None:
        j = j.evicted(evicted)
    return RunningJob(j.build(), on, 0.0, g)


def _fill(*skip: str) -> list[RunningJob]:
    """Whole-node jobs on b2-b4, but two GPUs free on gb05 and on gb09."""
    return [_run(f"f{n}", {n: (0, 1) if n in ("gb05", "gb09") else (0, 1, 2, 3)})
            for n in NAMES[PER:] if n not in skip]


GANG = job("gang").gpus(16).tp(16).cls(3).at(0).build()  # one TP group: a whole block


def _decide(running: list[RunningJob], *pending: Job, rules: DefragRules = ON,
            budget: PreemptionBudget = OPEN) -> tuple[Snapshot, list[Migrate], dict[str, Reason], list[Start]]:
    snap = make_snapshot(now=NOW, fabric=FAB, nodes=NODES, running=running, pending=pending)
    d = decide(snap, get("fifo"), NOW, random.Random(0), placer=topology_placer,
               config=CycleConfig(budget=budget, defrag=rules))
    return (snap, [a for a in d.actions if isinstance(a, Migrate)], {r.job_id: r.code for r in d.reasons},
            [a for a in d.actions if isinstance(a, Start)])


def test_a_small_job_moves_out_of_a_nearly_free_block_onto_a_fragmented_one() -> None:
    small = _run("small", {"gb01": (0, 1)})
    _, moves, reasons, starts = _decide([small, *_fill()], GANG)
    assert [m.job_id for m in moves] == ["small"]
    assert list(moves[0].assignment) in (["gb05"], ["gb09"])  # onto a fragmented block, one node
    assert reasons["gang"] == Reason.PREEMPTING and starts == []


def test_off_by_default_nothing_moves_and_the_gang_waits() -> None:
    small = _run("small", {"gb01": (0, 1)})
    _, moves, reasons, _ = _decide([small, *_fill()], GANG, rules=DefragRules())
    assert moves == [] and reasons["gang"] != Reason.PREEMPTING


def test_a_job_about_to_end_is_not_moved_the_move_would_not_pay() -> None:
    # the gang gains 16 GPUs x 20 s; the move costs 2 GPUs x (save 60 + restore 120 + restart 60 s),
    # and must pay it 1.5 times (MigrationRules.margin)
    small = _run("small", {"gb01": (0, 1)}, work=20.0)
    _, moves, _, _ = _decide([small, *_fill()], GANG)
    assert moves == []
    small = _run("small", {"gb01": (0, 1)}, work=50.0)  # 16 x 50 = 800 >= 1.5 x 480: it moves
    _, moves, _, _ = _decide([small, *_fill()], GANG)
    assert [m.job_id for m in moves] == ["small"]


def test_a_job_moved_or_evicted_within_the_window_is_never_moved_again() -> None:
    small = _run("small", {"gb01": (0, 1)}, evicted=NOW - 600.0)
    _, moves, _, _ = _decide([small, *_fill()], GANG)
    assert moves == []


def test_the_churn_budget_bounds_the_moves() -> None:
    small = _run("small", {"gb01": (0, 1)})
    _, moves, _, _ = _decide([small, *_fill()], GANG, budget=PreemptionBudget(churn_cap=1 / 64))
    assert moves == []


def test_no_target_on_fragmented_blocks_means_no_move() -> None:
    small = _run("small", {"gb01": (0, 1, 2)})  # three GPUs: neither b2 nor b3 has three on a node
    _, moves, _, _ = _decide([small, *_fill()], GANG)
    assert moves == []


def test_a_block_with_too_many_movers_is_left_alone() -> None:
    smalls = [_run(f"s{k}", {n: (0,)}) for k, n in enumerate(["gb01", "gb02", "gb03"])]
    _, moves, _, _ = _decide([*smalls, *_fill()], GANG, rules=DefragRules(enabled=True, max_movers=2))
    assert moves == []
    _, moves, _, _ = _decide([*smalls, *_fill()], GANG, rules=DefragRules(enabled=True, max_movers=3))
    assert sorted(m.job_id for m in moves) == ["s0", "s1", "s2"]


def test_two_moves_never_take_the_same_gpus() -> None:
    smalls = [_run(f"s{k}", {n: (0, 1)}) for k, n in enumerate(["gb01", "gb02"])]
    _, moves, _, _ = _decide([*smalls, *_fill()], GANG)
    taken = [(n, g) for m in moves for n, gs in m.assignment.items() for g in gs]
    assert len(moves) == 2 and len(taken) == len(set(taken))


def test_no_move_when_another_block_frees_up_soon_by_itself() -> None:
    # b4's four jobs end in 30 s: the gang waits 30 s without moves (16 x 30 < 1.5 x 480)
    small = _run("small", {"gb01": (0, 1)})
    soon = [r if FAB.leaf_of(next(iter(r.assignment))) != "b4" else _run(r.job_id, dict(r.assignment), work=30.0)
            for r in _fill()]
    _, moves, _, _ = _decide([small, *soon], GANG)
    assert moves == []
    _, moves, _, _ = _decide([small, *_fill()], GANG)  # the same with b4's jobs running on: it moves
    assert [m.job_id for m in moves] == ["small"]
