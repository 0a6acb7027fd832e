"""What the daemon does about failures (issue 20 item 2), decided as a pure function.

:func:`respond` takes what Slurm shows this cycle (jobs, nodes, the burn-in jobs' states) and
what the daemon remembered from the last cycle (:class:`Memory`), and returns the new memory and
a :class:`Response`: the adapter (``daemon/slurm/cli/failures.py``) carries it out and the
snapshot carries the marks. No I/O, no clock: the same inputs give the same answer.

1. **A job killed by a node failure.** Either Slurm requeued it (it ran last cycle, now waits
   with a higher restart count that no railgang preemption or grow explains, and one of the
   nodes it ran on failed: down, or drained by Slurm itself, rule 5), or it ended ``NODE_FAIL``
   and Slurm did not requeue it (``JobRequeue=0``): railgang requeues it, unless the user said ``--no-requeue``.
   Either way the job is marked ``after_fault`` until it runs again: the core orders it first in
   its priority class (``JobState.after_fault``), so it restarts at once, from its last
   checkpoint (the training helper resumes from it; docs/training.md).
2. **Flaky nodes.** Every such kill counts against the node(s) that failed (``flaky.py``): at
   ``count`` within ``window_s`` the node is drained with a ``railgang: flaky`` reason; once no
   job is left on it a burn-in job is submitted pinned to it; passed: resumed, failed: drained
   again and retried after ``retry_s``. A burn-in Slurm no longer shows (ended past
   ``MinJobAge`` unseen, cancelled by hand) counts as failed.
3. A kill is counted once: ``Memory.counted`` keeps the (job, restart count) pairs already seen,
   and never against a node for a run that started before the node's last passed burn-in (a
   restarted daemon, its memory lost, still sees those kills in squeue for ``MinJobAge``: it
   would drain a node that had just been cleared).
4. **A hung job** (an NCCL hang looks like this): a running railgang job whose last progress
   report of *this run* (sent at or after its start) is older than ``max(steps × step time,
   floor_s)`` (``detect.hung``) is requeued by railgang and marked ``after_fault``, so it
   restarts from its last checkpoint first in its class. A hang names no node, so it counts
   against none. A job that sends no reports, or reports without a step time, is never called
   hung (no evidence); a report from before a restart is not this run's.
5. **Someone else's drain** is theirs (issue 38 row 1). Who set a node's reason tells whose it
   is (sinfo's ``reason_set_by_user``, :func:`whose`): ``railgang:`` by the daemon's own user is
   railgang's; one Slurm set itself (by slurm.conf's ``SlurmUser``: ``Kill task failed``,
   ``Not responding``, ``Prolog error``...) is Slurm saying the node failed, a node failure like
   DOWN; anything else (an admin's ``maint: ...``, root's, a health check's) is theirs, also when
   the node then goes DOWN (Slurm keeps their reason). It is no failure: a job requeued while
   its node is theirs was requeued by its owner or an admin, not killed by the node (not
   counted, not ``after_fault``); a kill Slurm reports there (``NODE_FAIL``) is requeued as
   usual but not counted against the node. railgang never drains such a node over their
   reason, never burns it in (that resumes it), never resumes it, and a burn-in of its own that
   fails meanwhile only gives back its reservation (``RELEASE``): a node railgang holds as flaky
   waits until they resume it, then its burn-in runs. Where ``SlurmUser`` is root, root's
   reasons are Slurm's only in the words Slurm writes (:data:`SLURM_REASONS`): an admin's are
   root's too and cannot be told apart otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from railgang.daemon.failures.detect import RAILGANG_REASON, Fault, FaultKind, hung
from railgang.daemon.failures.facts import JobView, NodeView, Setters
from railgang.daemon.failures.flaky import (
    FlakyRules,
    FlakyState,
    NodeStatus,
    Step,
    StepKind,
    burn_in_done,
    burn_in_started,
    observe,
)

__all__ = ["SLURM_REASONS", "BurnIn", "HangRules", "JobView", "Memory", "NodeView", "Response",
           "Setters", "burn_in_refused", "burn_in_submitted", "drained_by_other", "respond", "whose"]

# Slurm job states that end a burn-in without passing it
BURN_IN_FAILED = frozenset({"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                            "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT"})
_WAITING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})


@dataclass(frozen=True, slots=True)
class HangRules:
    """When a running job's silence is a hang (``[failures] hang_*``, docs/failures.md)."""

    enabled: bool = True
    steps: float = 10.0  # silent for this many of its step times ...
    floor_s: float = 1800.0  # ... and at least this long (a checkpoint or a slow step is not one)


