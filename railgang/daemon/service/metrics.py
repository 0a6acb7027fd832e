"""Prometheus metrics of the daemon, on a registry of its own (served at ``/metrics``).

=====================================  =========  =============================================
name                                   type       labels / meaning
=====================================  =========  =============================================
railgang_build_info                    gauge      ``version``, ``python``, ``component``: 1
railgang_cycle_phase_seconds           histogram  ``phase``: snapshot, reconcile, the core's
                                                  phases, journal, apply, record (no total:
                                                  the phases sum to about the cycle)
railgang_cycle_seconds                 histogram  one whole cycle, end to end
railgang_cycles_total                  counter    ``result``: ok | error
railgang_slurm_schema_errors_total     counter    ``command``: squeue | sinfo: cycles failed on
                                                  JSON of a schema railgang does not read
railgang_last_cycle_timestamp_seconds  gauge      end of the last successful cycle (epoch)
railgang_pending_jobs                  gauge      ``reason``: the core's reason code
railgang_running_jobs                  gauge      jobs running at the start of the cycle
railgang_actions_total                 counter    ``kind``, ``result``: applied | failed |
                                                  abandoned
railgang_leaf_gpus                     gauge      ``leaf``, ``state``: allocated | free
railgang_leader                        gauge      1 while this process holds the leader lock
railgang_heartbeat_timestamp_seconds   gauge      when the heartbeat file was last written
                                                  (epoch; job_submit.lua's leases need it fresh)
railgang_lease_seconds                 gauge      the lease a heartbeat grants (slurm.lease_s)
railgang_lease_renewals_total          counter    ``result``: renewed | refused
railgang_nodes                         gauge      ``state``: idle | mixed | alloc | drain | down
                                                  (a usable node's by its GPUs allocated)
                                                  (as observed at the cycle's start)
railgang_account_gpus                  gauge      ``account``: GPUs its running jobs hold
railgang_account_pending_jobs          gauge      ``account``: jobs waiting
railgang_account_oldest_wait_seconds   gauge      ``account``: the longest wait of a pending job
railgang_account_quota_gpus            gauge      ``account``, ``kind``: guaranteed | limit (the
                                                  quota tree; only accounts that have one)
railgang_report_last_timestamp_seconds gauge      newest whole-day report under report.dir
                                                  (epoch of its files; 0 when none; today's
                                                  so far is left out)
railgang_ledger_watermark_timestamp_seconds
                                       gauge      ``source``: sacct | telemetry: how far the
                                                  ledger has read it (epoch; 0 before the first
                                                  read)
railgang_ledger_reads_total            counter    ``source``, ``result``: ok | error: the
                                                  daemon's scheduled ledger reads
railgang_nodes_out                     gauge      ``state``: drain | down, ``owner``: whose
                                                  reason (railgang | slurm | other | none, by
                                                  its words: failures/respond.py ``whose``);
                                                  CLI backend, from each cycle's sinfo read
railgang_waiting_jobs_fitting_free_gpus
                                       gauge      pending jobs that would fit on GPUs free now
                                                  (``jobs_fitting_free``) and that no quota
                                                  holds back
railgang_link_ports                    gauge      ``status``: healthy | congested | lame |
                                                  unknown (last interval's verdict)
railgang_link_quarantined_ports        gauge      ports held in quarantine (hysteresis applied)
railgang_link_quarantined_nodes        gauge      nodes the link health quarantines
railgang_link_port_factor              gauge      ``host``, ``device``, ``port``: effective /
                                                  nominal bandwidth, only ports below 1
railgang_link_changes_total            counter    ``change``: quarantined | released
railgang_link_scrape_seconds           histogram  one collection round over every host
railgang_link_scrape_errors_total      counter    hosts that could not be read, bad values
=====================================  =========  =============================================
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server
from prometheus_client import Counter as PromCounter

from railgang.daemon.build_info import register_build_info
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.model.snapshot import NodeState, Snapshot

if TYPE_CHECKING:
    from railgang.daemon.service.links import LinkRound

# from 1 ms to about 30 s: a core phase at small scale up to a slow Slurm call at large scale
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class DaemonMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        register_build_info(r, "daemon")
        self.phase = Histogram("railgang_cycle_phase_seconds", "Cycle time by phase",
                               ["phase"], buckets=BUCKETS, registry=r)
        self.cycle = Histogram("railgang_cycle_seconds", "One whole cycle", buckets=BUCKETS,
                               registry=r)
        self.cycles = PromCounter("railgang_cycles", "Cycles run", ["result"], registry=r)
        self.last_cycle = Gauge("railgang_last_cycle_timestamp_seconds",
                                "End of the last successful cycle (epoch seconds)", registry=r)
        self.pending = Gauge("railgang_pending_jobs", "Pending jobs by the core's reason",
                             ["reason"], registry=r)
        self.running = Gauge("railgang_running_jobs", "Running jobs", registry=r)
        self.actions = PromCounter("railgang_actions", "Actions by kind and result",
                                   ["kind", "result"], registry=r)
        self.leaf_gpus = Gauge("railgang_leaf_gpus", "GPUs per leaf switch",
                               ["leaf", "state"], registry=r)
        self.leader = Gauge("railgang_leader", "1 while this process is the leader", registry=r)
        self.heartbeat = Gauge("railgang_heartbeat_timestamp_seconds",
                               "When the heartbeat file was last written (epoch)", registry=r)
        self.lease = Gauge("railgang_lease_seconds", "Lease a heartbeat grants", registry=r)
        self.renewals = PromCounter("railgang_lease_renewals", "Begin-time lease renewals",
                                    ["result"], registry=r)
        self.nodes = Gauge("railgang_nodes", "Nodes by observed state", ["state"], registry=r)
        self.account_gpus = Gauge("railgang_account_gpus", "GPUs held by an account's jobs",
                                  ["account"], registry=r)
        self.account_pending = Gauge("railgang_account_pending_jobs", "Jobs waiting per account",
                                     ["account"], registry=r)
        self.account_wait = Gauge("railgang_account_oldest_wait_seconds",
                                  "Longest wait of a pending job per account", ["account"],
                                  registry=r)
        self.account_quota = Gauge("railgang_account_quota_gpus", "Quota of an account",
                                   ["account", "kind"], registry=r)
        self.report_last = Gauge("railgang_report_last_timestamp_seconds",
                                 "Newest report written under report.dir (epoch)", registry=r)
        self._alert_inputs(r)
        self.link_ports = Gauge("railgang_link_ports", "IB ports by last verdict", ["status"],
                                registry=r)
        self.link_q_ports = Gauge("railgang_link_quarantined_ports", "IB ports in quarantine",
                                  registry=r)
        self.link_q_nodes = Gauge("railgang_link_quarantined_nodes",
                                  "Nodes quarantined by link health", registry=r)
        self.link_factor = Gauge("railgang_link_port_factor",
                                 "Effective/nominal bandwidth of degraded IB ports",
                                 ["host", "device", "port"], registry=r)
        self.link_changes = PromCounter("railgang_link_changes", "Port quarantines and releases",
                                        ["change"], registry=r)
        self.link_scrape = Histogram("railgang_link_scrape_seconds", "One link collection round",
                                     buckets=BUCKETS, registry=r)
        self.link_errors = PromCounter("railgang_link_scrape_errors",
                                       "Hosts not read and bad counter values", registry=r)
        self.schema_errors = PromCounter("railgang_slurm_schema_errors",
                                         "Cycles failed on Slurm JSON of an unknown schema",
                                         ["command"], registry=r)
        # issue 19: replicas the reactive path started for demand the forecast did not hold
        self.serving_unforecast = PromCounter(
            "railgang_serving_unforecast_replicas",
            "Serving replicas started for demand above the forecast (the reactive path)",
            ["deployment"], registry=r)
        self.serving_replicas = Gauge("railgang_serving_replicas",
                                      "Serving replicas by deployment and kind (target, want, "
                                      "running, queued)", ["deployment", "kind"], registry=r)
        self.serving_lent = Gauge("railgang_serving_lent_nodes",
                                  "Serving-pool nodes lent to preemptible work", ["deployment"],
                                  registry=r)
        for command in ("squeue", "sinfo"):  # a series from the first scrape on, for alerts
            self.schema_errors.labels(command).inc(0)
        for reason in Reason:  # every reason is a series from the first scrape on
            self.pending.labels(reason.value).set(0)
        self._server: Any = None

    def _alert_inputs(self, r: CollectorRegistry) -> None:
        """The series issue 36 item 4's alerts read (deploy/prometheus/alerts.yml)."""
        self.ledger_mark = Gauge("railgang_ledger_watermark_timestamp_seconds",
                                 "How far the ledger has read a source (epoch; 0 before the "
                                 "first read)", ["source"], registry=r)
        self.ledger_reads = PromCounter("railgang_ledger_reads",
                                        "Scheduled ledger reads by source and result",
                                        ["source", "result"], registry=r)
        for source in ("sacct", "telemetry"):  # series from the first scrape on, for alerts
            self.ledger_mark.labels(source).set(0)
            for result in ("ok", "error"):
                self.ledger_reads.labels(source, result).inc(0)
        self.nodes_out = Gauge("railgang_nodes_out", "Drained and down nodes by whose reason",
                               ["state", "owner"], registry=r)
        self.fitting = Gauge("railgang_waiting_jobs_fitting_free_gpus",
                             "Pending jobs that would fit on the GPUs free now", registry=r)

    def observe_serving(self, before: Any, status: Any) -> None:
        """A serving step's statuses (``serving/controller.py``); ``before``: the previous ones."""
        last = {st.deployment: st.unforecast for st in before}
        for st in status:
            self.serving_unforecast.labels(st.deployment).inc(
                max(0, st.unforecast - last.get(st.deployment, 0)))
            for kind in ("target", "want", "running", "queued"):
                self.serving_replicas.labels(st.deployment, kind).set(getattr(st, kind))
            self.serving_lent.labels(st.deployment).set(len(st.lent))

    def watch_reports(self, root: Path | None) -> None:
        """Read the newest report's time from ``root`` at every scrape (0 without reports)."""
        self.report_last.set_function(lambda: newest_report(root))

    def ledger_read(self, source: str, ok: bool, watermark: datetime | None) -> None:
        """A scheduled ledger read (``ledger/feed.py``) ended; ``watermark``: where it stands."""
        self.ledger_reads.labels(source, "ok" if ok else "error").inc()
        if watermark is not None:
            self.ledger_mark.labels(source).set(watermark.timestamp())

    def observe_nodes_out(self, nodes: Iterable[Any]) -> None:
        """Drained and down nodes of one sinfo read (``SinfoNode``) by whose reason they carry."""
        from railgang.daemon.failures.respond import NodeView, whose

        out: Counter[tuple[str, str]] = Counter()
        for n in nodes:
            state = str(n.state.value)
            if state in ("drain", "down"):
                # by its words alone: sinfo's setter needs SlurmUser to read (failures/respond.py)
                out[(state, whose(NodeView(n.name, state, n.reason)) or "none")] += 1
        self.nodes_out.clear()
        for state in ("drain", "down"):  # both series from the first read on, for alerts
            for owner in ("railgang", "slurm", "other", "none"):
                self.nodes_out.labels(state, owner).set(out.get((state, owner), 0))

    def beat(self, now: float, lease_s: int, renewed: int, refused: int) -> None:
        """The heartbeat file was written at ``now``; this cycle renewed/refused leases."""
        self.heartbeat.set(now)
        self.lease.set(lease_s)
        self.renewals.labels("renewed").inc(renewed)
        self.renewals.labels("refused").inc(refused)

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``host:port`` (0 = any free port); returns the port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def observe_cycle(self, timings_ms: Mapping[str, float], reasons: Counter[str],
                      running: int, actions: Counter[tuple[str, str]],
                      snapshot: Snapshot | None, finished_at: float) -> None:
        for phase, ms in timings_ms.items():
            if phase == "total":  # its own metric: a sum over phases must not count it twice
                self.cycle.observe(ms / 1e3)
            else:
                self.phase.labels(phase).observe(ms / 1e3)
        for reason in Reason:
            self.pending.labels(reason.value).set(reasons.get(reason.value, 0))
        self.running.set(running)
        for (kind, result), n in actions.items():
            self.actions.labels(kind, result).inc(n)
        if snapshot is not None:
            for (leaf, state), n in leaf_gpus(snapshot).items():
                self.leaf_gpus.labels(leaf, state).set(n)
            self._observe_accounts(snapshot)
        self.cycles.labels("ok").inc()
        self.last_cycle.set(finished_at)


    def _observe_accounts(self, snapshot: Snapshot) -> None:
        """Nodes by state, and per account: GPUs held, jobs waiting, longest wait, quota."""
        states = Counter(gpu_state(n.state, n.gpus, len(snapshot.free.get(name, ())))
                         for name, n in snapshot.nodes.items())
        self.nodes.clear()
        for state, n in states.items():
            self.nodes.labels(state).set(n)
        self.fitting.set(jobs_fitting_free(snapshot))
        held: Counter[str] = Counter()
        for rj in snapshot.running.values():
            held[rj.job.account] += rj.gpus
        waiting: Counter[str] = Counter()
        oldest: dict[str, float] = {}
        for job in snapshot.pending:
            waiting[job.account] += 1
            wait = max(0.0, snapshot.now - job.submit_time)
            oldest[job.account] = max(oldest.get(job.account, 0.0), wait)
        for gauge in (self.account_gpus, self.account_pending, self.account_wait):
            gauge.clear()  # accounts that left drop out instead of keeping their last value
        for account in {*held, *waiting, *snapshot.accounts}:
            self.account_gpus.labels(account).set(held.get(account, 0))
            self.account_pending.labels(account).set(waiting.get(account, 0))
            self.account_wait.labels(account).set(oldest.get(account, 0.0))
        self.account_quota.clear()
        if snapshot.quotas is not None:
            for name, q in snapshot.quotas.nodes.items():
                self.account_quota.labels(name, "guaranteed").set(q.guaranteed)
                if q.limit is not None:
                    self.account_quota.labels(name, "limit").set(q.limit)


