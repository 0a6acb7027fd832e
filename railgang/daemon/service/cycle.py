"""One daemon cycle around ``run_cycle``: journal, explanations, leases, heartbeat, metrics, log.

The recipe (each step timed; the log line and ``/metrics`` show the milliseconds):

1. open the cycle row (its id tags every journal entry),
2. ``run_cycle`` with the database journal: observe, reconcile what an earlier cycle left
   ``planned``, renew the begin-time leases of the queue (backends with leases: right after
   observing and before applying, because a Start ends a job's lease and a renewal after it
   would set it again), decide, write ``planned`` + commit, apply, write outcomes + commit,
3. record: per-job explanations (only what changed; with the jobs the backend kept out of the
   queue after Slurm refused their Start, ``slurm/cli/backoff.py``), close the cycle row, prune
   old rows, commit,
4. beat: write the heartbeat file ``EPOCH LEASE_S`` that ``job_submit.lua`` reads,
5. grants: rewrite the class grants file ``job_submit.lua`` reads when the grants in the
   database changed (``service/grants.py``; also when Slurm was unreachable this cycle).

Link health (``service/links.py``, when ``daemon.links.enabled``): step 2 puts the collector's last
LinkHealth into the snapshot (the core tags quarantined nodes and untags repaired ones) and hands
the cycle's fabric back to the collector, which scrapes on its own interval.

Quotas (``service/quotas.py``): before step 2 the quota tree is read from the database and goes
into the snapshot; after step 3 the use-it-or-lose-it review may record proposals (hourly).

A cycle that raises (Slurm or the database unreachable) is logged and counted; its cycle row
keeps the error, nothing half-written is committed, and the next cycle starts by reconciling.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from railgang.daemon.backend import (
    ActionResult,
    Backend,
    BackgroundLeaseBackend,
    ExpiringLeaseBackend,
    FollowUpBackend,
    HoldingBackend,
    LeaseBackend,
)
from railgang.daemon.clock import Clock
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.fairshare import RecentUse
from railgang.daemon.core.model.gang import Placer, topology_placer
from railgang.daemon.core.model.plan import Plan, Policy
from railgang.daemon.core.model.snapshot import NodeState, Snapshot
from railgang.daemon.ledger.progress import StepTimingRecorder
from railgang.daemon.loop import CycleOutcome, run_cycle
from railgang.daemon.pipeline import Pipeline
from railgang.daemon.service import explain
from railgang.daemon.service.estimate import StartEstimator
from railgang.daemon.service.estimate_history import save_scores
from railgang.daemon.service.fairshare import recent_use
from railgang.daemon.service.grants import GrantsFile
from railgang.daemon.service.journal import SessionJournal, preemption_history, utc
from railgang.daemon.service.links import LinkCollector
from railgang.daemon.service.metrics import DaemonMetrics
from railgang.daemon.service.node_inventory import NodeInventory
from railgang.daemon.service.quotas import QuotaStep
from railgang.daemon.serving.live import LiveServing
from railgang.daemon.slurm.cli.lease import write_heartbeat
from railgang.db.repositories import explanations as explain_repo
from railgang.db.repositories import journal as repo
from railgang.errors import SlurmSchemaError
from railgang.topology.fabric import Fabric

log = logging.getLogger("railgang.daemon")
PRUNE_EVERY = 100  # cycles between prunes of the bounded tables


class RecordingPolicy:
    """The policy as the core sees it, keeping the last plan so ``explain`` can show the order
    without planning twice."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.last: Plan | None = None

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        self.last = self.inner.plan(snapshot, now)
        return self.last


