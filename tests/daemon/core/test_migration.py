"""Migration off degraded links (R-T8): the payback rule on worked examples, and the migrate
phase of ``decide`` with a degraded spine on a real fabric, its budgets and its no-op cases."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core.cycle import CycleConfig, decide
from railgang.daemon.core.model.actions import Migrate
from railgang.daemon.core.model.job import Job, JobRequest, JobState, RunningJob
from railgang.daemon.core.model.snapshot import Node, PreemptEvent, Snapshot, make_snapshot
from railgang.daemon.core.phases.migrate import MigrationRules, payback, step_factor
from railgang.daemon.core.policies import registry
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.health import LinkHealth

# R-T8: "with 20 % loss a 10-minute migration pays back in under an hour"; margin 1.5 asks for a
# gross saving of 900 s, i.e. W × (1/0.8 - 1) >= 900, W >= 3600 s of work left
PAYBACK = [
    ("rt8-enough-work", 3600.0, 0.8, 1.0, 600.0, 1.5, True),
    ("rt8-just-short", 3500.0, 0.8, 1.0, 600.0, 1.5, False),
    ("margin-1-breaks-even", 2400.0, 0.8, 1.0, 600.0, 1.0, True),
    ("margin-1-just-short", 2390.0, 0.8, 1.0, 600.0, 1.0, False),
    ("half-speed-long-job", 36000.0, 0.5, 1.0, 600.0, 2.0, True),
    ("target-no-better", 36000.0, 0.8, 0.8, 600.0, 1.5, False),
    ("target-worse", 36000.0, 0.8, 0.7, 600.0, 1.5, False),
]


@pytest.mark.parametrize(("work", "f_now", "f_new", "cost", "margin", "moves"),
                         [c[1:] for c in PAYBACK], ids=[c[0] for c in PAYBACK])
def test_payback_rule(work: float, f_now: float, f_new: float, cost: float, margin: float,
                      moves: bool) -> None:
    verdict = payback(work, f_now, f_new, cost, margin)
    assert verdict.migrate is moves
    assert verdict.saving_s == pytest.approx(work / f_now - work / f_new)


def test_rt8_example_pays_back_in_fifty_minutes() -> None:
    verdict = payback(3 * 3600.0, 0.8, 1.0, 600.0, 1.5)
    assert verdict.payback_s == pytest.approx(3000.0)  # 0.2 T = 600 s -> T = 50 min < 1 h
    assert verdict.remaining_now_s == pytest.approx(13500.0) and verdict.remaining_new_s == 10800.0
    assert payback(3600.0, 0.8, 0.8, 600.0, 1.5).payback_s == float("inf")


# 16 nodes x 8 GPUs; leaves s1..s4 of 4 nodes; spine1 over s1+s2, spine2 over s3+s4, core on top
FABRIC = fabric_from_shape(16, 8, 4, 2)
SPINE1_AT_30 = LinkHealth(switches={"spine1": 0.3})
ALL = tuple(range(8))


def _job(job_id: str = "b", work: float = 36000.0, priority_class: int = 3, comm: float = 0.5,
         preempted_at: float | None = None) -> Job:
    req = JobRequest(job_id, 16, tp=8, priority_class=priority_class, comm_fraction=comm,
                     checkpoint_cost_s=60.0, restore_cost_s=120.0)
    return Job(req, JobState(work_remaining_s=work, last_preempted_at=preempted_at))


def _snapshot(job: Job, *, health: LinkHealth | None = SPINE1_AT_30, on: tuple[str, ...] = ("n04", "n08"),
              busy: tuple[str, ...] = (), history: tuple[PreemptEvent, ...] = (),
              start: float = 0.0) -> Snapshot:
    """``job`` runs across leaves s1 and s2 (through spine1); ``busy`` nodes are full."""
    run = RunningJob(job, {n: ALL for n in on}, start_time=start, replicas=2)
    used = set(on) | set(busy)
    free = {n: frozenset(ALL) for n in FABRIC.nodes if n not in used}
    return make_snapshot(now=7200.0, fabric=FABRIC, nodes=[Node(n, 8) for n in FABRIC.nodes],
                         free=free, running=[run], health=health, preemptions=history)


def _decide(snap: Snapshot, **rules: object) -> tuple[Migrate, ...]:
    config = CycleConfig(migration=MigrationRules(**rules))  # type: ignore[arg-type]
    d = decide(snap, registry.get("fifo"), snap.now, random.Random(0), config=config)
    return tuple(a for a in d.actions if isinstance(a, Migrate))


def test_degraded_spine_moves_the_gang_into_one_leaf() -> None:
    [m] = _decide(_snapshot(_job()))
    assert m.job_id == "b" and m.replicas == 2 and m.gpus == 16
    assert len({FABRIC.leaf_of(n) for n in m.assignment}) == 1
    assert m.grace_s == 120.0  # the budget's grace (above the job's 60 s checkpoint)
    assert m.cost_s == pytest.approx(60 + 120 + 60)  # save + restore + restart (checkpoint on signal)
    now = {"n04": ALL, "n08": ALL}
    f_now = step_factor(FABRIC, SPINE1_AT_30, now, now, 0.5)
    f_new = step_factor(FABRIC, SPINE1_AT_30, m.assignment, now, 0.5)
    assert f_now < 0.6 and f_new >= 1.0  # one leaf: no spine hop, a bit faster than before
    assert m.saving_s == pytest.approx(36000 / f_now - 36000 / f_new, abs=0.1)


def test_target_gpus_are_held_from_other_starts() -> None:
    snap = _snapshot(_job(), busy=tuple(n for n in FABRIC.nodes if n not in ("n03", "n04", "n08")))
    [m] = _decide(snap)
    assert set(m.assignment) == {"n03", "n04"}  # its own n04 plus the one free node of s1


def test_short_remaining_work_does_not_pay() -> None:
    assert _decide(_snapshot(_job(work=200.0))) == ()


def test_loss_below_the_threshold_is_ignored() -> None:
    mild = LinkHealth(switches={"spine1": 0.9})
    assert _decide(_snapshot(_job(), health=mild)) == ()
    assert _decide(_snapshot(_job(), health=mild), min_loss=0.01) != ()


@pytest.mark.parametrize("health", [None, LinkHealth(), LinkHealth(switches={"spine2": 0.3})],
                         ids=["no-health", "healthy", "other-spine"])
def test_nothing_to_weigh(health: LinkHealth | None) -> None:
    assert _decide(_snapshot(_job(), health=health)) == ()


def test_no_better_place_means_no_move() -> None:
    full = tuple(n for n in FABRIC.nodes if n not in ("n04", "n08"))
    assert _decide(_snapshot(_job(), busy=full)) == ()


def test_budget_exhausted() -> None:
    recent = _job(preempted_at=7200.0 - 600.0)  # preempted 10 min ago: at most once an hour
    assert _decide(_snapshot(recent)) == ()
    churned = (PreemptEvent(7200.0 - 60.0, "x", 8),)  # the window's cap (5 % of 128 = 6) is spent
    assert _decide(_snapshot(_job(), history=churned)) == ()
    assert _decide(_snapshot(_job(priority_class=0))) == ()  # serving is never preempted
    assert _decide(_snapshot(_job()), enabled=False) == ()


def test_checkpoint_lost_counts_when_the_job_does_not_save_on_signal() -> None:
    [m] = _decide(_snapshot(_job(), start=300.0), checkpoint_on_signal=False)
    assert m.cost_s == pytest.approx(60 + 120 + 60 + 1500)  # (7200 - 300) % 1800 s since the last one


def test_at_most_max_per_cycle() -> None:
    jobs = [_job(f"b{i}") for i in range(2)]
    runs = [RunningJob(jobs[0], {"n04": ALL, "n08": ALL}, 0.0, 2),
            RunningJob(jobs[1], {"n03": ALL, "n07": ALL}, 0.0, 2)]
    free = {n: frozenset(ALL) for n in FABRIC.nodes if n not in ("n03", "n04", "n07", "n08")}
    snap = make_snapshot(now=7200.0, fabric=FABRIC, nodes=[Node(n, 8) for n in FABRIC.nodes],
                         free=free, running=runs, health=SPINE1_AT_30)
    assert len(_decide(snap)) == 1  # the churn window: one 16-GPU move fills it
    assert len(_decide(snap, max_per_cycle=0)) == 0


def test_the_job_that_could_gain_most_is_weighed_first() -> None:
    runs = [RunningJob(_job("b0", work=20000.0), {"n04": ALL, "n08": ALL}, 0.0, 2),
            RunningJob(_job("b1", work=40000.0), {"n03": ALL, "n07": ALL}, 0.0, 2)]
    free = {n: frozenset(ALL) for n in FABRIC.nodes if n not in ("n03", "n04", "n07", "n08")}
    snap = make_snapshot(now=7200.0, fabric=FABRIC, nodes=[Node(n, 8) for n in FABRIC.nodes],
                         free=free, running=runs, health=SPINE1_AT_30)
    assert [m.job_id for m in _decide(snap, max_searches=1)] == ["b1"]
    assert _decide(snap, max_searches=0) == ()
