"""Detecting failures (issue 20 item 1): what Slurm, GPU telemetry and progress reports say.

Every detector is a pure function from what railgang already reads to :class:`Fault` values:

- **Slurm**: a job whose end state is ``NODE_FAIL``; a node ``down`` (DOWN, NOT_RESPONDING,
  FAIL: ``records.node_state``'s vocabulary). A drained node is not one: whoever drained it (an
  admin's maintenance, a health check) holds it, and a job requeued meanwhile may be its owner's
  or an admin's own ``scontrol requeue`` (issue 38 row 1).
- **GPU telemetry**: DCGM exporter text (``DCGM_FI_DEV_XID_ERRORS`` with a hardware XID,
  ``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL``, ``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS``,
  ``DCGM_FI_DEV_ROW_REMAP_FAILURE``, the NVLink CRC/replay/recovery counters) and
  ``nvidia-smi -q -x`` (volatile uncorrectable ECC, ``remapped_row_failure``,
  ``remapped_row_pending``, ``unrepairable_memory``; the recorded H200 file shows the fields).
  Error *counters* are compared with the previous reading, so an old error is reported once.
- **Hangs**: a running job whose step counter has not moved for ``n × step time`` (an NCCL hang
  looks like this: kernels wait, nothing advances, Slurm sees a running job).
"""

from __future__ import annotations

import enum
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["HARDWARE_XIDS", "Fault", "FaultKind", "dcgm_faults", "hung", "job_fault",
           "node_fault", "smi_xml_faults"]

RAILGANG_REASON = "railgang:"
MAX_TEXT = 16 << 20  # a telemetry document past 16 MiB is not one GPU node's scrape

# XIDs that mean the hardware (or its firmware), not the application: 48 double-bit ECC,
# 62/119/120 GSP/firmware, 63/64 row remapping, 74 NVLink, 79 fallen off the bus,
# 92 high single-bit ECC rate, 94/95 contained/uncontained ECC, 140 unrecovered ECC.
# Application XIDs (13 graphics exception, 31 MMU fault, 43 stopped channel, 45 preemptive
# cleanup) say the job crashed, not that the node is bad.
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})


class FaultKind(enum.Enum):
    NODE_FAIL = "node_fail"  # a job ended NODE_FAIL
    NODE_DOWN = "node_down"  # DOWN / NOT_RESPONDING / FAIL
    GPU_XID = "gpu_xid"
    GPU_ECC = "gpu_ecc"  # uncorrectable ECC
    GPU_ROW_REMAP = "gpu_row_remap"  # row remapping failed or pending (reset needed)
    GPU_NVLINK = "gpu_nvlink"
    HANG = "hang"


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    node: str | None  # None when only the job is known
    job_id: str | None = None
    gpu: int | None = None
    detail: str = ""

    def render(self) -> str:
        where = self.node or "?"
        if self.gpu is not None:
            where += f" gpu {self.gpu}"
        job = f" job {self.job_id}" if self.job_id else ""
        return f"{self.kind.value} on {where}{job}: {self.detail}".rstrip(": ")


def job_fault(job_id: str, state: str, nodes: Iterable[str]) -> list[Fault]:
    """A job that ended ``NODE_FAIL``: one fault per node it ran on (Slurm does not say which)."""
    if state.upper() != "NODE_FAIL":
        return []
    names = sorted(set(nodes))
    if not names:
        return [Fault(FaultKind.NODE_FAIL, None, job_id, detail="ended NODE_FAIL")]
    return [Fault(FaultKind.NODE_FAIL, n, job_id, detail="ended NODE_FAIL") for n in names]


def node_fault(name: str, state: str, reason: str) -> Fault | None:
    """A node in ``records.node_state``'s vocabulary (``down`` / ``drain`` / ...) with its reason:
    a fault only when Slurm says it is down (a drain is someone's decision, not a failure)."""
    if state == "down":
        return Fault(FaultKind.NODE_DOWN, name, detail=reason[:200])
    return None


# DCGM exporter metric -> (kind, is a counter); XID is the last XID seen (a gauge)
_DCGM = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": (FaultKind.GPU_ECC, True),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (FaultKind.GPU_ROW_REMAP, True),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": (FaultKind.GPU_ROW_REMAP, False),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": (FaultKind.GPU_NVLINK, True),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": (FaultKind.GPU_NVLINK, True),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": (FaultKind.GPU_NVLINK, True),
}
Counters = dict[tuple[str, int, str], float]  # (node, gpu, metric) -> last value


