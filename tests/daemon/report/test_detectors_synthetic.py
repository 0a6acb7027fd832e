"""Every detector on synthetic series built to have, or not to have, its pattern."""

from __future__ import annotations

import numpy as np
import pytest

from railgang.daemon.report.config import DEFAULT_GPU_MEMORY_GIB, DetectorThresholds
from railgang.daemon.report.detectors import (
    KINDS,
    comm_ratio,
    detect_comm_bound,
    detect_overspec,
    detect_starvation,
    detect_zombie,
    fleet_drops,
    idle_reservations,
    queue_growth,
    suggest_gpu_type,
    team_surges,
    zombie_episodes,
)
from railgang.daemon.report.series import GpuSeries

TH = DetectorThresholds()
H = 3600.0


def gpu(sm: np.ndarray, *, step: float = 60.0, mem: float = 40000.0,
        power: np.ndarray | None = None) -> GpuSeries:
    t = np.arange(len(sm), dtype=np.float64) * step
    p = power if power is not None else 110 + 5.8 * sm
    return GpuSeries("n1:0", t, sm.astype(np.float64), np.full(len(sm), mem), p)


def busy(n: int, seed: int = 0) -> np.ndarray:
    return np.clip(np.random.default_rng(seed).normal(93, 4, n), 0, 100)


# -- zombie -------------------------------------------------------------------------------------
def test_zombie_needs_eleven_minutes_of_quiet_with_memory() -> None:
    sm = np.concatenate([busy(30), np.zeros(12), busy(30)])  # 12 samples x 60 s = 11 min span
    [ep] = zombie_episodes(gpu(sm), TH)
    assert ep.duration_s == 660 and ep.start == 30 * 60
    short = np.concatenate([busy(30), np.zeros(10), busy(30)])  # 9 min: a long checkpoint
    assert zombie_episodes(gpu(short), TH) == []


@pytest.mark.parametrize(("mem", "power", "flagged"), [
    (40000.0, 120.0, True),
    (500.0, 120.0, False),  # a bare CUDA context is no held memory
    (40000.0, 400.0, False),  # working (NCCL waits, copies): power far above the floor
], ids=["held", "no-memory", "high-power"])
def test_zombie_memory_and_power_conditions(mem: float, power: float, flagged: bool) -> None:
    sm = np.concatenate([busy(20), np.zeros(30)])
    pw = np.concatenate([np.full(20, 650.0), np.full(30, power)])
    pw[:3] = 100.0  # the GPU's floor seen earlier (idle before the job)
    found = detect_zombie("j1", "a", [gpu(sm, mem=mem, power=pw)], TH)
    assert (found is not None) is flagged


def test_zombie_sampling_gap_breaks_an_episode() -> None:
    t = np.concatenate([np.arange(6) * 60.0, 3600 + np.arange(6) * 60.0])
    s = GpuSeries("g", t, np.zeros(12), np.full(12, 30000.0), None)
    assert zombie_episodes(s, TH) == []  # 5 min + 5 min with no samples between


# -- starvation ---------------------------------------------------------------------------------
def test_saw_tooth_is_starved_and_a_checkpoint_is_not() -> None:
    saw = np.tile([95.0, 3.0], 60)  # 2 h of alternating samples
    assert detect_starvation("j", "a", [gpu(saw)], TH) is not None
    ckpt = np.concatenate([busy(50), np.zeros(8), busy(62)])  # one 8-min stall: sd high, 1 fall
    assert np.std(ckpt[40:70]) > 30
    assert detect_starvation("j", "a", [gpu(ckpt)], TH) is None
    assert detect_starvation("j", "a", [gpu(busy(120))], TH) is None


def test_starvation_needs_most_windows() -> None:
    mixed = np.concatenate([np.tile([95.0, 3.0], 15), busy(90)])  # 1 starved window of 8
    assert detect_starvation("j", "a", [gpu(mixed)], TH) is None
    assert detect_starvation("j", "a", [gpu(mixed)],
                             DetectorThresholds(starved_min_share=0.1)) is not None


