"""Carry out the decision core's actions on Slurm with a constant number of processes.

One apply runs at most: one ``scontrol`` reading every per-job update on stdin (Starts, shrinks,
priorities, preemption marks), one ``scancel --signal`` for all checkpoint signals, one
``scontrol update nodename=...`` per node action (rare), and the requeues that fall due
(:func:`finish_due`). A refusal is an :class:`ActionResult` with ``ok=False`` and Slurm's own
one-line message; nothing here raises for a refused action.

Preemption and grow are two-phase and restart-safe: the first apply sends the checkpoint signal
and writes ``preempt=DEADLINE@RESTARTS`` (or ``grow=...@TARGET``) into the job's AdminComment;
whichever backend instance observes the job after DEADLINE requeues it (and for a grow starts it
again at the new size). The mark is bound to the job's restart count, so it lapses once the job
was requeued, and nothing but Slurm has to remember it.

A shrink with a notice (``Resize.grace_s > 0``) is two-phase the same way: the checkpoint signal
and ``shrink=DEADLINE@RESTARTS@TARGET`` (the nodes it keeps: the new size, and when it applies,
which the training helper reads), then, after DEADLINE or as soon as the job's progress report
says it is ready for this notice, ``NodeList=`` the kept nodes (:func:`shrinks_due`). Until then
the snapshot shows the job in flight with every GPU it holds (``snapshot.core_running``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from railgang.daemon.backend import ActionResult, FollowUp
from railgang.daemon.core.model.actions import (
    Action,
    DrainNode,
    Migrate,
    Preempt,
    ReleaseBurnIn,
    Requeue,
    Resize,
    Resume,
    SetPriority,
    Start,
    SubmitBurnIn,
    TagNode,
)
from railgang.daemon.failures.advice import advised_interval_s
from railgang.daemon.slurm.cli import commands as cmd
from railgang.daemon.slurm.cli.parse import Pending, RailgangTag
from railgang.daemon.slurm.cli.records import SqueueJob
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.daemon.slurm.cli.snapshot import TAG_FEATURE_PREFIX, Observation, regrowing

log = logging.getLogger(__name__)

_SCANCEL_FAIL = re.compile(r"job id (\S+?):?\s+(.*)$", re.IGNORECASE)
DRAIN_PREFIX = "railgang: "


@dataclass(frozen=True, slots=True)
class ApplyConfig:
    lease_s: float = 120.0  # lease given back to a preempted (requeued) job
    resize_grace_s: float = 60.0  # checkpoint time before a grow requeues the job


def _refuse(action: Action, why: str) -> ActionResult:
    return ActionResult(action, False, why)


def _running_tagged(obs: Observation, job_id: str) -> tuple[SqueueJob, RailgangTag] | str:
    rec = obs.jobs.get(job_id)
    if rec is None:
        return f"job {job_id} is not in Slurm's queue (finished or cancelled?)"
    if rec.state != "RUNNING" or rec.tag is None:
        return f"job {job_id} is {rec.state}{'' if rec.tag else ' and not a railgang job'}; only running railgang jobs can be signalled or resized"
    return rec, rec.tag


def _node_problem(obs: Observation, nodes: Sequence[str]) -> str | None:
    for node in nodes:
        if not cmd.valid_node(node):
            return f"node name {node!r} is not a Slurm node name"
        info = obs.snapshot.nodes.get(node)
        if info is None:
            return f"node {node} is not in sinfo"
        if not info.state.usable:
            return f"node {node} is {info.state.value}; it takes no new work"
    return None


def _shrink_nodes(rec: SqueueJob, action: Resize) -> list[str] | str:
    """The NodeList for a shrink in place, or why Slurm 22.05 cannot do this one."""
    current = dict(rec.allocation)
    new = dict(action.assignment)
    if not set(new) <= set(current):
        return f"shrink of job {rec.job_id} names nodes it does not hold: {sorted(set(new) - set(current))}"
    for node, idx in new.items():
        if len(idx) != len(current[node]):
            return (f"job {rec.job_id}: Slurm 22.05 shrinks by whole nodes only ({node} would keep "
                    f"{len(idx)} of {len(current[node])} GPUs)")
    keep = [n for n, _ in rec.allocation if n in new]
    if rec.batch_host and rec.batch_host not in keep and keep:
        # Slurm refuses to drop the node running the batch script: keep it instead of the last
        keep[-1] = rec.batch_host
    return keep


class _Batch:
    """What one apply sends, and which action owns which part."""

    def __init__(self) -> None:
        self.script = cmd.ScontrolScript()
        self.signals: list[tuple[str, int]] = []  # (job id, action index)
        self.node_ops: list[tuple[list[str], int]] = []
        self.results: dict[int, ActionResult] = {}
        self.notes: dict[int, str] = {}


def apply_actions(runner: SlurmRunner, obs: Observation, actions: Sequence[Action], now: float,
                  config: ApplyConfig,
                  hands: Callable[[Mapping[int, Action]], Mapping[int, ActionResult]] | None = None,
                  ) -> list[ActionResult]:
    """Apply ``actions`` (one result each, same order) against the state seen in ``obs``.
    ``hands``: the failure step's actions (requeues, burn-ins, resumes: ``failures.py``),
    carried out after the node drains (a flaky node is drained before its old reservation
    goes); None: refused, failures are off."""
    b = _Batch()
    theirs = {i: a for i, a in enumerate(actions) if isinstance(a, Requeue | SubmitBurnIn | ReleaseBurnIn | Resume)}
    for i, action in enumerate(actions):
        if i in theirs:
            continue
        problem = _plan(b, i, action, obs, now, config)
        if problem is not None:
            b.results[i] = _refuse(action, problem)
    _run_script(runner, b, actions)
    _run_signals(runner, b, actions)
    for argv, i in b.node_ops:
        res = runner.attempt(argv)
        if not res.ok:
            b.results[i] = _refuse(actions[i], res.message)
    if theirs:
        b.results.update(hands(theirs) if hands is not None else {
            i: _refuse(a, "failure handling is off ([failures] enabled = false)")
            for i, a in theirs.items()})
    return [b.results.get(i) or ActionResult(a, True, b.notes.get(i, "")) for i, a in enumerate(actions)]


def _advice(obs: Observation, rec: SqueueJob | None, action: Start) -> list[str]:
    """The Young–Daly interval for the nodes it starts on, into the job's tag (failures/advice.py;
    the training helper reads it back); nothing for a job without a tag."""
    if rec is None or rec.tag is None:
        return []
    job = next((j for j in obs.snapshot.pending if j.job_id == action.job_id), None)
    if job is None:
        return []
    ckpt = advised_interval_s(job.checkpoint_cost_s, action.assignment, obs.snapshot.fabric)
    if ckpt is None or ckpt == rec.tag.ckpt:
        return []
    return [f"AdminComment={dataclasses.replace(rec.tag, ckpt=ckpt).render()}"]


def _plan(b: _Batch, i: int, action: Action, obs: Observation, now: float, config: ApplyConfig) -> str | None:
    job_id = getattr(action, "job_id", None)
    if job_id is not None and not cmd.valid_job_id(job_id):
        return f"job id {job_id!r} is not a Slurm job id"
    if isinstance(action, Start):
        if not action.assignment:
            return "empty assignment"
        problem = _node_problem(obs, list(action.assignment))
        if problem:
            return problem
        rec = obs.jobs.get(action.job_id)
        if rec is not None and not rec.pending:
            return f"job {action.job_id} is {rec.state}, not pending"
        b.script.add(action.job_id, [*cmd.start_fields(action.assignment, rec.gpu_type if rec else ""),
                                        *_advice(obs, rec, action)], i)
        if len({len(g) for g in action.assignment.values()}) > 1:
            b.notes[i] = "unequal GPUs per node: asked Slurm for the total, Slurm picks the split"
    elif isinstance(action, Resize):
        return _plan_resize(b, i, action, obs, now, config)
    elif isinstance(action, Preempt | Migrate):  # a migration is checkpoint + requeue here: the
        found = _running_tagged(obs, action.job_id)  # core places the requeued job again itself
        if isinstance(found, str):
            return found
        rec, tag = found
        mark = Pending(now + max(0.0, action.grace_s), rec.restarts)
        b.script.add(rec.job_id, [f"AdminComment={dataclasses.replace(tag, preempt=mark).render()}"], i)
        b.signals.append((rec.job_id, i))
    elif isinstance(action, SetPriority):
        b.script.add(action.job_id, [f"Priority={max(1, int(action.priority))}"], i)
    elif isinstance(action, DrainNode):
        if not cmd.valid_node(action.node):
            return f"node name {action.node!r} is not a Slurm node name"
        reason = " ".join(action.reason.split()) or "unspecified"
        reason = reason if reason.startswith(DRAIN_PREFIX.strip()) else DRAIN_PREFIX + reason
        b.node_ops.append((cmd.drain_argv(action.node, reason), i))
    elif isinstance(action, TagNode):
        if not cmd.valid_node(action.node) or not cmd.valid_tag(action.tag):
            return f"tag {action.tag!r} on {action.node!r}: tags are 1-40 letters, digits, _ or -"
        raw = obs.nodes_raw.get(action.node)
        if raw is None:
            return f"node {action.node} is not in sinfo"
        feature = TAG_FEATURE_PREFIX + action.tag
        if action.remove:  # the links were repaired: the node takes gangs again
            if feature not in raw.features:
                b.notes[i] = "not tagged"
            else:
                b.node_ops.append((cmd.features_argv(action.node, raw.features - {feature}), i))
        elif feature in raw.features:
            b.notes[i] = "already tagged"
        else:
            b.node_ops.append((cmd.features_argv(action.node, raw.features | {feature}), i))
    else:  # pragma: no cover - the Action union is closed
        return f"unknown action {type(action).__name__}"
    return None


def _plan_resize(b: _Batch, i: int, action: Resize, obs: Observation, now: float,
                 config: ApplyConfig) -> str | None:
    """A grow (checkpoint + requeue), a shrink in place, or a shrink's notice."""
    found = _running_tagged(obs, action.job_id)
    if isinstance(found, str):
        return found
    rec, tag = found
    if tag.shrink is not None and tag.shrink.restarts == rec.restarts:  # in its notice
        b.notes[i] = f"already shrinking: due at {tag.shrink.deadline:.0f}"
        return None if action.gpus <= sum(n for _, n in tag.shrink.target) else \
            f"job {rec.job_id} is in a shrink notice until {tag.shrink.deadline:.0f}"
    if sum(len(g) for _, g in rec.allocation) < action.gpus:  # grow: checkpoint + requeue
        if tag.grow is not None and tag.grow.restarts == rec.restarts:
            # this run is already growing (the core asks again each cycle until the requeue):
            # marking it again would push the deadline out every cycle, and it would never come
            b.notes[i] = f"already growing: requeue due at {tag.grow.deadline:.0f}"
            return None
        problem = _node_problem(obs, list(action.assignment))
        if problem:
            return problem
        target = tuple((n, len(g)) for n, g in action.assignment.items())
        mark = Pending(now + config.resize_grace_s, rec.restarts, target)
        b.script.add(rec.job_id, [f"AdminComment={dataclasses.replace(tag, grow=mark).render()}"], i)
        b.signals.append((rec.job_id, i))
        b.notes[i] = f"grow by requeue: checkpoint signal now, restart on {action.gpus} GPUs after {config.resize_grace_s:g}s"
    else:
        keep = _shrink_nodes(rec, action)
        if isinstance(keep, str):
            return keep
        if set(keep) == {n for n, _ in rec.allocation}:
            b.notes[i] = "no change"
        elif action.grace_s > 0:  # the notice first; the shrink itself is finish_due's
            target = tuple((n, len(g)) for n, g in rec.allocation if n in keep)
            mark = Pending(now + action.grace_s, rec.restarts, target)
            b.script.add(rec.job_id, [f"AdminComment={dataclasses.replace(tag, shrink=mark).render()}"], i)
            b.signals.append((rec.job_id, i))
            b.notes[i] = (f"shrink notice: checkpoint signal now, shrink to {cmd.hosts(keep)} "
                          f"after {action.grace_s:g}s")
        else:
            b.script.add(rec.job_id, [f"NodeList={cmd.hosts(keep)}"], i)
            if set(keep) != set(action.assignment):
                b.notes[i] = f"kept batch host {rec.batch_host}: now on {cmd.hosts(keep)}"
    return None


