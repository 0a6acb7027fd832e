"""Node failures in a simulated replay (``railgang sim --failures``, issue 20).

The process: every node fails on its own at ``FailureRates.node_per_h`` (its GPUs' faults plus
host and software faults) and every leaf switch takes all its nodes down at ``per_leaf_h``; each
domain is an independent Poisson process with its own generator (``random.Random(
"fail:<seed>:<domain>")``), and a failed domain stays out for an exponential repair time of its
kind. A domain draws its next failure and its repair from its own generator in a fixed order, so
*when* nodes fail does not depend on the policy replayed: every policy meets the same faults.
A domain's process pauses at a failure that finds nothing running and no arrival to come (a
queue the core will never start must not keep the replay going) and resumes, memoryless, when a
job runs again (``resume``); only then can the faults two policies meet differ.

What a failure does: the failed nodes leave the cluster at once (their free GPUs are hidden from
the core, as a reclaimed spot node's are), and every job running on one of them stops making
progress and is killed ``detect_s`` later (0: at once; a hang before NCCL's watchdog fires is
``detect_s`` > 0). The kill rolls the job back to its last periodic checkpoint and requeues it
(no grace, no churn budget spent: ``JobRecord.interruptions`` counts it); its restart pays the
restore time. The restart cost is therefore the work since the last checkpoint plus the detection
delay plus the restore (``SimConfig.restore_cost_s``), plus however long it waits for nodes.

Checkpoints cost time here: a job that saves ``checkpoint_cost_s`` every ``τ`` seconds moves at
``1 − C/τ`` of its speed (the fluid form of stopping ``C`` seconds each interval; ``charge``).
Replays without ``--failures`` keep the old assumption (checkpoint cost inside the trace's
durations). ``interval="advised"`` gives each job the Young–Daly interval for its size
(``failures.young_daly``) where that is shorter than the fixed ``SimConfig.checkpoint_interval_s``.

What the cluster does about a fault is not modelled here (issue 34 item 3): the replay runs the
daemon's own failure step (``failures/step.py``, built by ``cycle_settings.pipeline_from``)
through the pipeline, and ``SimBackend`` carries out its actions (``node_ops.py``). This module
only shows the step what Slurm would show (:meth:`Failures.facts`): a killed job ended
``NODE_FAIL`` on the nodes it ran on (once; then waiting), a failed node ``down`` with Slurm's
``Not responding``, a node railgang drained ``drain``, a burn-in job running for ``burn_in_s``
(once its node is back) and then ``COMPLETED`` (a burn-in always passes here). The step answers:
the requeue (``after_fault``: first in its class), the flaky node's drain, its burn-in, the
release. Hangs are not simulated (no job sends progress reports in a replay).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from railgang.daemon.core import Job
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.failures.facts import FailureFacts, JobView, NodeView
from railgang.daemon.failures.rates import LLAMA3, FailureRates
from railgang.daemon.failures.young_daly import young_daly_s
from railgang.daemon.pipeline import Pipeline
from railgang.daemon.sim.backend import KILL, EventSink, SimBackend

__all__ = ["BURN_IN", "FAIL", "REPAIR", "STEP", "FailureConfig", "FailureLog", "Failures",
           "daemon_steps", "failure_config", "failure_summary"]

FAIL = "node_fail"  # job_id: the failing domain (a node or a leaf switch)
REPAIR = "node_repair"  # job_id: the domain coming back
BURN_IN = "burn_in_done"  # job_id: the burn-in job that ends (the step looks again)
STEP = "failures"  # the failure step's name (failures/step.py NAME): its facts' key


@dataclass(frozen=True, slots=True)
class FailureConfig:
    rates: FailureRates = LLAMA3
    seed: int = 0
    detect_s: float = 0.0  # from the fault until the job is killed (0 = at once)
    interval: Literal["fixed", "advised"] = "fixed"  # checkpoint interval per job
    charge: bool = True  # periodic checkpoints slow the job by C/τ
    burn_in_s: float = 600.0  # how long a burn-in job runs once its node is up (it passes)


@dataclass(frozen=True, slots=True)
class FailureLog:
    """One failure: when, which domain, which nodes went down, which jobs it killed."""

    at: float
    domain: str
    nodes: tuple[str, ...]
    jobs: tuple[str, ...]


@dataclass
class _Domain:
    nodes: tuple[str, ...]
    rate_s: float  # failures per second
    repair_s: float  # mean time out
    rng: random.Random = field(repr=False, default_factory=random.Random)


class Failures:
    """The failure process of one replay and what it does to the simulated cluster."""

    def __init__(self, backend: SimBackend, config: FailureConfig, events: EventSink,
                 alive: Callable[[], bool]) -> None:
        self.backend, self.config, self.events, self.alive = backend, config, events, alive
        fabric, rates = backend.fabric, config.rates
        self.domains: dict[str, _Domain] = {}
        leaves: dict[str, list[str]] = {}
        for node in sorted(fabric.nodes):
            gpus = fabric.facts(node).gpus
            self.domains[node] = _Domain((node,), rates.node_per_h(gpus) / 3600.0, rates.repair_s)
            leaves.setdefault(fabric.leaf_of(node), []).append(node)
        for leaf, nodes in sorted(leaves.items()):
            self.domains[leaf] = _Domain(tuple(nodes), rates.per_leaf_h / 3600.0,
                                         rates.leaf_repair_s)
        for name, d in self.domains.items():
            d.rng = random.Random(f"fail:{config.seed}:{name}")
        self.leaf_nodes = max((len(n) for n in leaves.values()), default=1)
        self.gpus_per_node = max((fabric.facts(n).gpus for n in fabric.nodes), default=1)
        self.out: dict[str, int] = {}  # node -> failed domains holding it out
        self.log: list[FailureLog] = []
        self.paused: set[str] = set()  # domains whose process waits for a job to run
        # jobs killed by a fault, not yet requeued -> their last preemption before it
        self.killed: dict[str, float | None] = {}
        self.restarts: dict[str, int] = {}  # job -> runs a fault ended (Slurm's restart_cnt)
        self.ran_on: dict[str, tuple[str, ...]] = {}  # job signalled by a fault -> its nodes
        self.ended: dict[str, tuple[str, ...]] = {}  # ended NODE_FAIL, not shown to the step yet
        self.waiting: set[str] = set()  # requeued after a fault, not running again yet
        self.burn_in_start: dict[str, float] = {}  # burn-in job -> when it started running
        self.since: dict[str, float] = {}  # node -> when it went out
        self.node_s_out = 0.0  # node-seconds out of service, summed as nodes come back
        self.repairs: list[tuple[float, tuple[str, ...]]] = []  # (when, nodes back): sim --ledger

    def start(self, now: float) -> None:
        """Schedule every domain's first failure (call once, at the replay's start)."""
        for name, d in self.domains.items():
            if d.rate_s > 0:
                self.events.at(now + d.rng.expovariate(d.rate_s), FAIL, name, 0)

    # -- checkpoints -----------------------------------------------------------------------------
    def mtbf_s(self, gpus: int) -> float:
        """Mean time between failures for a job of ``gpus`` GPUs placed compactly."""
        nodes = max(1, math.ceil(gpus / self.gpus_per_node))
        leaves = max(1, math.ceil(nodes / self.leaf_nodes))
        return self.config.rates.mtbf_s(nodes, self.gpus_per_node, leaves)

    def admitted(self, job_id: str) -> None:
        """A job just entered the queue: give it its checkpoint interval and charge the cost."""
        b = self.backend
        sj = b.jobs.get(job_id)
        if sj is None or sj.assignment is not None:
            return
        request = sj.request
        interval = request.checkpoint_interval_s
        if self.config.interval == "advised":
            # never less often than the fixed interval: the advice knows hardware failures only,
            # and a preemptible job is also preempted (advised 3 h for an 8-GPU job, its
            # preemptions lost hours of work and the background's mean JCT grew 6x)
            advised = young_daly_s(request.checkpoint_cost_s, self.mtbf_s(request.gpus))
            if math.isfinite(advised) and advised > 0:
                interval = min(interval, max(advised, 2.0 * request.checkpoint_cost_s))
        slowdown = self._share(interval, request.checkpoint_cost_s)
        if interval == request.checkpoint_interval_s and slowdown == 1.0:
            return
        # more work at full speed is the same wall time as the work at 1 - C/τ of it
        sj.remaining = sj.ckpt_remaining = sj.remaining / slowdown
        state = sj.job.state
        if state.work_remaining_s is not None:
            state = dataclasses.replace(state, work_remaining_s=sj.remaining)
        self._replace(sj, Job(dataclasses.replace(request, checkpoint_interval_s=interval), state))

    def requeued(self, job_id: str) -> None:
        """A job the fault killed ended ``NODE_FAIL`` (Slurm's view: :meth:`facts`); the backend
        already put it back in the queue, where the failure step's ``Requeue`` finds it. The
        kill was no preemption, so it does not count as one (the core's cascade damping would
        stop a freshly evicted job from evicting others for half an hour: a gang killed by a
        dead node waited that long for its nodes). First in its class is the step's mark."""
        if job_id not in self.killed:
            return
        before = self.killed.pop(job_id)
        self.ended[job_id] = self.ran_on.pop(job_id, ())
        self.restarts[job_id] = self.restarts.get(job_id, 0) + 1
        sj = self.backend.jobs.get(job_id)
        if sj is None or sj.assignment is not None:
            return
        self.waiting.add(job_id)
        state = sj.job.state
        self._replace(sj, sj.job.with_state(dataclasses.replace(
            state, preemptions=max(0, state.preemptions - 1), last_preempted_at=before)))

    # -- what Slurm shows the failure step -------------------------------------------------------
    def facts(self, now: float) -> FailureFacts:
        """The jobs and nodes as Slurm would show them now (the pipeline's reader of the failure
        step's facts): the running jobs, the ones a fault ended (``NODE_FAIL`` once, then
        ``PENDING`` until they run again), the burn-in jobs; every node."""
        b = self.backend
        jobs = [JobView(job_id, "NODE_FAIL", self.restarts[job_id] - 1, ran_on, ours=True)
                for job_id, ran_on in sorted(self.ended.items())]
        for job_id in sorted(self.waiting):
            sj = b.jobs.get(job_id)
            if sj is None or sj.assignment is not None:
                self.waiting.discard(job_id)
            elif job_id not in self.ended:
                jobs.append(JobView(job_id, "PENDING", self.restarts.get(job_id, 0), ours=True))
        self.ended.clear()
        busy: set[str] = set()
        for job_id, sj in b.running.items():
            if sj.assignment is None:
                continue
            busy.update(sj.assignment)
            jobs.append(JobView(job_id, "RUNNING", self.restarts.get(job_id, 0),
                                tuple(sorted(sj.assignment)), ours=True))
        jobs += self._burn_ins(now)
        nodes: dict[str, NodeView] = {}
        for name, node in b.nodes.items():
            if name in self.out:
                nodes[name] = NodeView(name, "down", "Not responding", name in busy)
            elif name in b.burn_ins:  # resumed into its burn-in reservation
                nodes[name] = NodeView(name, "alloc", busy=True)
            elif node.state is NodeState.DRAIN:
                nodes[name] = NodeView(name, "drain", "railgang: flaky", name in busy)
            elif name in busy:  # an idle node tells the step nothing: left out (a large fleet)
                nodes[name] = NodeView(name, "mixed", busy=True)
        return FailureFacts(tuple(jobs), nodes)

    def _burn_ins(self, now: float) -> list[JobView]:
        """Each burn-in job submitted: pending while its node is out, running ``burn_in_s`` from
        when it is up (an event then wakes the replay), then ``COMPLETED``."""
        out: list[JobView] = []
        for _, node, job_id in self.backend.burn_in_log:
            start = self.burn_in_start.get(job_id)
            if start is None:
                if node in self.out:
                    out.append(JobView(job_id, "PENDING", 0, burn_in_of=node))
                    continue
                start = self.burn_in_start[job_id] = now
                self.events.at(now + self.config.burn_in_s, BURN_IN, job_id, 0)
            done = now >= start + self.config.burn_in_s
            out.append(JobView(job_id, "COMPLETED" if done else "RUNNING", 0, (node,),
                               started_at=start, burn_in_of=node))
        return out

    def _replace(self, sj: Any, job: Job) -> None:
        """``sj``'s view is now ``job``, in the queue too (the backend keeps views aligned)."""
        self.backend.renewed(sj, job)

    def useful_share(self, job_id: str) -> float:
        """The share of a job's work (as inflated by :meth:`admitted`) that is training."""
        sj = self.backend.jobs.get(job_id)
        if sj is None:
            return 1.0
        return self._share(sj.request.checkpoint_interval_s, sj.request.checkpoint_cost_s)

    def _share(self, interval: float, cost: float) -> float:
        if not self.config.charge or interval <= 0 or cost <= 0:
            return 1.0
        return 1.0 - min(0.5, cost / interval)

    # -- events ------------------------------------------------------------------------------------
    def on_event(self, kind: str, domain: str, now: float) -> bool:
        """Handle a due ``FAIL`` or ``REPAIR``; True if the cluster changed."""
        if kind == BURN_IN:
            return True  # a burn-in job ended: the failure step releases its node
        d = self.domains.get(domain)
        if d is None:
            return False
        if kind == REPAIR:
            return self._repair(d, now)
        if not self.alive():
            self.paused.add(domain)  # nothing to hit: wait for a job to run (``resume``)
            return False
        self.events.at(now + d.rng.expovariate(d.rate_s), FAIL, domain, 0)
        self.events.at(now + d.rng.expovariate(1.0 / d.repair_s), REPAIR, domain, 0)
        b = self.backend
        for node in d.nodes:
            self.out[node] = self.out.get(node, 0) + 1
            self.since.setdefault(node, now)
        b.away(d.nodes)
        down = set(d.nodes)
        # a job already dying of an earlier fault dies of that one (its kill is not postponed)
        killed = [sj for sj in b.running.values() if sj.assignment is not None
                  and sj.tj.job_id not in self.killed and not down.isdisjoint(sj.assignment)]
        for sj in killed:
            self._kill(sj, now)
        self.log.append(FailureLog(now, domain, d.nodes, tuple(sj.tj.job_id for sj in killed)))
        return True

    def resume(self, now: float) -> None:
        """Jobs run again: the paused domains' processes go on (call after a start)."""
        for name in sorted(self.paused):
            d = self.domains[name]
            self.events.at(now + d.rng.expovariate(d.rate_s), FAIL, name, 0)
        self.paused.clear()

    def _kill(self, sj: Any, now: float) -> None:
        self.backend.interrupted(sj)  # the fault's doing: no churn budget, no migration kept
        self.killed.setdefault(sj.tj.job_id, sj.job.state.last_preempted_at)
        self.ran_on[sj.tj.job_id] = tuple(sorted(sj.assignment))
        kill_at = sj.signal(now, self.config.detect_s, False)
        sj.stopped = True  # a dead rank: no progress while the fault is being detected
        self.events.at(kill_at, KILL, sj.tj.job_id, sj.version)

    def _repair(self, d: _Domain, now: float) -> bool:
        returned = []
        for node in d.nodes:
            left = self.out.get(node, 0) - 1
            if left > 0:
                self.out[node] = left
                continue
            self.out.pop(node, None)
            self.node_s_out += now - self.since.pop(node, now)
            returned.append(node)
        self.backend.back(returned)
        if returned:
            self.repairs.append((now, tuple(returned)))
        return bool(returned)


def daemon_steps(settings: Any = None) -> Pipeline:
    """The daemon's steps before the core (``cycle_settings.pipeline_from``) with ``settings``
    (``railgang sim --config``'s; None: the daemon's defaults), without its memory file: a
    replay's memory is its own."""
    from railgang.daemon.config import Settings
    from railgang.daemon.cycle_settings import pipeline_from

    return Pipeline(pipeline_from(settings if settings is not None else Settings()).steps)


def failure_config(spec: str | None, *, checkpoint: str | None, detect_s: float,
                   seed: int) -> tuple[FailureConfig | None, float | None]:
    """The CLI's ``--failures``/``--checkpoint-s`` as a config and a fixed interval (or None).

    ``checkpoint`` is seconds (a duration: 1800, 30m) or ``advised`` (needs ``--failures``).
    Raises ``ValueError`` with one line.
    """
    from railgang.daemon.failures.rates import parse_duration, parse_failures

    fixed: float | None = None
    advised = checkpoint is not None and checkpoint.strip() == "advised"
    if checkpoint is not None and not advised:
        fixed = parse_duration(checkpoint, "--checkpoint-s")
        if fixed <= 0:
            raise ValueError(f"--checkpoint-s {checkpoint!r}: must be longer than 0")
    if spec is None:
        if advised:
            raise ValueError("--checkpoint-s advised needs --failures (the rate it advises for)")
        if detect_s:
            raise ValueError("--failure-detect-s needs --failures")
        return None, fixed
    if not math.isfinite(detect_s) or not 0 <= detect_s <= 86400:
        raise ValueError(f"--failure-detect-s {detect_s!r}: expected seconds in [0, 86400]")
    return FailureConfig(rates=parse_failures(spec), seed=seed, detect_s=detect_s,
                         interval="advised" if advised else "fixed"), fixed


def failure_summary(failures: Failures, records: Any) -> dict[str, Any]:
    """What the failures cost one replay: counts, node-hours out, GPU-hours lost."""
    killed = sum(len(f.jobs) for f in failures.log)
    lost = sum(r.lost_gpu_s for r in records if r.interruptions)
    return {"failures": len(failures.log), "jobs_killed": killed,
            "leaf_failures": sum(1 for f in failures.log if len(f.nodes) > 1),
            "node_hours_out": round(failures.node_s_out / 3600.0, 2),
            "interrupted_jobs_gpu_hours_lost": round(lost / 3600.0, 2)}
