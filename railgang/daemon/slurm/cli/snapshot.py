"""Typed Slurm records -> the decision core's immutable :class:`Snapshot` (pure, no I/O).

Which jobs are railgang's: those whose AdminComment carries a valid ``railgang:`` tag. Pending
ones that wait on the lease (or that Slurm would run natively after a lease lapsed) form the
core's queue; running ones become :class:`RunningJob` with their exact assignment. Every other
job is invisible to the core except that the GPUs it holds are not free.

The core's job and node types are built in exactly one function each (:func:`core_job`,
:func:`core_running`, :func:`core_node`), so a change of those types touches one place here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from railgang.daemon.backend import HeldBack
from railgang.daemon.core.model.job import Job, JobRequest, JobState, PriorityClass, RunningJob
from railgang.daemon.core.model.needs import Needs
from railgang.daemon.core.model.room import Room
from railgang.daemon.core.model.snapshot import Account, Node, NodeState, Snapshot, make_snapshot
from railgang.daemon.slurm.cli.class_grants import ClassGrants
from railgang.daemon.slurm.cli.commands import hosts
from railgang.daemon.slurm.cli.facts import facts_from_slurm, tier_from_features
from railgang.daemon.slurm.cli.parse import RailgangTag
from railgang.daemon.slurm.cli.records import ShareRow, SinfoNode, SqueueJob
from railgang.daemon.slurm.cli.rules import (
    ANYWHERE,
    Places,
    Where,
    left_to_slurm,
    limit_reason,
    rooms,
    waits_on,
)
from railgang.daemon.slurm.cli.sharing import hold_shared_gpus, shared_gpus_rule

# pending reasons under which a railgang job is the daemon's to place: waiting on its lease, or
# already eligible under plain Slurm (a lapsed lease the daemon takes back by renewing it). Held,
# dependent or invalid jobs are not placeable, whoever schedules them.
QUEUE_REASONS = frozenset({"BeginTime", "None", "Priority", "Resources", "ReqNodeNotAvail"})
# a job railgang started (lease ended, pinned to its nodes by ReqNodeList) gets this long to be
# run by Slurm before it counts as waiting again (pinned to a node that went away, say)
STARTING_GRACE_S = 120.0
TAG_FEATURE_PREFIX = "rg_"  # TagNode("n07", "lame") is node feature rg_lame


@dataclass(frozen=True, slots=True)
class Observation:
    """A snapshot plus what the backend itself needs from the same read."""

    snapshot: Snapshot
    jobs: Mapping[str, SqueueJob]  # every active/pending job by id (railgang or not)
    nodes_raw: Mapping[str, SinfoNode] = field(default_factory=dict)  # sinfo's view, by name
    skipped: tuple[str, ...] = ()  # one line per record left out, and why
    leased: tuple[str, ...] = field(default=())  # pending railgang jobs in the queue
    # Slurm's own rules (rules.py): waiting jobs left to Slurm, and those waiting on their
    # dependency (leased, out of the queue), each with why
    left: Mapping[str, str] = field(default_factory=dict)
    waits: Mapping[str, str] = field(default_factory=dict)
    started: frozenset[str] = frozenset()  # railgang jobs started, not run by Slurm yet (starting)


def core_job(rec: SqueueJob, tag: RailgangTag, now: float, after_fault: bool = False,
             where: Where = ANYWHERE, attained_gpu_s: float = 0.0) -> Job:
    """The core's :class:`Job` for a railgang job (raises ValueError if the sizes disagree);
    ``after_fault``: a node failure requeued it (``failures.py``); ``where``: the nodes Slurm's
    own rules let it use (``rules.py``), which narrow its needs; ``attained_gpu_s``: its GPU-seconds
    over every run, from Slurm (``attained.py``)."""
    per_replica = tag.tp * tag.pp
    gpus = per_replica * tag.dp if tag.dp is not None else rec.gpus_requested
    request = JobRequest(
        job_id=rec.job_id,
        gpus=gpus,
        account=rec.account,
        submit_time=rec.submit_time,
        tp=tag.tp,
        pp=tag.pp,
        elastic_min=tag.elastic[0] if tag.elastic else None,
        elastic_max=tag.elastic[1] if tag.elastic else None,
        priority_class=tag.priority_class,
        needs=_needs(tag, rec, where),
        serving=tag.serving if tag.priority_class == 0 else "",  # a replica is class 0
        time_limit_s=rec.time_limit_s,
        model=rec.name,
    )
    # every requeue (a railgang preemption or grow, a node failure) bumps Slurm's restart count
    return Job(request, JobState(preemptions=rec.restarts,
                                 work_remaining_s=_work_left(rec, request, now),
                                 after_fault=after_fault, attained_gpu_s=attained_gpu_s))


def _needs(tag: RailgangTag, rec: SqueueJob, where: Where) -> Needs:
    """The tag's needs, narrowed by Slurm's own rules (where it may run, what it asks of a node)."""
    if where[0] is None and rec.ask.empty:
        return tag.needs
    if where[0] is None:
        return dataclasses.replace(tag.needs, ask=rec.ask)
    return dataclasses.replace(tag.needs, nodes=where[0], where=where[1], ask=rec.ask)


def _work_left(rec: SqueueJob, request: JobRequest, now: float) -> float | None:
    """Seconds of work left at the requested size, from the training helper's progress report
    (total steps and step time); the step time was measured at the size the job holds now.

    The report is the user's own Comment (docs/security.md, "Progress reports"): it counts only
    for a RUNNING job, and never for more than the job's time limit leaves of this run, so a
    forged report can neither move a pending job in the queue nor stretch a running one past
    what Slurm will let it run."""
    left = rec.progress.remaining_s if rec.progress is not None else None
    if left is None or rec.state != "RUNNING":
        return None
    if rec.time_limit_s is not None:
        left = min(left, max(0.0, rec.time_limit_s - max(0.0, now - rec.start_time)))
    held = sum(len(idx) for _, idx in rec.allocation)
    replicas = held // (request.tp * request.pp)
    return left * (request.rate(replicas) if replicas else 1.0)


def core_running(rec: SqueueJob, tag: RailgangTag, job: Job) -> RunningJob:
    """The core's :class:`RunningJob`: exact node -> GPU indices, replicas from the GPUs held."""
    assignment = {node: idx for node, idx in rec.allocation if idx}
    held = sum(len(idx) for idx in assignment.values())
    preempt = tag.preempt if tag.preempt and tag.preempt.restarts == rec.restarts else None
    # a shrink in its notice is in flight as a preemption is: the core neither resizes nor evicts
    # it again, and the GPUs it will give up stay its own until Slurm has dropped them
    shrink = tag.shrink if tag.shrink and tag.shrink.restarts == rec.restarts and not preempt else None
    return RunningJob(
        job=job,
        assignment=assignment,
        start_time=rec.start_time,
        replicas=held // job.replica_gpus,
        last_resize_time=rec.resize_time or None,
        preempt_deadline=preempt.deadline if preempt else shrink.deadline if shrink else None,
        shrink_to=sum(g for _, g in shrink.target) // job.replica_gpus if shrink else None,
    )