def _run_script(runner: SlurmRunner, b: _Batch, actions: Sequence[Action]) -> None:
    if not b.script:
        return
    res = runner.attempt([cmd.SCONTROL], stdin=b.script.text)
    failed = cmd.failures_by_job(res.stderr)
    for job_id, i in b.script.owners:
        if i in b.results:
            continue
        if job_id in failed:
            b.results[i] = _refuse(actions[i], f"{failed[job_id]} (job {job_id})")
        elif not res.ok and not failed:
            b.results[i] = _refuse(actions[i], res.message)
    # a job whose mark was refused must not be signalled: nobody would requeue it
    b.signals = [(j, i) for j, i in b.signals if i not in b.results]


def _run_signals(runner: SlurmRunner, b: _Batch, actions: Sequence[Action]) -> None:
    if not b.signals:
        return
    res = runner.attempt(cmd.signal_argv([j for j, _ in b.signals]))
    failed: dict[str, str] = {}
    for line in res.stderr.splitlines():
        m = _SCANCEL_FAIL.search(line.strip())
        if m:
            failed[m.group(1)] = m.group(2)
    for job_id, i in b.signals:
        if job_id in failed:
            b.results[i] = _refuse(actions[i], f"signal: {failed[job_id]}")
        elif not res.ok and not failed:
            b.results[i] = _refuse(actions[i], f"signal: {res.message}")