def jobs_fitting_free(snapshot: Snapshot) -> int:
    """Pending jobs whose smallest size fits on the GPUs free now: on one node's free GPUs, or
    on wholly free nodes for a job larger than a node; not one that its account's quota (flat,
    or the quota tree's limit) holds back. GPU type and other needs are not weighed: the alert
    on it waits long enough for a job that the placement rightly keeps waiting to be looked at.
    """
    most_on_one, whole = 0, 0
    for name, node in snapshot.nodes.items():
        if not node.state.usable:
            continue
        free = len(snapshot.free.get(name, ()))
        most_on_one = max(most_on_one, free)
        whole += node.gpus if free >= node.gpus > 0 else 0
    if most_on_one == 0:
        return 0
    held: Counter[str] = Counter()
    for rj in snapshot.running.values():
        held[rj.job.account] += rj.gpus
    n = 0
    for job in snapshot.pending:
        size = job.min_gpus
        if size <= 0 or not (size <= most_on_one or size <= whole):
            continue
        acct = snapshot.accounts.get(job.account)
        flat = acct.quota_gpus if acct is not None else None
        tree = snapshot.quotas.nodes.get(job.account) if snapshot.quotas is not None else None
        limit = tree.limit if tree is not None else None
        if any(q is not None and held[job.account] + size > q for q in (flat, limit)):
            continue
        n += 1
    return n