def core_node(rec: SinfoNode, room: Room | None = None) -> Node:
    """The core's :class:`Node`; railgang tags are the node's ``rg_*`` features, its GPU facts
    come from the typed GRES and the other features (``facts.py``)."""
    tags = frozenset(f[len(TAG_FEATURE_PREFIX):] for f in rec.features if f.startswith(TAG_FEATURE_PREFIX))
    return Node(name=rec.name, gpus=rec.gpus, state=NodeState.parse(rec.state), tags=tags,
                facts=facts_from_slurm(rec.gres, rec.features), tier=tier_from_features(rec.features),
                room=room)


def core_account(row: ShareRow) -> Account:
    # RawUsage is decayed TRES-billing-seconds (GPU weight from TRESBillingWeights), the closest
    # thing Slurm keeps to decayed GPU-seconds
    return Account(name=row.account, share=row.norm_shares, usage_gpu_s=row.raw_usage)


def regrowing(rec: SqueueJob, now: float) -> bool:
    """Requeued by railgang to grow (its grow mark is from the run before): it is pinned to its
    new size and must not be placed again; the requeue's own BeginTime is ended on a later
    snapshot (``apply.due``), since Slurm sets it only once the old run has ended."""
    grow = rec.tag.grow if rec.tag is not None else None
    return (rec.pending and grow is not None and grow.restarts + 1 == rec.restarts
            and now < rec.submit_time + 2 * STARTING_GRACE_S)


def starting(rec: SqueueJob, now: float, over: Container[str] = frozenset()) -> bool:
    """Started by railgang a moment ago: lease ended, pinned to nodes, not yet running. Not
    one Slurm holds on a QOS or association limit: Slurm says it will not run it now (it is
    left to Slurm at once, ``_kept_out``); not one its owner or an admin holds (``scontrol
    hold``): Slurm will not run it until released, so its GPUs are free at once and it is not
    placed again meanwhile; not one in ``over``: pinned where its own rules no longer let it run
    (``Places.allows``), so Slurm never will, and it waits again at once."""
    pinned = (rec.pending and rec.tag is not None and bool(rec.required_nodes)
              and rec.eligible_time <= now < rec.eligible_time + STARTING_GRACE_S
              and not limit_reason(rec.reason) and not on_hold(rec) and rec.job_id not in over)
    return pinned or regrowing(rec, now)