def due(obs: Observation, now: float) -> tuple[list[SqueueJob], list[SqueueJob], list[SqueueJob]]:
    """Jobs with a second phase to run now: preemptions and grows whose grace has passed (marks
    of this run only), and grown jobs whose requeue is done but whose BeginTime still waits."""
    preempts, grows, regrows = [], [], []
    for rec in obs.jobs.values():
        tag = rec.tag
        if tag is None:
            continue
        if rec.state == "RUNNING":
            if tag.preempt and tag.preempt.restarts == rec.restarts and tag.preempt.deadline <= now:
                preempts.append(rec)
            elif tag.grow and tag.grow.restarts == rec.restarts and tag.grow.deadline <= now:
                grows.append(rec)
        elif regrowing(rec, now) and rec.eligible_time > now:
            regrows.append(rec)
    return preempts, grows, regrows


def died_of_the_signal(ended: Iterable[SqueueJob]) -> list[SqueueJob]:
    """Ended jobs whose run railgang signalled (a preemption or grow mark of this run) and that
    the checkpoint signal itself killed: a batch shell's default action on SIGUSR1 is to exit, so
    a script that neither ``exec``s its trainer nor traps the signal ends FAILED the moment it is
    signalled. Slurm can requeue an ended batch job; railgang must, or the job is lost."""
    number = getattr(signal, f"SIG{cmd.CHECKPOINT_SIGNAL}")
    return [r for r in ended if r.tag is not None and r.exit_signal == number
            and any(m is not None and m.restarts == r.restarts
                    for m in (r.tag.preempt, r.tag.grow, r.tag.shrink))]


