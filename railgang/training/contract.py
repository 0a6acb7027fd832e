"""The training-side contract: what a job script imports to cooperate with railgang.

A training script (PyTorch, JAX, anything: this module needs only the standard library) uses
:class:`TrainingContext` to

* learn its **parallel shape and current size**: the hints it was submitted with
  (``--rg-parallel``/``--rg-elastic``/``--rg-class``) and, after railgang shrank it in place, the
  nodes and GPUs Slurm gives it now (:meth:`TrainingContext.world`, read from ``squeue --json``;
  Slurm is the truth, the batch script's ``SLURM_*`` variables are frozen at start);
* hear the **preemption signal** (``SIGUSR1`` by default, sent by the daemon before a requeue or a
  grow-by-requeue) and checkpoint within the grace time (:attr:`TrainingContext.stop_requested`,
  :meth:`TrainingContext.wait_for_requeue`);
* hear a **shrink notice** (the same signal, before Slurm drops some of its nodes): the new size
  and when it applies (:meth:`TrainingContext.pending_resize`), and say it is ready
  (:meth:`TrainingContext.ready_for_resize`); rendezvous at a place that stays put across
  resizes (:meth:`TrainingContext.rendezvous`) and scale the batch or the learning rate with the
  size (:meth:`TrainingContext.scale_batch`) — ``elastic.py``;
* know whether it is a **restart** (``SLURM_RESTART_COUNT``) so it resumes from its checkpoint;
* **report progress** (step, samples/s, and when known the total steps, the wall time of a step
  and the part of it the kernels computed) back to the daemon through the job's own Slurm
  ``Comment`` (``rg-progress:step=…,sps=…,t=…[,total=…,step_s=…,compute_s=…]``), rate-limited:
  Slurm is the only channel a job needs, so nothing here opens a socket to the daemon. The
  daemon turns ``total`` and ``step_s`` into the work left (start-time estimates) and stores
  ``step_s``/``compute_s`` as step timings (the report's communication-bound detector).

Runnable example: ``demo/train_example.py``; the contract is described for users in
docs/training.md.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

from railgang.topology import hostnames
from railgang.training.elastic import (
    Rendezvous,
    Scaled,
    SizeNotice,
    rendezvous,
    scale_batch,
    shrink_notice,
    valid_host,
)

PROGRESS_PREFIX = "rg-progress:"
MAX_COMMENT = 256  # a progress comment is a handful of short numbers
# bounds of each field (the Comment is written by the user: never trust it)
_BOUNDS: dict[str, tuple[float, float]] = {
    "step": (0, 1e12), "sps": (0, 1e9), "t": (0, 1e11), "total": (1, 1e12),
    "step_s": (1e-6, 86400.0), "compute_s": (0, 86400.0), "ready": (1, 2**40)}
_REQUIRED = ("step", "sps", "t")
DEFAULT_STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)
_CKPT = re.compile(r"[:;]ckpt=(\d{1,10})(?:;|$)")  # the daemon's advice in the railgang tag

Runner = Callable[[Sequence[str]], str]
"""Runs a Slurm command (argument list) and returns its stdout; raises on failure."""


def _run_slurm(argv: Sequence[str]) -> str:
    # every failure is a RuntimeError: a training loop must be able to catch one kind and go on
    try:
        res = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired as exc:  # slurmctld busy: the caller keeps its last view
        raise RuntimeError(f"{argv[0]} gave no answer within {exc.timeout:g} s") from exc
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{argv[0]} exited {res.returncode}: {last}")
    return res.stdout


@dataclass(frozen=True)
class Shape:
    """The parallel shape the job was submitted with (``--rg-parallel``, ``--rg-elastic``)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    elastic_min: int | None = None  # DP replicas
    elastic_max: int | None = None
    priority_class: int = 3

    @property
    def replica_gpus(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class World:
    """Where the job runs right now, as Slurm says."""

    nodes: tuple[str, ...]
    gpus: int  # GPUs the job holds across all nodes
    state: str  # RUNNING, PENDING, ...

    def replicas(self, shape: Shape) -> int:
        """Current data-parallel degree: TP×PP groups are atomic, so only DP changes."""
        return self.gpus // shape.replica_gpus


def shape_from_env(env: Mapping[str, str]) -> Shape:
    """The shape from the SPANK plugin's variables (Slurm exports them to the job as
    ``SLURM_SPANK_RAILGANG_*``; plain ``RAILGANG_*`` is accepted for runs outside Slurm)."""

    def get(name: str) -> str | None:
        return env.get(f"SLURM_SPANK_RAILGANG_{name}") or env.get(f"RAILGANG_{name}")

    tp = pp = dp = 1
    if parallel := get("PARALLEL"):
        for part in parallel.split(","):
            key, num = part.strip()[:2], int(part.strip()[2:])
            tp, pp, dp = (num if key == "tp" else tp, num if key == "pp" else pp,
                          num if key == "dp" else dp)
    lo = hi = None
    if elastic := get("ELASTIC"):
        a, _, b = elastic.partition(":")
        lo, hi = int(a), int(b)
    cls = int(get("CLASS") or 3)
    return Shape(tp=tp, pp=pp, dp=dp, elastic_min=lo, elastic_max=hi, priority_class=cls)


_STATE_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "SIGNALING")