def free_gpus(nodes: Iterable[SinfoNode], jobs: Iterable[SqueueJob], now: float,
              over: Container[str] = frozenset()) -> dict[str, frozenset[int]]:
    """GPU indices no job holds, on nodes that can run work (drained/down nodes get none).

    GPUs of a job that is :func:`starting` count as taken already (the lowest free indices of
    its pinned nodes): Slurm is about to run it there, so the core must not plan them twice.
    """
    gpus = {n.name: n.gpus for n in nodes}
    used: dict[str, set[int]] = {}
    for job in jobs:
        if job.active and job.shares_gpus:  # one GPU a node unless Slurm names them (sharing.py)
            hold_shared_gpus(job.allocation, gpus, used)
        elif job.active:
            for node, idx in job.allocation:
                used.setdefault(node, set()).update(range(gpus.get(node, 0)) if job.alloc_problem else idx)
    for job in jobs:
        if starting(job, now, over):
            per_node = -(-job.gpus_requested // max(1, len(job.required_nodes)))
            for node in job.required_nodes:
                taken = used.setdefault(node, set())
                spare = [g for g in range(gpus.get(node, 0)) if g not in taken]
                taken.update(spare[:per_node])
    return {n.name: frozenset(range(n.gpus)) - used.get(n.name, set())
            for n in nodes if n.state.usable}


def build_observation(now: float, jobs: Iterable[SqueueJob], nodes: Iterable[SinfoNode], fabric: Any,
                      shares: Iterable[ShareRow] = (), skipped: Iterable[str] = (),
                      pricing: Callable[[Iterable[tuple[str, str]]], Mapping[str, Any]] | None = None,
                      *, lease_s: float = 0.0, grants: ClassGrants | None = None,
                      after_fault: frozenset[str] = frozenset(),
                      memo: JobMemo | None = None, pinned: frozenset[str] | None = None,
                      attained: Mapping[str, float] | None = None) -> Observation:
    """Everything the core sees, from one read of squeue, sinfo and sshare. ``pricing``: the
    tiers' terms of the cluster's (GPU type, tier) pools (``facts.tier_terms``); ``lease_s``: the
    lease the backend renews (a job with a later ``--begin`` joins the renewals one lease before
    it); ``grants``: the class grants now (a class 0-2 job no longer granted to its account, user
    or QOS is scheduled as class 3; None: not checked); ``after_fault``: waiting jobs a node
    failure requeued (first in their class); ``memo``: the backend's :class:`JobMemo` (a waiting
    job whose record is unchanged keeps its core Job); ``pinned``: jobs the backend started (any
    other ``ReqNodeList`` is a user's ``--nodelist``: ``rules.py``; None: all are railgang's);
    ``attained``: GPU-seconds per job id over every run (``attained.py``; absent: 0)."""
    job_list, node_list = list(jobs), list(nodes)
    notes = list(skipped)
    pending: list[Job] = []
    running: list[RunningJob] = []
    begins: list[str] = []  # waiting for the user's --begin, inside one lease of it
    left: dict[str, str] = {}
    waits: dict[str, str] = {}
    places = Places(node_list)
    over = frozenset(j.job_id for j in job_list if starting(j, now) and not places.allows(j))
    lease_s = max(0.0, lease_s)
    for rec in job_list:
        tag = rec.tag
        if tag is None:
            continue
        if rec.pending and tag.begin is not None and tag.begin > now:
            # the user asked for a later start: not the core's to place yet; its lease is
            # renewed only once renewing cannot pull its begin time forward (now + lease >= begin)
            if now + lease_s >= tag.begin and rec.reason.split(",")[0] in QUEUE_REASONS:
                begins.append(rec.job_id)
            continue
        if rec.pending and tag.priority_class < 3 and grants is not None and not grants.allows(
                tag.priority_class, rec.account, rec.user, rec.qos):
            notes.append(_ungranted(rec, tag))
            tag = dataclasses.replace(tag, priority_class=PriorityClass.BATCH)
        if rec.pending and _kept_out(rec, now, pinned, left, waits, over):
            if rec.job_id in waits:
                begins.append(rec.job_id)  # its lease is kept until Slurm says it is met
            continue
        if rec.pending and _not_now(rec, now, over):  # held, invalid, or just started: not the core's now
            begins += [rec.job_id] if on_hold(rec) else []  # (leased, so railgang places it once released)
            continue
        if (not rec.pending and not rec.active) or rec.alloc_problem or (rec.active and rec.shares_gpus):
            continue  # a running job sharing GPUs is Slurm's (sharing.py); free_gpus holds its GPUs
        if rec.pending and (tag.dp is not None or tag.elastic) and not rec.asks_gpus:
            # job_submit.lua refuses such a job; one tagged before it did (or by hand) would be
            # counted tp x pp x dp GPUs Slurm never gives it: not the core's, and not leased
            notes.append(f"job {rec.job_id}: tagged with a parallel shape but asks Slurm for no "
                         "GPUs; skipped by railgang (resubmit with --gpus)")
            continue
        try:
            fault = rec.pending and rec.job_id in after_fault
            where = places.of(rec) if rec.pending else ANYWHERE
            served = attained.get(rec.job_id, 0.0) if attained is not None else 0.0
            job = (memo.job(rec, tag, fault, where, served) if memo is not None and rec.pending
                   else core_job(rec, tag, now, fault, where, served))
            if rec.pending:
                pending.append(job)
            elif rec.state == "RUNNING":
                run = core_running(rec, tag, job)
                if run.replicas < 1:
                    raise ValueError(f"holds {run.gpus} GPUs, less than one replica ({job.replica_gpus})")
                running.append(run)
        except ValueError as exc:
            notes.append(f"job {rec.job_id}: {exc}; skipped by railgang")
    pending.sort(key=lambda j: (j.submit_time, _id_key(j.job_id)))
    room = rooms(node_list, begun := [j for j in job_list if starting(j, now, over)])
    if memo is not None:
        memo.keep({j.job_id for j in pending})
    snapshot = make_snapshot(
        now=now, fabric=fabric, nodes=[core_node(n, room.get(n.name)) for n in node_list],
        free=free_gpus(node_list, job_list, now, over), running=running, pending=pending,
        accounts=[core_account(r) for r in shares],
    )
    if pricing is not None:
        tiers = pricing({(n.facts.gpu_type, n.tier) for n in snapshot.nodes.values()})
        if tiers:
            snapshot = snapshot.replace(tiers=tiers)
    return Observation(snapshot=snapshot, jobs={j.job_id: j for j in job_list},
                       nodes_raw={n.name: n for n in node_list}, skipped=tuple(notes),
                       leased=(*(j.job_id for j in pending), *begins), left=left, waits=waits,
                       started=frozenset(j.job_id for j in begun))


def _ungranted(rec: SqueueJob, tag: RailgangTag) -> str:
    return (f"job {rec.job_id}: class {tag.priority_class} is not granted to account "
            f"{rec.account!r}, user {rec.user!r} or QOS {rec.qos!r} (revoked, or the job was "
            "moved); scheduled as class 3 (batch)")


def on_hold(rec: SqueueJob) -> bool:
    """Held by its owner or an admin (``scontrol hold``: JobHeldUser, JobHeldAdmin): Slurm runs
    it only once released, so it is neither placed nor counted as starting meanwhile; its lease
    is kept, so once released it is railgang's to place, not Slurm's at its next pass."""
    return rec.reason.startswith("JobHeld")


def held_for_slurm(obs: Observation) -> list[HeldBack]:
    """The waiting railgang jobs out of the core's queue for Slurm's sake, for ``explain``: those
    waiting on their dependency, those railgang started that Slurm has not run yet, and those
    on hold (before, ``explain`` said ``gone`` of the last two)."""
    out = []
    holds = sorted(j.job_id for j in obs.jobs.values() if j.pending and j.tag is not None and on_hold(j))
    for job_id, why, kind in [*((j, w, "dependency") for j, w in obs.waits.items()),
                              *((j, "", "starting") for j in sorted(obs.started)),
                              *((j, "", "held") for j in holds)]:
        rec = obs.jobs.get(job_id)
        if rec is None or rec.tag is None:
            continue
        if kind == "starting":
            where = (f"pinned to {hosts(rec.required_nodes)}" if rec.required_nodes
                     else "requeued at its new size")
            why = f"{where}; squeue's reason {rec.reason}"
        elif kind == "held":
            why = f"squeue's reason {rec.reason}"
        out.append(HeldBack(
            job_id=job_id, account=rec.account, priority_class=int(rec.tag.priority_class),
            gpus=rec.gpus_requested, needed=rec.gpus_requested, refusals=0, reason=why,
            sits_out=0, left_to_slurm=False, kind=kind))
    return out


def refused_pin(rec: SqueueJob) -> bool:
    """Whether Slurm says it will not run a waiting job where it is pinned: priority 0 or a
    reason that is not a queue reason (22.05: BadConstraints). Only then is the record of a job
    railgang started read again (an ``--exclude`` list changed since: ``Places.allows``); a job
    about to run costs no read."""
    return rec.priority == 0 or rec.reason.split(",")[0] not in QUEUE_REASONS


def exclude_reads(jobs: Iterable[SqueueJob], full: Container[str], started: Container[str]) -> list[str]:
    """The waiting railgang jobs whose ``--exclude`` list the narrow read reads with ``-o %x``
    (no narrow form has it: narrow.py): those no full read saw (``full``), and those this
    process ``started`` that Slurm will not run (:func:`refused_pin`), whose list an owner may
    have changed since the record the Start was planned on (``Places.allows``)."""
    return [j.job_id for j in jobs if j.pending and j.tag is not None and (
        j.job_id not in full or (j.job_id in started and refused_pin(j)))]


def _not_now(rec: SqueueJob, now: float, over: frozenset[str]) -> bool:
    """Whether waiting ``rec`` is not the core's to place this cycle: held (priority 0), under a
    reason that is not a queue reason, or just started. A job in ``over`` is placed anew:
    Slurm's BadConstraints (22.05: priority 0) is of railgang's own pin, which its Start replaces."""
    return rec.job_id not in over and (refused_pin(rec) or starting(rec, now))


def _kept_out(rec: SqueueJob, now: float, pinned: frozenset[str] | None,
              left: dict[str, str], waits: dict[str, str], over: frozenset[str]) -> bool:
    """Whether Slurm's own rules keep waiting ``rec`` out of the core's queue (``rules.py``):
    a rule railgang does not model (into ``left``: the backend releases its lease), or an unmet
    dependency (into ``waits``: it holds no GPUs in the plan, its lease is kept)."""
    if rec.reason == "DependencyNeverSatisfied" or starting(rec, now, over):
        return False
    if rec.shares_gpus and rec.reason in QUEUE_REASONS:  # GPU shards are Slurm's (sharing.py)
        left[rec.job_id] = shared_gpus_rule(rec.shares_gpus)
        return True
    why = left_to_slurm(rec, pinned) if rec.reason in QUEUE_REASONS or limit_reason(rec.reason) else ""
    if why:
        left[rec.job_id] = why
        return True
    why = waits_on(rec) if rec.reason in QUEUE_REASONS or rec.reason == "Dependency" else ""
    if why:
        waits[rec.job_id] = why
    return bool(why)


class JobMemo:
    """The core Jobs of the last cycle's waiting jobs, kept by the backend (STYLE 20): a waiting
    job's Job depends only on its record, its tag and its fault mark (not on the time), so while
    22.05's narrow read hands back the same record object (its squeue line did not change), the
    Job is reused instead of rebuilt (10,000 waiting jobs: about 0.2 CPU s a cycle).
    ``test_a_memo_gives_what_a_plain_rebuild_gives`` compares it with building every Job."""

    def __init__(self) -> None:
        self._jobs: dict[str, tuple[SqueueJob, RailgangTag, bool, Job, Where, float]] = {}

    def job(self, rec: SqueueJob, tag: RailgangTag, fault: bool, where: Where = ANYWHERE,
            attained: float = 0.0) -> Job:
        hit = self._jobs.get(rec.job_id)
        if (hit is not None and hit[0] is rec and hit[1] == tag and hit[2] == fault
                and hit[4] == where and hit[5] == attained):
            return hit[3]
        job = core_job(rec, tag, 0.0, fault, where, attained)  # a waiting job's Job reads no time
        self._jobs[rec.job_id] = (rec, tag, fault, job, where, attained)
        return job

    def keep(self, job_ids: set[str]) -> None:
        """Forget every job not waiting in this cycle."""
        self._jobs = {j: v for j, v in self._jobs.items() if j in job_ids}


def _id_key(job_id: str) -> tuple[int, str]:
    return (int(job_id), job_id) if job_id.isdigit() else (1 << 62, job_id)


__all__ = [
    "QUEUE_REASONS",
    "STARTING_GRACE_S",
    "TAG_FEATURE_PREFIX",
    "JobMemo",
    "Observation",
    "build_observation",
    "core_account",
    "core_job",
    "core_node",
    "core_running",
    "exclude_reads",
    "free_gpus",
    "held_for_slurm",
    "on_hold",
    "refused_pin",
    "regrowing",
    "starting",
]
