"""Build the daily report from its inputs (pure: no database, no clock, no files).

Recipe: 1. per team: the three utilisation tiers (R-Q5) against the guarantee, showback and
chargeback; 2. top jobs; 3. per pool: utilisation, fragmentation index and stranded capacity;
4. queue depth and wait per priority class; 5. cost of chaos (preemptions, resizes, spot
interruptions, restarts after a fault, from the ledger's segment chains and node states); 6. fleet series for the charts; 7. anomalies.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import pairwise

import numpy as np

from railgang.daemon.report.anomalies import (
    fleet_anomalies,
    grouped,
    job_anomalies,
    ordered,
    priced,
)
from railgang.daemon.report.capacity import (
    fragmentation,
    node_sizes,
    peak_allocation,
    pool_nodes,
)
from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.data import ReportInputs, Seg
from railgang.daemon.report.detectors import bin_series
from railgang.daemon.report.inventory import (
    Inventory,
    down_starts,
    ended_by_fault,
    inventory,
    unavailable_nodes,
)
from railgang.daemon.report.model import (
    CLASS_NAMES,
    Chaos,
    ClassRow,
    JobRow,
    PoolRow,
    Report,
    TeamRow,
    Trend,
)
from railgang.daemon.report.people import ended_rows, team_waits, trend, user_rows
from railgang.daemon.report.sreport import capacity_split
from railgang.topology import hostnames
from railgang.topology.fabric import Fabric
from railgang.topology.tiers import Capacity


def _h(gpu_s: float | None) -> float | None:
    return None if gpu_s is None else round(gpu_s / 3600, 3)


def _pct(part: float | None, whole: float) -> float | None:
    return None if part is None or whole <= 0 else round(100 * part / whole, 2)


def team_rows(inputs: ReportInputs) -> list[TeamRow]:
    hours = (inputs.until - inputs.since) / 3600
    used_type: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for seg in inputs.segments:
        used_type[seg.team][seg.gpu_type] += seg.gpus
    reserved = sorted(v for (_, cap), v in inputs.rates.items() if cap == Capacity.RESERVED)
    rows = []
    by_team = {r["team"]: r for r in inputs.usage_team}
    for team in sorted(set(by_team) | set(inputs.accounts)):
        r = by_team.get(team, {"gpu_seconds": 0, "compute_gpu_seconds": None,
                               "productive_gpu_seconds": None, "cost": 0.0,
                               "unpriced_gpu_seconds": 0})
        g, lim, dept = inputs.accounts.get(team, (None, None, None))
        quota = None if not g else g * hours
        alloc = r["gpu_seconds"] / 3600
        types = used_type.get(team)
        main = max(sorted(types), key=lambda k: types[k]) if types else None
        rate = inputs.rates.get((main, Capacity.RESERVED)) if main else None
        if rate is None and reserved:
            rate = reserved[0]
        floor = (g or 0) * hours * (rate or 0.0)
        rows.append(TeamRow(team, dept, g, lim, None if quota is None else round(quota, 3),
                            round(alloc, 3), _h(r["compute_gpu_seconds"]),
                            _h(r["productive_gpu_seconds"]),
                            None if not quota else round(100 * alloc / quota, 2),
                            round(r["cost"], 2), round(max(r["cost"], floor), 2),
                            _h(r["unpriced_gpu_seconds"]) or 0.0))
    return rows


def top_jobs(inputs: ReportInputs, n: int) -> list[JobRow]:
    last: dict[str, Seg] = {}
    for seg in inputs.segments:
        last[seg.job] = seg
    rows = sorted(inputs.usage_job, key=lambda r: (-r["gpu_seconds"], r["job"]))[:n]
    out = []
    for r in rows:
        g = last.get(r["job"])
        if g is None:
            continue
        gs = r["gpu_seconds"]
        out.append(JobRow(r["job"], g.team, g.user, g.gpus, g.gpu_type, round(gs / 3600, 3),
                          _pct(r["compute_gpu_seconds"], gs), _pct(r["productive_gpu_seconds"], gs),
                          round(r["cost"], 2)))
    return out


def fleet_inventory(inputs: ReportInputs, sizes: dict[str, int]) -> Inventory:
    """Every node known to the ledger (``inventory``): node_states, then telemetry."""
    seen: dict[str, int] = {}
    for key in inputs.gpus:
        node, _, gpu = key.rpartition(":")
        seen[node] = max(seen.get(node, 0), int(gpu) + 1, sizes.get(node, 0))
    return inventory(inputs.nodes, seen, pool_nodes(inputs.segments))


def pool_rows(inputs: ReportInputs, settings: ReportSettings, sizes: dict[str, int],
              fabric: Fabric | None) -> tuple[list[PoolRow], list[str]]:
    """One row per pool of the fleet (idle pools too), sized from the whole inventory."""
    notes: list[str] = []
    hours = (inputs.until - inputs.since) / 3600
    inv = fleet_inventory(inputs, sizes)
    sizes = {**sizes, **inv.gpus_of}
    used = {r["gpu_type"]: r for r in inputs.usage_pool}
    rows = []
    for pool in sorted(set(used) | set(inv.source) | set(settings.pool_gpus)):
        r = used.get(pool, {"gpu_type": pool, "gpu_seconds": 0, "compute_gpu_seconds": None,
                            "productive_gpu_seconds": None})
        segs = [g for g in inputs.segments if g.gpu_type == pool]
        nodes = sorted(set(inv.nodes_of(pool)) |
                       set(pool_nodes(segs).get(pool, [])))
        if pool in settings.pool_gpus:
            gpus, source = settings.pool_gpus[pool], "config"
        elif pool in inv.source:
            gpus, source = sum(sizes.get(n, 0) for n in nodes), inv.source[pool]
        else:
            gpus, source = peak_allocation(segs, inputs.since, inputs.until), "peak allocation"
            notes.append(f"pool {pool}: size unknown (set report.pool_gpus); utilisation is "
                         "against its peak allocation")
        frag, stranded = fragmentation(segs, nodes, sizes, inputs.queue, inputs.since,
                                       inputs.until, settings.fragmentation_samples, fabric)
        alloc = r["gpu_seconds"]
        cap = gpus * hours * 3600
        rows.append(PoolRow(pool, gpus, source, round(alloc / 3600, 3),
                            _pct(alloc, cap) or 0.0, _pct(r["compute_gpu_seconds"], cap),
                            _pct(r["productive_gpu_seconds"], cap),
                            None if frag is None else round(frag, 4),
                            None if stranded is None else round(stranded, 3),
                            len(nodes) if source in ("inventory", "telemetry") else 0))
    return rows, notes


def _q(values: Sequence[float], q: float) -> float | None:
    return None if not values else round(float(np.percentile(values, q)), 1)


def queue_rows(inputs: ReportInputs, t: np.ndarray) -> tuple[list[ClassRow],
                                                           dict[str, list[float]]]:
    rows, series = [], {}
    for pc in sorted({j.priority_class for j in inputs.queue} | set(CLASS_NAMES)):
        jobs = [j for j in inputs.queue if j.priority_class == pc]
        sub = np.sort(np.array([j.submitted for j in jobs], dtype=np.float64))
        st = np.sort(np.array([j.first_start for j in jobs if j.first_start is not None],
                              dtype=np.float64))
        depth = (np.searchsorted(sub, t, side="right") - np.searchsorted(st, t, side="right"))
        waits = [j.first_start - j.submitted for j in jobs if j.first_start is not None
                 and inputs.since <= j.first_start < inputs.until]
        at_end = sum(1 for j in jobs if j.submitted < inputs.until and
                     (j.first_start is None or j.first_start >= inputs.until))
        name = CLASS_NAMES.get(pc, f"class {pc}")
        series[f"queue_{pc}"] = [float(x) for x in depth]
        rows.append(ClassRow(pc, name, round(float(depth.mean()), 2) if len(depth) else 0.0,
                             int(depth.max()) if len(depth) else 0, at_end, len(waits),
                             _q(waits, 50), _q(waits, 90)))
    return rows, series


def chaos(inputs: ReportInputs, tax_s: float) -> Chaos:
    """A break in a job's chain of segments is a resize (at once, another size), a restart after
    a fault (one of its nodes went down as it ended: ``inventory.ended_by_fault``) or else a
    preemption; the lost work of the last two is estimated at ``tax_s`` per event."""
    pre = res = spot = faults = 0
    lost_h = lost_cost = 0.0
    by_team: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    downs = down_starts(inputs.nodes)
    for chain in inputs.chains.values():
        for a, b in pairwise(chain):
            if a.end is None or not inputs.since <= a.end < inputs.until:
                continue
            t = by_team[a.team]
            if b.start <= a.end + 1 and b.gpus != a.gpus:  # at once, another size: a resize
                res += 1
                t["resizes"] += 1
                continue
            if downs and ended_by_fault(hostnames.expand(a.nodes), a.end, downs):
                faults += 1
                t["fault_restarts"] += 1
            else:
                pre += 1
                t["preemptions"] += 1
            if a.capacity == Capacity.SPOT:
                spot += 1
                t["spot_interruptions"] += 1
            h = a.gpus * tax_s / 3600
            lost_h += h
            t["lost_gpu_h"] += h
            lost_cost += h * inputs.rates.get((a.gpu_type, a.capacity), 0.0)
    return Chaos(pre, res, spot, round(lost_h, 3), round(lost_cost, 2),
                 {k: dict(v) for k, v in sorted(by_team.items())}, faults)


def fleet_series(inputs: ReportInputs, bin_s: int, capacity: int) -> dict[str, list[float]]:
    """Per bin, over the one denominator of the fleet (``capacity`` GPUs): allocated share and
    SM utilisation (the sum of each GPU's mean SM %, a GPU without samples counting 0, over
    the fleet); ``util_pct`` is the mean over the samples (the fleet-drop detector's input) and
    ``power_w`` the mean power per reporting GPU."""
    t = np.arange(inputs.since, inputs.until, bin_s, dtype=np.float64)
    out: dict[str, list[float]] = {"t": [float(x) for x in t]}
    fleet_sm = np.zeros(len(t))
    for gs in inputs.gpus.values():
        idx = ((gs.t - inputs.since) // bin_s).astype(np.int64)
        ok = (idx >= 0) & (idx < len(t))
        sums = np.bincount(idx[ok], weights=gs.sm[ok], minlength=len(t))
        counts = np.bincount(idx[ok], minlength=len(t))
        fleet_sm += np.divide(sums, counts, out=np.zeros(len(t)), where=counts > 0)
    out["fleet_sm_pct"] = [round(float(x) / capacity, 2) if capacity else 0.0
                           for x in fleet_sm]
    if inputs.gpus:
        allt = np.concatenate([s.t for s in inputs.gpus.values()])
        sm = np.concatenate([s.sm for s in inputs.gpus.values()])
        pw = np.concatenate([s.power_w if s.power_w is not None else np.full(len(s), np.nan)
                             for s in inputs.gpus.values()])
        bt, bu = bin_series(allt, sm, bin_s)
        _, bp = bin_series(allt, pw, bin_s)
        idx = np.searchsorted(t, bt)
        util = np.full(len(t), np.nan)
        power = np.full(len(t), np.nan)
        ok = idx < len(t)
        util[idx[ok]] = bu[ok]
        power[idx[ok]] = bp[ok]
        out["util_pct"] = [round(float(x), 2) for x in util]
        out["power_w"] = [round(float(x), 1) for x in power]
    else:
        out["util_pct"] = [float("nan")] * len(t)
        out["power_w"] = [float("nan")] * len(t)
    alloc = np.zeros(len(t))
    for g in inputs.segments:
        end = g.end if g.end is not None else inputs.now
        alloc[(t >= g.start) & (t < end)] += g.gpus
    out["alloc_pct"] = [round(100 * float(a) / capacity, 2) if capacity else 0.0 for a in alloc]
    return out


def team_totals(rows: Sequence[TeamRow]) -> dict[str, float | None]:
    """The teams table's totals row (sums; a tier is None when no team measured it)."""
    def total(values: list[float | None]) -> float | None:
        got = [v for v in values if v is not None]
        return round(sum(got), 3) if got else None

    return {"guaranteed_gpus": total([r.guaranteed_gpus for r in rows]),
            "quota_gpu_h": total([r.quota_gpu_h for r in rows]),
            "allocated_gpu_h": total([r.allocated_gpu_h for r in rows]),
            "compute_gpu_h": total([r.compute_gpu_h for r in rows]),
            "productive_gpu_h": total([r.productive_gpu_h for r in rows]),
            "showback": round(sum(r.showback for r in rows), 2),
            "chargeback": round(sum(r.chargeback for r in rows), 2),
            "unpriced_gpu_h": total([r.unpriced_gpu_h for r in rows])}


def _scoped(t: Trend, teams: frozenset[str] | None) -> Trend:
    if teams is None:
        return t
    return Trend(t.days, t.fleet_gpu_h, t.fleet_pct,
                 {k: v for k, v in t.teams.items() if k in teams})


def build_report(inputs: ReportInputs, settings: ReportSettings, *, date: str,
                 generated_at: datetime, teams: frozenset[str] | None = None,
                 fabric: Fabric | None = None, partial: bool = False) -> Report:
    sizes = node_sizes(inputs.segments, list(inputs.gpus))
    teams_rows = team_rows(inputs)
    pools, notes = pool_rows(inputs, settings, sizes, fabric)
    capacity = sum(p.gpus for p in pools)
    series = fleet_series(inputs, settings.thresholds.fleet_bin_s, capacity)
    queue, qseries = queue_rows(inputs, np.array(series["t"]))
    series.update(qseries)
    fleet_types = [p.pool for p in pools if p.gpus > 0]
    anomalies = fleet_anomalies(inputs, series, settings) + job_anomalies(inputs, sizes,
                                                                         settings, fleet_types)
    anomalies = priced(anomalies, inputs, teams_rows)
    guaranteed = sum(g for g, _lim, _dept in inputs.accounts.values() if g)
    if capacity and guaranteed > capacity:
        notes.append(f"guarantees exceed the fleet: teams hold {guaranteed:,} guaranteed GPUs, "
                     f"the pools have {capacity:,}; not every guarantee can be met at once")
    if teams is not None:  # a team's view: no other team's rows, jobs or anomalies
        teams_rows = [r for r in teams_rows if r.team in teams]
        anomalies = [a for a in anomalies if a.team is None or a.team in teams]
    hours = (inputs.until - inputs.since) / 3600
    alloc = sum(r["gpu_seconds"] for r in inputs.usage_team)
    comp = [r["compute_gpu_seconds"] for r in inputs.usage_team
            if r["compute_gpu_seconds"] is not None]
    prod = [r["productive_gpu_seconds"] for r in inputs.usage_team
            if r["productive_gpu_seconds"] is not None]
    totals: dict[str, float | None] = {
        "capacity_gpu_h": round(capacity * hours, 3), "allocated_gpu_h": round(alloc / 3600, 3),
        "compute_gpu_h": _h(sum(comp)) if comp else None,
        "productive_gpu_h": _h(sum(prod)) if prod else None,
        "allocated_pct": _pct(alloc, capacity * hours * 3600),
        "showback": round(sum(r.showback for r in teams_rows), 2),
        "chargeback": round(sum(r.chargeback for r in teams_rows), 2),
        "jobs": float(len({g.job_pk for g in inputs.segments})),
    }
    split = capacity_split(inputs.nodes, inputs.segments, inputs.since, inputs.until)
    if split is not None:  # as sreport counts it: nodes for the hours they existed (sreport.py)
        totals.update(split.as_totals())
        totals["allocated_pct"] = _pct(alloc, split.capacity * 3600)
    return Report(date=date, since=inputs.since, until=inputs.until,
                  generated_at=generated_at.astimezone(UTC).isoformat(timespec="seconds"),
                  teams_scope=None if teams is None else sorted(teams), totals=totals,
                  teams=teams_rows, top_jobs=top_jobs(inputs, settings.top_jobs), pools=pools,
                  queue=queue, chaos=chaos(inputs, settings.preemption_tax_s),
                  anomalies=ordered(anomalies), anomaly_groups=grouped(anomalies),
                  series=series, notes=notes,
                  currency=inputs.currency, team_totals=team_totals(teams_rows),
                  users=user_rows(inputs, teams), ended=ended_rows(inputs),
                  nodes_down=unavailable_nodes(inputs.nodes, inputs.since, inputs.until),
                  team_waits=[w for w in team_waits(inputs)
                              if teams is None or w.team in teams],
                  trend=_scoped(trend(inputs, capacity), teams), partial=partial)


__all__ = ["build_report", "chaos", "fleet_inventory", "fleet_series", "pool_rows", "queue_rows",
           "team_rows", "team_totals", "top_jobs"]