class _Hooks:
    """The journal, plus the lease renewal that must sit between observing and applying."""

    def __init__(self, journal: SessionJournal, backend: Backend, background: bool = False) -> None:
        self.journal = journal
        self.backend = backend
        self.renew = backend.renew_leases if isinstance(backend, LeaseBackend) else None
        # renewals on the backend's thread: the report counts what it renewed since last cycle
        self.later = (backend.renew_leases_later
                      if background and isinstance(backend, BackgroundLeaseBackend) else None)
        self.renewed = 0
        self.refused: dict[str, str] = {}
        self.lease_ms = 0.0  # run_cycle times this hook as "reconcile"; the lease part is split off

    def observed(self, snapshot: Snapshot, now: float) -> None:
        self.journal.observed(snapshot, now)
        if isinstance(self.backend, FollowUpBackend):  # requeues the observation carried out
            self.journal.followed_up(self.backend.followups(), now)
        if self.renew is None:
            return
        t = time.perf_counter()
        held = [j.job_id for j in snapshot.pending]
        # what ends soon, not the queue: also the leased jobs outside it (held, on a dependency,
        # before their --begin), so those are renewed while the queue is empty too
        if isinstance(self.backend, ExpiringLeaseBackend):
            held = self.backend.leases_due(held, now)
        if self.later is not None:  # also with nothing due: the thread's counts since the last cycle
            self.renewed, self.refused = self.later(held, now)
        elif held:
            self.refused = dict(self.renew(held, now) or {})
            self.renewed = len(held) - len(self.refused)
        self.lease_ms = (time.perf_counter() - t) * 1e3

    def planned(self, actions: Sequence[Action], now: float) -> None:
        self.journal.planned(actions, now)

    def settled(self, results: Sequence[ActionResult], now: float) -> None:
        self.journal.settled(results, now)


@dataclass
class CycleReport:
    cycle_id: int
    now: float
    timings_ms: dict[str, float]
    pending: int = 0
    running: int = 0
    actions: Counter[str] = field(default_factory=Counter)  # by kind
    failed: int = 0
    reconciled: Counter[str] = field(default_factory=Counter)  # verdict -> entries
    reasons: Counter[str] = field(default_factory=Counter)  # reason code -> waiting jobs
    leases_renewed: int = 0
    grants_written: bool = False
    error: str | None = None

    def as_log(self) -> dict[str, Any]:
        return {"cycle": self.cycle_id, "now": round(self.now, 3),
                "ms": {k: round(v, 2) for k, v in self.timings_ms.items()},
                "pending": self.pending, "running": self.running,
                "actions": dict(self.actions), "failed": self.failed,
                "reconciled": dict(self.reconciled), "reasons": dict(self.reasons),
                "leases_renewed": self.leases_renewed, "grants_written": self.grants_written,
                "error": self.error}