def finish_due(runner: SlurmRunner, obs: Observation, now: float, config: ApplyConfig,
               ended: Iterable[SqueueJob] = ()) -> list[FollowUp]:
    """Second phases that fell due; one :class:`FollowUp` per job done or failed. ``ended``:
    jobs squeue still shows after they ended; those the checkpoint signal killed are requeued
    now.

    A preempted job is requeued; Slurm gives it a BeginTime about two minutes out (a lease the
    daemon then renews like any other). A growing job is requeued and pinned to its new nodes at
    its new size; once Slurm shows it pending again (a later snapshot: the requeue resets the
    BeginTime only when the old run has ended), its BeginTime is ended so it starts at once.
    """
    preempts, grows, regrows = due(obs, now)
    done: list[FollowUp] = []
    for rec in died_of_the_signal(ended):
        assert rec.tag is not None
        (preempts if rec.tag.preempt is not None or rec.tag.grow is None else grows).append(rec)
        log.warning("slurm: job %s: its batch script died of the checkpoint signal (SIG%s); "
                    "requeued now. Make the script exec its trainer or trap the signal "
                    "(docs/training.md)", rec.job_id, cmd.CHECKPOINT_SIGNAL)
    ids = [r.job_id for r in preempts + grows]
    failed: dict[str, str] = {}
    if ids:
        res = runner.attempt(cmd.requeue_argv(ids))
        failed = cmd.failures_by_job(res.stderr) if not res.ok else {}
        if not res.ok and not failed:
            failed = dict.fromkeys(ids, res.message)
        done += [FollowUp(j, "requeue", False, f"requeue failed: {m}") for j, m in failed.items()]
        done += [FollowUp(r.job_id, "requeue", True, "preempted, requeued")
                 for r in preempts if r.job_id not in failed]
    script = cmd.ScontrolScript()
    for rec in grows + regrows:
        if rec.job_id in failed or rec.tag is None or rec.tag.grow is None:
            continue
        target: Mapping[str, Sequence[int]] = {n: range(g) for n, g in rec.tag.grow.target}
        script.add(rec.job_id, cmd.start_fields(target, rec.gpu_type), 0)
    if script:
        started = runner.attempt([cmd.SCONTROL], stdin=script.text)
        bad = cmd.failures_by_job(started.stderr)
        done += [FollowUp(job_id, "restart", False, f"grow restart refused: {bad[job_id]}")
                 if job_id in bad else
                 FollowUp(job_id, "restart", True, "growing by requeue, pinned to its new size")
                 for job_id, _ in script.owners]
    done += _shrink(runner, [r for r in shrinks_due(obs, now) if r.job_id not in failed])
    for f in done:
        log.info("slurm: %s", f.line)
    return done