# how the reasons slurmctld sets itself begin (Slurm 22.05-26.05: ping, job kill, prolog/epilog,
# node registration): with SlurmUser root they are the only sign a root reason is Slurm's
SLURM_REASONS = ("Not responding", "Kill task failed", "Prolog error", "Epilog error",
                 "batch job complete failure", "Node unexpectedly rebooted", "Node silently failed",
                 "Low RealMemory", "Low TmpDisk", "Low CPUs", "Low socket*core*thread count",
                 "gres/", "Duplicate jobid", "NO NETWORK ADDRESS FOUND", "reboot timed out")


SLURM, RAILGANG, OTHER = "slurm", "railgang", "other"


def whose(node: NodeView, setters: Setters = Setters()) -> str:
    """Whose ``node``'s reason is: ``"slurm"`` (a node failure), ``"railgang"``, ``"other"``
    (theirs: module rule 5), ``""`` without a reason. A read that does not say who set it
    (``reason_by`` empty) goes by the words alone."""
    if not node.reason:
        return ""
    by = node.reason_by
    if node.reason.startswith(RAILGANG_REASON) and (
            not by or not setters.daemon_user or by == setters.daemon_user):
        return RAILGANG
    slurms_words = node.reason.startswith(SLURM_REASONS)
    if by and by == setters.slurm_user and (by != "root" or slurms_words):
        return SLURM
    return SLURM if not by and slurms_words else OTHER


def drained_by_other(node: NodeView, setters: Setters = Setters()) -> bool:
    """Drained or down with someone else's reason (module rule 5). An empty reason is no drain:
    a node inside a MAINT reservation reads ``drain`` too."""
    return node.state in ("drain", "down") and whose(node, setters) == OTHER


def _failed(node: NodeView, setters: Setters) -> bool:
    """Slurm says ``node`` failed: down with no one else's reason, or drained by Slurm."""
    owner = whose(node, setters)
    return (node.state == "down" and owner != OTHER) or (node.state == "drain" and owner == SLURM)


@dataclass(frozen=True, slots=True)
class BurnIn:
    job_id: str
    submitted_at: float


@dataclass(frozen=True)
class Memory:
    """What the daemon keeps between cycles (in memory; ``running``, ``counted`` and the flaky
    counts also in ``failures.memory_file``, failures/persist.py; docs/failures.md)."""

    running: Mapping[str, tuple[int, tuple[str, ...]]] = field(
        default_factory=lambda: MappingProxyType({}))  # job -> (restarts, nodes), last cycle
    after_fault: frozenset[str] = frozenset()  # requeued by a failure, not running again yet
    counted: frozenset[tuple[str, int]] = frozenset()  # (job, restarts) kills already counted
    flaky: FlakyState = field(default_factory=FlakyState)
    burn_ins: Mapping[str, BurnIn] = field(default_factory=lambda: MappingProxyType({}))
    # (job, restarts) of runs railgang requeued as hung: until Slurm acts the job still shows
    # that run (RUNNING, COMPLETING) and stays first in its class
    hung: frozenset[tuple[str, int]] = frozenset()


@dataclass(frozen=True)
class Response:
    requeue: tuple[str, ...] = ()  # ended NODE_FAIL and not requeued by Slurm, or hung: railgang does
    after_fault: frozenset[str] = frozenset()  # waiting jobs the core orders first in class
    faults: tuple[Fault, ...] = ()  # the kills seen this cycle (for the log and the journal)
    steps: tuple[Step, ...] = ()  # drain / burn_in / resume, in order
    held_out: tuple[str, ...] = ()  # nodes railgang keeps out of placement (flaky)


