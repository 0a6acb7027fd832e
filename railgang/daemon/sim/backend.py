"""``SimBackend``: the simulated cluster behind the backend seam (cluster state + actions).

It holds what a real Slurm cluster would hold — which GPUs are busy, which jobs wait and which run
where — builds the immutable ``Snapshot`` the decision core reads, and applies the core's actions
exactly as ordered: ``Start`` occupies exactly the placement's GPUs, ``Resize`` swaps the
assignment and pays the job's transition time, ``Preempt`` signals and kills after the grace time
(work since the last checkpoint is lost and the restart pays the restore time); the actions
about nodes and the failure step's (``DrainNode``, burn-ins, ``Requeue``) are node_ops.py's.

How far each job got is the job's own accounting (``accounting.SimJob``); what happened to it is
recorded for the metrics by ``recorder.Recorder``. Time only enters as the ``now`` argument.
Future events the simulation must wake up for (a job's completion, the end of a preemption grace
period) are handed to an :class:`EventSink` — the discrete-event engine (``engine.py``) or the
daemon's live demo; the backend never advances time itself.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.actions import (
    Action,
    Migrate,
    Preempt,
    Resize,
    SetPriority,
    Start,
)
from railgang.daemon.core.model.fairshare import DecayedUse
from railgang.daemon.core.model.job import Assignment, Job, RunningJob
from railgang.daemon.core.model.pool_map import Pools, pools_of_nodes
from railgang.daemon.core.model.queue_order import rigid_by_submit
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.model.snapshot import (
    Account,
    Node,
    PreemptEvent,
    Snapshot,
    SnapshotIndex,
    queue_summary,
)
from railgang.daemon.sim import views
from railgang.daemon.sim.accounting import SimJob
from railgang.daemon.sim.capacity import SPOT_RECLAIM, SPOT_RETURN, Capacity
from railgang.daemon.sim.config import SimConfig
from railgang.daemon.sim.metrics import JobRecord
from railgang.daemon.sim.node_ops import NODE_ACTIONS, apply_node_op
from railgang.daemon.sim.notice import SHRINK, ShrinkNotices
from railgang.daemon.sim.progress import CommModel, NoComm, job_request
from railgang.daemon.sim.quotas import QuotaUse
from railgang.daemon.sim.recorder import Recorder
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.health import LinkHealth

_NO_QUOTAS: Mapping[str, int] = MappingProxyType({})
COMPLETE = "complete"
KILL = "kill"
LINK = "link"  # a --degrade event (job_id: the switch; version: its index in SimConfig.degrade)


class EventSink(Protocol):
    def at(self, time: float, kind: str, job_id: str, version: int) -> None:
        """Wake the simulation at ``time`` for ``job_id`` (stale if ``version`` has moved on)."""
        ...


class _NoEvents:
    def at(self, time: float, kind: str, job_id: str, version: int) -> None: ...


class SimBackend:
    """A simulated cluster on a ``topology`` fabric (see the module docstring)."""

    def __init__(self, fabric: Any, *, config: SimConfig = SimConfig(),
                 comm: CommModel | None = None, events: EventSink | None = None,
                 max_pending: int | None = None) -> None:
        self.fabric = fabric
        self.config = config
        self.comm = comm or NoComm()
        self.events: EventSink = events if events is not None else _NoEvents()
        self.max_pending = max_pending  # cap on queue length shown to the core (None = all)
        self.recorder = Recorder()
        names = tuple(fabric.nodes)
        self.nodes: dict[str, Node] = {n: views.fabric_node(fabric.facts(n), config.node_tier.get(n, ""))
                                       for n in names}
        self.capacity = Capacity(fabric, config.node_tier, config.tiers, seed=config.spot_seed,
                                 down_s=config.spot_down_s)
        self._interrupted: set[str] = set()  # jobs signalled by a spot reclaim
        self.free: dict[str, set[int]] = {n: set(range(self.nodes[n].gpus)) for n in names}
        # what snapshots share while it does not change (issue 12, speed; None = rebuild): the
        # free GPUs shown (usable nodes not away, sorted) and their count, the read-only copy the
        # last snapshot got, the nodes, and the usable GPU count
        self._free_shown: dict[str, frozenset[int]] | None = None
        self._free_count = 0
        self._free_view: Mapping[str, frozenset[int]] | None = None
        self._nodes_view: Mapping[str, Node] | None = None
        self._total: int | None = None
        self._pools: Pools = pools_of_nodes({})  # the nodes' GPU pools (the snapshot index's)
        self._held: dict[str, int] = {}  # GPUs each account's running jobs hold
        # the running views by job id and the running set they were built for (bumped as jobs
        # start and leave); a view answers for any time asked (views.LiveRunning)
        self._shown = views.RunningShown()  # the snapshots' running mapping, patched as it changes
        self._elastic_view: tuple[RunningJob, ...] = ()  # those of them with an elastic range
        self._per_class = [0, 0, 0, 0]  # running jobs per priority class
        self._elastic = 0  # running jobs with an elastic range
        self.jobs: dict[str, SimJob] = {}
        self.pending: list[tuple[float, int, str]] = []  # (submit, seq, job_id), kept sorted
        self._pending_jobs: list[Job] = []  # the core's views, aligned with ``pending``
        self._pending_view: tuple[Job, ...] | None = None
        self._by_submit = views.SubmitOrder()  # the queue in FIFO's order (the snapshot index's)
        self._queue_facts = views.QueueFacts()  # facts of the whole queue (the index's)
        self.running: dict[str, SimJob] = {}
        self.preempt_log: list[PreemptEvent] = []
        self.priorities: dict[str, int] = {}
        self.burn_ins: dict[str, str] = {}  # node -> burn-in job reserved for it (node_ops.py)
        self.burn_in_log: list[tuple[float, str, str]] = []  # (time, node, job id) submitted
        self._seq = 0
        self._usage_done: dict[str, float] = {}  # GPU-seconds of finished runs, per account
        self._recent = DecayedUse(self.config.fair_share_half_life_s)  # the same, decayed: fair share
        # link degradation (``degrade``): the switch factors now, the snapshot's LinkHealth, and
        # migrations in flight (target assignment, replicas) and done (time, job)
        self._switch_factor: dict[str, float] = {}
        self.health: LinkHealth | None = None
        self.migrations: dict[str, tuple[Assignment, int]] = {}
        self.notices = ShrinkNotices()  # shrinks waiting for their notice to end (notice.py)
        self.migrated: list[tuple[float, str]] = []
        for i, ev in enumerate(config.degrade):
            self.events.at(ev.at, LINK, ev.switch, i)
        self._account_base: dict[str, Account] = {}  # shares and quotas of a loaded snapshot
        self.quota_use = QuotaUse(config.quotas) if config.quotas is not None else None

    # -- bookkeeping ---------------------------------------------------------------------------
    @property
    def total_gpus(self) -> int:
        if self._total is None:
            self._total = sum(n.gpus for n in self.nodes.values() if n.state.usable)
        return self._total

    def _nodes_changed(self) -> None:
        self._nodes_view = self._free_view = self._total = self._free_shown = None  # pools: with the nodes

    @property
    def records(self) -> list[JobRecord]:
        return self.recorder.records

    @property
    def finished(self) -> int:
        return self.recorder.finished

    def pending_ids(self) -> list[str]:
        return [jid for _, _, jid in self.pending]

    def _enqueue(self, sj: SimJob) -> None:
        self._seq += 1
        sj.qkey = (sj.tj.submit_time, self._seq, sj.tj.job_id)
        i = bisect.bisect_left(self.pending, sj.qkey)
        self.pending.insert(i, sj.qkey)
        self._pending_jobs.insert(i, sj.job)
        self._pending_view = None
        self._by_submit.add(sj.job.request)
        self._queue_facts.add(sj.job)

    def _dequeue(self, sj: SimJob) -> None:
        i = bisect.bisect_left(self.pending, sj.qkey)
        if i < len(self.pending) and self.pending[i] == sj.qkey:
            del self.pending[i]
            del self._pending_jobs[i]
            self._pending_view = None
            self._by_submit.remove(sj.job.request)
            self._queue_facts.remove(sj.job)

    def _take(self, assignment: Assignment) -> str | None:
        for node, gpus in assignment.items():
            have = self.free.get(node)
            if have is None or not self.nodes[node].state.usable:
                return f"node {node} is not usable"
            if not have.issuperset(gpus):
                return f"GPUs {sorted(set(gpus) - have)} on {node} are not free"
        for node, gpus in assignment.items():
            self.free[node].difference_update(gpus)
            self._free_changed(node)
        return None

    def _give(self, assignment: Assignment) -> None:
        for node, gpus in assignment.items():
            self.free[node].update(gpus)
            self._free_changed(node)

    def _entered(self, sj: SimJob) -> None:
        """``sj`` runs from now on (its allocation and run are set)."""
        self.running[sj.tj.job_id] = sj
        self._shown.entered(sj)
        self._per_class[sj.request.priority_class] += 1
        self._elastic += sj.request.elastic

    def _free_changed(self, node: str) -> None:
        shown = self._free_shown
        if shown is not None and node in shown:
            gpus = frozenset(self.free[node])
            self._free_count += len(gpus) - len(shown[node])
            shown[node] = gpus
        self._free_view = None

    def _allocate(self, sj: SimJob, assignment: Assignment, replicas: int) -> None:
        factor = self.comm.factor(sj.request, assignment)
        cap, before = self.capacity, sj.gpus
        if not cap.active:
            sj.allocate(assignment, replicas, factor)
        else:
            rate, sj.eff = cap.speed(sj.request, assignment)
            sj.allocate(assignment, replicas, factor, rate)
            sj.pool, sj.price_s = cap.pool(assignment), cap.usd_per_gpu_s(assignment)
        self._hold(sj.tj.account, sj.gpus - before)

    def _hold(self, account: str, gpus: int) -> None:
        """``gpus`` more (or fewer) GPUs held by ``account``'s running jobs."""
        if held := self._held.get(account, 0) + gpus:
            self._held[account] = held
        else:
            self._held.pop(account, None)

    def _schedule_completion(self, sj: SimJob, now: float) -> None:
        sj.version += 1
        done = sj.finish_time(now)
        if done is not None:
            self.events.at(done, COMPLETE, sj.tj.job_id, sj.version)

    # -- the seam ------------------------------------------------------------------------------
    def submit(self, tj: TraceJob, now: float) -> bool:
        """A job arrives. Returns False (and records a rejection) if it can never fit."""
        cfg = self.config
        request = job_request(tj, comm_share=cfg.comm_share,
                              checkpoint_interval_s=cfg.checkpoint_interval_s,
                              checkpoint_cost_s=cfg.checkpoint_cost_s,
                              restore_cost_s=cfg.restore_cost_s,
                              transition_cost_s=cfg.transition_cost_s)
        rec = self.recorder.record(tj)
        sj = SimJob(tj, request, rec, oracle=cfg.oracle, integral=self.recorder.integral_at(now))
        if request.min_gpus > self.total_gpus:
            rec.rejected = f"needs {request.min_gpus} GPUs, the cluster has {self.total_gpus}"
            return False
        self.jobs[tj.job_id] = sj
        self.recorder.entered(now)
        self._enqueue(sj)
        if self.quota_use is not None:  # the team's demand as the job arrives (itself included)
            acc = tj.account
            demand = sum(s.gpus for s in self.running.values() if s.tj.account == acc)
            demand += sum(j.gpus for j in self._pending_jobs if j.account == acc)
            self.quota_use.arrived(tj.job_id, acc, demand)
        return True

    def reject(self, job_id: str, reason: str, now: float) -> None:
        sj = self.jobs.get(job_id)
        if sj is None or sj.assignment is not None:
            return
        del self.jobs[job_id]
        self._dequeue(sj)
        sj.record.rejected = reason
        self.recorder.left(now)

    def snapshot(self, now: float) -> Snapshot:
        running = self.running
        shown, renewed = self._shown.mapping(running, self.config.oracle)
        if renewed:
            self._elastic_view = tuple(v for v in shown.values()
                                       if v.job.request.elastic) if self._elastic else ()
        if self._pending_view is None:
            self._pending_view = tuple(self._pending_jobs)
        pending = self._pending_view
        by_submit, facts = self._by_submit.view(), self._queue_facts.summary()
        if self.max_pending is not None and len(pending) > self.max_pending:
            pending = pending[: self.max_pending]  # (kept: all of it)
            by_submit, facts = rigid_by_submit(pending), queue_summary(pending)
        free = self._free_view
        if free is None:
            if self._free_shown is None:
                self._free_shown = views.frozen_free(self.free, self.nodes, self.capacity.away)
                self._free_count = sum(map(len, self._free_shown.values()))
            free = self._free_view = MappingProxyType(dict(self._free_shown))
        if self._nodes_view is None:
            self._nodes_view = MappingProxyType(dict(sorted(self.nodes.items())))
            self._pools = pools_of_nodes(self._nodes_view)
        horizon = now - self.config.preempt_window_s
        while self.preempt_log and self.preempt_log[0].time < horizon:
            self.preempt_log.pop(0)
        base = self._account_base
        if base:  # a loaded snapshot's shares and quotas (an estimate): summed now
            accounts: Mapping[str, Account] = views.eager_accounts(self._usage_done, self.running, base, now, self._recent, shown.values())
            quotas: Mapping[str, int] = {n: a.quota_gpus for n, a in accounts.items() if a.quota_gpus is not None}
        else:  # no account of a replay has a flat quota (its quota tree is ``config.quotas``)
            accounts, quotas = views.lazy_accounts(self._usage_done, running, self._held, now, self._recent), _NO_QUOTAS
        if self.quota_use is not None:
            self.quota_use.observe(now, self._account_gpus())
        snap = Snapshot(now=now, fabric=self.fabric, nodes=self._nodes_view, free=free,
                        running=shown, pending=pending, accounts=accounts,
                        preemptions=tuple(self.preempt_log),
                        quotas=self.config.quotas if self.config.enforce_quotas else None,
                        tiers=self.config.tiers,
                        index=SnapshotIndex(self.total_gpus, self._free_count, dict(self._held),
                                            self._elastic_view, tuple(self._per_class), self._pools,
                                            by_submit, quotas, facts))
        return snap

    def _account_gpus(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for sj in self.running.values():
            out[sj.tj.account] = out.get(sj.tj.account, 0) + sj.gpus
        return out

    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        results = []
        for action in actions:
            if isinstance(action, NODE_ACTIONS):  # node_ops.py
                results.append(ActionResult(action, *apply_node_op(self, action, now)))
                continue
            detail = self._apply_one(action, now)
            results.append(ActionResult(action, detail is None, detail or ""))
            if (self.quota_use is not None and detail is None and isinstance(action, Preempt)
                    and action.reason is Reason.RECLAIMING):
                self.quota_use.reclaim(self.jobs[action.job_id].tj.account)
        if self.quota_use is not None:
            self.quota_use.observe(now, self._account_gpus())
        return results

    def _apply_one(self, action: Action, now: float) -> str | None:
        if isinstance(action, Start):
            return self._start(action, now)
        if isinstance(action, Resize):
            return self._resize(action, now)
        if isinstance(action, Preempt):
            return self._preempt(action, now)
        if isinstance(action, Migrate):
            return self._migrate(action, now)
        if isinstance(action, SetPriority):
            self.priorities[action.job_id] = action.priority
            return None
        return f"unsupported action {type(action).__name__}"

    def _start(self, action: Start, now: float) -> str | None:
        sj = self.jobs.get(action.job_id)
        if sj is None or sj.assignment is not None:
            return f"{action.job_id} is not pending"
        problem = sj.size_problem(action.replicas, action.gpus) or self._take(action.assignment)
        if problem:
            return problem
        self._dequeue(sj)
        self._allocate(sj, action.assignment, action.replicas)
        if sj.record.start is None:
            leaf_of = getattr(self.fabric, "leaf_of", None)
            sj.record.first_leaves = len({leaf_of(n) for n in action.assignment}) if leaf_of else 1
        sj.begin_run(now)
        self._entered(sj)
        if self.capacity.paused:  # work runs again: the spot nodes' reclaim processes resume
            for node in sorted(self.capacity.paused):
                self.events.at(self.capacity.next_reclaim(node, now), SPOT_RECLAIM, node, 0)
            self.capacity.paused.clear()
        self._schedule_completion(sj, now)
        return None

    def _running_unsignalled(self, job_id: str) -> tuple[SimJob | None, str | None]:
        sj = self.running.get(job_id)  # the job a resize or migration acts on, or why none
        if sj is None or sj.assignment is None:
            return None, f"{job_id} is not running"
        if sj.kill_at is not None or sj.notice_until is not None:
            return None, f"{job_id} is being preempted or shrunk"
        return sj, None

    def _resize(self, action: Resize, now: float, noticed: bool = False) -> str | None:
        sj, why = self._running_unsignalled(action.job_id)
        if sj is None or sj.assignment is None:
            return why
        problem = sj.size_problem(action.replicas, action.gpus)
        if problem:
            return problem
        if action.grace_s > 0 and action.gpus < sj.gpus and not noticed:  # as the Slurm backend
            self.notices.give(sj, action, now, self.events)  # the notice first
            return None
        old = sj.assignment
        added = {n: tuple(set(g) - set(old.get(n, ()))) for n, g in action.assignment.items()}
        removed = {n: tuple(set(g) - set(action.assignment.get(n, ()))) for n, g in old.items()}
        problem = self._take({n: g for n, g in added.items() if g})
        if problem:
            return problem
        self._give({n: g for n, g in removed.items() if g})
        sj.advance(now)
        self._allocate(sj, action.assignment, action.replicas)
        sj.resized(now)
        self._schedule_completion(sj, now)
        return None

    def _preempt(self, action: Preempt, now: float) -> str | None:
        sj = self.running.get(action.job_id)
        if sj is None or sj.assignment is None:
            return f"{action.job_id} is not running"
        if sj.kill_at is not None:
            return None  # already signalled: idempotent
        kill_at = sj.signal(now, max(0.0, action.grace_s), self.config.panic_checkpoint)
        done = sj.finish_time(now)  # the completion event (if any) is stale now ...
        if done is not None and done <= kill_at:  # ... unless the job finishes within its grace
            self.events.at(done, COMPLETE, sj.tj.job_id, sj.version)
        self.events.at(kill_at, KILL, sj.tj.job_id, sj.version)
        return None

    # -- link degradation and migration (degrade.py, core/phases/migrate.py) -------------------------
    def _link(self, index: int, now: float) -> bool:
        """A ``--degrade`` event: the switch's factor changes; running jobs go at their new speed."""
        ev = self.config.degrade[index]
        self._switch_factor[ev.switch] = ev.factor
        worse = {s: f for s, f in self._switch_factor.items() if f < 1.0}
        self.health = LinkHealth(switches=worse) if worse else None
        if hasattr(self.comm, "health"):
            self.comm.health = self.health
        for sj in self.running.values():
            if sj.assignment is None or sj.kill_at is not None:
                continue  # a signalled job's progress is settled at its kill
            sj.advance(now)
            self._allocate(sj, sj.assignment, sj.replicas)
            self._schedule_completion(sj, now)
        return True

    def _migrate(self, action: Migrate, now: float) -> str | None:
        """Hold the target's free GPUs and signal the job; at the kill it restarts there."""
        sj, why = self._running_unsignalled(action.job_id)
        if sj is None or sj.assignment is None:
            return why
        old = sj.assignment
        extra = {n: tuple(g for g in gs if g not in old.get(n, ())) for n, gs in action.assignment.items()}
        problem = self._take({n: g for n, g in extra.items() if g})
        if problem:
            return problem
        self.migrations[action.job_id] = (action.assignment, action.replicas)
        return self._preempt(Preempt(action.job_id, action.grace_s), now)

    def _drop_migration(self, sj: SimJob) -> None:
        target = self.migrations.pop(sj.tj.job_id, None)
        if target is not None and sj.assignment is not None:
            old = sj.assignment
            self._give({n: tuple(g for g in gs if g not in old.get(n, ())) for n, gs in target[0].items()})

    def _migrated(self, sj: SimJob, now: float) -> None:
        """The migration's grace is over: back to the checkpoint, restart on the target (restore)."""
        assignment, replicas = self.migrations.pop(sj.tj.job_id)
        sj.advance(now)
        sj.roll_back(now)
        self.preempt_log.append(PreemptEvent(now, sj.tj.job_id, sj.gpus))
        old = sj.assignment
        assert old is not None
        self._give({n: tuple(g for g in gs if g not in assignment.get(n, ())) for n, gs in old.items()})
        self._usage_done[sj.tj.account] = self._usage_done.get(sj.tj.account, 0.0) + sj.attained - sj.attained_at_start
        self._recent.add_run(sj.tj.account, sj.attained - sj.attained_at_start, sj.start_time, sj.as_of)
        sj.requeued(now, self.config.oracle)  # the core's view: one more preemption, just now
        self._allocate(sj, assignment, replicas)
        sj.begin_run(now)
        self.migrated.append((now, sj.tj.job_id))
        self._schedule_completion(sj, now)

    # -- events from the engine ----------------------------------------------------------------
    def on_event(self, kind: str, job_id: str, version: int, now: float) -> bool:
        """Handle a due event; returns True if the cluster changed (a cycle is worth running)."""
        if kind == LINK:
            return self._link(version, now)
        if kind == SPOT_RECLAIM:
            return self._reclaim(job_id, now)
        if kind == SPOT_RETURN:
            return self._returned(job_id, now)
        if kind == SHRINK:  # a notice ended: the shrink the core asked for takes effect now
            resize = self.notices.due(job_id, version, self.running)
            return resize is not None and self._resize(resize, now, noticed=True) is None
        sj = self.running.get(job_id)
        if sj is None or sj.version != version:
            return False
        if kind == COMPLETE:
            return self._complete(sj, now)
        if kind == KILL:
            if sj.tj.job_id in self.migrations:
                self._migrated(sj, now)
                return True
            self._kill(sj, now)
            return True
        return False

    def _release(self, sj: SimJob) -> None:
        assert sj.assignment is not None
        self._give(sj.assignment)
        self._drop_migration(sj)  # finished inside a migration's grace: its target is free again
        self.notices.drop(sj)  # or inside a shrink's notice
        self._usage_done[sj.tj.account] = self._usage_done.get(sj.tj.account, 0.0) + sj.attained - sj.attained_at_start
        self._recent.add_run(sj.tj.account, sj.attained - sj.attained_at_start, sj.start_time, sj.as_of)
        self._hold(sj.tj.account, -sj.gpus)
        sj.released()
        del self.running[sj.tj.job_id]
        self._shown.left(sj.tj.job_id)
        self._per_class[sj.request.priority_class] -= 1
        self._elastic -= sj.request.elastic

    def _complete(self, sj: SimJob, now: float) -> bool:
        sj.advance(now)
        if not sj.is_done():
            self._schedule_completion(sj, now)  # rounding: not quite done yet
            return False
        self._release(sj)
        del self.jobs[sj.tj.job_id]
        self.recorder.completed(sj.record, sj.submit_integral, now)
        return True

    def requeue(self, job_id: str, now: float) -> str | None:
        """A running job back in the queue now (the failure step's ``Requeue``): no churn."""
        sj = self.running.get(job_id)
        if sj is None:
            return f"{job_id} is not running"
        self._interrupted.add(job_id)
        self._kill(sj, now)
        return None

    def _kill(self, sj: SimJob, now: float) -> None:
        sj.advance(now)
        sj.roll_back(now)
        if sj.tj.job_id in self._interrupted:  # the provider's doing: no churn budget spent
            self._interrupted.discard(sj.tj.job_id)
            sj.record.interruptions += 1
        else:
            self.preempt_log.append(PreemptEvent(now, sj.tj.job_id, sj.gpus))
        self._release(sj)
        sj.requeued(now, self.config.oracle)
        self._enqueue(sj)

    # -- nodes taken away and given back: spot reclaims, faults (failures.py), serving's
    # take-backs (serving/replay.py). Not the core's preemptions: no churn budget is spent
    def away(self, nodes: Iterable[str]) -> None:
        """``nodes`` leave every later snapshot (their GPUs are not free) until :meth:`back`."""
        self.capacity.away.update(nodes)
        self._free_shown = self._free_view = None

    def back(self, nodes: Iterable[str]) -> None:
        self.capacity.away.difference_update(nodes)
        self._free_shown = self._free_view = None

    def interrupted(self, sj: SimJob) -> None:
        """``sj`` is signalled by the capacity, not by the core: its kill spends no churn budget,
        and a migration it was making is given up (it restarts anew)."""
        self._drop_migration(sj)
        self._interrupted.add(sj.tj.job_id)

    def withdraw(self, node: str, now: float, notice_s: float) -> int:
        """Take ``node`` away; its jobs get ``notice_s`` as grace to save and leave (a panic
        checkpoint when the notice covers it). Returns the jobs signalled."""
        self.away((node,))
        hit = 0
        for sj in list(self.running.values()):
            if sj.assignment is None or node not in sj.assignment or sj.kill_at is not None:
                continue
            self._interrupted.add(sj.tj.job_id)
            kill_at = sj.signal(now, notice_s, True)
            done = sj.finish_time(now)
            if done is not None and done <= kill_at:
                self.events.at(done, COMPLETE, sj.tj.job_id, sj.version)
            self.events.at(kill_at, KILL, sj.tj.job_id, sj.version)
            hit += 1
        return hit

    def renewed(self, sj: SimJob, job: Job) -> None:
        """``sj``'s job is now ``job`` (a changed state), in the queue's view too."""
        old, sj.job = sj.job, job
        i = bisect.bisect_left(self.pending, sj.qkey)
        if i < len(self.pending) and self.pending[i] == sj.qkey:
            self._pending_jobs[i] = job
            self._pending_view = None
            self._by_submit.remove(old.request)
            self._by_submit.add(job.request)
            self._queue_facts.remove(old)
            self._queue_facts.add(job)

    # -- spot capacity (capacity.py) -------------------------------------------------------------
    def _reclaim(self, node: str, now: float) -> bool:
        """The provider reclaims spot ``node``: its jobs get the notice as grace (a panic
        checkpoint if it covers the save), the node is away until notice + down time."""
        cap = self.capacity
        if not self.running:  # nothing runs: the process waits for the next start (and the
            cap.paused.add(node)  # replay can end when nothing else is left to happen)
            return False
        self.withdraw(node, now, cap.notice_s)
        self.events.at(now + cap.notice_s + cap.down_s, SPOT_RETURN, node, 0)
        return True

    def _returned(self, node: str, now: float) -> bool:
        cap = self.capacity
        self.back((node,))
        if self.running:
            self.events.at(cap.next_reclaim(node, now), SPOT_RECLAIM, node, 0)
        else:
            cap.paused.add(node)
        return True


__all__ = ["COMPLETE", "KILL", "LINK", "EventSink", "SimBackend", "SimConfig"]
