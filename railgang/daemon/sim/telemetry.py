"""The simulator as a telemetry source: a replay writes the ledger a real cluster would fill.

``simulate_with_ledger`` replays a trace exactly like ``engine.simulate`` (same core, same
backend) with a backend that also logs every allocation segment (start, resize, preemption,
completion). ``write_ledger`` turns the segments into what ``railgang ledger`` and the telemetry
intake would have stored: ``jobs`` and ``usage_records`` (with the compute and productive
fractions), per-GPU ``gpu_samples`` every ``interval_s`` for every GPU of the cluster (idle ones
too, as DCGM reports them), ``step_timings`` per job, and, where the database has none yet,
accounts for the trace's teams and rates for the GPU type.

What a GPU shows while a job holds it is a model, drawn per job from a seeded rng: most jobs
are healthy (SM ~93 %, a checkpoint pause every 30 min); some are data-starved (utilisation
alternating busy/idle between samples), some turn zombie (memory held, no kernels) for the last
part of a long run, some use little of the GPU's memory (over-specified). Step timings come
from the simulator's own communication model: step / compute = 1 / (placement share of the
step spent computing), so badly placed multi-node jobs show as communication-bound.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, cast

import numpy as np
from sqlalchemy import Engine, Table, insert, select

from railgang.daemon.core.model.plan import Policy
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.sim.engine import EngineConfig, RunResult, _Replay, _steps_quiet
from railgang.daemon.sim.progress import CommModel
from railgang.daemon.sim.traces.model import TraceJob
from railgang.db.ledger import GpuSample, NodeState
from railgang.db.models import Account, Job, UsageRecord
from railgang.db.org import Rate
from railgang.db.session import session_scope
from railgang.db.steps import StepTiming
from railgang.topology import hostnames
from railgang.topology.tiers import Capacity

PROFILES = ("healthy", "starved", "zombie")
_CHUNK = 20000


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    start_epoch: int = 1795392000  # trace time 0 (2026-11-23 00:00 UTC, a Monday)
    interval_s: float = 60.0
    seed: int = 0
    cluster: str = "sim"
    gpu_type: str = "h100"  # written for nodes whose facts say only the generic "gpu"
    gpu_mem_mib: float = 81559.0  # an 80 GB GPU
    starved_share: float = 0.08
    zombie_share: float = 0.05
    overspec_share: float = 0.2
    reserved_rate: float = 2.0  # DESIGN R-S8's $2/GPU-h, when the database has no rate
    spot_rate: float = 0.7  # R-S9: 65 % discount


@dataclass(frozen=True, slots=True)
class SimSegment:
    job_id: str
    start: float
    end: float | None
    assignment: tuple[tuple[str, tuple[int, ...]], ...]
    share: float  # compute share of a step on this placement (1 - comm) x placement factor

    @property
    def gpus(self) -> int:
        return sum(len(g) for _, g in self.assignment)


class _LoggingBackend(SimBackend):
    """SimBackend that also logs allocation segments (its behaviour is unchanged)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.segments: list[SimSegment] = []
        self._open: dict[str, tuple[float, Any, float]] = {}

    def _opened(self, job_id: str, now: float) -> None:
        sj = self.jobs.get(job_id) or self.running.get(job_id)
        if sj is not None and sj.assignment is not None:
            self._open[job_id] = (now, tuple(sorted((n, tuple(g)) for n, g in
                                                    sj.assignment.items())), sj.share)

    def _closed(self, job_id: str, now: float) -> None:
        got = self._open.pop(job_id, None)
        if got is not None:
            self.segments.append(SimSegment(job_id, got[0], now, got[1], got[2]))

    def _start(self, action: Any, now: float) -> str | None:
        problem = super()._start(action, now)
        if problem is None:
            self._opened(action.job_id, now)
        return problem

    def _resize(self, action: Any, now: float, noticed: bool = False) -> str | None:
        before = self._open.get(action.job_id)
        problem = super()._resize(action, now, noticed)
        if problem is None and before is not None:
            self._closed(action.job_id, now)
            self._opened(action.job_id, now)
        return problem

    def _release(self, sj: Any) -> None:
        self._closed(sj.tj.job_id, sj.as_of)
        super()._release(sj)

    def still_open(self) -> list[SimSegment]:
        return [SimSegment(j, t0, None, a, sh) for j, (t0, a, sh) in self._open.items()]


