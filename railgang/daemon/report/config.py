"""Thresholds of the anomaly detectors and where nightly reports go (``[report]`` in the config
file, ``RAILGANG_REPORT__*`` in the environment). Defaults are DESIGN R-Q3/R-Q7's numbers.

This module imports only the GPU catalogue from the rest of railgang, so ``daemon.config`` can
nest it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from railgang.topology.gpus import GPU_TYPES

# memory of each GPU type in GiB, for "over-specified: suggest a smaller type" (R-S10);
# extend or replace with [report.gpu_memory_gib]
# the types the advice may suggest (unambiguous names: plain "a100" is two SKUs), their memory
# from the GPU catalogue (topology/gpus.py)
SUGGESTED_TYPES = ("h200", "b200", "h100", "a100-80", "a100-40", "l40s", "a10", "v100", "t4")
DEFAULT_GPU_MEMORY_GIB: dict[str, float] = {n: GPU_TYPES[n].memory_gb for n in SUGGESTED_TYPES}


class DetectorThresholds(BaseModel):
    """One field per threshold; the comment names the DESIGN rule it comes from."""

    model_config = {"extra": "forbid", "frozen": True}
    # R-Q7 "a team at 3x its usual use": today's GPU-hours over the median of earlier days
    surge_ratio: float = Field(default=3.0, gt=1)
    surge_history_days: int = Field(default=14, ge=1, le=366)
    surge_min_history_days: int = Field(default=3, ge=1)
    surge_min_gpu_hours: float = Field(default=24.0, ge=0)  # ignore teams below one GPU-day
    # R-Q7 "queue growing faster than it drains": arrivals over starts in a window
    queue_window_s: int = Field(default=4 * 3600, ge=60)
    queue_growth_ratio: float = Field(default=1.5, gt=1)
    queue_min_growth_jobs: int = Field(default=10, ge=1)
    # R-Q7 "sudden fleet-wide power/util drop": a bin below (1 - drop) x the trailing median
    fleet_bin_s: int = Field(default=300, ge=1)
    fleet_baseline_s: int = Field(default=3600, ge=1)
    fleet_drop_fraction: float = Field(default=0.3, gt=0, lt=1)
    fleet_min_util_pct: float = Field(default=10.0, ge=0)  # no drop from an idle fleet
    fleet_min_drop_s: int = Field(default=900, ge=0)  # a one-bin dip (checkpoints) is no event
    # R-Q7 zombie: memory held, SM < 5 % for > 10 min (and power near the GPU's floor)
    zombie_sm_pct: float = Field(default=5.0, ge=0, le=100)
    zombie_min_s: float = Field(default=600.0, gt=0)
    zombie_min_mem_mib: float = Field(default=2048.0, ge=0)  # above a bare CUDA context
    zombie_power_ratio: float = Field(default=2.0, gt=1)  # x the GPU's lowest power seen
    # R-Q7 data starvation: utilisation saw-tooth with std-dev > 30 %
    starved_sd_pct: float = Field(default=30.0, gt=0)
    starved_window_s: float = Field(default=900.0, gt=0)
    starved_min_cycles: int = Field(default=5, ge=1)  # busy -> idle falls per window
    starved_min_share: float = Field(default=0.5, gt=0, le=1)  # of the job's windows
    min_window_samples: int = Field(default=8, ge=2)
    # R-Q7 communication-bound: step time > 1.5 x compute time
    comm_ratio: float = Field(default=1.5, gt=1)
    comm_min_samples: int = Field(default=3, ge=1)
    # R-Q7 over-specified ("asked 80 GB, peaked at 35 GB") and R-S10 capability matching
    overspec_headroom: float = Field(default=0.2, ge=0)  # peak x (1 + headroom) must fit
    overspec_max_peak_share: float = Field(default=0.5, gt=0, le=1)  # flag at most this full
    # R-Q3 use it or lose it: a reserved group under 20 % for 72 h
    idle_reservation_share: float = Field(default=0.2, ge=0, le=1)
    idle_reservation_s: int = Field(default=72 * 3600, ge=3600)


class ReportSettings(BaseModel):
    """``railgang report`` and the daemon's nightly job (docs/report.md)."""

    model_config = {"extra": "forbid"}
    # the daemon writes <dir>/<date>/report.{html,csv,json} each night; empty = no report jobs
    dir: Path | None = None
    nightly_hour_utc: int = Field(default=1, ge=0, le=23)  # builds the day before, at HH:05
    # and today's so far into <dir>/<today>/ every this many seconds (and at start), marked
    # partial until the nightly run replaces it; 0 = only the nightly one (issue 36 item 1)
    today_every_s: int = Field(default=3600, ge=0, le=86400)
    top_jobs: int = Field(default=20, ge=1, le=1000)
    # GPUs per pool (GPU type) when telemetry cannot tell (idle GPUs send no samples)
    pool_gpus: dict[str, int] = {}
    gpu_memory_gib: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: dict(DEFAULT_GPU_MEMORY_GIB))
    # preemption tax per event (R-S8: 15 min lost + 20 save + 10 reload and warm-up)
    preemption_tax_s: float = Field(default=45 * 60.0, ge=0)
    fragmentation_samples: int = Field(default=24, ge=1, le=1440)  # instants per day
    thresholds: DetectorThresholds = DetectorThresholds()


__all__ = ["DEFAULT_GPU_MEMORY_GIB", "DetectorThresholds", "ReportSettings"]
