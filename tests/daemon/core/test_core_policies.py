"""Policy-specific behaviour: Slurm backfill, Tiresias buckets, Themis ρ, Pollux goodput, default."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.core import Decision, Resize, Start, allreduce, decide, table
from railgang.daemon.core.model.plan import regrow_targets
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.model.snapshot import Account, Snapshot
from railgang.daemon.core.policies.pollux import Pollux, goodput, statistical_efficiency
from railgang.daemon.core.policies.registry import get
from railgang.daemon.core.policies.slurm import Slurm, fairshare_factors
from railgang.daemon.core.policies.themis import rho
from railgang.daemon.core.policies.tiresias import Levels, Tiresias, bucket
from tests.daemon.core.core_builders import cluster, first_fit, job

H = 3600.0


def run(snap: Snapshot, name: str) -> Decision:
    return decide(snap, get(name), snap.now, random.Random(0), placer=first_fit)


def started(d: Decision) -> list[str]:
    return [a.job_id for a in d.actions if isinstance(a, Start)]


# -- Tiresias ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("gpu_hours", "queue"),
    [(0.0, 0), (0.99, 0), (1.0, 1), (9.5, 1), (10.0, 2), (99.9, 2), (100.0, 3), (5000.0, 3)],
    ids=["zero", "just-under-1", "exactly-1", "9.5", "exactly-10", "99.9", "exactly-100", "huge"],
)
def test_tiresias_bucket_assignment(gpu_hours: float, queue: int) -> None:
    assert bucket(gpu_hours * H) == queue


def test_tiresias_bucket_uses_both_dimensions_gpus_times_time() -> None:
    # 8 GPUs for 1.5 h = 12 GPU-h (queue 2); 1 GPU for 12 h = the same 12 GPU-h.
    assert bucket(8 * 1.5 * H) == bucket(1 * 12 * H) == 2


def test_tiresias_least_attained_first_then_fifo_within_queue() -> None:
    snap = (cluster(1).at(1000).pending(
        job("old-heavy").gpus(8).at(0).service(50 * H),
        job("new-light").gpus(8).at(900),
        job("older-light").gpus(8).at(100).service(0.5 * H)).build())
    order = [w.job_id for w in Tiresias().plan(snap, 1000).order]
    assert order == ["older-light", "new-light", "old-heavy"]


def test_tiresias_promotes_a_starving_job_to_queue_0() -> None:
    t = Tiresias(promote_after_s=2 * H)
    starving = job("s").gpus(8).at(0).service(500 * H).build()
    assert t.queue(starving, 1 * H) == 3
    assert t.queue(starving, 2 * H) == 0


@given(st.lists(st.tuples(st.sampled_from((1, 2, 4, 8)), st.floats(0.0, 300.0 * H)), min_size=1, max_size=12),
       st.floats(0.0, 400.0 * H), st.booleans())
@settings(max_examples=100, deadline=None)
def test_levels_read_the_same_before_and_after_the_table(runs: list[tuple[int, float]], now: float,
                                                           by_preemptions: bool) -> None:
    """``Levels.get`` builds the table on its first read, and from then on the table's own get
    answers: the same answers, for running jobs and for others (their default)."""
    b = cluster(32).at(now)
    for i, (gpus, served) in enumerate(runs):
        b = b.running(job(f"r{i}").gpus(gpus).service(served).with_(preemptions=i % 3), start=0)
    snap = b.build()
    fresh, read = Levels(snap, (1.0, 10.0, 100.0), by_preemptions=by_preemptions), None
    expected = {jid: fresh[jid] for jid in snap.running}  # __getitem__ builds the table
    for jid, level in expected.items():
        read = Levels(snap, (1.0, 10.0, 100.0), by_preemptions=by_preemptions)
        assert read.get(jid) == level and read.get(jid) == level  # first read, then the table's
    assert read is not None and read.get("nobody", -1.0) == -1.0 and fresh.get("nobody") is None


def test_tiresias_preempts_a_heavier_same_class_job_but_fifo_does_not() -> None:
    # 20 nodes: the 5 % churn cap (8 GPUs) allows evicting one 8-GPU job.
    snap = (cluster(20).at(10 * H).running(*[job(f"o{i}").gpus(8).cls(1) for i in range(19)])
            .running(job("heavy").gpus(8).service(200 * H), start=0)
            .pending(job("light").gpus(8).at(9 * H)).build())
    assert [a.job_id for a in run(snap, "tiresias").actions] == ["heavy"]
    assert run(snap, "fifo").actions == ()


# -- Slurm ---------------------------------------------------------------------------------------
def test_slurm_backfill_starts_a_short_job_that_ends_before_the_reservation() -> None:
    # 2 nodes; r holds 8 GPUs for 2 more hours. head needs 16 → reserved at t+2h.
    snap = (cluster(2).at(0).running(job("r").gpus(8).work(2 * H), start=0)
            .pending(job("head").gpus(16).at(-10).work(H),
                     job("short").gpus(8).at(-5).work(1 * H),
                     job("long").gpus(8).at(-4).work(5 * H)).build())
    d = run(snap, "slurm")
    assert started(d) == ["short"]
    assert d.reason("head").code is Reason.RESERVED  # type: ignore[union-attr]
    assert d.reason("long").code is Reason.PRIORITY  # type: ignore[union-attr]


def test_slurm_backfill_uses_gpus_the_reservation_leaves_spare() -> None:
    # head needs 8 of the 16 GPUs that exist at the shadow time: 8 are spare for long jobs.
    snap = (cluster(3).at(0).running(job("r").gpus(16).work(2 * H), start=0)
            .pending(job("head").gpus(16).at(-10).work(H), job("long").gpus(8).at(-4).work(9 * H))
            .build())
    assert started(run(snap, "slurm")) == ["long"]


def test_slurm_unknown_runtime_never_backfills_past_a_reservation() -> None:
    snap = (cluster(2).at(0).running(job("r").gpus(8).work(2 * H), start=0)
            .pending(job("head").gpus(16).at(-10), job("anon").gpus(8).at(-5)).build())
    assert started(run(snap, "slurm")) == []


def test_slurm_fairshare_favours_the_account_that_used_less() -> None:
    snap = (cluster(1).accounts(Account("hog", usage_gpu_s=9e6), Account("lean", usage_gpu_s=1e6))
            .pending(job("h").account("hog").gpus(8).at(0), job("l").account("lean").gpus(8).at(10))
            .build())
    fs = fairshare_factors(snap)
    assert fs["lean"] > fs["hog"]
    assert [w.job_id for w in Slurm().plan(snap, 100).order] == ["l", "h"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from((1, 2, 8, 16)), st.sampled_from((0.0, 5.0, 5.0, 900.0)),
                          st.sampled_from(("a", "b", "c"))), min_size=0, max_size=14),
       st.sampled_from((0.0, 1e6, 9e6)))
def test_slurm_orders_by_priority_then_submit_time_then_job_id(
        queue: list[tuple[int, float, str]], hog_use: float) -> None:
    """The plan's stable sort of the submit order by the priority alone is the module docstring's
    key, (minus the priority, submit time, job id), ties on priority and on submit time included."""
    ids = random.Random(len(queue)).sample(range(100), len(queue))  # ids not in submit order
    snap = (cluster(1).at(1000.0).accounts(Account("a", usage_gpu_s=hog_use), Account("b", usage_gpu_s=1e6))
            .pending(*(job(f"j{i:02d}").gpus(g).at(t).account(a) for i, (g, t, a) in zip(ids, queue, strict=True)))
            .build())
    s = Slurm()
    fs = fairshare_factors(snap)
    key = {j.job_id: (-s.priority(j, 1000.0, snap.total_gpus, fs.get(j.account, 1.0)), j.submit_time, j.job_id)
           for j in snap.pending}
    assert [w.job_id for w in s.plan(snap, 1000.0).order] == sorted(key, key=key.__getitem__)


def test_slurm_age_factor_saturates_at_max_age() -> None:
    s = Slurm(max_age_s=100.0)
    j = job("a").gpus(1).at(0).build()
    assert s.priority(j, 100.0, 8, 1.0) == s.priority(j, 10_000.0, 8, 1.0)


# -- Themis --------------------------------------------------------------------------------------
def test_themis_rho_worked_example() -> None:
    # 8-GPU job, 10 h of work (2 h done = 16 GPU-h, 8 h left), submitted 7 h ago, 64-GPU cluster
    # shared by N = 4 jobs: independent 1/N share = 16 GPUs ≥ 8 → T_id = 10 h;
    # T_shared = 7 h elapsed + 8 h left = 15 h → ρ = 1.5.
    j = job("a").gpus(8).at(0).service(16 * H).work(8 * H).build()
    assert rho(j, now=7 * H, replicas=8, n_jobs=4, cluster_gpus=64) == pytest.approx(1.5)


def test_themis_rho_time_shares_when_the_fair_share_is_smaller_than_the_job() -> None:
    # 32-GPU job, 1 h work, fair share 8 GPUs → independent time 4 h; starting now → ρ = 1/4.
    j = job("a").gpus(32).at(0).work(H).build()
    assert rho(j, now=0, replicas=32, n_jobs=8, cluster_gpus=64) == pytest.approx(0.25)


def test_themis_favours_the_highest_rho() -> None:
    snap = (cluster(1).at(10 * H).pending(
        job("fresh").gpus(8).at(10 * H - 60).work(H),
        job("wronged").gpus(8).at(0).work(H)).build())
    assert started(run(snap, "themis")) == ["wronged"]


def test_themis_auction_gives_spare_replicas_to_the_best_marginal_bid() -> None:
    lin = job("lin").gpus(2).elastic(1, 6).at(0).work(10 * H).build()
    flat = job("flat").gpus(2).elastic(1, 6).at(0).work(10 * H).speedup(table({1: 1.0, 2: 1.05})).build()
    from railgang.daemon.core.policies.themis import Themis

    alloc = Themis.auction([lin, flat], free=8, now=H, n=2, total=8)
    assert alloc["lin"] > alloc["flat"]
    assert sum(alloc.values()) <= 8


# -- Pollux --------------------------------------------------------------------------------------
@pytest.mark.parametrize("phi", [None, 0.0, 64.0, 4096.0], ids=["unknown", "zero", "small", "large"])
def test_statistical_efficiency_is_in_0_1_and_non_increasing(phi: float | None) -> None:
    j = job("a").gpus(8).elastic(1, 16).with_(grad_noise_scale=phi, batch_per_replica=32).build()
    effs = [statistical_efficiency(j, k) for k in range(1, 17)]
    assert all(0 < e <= 1 for e in effs)
    assert all(a >= b for a, b in itertools.pairwise(effs))


def test_goodput_has_diminishing_returns_under_communication() -> None:
    j = job("a").gpus(8).elastic(1, 32).speedup(allreduce(0.2)).with_(grad_noise_scale=512.0).build()
    gains = [goodput(j, k + 1) - goodput(j, k) for k in range(1, 32)]
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(gains))


def test_pollux_gives_more_gpus_to_the_job_that_scales() -> None:
    snap = cluster(2).pending(
        job("scales").gpus(2).elastic(1, 12).at(0).speedup(allreduce(0.01)),
        job("saturated").gpus(2).elastic(1, 12).at(1).speedup(table({1: 1.0, 2: 1.1}))).build()
    sizes = {w.job_id: w.replicas for w in Pollux().plan(snap, 0).order}
    assert sizes["scales"] > sizes["saturated"] >= 1
    assert sum(sizes.values()) <= 16


def test_pollux_fairness_knob_levels_allocations() -> None:
    snap = cluster(2).pending(
        job("a").gpus(2).elastic(1, 16).at(0).speedup(allreduce(0.01)),
        job("b").gpus(2).elastic(1, 16).at(1).speedup(allreduce(0.3))).build()
    greedy = {w.job_id: w.replicas for w in Pollux(p=1.0).plan(snap, 0).order}
    fair = {w.job_id: w.replicas for w in Pollux(p=0.1).plan(snap, 0).order}
    assert greedy["a"] - greedy["b"] >= fair["a"] - fair["b"]


def test_pollux_does_not_shrink_a_running_peer_to_admit_a_waiting_one() -> None:
    # issue 12 part 4: shrinking running same-class jobs for each newcomer cost more in resizes
    # and scattered regrowth than it won; the newcomer waits for freed GPUs
    snap = (cluster(1).at(2 * H).running(job("big").gpus(8).elastic(1, 8).work(50 * H), start=0)
            .pending(job("new").gpus(4).elastic(1, 4).at(H)).build())
    d = run(snap, "pollux")
    assert not d.actions
    assert "new" not in started(d)


def test_pollux_regrows_a_short_job_before_starting_work_small() -> None:
    # "short" (4 of 8) regrows into the 4 free GPUs; "new" would only fit small, and waits
    snap = (cluster(1).at(2 * H).running(job("short").gpus(8).elastic(1, 8).work(50 * H), start=0,
                                         replicas=4)
            .pending(job("new").gpus(8).elastic(1, 8).at(H)).build())
    d = run(snap, "pollux")
    assert [(a.job_id, a.replicas) for a in d.actions if isinstance(a, Resize)] == [("short", 8)]
    assert "new" not in started(d)


# -- default -------------------------------------------------------------------------------------
@given(st.lists(st.tuples(st.sampled_from((1, 2, 4, 8, 16)), st.integers(0, 3)), max_size=10),
       st.lists(st.sampled_from((1, 2, 4, 8)), max_size=8))
@settings(max_examples=100, deadline=None)
def test_pollux_sizes_nothing_without_elastic_work(waiting: list[tuple[int, int]], running: list[int]) -> None:
    """``default`` asks Pollux for sizes only when a job waiting or running is elastic: without
    one, Pollux's plan is every job at its asked size and the running jobs' regrow targets."""
    b = cluster(8).at(10 * H)
    for i, gpus in enumerate(running):
        b = b.running(job(f"r{i}").gpus(gpus), start=0)
    for i, (gpus, cls) in enumerate(waiting):
        b = b.pending(job(f"w{i}").gpus(gpus).cls(cls).at(float(i)))
    snap = b.build()
    asked = {j.job_id: j.replicas for j in snap.pending}
    plan = Pollux(whole_multinode=True).plan(snap, snap.now)
    assert plan.targets == regrow_targets(snap)
    assert {w.job_id: w.replicas for w in plan.order} == asked
    assert {w.job_id: w.replicas for w in get("default").plan(snap, snap.now).order} == asked


def test_default_orders_by_tiresias_queue_then_rho() -> None:
    snap = (cluster(1).at(3 * H).pending(
        job("heavy").gpus(8).at(0).service(50 * H).work(H),
        job("light-fresh").gpus(8).at(3 * H - 10).work(H),
        job("light-wronged").gpus(8).at(1 * H).work(H)).build())
    order = [w.job_id for w in get("default").plan(snap, 3 * H).order]
    assert order == ["light-wronged", "light-fresh", "heavy"]


def test_default_reserves_only_for_starving_jobs() -> None:
    # big waited 5 h (> 4 h promotion): it holds the reservation and long work may not pass it.
    snap = (cluster(2).at(5 * H).running(job("r").gpus(8).work(H), start=0)
            .pending(job("big").gpus(16).at(0).work(H), job("long").gpus(8).at(5 * H - 60).work(9 * H))
            .build())
    d = run(snap, "default")
    assert d.reason("big").code is Reason.RESERVED  # type: ignore[union-attr]
    assert started(d) == []
    fresh = (cluster(2).at(H).running(job("r").gpus(8).work(H), start=0)
             .pending(job("big").gpus(16).at(0).work(H), job("long").gpus(8).at(H - 60).work(9 * H))
             .build())
    assert started(run(fresh, "default")) == ["long"]


def test_backfill_shadow_counts_jobs_started_earlier_in_the_same_cycle() -> None:
    # "a" (8 GPUs, 1 h) is ordered first (head's account used far more than its share) and starts;
    # head (24 GPUs) then needs r's 8 GPUs (free at 2 h) and a's (1 h): shadow = 2 h. Without a's
    # end the shadow would be "never" and "long" (3 h) would wrongly pass the reservation.
    snap = (cluster(3).at(0).accounts(Account("hog", usage_gpu_s=1e9), Account("lean"))
            .running(job("r").gpus(8).work(2 * H).account("lean"), start=0)
            .pending(job("a").gpus(8).at(-30).work(H).account("lean"),
                     job("head").gpus(24).at(-20).work(H).account("hog"),
                     job("long").gpus(8).at(-10).work(3 * H).account("hog"),
                     job("short").gpus(8).at(-5).work(1.5 * H).account("hog"))
            .build())
    assert [w.job_id for w in get("slurm").plan(snap, 0).order][:2] == ["a", "head"]
    d = run(snap, "slurm")
    assert started(d) == ["a", "short"]
    assert d.reason("head").code is Reason.RESERVED  # type: ignore[union-attr]
    assert d.reason("long").code is Reason.PRIORITY  # type: ignore[union-attr]


def test_a_measured_goodput_fn_replaces_the_model() -> None:
    j = job("a").gpus(2).elastic(1, 8).with_(goodput_fn=lambda k: min(k, 3) * 0.5).build()
    assert [goodput(j, k) for k in (1, 3, 8)] == [0.5, 1.5, 1.5]


def test_default_without_starvation_reservations_is_greedy() -> None:
    from railgang.daemon.core.policies.default import Default

    snap = (cluster(2).at(5 * H).running(job("r").gpus(8).work(H), start=0)
            .pending(job("big").gpus(16).at(0).work(H), job("long").gpus(8).at(5 * H - 60).work(9 * H))
            .build())
    d = decide(snap, Default(reserve_starving=False), snap.now, random.Random(0), placer=first_fit)
    assert started(d) == ["long"]
    assert d.reason("big").code is Reason.WAITING_FOR_GPUS  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kw", "replicas", "evicts"),
    [({}, 4, True), ({"sizing": "requested"}, 4, True), ({"evict_within_class": False}, 4, False)],
    ids=["pollux-sizing", "requested-sizing", "no-eviction-within-class"],
)
def test_default_knobs(kw: dict[str, object], replicas: int, evicts: bool) -> None:
    from railgang.daemon.core.policies.default import Default

    # 8 GPUs free, 8 elastic jobs wanting 4 each: Pollux admits the first two at their asked size
    # (issue 12 part 4: no small starts while the asked size fits)
    snap = (cluster(2).at(10 * H).running(job("heavy").gpus(8).service(200 * H).work(50 * H), start=0)
            .pending(*[job(f"w{i}").gpus(4).elastic(1, 4).at(9 * H + i).work(H) for i in range(8)])
            .build())
    plan = Default(**kw).plan(snap, 10 * H)  # type: ignore[arg-type]
    assert plan.order[0].replicas == replicas
    assert plan.preempt_within_class is evicts