def dcgm_faults(text: str, previous: Mapping[tuple[str, int, str], float] | None = None,
                *, node: str | None = None) -> tuple[list[Fault], Counters]:
    """Faults in one DCGM exporter scrape, and the counters to compare the next one with.

    A counter is news when it grew since ``previous`` (or, without a previous reading, when it
    is above zero); a gauge (row-remap failure) when it is set; an XID when it is a hardware one.
    Raises ``ValueError`` (one line) for a document that is not Prometheus text.
    """
    if len(text) > MAX_TEXT:
        raise ValueError(f"DCGM scrape of {len(text):,} characters: larger than {MAX_TEXT:,}")
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        raise ValueError(f"DCGM scrape: not Prometheus text ({str(exc)[:120]})") from None
    prev = previous or {}
    faults: list[Fault] = []
    seen: Counters = {}
    for family in families:
        for sample in family.samples:
            host = sample.labels.get("Hostname") or node
            try:
                gpu = int(sample.labels.get("gpu", "-1"))
            except ValueError:
                continue
            value = float(sample.value)
            if host is None or not math.isfinite(value):
                continue
            # the family's name: the parser appends "_total" to a counter's sample names
            fault = _dcgm_sample(family.name, host, gpu, value, prev)
            if family.name in _DCGM:
                seen[(host, gpu, family.name)] = value
            if fault is not None:
                faults.append(fault)
    return faults, seen


def _dcgm_sample(name: str, host: str, gpu: int, value: float,
                 prev: Mapping[tuple[str, int, str], float]) -> Fault | None:
    if name == "DCGM_FI_DEV_XID_ERRORS":
        xid = int(value)
        if xid in HARDWARE_XIDS:
            return Fault(FaultKind.GPU_XID, host, gpu=gpu, detail=f"XID {xid}")
        return None
    if name not in _DCGM:
        return None
    kind, counter = _DCGM[name]
    before = prev.get((host, gpu, name))
    news = value > (before if before is not None else 0.0) if counter else value > 0
    if news:
        return Fault(kind, host, gpu=gpu, detail=f"{name} {value:g}"
                     + (f" (was {before:g})" if before is not None else ""))
    return None


def smi_xml_faults(text: str, node: str) -> list[Fault]:
    """Faults in ``nvidia-smi -q -x`` output (every GPU of one node).

    Raises ``ValueError`` (one line) for a document that is not that XML. Entity declarations
    are refused (a billion-laughs document never gets expanded).
    """
    if len(text) > MAX_TEXT:
        raise ValueError(f"nvidia-smi -q -x of {len(text):,} characters: larger than {MAX_TEXT:,}")
    if "<!ENTITY" in text or "<!entity" in text:
        raise ValueError("nvidia-smi -q -x: entity declarations are not nvidia-smi output")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ValueError(f"nvidia-smi -q -x: not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"nvidia-smi -q -x: root <{root.tag}>, expected <nvidia_smi_log>")
    faults: list[Fault] = []
    for index, gpu in enumerate(root.iter("gpu")):
        minor = _int(gpu.findtext("minor_number"))
        g = minor if minor is not None else index
        for path in ("ecc_errors/volatile/dram_uncorrectable",
                     "ecc_errors/volatile/sram_uncorrectable_parity",
                     "ecc_errors/volatile/sram_uncorrectable_secded",
                     "ecc_errors/volatile/sram_uncorrectable"):
            count = _int(gpu.findtext(path))
            if count:
                faults.append(Fault(FaultKind.GPU_ECC, node, gpu=g, detail=f"{path} {count}"))
        for path, kind in (("remapped_rows/remapped_row_failure", FaultKind.GPU_ROW_REMAP),
                           ("remapped_rows/remapped_row_pending", FaultKind.GPU_ROW_REMAP),
                           ("ecc_errors/unrepairable_memory", FaultKind.GPU_ECC)):
            if (gpu.findtext(path) or "").strip().lower() == "yes":
                faults.append(Fault(kind, node, gpu=g, detail=f"{path}: Yes"))
    return faults


def _int(text: str | None) -> int | None:
    try:
        return int((text or "").strip())
    except ValueError:
        return None


def hung(job_id: str, node: str | None, reports: Iterable[tuple[float, float]], now: float,
         step_s: float | None, n: float = 10.0, floor_s: float = 300.0) -> Fault | None:
    """A hang: the last ``(time, step)`` reports show no step since ``max(n × step_s, floor_s)``.

    ``reports`` are the job's progress reports (any order); a job with none, or without a known
    step time, is never called hung (no evidence). ``floor_s`` keeps a slow first step or a
    checkpoint from looking like a hang.
    """
    if step_s is None or not step_s > 0 or not math.isfinite(step_s):
        return None
    points = sorted((t, s) for t, s in reports if math.isfinite(t) and math.isfinite(s))
    if not points:
        return None
    last_t, last_step = points[-1]
    moved_at = last_t
    for t, s in reversed(points):
        if s != last_step:
            break
        moved_at = t  # the earliest report at the current step
    limit = max(n * step_s, floor_s)
    stalled = now - moved_at
    if stalled < limit:
        return None
    return Fault(FaultKind.HANG, node, job_id,
                 detail=f"step {last_step:g} for {stalled:.0f} s (> {n:g} x {step_s:g} s step)")
