"""Elasticity: DP-replica granularity, marginal utility, anti-churn, start small (DESIGN R-S6)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.core import Decision, Preempt, Resize, Start, decide, table
from railgang.daemon.core.model.elastic import (
    ElasticRules,
    fill_by_chunks,
    lowest_start,
    marginal_gain,
    pays_without_growth,
    resize_pays,
    running_ends,
    shrink_assignment,
    shrink_pays,
    sizes,
    smallest_start,
    spans_nodes,
    start_size,
    start_small_pays,
    wait_for,
    wastes_gpus,
)
from railgang.daemon.core.model.job import RunningJob
from railgang.daemon.core.model.scaling import SpeedupFn, linear
from railgang.daemon.core.model.shadow import Ends
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies.registry import get
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


# -- issue 12 part 4: elastic that pays ------------------------------------------------------------
SUPER = table({1: 1.0, 2: 2.3, 4: 5.2})  # 15-30 % more per GPU at the asked size (Philly-like)
SATURATING = table({1: 1.0, 2: 1.6, 4: 2.0})


def test_the_rs6_worked_example_32_64_128_still_starts_small() -> None:
    # 32 -> 64 -> 128 GPUs on the seed's sub-linear curve: starting small beats waiting 8 h
    j = job("e").gpus(128).tp(32).elastic(1, 4).speedup(SEED_CURVE).work(24 * H).build()
    assert start_small_pays(j, 1, 4, 8 * H)
    assert smallest_start(j, 4) == 1


@pytest.mark.parametrize(
    ("curve", "wastes", "start_with_4_free", "lowest"),
    [(SUPER, True, None, 4), (linear, False, 2, 1), (SATURATING, False, 2, 1)],
    ids=["super-linear", "linear", "saturating"],
)
def test_a_super_linear_job_is_never_started_below_its_asked_size(
        curve: SpeedupFn, wastes: bool, start_with_4_free: int | None, lowest: int) -> None:
    j = job("e").gpus(8).tp(2).elastic(1, 4).speedup(curve).work(24 * H).build()  # 4 x 2 GPUs
    assert wastes_gpus(j, 2, 4) is wastes
    assert start_size(j, 4) == start_with_4_free
    assert start_size(j, 8) == 4  # the asked size fits: always that
    assert smallest_start(j, 4) == lowest
    assert start_small_pays(j, 2, 4, 8 * H) is (not wastes)


def test_sizes_are_halves_and_doubles_of_the_asked_size() -> None:
    assert sizes(job("e").gpus(16).elastic(1, 16).build()) == (1, 2, 4, 8, 16)
    assert sizes(job("e").gpus(12).elastic(2, 24).build()) == (3, 6, 12, 24) or \
        sizes(job("e").gpus(12).elastic(2, 24).build()) == (2, 3, 6, 12, 24)


def test_growth_goes_to_the_best_chunk_per_gpu_not_the_best_single_replica() -> None:
    # one replica more is worth little to the super-linear job (2.3 -> 3.75 at 3), the whole step
    # to 4 is worth the most per GPU; the linear 8-replica job gains 1/8 per GPU
    sup = job("sup").gpus(4).elastic(1, 4).speedup(SUPER).build()
    lin = job("lin").gpus(8).elastic(1, 8).build()
    alloc = {"sup": 2, "lin": 6}
    value = lambda j, k: j.rate(k)  # noqa: E731 - the job's rate normalised by its own
    left = fill_by_chunks(["lin", "sup"], alloc, {"sup": sup, "lin": lin}, 2, value)
    assert alloc == {"sup": 4, "lin": 6} and left == 0


def test_growth_of_what_runs_wins_a_tie() -> None:
    a, b = (job(i).gpus(4).elastic(1, 4).build() for i in ("a", "b"))
    alloc = {"a": 2, "b": 2}
    fill_by_chunks(["a", "b"], alloc, {"a": a, "b": b}, 2, lambda j, k: j.rate(k),
                   running=frozenset({"b"}))
    assert alloc == {"a": 2, "b": 4}


@pytest.mark.parametrize(
    ("curve", "last_resize", "pays"),
    [(linear, None, True), (linear, 2 * H - 60, False), (SUPER, None, False)],
    ids=["linear", "hysteresis-after-a-grow", "super-linear"],
)
def test_shrink_pays_hysteresis_and_curve(curve: SpeedupFn, last_resize: float | None, pays: bool) -> None:
    j = job("v").gpus(4).elastic(1, 4).speedup(curve).work(20 * H).build()
    r = RunningJob(j, {"n000": (0, 1, 2, 3)}, 0.0, 4, last_resize_time=last_resize)
    assert shrink_pays(r, 1, 2 * H) is pays
    assert not shrink_pays(r, 0, 2 * H)  # never below the minimum


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 8), st.integers(0, 8), st.sampled_from([0, 1, 2])),
                min_size=1, max_size=6), st.integers(0, 40))
def test_fill_by_chunks_stays_in_range_and_capacity(spec: list[tuple[int, int, int]], cap: int) -> None:
    curves = (SUPER, linear, SATURATING)
    jobs = {f"j{i}": job(f"j{i}").gpus(hi).elastic(1, hi).speedup(curves[c]).build()
            for i, (hi, _, c) in enumerate(spec)}
    alloc = {f"j{i}": min(k, hi) for i, (hi, k, _) in enumerate(spec)}
    before = dict(alloc)
    left = fill_by_chunks(sorted(jobs), alloc, jobs, cap, lambda j, k: j.rate(k))
    used = sum(alloc[i] - before[i] for i in alloc)
    assert 0 <= left == cap - used
    assert all(before[i] <= alloc[i] <= jobs[i].max_replicas for i in alloc)


@pytest.mark.parametrize(("gpus", "node_gpus", "start", "lowest"),
                         [(16, 8, None, 16), (8, 8, 4, 1), (16, 0, 8, 1)],
                         ids=["spans-nodes-starts-whole", "one-node-may-start-small", "node-unknown"])
def test_a_gang_asking_for_several_nodes_starts_whole(gpus: int, node_gpus: int, start: int | None,
                                                      lowest: int) -> None:
    # started small, a multi-node gang's growth lands wherever GPUs are free (scattered placement)
    j = job("e").gpus(gpus).elastic(1, gpus).work(24 * H).build()
    assert spans_nodes(j, node_gpus) is (start is None)
    assert start_size(j, 8 if gpus == 16 else 4, node_gpus=node_gpus) == start
    assert smallest_start(j, gpus, node_gpus=node_gpus) == lowest


def test_shrink_for_a_higher_class_honours_the_configured_resize_interval() -> None:
    """The eviction step's shrink obeys the cycle's ElasticRules, not the 600 s default: with
    ``min_interval_s=5`` an elastic class-3 job 20 s old shrinks for a class-1 gang (the daemon's
    ``daemon.resize_min_interval_s``; the real-cluster e2e test runs with 5 s)."""
    from railgang.daemon.core import CycleConfig

    now = 1000.0
    snap = (cluster(16).at(now)
            .running(job("f").gpus(96).cls(2).work(1e5), start=now - 30)
            .running(job("e").gpus(32).tp(8).elastic(1, 4).cls(3).work(1e5), start=now - 20)
            .pending(job("g").gpus(24).tp(8).cls(1).at(now - 1))).build()
    fast = CycleConfig(elastic=ElasticRules(min_interval_s=5.0))
    d = decide(snap, get("fifo"), now, random.Random(0), placer=first_fit, config=fast)
    assert [(type(a).__name__, a.job_id) for a in d.actions] == [("Resize", "e"), ("Start", "g")]
    slow = decide(snap, get("fifo"), now, random.Random(0), placer=first_fit)  # 600 s: too soon
    assert not any(isinstance(a, Resize) for a in slow.actions)


# -- a small start must pay on its own; kills buy the asked size (issue 12 part 4, BENCHMARKS) ----
def test_a_small_start_pays_without_growth_only_when_the_wait_is_long() -> None:
    # the R-S6 worked example (24 h of work, 1 of 4 replicas on the seed curve): counting on the
    # growth after 8 h it pays (29.5 h < 32 h), run small to the end it does not (76.8 h > 32 h)
    j = job("e").gpus(128).tp(32).elastic(1, 4).speedup(SEED_CURVE).work(24 * H).build()
    assert start_small_pays(j, 1, 4, 8 * H)
    assert not pays_without_growth(j, 1, 4, 8 * H)
    assert lowest_start(j, 4, 8 * H) == 4
    assert pays_without_growth(j, 1, 4, 60 * H)  # 76.8 h < 60 h + 24 h
    assert lowest_start(j, 4, 60 * H) == 1
    assert lowest_start(j, 4, 20 * H) == 2  # 2 replicas: 24 / (1.8 / 3.2) = 42.7 h < 44 h


def test_a_super_linear_job_never_pays_small_however_long_the_wait() -> None:
    j = job("e").gpus(8).tp(2).elastic(1, 4).speedup(SUPER).work(24 * H).build()
    assert not pays_without_growth(j, 2, 4, 1000 * H)
    assert lowest_start(j, 4, 1000 * H) == 4


def test_unknown_work_falls_back_to_the_growth_rule() -> None:
    j = job("e").gpus(8).tp(2).elastic(1, 4).build()  # no work estimate (a real cluster)
    assert pays_without_growth(j, 2, 4, 2 * H) is start_small_pays(j, 2, 4, 2 * H) is True
    assert pays_without_growth(j, 2, 4, 10.0) is start_small_pays(j, 2, 4, 10.0) is False


@pytest.mark.parametrize(("free", "need", "wait"),
                         [(8, 4, 0.0), (4, 12, 2 * H), (4, 20, 5 * H), (4, 100, math.inf)],
                         ids=["fits-now", "first-end", "second-end", "never"])
def test_wait_for_counts_gpus_freed_by_expected_ends(free: int, need: int, wait: float) -> None:
    now = 10 * H
    ends = Ends(((now + 2 * H, 8), (now + 5 * H, 8)))
    assert wait_for(ends, free, need, now) == wait


def test_running_ends_are_soonest_first_with_the_gpus_freed_by_then() -> None:
    a = RunningJob(job("a").gpus(8).work(5 * H).build(), {"n000": tuple(range(8))}, 0.0, 8)
    b = RunningJob(job("b").gpus(4).work(H).build(), {"n001": (0, 1, 2, 3)}, 0.0, 4)
    ends = running_ends([a, b], 0.0)
    assert [ends.when(0, need, 0.0) for need in (4, 12, 13)] == [(H, 0), (5 * H, 0), (math.inf, 0)]
    assert wait_for(running_ends([a, b], 0.0), 2, 10, 0.0) == 5 * H


def test_pollux_starts_whole_jobs_before_it_starts_an_earlier_one_small() -> None:
    # 8 GPUs free: "big" (submitted first, 16 GPUs, elastic) would start on 8 and take them all;
    # "later" (8 GPUs) fits whole, so it goes first and big waits (no GPUs are left over)
    snap = (cluster(2).at(H).running(job("r").gpus(8).work(2 * H), start=0)
            .pending(job("big").gpus(16).elastic(1, 16).work(10 * H).at(0),
                     job("later").gpus(8).work(H).at(60)).build())
    d = run(snap, "pollux")
    assert [(a.job_id, a.replicas) for a in d.actions if isinstance(a, Start)] == [("later", 8)]


def test_pollux_starts_small_into_gpus_no_job_can_use_whole_when_it_pays_alone() -> None:
    # 4 GPUs free for 100 h, nobody else waits: the 8-GPU linear job runs 20 h on 4 instead of
    # 10 h on 8 after a 100 h wait
    snap = (cluster(1).at(H).running(job("r").gpus(4).work(101 * H), start=0)
            .pending(job("e").gpus(8).elastic(1, 8).speedup(linear).work(10 * H).at(0)).build())
    assert [(a.job_id, a.replicas) for a in run(snap, "pollux").actions
            if isinstance(a, Start)] == [("e", 4)]
    soon = (cluster(1).at(H).running(job("r").gpus(4).work(2 * H), start=0)
            .pending(job("e").gpus(8).elastic(1, 8).speedup(linear).work(10 * H).at(0)).build())
    assert not run(soon, "pollux").actions  # 2 h wait + 10 h beats 20 h on 4 GPUs


def test_no_eviction_buys_a_small_start() -> None:
    # default, one class: a long 1-GPU job in a worse Tiresias level holds the only GPU that
    # frees soon enough. Killing it would start the 4-GPU elastic newcomer on 1 GPU (which pays
    # alone: 200 h on 1 < 199 h wait + 50 h); a kill must buy the asked size, and the other
    # holders are in its own level
    snap = (cluster(3).at(200 * H)
            .running(job("old").gpus(1).service(500 * H).work(900 * H), start=0)
            .running(job("mid").gpus(7).work(200 * H), start=199 * H)
            .running(job("r1").gpus(8).work(200 * H), start=199 * H)
            .running(job("r2").gpus(8).work(200 * H), start=199 * H)
            .pending(job("new").gpus(4).elastic(1, 4).speedup(linear).work(50 * H).at(199 * H))
            .build())
    d = run(snap, "default")
    assert not [a for a in d.actions if isinstance(a, Preempt)]
    assert d.reason("new") is not None and d.reason("new").needed == 1  # it may still start small


@pytest.mark.parametrize(("grace_s", "work_left_s", "pays"),
                         [(0.0, 60.0, True), (300.0, 60.0, False), (300.0, 20 * H, True),
                          (300.0, None, True)],
                         ids=["at-once", "ends-within-the-notice", "outlasts-the-notice", "unknown-work"])
def test_the_policy_does_not_shrink_a_job_that_ends_within_the_notice(
        grace_s: float, work_left_s: float | None, pays: bool) -> None:
    # a shrink takes effect only when the notice ends: a job that finishes before then gives every
    # GPU back sooner by finishing, and the shrink would only cost it a checkpoint
    b = job("v").gpus(4).elastic(1, 4)
    j = (b if work_left_s is None else b.work(work_left_s)).build()
    r = RunningJob(j, {"n000": (0, 1, 2, 3)}, 0.0, 4)
    rules = ElasticRules(shrink_grace_s=grace_s)
    assert resize_pays(r, 2, 2 * H, rules) is pays
    # an eviction's shrink is not refused for it: the victim would be preempted instead
    assert shrink_pays(r, 1, 2 * H, rules)