def respond(memory: Memory, jobs: Iterable[JobView], nodes: Mapping[str, NodeView],
            burn_in_states: Mapping[str, str], now: float,
            rules: FlakyRules, hangs: HangRules | None = None,
            setters: Setters = Setters()) -> tuple[Memory, Response]:
    """One cycle's answer to failures (the module docstring has the rules).

    ``burn_in_states``: Slurm's state of each burn-in job railgang submitted (absent: Slurm
    no longer shows it); ``setters``: who sets node reasons (rule 5)."""
    if not math.isfinite(now):
        raise ValueError(f"now {now!r}: expected a finite time")
    seen = list(jobs)
    failed_nodes = {n for n, v in nodes.items() if _failed(v, setters)}
    theirs = {n for n, v in nodes.items() if drained_by_other(v, setters)}
    faults: list[Fault] = []
    requeue: list[str] = []
    after = set(memory.after_fault)
    counted = set(memory.counted)
    hung_runs = set(memory.hung)
    cleared = _cleared(seen)
    for job in seen:
        key = (job.job_id, job.restarts)
        if job.state == "NODE_FAIL":
            if key in counted:
                continue
            counted.add(key)
            ran_on = job.nodes or memory.running.get(job.job_id, (0, ()))[1]
            faults += _kill(job, ran_on, failed_nodes, "ended NODE_FAIL", cleared)
            if job.may_requeue:
                requeue.append(job.job_id)
                if job.ours:
                    after.add(job.job_id)
        elif job.state in _WAITING and job.job_id in memory.running and key not in counted:
            restarts, ran_on = memory.running[job.job_id]
            down = [n for n in ran_on if n in failed_nodes]
            if job.restarts > restarts and not job.railgang_requeue and down:
                counted.add(key)
                faults += _kill(job, ran_on, failed_nodes, "requeued by Slurm: its node failed",
                                cleared)
                if job.ours:
                    after.add(job.job_id)
        elif hangs is not None and key not in counted and (
                fault := _hang(job, now, hangs)) is not None:
            counted.add(key)  # requeued once per run, however long Slurm takes to act
            hung_runs.add(key)
            faults.append(fault)
            requeue.append(job.job_id)
            after.add(job.job_id)
    state, now_runs = {j.job_id: j.state for j in seen}, {(j.job_id, j.restarts) for j in seen}
    hung_runs &= now_runs  # gone, or running again at a new restart count: done
    after = {j for j in after if state.get(j) in _WAITING or j in requeue
             or any(k[0] == j for k in hung_runs)}
    flaky, steps = observe(memory.flaky, ((now, f) for f in faults if f.node not in theirs),
                           now, rules)
    flaky, burn_ins, done = _burn_ins_ended(flaky, memory.burn_ins, burn_in_states, now, rules)
    steps = [s for s in steps if not (s.kind is StepKind.BURN_IN and (
        s.node in burn_ins or s.node in theirs
        or (nodes.get(s.node) is not None and nodes[s.node].busy)))]
    done = [_leave(s, nodes[s.node]) if s.node in theirs else s for s in done]
    live = {j.job_id for j in seen}
    new = Memory(
        running=MappingProxyType(_runs(memory, seen, counted)),
        after_fault=frozenset(after),
        counted=frozenset(k for k in counted if k[0] in live),
        flaky=flaky, burn_ins=MappingProxyType(burn_ins), hung=frozenset(hung_runs))
    return new, Response(requeue=tuple(requeue), after_fault=frozenset(after),
                         faults=tuple(faults), steps=(*steps, *done), held_out=flaky.held_out())


def _leave(step: Step, node: NodeView) -> Step:
    """A failed burn-in's drain on a node someone else drained meanwhile: their reason stays,
    railgang only gives back its reservation (a passed burn-in's RESUME only does that too)."""
    if step.kind is not StepKind.DRAIN:
        return step
    return Step(StepKind.RELEASE, step.node,
                f"{step.reason.split('; ')[-1]}; drained meanwhile by someone else "
                f"({node.reason[:80]}): left to them")


def _hang(job: JobView, now: float, rules: HangRules) -> Fault | None:
    """A hang of a running railgang job that may be requeued (module rule 4), else None."""
    if not (rules.enabled and job.state == "RUNNING" and job.ours and job.may_requeue):
        return None
    if job.progress is None or not job.progress[0] >= job.started_at:
        return None  # no report in this run (one left in the Comment from before a restart)
    sent, step, step_s = job.progress
    return hung(job.job_id, None, [(sent, step)], now, step_s, n=rules.steps,
                floor_s=rules.floor_s)