def newest_report(root: Path | None) -> float:
    """Modification time of the newest ``<root>/<day>/`` report folder (0: none), today's so
    far left out: rebuilt hourly, it would hide a nightly report that failed."""
    if root is None or not root.is_dir():
        return 0.0
    from railgang.daemon.report.nightly import whole_day

    try:
        return max((p.stat().st_mtime for p in root.iterdir() if p.is_dir() and whole_day(p)),
                   default=0.0)
    except OSError:
        return 0.0


def observe_links(metrics: DaemonMetrics, result: LinkRound) -> None:
    """Publish one link collection round (series of ports back at full speed are dropped)."""
    counts = dict.fromkeys(("healthy", "congested", "lame", "unknown"), 0)
    for p in result.ports:
        counts[p.verdict] += 1
    for status, n in counts.items():
        metrics.link_ports.labels(status).set(n)
    metrics.link_q_ports.set(sum(p.quarantined for p in result.ports))
    metrics.link_q_nodes.set(len(result.health.quarantined))
    metrics.link_factor.clear()
    for p in result.ports:
        if p.factor < 1.0:
            metrics.link_factor.labels(p.key.host, p.key.device, str(p.key.port)).set(p.factor)
    for c in result.changes:
        metrics.link_changes.labels("quarantined" if c.quarantined else "released").inc()
    metrics.link_scrape.observe(result.seconds)
    metrics.link_errors.inc(len(result.errors))


