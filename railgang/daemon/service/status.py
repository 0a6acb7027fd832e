"""What ``railgang daemon status`` and ``railgang explain`` read: the database the daemon writes
(and the heartbeat file). Both work while the daemon runs and after it stopped."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import OperationalError, ProgrammingError

from railgang.daemon.config import Settings
from railgang.daemon.failures.young_daly import render_advice
from railgang.daemon.safe_output import term_safe_data
from railgang.daemon.service.leader import lock_for, probe
from railgang.daemon.when import ago, span
from railgang.db.models import JobExplanation
from railgang.db.repositories import explanations as explain_repo
from railgang.db.repositories import journal as repo
from railgang.db.session import check_connection, make_engine, session_scope
from railgang.errors import UnknownJobError
from railgang.topology import hostnames
from railgang.topology.files import InputProblem, read_bytes

_REASON_TEXT = {  # one line per reason code for people (codes the core may not emit are harmless)
    "serving_not_needed": "a serving replica the forecast does not need yet; the daemon starts "
                          "it a switch-in before demand does (docs/serving.md)",
    "waiting_for_gpus": "fewer GPUs are free than its minimum size",
    "fragmented": "enough GPUs are free in total, but no topology-valid gang slot",
    "quarantined": "enough GPUs are free only on nodes with lame links",
    "gpu_memory": "too few free GPUs have the memory it needs",
    "no_nvlink": "too few free GPUs sit in NVLink domains",
    "invalid_shape": "its tp × pp × dp shape cannot be laid out on this cluster",
    "capability": "no node meets its GPU memory / NVLink needs",
    "larger_than_cluster": "it is larger than the cluster and can never run",
    "quota": "its account's GPU quota would be exceeded",
    "priority": "higher-priority work goes first",
    "reserved": "it holds the backfill reservation: its start is guaranteed",
    "preempting": "lower-priority work was signalled for it; it starts after the grace time",
    "preemption_budget": "it would need a preemption, but a budget forbids one now",
    "cascade_damped": "it was preempted recently and may not preempt others yet",
    "start_refused": ("Slurm refused its start; it sits out a few cycles (1, 2, 4, ...) out of "
                      "the queue, holding no GPUs from others (docs/slurm-backend.md)"),
    "left_to_slurm": ("Slurm refused its start slurm.start_refusals_max times in a row, or it "
                      "asks for what railgang does not model (--nodelist, --reservation, ...): "
                      "its lease was released and Slurm's own checks decide (squeue's reason)"),
    "held": ("its owner or an admin holds it (scontrol hold): it holds no GPUs and waits "
             "until released (scontrol release); its lease lapses meanwhile"),
    "starting": ("railgang started it (pinned to its nodes) and Slurm has not run it yet; "
                 "a pin its own rules no longer allow is dropped and the job placed again "
                 "(docs/slurm-backend.md)"),
    "waiting_on_dependency": ("its --dependency is not met yet: it holds no GPUs, its lease is "
                              "kept, and it is scheduled once Slurm says it is met"),
    "waiting_for_leaf": ("GPUs are free only across network leaves; it waits a bounded time "
                         "(daemon.leaf_wait_s after submit) for one leaf, which is held for it"),
}


def _heartbeat(settings: Settings, now: float) -> dict[str, Any]:
    path = settings.daemon.heartbeat_file
    try:
        first = read_bytes(path, "heartbeat file", 4096).decode("ascii").split()
        beat = float(first[0])
    except (InputProblem, UnicodeDecodeError, ValueError, IndexError):
        return {"file": str(path), "age_s": None}
    return {"file": str(path), "epoch": beat, "age_s": round(now - beat, 1),
            "lease_s": int(first[1]) if len(first) > 1 and first[1].isdigit() else None}


def daemon_status(settings: Settings) -> dict[str, Any]:
    """Leader, last cycle, heartbeat and journal counts; ``running`` is False with no leader."""
    now = time.time()
    engine = make_engine(settings.db.url)
    try:
        # unreachable is one line, not a traceback from the lock probe nor "not running"
        check_connection(engine)
        running = probe(lock_for(engine))
        out: dict[str, Any] = {"running": running, "leader": None, "last_cycle": None,
                               "heartbeat": _heartbeat(settings, now), "journal": None}
        try:
            with session_scope(engine) as s:
                leader = repo.get_leader(s)
                last = repo.last_cycle(s)
                counts = repo.counts_by_state(s)
                refused, held = explain_repo.with_reasons(s, REFUSED_REASONS)
        except (OperationalError, ProgrammingError):
            return out  # no tables yet: no daemon ever ran against this database
        if leader is not None:
            out["leader"] = {"host": leader.host, "pid": leader.pid,
                             "since": leader.acquired_at.isoformat(),
                             "age_s": round(now - leader.acquired_at.timestamp(), 1),
                             "backend": leader.backend, "policy": leader.policy}
        if last is not None and last.finished_at is not None:
            out["last_cycle"] = {
                "id": last.id, "finished_at": last.finished_at.isoformat(),
                "age_s": round(now - last.finished_at.timestamp(), 1),
                "duration_ms": json.loads(last.timings).get("total"),
                "pending": last.pending, "running": last.running, "actions": last.actions,
                "failed": last.failed, "error": last.error}
        out["journal"] = counts
        out["refused_starts"] = {"jobs": refused, "latest": [_refused(r) for r in held]}
        return out
    finally:
        engine.dispose()


REFUSED_REASONS = ("start_refused", "left_to_slurm")  # service/explain.py's held-back rows


def _refused(row: JobExplanation) -> dict[str, Any]:
    data = json.loads(row.data or "{}")
    return {"job_id": row.job_id, "left_to_slurm": row.reason == "left_to_slurm",
            "refusals": data.get("refusals"),
            "slurm": data.get("start_refused") or data.get("slurm_rule", "")}


def render_refused(refused: dict[str, Any]) -> list[str]:
    """Lines for ``railgang daemon status``: the jobs whose Starts Slurm refused lately."""
    if not refused or not refused.get("jobs"):
        return []
    lines = [f"refused starts: {refused['jobs']} job(s) held back (railgang explain JOB)"]
    for r in refused["latest"][:5]:
        what = "left to Slurm" if r["left_to_slurm"] else "sitting out"
        count = f"{r['refusals']} refusal(s), " if r["refusals"] else ""
        lines.append(f"  job {r['job_id']}: {count}{what}: {r['slurm']}")
    return lines


def render_status(st: dict[str, Any]) -> list[str]:
    """``railgang daemon status`` as lines: times relative to now ("5 s ago"), as ``explain``
    and ``top`` say them; the ISO times stay in ``--json``. Fields are made safe first (a
    cycle's error quotes Slurm and users' text: shown as escapes, never obeyed)."""
    shown = term_safe_data(st)
    leader, last, beat = shown["leader"], shown["last_cycle"], shown["heartbeat"]
    lines = ["daemon: " + ("running" if st["running"] else "not running")]
    if leader:
        held = (f", leading for {span(leader['age_s'])}" if st["running"]
                else f", leader since {ago(leader['age_s'])}") if "age_s" in leader else ""
        lines.append(f"leader: pid {leader['pid']} on {leader['host']}{held} ({leader['backend']} "
                     f"backend, {leader['policy']} policy)" + ("" if st["running"]
                                                                else " — last known"))
    if last:
        lines.append(f"last cycle: #{last['id']}, {ago(last['age_s'])} ({last['duration_ms'] or 0:.0f}"
                     f" ms): {last['pending']} pending, {last['running']} running, "
                     f"{last['actions']} actions, {last['failed']} failed"
                     + (f"; error: {last['error']}" if last["error"] else ""))
    age = beat["age_s"]
    lines.append(f"heartbeat: {beat['file']}: " + ("missing" if age is None else f"written {ago(age)}"))
    if shown["journal"]:
        lines.append("journal: " + ", ".join(f"{k} {v}" for k, v in shown["journal"].items()))
    lines += render_refused(shown.get("refused_starts") or {})
    return lines


def explanation(settings: Settings, job_id: str) -> dict[str, Any]:
    """A job's explanation; for a name that is no job railgang knows, the node of that name
    (``service/explain_node.py``: why it is out of service, e.g. held out as flaky)."""
    from railgang.daemon.service.explain_node import node_explanation

    engine = make_engine(settings.db.url)
    node = None
    try:
        check_connection(engine)  # unreachable is a DatabaseError line, not "no record of it"
        try:
            with session_scope(engine) as s:
                row = explain_repo.get(s, job_id)
                if row is None:
                    node = node_explanation(s, job_id, time.time())
        except (OperationalError, ProgrammingError):
            row = None
    finally:
        engine.dispose()
    if node is not None:
        return node
    if row is None:
        raise UnknownJobError(f"job {job_id}: railgang has no record of it (the daemon has not "
                              "seen it, or it left the queue over a day ago); check the id with "
                              f"`squeue -j {job_id}`")
    e = as_dict(row, time.time())
    if e.get("policy") == "tiresias" and "attained_gpu_h" in e:  # its queue, by attained service
        from railgang.daemon.core.policies.tiresias import GPU_HOUR, bucket

        e["tiresias_level"] = bucket(e["attained_gpu_h"] * GPU_HOUR,
                                     settings.daemon.tiresias_thresholds_gpu_h)
    return e


def as_dict(row: JobExplanation, now: float) -> dict[str, Any]:
    data = json.loads(row.data or "{}")
    out: dict[str, Any] = {
        "job_id": row.job_id, "state": row.state, "account": row.account,
        "priority_class": row.priority_class, "gpus": row.gpus, "cycle": row.cycle_id,
        "as_of": row.updated_at.isoformat(), "age_s": round(now - row.updated_at.timestamp(), 1)}
    if row.state == "waiting":
        out.update({"reason": row.reason, "reason_text": _REASON_TEXT.get(row.reason or "", ""),
                    "detail": row.detail, "position": row.position,
                    "queue_length": row.queue_length, **data})
        if isinstance(out.get("estimate"), dict) and "as_of" in out["estimate"]:
            out["estimate"]["age_s"] = round(now - out["estimate"]["as_of"], 1)
    elif row.state == "running":
        out.update({**data, "nodes": row.nodes})
    served = data.get("attained")  # GPU-seconds from Slurm as of the row, + gpus x its age
    if isinstance(served, dict) and isinstance(served.get("gpu_s"), int | float):
        grown = served.get("gpus", 0) * max(0.0, now - served.get("as_of", now))
        out["attained_gpu_h"] = round((served["gpu_s"] + grown) / 3600.0, 3)
    return out


def _gpus(per_node: dict[str, list[int]]) -> str:
    """' (GPUs 0-3 on each node)' when every node uses the same indices, else per node."""
    sets = {tuple(g) for g in per_node.values()}
    if not sets:
        return ""
    if len(sets) == 1:
        return f" (GPUs {_ranges(next(iter(sets)))} on each node)"
    shown = [f"{n}:{_ranges(g)}" for n, g in list(per_node.items())[:4]]
    return f" (GPUs {', '.join(shown)}{', …' if len(per_node) > 4 else ''})"


def _ranges(gpus: Sequence[int]) -> str:
    out: list[str] = []
    for g in sorted(gpus):
        if out and out[-1].split("-")[-1] == str(g - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{g}"
        else:
            out.append(str(g))
    return ",".join(out)


def render_lent(lent: dict[str, Any]) -> str:
    """One line: the job borrows serving nodes, and until when it is expected to keep them."""
    times = [t for t in lent.values() if isinstance(t, (int, float))]
    nodes = hostnames.collect(sorted(lent))
    if not times:
        return (f"runs on serving capacity lent to batch work ({nodes}); the forecast sees no "
                "take-back")
    until = datetime.fromtimestamp(min(times), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (f"runs on serving capacity lent to batch work ({nodes}); expected to keep it until "
            f"{until}, when the forecast's ramp takes it back (elastic jobs shrink, others are "
            "checkpointed and requeued)")


def render_speed(speed: dict[str, Any] | None) -> list[str]:
    """Measured speed (slurm/cli/speed.py): samples/s per size, the curve and its source, the
    costs the core prices a resize and a restart with."""
    if not speed:
        return []
    rates = ", ".join(f"{k} replica(s) {r:g} samples/s ({n} reports)" for k, r, n in speed["rates"])
    curve = ", ".join(f"{k}: {x:g}" for k, x in speed["speedup"])
    costs = ", ".join(f"{name} {speed[key][0]:g} s ({speed[key][1]})" for name, key in
                      (("resize", "resize_s"), ("restore", "restore_s"), ("checkpoint", "checkpoint_s")))
    return [f"  measured speed: {rates or 'none yet'}",
            f"  scaling curve ({speed['source']}, serial share {speed['serial']:g}): speedup {curve}",
            f"  costs: {costs}"]


def render_attained(e: dict[str, Any]) -> list[str]:
    """Attained service (slurm/cli/attained.py), and the Tiresias queue it puts the job in."""
    if not isinstance(e.get("attained_gpu_h"), int | float):
        return []
    level = f" (Tiresias level {e['tiresias_level']})" if "tiresias_level" in e else ""
    return [f"  attained service: {e['attained_gpu_h']:.3f} GPU-h over all its runs{level}"]


def render(e: dict[str, Any]) -> str:
    """The explanation as lines for a terminal; every field is made safe first (a name, a
    detail or a Slurm message is a user's text: shown as escapes, never obeyed; safe_output)."""
    e = term_safe_data(e)
    if "node" in e:  # `railgang explain NODE`
        from railgang.daemon.service.explain_node import render_node

        return render_node(e)
    head = f"job {e['job_id']} ({e['account']}, class {e['priority_class']}, {e['gpus']} GPUs)"
    when = f"  as of cycle {e['cycle']}, {ago(e['age_s'])}"
    if e["state"] == "waiting":
        lines = [f"{head}: waiting — {e['reason'] or 'not yet considered'}"]
        if e.get("reason_text"):
            lines.append(f"  {e['reason_text']}" + (f" ({e['detail']})" if e.get("detail") else ""))
        lines.append(f"  needs {e.get('needed')} GPUs, {e.get('free')} free; position "
                     f"{e.get('position') or '-'} of {e.get('queue_length')} in the "
                     f"{e.get('policy')} policy's order ({e.get('ahead', 0)} waiting ahead)")
        if e.get("blocked_by"):
            lines.append(f"  blocked by: {', '.join(e['blocked_by'])}")
        if e.get("start_refused"):
            lines.append(f"  Slurm refused its start: {e['start_refused']}"
                         + (f" ({e['refusals']} time(s) in a row)" if e.get("refusals") else ""))
        lines += render_attained(e)
        if e.get("after_fault"):
            lines.append("  requeued after a node failure: first in its class, restarts from its "
                         "last checkpoint")
        if e.get("estimate"):
            from railgang.daemon.service.estimate import render_estimate

            lines.append(render_estimate(e["estimate"]))
        lines += render_speed(e.get("speed"))
        if isinstance(fair := e.get("fair_share"), dict) and isinstance(fair.get("gpu_h"), int | float):
            lines.append(f"  fair share: account {e['account']} used {fair['gpu_h']:,.0f} GPU-h lately "
                         f"(decayed by its half-life; rank {fair.get('rank')} per share, lower first)")
        return "\n".join([*lines, when])
    if e["state"] == "running":
        how = {"started": "placed by railgang", "resized": "resized by railgang"}.get(
            e.get("how", ""), "observed running (placed before this record)")
        cost = f", cost {e['cost']:.2f}" if e.get("cost") is not None else ""
        rail = "rail-aligned" if e.get("rail_aligned") else "not rail-aligned"
        leaves = ", ".join(e.get("leaves") or []) or "-"
        lines = [f"{head}: running on {e['nodes']}" + _gpus(e.get("gpus_per_node") or {}),
                 f"  {how} ({e.get('policy')} policy){cost}; leaves {leaves}; {rail}; "
                 f"{e.get('replicas')} replica(s)"]
        lines += render_attained(e)
        lent = e.get("serving_lent")
        if lent:
            lines.append(f"  {render_lent(lent)}")
        advice = render_advice(e.get("checkpoint"))  # failures/young_daly.py, issue 20
        if advice:
            lines.append(f"  {advice}")
        lines += render_speed(e.get("speed"))
        return "\n".join([*lines, when])
    return f"{head}: no longer queued or running (last seen in cycle {e['cycle']})"


__all__ = ["daemon_status", "explanation", "render", "render_refused"]