class DaemonService:
    """Runs cycles; owns the session per cycle and every commit (repositories never commit)."""

    def __init__(self, *, engine: Engine, backend: Backend, policy: Policy, clock: Clock,
                 leader: str, config: CycleConfig | None = None, placer: Placer = topology_placer,
                 seed: int = 0, heartbeat_file: Path | None = None, lease_s: int = 120,
                 metrics: DaemonMetrics | None = None, journal_retention_s: float = 7 * 86400,
                 explain_retention_s: float = 86400, keep_cycles: int = 10000,
                 explain_refresh_s: float = 60.0,
                 grants_file: Path | None = None, quotas: QuotaStep | None = None,
                 estimator: StartEstimator | None = None,
                 links: LinkCollector | None = None,
                 steps: StepTimingRecorder | None = None,
                 inventory: NodeInventory | None = None,
                 serving: LiveServing | None = None, pipeline: Pipeline | None = None,
                 fair_share_half_life_s: float | None = None,
                 renew_in_background: bool = False) -> None:
        self.engine, self.backend, self.clock = engine, backend, clock
        self.policy = RecordingPolicy(policy)
        self.leader, self.config, self.placer = leader, config or CycleConfig(), placer
        self.rng = random.Random(seed)
        self.heartbeat_file, self.lease_s, self.metrics = heartbeat_file, lease_s, metrics
        self.journal_retention_s, self.explain_retention_s = journal_retention_s, explain_retention_s
        self.keep_cycles = keep_cycles
        self.explain_refresh_s = explain_refresh_s  # explain.Tracker: drifting figures' refresh
        self.grants = GrantsFile(grants_file) if grants_file is not None else None
        self.quotas = quotas if quotas is not None else QuotaStep()
        self.links = links  # live link health: its LinkHealth goes into every snapshot
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        self.tracker: explain.Tracker | None = None
        self.estimator = estimator  # "when will it start" for explain (service/estimate.py)
        self.steps = steps  # running jobs' step timings for the report (accounting/progress.py)
        self.inventory = inventory  # the fleet's nodes for the report (service/node_inventory.py)
        self.serving = serving  # the serving step's reader and status (serving/live.py, issue 19)
        # the steps before the core (pipeline.py): the failure response, the serving controller
        if pipeline is None and serving is not None:  # a service built without the settings
            pipeline = serving.pipeline()
        self.pipeline = pipeline
        # fair share (service/fairshare.py): the ledger's decayed use into the snapshot; None: off
        self.fair_share_half_life_s = fair_share_half_life_s
        # leases renewed on the backend's thread, off the cycle's path (slurm/cli/renewer.py);
        # off for a one-shot cycle, whose report must count its own renewals
        self.renew_in_background = renew_in_background
        self.cycles = 0

    def _held(self, nodes: Iterable[Any]) -> list[Any]:
        """sinfo's nodes with those a step holds out (flaky, burning in) drained, with why:
        ``railgang explain NODE`` and the report say where the node's burn-in stands."""
        held = self.pipeline.held_nodes() if self.pipeline is not None else {}
        return [dataclasses.replace(n, state=NodeState.DRAIN, reason=held[n.name])
                if n.name in held else n for n in nodes]

    def _recent_use(self, s: Session) -> RecentUse | None:
        h = self.fair_share_half_life_s
        return None if h is None else recent_use(s, self.clock.now(), h)

    def run_once(self) -> CycleReport:
        t0 = time.perf_counter()
        with self.sessions() as s:
            cycle = repo.begin_cycle(s, started_at=utc(self.clock.now()), leader=self.leader,
                                     policy=self.policy.name)
            s.commit()
            report = CycleReport(cycle.id, 0.0, {})
            journal = SessionJournal(s, cycle.id, self.backend)
            hooks = _Hooks(journal, self.backend, self.renew_in_background)
            try:
                tree = self.quotas.tree(s, self.clock.now())  # read-only
                before = self.serving.status if self.serving is not None else ()
                outcome = run_cycle(self.backend, self.policy, self.clock, self.rng,
                                    config=self.config, placer=self.placer, journal=hooks,
                                    quotas=tree,
                                    health=self.links.health() if self.links else None,
                                    preemptions=preemption_history(s, self.clock.now()),
                                    recent_use=self._recent_use(s), steps=self.pipeline)
                if self.serving is not None and self.pipeline is not None:
                    self.serving.record(self.pipeline.memory.get("serving", ()), outcome.now)
                if self.serving is not None and self.metrics is not None:
                    self.metrics.observe_serving(before, self.serving.status)
                snap = outcome.snapshot
                if self.links is not None and snap is not None and isinstance(snap.fabric, Fabric):
                    self.links.set_fabric(snap.fabric)  # the hosts and switches to fold on
                report.now = outcome.now
                t1 = time.perf_counter()
                self._record(s, cycle.id, outcome, report, journal)
                obs = getattr(self.backend, "last", None)  # the CLI backend's squeue read
                if self.steps is not None and obs is not None:
                    self.steps.record(s, obs.jobs.values())
                if self.inventory is not None and obs is not None and snap is not None:
                    self.inventory.record(s, self._held(obs.nodes_raw.values()),
                                          {n: v.facts.gpu_type for n, v in snap.nodes.items()},
                                          outcome.now)
                report.timings_ms = dict(outcome.timings)
                if hooks.lease_ms:
                    report.timings_ms["reconcile"] -= hooks.lease_ms
                    report.timings_ms["leases"] = hooks.lease_ms
                self.quotas.review(s, tree, outcome.now)
                report.timings_ms["record"] = (time.perf_counter() - t1) * 1e3
                self._sync_grants(s, report)
                report.timings_ms["total"] = (time.perf_counter() - t0) * 1e3  # the row's total
                repo.finish_cycle(s, cycle, finished_at=utc(self.clock.now()),
                                  pending=report.pending, running=report.running,
                                  actions=sum(report.actions.values()), failed=report.failed,
                                  timings=report.timings_ms)
                s.commit()
            except Exception as exc:
                s.rollback()
                report.error = f"{type(exc).__name__}: {exc}"
                repo.finish_cycle(s, cycle, finished_at=utc(self.clock.now()), pending=0,
                                  running=0, actions=0, failed=0, timings={},
                                  error=report.error)
                s.commit()
                try:  # grants need only the database: keep them current while Slurm is down
                    self._sync_grants(s, report)
                except Exception as grants_exc:  # the cycle's own error is the one to raise
                    log.error("class grants file not synced: %s", grants_exc)
                if self.metrics is not None:
                    self.metrics.cycles.labels("error").inc()
                    if isinstance(exc, SlurmSchemaError):
                        self.metrics.schema_errors.labels(exc.command).inc()
                raise
        report.leases_renewed = hooks.renewed
        if hooks.refused:
            log.warning("lease renewal refused for %d job(s), e.g. %s", len(hooks.refused),
                        "; ".join(f"{j}: {w}" for j, w in list(hooks.refused.items())[:3]))
        if self.heartbeat_file is not None:
            write_heartbeat(self.heartbeat_file, outcome.now, self.lease_s)
            if self.metrics is not None:
                self.metrics.beat(outcome.now, self.lease_s, hooks.renewed, len(hooks.refused))
        report.timings_ms["total"] = (time.perf_counter() - t0) * 1e3
        if self.metrics is not None:
            self.metrics.observe_cycle(report.timings_ms, report.reasons, report.running,
                                       journal.outcomes, outcome.snapshot, self.clock.now())
        self.cycles += 1
        return report

    def _sync_grants(self, s: Session, report: CycleReport) -> None:
        if self.grants is None:
            return
        t = time.perf_counter()
        report.grants_written = self.grants.sync(s)
        report.timings_ms["grants"] = (time.perf_counter() - t) * 1e3

    def _record(self, s: Session, cycle_id: int, outcome: CycleOutcome, report: CycleReport,
                journal: SessionJournal) -> None:
        snap = outcome.snapshot
        assert snap is not None  # run_cycle always returns the snapshot it decided on
        report.pending, report.running = len(snap.pending), len(snap.running)
        report.actions = Counter(type(a).__name__ for a in outcome.actions)
        report.failed = len(outcome.failed)
        report.reconciled = journal.reconciled
        # (read whole, so the reasons recorded in bulk are built once: build_rows reads them again)
        report.reasons = Counter(r.code.value for r in outcome.reasons[:])
        if self.tracker is None:
            self.tracker = explain.Tracker(explain_repo.live(s), refresh_s=self.explain_refresh_s)
        at = utc(outcome.now)
        # start-time estimates (re-simulated every daemon.estimate_interval_s; in "record" ms)
        estimates = None
        if self.estimator is not None:
            estimates = self.estimator.refresh(snap)
            save_scores(s, self.estimator, outcome.now)  # the calibration outlives a restart
        refused = (self.backend.held_back() if isinstance(self.backend, HoldingBackend)
                   else [])  # Starts Slurm refused lately (slurm/cli/backoff.py)
        rows = explain.build_rows(outcome, self.policy.last, self.policy.name,
                                  keep=self.tracker.keep, estimates=estimates,
                                  refused={h.job_id: h for h in refused if not h.held},
                                  stands=self.tracker.stands)
        present = [*snap.running, *(j.job_id for j in snap.pending)]
        if self.serving is not None:  # replicas the serving step kept from the core (issue 19)
            held_back = self.serving.explain_rows()
            rows += held_back
            present += [r.job_id for r in held_back]
        if refused:  # the jobs kept out of the core's queue: the core gave them no reason
            held = explain.held_back_rows([h for h in refused if h.held], self.policy.name)
            rows += held
            present += [r.job_id for r in held]
        write, gone = self.tracker.changes(rows, present, outcome.now)
        explain_repo.upsert(s, write, cycle_id=cycle_id, at=at)
        explain_repo.mark_gone(s, gone, cycle_id=cycle_id, at=at)
        if self.cycles % PRUNE_EVERY == 0:
            repo.prune(s, settled_before=at - timedelta(seconds=self.journal_retention_s),
                       keep_cycles=self.keep_cycles)
            explain_repo.drop_gone(s, before=at - timedelta(seconds=self.explain_retention_s))


__all__ = ["CycleReport", "DaemonService", "RecordingPolicy"]