def simulate_with_ledger(jobs: Sequence[TraceJob], policy: Policy, fabric: Any, *,
                         config: EngineConfig = EngineConfig(), comm: CommModel | None = None,
                         on_progress: Callable[[int, int], None] | None = None
                         ) -> tuple[RunResult, list[SimSegment], dict[str, str]]:
    """Replay like ``engine.simulate``; also return the segments and each node's tier."""
    import time

    started = time.perf_counter()
    # the logging backend from the start: --failures' process binds to the replay's backend
    # when the replay is made, and a backend swapped in after it met no fault (issue 36 item 3)
    replay = _Replay(jobs, policy, fabric, config, comm, _placer(), on_progress,
                     backend_class=_LoggingBackend)
    with _steps_quiet():  # the failure step's warning per fault: the summary counts them
        replay.run()
    backend = replay.backend
    assert isinstance(backend, _LoggingBackend)
    tiers = dict(getattr(config.sim, "node_tier", {}) or {})
    return (replay.result(time.perf_counter() - started),
            backend.segments + backend.still_open(), tiers)


def _placer() -> Any:
    from railgang.daemon.core.model.gang import topology_placer

    return topology_placer


def _rng(seed: int, job_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(job_id.encode())])


def _gpu_ids(assignment: Sequence[tuple[str, Sequence[int]]]) -> str:
    parts = []
    for node, gpus in assignment:
        run: list[int] = []
        for g in sorted(gpus):
            if run and g != run[-1] + 1:
                parts.append(f"{node}:{run[0]}-{run[-1]}")
                run = []
            run.append(g)
        if run:
            parts.append(f"{node}:{run[0]}-{run[-1]}")
    return ",".join(parts)


def _capacity(tier: str) -> Capacity:
    return {"spot": Capacity.SPOT, "on-demand": Capacity.ON_DEMAND,
            "ondemand": Capacity.ON_DEMAND}.get(tier, Capacity.RESERVED)


@dataclass(frozen=True, slots=True)
class LedgerStats:
    jobs: int
    segments: int
    samples: int
    step_timings: int
    since: int
    until: int


def job_profile(cfg: TelemetryConfig, job_id: str) -> tuple[str, float]:
    """(behaviour, peak memory share of the GPU) of one job; deterministic per job and seed."""
    r = _rng(cfg.seed, job_id)
    u = float(r.random())
    kind = ("starved" if u < cfg.starved_share else
            "zombie" if u < cfg.starved_share + cfg.zombie_share else "healthy")
    low = float(r.random()) < cfg.overspec_share
    return kind, float(r.uniform(0.12, 0.3) if low else r.uniform(0.6, 0.95))


def _gpu_values(kind: str, mem_share: float, t: np.ndarray, start: float, end: float,
                cfg: TelemetryConfig, r: np.random.Generator) -> tuple[np.ndarray, ...]:
    """SM %, memory MiB and power W of one GPU of a job at sample times ``t``."""
    n = len(t)
    sm = np.clip(r.normal(93.0, 4.0, n), 0, 100)
    since_start = t - start
    sm[(since_start % 1800.0) < 60.0] = 2.0  # a checkpoint every 30 min (accounting.py's default)
    mem = np.full(n, mem_share * cfg.gpu_mem_mib) * r.uniform(0.97, 1.0, n)
    if kind == "starved":  # bursts and data-loader stalls, as the H200 recording shows them
        busy = (np.arange(n) % 2) == 0
        sm = np.where(busy, np.clip(r.normal(92, 5, n), 0, 100), np.clip(r.normal(4, 3, n), 0,
                                                                         100))
    power = 110.0 + 5.8 * sm
    if kind == "starved":  # power is smoothed over ~1 s: it sits mid-way (H200: ~330 W)
        power = np.full(n, 330.0) + r.normal(0, 8, n)
    if kind == "zombie" and end - start >= 2 * 3600:
        dead = since_start >= 0.4 * (end - start)
        sm[dead] = 0.0
        power[dead] = 120.0 + r.normal(0, 1, int(dead.sum()))
    return sm, mem, power


