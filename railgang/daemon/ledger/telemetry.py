"""Telemetry intake for the compute and productive tiers of the ledger.

Readers (validated, one-line errors with file:line):

* ``nvidia-smi --query-gpu=timestamp,index,...,utilization.gpu,... --format=csv`` — the
  columns are found by header name, so any order or extra column is fine; the node is given,
  because nvidia-smi does not print it; timestamps have no zone and are read in ``tz``.
* DCGM exporter metrics text (Prometheus exposition): ``DCGM_FI_DEV_GPU_UTIL`` (%) or
  ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio), ``DCGM_FI_DEV_FB_USED`` (MiB),
  ``DCGM_FI_DEV_POWER_USAGE`` (W), with the node from the ``Hostname`` label and the time from
  the sample's timestamp or the scrape time.

Attribution (``attribute``): a sample belongs to a segment when its node is in the segment's
hostlist, its GPU index is one of the segment's GPUs on that node (when the ledger knows them;
else every GPU of the node counts) and its time is inside the segment. A segment's
``compute_fraction`` is the mean kernel-active share of its samples; its
``productive_fraction`` is that times the job's mean throughput in the segment over the job's
best (training helper progress reports): a data-starved or communication-bound stretch runs
kernels but advances the model slowly.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select
from sqlalchemy.orm import Session

from railgang.db.ledger import GpuSample, ProgressSample
from railgang.db.models import Job, UsageRecord
from railgang.db.repositories.ledger import dialect_insert
from railgang.db.steps import StepTiming
from railgang.errors import InputError
from railgang.topology import hostnames
from railgang.training import Progress, parse_progress

_CHUNK = 500


@dataclass(frozen=True, slots=True)
class Sample:
    node: str
    gpu: int
    at_ms: int
    sm_util: float  # 0..100
    mem_used_mib: float | None = None
    power_w: float | None = None


def _num(text: str) -> float:
    return float(text.strip().split()[0])


def parse_nvidia_smi_csv(text: str, *, node: str, source: str = "nvidia-smi.csv",
                         tz: tzinfo = UTC) -> list[Sample]:
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    try:
        first = next(reader, None)  # the header first: 50 MB of something else ends at line 1
        if first is None:
            raise InputError("empty file", path=source)
        header = [h.strip().split(" [")[0] for h in first]
        rows = [first, *reader] if "timestamp" in header else [first]
    except csv.Error as exc:  # a cell over csv's field limit: binary data or no newlines
        raise InputError(f"not nvidia-smi CSV: {exc}", path=source) from exc
    need = ("timestamp", "index", "utilization.gpu")
    missing = [c for c in need if c not in header]
    if missing:
        raise InputError(f"header lacks {', '.join(missing)} (query with "
                         "--query-gpu=timestamp,index,utilization.gpu,... --format=csv)",
                         path=source, line=1)
    col = {h: i for i, h in enumerate(header)}
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        field = "timestamp"
        try:
            at = datetime.strptime(row[col["timestamp"]].strip(), "%Y/%m/%d %H:%M:%S.%f")
            field = "index"
            gpu = int(row[col["index"]])
            field = "utilization.gpu"
            util = _num(row[col["utilization.gpu"]])
            mem = _num(row[col["memory.used"]]) if "memory.used" in col else None
            power = _num(row[col["power.draw"]]) if "power.draw" in col else None
        except (ValueError, IndexError) as exc:
            raise InputError(f"cannot read: {exc}", path=source, line=n, field=field) from exc
        if not 0 <= util <= 100:
            raise InputError(f"{util} is not a percentage", path=source, line=n,
                             field="utilization.gpu")
        out.append(Sample(node, gpu, int(at.replace(tzinfo=tz).timestamp() * 1000), util, mem,
                          power))
    return out


_DCGM_UTIL = {"DCGM_FI_DEV_GPU_UTIL": 1.0, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 100.0}


def parse_dcgm(text: str, *, scraped_at: datetime, source: str = "dcgm-exporter",
               node: str | None = None) -> list[Sample]:
    """Samples of a DCGM exporter scrape. The utilisation metric is required per GPU; memory
    and power are attached when present."""
    util: dict[tuple[str, int, int], float] = {}
    extra: dict[tuple[str, int, int], dict[str, float]] = defaultdict(dict)
    default_ms = int(scraped_at.timestamp() * 1000)
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise InputError(f"not Prometheus exposition text: {exc}", path=source) from exc
    for fam in families:
        for smp in fam.samples:
            labels = smp.labels
            host = labels.get("Hostname") or node
            if host is None or "gpu" not in labels:
                raise InputError(f"{smp.name} sample lacks the gpu or Hostname label "
                                 "(or give --node)", path=source, field=smp.name)
            try:
                key = (host, int(labels["gpu"]),
                       int(float(smp.timestamp) * 1000) if smp.timestamp else default_ms)
            except ValueError as exc:
                raise InputError(f"gpu label {labels['gpu']!r} is not an index", path=source,
                                 field=smp.name) from exc
            if smp.name in _DCGM_UTIL:
                util[key] = max(0.0, min(100.0, float(smp.value) * _DCGM_UTIL[smp.name]))
            elif smp.name == "DCGM_FI_DEV_FB_USED":
                extra[key]["mem"] = float(smp.value)
            elif smp.name == "DCGM_FI_DEV_POWER_USAGE":
                extra[key]["power"] = float(smp.value)
    return [Sample(h, g, t, u, extra[(h, g, t)].get("mem"), extra[(h, g, t)].get("power"))
            for (h, g, t), u in sorted(util.items())]


def store_samples(s: Session, samples: Iterable[Sample]) -> int:
    rows = [{"node": x.node, "gpu": x.gpu, "at_epoch_ms": x.at_ms, "sm_util": x.sm_util,
             "mem_used_mib": x.mem_used_mib, "power_w": x.power_w} for x in samples]
    for i in range(0, len(rows), _CHUNK):
        stmt = dialect_insert(s, GpuSample.__table__).on_conflict_do_nothing()
        s.execute(stmt, rows[i:i + _CHUNK])
    return len(rows)


def store_progress(s: Session, job_pk: int, comment: str) -> bool:
    """Keep one progress report of the training helper (``Comment`` of the job)."""
    p = parse_progress(comment)
    if p is None:
        return False
    stmt = dialect_insert(s, ProgressSample.__table__).on_conflict_do_nothing()
    s.execute(stmt, [{"job_id": job_pk, "t_epoch": int(p["t"]), "step": p["step"],
                      "sps": p["sps"]}])
    return True


STEP_TIMING_EVERY_S = 300  # one step-timing row per job per 5 minutes at most


def store_step_timing(s: Session, job_pk: int, p: Progress, *,
                      every_s: int = STEP_TIMING_EVERY_S) -> bool:
    """Keep one report's step and compute time for the communication-bound detector, at most
    one row per job per ``every_s`` (the report's time is rounded down to that grid, and a row
    already there wins), so an ingest run every minute writes no more than one run every
    ``every_s``. Also keeps the report as a progress sample (productive fraction). Returns
    whether the report had both times."""
    s.execute(dialect_insert(s, ProgressSample.__table__).on_conflict_do_nothing(),
              [{"job_id": job_pk, "t_epoch": p.t, "step": p.step, "sps": p.sps}])
    if p.step_s is None or p.compute_s is None:
        return False
    slot = p.t - p.t % max(1, every_s)
    s.execute(dialect_insert(s, StepTiming.__table__).on_conflict_do_nothing(),
              [{"job_id": job_pk, "t_epoch": slot, "step_s": p.step_s,
                "compute_s": p.compute_s}])
    return True


def _gpus_of(seg: UsageRecord) -> dict[str, set[int] | None]:
    """node -> GPU indices of the segment (None: the ledger does not know which)."""
    out: dict[str, set[int] | None] = {n: None for n in hostnames.expand(seg.nodes)}
    for part in filter(None, seg.gpu_ids.split(",")):
        node, _, idx = part.partition(":")
        if node in out and idx:
            lo, _, hi = idx.partition("-")
            known = out[node] or set()
            out[node] = known | set(range(int(lo), int(hi or lo) + 1))
    return out


def attribute(s: Session, *, since_ms: int, until_ms: int) -> int:
    """Recompute compute/productive fractions of the segments overlapping the samples' span;
    returns how many segments got a value. Re-running it gives the same values."""
    segs = s.scalars(select(UsageRecord).where(
        UsageRecord.start_epoch * 1000 < until_ms,
        (UsageRecord.end_epoch.is_(None)) | (UsageRecord.end_epoch * 1000 > since_ms))).all()
    done = 0
    for seg in segs:
        lo = max(seg.start_epoch * 1000, since_ms)
        hi = until_ms if seg.end_epoch is None else min(seg.end_epoch * 1000, until_ms)
        values: list[float] = []
        for node, gpus in _gpus_of(seg).items():
            q = select(GpuSample.gpu, GpuSample.sm_util).where(
                GpuSample.node == node, GpuSample.at_epoch_ms >= seg.start_epoch * 1000,
                GpuSample.at_epoch_ms < (hi if seg.end_epoch is None else seg.end_epoch * 1000))
            values += [u for g, u in s.execute(q) if gpus is None or g in gpus]
        if not values or hi <= lo:
            continue
        seg.compute_fraction = round(sum(values) / len(values) / 100.0, 6)
        seg.productive_fraction = _productive(s, seg)
        done += 1
    return done


def _productive(s: Session, seg: UsageRecord) -> float | None:
    sps = s.execute(select(ProgressSample.t_epoch, ProgressSample.sps)
                    .where(ProgressSample.job_id == seg.job_id)).all()
    if not sps or seg.compute_fraction is None:
        return None
    best = max(v for _, v in sps)
    end = seg.end_epoch if seg.end_epoch is not None else max(t for t, _ in sps) + 1
    inside = [v for t, v in sps if seg.start_epoch <= t < end]
    if best <= 0 or not inside:
        return None
    return round(seg.compute_fraction * (sum(inside) / len(inside)) / best, 6)


def job_pk(s: Session, cluster: str, job_id: str) -> int | None:
    return s.scalar(select(Job.id).where(Job.cluster == cluster, Job.slurm_job_id == job_id))


__all__ = [
    "STEP_TIMING_EVERY_S",
    "Sample",
    "attribute",
    "job_pk",
    "parse_dcgm",
    "parse_nvidia_smi_csv",
    "store_progress",
    "store_samples",
    "store_step_timing",
]
