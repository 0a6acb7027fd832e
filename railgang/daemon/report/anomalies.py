"""Run every detector over one day's inputs: the fleet-level ones over the ledger's aggregates,
the GPU-level ones over each job's own GPUs, cut to the segments the job held them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

import numpy as np

from railgang.daemon.report import detectors as det
from railgang.daemon.report.capacity import seg_gpus
from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.data import ReportInputs
from railgang.daemon.report.model import AnomalyGroup, TeamRow
from railgang.daemon.report.series import GpuSeries


def job_series(inputs: ReportInputs, sizes: dict[str, int]) -> dict[int, list[GpuSeries]]:
    """job pk -> the samples of each GPU it held, during the segments it held them."""
    out: dict[int, list[GpuSeries]] = defaultdict(list)
    for seg in inputs.segments:
        held = seg_gpus(seg, sizes)
        if held is None:
            continue
        lo = max(seg.start, inputs.since)
        hi = min(seg.end if seg.end is not None else inputs.now, inputs.until)
        for node, idx in held.items():
            for i in idx:
                s = inputs.gpus.get(f"{node}:{i}")
                if s is not None:
                    part = s.slice(lo, hi)
                    if len(part):
                        out[seg.job_pk].append(part)
    return dict(out)


def fleet_anomalies(inputs: ReportInputs, series: Mapping[str, list[float]],
                    settings: ReportSettings) -> list[det.Anomaly]:
    th = settings.thresholds
    out: list[det.Anomaly] = []
    today = {r["team"]: r["gpu_seconds"] / 3600 for r in inputs.usage_team}
    out += det.team_surges(today, inputs.history, th)
    arrivals = [j.submitted for j in inputs.queue if inputs.since <= j.submitted < inputs.until]
    starts = [j.first_start for j in inputs.queue if j.first_start is not None]
    out += det.queue_growth(arrivals, starts, inputs.since, inputs.until, th)
    if series.get("t"):
        out += det.fleet_drops(series["t"], series["util_pct"], th, what="utilisation")
        if any(v == v for v in series["power_w"]):
            out += det.fleet_drops(series["t"], series["power_w"], th, what="power",
                                   unit="W/GPU")
    guaranteed = {team: g for team, (g, _lim, _dept) in inputs.accounts.items()}
    out += det.idle_reservations(guaranteed, inputs.used_recent, inputs.recent_span_s, th,
                                 until=inputs.until)
    return out


def job_anomalies(inputs: ReportInputs, sizes: dict[str, int],
                  settings: ReportSettings, fleet: Collection[str] = ()) -> list[det.Anomaly]:
    """``fleet``: the GPU types the fleet has (the report's pools); suggestions stay among them."""
    th = settings.thresholds
    catalogue = {k.lower(): v for k, v in settings.gpu_memory_gib.items()}
    per_job = job_series(inputs, sizes)
    first: dict[int, tuple[str, str, str, int]] = {}
    for seg in inputs.segments:
        first.setdefault(seg.job_pk, (seg.job, seg.team, seg.gpu_type,
                                      len(seg.nodes.split(",")) if seg.nodes else 0))
    out: list[det.Anomaly] = []
    for pk, series in sorted(per_job.items()):
        job, team, gpu_type, _ = first[pk]
        for found in (det.detect_zombie(job, team, series, th),
                      det.detect_starvation(job, team, series, th)):
            if found is not None:
                out.append(found)
        mems = [float(np.max(s.mem_mib)) for s in series if s.mem_mib is not None]
        if mems:
            at = float(min(s.t[0] for s in series))
            totals = [s.mem_total_mib for s in series if s.mem_total_mib]
            found = det.detect_overspec(job, team, at, gpu_type, max(mems), catalogue, th,
                                        total_mib=totals[0] if totals else None,
                                        fleet=fleet)
            if found is not None:
                out.append(found)
    for pk, (ts, step, compute) in sorted(inputs.steps.items()):
        if pk not in first:
            continue
        job, team, _, _ = first[pk]
        nodes = {n for seg in inputs.chains.get(pk, []) for n in _nodes(seg.nodes)}
        found = det.detect_comm_bound(job, team, float(ts[0]), step, compute, th,
                                      nodes=len(nodes))
        if found is not None:
            out.append(found)
    return out


def _nodes(expr: str) -> list[str]:
    from railgang.topology import hostnames

    return list(hostnames.expand(expr))


# what value and threshold are measured in, per kind (shown beside the numbers)
UNITS = {
    "team_surge": "x the team's median day", "queue_growth": "arrivals per start",
    "fleet_util_drop": "fraction below the trailing hour",
    "fleet_power_drop": "fraction below the trailing hour", "zombie": "min",
    "data_starvation": "% SM std-dev", "communication_bound": "x compute time (step / compute)",
    "over_specified": "GiB peak memory", "idle_reservation": "fraction of the guarantee used",
}


def priced(anomalies: list[det.Anomaly], inputs: ReportInputs,
           teams: Sequence[TeamRow]) -> list[det.Anomaly]:
    """Each finding with its unit and what is at stake in the rates' currency: a job's
    findings the job's cost in the window; a surge the team's showback; an idle reservation
    what the team pays for guarantee it did not use (chargeback - showback); fleet and queue
    findings are not priced (None)."""
    job_cost = {r["job"]: float(r["cost"]) for r in inputs.usage_job}
    by_team = {t.team: t for t in teams}
    out = []
    for a in anomalies:
        cost: float | None = None
        if a.kind in ("zombie", "data_starvation", "communication_bound", "over_specified"):
            cost = job_cost.get(a.subject)
        elif a.kind == "team_surge" and a.subject in by_team:
            cost = by_team[a.subject].showback
        elif a.kind == "idle_reservation" and a.subject in by_team:
            t = by_team[a.subject]
            cost = max(0.0, t.chargeback - t.showback)
        out.append(replace(a, unit=UNITS.get(a.kind, ""),
                           cost=None if cost is None else round(cost, 2)))
    return out


def ordered(anomalies: list[det.Anomaly]) -> list[det.Anomaly]:
    """Costliest first; unpriced findings after them, by kind."""
    rank = {k: i for i, k in enumerate(det.KINDS)}
    return sorted(anomalies, key=lambda a: (a.cost is None, -(a.cost or 0.0),
                                            rank.get(a.kind, 99), a.subject, a.at or 0))


def grouped(anomalies: Sequence[det.Anomaly]) -> list[AnomalyGroup]:
    """One row per kind and team (fleet findings: per kind), with how many findings it holds,
    ranked by what is at stake in all of them, then by count: a month of findings reads as a
    page, not hundreds of rows (the rows stay in ``anomalies``). Each group shows its costliest
    finding (the first of ``anomalies`` as :func:`ordered` sorts them)."""
    rank = {k: i for i, k in enumerate(det.KINDS)}
    groups: dict[tuple[str, str | None], list[det.Anomaly]] = {}
    for a in ordered(list(anomalies)):
        groups.setdefault((a.kind, a.team), []).append(a)
    out = []
    for (kind, team), items in groups.items():
        costs = [a.cost for a in items if a.cost is not None]
        ats = [a.at for a in items if a.at is not None]
        top = items[0]
        out.append(AnomalyGroup(
            kind=kind, team=team, count=len(items),
            cost=round(sum(costs), 2) if costs else None, unit=top.unit, detail=top.detail,
            suggestion=top.suggestion, subjects=[a.subject for a in items],
            first_at=min(ats) if ats else None, last_at=max(ats) if ats else None))
    return sorted(out, key=lambda g: (g.cost is None, -(g.cost or 0.0), -g.count,
                                      rank.get(g.kind, 99), g.team or ""))


__all__ = ["UNITS", "fleet_anomalies", "grouped", "job_anomalies", "job_series", "ordered",
           "priced"]