def replay_span(jobs: Sequence[TraceJob], result: RunResult,
                segments: Sequence[SimSegment]) -> tuple[float, float]:
    """(first submission, last end) of the replay in trace time: the span the samples cover."""
    t0 = min((j.submit_time for j in jobs), default=0.0)
    end_t = max([s.end for s in segments if s.end is not None] +
                [r.finish for r in result.records if r.finish is not None] + [t0])
    return t0, end_t


def sample_count(fabric: Any, t0: float, end_t: float, interval_s: float) -> int:
    """GPU samples ``write_ledger`` stores: every GPU of the cluster at every sample time."""
    gpus = sum(fabric.facts(n).gpus for n in fabric.nodes)
    return int(gpus * len(np.arange(t0, end_t + interval_s, interval_s)))


def write_ledger(engine: Engine, jobs: Sequence[TraceJob], result: RunResult,
                 segments: Sequence[SimSegment], fabric: Any, cfg: TelemetryConfig, *,
                 node_tier: dict[str, str] | None = None,
                 on_progress: Callable[[int, int], None] | None = None) -> LedgerStats:
    """Store the replay in the ledger (see the module docstring); returns what was written.
    ``on_progress(samples written, samples in all)`` is called after each chunk."""
    tiers = node_tier or {}
    t0, end_t = replay_span(jobs, result, segments)
    ep = float(cfg.start_epoch) - t0

    def epoch(t: float) -> int:
        return round(ep + t)

    records = {r.job_id: r for r in result.records}
    gpu_type = {n: cfg.gpu_type if fabric.facts(n).gpu_type == "gpu" else fabric.facts(n).gpu_type
                for n in fabric.nodes}
    with session_scope(engine) as s:
        _ensure_org(s, sorted({j.account for j in jobs}), sum(fabric.facts(n).gpus
                                                               for n in fabric.nodes))
        _ensure_rates(s, sorted(set(gpu_type.values())), cfg)
        # the fleet as sinfo would show it: every node from the first sample on (idle or not),
        # down from a fault of --failures until its repair
        s.execute(insert(_table(NodeState)), [
            {"cluster": cfg.cluster, "node": n, "at_epoch": at, "state": state,
             "gpu_type": gpu_type[n], "gpus": fabric.facts(n).gpus, "reason": reason}
            for (n, at), (state, reason) in sorted(node_history(result, epoch(t0), epoch,
                                                                fabric.nodes).items())])
        rows = [_job_row(j, records.get(j.job_id), cfg, epoch(j.submit_time)) for j in jobs]
        _insert(s, Job, rows)
        pk = {j: i for j, i in s.execute(select(Job.slurm_job_id, Job.id)
                                          .where(Job.cluster == cfg.cluster))}
        tj = {j.job_id: j for j in jobs}
        seg_rows: list[dict[str, Any]] = []
        step_rows: list[dict[str, Any]] = []
        order: dict[str, int] = {}
        # per-GPU grid of sample times over the whole replay; idle GPUs report zeros
        times = np.arange(t0, end_t + cfg.interval_s, cfg.interval_s)
        # only the stretches jobs held are kept (in the order they were drawn); a GPU's whole
        # row is made when it is stored: idle samples are zeros at 75 W (a grid of every GPU
        # over the replay was 2 GB for 500 Philly jobs at 60 s)
        held: dict[tuple[str, int], list[tuple[int, int, np.ndarray]]] = defaultdict(list)
        for seg in sorted(segments, key=lambda x: (x.job_id, x.start)):
            job = tj[seg.job_id]
            kind, mem_share = job_profile(cfg, seg.job_id)
            end = seg.end if seg.end is not None else end_t
            a, b = np.searchsorted(times, [seg.start, end])
            r = _rng(cfg.seed + 1, f"{seg.job_id}@{seg.start}")
            sms = []
            for node, gpus in seg.assignment:
                for g in gpus:
                    sm, mem, power = _gpu_values(kind, mem_share, times[a:b], seg.start, end,
                                                 cfg, r)
                    held[(node, g)].append((int(a), int(b), np.vstack([sm, mem, power])))
                    sms.append(sm)
            compute = float(np.mean(np.concatenate(sms))) / 100 if sms and b > a else None
            k = order[seg.job_id] = order.get(seg.job_id, -1) + 1
            seg_rows.append(_segment_row(seg, job, pk[seg.job_id], k, compute, gpu_type, tiers,
                                         epoch))
            share = max(seg.share, 1e-3)
            for t in np.arange(seg.start, end, 3600.0):  # one step timing per hour of running
                step_rows.append({"job_id": pk[seg.job_id], "t_epoch": epoch(float(t)),
                                  "step_s": round(1.0 / share, 4), "compute_s": 1.0})
        _insert(s, UsageRecord, seg_rows)
        _insert(s, StepTiming, step_rows)
        keys = sorted((n, g) for n in fabric.nodes for g in range(fabric.facts(n).gpus))

        def row_of(key: tuple[str, int]) -> np.ndarray:
            grid = np.zeros((3, len(times)))
            grid[2, :] = 75.0  # idle power
            for a, b, values in held.get(key, ()):
                grid[:, a:b] = values
            return grid

        samples = _store_grid(s, keys, row_of, [epoch(float(t)) * 1000 for t in times],
                              on_progress)
    return LedgerStats(len(rows), len(seg_rows), samples, len(step_rows), epoch(t0),
                       epoch(end_t))


