"""What ``railgang explain`` reads: one row per job, built from each cycle's decision.

For a waiting job: the core's reason code and detail, its 1-based position in the order the
cycle tried jobs in (priority class first, then the policy's rank), how many waiting jobs are
ahead, and what blocks it (the jobs being preempted for it, the backfill reservation holder, the
head of the queue). For a running job: its nodes and GPUs, and when railgang placed it, the
placement's locality cost, the leaf switches it spans and whether it is rail-aligned (the same
GPU indices on every node, so that cross-node traffic stays on one rail). :class:`Tracker`
writes only what changed since the previous cycle.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from railgang.daemon.backend import HeldBack
from railgang.daemon.core.model.actions import Preempt, Resize, Start
from railgang.daemon.core.model.fairshare import usage_rank
from railgang.daemon.core.model.plan import Plan
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.model.speed_fit import describe as describe_speed
from railgang.daemon.failures.rates import LLAMA3
from railgang.daemon.failures.young_daly import advise
from railgang.daemon.loop import CycleOutcome
from railgang.db.repositories.explanations import ExplanationRow
from railgang.topology import hostnames

# a waiting row's figures that move with other jobs (one start ahead moves every position behind
# it, the fair share decays each cycle, the estimate is re-simulated each interval): refreshed
# every Tracker.refresh_s, not each cycle, where the rest of the row is written as it changes
DRIFT = frozenset({"ahead", "free", "fair_share", "estimate"})


def _json(data: Mapping[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def placement(fabric: Any, assignment: Mapping[str, Sequence[int]]) -> dict[str, Any]:
    """Leaves spanned and rail alignment of an assignment (node -> GPU indices)."""
    nodes = sorted(assignment)
    leaf_of = getattr(fabric, "leaf_of", None)
    leaves = sorted({leaf_of(n) for n in nodes}) if callable(leaf_of) else []
    rails = {tuple(sorted(g)) for g in assignment.values()}
    return {"nodes": nodes, "gpus_per_node": {n: list(assignment[n]) for n in nodes},
            "leaves": leaves, "rail_aligned": len(rails) <= 1}


def build_rows(outcome: CycleOutcome, plan: Plan | None, policy: str,
               keep: Callable[..., bool] | None = None,
               estimates: Mapping[str, Mapping[str, Any]] | None = None,
               refused: Mapping[str, HeldBack] | None = None,
               stands: Callable[[str, str, float], bool] | None = None) -> list[ExplanationRow]:
    """Rows for every job of the cycle's snapshot (waiting and running). A running job this
    cycle did not touch, for which ``keep(job_id, nodes)`` says the stored row still holds, gets
    no row (building one for every running job each cycle is most of this step's cost). A
    waiting job's row carries its start-time estimate (``estimates``, from
    ``service/estimate.py``) under ``estimate`` when there is one. ``refused``: waiting jobs
    back in the queue after Slurm refused their Start (``slurm/cli/backoff.py``): their row
    keeps Slurm's line until a Start succeeds. A waiting job for which ``stands(job_id, steady,
    now)`` says its stored row stands (``Tracker.stands``) gets no row either."""
    snap = outcome.snapshot
    if snap is None:
        return []
    jobs = {j.job_id: j for j in snap.pending}
    started = {a.job_id: a for a in outcome.actions if isinstance(a, Start)}
    resized = {a.job_id: a for a in outcome.actions if isinstance(a, Resize)}
    ok = {id(r.action) for r in outcome.results if r.ok}
    victims: dict[str, list[str]] = {}
    for a in outcome.actions:
        if isinstance(a, Preempt) and a.for_job:
            victims.setdefault(a.for_job, []).append(a.job_id)
    order = [w.job_id for w in (plan.order if plan else ()) if w.job_id in jobs]
    # the cycle's own key: class, a job a node failure requeued first, then rank
    order.sort(key=lambda j: (jobs[j].priority_class, not jobs[j].state.after_fault))
    position = {j: i + 1 for i, j in enumerate(order)}
    reasons = {r.job_id: r for r in outcome.reasons}
    reserved = next((r.job_id for r in reasons.values() if r.code is Reason.RESERVED), None)
    rows: list[ExplanationRow] = []
    waiting_ahead = 0
    for job_id in order + [j for j in jobs if j not in position]:
        job = jobs[job_id]
        start = started.get(job_id)
        if start is not None and id(start) in ok:
            rows.append(_running_row(job_id, job.account, job.priority_class, start.assignment,
                                     snap.fabric, policy, start.cost, start.replicas, "started", job,
                                     now=snap.now))
            continue
        r = reasons.get(job_id)
        blocked_by = victims.get(job_id, [])
        if not blocked_by and r is not None and r.code in (Reason.PRIORITY, Reason.PREEMPTION_BUDGET):
            head = order[0] if order and order[0] != job_id else None
            blocked_by = [b for b in (reserved, head) if b and b != job_id][:1]
        data = {"needed": r.needed if r else job.min_gpus, "free": r.free if r else snap.free_gpus,
                "ahead": waiting_ahead, "blocked_by": blocked_by, "policy": policy,
                "mode": plan.mode if plan else None}
        if start is not None:
            data["start_refused"] = next((x.detail for x in outcome.results
                                          if x.action is start), "")
        elif refused is not None and job_id in refused:
            data["start_refused"] = refused[job_id].reason
            data["refusals"] = refused[job_id].refusals
        _own_facts(data, job, snap, estimates.get(job_id) if estimates is not None else None)
        reason, detail = (r.code.value, r.detail) if r else (None, "")
        steady = _steady(data, reason, detail)
        waiting_ahead += 1
        if stands is not None and stands(job_id, steady, snap.now):
            continue
        rows.append(ExplanationRow(
            job_id=job_id, state="waiting", account=job.account,
            priority_class=job.priority_class, gpus=job.gpus, reason=reason, detail=detail,
            position=position.get(job_id), queue_length=len(order), data=_json(data),
            steady=steady))
    for job_id, run in snap.running.items():
        rz = resized.get(job_id)
        if rz is not None and id(rz) in ok:
            rows.append(_running_row(job_id, run.job.account, run.priority_class, rz.assignment,
                                     snap.fabric, policy, None, rz.replicas, "resized", run.job,
                                     lent=_lent(snap, rz.assignment), now=snap.now))
        elif (lent := _lent(snap, run.assignment)) or keep is None or not keep(
                job_id, tuple(run.assignment), _speed_key(describe_speed(run.job))):
            # a borrower's take-back time may move; a new measurement changes the speed shown

            rows.append(_running_row(job_id, run.job.account, run.priority_class,
                                     run.assignment, snap.fabric, policy, None, run.replicas,
                                     "observed", run.job, lent=lent, now=snap.now))
    return rows


def _own_facts(data: dict[str, Any], job: Any, snap: Any, estimate: Mapping[str, Any] | None) -> None:
    """Add what a waiting row says of the job itself: after a fault, its estimate, its attained
    service (from Slurm: attained.py), its measured speed (slurm/cli/speed.py) and its account's
    fair share (core/model/fairshare.py)."""
    if job.state.after_fault:
        data["after_fault"] = True
    if estimate is not None:
        data["estimate"] = dict(estimate)
    data["attained"] = {"gpu_s": round(job.attained_gpu_s, 1)}
    if (speed := describe_speed(job)) is not None:
        data["speed"] = speed
    if (account := snap.account(job.account)).recent_gpu_s > 0:
        data["fair_share"] = {"gpu_h": round(account.recent_gpu_s / 3600, 2), "rank": usage_rank(account)}


def _steady(data: Mapping[str, Any], reason: str | None, detail: str) -> str:
    """A waiting row's steady part (``ExplanationRow.steady``): all but the drifting figures,
    and of its estimate the status (a first estimate, or "never", is written at once; a time
    that moves is a drift)."""
    est = data.get("estimate")
    return _json({**{k: v for k, v in data.items() if k not in DRIFT}, "reason": reason, "detail": detail,
                  "estimate_status": est.get("status") if isinstance(est, Mapping) else None})


START_REFUSED = "start_refused"  # sits out cycles after Slurm refused its Start (backoff.py)
LEFT_TO_SLURM = "left_to_slurm"  # refused too often: lease released, Slurm's checks decide
STARTING = "starting"  # started by railgang, not run by Slurm yet (slurm/cli/snapshot.starting)
HELD = "held"  # its owner or an admin holds it (scontrol hold): leased, placed once released
# (or a rule of Slurm's railgang does not model: --nodelist, --reservation, ...; slurm/cli/rules.py)
WAITING_ON_DEPENDENCY = "waiting_on_dependency"  # --dependency not met: no GPUs held, lease kept


def held_back_rows(held: Iterable[HeldBack], policy: str) -> list[ExplanationRow]:
    """Rows for the jobs the backend kept out of the core's queue after Slurm refused their
    Start (the core gives them no reason: it never saw them). The row changes only when a
    refusal does, so a steady back-off costs no writes."""
    rows = []
    for h in held:
        if not h.held:
            continue
        if h.kind == "dependency":
            detail = f"{h.reason}; it holds no GPUs and is scheduled once Slurm says it is met"
        elif h.kind == "starting":
            detail = f"railgang started it ({h.reason}); Slurm has not run it yet"
        elif h.kind == "held":
            detail = f"on hold ({h.reason}): it holds no GPUs and is placed once released (scontrol release)"
        elif h.kind == "rules":
            detail = (f"{h.reason}: railgang does not model that, so its lease was released: "
                      "Slurm schedules it (see squeue's reason)")
        elif h.left_to_slurm:
            detail = (f"Slurm refused its start {h.refusals} times in a row; its lease was "
                      "released: Slurm's own checks decide (see squeue's reason)")
        else:
            detail = (f"Slurm refused its start {h.refusals} time(s) in a row; it sits out "
                      f"{h.sits_out} cycle(s) before it is tried again")
        data: dict[str, Any] = {"needed": h.needed, "ahead": 0, "blocked_by": [], "policy": policy}
        if h.kind == "refused":
            data.update(start_refused=h.reason, refusals=h.refusals)
        elif h.kind == "starting":
            data["started"] = h.reason
        elif h.kind == "held":
            data["hold"] = h.reason
        else:
            data["slurm_rule"] = h.reason
        rows.append(ExplanationRow(
            job_id=h.job_id, state="waiting", account=h.account,
            priority_class=h.priority_class, gpus=h.gpus,
            reason=(WAITING_ON_DEPENDENCY if h.kind == "dependency" else STARTING
                    if h.kind == "starting" else HELD if h.kind == "held" else LEFT_TO_SLURM
                    if h.left_to_slurm else START_REFUSED), detail=detail,
            data=_json(data)))
    return rows


def _speed_key(speed: Mapping[str, Any] | None) -> str:
    """What of a running job's measured speed rewrites its row: its source, the sizes measured,
    the curve's shape and the costs to a second (not every report's new median)."""
    if not speed:
        return ""
    return _json({"source": speed["source"], "sizes": [k for k, _, _ in speed["rates"]],
                  "serial": round(speed["serial"], 2), "costs": [round(speed["resize_s"][0]), round(speed["restore_s"][0])]})


def _lent(snap: Any, assignment: Mapping[str, Sequence[int]]) -> dict[str, float | None]:
    """The lent serving nodes a job runs on, and when each is expected back (issue 19)."""
    serving = getattr(snap, "serving", None)
    return serving.lent_to(assignment) if serving is not None else {}


def checkpoint_advice(job: Any, assignment: Mapping[str, Sequence[int]], fabric: Any,
                      leaves: Sequence[str]) -> dict[str, float | None] | None:
    """Young-Daly advice for a running job on these nodes (``failures/young_daly.py``) at the
    default (Llama 3) failure rates: a node's rate counts all its GPUs, a leaf's all its nodes."""
    if not assignment:
        return None
    facts = getattr(fabric, "facts", None)
    per_node = max(facts(n).gpus if callable(facts) and n in fabric else len(g)
                   for n, g in assignment.items())
    mtbf = LLAMA3.mtbf_s(len(assignment), per_node, max(1, len(leaves)))
    try:
        return advise(mtbf, job.checkpoint_cost_s, job.restore_cost_s,
                      job.checkpoint_interval_s).as_dict()
    except ValueError:
        return None  # a hint gave a checkpoint cost advice cannot use: no advice


def _running_row(job_id: str, account: str, priority_class: int, assignment: Mapping[str, Sequence[int]],
                 fabric: Any, policy: str, cost: float | None, replicas: int,
                 how: str, job: Any = None,
                 lent: Mapping[str, float | None] | None = None,
                 now: float | None = None) -> ExplanationRow:
    data = placement(fabric, assignment)
    data.update({"cost": cost, "replicas": replicas, "how": how, "policy": policy})
    if lent:  # on serving capacity lent to it: node -> expected take-back (None: not foreseen)
        data["serving_lent"] = dict(lent)
    if job is not None:
        data["checkpoint"] = checkpoint_advice(job, assignment, fabric, data["leaves"])
        if now is not None:  # it grows as the job runs: status.as_dict adds gpus x the row's age
            data["attained"] = {"gpu_s": round(job.attained_gpu_s, 1), "as_of": now,
                                "gpus": sum(len(g) for g in assignment.values())}
        if (speed := describe_speed(job)) is not None:
            data["speed"] = speed
    return ExplanationRow(
        job_id=job_id, state="running", account=account, priority_class=priority_class,
        gpus=sum(len(g) for g in assignment.values()),
        nodes=hostnames.collect(sorted(assignment)), data=_json(data))


def _key(r: ExplanationRow) -> tuple[Any, ...]:
    """What a stored row is compared by (the columns the daemon writes)."""
    return (r.state, r.nodes, r.reason, r.detail, r.position, r.queue_length, r.data)


class Tracker:
    """Remembers what was last written per job, so a cycle writes only changes.

    A running job keeps its stored row while its nodes stay the same: the row written when
    railgang placed it carries the placement's cost and leaves, which a later observation cannot
    know. Use :meth:`keep` as ``build_rows``' ``keep`` and pass every job of the snapshot to
    :meth:`changes` (``present``), so that only jobs that left are reported gone.

    A waiting row whose steady part (``ExplanationRow.steady``: reason, detail, what blocks it,
    ...) is unchanged but whose drifting figures moved (its position, the jobs ahead, the free
    GPUs, the fair share, the estimate: ``DRIFT``) is written once its stored copy is
    ``refresh_s`` old, at most a sixth of the waiting rows a cycle, the stalest first: at 10,000
    waiting every start ahead moved every position and every cycle's decay every fair share, and
    rewriting all 10,000 rows was most of the daemon's cycle after the core (BENCHMARKS.md).
    ``railgang explain`` says how old the row it shows is. ``refresh_s`` 0: every change at once.
    """

    def __init__(self, stored: Mapping[str, tuple[str, str]] | None = None, refresh_s: float = 0.0) -> None:
        self.refresh_s = refresh_s
        self.last: dict[str, tuple[Any, ...]] = {}
        self.steady: dict[str, str] = {}  # waiting jobs: the steady part of the stored row
        self.written: dict[str, float] = {}  # waiting jobs: when the stored row was written
        self.nodes: dict[str, tuple[str, ...]] = {}  # running jobs: the nodes of the stored row
        self.speed: dict[str, str] = {}  # running jobs: the stored row's measured speed
        for job_id, (state, nodes) in (stored or {}).items():
            self.last[job_id] = (state,)
            if state == "running":
                self.nodes[job_id] = tuple(sorted(hostnames.expand(nodes)))

    def keep(self, job_id: str, nodes: tuple[str, ...], speed: str = "") -> bool:
        return self.nodes.get(job_id) == nodes and self.speed.get(job_id, "") == speed

    def stands(self, job_id: str, steady: str, now: float) -> bool:
        """Does the stored row of waiting ``job_id`` stand as it is: its steady part unchanged and
        not yet due for a refresh of its drifting figures? (``build_rows``' ``stands``)"""
        return (self.refresh_s > 0 and self.steady.get(job_id) == steady
                and now - self.written[job_id] < self.refresh_s)

    def changes(self, rows: Iterable[ExplanationRow], present: Iterable[str], now: float = 0.0,
                ) -> tuple[list[ExplanationRow], list[str]]:
        """(rows to write, jobs gone since the previous cycle) as of ``now``; updates the memory."""
        seen: dict[str, tuple[Any, ...]] = {}
        write = []
        drifted: list[ExplanationRow] = []  # waiting rows of which only drifting figures moved
        for r in rows:
            key = _key(r)
            if r.state == "running":
                data = json.loads(r.data)
                self.nodes[r.job_id] = tuple(sorted(data.get("nodes", ())))
                self.speed[r.job_id] = _speed_key(data.get("speed"))
            else:
                self.nodes.pop(r.job_id, None)
                self.speed.pop(r.job_id, None)
            last = self.last.get(r.job_id)
            if last == key:
                seen[r.job_id] = key
            elif (self.refresh_s > 0 and r.steady and last is not None and last[0] == r.state
                  and self.steady.get(r.job_id) == r.steady):  # (steady holds reason and detail)
                seen[r.job_id] = last  # the stored row stands until it is refreshed
                drifted.append(r)
            else:
                seen[r.job_id] = key
                write.append(r)
                self._wrote(r, now)
        due = [r for r in drifted if now - self.written.get(r.job_id, now) >= self.refresh_s]
        due.sort(key=lambda r: self.written[r.job_id])
        for r in due[:max(1, -(-len(self.written) // 6))]:  # (every waiting row stored)
            seen[r.job_id] = _key(r)
            write.append(r)
            self._wrote(r, now)
        for job_id in present:
            if job_id not in seen and job_id in self.last:
                seen[job_id] = self.last[job_id]  # kept: unchanged running job
        gone = [j for j in self.last if j not in seen]
        for j in gone:
            self.nodes.pop(j, None)
            self.speed.pop(j, None)
            self.steady.pop(j, None)
            self.written.pop(j, None)
        self.last = seen
        return write, gone

    def _wrote(self, r: ExplanationRow, now: float) -> None:
        if r.state == "waiting" and r.steady:
            self.steady[r.job_id], self.written[r.job_id] = r.steady, now
        else:
            self.steady.pop(r.job_id, None)
            self.written.pop(r.job_id, None)


__all__ = ["DRIFT", "HELD", "LEFT_TO_SLURM", "STARTING", "START_REFUSED", "Tracker", "build_rows", "held_back_rows", "placement"]