def world_from_squeue(doc: Mapping[str, object], job_id: str) -> World:
    """The job's nodes and GPUs from ``squeue --json -j ID`` (22.05 openapi 0.0.38 data; 24.11+
    data_parser v0.0.40+ has the same ``nodes`` and ``gres_detail``, and ``job_state`` as a list)."""
    jobs = doc.get("jobs")
    if not isinstance(jobs, list):
        raise ValueError("squeue --json: no 'jobs' list")
    for job in jobs:
        if not isinstance(job, dict):
            raise ValueError("squeue --json: a 'jobs' entry is not an object")
        if str(job.get("job_id")) != str(job_id):
            continue
        nodes = hostnames.expand(str(job.get("nodes") or ""))
        gpus = 0
        for item in job.get("gres_detail") or []:  # e.g. "gpu:8(IDX:0-7)", one per node
            name, _, rest = str(item).partition(":")
            if name == "gpu":
                count = rest.split("(")[0].split(":")[-1]
                gpus += int(count) if count.isdigit() else 0
        state = job.get("job_state", "UNKNOWN")
        if isinstance(state, list):  # ["RUNNING", "COMPLETING"]: the flag, as 22.05 printed it
            flags = [s for s in state[1:] if s in _STATE_FLAGS]
            state = (flags or state or ["UNKNOWN"])[0]
        return World(nodes=nodes, gpus=gpus, state=str(state))
    raise ValueError(f"squeue --json: job {job_id} not found")


