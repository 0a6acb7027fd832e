"""The real H200 recordings of ../shared/telemetry/h200 (README.md there): readers, labels, and
the thresholds scaled to their length. Missing data FAILS the tests (never skips)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.series import GpuSeries, read_nvidia_smi_query, read_nvml_scenarios

REPO = Path(__file__).resolve().parents[3]


def h200_dir() -> Path:
    env = os.environ.get("RAILGANG_H200_DIR")
    return Path(env) if env else REPO.parent / "shared" / "telemetry" / "h200"


def h200_file(name: str) -> Path:
    path = h200_dir() / name
    if not path.is_file():
        pytest.fail(f"real H200 telemetry not found at {path}: check out ../shared or set "
                    "RAILGANG_H200_DIR (these tests must not be skipped)")
    return path


# The recordings are seconds long: every phase lasts 8-25 s. Thresholds with a duration are
# scaled 60x (10 min -> 10 s, a 15-min judgement window -> 20 s); thresholds without one
# (SM < 5 %, std-dev > 30 %, 2 GiB of memory, 1.5x, 3x) stay DESIGN's.
SCALED = DetectorThresholds(zombie_min_s=10.0, starved_window_s=20.0)


def nvml() -> list[tuple[str, GpuSeries]]:
    return read_nvml_scenarios(h200_file("nvml-100ms-scenarios.csv").read_text(),
                               source="nvml-100ms-scenarios.csv")


def nvml_phase(label: str) -> GpuSeries:
    found = [s for lab, s in nvml() if lab == label]
    assert len(found) == 1, f"one {label} phase expected"
    return found[0]


def nvml_whole() -> GpuSeries:
    parts = [s for _, s in nvml()]
    cat = {k: np.concatenate([getattr(p, k) for p in parts]) for k in ("t", "sm", "mem_mib",
                                                                         "power_w")}
    return GpuSeries("h200", cat["t"], cat["sm"], cat["mem_mib"], cat["power_w"],
                     parts[0].mem_total_mib)


def smi() -> GpuSeries:
    return read_nvidia_smi_query(h200_file("nvidia-smi-query-500ms.csv").read_text(),
                                 source="nvidia-smi-query-500ms.csv")[0]


def smi_labels(series: GpuSeries) -> list[str]:
    """Label each nvidia-smi sample with the NVML scenario at the same moment. The two
    recordings ran side by side with different clocks (epoch vs seconds since start); they are
    aligned at the first sample of the healthy phase with SM >= 90 % in each."""
    phases = nvml()
    t = np.concatenate([s.t for _, s in phases])
    labels = [lab for lab, s in phases for _ in range(len(s))]
    healthy = dict(phases)["healthy"]
    anchor_nvml = float(healthy.t[np.argmax(healthy.sm >= 90)])
    anchor_smi = float(series.t[np.argmax(series.sm >= 90)])
    out = []
    for x in series.t - anchor_smi + anchor_nvml:
        i = int(np.searchsorted(t, x, side="right")) - 1
        out.append(labels[max(0, min(i, len(labels) - 1))])
    return out


def smi_phase(label: str) -> GpuSeries:
    s = smi()
    lab = smi_labels(s)
    idx = [i for i, x in enumerate(lab) if x == label]
    assert idx, label
    lo, hi = idx[0], idx[-1] + 1
    assert idx == list(range(lo, hi)), f"{label} is one stretch"
    return GpuSeries(s.key, s.t[lo:hi], s.sm[lo:hi],
                     None if s.mem_mib is None else s.mem_mib[lo:hi],
                     None if s.power_w is None else s.power_w[lo:hi], s.mem_total_mib)