def gpu_state(state: NodeState, gpus: int, free: int) -> str:
    """A usable node's state by its GPUs (idle: none allocated, alloc: all, else mixed): Slurm
    calls a node whose GPUs are all taken idle or mixed by its CPUs, and the simulator keeps the
    state it started with; drain and down stay as observed."""
    if not state.usable or gpus <= 0:
        return str(state.value)
    return "idle" if free >= gpus else "alloc" if free <= 0 else "mixed"


def leaf_gpus(snapshot: Snapshot) -> dict[tuple[str, str], int]:
    """``(leaf, allocated|free) -> GPUs`` as observed (drained and down nodes count as neither)."""
    leaf_of = getattr(snapshot.fabric, "leaf_of", None)
    out: dict[tuple[str, str], int] = {}
    for name, node in snapshot.nodes.items():
        if not node.state.usable:
            continue
        leaf = leaf_of(name) if callable(leaf_of) and name in snapshot.fabric else "-"
        free = len(snapshot.free.get(name, ()))
        out[(leaf, "free")] = out.get((leaf, "free"), 0) + free
        out[(leaf, "allocated")] = out.get((leaf, "allocated"), 0) + node.gpus - free
    return out


__all__ = ["BUCKETS", "DaemonMetrics", "gpu_state", "jobs_fitting_free", "leaf_gpus", "newest_report",
           "observe_links"]