def _runs(memory: Memory, seen: list[JobView],
          counted: set[tuple[str, int]]) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Where each job runs, for the next cycle: a running job's nodes; a job on its way out of a
    run keeps the run it had until its kill is counted or it runs again, so a requeue seen in
    steps is still one (Slurm 22.05, a slurmd killed: RUNNING, then COMPLETING with the restart
    count already bumped, then PENDING)."""
    out: dict[str, tuple[int, tuple[str, ...]]] = {}
    for j in seen:
        prev = memory.running.get(j.job_id)
        if j.state == "RUNNING" and j.nodes:
            out[j.job_id] = (j.restarts, j.nodes)
        elif prev is not None and (j.job_id, j.restarts) not in counted:
            out[j.job_id] = prev
    return out


def _cleared(seen: Iterable[JobView]) -> dict[str, float]:
    """node -> start of its latest burn-in that passed (Slurm still shows it)."""
    out: dict[str, float] = {}
    for j in seen:
        if j.burn_in_of and j.state == "COMPLETED":
            out[j.burn_in_of] = max(out.get(j.burn_in_of, -math.inf), j.started_at)
    return out


def _kill(job: JobView, ran_on: Iterable[str], failed: set[str], what: str,
          cleared: Mapping[str, float]) -> list[Fault]:
    """One fault per node to blame: the nodes it ran on that failed (``_failed``); every node it
    ran on when none did (Slurm does not say which one failed). A node whose
    burn-in passed after this run started is not blamed again."""
    nodes = sorted(set(ran_on))
    blame = [n for n in nodes if n in failed] or nodes
    if not blame:
        return [Fault(FaultKind.NODE_FAIL, None, job.job_id, detail=what)]
    return [Fault(FaultKind.NODE_FAIL, n, job.job_id, detail=what) for n in blame
            if not job.started_at <= cleared.get(n, -math.inf)]


def _burn_ins_ended(flaky: FlakyState, burn_ins: Mapping[str, BurnIn], states: Mapping[str, str],
                    now: float, rules: FlakyRules) -> tuple[FlakyState, dict[str, BurnIn], list[Step]]:
    left: dict[str, BurnIn] = {}
    steps: list[Step] = []
    for node, b in sorted(burn_ins.items()):
        st = states.get(b.job_id)
        if flaky.status(node) is not NodeStatus.BURN_IN:
            continue  # forgotten meanwhile: nothing to wait for
        if st == "COMPLETED" or st is None or st in BURN_IN_FAILED:
            reason = flaky.nodes[node].reason
            flaky, resume = burn_in_done(flaky, node, st == "COMPLETED", now, rules)
            steps += resume or [Step(StepKind.DRAIN, node, _burn_in_failed(reason, b, st))]
        else:
            left[node] = b
    return flaky, left, steps


def _burn_in_failed(reason: str, b: BurnIn, state: str | None) -> str:
    """The drain reason after a failed burn-in: the first reason, and how the burn-in ended."""
    how = state.lower() if state else "gone from squeue"
    return f"{reason.split('; burn-in failed')[0]}; burn-in failed (job {b.job_id}: {how})"[:200]


def burn_in_submitted(memory: Memory, node: str, job_id: str, now: float) -> Memory:
    """The adapter submitted ``node``'s burn-in as ``job_id``."""
    burn_ins = dict(memory.burn_ins)
    burn_ins[node] = BurnIn(job_id, now)
    return Memory(memory.running, memory.after_fault, memory.counted,
                  burn_in_started(memory.flaky, node, now), MappingProxyType(burn_ins))


def burn_in_refused(memory: Memory, node: str, now: float, rules: FlakyRules) -> Memory:
    """Slurm refused ``node``'s burn-in (sbatch, the reservation): a failed burn-in, tried
    again after ``rules.retry_s`` (not every cycle)."""
    flaky, _ = burn_in_done(burn_in_started(memory.flaky, node, now), node, False, now, rules)
    return Memory(memory.running, memory.after_fault, memory.counted, flaky, memory.burn_ins)
