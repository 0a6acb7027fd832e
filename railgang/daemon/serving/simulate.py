"""Static vs dynamic: the training trace replayed beside the serving plan, and the report
(``railgang sim --serving FILE``; ``replay.py`` has the pieces and what they model)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from railgang.daemon.serving.model import ServingSet
from railgang.daemon.serving.plan import Mode
from railgang.daemon.serving.replay import (
    BusyMeter,
    Expected,
    LentNodes,
    Planned,
    ServingKnobs,
    expect,
    plan_window,
    serving_nodes,
)


@dataclass(frozen=True, slots=True)
class Side:
    """One replay of the boundary: serving's plan and training's replay beside it."""

    mode: str
    planned: Planned
    run: Any  # the engine's RunResult
    training_gpu_h: float  # GPU-hours training held inside the window
    total_gpus: int
    closings_hit: int  # serving nodes taken back while training jobs ran there
    jobs_signalled: int
    jobs_shrunk: int = 0  # elastic borrowers that shrank off a closing node instead

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
    """Plan serving in ``mode`` and replay ``jobs`` on ``fabric`` beside it (the serving pool is
    the last nodes of the fabric: :func:`replay.serving_nodes`)."""
    from railgang.daemon.sim.engine import EngineConfig, simulate

    planned = plan_window(sset, mode, knobs, expected)
    nodes = serving_nodes(fabric, sset.pool_gpus)
    gpn = fabric.facts(nodes[0]).gpus
    lent = LentNodes(nodes, gpn, planned.lent_gpus, knobs.step_s, knobs.notice_s,
                     origin=min((j.submit_time for j in jobs), default=0.0),
                     core_rules=knobs.core_rules, lend_rigid=knobs.lend_rigid)
    meter = BusyMeter(planned.window_s)
    run = simulate(jobs, policy, fabric, config=config or EngineConfig(), comm=comm,
                   observer=meter, capacity=lent)
    total = sum(fabric.facts(n).gpus for n in fabric.nodes)
    return Side(mode, planned, run, meter.close() / 3600, total, lent.taken, lent.signalled,
                lent.shrunk)


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
