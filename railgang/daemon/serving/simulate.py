"""Static vs dynamic: the training trace replayed beside the serving plan, and the report
(``railgang sim --serving FILE``; ``replay.py`` has the pieces and what they model)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from railgang.daemon.core.model.actions import Action, Preempt, Resize, Start
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.serving.model import ServingSet
from railgang.daemon.serving.plan import Mode
from railgang.daemon.serving.replay import (
    BusyMeter,
    Expected,
    Planned,
    ServingKnobs,
    SimServing,
    declare,
    expect,
)


class TakeBacks:
    """The cycles' journal (``loop.CycleJournal``) that counts what the core did to borrowers on
    the serving pools for a replica inside the window: preempted for it (``Preempt.for_job``,
    checkpointed and requeued), or shrunk off a pool node in a cycle that acted for a replica
    (the eviction's shrinks name no job they serve). The core's own preemptions among training
    jobs, and anything after the window, are not take-backs."""

    def __init__(self, pool: frozenset[str], replicas: frozenset[str], until: float) -> None:
        self.pool, self.replicas, self.until = pool, replicas, until
        self.stopped = 0  # borrowers preempted for a replica
        self.hit: set[float] = set()  # cycles (times) whose take-back stopped a borrower
        self.shrunk = 0  # elastic borrowers shrunk off pool nodes instead
        self._snapshot: Snapshot | None = None

    def observed(self, snapshot: Snapshot, now: float) -> None:
        self._snapshot = snapshot

    def planned(self, actions: Sequence[Action], now: float) -> None:
        snap = self._snapshot
        if snap is None or now >= self.until:
            return
        for_replica = any((isinstance(a, Start) and a.job_id in self.replicas)
                          or (isinstance(a, Preempt) and a.for_job in self.replicas)
                          for a in actions)
        if not for_replica:
            return
        for a in actions:
            if not isinstance(a, (Preempt, Resize)) or a.job_id in self.replicas:
                continue
            r = snap.running.get(a.job_id)
            if r is None or not (self.pool & set(r.assignment)):
                continue
            if isinstance(a, Preempt) and a.for_job in self.replicas:
                self.stopped += 1
                self.hit.add(now)
            elif isinstance(a, Resize) and a.replicas < r.replicas and len(
                    self.pool & set(a.assignment)) < len(self.pool & set(r.assignment)):
                self.shrunk += 1  # gave back a pool node, kept running

    def settled(self, results: Sequence[Any], now: float) -> None:
        return None


@dataclass(frozen=True, slots=True)
class Side:
    """One replay of the boundary: serving's plan and training's replay beside it."""

    mode: str
    planned: Planned
    run: Any  # the engine's RunResult
    training_gpu_h: float  # GPU-hours training held inside the window
    total_gpus: int
    closings_hit: int  # take-backs (cycles) that stopped a training job on a pool node
    jobs_signalled: int  # borrowers stopped by a take-back (checkpointed, requeued)
    jobs_shrunk: int = 0  # elastic borrowers that shrank off the pool instead

    @property
    def utilisation(self) -> float:
        hours = self.planned.window_s / 3600
        served = self.planned.outcome.served_gpu_h
        return (served + self.training_gpu_h) / (self.total_gpus * hours) if hours else 0.0

    def row(self) -> dict[str, Any]:
        got, m = self.planned.outcome, self.run.metrics
        lost = sum(r.lost_gpu_s for r in self.run.records) / 3600
        return {
            "mode": self.mode, "utilisation": round(self.utilisation, 4),
            "serving_unmet_replica_min": round(got.unmet_replica_min, 1),
            "serving_unmet_share": round(got.unmet_share, 6),
            "serving_late_replicas": got.late_replicas,
            "serving_reactive_starts": got.reactive_starts,
            "serving_planned_starts": got.planned_starts,
            "lent_gpu_h": round(got.lent_gpu_h, 1),
            "training_gpu_h": round(self.training_gpu_h, 1),
            "training_mean_jct_h": round(m.mean_jct_s / 3600, 3),
            "training_finished": m.finished, "training_unfinished": m.unfinished,
            "training_lost_gpu_h": round(lost, 2),
            "reclaims_with_jobs": self.closings_hit, "jobs_signalled": self.jobs_signalled,
            "jobs_shrunk": self.jobs_shrunk,
            "buffer_replicas": {k: round(v, 2) for k, v in self.planned.buffers.items()},
            "forecast_mae_replicas": {k: round(v, 3) for k, v in self.planned.forecast_mae.items()},
        }


def replay_side(mode: Mode, jobs: Sequence[Any], policy: Any, fabric: Any, sset: ServingSet,
                knobs: ServingKnobs, *, config: Any = None, comm: Any = None,
                expected: dict[str, Expected] | None = None) -> Side:
    """Replay ``jobs`` on ``fabric`` with the daemon's serving step deciding in ``mode`` (the
    serving pools are the last nodes of the fabric: :func:`replay.declare`)."""
    import dataclasses

    from railgang.daemon.sim.engine import EngineConfig, simulate
    from railgang.daemon.sim.metrics import compute

    declared = declare(fabric, sset)
    gpn = fabric.facts(declared[0].nodes[0]).gpus
    serving = SimServing(sset, mode, knobs, declared, gpn, expected)
    meter = BusyMeter(serving.window_s)
    replicas = serving.replicas()
    journal = TakeBacks(frozenset(n for d in declared for n in d.nodes),
                        frozenset(r.job_id for r in replicas), serving.window_s)
    both = sorted([*replicas, *jobs], key=lambda j: j.submit_time)  # stable: replicas first
    def observe(now: float, backend: Any) -> None:
        meter(now, backend)
        serving.observe(now, backend)

    run = simulate(both, policy, fabric, config=config or EngineConfig(), comm=comm,
                   observer=observe, capacity=serving, journal=journal)
    names = {r.job_id for r in replicas}
    records = [r for r in run.records if r.job_id not in names]
    total = sum(fabric.facts(n).gpus for n in fabric.nodes)
    unfinished = {k: v for k, v in run.unfinished_reasons.items() if k not in names}
    run = dataclasses.replace(run, records=records, metrics=compute(records, total),
                              unfinished_reasons=unfinished)
    return Side(mode, serving.planned(), run, meter.close() / 3600, total, len(journal.hit),
                journal.stopped, journal.shrunk)


def compare(jobs: Sequence[Any], policy: Any, fabric: Any, sset: ServingSet, knobs: ServingKnobs,
            modes: Sequence[Mode] = ("static", "forecast"), **kw: Any) -> list[Side]:
    """One side per mode; the forecast is made once for all of them."""
    expected = expect(sset, knobs) if any(m != "static" for m in modes) else None
    return [replay_side(mode, jobs, policy, fabric, sset, knobs, expected=expected, **kw)
            for mode in modes]


def table(sides: Sequence[Side]) -> list[str]:
    """The report as text lines, one column per mode."""
    rows = [s.row() for s in sides]
    first = sides[0]
    lines = [f"serving beside training: {first.total_gpus} GPUs, serving pool "
             f"{sum(t.deployment.pool_gpus for t in first.planned.timelines)} GPUs, window "
             f"{first.planned.window_s / 86400:.2f} days"]
    spec = [("utilisation", "utilisation", "{:.1%}"),
            ("serving demand unmet (replica-min)", "serving_unmet_replica_min", "{:,.0f}"),
            ("  share of demand-minutes", "serving_unmet_share", "{:.3%}"),
            ("replicas started late", "serving_late_replicas", "{}"),
            ("reactive starts (unforecast)", "serving_reactive_starts", "{}"),
            ("GPU-h lent to training", "lent_gpu_h", "{:,.0f}"),
            ("training GPU-h in the window", "training_gpu_h", "{:,.0f}"),
            ("training mean JCT (h)", "training_mean_jct_h", "{:.2f}"),
            ("training jobs finished", "training_finished", "{}"),
            ("training GPU-h lost (all kills)", "training_lost_gpu_h", "{:,.1f}"),
            ("take-backs that hit jobs", "reclaims_with_jobs", "{}"),
            ("elastic borrowers shrunk instead", "jobs_shrunk", "{}")]
    lines.append(f"{'':<36}" + "".join(f"{r['mode']:>14}" for r in rows))
    for label, key, fmt in spec:
        lines.append(f"{label:<36}" + "".join(f"{fmt.format(r[key]):>14}" for r in rows))
    for r in rows[1:]:
        gained = r["training_gpu_h"] - rows[0]["training_gpu_h"]
        lines.append(f"training GPU-h gained ({r['mode']} vs {rows[0]['mode']}): {gained:,.0f}")
    for s in sides:
        if s.planned.buffers:
            buf = ", ".join(f"{k} {v:.1f}" for k, v in s.planned.buffers.items())
            lines.append(f"{s.mode}: buffer (replicas) {buf}")
    return lines


__all__ = ["Side", "compare", "replay_side", "table"]
