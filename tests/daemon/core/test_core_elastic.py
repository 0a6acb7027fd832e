"""Elasticity: DP-replica granularity, marginal utility, anti-churn, start small (DESIGN R-S6)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.core import Decision, Resize, Start, decide, table
from railgang.daemon.core.elastic import (
    ElasticRules,
    marginal_gain,
    resize_pays,
    shrink_assignment,
    start_small_pays,
)
from railgang.daemon.core.job import RunningJob
from railgang.daemon.core.policy import get
from railgang.daemon.core.snapshot import Snapshot
from tests.daemon.core.core_builders import cluster, first_fit, job

H = 3600.0
SEED_CURVE = table({1: 1.0, 2: 1.8, 4: 3.2})  # 128 / 256 / 512 GPUs from the seed


def run(snap: Snapshot, name: str = "default") -> Decision:
    return decide(snap, get(name), snap.now, random.Random(0), placer=first_fit)


def running(**kw: float) -> RunningJob:
    j = job("e").gpus(8).tp(4).elastic(1, 4).work(kw.pop("work", 20 * H)).build()
    return RunningJob(j, {"n000": tuple(range(8))}, start_time=0.0, replicas=2, **kw)  # type: ignore[arg-type]


def test_seed_curve_efficiency() -> None:
    j = job("llm").gpus(128).tp(8).pp(16).elastic(1, 4).speedup(SEED_CURVE).build()
    assert j.efficiency(2) == pytest.approx(0.9)
    assert j.efficiency(4) == pytest.approx(0.8)
    assert marginal_gain(j, 2, 4) == pytest.approx(3.2 / 1.8 - 1)


@pytest.mark.parametrize(
    ("now", "last_resize", "new", "pays"),
    [
        (2 * H, None, 4, True),
        (300.0, None, 4, False),  # started 5 min ago: inside the minimum interval
        (2 * H, 2 * H - 60, 4, False),  # resized a minute ago
        (2 * H, None, 1, True),  # shrinks only need the interval
        (2 * H, None, 5, False),  # beyond elastic_max
    ],
    ids=["grow", "too-soon-after-start", "too-soon-after-resize", "shrink", "past-max"],
)
def test_resize_pays_table(now: float, last_resize: float | None, new: int, pays: bool) -> None:
    r = running(last_resize_time=last_resize) if last_resize is not None else running()
    assert resize_pays(r, new, now, ElasticRules()) is pays


def test_no_resize_on_a_saturated_curve() -> None:
    j = job("flat").gpus(4).elastic(1, 8).speedup(table({1: 1.0, 4: 3.9, 5: 3.95})).work(50 * H).build()
    r = RunningJob(j, {"n000": (0, 1, 2, 3)}, 0.0, 4)
    assert not resize_pays(r, 5, 2 * H, ElasticRules(min_gain=0.10))


def test_transition_cost_is_amortised_over_the_remaining_run() -> None:
    j = job("short").gpus(4).elastic(1, 8).work(60.0).with_(transition_cost_s=60.0).build()
    r = RunningJob(j, {"n000": (0, 1, 2, 3)}, 0.0, 4)
    assert not resize_pays(r, 8, 2 * H, ElasticRules())


def test_shrink_releases_whole_replicas_tail_first() -> None:
    j = job("e").gpus(16).tp(4).elastic(1, 4).build()
    r = RunningJob(j, {"n000": tuple(range(8)), "n001": tuple(range(8))}, 0.0, 4)
    kept, gone = shrink_assignment(r, 1)
    assert kept == {"n000": (0, 1, 2, 3)}
    assert gone == {"n000": (4, 5, 6, 7), "n001": tuple(range(8))}


@pytest.mark.parametrize(
    ("wait_s", "small_pays"),
    [(8 * H, True), (10.0, False)],
    ids=["long-wait-start-small", "short-wait-wait-for-the-gang"],
)
def test_start_small_when_wait_plus_run_is_lower(wait_s: float, small_pays: bool) -> None:
    j = job("e").gpus(128).tp(8).elastic(1, 4).work(24 * H).build()  # 4 replicas of 32 GPUs
    assert start_small_pays(j, 1, 4, wait_s) is small_pays


def test_elastic_job_starts_small_in_the_cycle_instead_of_waiting_8_hours() -> None:
    snap = (cluster(4).at(0).running(job("r").gpus(24).work(8 * H))
            .pending(job("e").gpus(32).tp(8).elastic(1, 4).work(24 * H)).build())
    d = run(snap, "themis")
    starts = [a for a in d.actions if isinstance(a, Start)]
    assert [(s.job_id, s.replicas, s.gpus) for s in starts] == [("e", 1, 8)]


def test_grow_is_by_whole_tp_groups_into_idle_gpus() -> None:
    snap = (cluster(4).at(2 * H).running(job("e").gpus(8).tp(4).elastic(1, 8).work(40 * H), start=0)
            .build())
    d = run(snap, "default")
    (r,) = d.actions
    assert isinstance(r, Resize) and r.job_id == "e" and r.replicas > 2
    assert r.gpus == 4 * r.replicas


def test_no_grow_while_same_class_work_waits_for_gpus_unless_the_policy_sized_it() -> None:
    snap = (cluster(2).at(2 * H).running(job("e").gpus(8).elastic(1, 12).work(40 * H), start=0)
            .pending(job("big").gpus(16).work(H)).build())
    assert not [a for a in run(snap, "fifo").actions if isinstance(a, Resize)]


@pytest.mark.parametrize(
    ("policy", "grows_to"),
    [("fifo", 2), ("slurm", 2), ("tiresias", 2), ("themis", 4), ("default", 4)],
    ids=["fifo", "slurm", "tiresias", "themis", "default"],
)
def test_shrunk_job_grows_back_rigid_policies_only_to_the_requested_size(policy: str, grows_to: int) -> None:
    # requested 2 replicas of 4 GPUs, elastic 1..4, shrunk to 1 earlier; the cluster is idle.
    snap = (cluster(2).at(4 * H)
            .running(job("e").gpus(8).tp(4).elastic(1, 4).work(40 * H), replicas=1, start=0)
            .build())
    (r,) = run(snap, policy).actions
    assert isinstance(r, Resize) and (r.replicas, r.gpus) == (grows_to, 4 * grows_to)


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), nodes=st.integers(1, 6), keep=st.integers(1, 48),
       data=st.data())
def test_shrink_keeps_whole_replicas_and_releases_the_rest(tp: int, nodes: int, keep: int,
                                                           data: st.DataObject) -> None:
    per_node = data.draw(st.lists(st.integers(1, 8 // tp), min_size=nodes, max_size=nodes))
    assignment = {f"n{i}": tuple(range(c * tp)) for i, c in enumerate(per_node)}
    reps = sum(per_node)
    j = job("e").gpus(reps * tp).tp(tp).elastic(1, reps).build()
    run_ = RunningJob(j, assignment, 0.0, reps)
    k = min(keep, reps)
    kept, gone = shrink_assignment(run_, k)
    flat = lambda a: {(n, g) for n, gs in a.items() for g in gs}  # noqa: E731
    assert flat(kept) | flat(gone) == flat(assignment) and not flat(kept) & flat(gone)
    assert len(flat(kept)) == k * tp
    assert all(len(g) % tp == 0 for g in kept.values())  # TP groups stay on one node


def test_regrow_to_the_requested_size_even_while_same_class_work_waits() -> None:
    # e requested 2 replicas (8 GPUs), runs on 1; "big" (24 GPUs) waits and cannot fit anyway.
    snap = (cluster(2).at(4 * H)
            .running(job("e").gpus(8).tp(4).elastic(1, 4).work(40 * H), replicas=1, start=0)
            .pending(job("big").gpus(24).work(H)).build())
    grows = [a for a in run(snap, "fifo").actions if isinstance(a, Resize)]
    assert [(r.job_id, r.replicas) for r in grows] == [("e", 2)]


def test_pollux_locked_jobs_are_never_shrunk_but_regrow_to_their_request() -> None:
    from railgang.daemon.core.policies.pollux import Pollux

    snap = (cluster(2).at(10 * H)
            .running(job("old").gpus(8).tp(4).elastic(1, 4).work(40 * H), replicas=1, start=0)
            .pending(job("new").gpus(8).elastic(1, 8).at(9 * H)).build())
    plan = Pollux(lock_after_s=6 * H).plan(snap, 10 * H)
    assert plan.targets["old"] == 2
