"""The Slurm commands the backend runs, as argument lists (pure builders, no I/O).

Per-job updates of one apply (Start, shrink, SetPriority, preemption marks) are gathered into
one ``scontrol`` process that reads them on stdin (:class:`ScontrolScript`): scontrol sends one
RPC per line, prints ``... for job N`` for a refused one and carries on, so a cycle with 1,000
priority changes forks one process, not 1,000. Changes that are the same for many jobs (a lease
renewal, the lease after a requeue) use one ``scontrol update jobid=A,B,C ...``.

Verified on 22.05.8 (docs/slurm-backend.md): ``NumNodes=N-N`` (a bare N is refused for a job
submitted with fewer nodes), ``ReqNodeList`` + ``StartTime=now`` starts a leased job on exactly
those nodes; ``TresPerJob=``/``TresPerNode=`` (empty) clear the other form of GPU request.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from railgang.topology import hostnames

SCONTROL = "scontrol"
SCANCEL = "scancel"
SQUEUE = "squeue"
SINFO = "sinfo"
SSHARE = "sshare"
LEASE_CHUNK = 300  # job ids per `scontrol update jobid=...` (keeps argv and RPCs small)
CHECKPOINT_SIGNAL = "USR1"

_JOB_ID = re.compile(r"^\d+(_\d+)?$")
_NODE = re.compile(r"^[A-Za-z0-9._-]+$")
_TYPE = re.compile(r"^[A-Za-z][\w.\-]{0,39}$")  # a typed GRES name (gpu:h100:8)
_TAG = re.compile(r"^[A-Za-z0-9_-]{1,40}$")  # "-": the core tags lame links "lame-link"
# "<why> for job N" (update, requeue) and "... for job N: <why>" (scontrol loading the job first)
_FOR_JOB = re.compile(r"for job (\d+(?:_\d+)?)(?::\s*(.*))?$")


def valid_job_id(job_id: str) -> bool:
    return bool(_JOB_ID.match(job_id))


def valid_node(name: str) -> bool:
    return bool(_NODE.match(name))


def valid_tag(tag: str) -> bool:
    return bool(_TAG.match(tag))


def slurm_time(epoch: float) -> str:
    """An absolute time as scontrol parses it (local time of this process, like scontrol's)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def hosts(nodes: Iterable[str]) -> str:
    return str(hostnames.collect(list(nodes)))


def gpu_request(assignment: Mapping[str, Sequence[int]], gpu_type: str = "") -> list[str]:
    """GPU fields of a Start/grow: per node when every node gets the same count, else per job.

    Slurm 22.05 requests GPUs per node (``Gres=gpu:K``) or per job (``TresPerJob=gres:gpu:T``,
    Slurm then picks the split itself); an unequal split cannot be asked for exactly. A job that
    asked for a GPU type (``gpu:h100:8``) keeps it (``gpu:h100:K``): Slurm refuses an untyped
    count beside a typed one ("Invalid GRES specification (with and without type
    identification)"). ``gpu_type`` is a GRES name (``records`` reads only those).
    """
    gpu = f"gpu:{gpu_type}" if gpu_type and _TYPE.match(gpu_type) else "gpu"
    counts = {len(g) for g in assignment.values()}
    if len(counts) == 1:
        return ["TresPerJob=", f"Gres={gpu}:{counts.pop()}"]
    return ["TresPerNode=", f"TresPerJob=gres:{gpu}:{sum(len(g) for g in assignment.values())}"]


def start_fields(assignment: Mapping[str, Sequence[int]], gpu_type: str = "") -> list[str]:
    """``update`` fields that pin a job to exactly ``assignment``'s nodes and end its lease."""
    n = len(assignment)
    return [f"NumNodes={n}-{n}", f"ReqNodeList={hosts(assignment)}",
            *gpu_request(assignment, gpu_type), "StartTime=now"]


def update_line(job_id: str, fields: Sequence[str]) -> str:
    return " ".join(["update", f"jobid={job_id}", *fields])


def lease_argvs(job_ids: Sequence[str], until: float, chunk: int = LEASE_CHUNK) -> list[list[str]]:
    """``scontrol update jobid=A,B,... StartTime=UNTIL`` in chunks of ``chunk`` ids."""
    return [[SCONTROL, "update", f"jobid={','.join(job_ids[i:i + chunk])}", f"StartTime={slurm_time(until)}"]
            for i in range(0, len(job_ids), chunk)]


def signal_argv(job_ids: Sequence[str], signal: str = CHECKPOINT_SIGNAL) -> list[str]:
    """The checkpoint signal to every process of the jobs: batch script and all steps."""
    return [SCANCEL, f"--signal={signal}", "--full", *job_ids]


def requeue_argv(job_ids: Sequence[str]) -> list[str]:
    return [SCONTROL, "requeue", ",".join(job_ids)]


def drain_argv(node: str, reason: str) -> list[str]:
    return [SCONTROL, "update", f"nodename={node}", "State=DRAIN", f"Reason={reason}"]


def resume_argv(node: str) -> list[str]:
    return [SCONTROL, "update", f"nodename={node}", "State=RESUME"]


def reservation_argv(name: str, node: str, user: str) -> list[str]:
    """A maintenance reservation of ``node`` that only ``user`` may use, from now on: the
    burn-in runs in it and no other job lands on the node meanwhile (IGNORE_JOBS: the node may
    still show an ending job; MAINT: its time is not counted as idle)."""
    return [SCONTROL, "create", "reservation", f"ReservationName={name}", f"Nodes={node}",
            "StartTime=now", "Duration=UNLIMITED", f"Users={user}", "Flags=MAINT,IGNORE_JOBS"]


def delete_reservation_argv(name: str) -> list[str]:
    return [SCONTROL, "delete", f"ReservationName={name}"]


def features_argv(node: str, features: Iterable[str]) -> list[str]:
    feats = ",".join(sorted(features))
    return [SCONTROL, "update", f"nodename={node}", f"AvailableFeatures={feats}", f"ActiveFeatures={feats}"]


def failures_by_job(stderr: str) -> dict[str, str]:
    """``Invalid job id specified for job 99`` lines -> {"99": "Invalid job id specified"}."""
    out: dict[str, str] = {}
    for line in stderr.splitlines():
        line = line.strip()
        m = _FOR_JOB.search(line)
        if m:
            why = m.group(2) or line[: m.start()].removeprefix("scontrol: error:").strip()
            out.setdefault(m.group(1), why or line)
    return out


@dataclass
class ScontrolScript:
    """Per-job ``update`` lines sent to one ``scontrol`` on stdin; ``owners`` maps a line to a key."""

    lines: list[str] = field(default_factory=list)
    owners: list[tuple[str, int]] = field(default_factory=list)  # (job id, caller's key)

    def add(self, job_id: str, fields: Sequence[str], key: int) -> None:
        self.lines.append(update_line(job_id, fields))
        self.owners.append((job_id, key))

    def __bool__(self) -> bool:
        return bool(self.lines)

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


__all__ = [
    "CHECKPOINT_SIGNAL",
    "LEASE_CHUNK",
    "SCANCEL",
    "SCONTROL",
    "SINFO",
    "SQUEUE",
    "SSHARE",
    "ScontrolScript",
    "delete_reservation_argv",
    "drain_argv",
    "failures_by_job",
    "features_argv",
    "gpu_request",
    "hosts",
    "lease_argvs",
    "requeue_argv",
    "reservation_argv",
    "resume_argv",
    "signal_argv",
    "slurm_time",
    "start_fields",
    "update_line",
    "valid_job_id",
    "valid_node",
    "valid_tag",
]