class TrainingContext:
    """One per training process. Cheap to create; reads Slurm only when asked."""

    def __init__(self, env: Mapping[str, str] | None = None, *, runner: Runner = _run_slurm,
                 clock: Callable[[], float] = time.monotonic,
                 report_every_s: float = 60.0) -> None:
        self.env = dict(os.environ if env is None else env)
        self.job_id = self.env.get("SLURM_JOB_ID", "")
        self.shape = shape_from_env(self.env)
        self.restart_count = int(self.env.get("SLURM_RESTART_COUNT", "0") or 0)
        self.grace_s = float(self.env.get("RAILGANG_GRACE_S", "120"))
        self._runner = runner
        self._clock = clock
        self._report_every_s = report_every_s
        self._last_report: float | None = None
        self._last_step: tuple[int, float] | None = None  # step and clock of the last report
        self._stop = threading.Event()
        self._received: list[int] = []
        self._stop_signal: int | None = None
        self._stop_at: float | None = None

    # -- preemption -------------------------------------------------------------------------
    def install_signal_handlers(self, signals: Sequence[int] = DEFAULT_STOP_SIGNALS) -> None:
        """Turn the preemption signal into a flag the training loop polls between steps."""
        for sig in signals:
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._received.append(signum)
        self.request_stop(signum)

    @property
    def being_requeued(self) -> bool:
        """A SIGTERM after the checkpoint signal: Slurm is ending this run (requeue or cancel).
        Leave promptly, so the next run does not launch beside a process still winding down."""
        return len(self._received) >= 2 and self._received[-1] == signal.SIGTERM

    def request_stop(self, signum: int = int(signal.SIGUSR1)) -> None:
        if not self._stop.is_set():
            self._stop_signal, self._stop_at = signum, self._clock()
        self._stop.set()

    def resume(self) -> None:
        """The signal was a shrink notice and it is handled: the run goes on (clears
        :attr:`stop_requested`; ranks other than the one calling :meth:`ready_for_resize`)."""
        self._stop.clear()
        self._received.clear()
        self._stop_signal = self._stop_at = None

    @property
    def stop_requested(self) -> bool:
        """True once the daemon signalled: checkpoint now, then :meth:`wait_for_requeue`."""
        return self._stop.is_set()

    @property
    def grace_left_s(self) -> float:
        if self._stop_at is None:
            return float("inf")
        return max(0.0, self.grace_s - (self._clock() - self._stop_at))

    def wait_for_requeue(self, sleep: Callable[[float], None] = time.sleep) -> None:
        """After the last checkpoint, keep the allocation until Slurm requeues (kills) the job.

        Exiting early would end the job as COMPLETED and lose the requeue, so the process waits
        out the grace time (plus a minute of slack for a slow daemon), then returns; it returns
        at once when Slurm's SIGTERM of the requeue arrives (:attr:`being_requeued`).
        """
        deadline = self.grace_left_s + 60.0
        waited = 0.0
        while waited < deadline and not self.being_requeued:
            sleep(1.0)
            waited += 1.0

    # -- size ------------------------------------------------------------------------------
    def world(self) -> World:
        """Nodes and GPUs now (after a shrink in place they differ from ``SLURM_JOB_NODELIST``)."""
        out = self._runner(["squeue", "--json", "-j", self.job_id])
        return world_from_squeue(json.loads(out), self.job_id)

    def _job(self) -> dict[str, object] | None:
        """This job's squeue record, or None when Slurm did not answer (never raises)."""
        if not self.job_id:
            return None
        try:
            jobs = json.loads(self._runner(["squeue", "--json", "-j", self.job_id])).get("jobs")
        except (RuntimeError, OSError, ValueError, AttributeError, subprocess.TimeoutExpired):
            return None
        for job in jobs if isinstance(jobs, list) else ():
            if isinstance(job, dict) and str(job.get("job_id")) == self.job_id:
                return job
        return None

    def advised_checkpoint_interval_s(self) -> float | None:
        """Seconds between checkpoints the daemon advised when it started this run (Young–Daly
        for the nodes it runs on: the ``ckpt=`` of the railgang tag in the job's AdminComment,
        which only the daemon writes); None when it gave none or Slurm did not answer."""
        job = self._job()
        tag = str(job.get("admin_comment") or "") if job is not None else ""
        found = _CKPT.search(tag) if tag.startswith("railgang:") else None
        return float(found.group(1)) if found else None

    # -- elastic: the shrink notice, the rendezvous, the batch rule (elastic.py) ------------
    def current_replicas(self) -> int:
        """The data-parallel degree now, as Slurm says (raises RuntimeError if it cannot)."""
        return self.world().replicas(self.shape)

    def pending_resize(self) -> SizeNotice | None:
        """The shrink the daemon announced (its checkpoint signal came with it): the nodes and
        GPUs the job keeps and when the shrink applies at the latest; None when none is in
        flight or Slurm did not answer. After a ``SIGUSR1``, a notice here means "shrink": go
        on at the new size (:meth:`ready_for_resize`); none means a preemption or a grow by
        requeue: checkpoint and :meth:`wait_for_requeue`."""
        job = self._job()
        if job is None:
            return None
        return shrink_notice(str(job.get("admin_comment") or ""), self.restart_count)

    def pending_replicas(self) -> tuple[int, float] | None:
        """:meth:`pending_resize` as (new data-parallel degree, when it applies)."""
        notice = self.pending_resize()
        return None if notice is None else (notice.replicas(self.shape.replica_gpus), notice.applies_at)

    def ready_for_resize(self, step: int, samples_per_s: float = 0.0) -> bool:
        """Say the job has checkpointed for the shrink in flight: the daemon shrinks it at its
        next cycle instead of at the deadline. Clears :attr:`stop_requested` (the run goes on);
        returns whether the report reached Slurm (else the shrink comes at the deadline)."""
        notice = self.pending_resize()
        self.resume()
        if notice is None:
            return False
        return self.report(step, samples_per_s, force=True, ready=notice.applies_at)

    def rendezvous(self) -> Rendezvous:
        """``torchrun --rdzv-backend=c10d`` endpoint and id, the same across resizes and
        requeues (the batch host, the job id; :class:`~railgang.training.elastic.Rendezvous`)."""
        job = self._job()
        host = str(job.get("batch_host") or "") if job is not None else ""
        return rendezvous(self.job_id, self.env, host if valid_host(host) else None)

    def scale_batch(self, base_global_batch: int, base_lr: float, *, rule: str = "keep_global",
                    replicas: int | None = None) -> Scaled:
        """Batch size and learning rate at ``replicas`` (default: the size now) for a job tuned
        at its requested size (``--rg-parallel`` dp); see :func:`~railgang.training.elastic.scale_batch`."""
        base = self.shape.dp if self.shape.dp > 0 else 1
        return scale_batch(replicas if replicas is not None else self.current_replicas(),
                           base_replicas=base, base_global_batch=base_global_batch, base_lr=base_lr,
                           rule=rule)

    # -- progress --------------------------------------------------------------------------
    def report(self, step: int, samples_per_s: float, *, total: int | None = None,
               step_s: float | None = None, compute_s: float | None = None,
               force: bool = False, ready: float | None = None) -> bool:
        """Publish progress in the job's Comment, at most every ``report_every_s``.

        ``total``: the step the job ends at (the daemon then knows the work left); ``step_s``:
        the wall time of one step (default: measured here from the steps between two calls);
        ``compute_s``: the part of it the kernels computed (from the framework's profiler), for
        the communication-bound detector. Returns whether a report was sent. A failed report is
        not fatal to training: the daemon only uses it to improve its estimates.
        """
        now = self._clock()
        if not force and self._last_report is not None \
                and now - self._last_report < self._report_every_s:
            return False
        if step_s is None and self._last_step is not None and step > self._last_step[0] \
                and self._last_report is not None and now > self._last_report:
            step_s = (now - self._last_report) / (step - self._last_step[0])
        self._last_report, self._last_step = now, (step, now)
        comment = format_progress(Progress(step=step, sps=samples_per_s, t=int(time.time()),
                                           total=total, step_s=step_s, compute_s=compute_s,
                                           ready=ready))
        try:
            self._runner(["scontrol", "update", f"JobId={self.job_id}", f"Comment={comment}"])
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            return False
        return True