# -- communication-bound ------------------------------------------------------------------------
def test_comm_bound_by_median_ratio() -> None:
    assert comm_ratio([2.0, 2.0, 9.0], [1.0, 1.0, 1.0]) == 2.0
    assert comm_ratio([1.0], [0.0]) is None
    assert detect_comm_bound("j", "a", 0, [1.6] * 5, [1.0] * 5, TH, nodes=4) is not None
    assert detect_comm_bound("j", "a", 0, [1.4] * 5, [1.0] * 5, TH) is None
    # two slow steps (a checkpoint, a straggler) do not make a job communication-bound
    assert detect_comm_bound("j", "a", 0, [1.4, 1.4, 1.4, 9, 9], [1.0] * 5, TH) is None
    assert detect_comm_bound("j", "a", 0, [1.4, 1.6, 1.6, 9, 9], [1.0] * 5, TH) is not None
    assert detect_comm_bound("j", "a", 0, [3.0] * 2, [1.0] * 2, TH) is None  # too few samples


# -- over-specified -----------------------------------------------------------------------------
@pytest.mark.parametrize(("peak_gib", "ran_on", "want"), [
    (35, "a100-80", "l40s"),  # DESIGN's example: asked 80 GB, peaked at 35 GB -> 42 GiB needed
    (10, "h100", "t4"),
    (45, "h100", None),  # 56 % of the GPU: not over-specified
    (30, "v100", None),  # nothing smaller fits
    (12, "unknown-type", None),
], ids=["design", "tiny", "half", "smallest", "unknown"])
def test_over_specified_suggestion(peak_gib: float, ran_on: str, want: str | None) -> None:
    found = detect_overspec("j", "a", 0, ran_on, peak_gib * 1024, DEFAULT_GPU_MEMORY_GIB, TH)
    assert (None if found is None else found.suggestion.split()[1]) == want


def test_suggestion_is_the_smallest_that_fits() -> None:
    cat = {"big": 80.0, "mid": 48.0, "small": 24.0, "tiny": 16.0}
    assert suggest_gpu_type(18 * 1024, 80.0, cat, TH) == "small"
    assert suggest_gpu_type(18 * 1024, 24.0, cat, TH) is None


# -- team at 3x its usual use -------------------------------------------------------------------
def test_team_surge() -> None:
    history = {"a": [100.0] * 10, "b": [100.0] * 10, "c": [0.0] * 8 + [5.0, 5.0],
               "d": [100.0, 0.0, 0.0, 100.0, 0.0, 100.0]}  # d: works every other day
    today = {"a": 310.0, "b": 250.0, "c": 300.0, "d": 310.0, "new": 5000.0}
    found = {x.subject for x in team_surges(today, history, TH)}
    assert found == {"a", "d"}  # b: 2.5x; c: 2 days of history; new: none


# -- queue growth -------------------------------------------------------------------------------
def test_queue_growing_faster_than_it_drains() -> None:
    arrivals = [i * 600.0 for i in range(144)]  # 6 per hour all day
    starts = [i * 600.0 + 300 for i in range(144)]  # and as many start
    assert queue_growth(arrivals, starts, 0, 86400, TH) == []
    stuck = [s for s in starts if not 8 * H <= s < 14 * H]  # nothing starts 08:00-14:00
    [found] = queue_growth(arrivals, stuck, 0, 86400, TH)
    assert 6 * H <= found.at <= 10 * H and "queue +" in found.detail


# -- fleet drop ---------------------------------------------------------------------------------
def test_fleet_drop_lasting_and_not_a_one_bin_dip() -> None:
    t = np.arange(288) * 300.0
    v = np.full(288, 80.0)
    v[100] = 30  # one bin: lined-up checkpoints
    assert fleet_drops(t, v, TH) == []
    v[200:206] = 35  # 30 min at 35 %
    [found] = fleet_drops(t, v, TH)
    assert found.at == 200 * 300 and found.kind == "fleet_util_drop"
    assert fleet_drops(t, np.full(288, 2.0), TH) == []
    idle_then_busy = np.concatenate([np.full(144, 5.0), np.full(144, 80.0)])
    assert fleet_drops(t, idle_then_busy, TH) == []


# -- idle reservations --------------------------------------------------------------------------
def test_idle_reservations_use_it_or_lose_it() -> None:
    span = 72 * H
    used = {"a": 64 * span * 0.5, "b": 64 * span * 0.1, "c": 0.0}
    found = idle_reservations({"a": 64, "b": 64, "c": 8, "d": 0}, used, span, TH)
    assert [x.subject for x in found] == ["b", "c"]
    assert idle_reservations({"c": 8}, {}, 48 * H, TH) == []  # under 72 h of history


def test_every_kind_is_listed() -> None:
    assert len(set(KINDS)) == len(KINDS) == 9