def shrinks_due(obs: Observation, now: float) -> list[SqueueJob]:
    """Running jobs whose shrink notice is over: its deadline passed, or the job's progress
    report says it is ready (``ready=`` this notice's deadline: an echo of an older notice does
    not count). The report is the user's (docs/security.md): it can only bring its own job's
    shrink forward, never another job's, and never delay one."""
    out = []
    for rec in obs.jobs.values():
        mark = rec.tag.shrink if rec.tag is not None else None
        if rec.state != "RUNNING" or mark is None or mark.restarts != rec.restarts:
            continue
        if mark.deadline <= now or (rec.progress is not None and rec.progress.ready == mark.deadline):
            out.append(rec)
    return out


def _shrink(runner: SlurmRunner, recs: Sequence[SqueueJob]) -> list[FollowUp]:
    """The second phase of noticed shrinks: the mark is cleared first (a refused shrink is not
    tried again every cycle: the core sees the job at its old size and decides anew), then
    Slurm drops the nodes it does not keep."""
    script = cmd.ScontrolScript()
    for rec in recs:
        assert rec.tag is not None and rec.tag.shrink is not None
        script.add(rec.job_id, [f"AdminComment={dataclasses.replace(rec.tag, shrink=None).render()}"], 0)
        script.add(rec.job_id, [f"NodeList={cmd.hosts(n for n, _ in rec.tag.shrink.target)}"], 1)
    if not script:
        return []
    res = runner.attempt([cmd.SCONTROL], stdin=script.text)
    bad = cmd.failures_by_job(res.stderr)
    if not res.ok and not bad:
        bad = {r.job_id: res.message for r in recs}
    return [FollowUp(r.job_id, "shrink", False, f"shrink refused: {bad[r.job_id]}") if r.job_id in bad
            else FollowUp(r.job_id, "shrink", True, f"shrunk after its notice to {len(r.tag.shrink.target)} node(s)")
            for r in recs if r.tag is not None and r.tag.shrink is not None]


__all__ = ["DRAIN_PREFIX", "ApplyConfig", "apply_actions", "died_of_the_signal", "due",
           "finish_due", "shrinks_due"]