# what Slurm writes on a node whose slurmd stopped answering (a failed node, to the report)
FAULT_REASON = "Not responding"


def node_history(result: RunResult, first: int, epoch: Callable[[float], int],
                 nodes: Any) -> dict[tuple[str, int], tuple[str, str]]:
    """``(node, epoch) -> (state, reason)``: idle from ``first``, down at each fault of the
    replay's failure process and idle again at its repair (the later row of one second wins)."""
    out = {(n, first): ("idle", "") for n in nodes}
    fails = result.failures
    if fails is None:
        return out
    events = [(f.at, 1, f.nodes) for f in fails.log] + [(t, 0, ns) for t, ns in fails.repairs]
    for t, down, names in sorted(events, key=lambda e: (e[0], e[1])):
        for n in names:
            out[(n, max(first, epoch(t)))] = ("down", FAULT_REASON) if down else ("idle", "")
    return out


def _table(model: Any) -> Table:
    return cast(Table, model.__table__)


def _insert(s: Any, model: Any, rows: list[dict[str, Any]]) -> None:
    for i in range(0, len(rows), _CHUNK):
        s.execute(insert(_table(model)), rows[i:i + _CHUNK])


def _job_row(j: TraceJob, rec: Any, cfg: TelemetryConfig, submitted: int) -> dict[str, Any]:
    state = ("COMPLETED" if rec is not None and rec.finish is not None else
             "RUNNING" if rec is not None and rec.start is not None else
             "REJECTED" if rec is not None and rec.rejected else "PENDING")
    return {"cluster": cfg.cluster, "slurm_job_id": j.job_id, "account": j.account,
            "user": f"{j.account}-u{zlib.crc32(j.job_id.encode()) % 3}",
            "gpus": j.gpus, "priority_class": j.priority_class,
            "hints": f"tp{j.tp},pp{j.pp}", "state": state,
            "submitted_at": datetime.fromtimestamp(submitted, UTC)}


def _segment_row(seg: SimSegment, job: TraceJob, job_pk: int, k: int, compute: float | None,
                 gpu_type: dict[str, str], tiers: dict[str, str],
                 epoch: Callable[[float], int]) -> dict[str, Any]:
    nodes = [n for n, _ in seg.assignment]
    tier = _capacity(tiers.get(nodes[0], "")) if nodes else Capacity.RESERVED
    return {
        "job_id": job_pk, "segment": k, "account": job.account,
        "user": f"{job.account}-u{zlib.crc32(job.job_id.encode()) % 3}",
        "gpu_type": gpu_type.get(nodes[0], "gpu") if nodes else "gpu",
        "gpus": seg.gpus, "nodes": hostnames.collect(nodes),
        "started_at": datetime.fromtimestamp(epoch(seg.start), UTC),
        "ended_at": None if seg.end is None else datetime.fromtimestamp(epoch(seg.end), UTC),
        "start_epoch": epoch(seg.start),
        "end_epoch": None if seg.end is None else epoch(seg.end),
        "tier": "guaranteed", "capacity": tier, "gpu_ids": _gpu_ids(seg.assignment),
        "compute_fraction": None if compute is None else round(compute, 6),
        "productive_fraction": None if compute is None else
        round(compute * min(1.0, seg.share), 6), "source": "sim"}


