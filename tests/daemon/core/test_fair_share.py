"""Fair share with a half-life (issue 33 item 4): the decay, the input both worlds build, and
`default`'s ordering term after the Tiresias queue."""

from __future__ import annotations

import math

import pytest

from railgang.daemon.core.model.fairshare import (
    DecayedUse,
    decay,
    decayed_run,
    running_use,
    usage_rank,
    with_recent_use,
)
from railgang.daemon.core.model.snapshot import Account
from railgang.daemon.core.policies.default import Default
from tests.daemon.core.core_builders import cluster, job

H = 3600.0
FAIR = Default(fair_share=True)
DAY = 86400.0
NOW = 30 * DAY


def test_a_gpu_second_counts_half_after_one_half_life() -> None:
    assert decay(100.0, 7 * DAY, 7 * DAY) == pytest.approx(50.0)
    assert decay(100.0, 14 * DAY, 7 * DAY) == pytest.approx(25.0)
    assert decay(100.0, 5 * DAY, 0.0) == decay(100.0, 5 * DAY, math.inf) == 100.0  # decay off


def test_a_run_decays_as_the_integral_of_its_gpu_seconds() -> None:
    h = 7 * DAY
    # a short run counts about its GPU-seconds decayed by its age
    assert decayed_run(8, NOW - 2 * h - 60, NOW - 2 * h, NOW, h) == pytest.approx(8 * 60 / 4, rel=1e-4)
    # a run going on now: the integral, less than the plain GPU-seconds
    whole = decayed_run(4, NOW - h, NOW, NOW, h)
    assert whole == pytest.approx(4 * h / math.log(2) * 0.5) and whole < 4 * h
    # splitting a run does not change it; times past now count as now; empty runs are 0
    split = decayed_run(4, NOW - h, NOW - h / 3, NOW, h) + decayed_run(4, NOW - h / 3, NOW, NOW, h)
    assert split == pytest.approx(whole)
    assert decayed_run(4, NOW - h, NOW + H, NOW, h) == pytest.approx(whole)
    assert decayed_run(4, NOW, NOW - 1, NOW, h) == 0.0
    assert decayed_run(2, NOW - 10, NOW, NOW, 0.0) == 20.0


def test_the_kept_use_of_finished_runs_equals_the_integral() -> None:
    h = DAY
    kept = DecayedUse(h)
    kept.add_run("a", 8 * H, NOW - 3 * H, NOW - 2 * H)  # 8 GPUs for an hour
    kept.add_run("a", 2 * H, NOW - 2 * H, NOW - H)  # 2 GPUs for an hour
    want = decayed_run(8, NOW - 3 * H, NOW - 2 * H, NOW, h) + decayed_run(2, NOW - 2 * H, NOW - H, NOW, h)
    assert kept.at("a", NOW) == pytest.approx(want)
    assert kept.at("b", NOW) == 0.0 and kept.all_at(NOW) == {"a": pytest.approx(want)}


def test_the_snapshot_input_adds_running_jobs_to_the_finished_runs() -> None:
    snap = (cluster(2).at(NOW).accounts(Account("a", share=0.5, usage_gpu_s=7.0))
            .running(job("r").gpus(8).account("a").work(H), start=NOW - H)
            .running(job("s").gpus(4).account("b").work(H), start=NOW - 2 * H)
            .build())
    running = running_use(snap.running.values(), NOW, DAY)
    assert running["a"] == pytest.approx(decayed_run(8, NOW - H, NOW, NOW, DAY))
    out = with_recent_use(snap, {"a": 100.0, "c": 5.0}, DAY)
    a, b, c = out.account("a"), out.account("b"), out.account("c")
    assert a.recent_gpu_s == pytest.approx(100.0 + running["a"])
    assert (a.share, a.usage_gpu_s) == (0.5, 7.0)  # the rest of the account as it was
    assert b.recent_gpu_s == pytest.approx(running["b"]) and c.recent_gpu_s == 5.0
    assert snap.account("a").recent_gpu_s == 0.0  # a new snapshot; the old one untouched


def test_usage_rank_is_whole_gpu_hours_per_share() -> None:
    assert usage_rank(Account("a")) == 0
    assert usage_rank(Account("a", recent_gpu_s=2.5 * H)) == 2
    assert usage_rank(Account("a", share=0.25, recent_gpu_s=2.5 * H)) == 10
    assert usage_rank(Account("a", share=0.0, recent_gpu_s=2.5 * H)) == 2  # unknown share: 1


def _queue(heavy_use: float, light_use: float):  # type: ignore[no-untyped-def]
    """One free node; two new 8-GPU jobs (same Tiresias queue): the heavy team's job waited
    longer (higher ρ), the light team's came later."""
    return (cluster(1).at(NOW)
            .accounts(Account("heavy", recent_gpu_s=heavy_use), Account("light", recent_gpu_s=light_use))
            .pending(job("h").gpus(8).account("heavy").at(NOW - 600).work(H),
                     job("l").gpus(8).account("light").at(NOW - 60).work(H))
            .build())


def test_default_puts_the_team_that_used_little_lately_first() -> None:
    order = [w.job_id for w in FAIR.plan(_queue(500 * H, 2 * H), NOW).order]
    assert order == ["l", "h"]


def test_without_use_or_within_a_gpu_hour_the_term_is_neutral() -> None:
    assert [w.job_id for w in FAIR.plan(_queue(0.0, 0.0), NOW).order] == ["h", "l"]  # by ρ
    assert [w.job_id for w in FAIR.plan(_queue(0.6 * H, 0.1 * H), NOW).order] == ["h", "l"]
    # off (the default): the key of before issue 33
    off = Default()
    assert [w.job_id for w in off.plan(_queue(500 * H, 2 * H), NOW).order] == ["h", "l"]


def test_the_term_comes_after_the_tiresias_queue() -> None:
    # the light team's job already has 5 GPU-h of service (queue 1): the heavy team's new job
    # (queue 0) still goes first
    snap = (cluster(1).at(NOW)
            .accounts(Account("heavy", recent_gpu_s=500 * H), Account("light"))
            .pending(job("h").gpus(8).account("heavy").at(NOW - 60).work(H),
                     job("l").gpus(8).account("light").at(NOW - 600).service(5 * H).work(H))
            .build())
    assert [w.job_id for w in FAIR.plan(snap, NOW).order] == ["h", "l"]
