"""What an elastic training job needs from railgang besides its size (issue 39): the shrink notice
the daemon gives before Slurm drops nodes, a rendezvous that stays put across resizes and
requeues (``torchrun --rdzv-backend=c10d``), and the batch-size / learning-rate rule. Standard
library and ``hostlist`` only; :class:`~railgang.training.contract.TrainingContext` reads Slurm
and hands the raw text here. docs/training.md describes the contract for users.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from railgang.topology import hostnames

# the daemon's shrink mark in the railgang tag (AdminComment, written only by the daemon):
# shrink=DEADLINE@RESTARTS@NODESxGPUS[+NODESxGPUS...] (slurm/cli/parse.py renders it)
_SHRINK = re.compile(r"(?:^railgang:|;)shrink=(\d{1,13})@(\d{1,10})@([^;]{1,4000})(?:;|$)")
RDZV_PORT_BASE = 29400  # torchrun's default c10d port; a job's own is this + job id % 1000
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def valid_host(name: str) -> bool:
    """A node name fit for an endpoint (squeue's text is Slurm's, but a rank must not be led to
    dial something else by a malformed one)."""
    return bool(_HOST.match(name))


@dataclass(frozen=True)
class SizeNotice:
    """A shrink the daemon announced: the job will have ``gpus`` GPUs on ``nodes`` from
    ``applies_at`` (epoch seconds) at the latest, sooner once it reported itself ready."""

    nodes: tuple[str, ...]
    gpus: int
    applies_at: float

    def replicas(self, replica_gpus: int) -> int:
        """The data-parallel degree it will have (TP×PP groups are atomic)."""
        return self.gpus // max(1, replica_gpus)

    def seconds_left(self, now: float) -> float:
        return max(0.0, self.applies_at - now)


def shrink_notice(admin_comment: str, restarts: int) -> SizeNotice | None:
    """The shrink notice in a railgang tag, if one is in flight for this run (a mark of an earlier
    run, before a requeue, is stale); None for anything else, malformed text included."""
    if not admin_comment.startswith("railgang:"):
        return None
    found = _SHRINK.search(admin_comment)
    if found is None or int(found.group(2)) != restarts:
        return None
    nodes: list[str] = []
    gpus = 0
    for group in found.group(3).split("+"):
        names, sep, count = group.rpartition("x")
        if not sep or not count.isdigit() or not names:
            return None
        try:
            expanded = hostnames.expand(names)
        except hostnames.HostListError:
            return None
        nodes.extend(expanded)
        gpus += int(count) * len(expanded)
    return SizeNotice(nodes=tuple(nodes), gpus=gpus, applies_at=float(found.group(1)))


@dataclass(frozen=True)
class Rendezvous:
    """``torchrun --rdzv-backend=c10d --rdzv-endpoint=ENDPOINT --rdzv-id=ID``.

    ``host`` is the node running the job's batch script: Slurm never drops it in a shrink
    (railgang keeps the batch host, slurm/cli/apply.py) and a grow only adds nodes, so it holds
    across every resize of one run; a requeue restarts every process, which read it again.
    ``id`` is the Slurm job id, the same across resizes and requeues."""

    host: str
    port: int
    id: str

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def torchrun_args(self, min_nodes: int, max_nodes: int) -> list[str]:
        return ["--rdzv-backend=c10d", f"--rdzv-endpoint={self.endpoint}", f"--rdzv-id={self.id}",
                f"--nnodes={min_nodes}:{max_nodes}"]


def rendezvous(job_id: str, env: Mapping[str, str], batch_host: str | None = None) -> Rendezvous:
    """The job's rendezvous: ``batch_host`` (squeue's), else the first node of the allocation
    (Slurm runs the batch script there); port ``RAILGANG_RDZV_PORT`` or 29400 + job id % 1000,
    so two jobs sharing a node do not share a store."""
    host = batch_host if batch_host and valid_host(batch_host) else ""
    if not host:
        nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        try:
            host = (hostnames.expand(nodelist) or ("",))[0]
        except hostnames.HostListError:
            host = ""
    host = host if valid_host(host) else env.get("SLURMD_NODENAME") or "localhost"
    port_text = env.get("RAILGANG_RDZV_PORT", "")
    if port_text.isdigit() and 1024 <= int(port_text) <= 65535:
        port = int(port_text)
    else:
        base = job_id.split("_")[0]
        port = RDZV_PORT_BASE + (int(base) % 1000 if base.isdigit() else 0)
    return Rendezvous(host=host, port=port, id=job_id or "local")


RULES = ("keep_global", "linear", "sqrt")


@dataclass(frozen=True)
class Scaled:
    """Per-replica batch, the global batch it makes, and the learning rate to use with it."""

    per_replica_batch: int
    global_batch: int
    lr: float


def scale_batch(replicas: int, *, base_replicas: int, base_global_batch: int, base_lr: float,
                rule: str = "keep_global") -> Scaled:
    """The batch size and learning rate at ``replicas``, for a job tuned at ``base_replicas``
    with ``base_global_batch`` and ``base_lr``. The job chooses the rule:

    * ``keep_global``: the global batch stays (each replica takes ``base_global_batch /
      replicas``, rounded up), so the optimisation is the same at any size and only the step
      time changes; the learning rate follows the (rounded) global batch linearly, so it is
      ``base_lr`` whenever the division is exact. The usual choice for a resize.
    * ``linear``: each replica keeps its batch, the global batch scales with the replicas, and
      so does the learning rate (Goyal et al. 2017, "the linear scaling rule"; for SGD).
    * ``sqrt``: as ``linear``, with the learning rate scaled by the square root (for Adam).
    """
    if replicas < 1 or base_replicas < 1 or base_global_batch < 1:
        raise ValueError("replicas, base_replicas and base_global_batch must be positive")
    if rule == "keep_global":
        per = math.ceil(base_global_batch / replicas)
    elif rule in ("linear", "sqrt"):
        per = max(1, base_global_batch // base_replicas)
    else:
        raise ValueError(f"batch rule {rule!r} is not one of {', '.join(RULES)}")
    total = per * replicas
    ratio = total / base_global_batch
    return Scaled(per_replica_batch=per, global_batch=total,
                  lr=base_lr * (math.sqrt(ratio) if rule == "sqrt" else ratio))


__all__ = ["RDZV_PORT_BASE", "RULES", "Rendezvous", "Scaled", "SizeNotice", "rendezvous",
           "scale_batch", "shrink_notice", "valid_host"]
