"""Communication-bound jobs (R-Q7): step time above 1.5 x the compute time of a step.

Input: step timings of one job (wall time of a step and the time its kernels computed, from the
training helper's profiler or the simulator), judged by the median ratio so one slow step (a
checkpoint, a straggler) does not decide. Kernels keep the GPU "busy" while NCCL waits, so SM
utilisation cannot tell this case; only timings can.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.detectors.base import Anomaly


def comm_ratio(step_s: Sequence[float], compute_s: Sequence[float]) -> float | None:
    """Median of step / compute over the samples with compute > 0 (None: no usable sample)."""
    pairs = [(a, b) for a, b in zip(step_s, compute_s, strict=True) if b > 0 and a >= 0]
    if not pairs:
        return None
    return float(np.median([a / b for a, b in pairs]))


def detect_comm_bound(job: str, team: str | None, at: float | None, step_s: Sequence[float],
                      compute_s: Sequence[float], th: DetectorThresholds,
                      nodes: int = 0) -> Anomaly | None:
    if len(step_s) < th.comm_min_samples:
        return None
    ratio = comm_ratio(step_s, compute_s)
    if ratio is None or ratio <= th.comm_ratio:
        return None
    where = f" across {nodes} nodes" if nodes > 1 else ""
    return Anomaly("communication_bound", job, team, at, round(ratio, 2), th.comm_ratio,
                   f"median step takes {ratio:.2f}x its compute time{where}",
                   "place it in one leaf (or fewer nodes), raise the TP degree inside a node, "
                   "or overlap gradient all-reduce with compute")


__all__ = ["comm_ratio", "detect_comm_bound"]