@dataclass(frozen=True)
class Progress:
    """One progress report; the optional fields are absent in comments of older helpers."""

    step: float
    sps: float
    t: int  # epoch seconds of the report
    total: float | None = None  # the step the job ends at
    step_s: float | None = None  # wall seconds of one step at the job's current size
    compute_s: float | None = None  # of which the kernels computed
    ready: float | None = None  # ready for the shrink notice with this deadline (epoch s)

    @property
    def remaining_s(self) -> float | None:
        """Seconds of training left at the current size (None without total and step time)."""
        if self.total is None or self.step_s is None:
            return None
        return max(0.0, self.total - self.step) * self.step_s


def format_progress(p: Progress) -> str:
    out = f"{PROGRESS_PREFIX}step={int(p.step)},sps={p.sps:.1f},t={p.t}"
    if p.total is not None:
        out += f",total={int(p.total)}"
    if p.step_s is not None:
        out += f",step_s={p.step_s:.4g}"
    if p.compute_s is not None:
        out += f",compute_s={p.compute_s:.4g}"
    if p.ready is not None:
        out += f",ready={int(p.ready)}"
    return out


def read_progress(comment: str) -> Progress | None:
    """The daemon's side of :meth:`TrainingContext.report`: ``None`` when the comment is not a
    progress report; raises ValueError (one line naming the field) when it is one but malformed
    or out of bounds. Unknown fields are ignored (a newer helper may add some)."""
    if not comment.startswith(PROGRESS_PREFIX):
        return None
    if len(comment) > MAX_COMMENT or "\n" in comment:
        raise ValueError(f"progress comment longer than {MAX_COMMENT} characters or multi-line")
    got: dict[str, float] = {}
    for part in comment[len(PROGRESS_PREFIX):].split(","):
        key, _, value = part.strip().partition("=")
        if key not in _BOUNDS:
            continue
        try:
            num = float(value)
        except ValueError:
            raise ValueError(f"progress field {key}={value[:20]!r} is not a number") from None
        lo, hi = _BOUNDS[key]
        if not lo <= num <= hi:  # also false for nan; inf is out of bounds
            raise ValueError(f"progress field {key}={value[:20]} is outside [{lo:g}, {hi:g}]")
        got[key] = num
    missing = [k for k in _REQUIRED if k not in got]
    if missing:
        raise ValueError(f"progress comment lacks {', '.join(missing)}")
    if "total" in got and got["step"] > got["total"]:
        raise ValueError(f"progress step {got['step']:g} is past total {got['total']:g}")
    if "compute_s" in got and "step_s" in got and got["compute_s"] > got["step_s"]:
        raise ValueError(f"progress compute_s {got['compute_s']:g} exceeds step_s "
                         f"{got['step_s']:g}")
    return Progress(step=got["step"], sps=got["sps"], t=int(got["t"]), total=got.get("total"),
                    step_s=got.get("step_s"), compute_s=got.get("compute_s"), ready=got.get("ready"))


def parse_progress(comment: str) -> dict[str, float] | None:
    """:func:`read_progress` as a dict of the fields present; ``None`` unless a valid report."""
    try:
        p = read_progress(comment)
    except ValueError:
        return None
    if p is None:
        return None
    return {k: float(v) for k, v in vars(p).items() if v is not None}


__all__ = ["PROGRESS_PREFIX", "Progress", "Shape", "TrainingContext", "World",
           "format_progress", "parse_progress", "read_progress", "shape_from_env",
           "world_from_squeue"]