_SAMPLE_COLUMNS = ("node", "gpu", "at_epoch_ms", "sm_util", "mem_used_mib", "power_w")


def _store_grid(s: Any, keys: Sequence[tuple[str, int]],
                row_of: Callable[[tuple[str, int]], np.ndarray], at_ms: list[int],
                on_progress: Callable[[int, int], None] | None = None) -> int:
    """Insert every GPU's samples: plain tuples through the driver's executemany (a dict per
    row through SQLAlchemy's insert cost about twice as much per sample)."""
    conn = s.connection()
    # the time index is built once after the load (sorted), not kept up row by row: rows
    # arrive GPU by GPU, so each insert would land on another page of the time index
    time_index = [ix for ix in _table(GpuSample).indexes
                  if [c.name for c in ix.columns] == ["at_epoch_ms"]]
    for ix in time_index:
        ix.drop(conn, checkfirst=True)
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    sql = (f"INSERT INTO {GpuSample.__tablename__} ({', '.join(_SAMPLE_COLUMNS)}) "
           f"VALUES ({', '.join([mark] * len(_SAMPLE_COLUMNS))})")
    count = 0
    total = len(keys) * len(at_ms)
    batch: list[tuple[Any, ...]] = []
    for node, gpu in keys:
        g = row_of((node, gpu))
        sm, mem, power = (np.round(g[0], 1).tolist(), np.round(g[1], 0).tolist(),
                          np.round(g[2], 1).tolist())
        batch.extend(zip(repeat(node), repeat(gpu), at_ms, sm, mem, power))
        if len(batch) >= _CHUNK:
            conn.exec_driver_sql(sql, batch)
            count += len(batch)
            batch = []
            if on_progress is not None:
                on_progress(count, total)
    if batch:
        conn.exec_driver_sql(sql, batch)
        count += len(batch)
    for ix in time_index:
        ix.create(conn)
    if on_progress is not None:
        on_progress(count, total)
    return count


def _ensure_org(s: Any, teams: list[str], total_gpus: int) -> None:
    """Accounts for the trace's teams when the database has none: an org and a department
    holding the cluster, each team guaranteed an equal share of 80 % of it."""
    have = set(s.scalars(select(Account.name)))
    missing = [t for t in teams if t not in have]
    if not missing:
        return
    now = datetime.now(UTC)
    org = s.scalars(select(Account).where(Account.name == "sim-org")).first()
    if org is None:
        org = Account(name="sim-org", level="org", guaranteed_gpus=total_gpus, created_at=now)
        s.add(org)
    dept = s.scalars(select(Account).where(Account.name == "sim-dept")).first()
    if dept is None:
        dept = Account(name="sim-dept", level="dept", parent=org, guaranteed_gpus=total_gpus,
                       created_at=now)
        s.add(dept)
    share = int(0.8 * total_gpus) // max(1, len(teams))
    for t in missing:
        s.add(Account(name=t, level="team", parent=dept, guaranteed_gpus=share,
                      limit_gpus=None, created_at=now))
    s.flush()


def _ensure_rates(s: Any, gpu_types: list[str], cfg: TelemetryConfig) -> None:
    have = {(r.gpu_type, r.capacity) for r in s.scalars(select(Rate))}
    for t in gpu_types:
        for cap, price in ((Capacity.RESERVED, cfg.reserved_rate), (Capacity.SPOT, cfg.spot_rate)):
            if (t, cap) not in have:
                s.add(Rate(gpu_type=t, capacity=cap, per_gpu_hour=price))
    s.flush()


__all__ = ["PROFILES", "LedgerStats", "SimSegment", "TelemetryConfig", "job_profile",
           "replay_span", "sample_count", "simulate_with_ledger",
           "write_ledger"]
