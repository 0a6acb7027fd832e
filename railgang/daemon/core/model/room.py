"""CPUs and memory beside GPUs (issue 35): what a node has free, what a job asks of each node.

Slurm gives a job its GPUs only with the CPUs and memory it asked for on the same node; a Start
that pins a job to a node whose memory or CPUs are taken (by any job, railgang's or not) is
accepted and never honoured. So a node's :class:`Room` (free CPUs, free memory, whether any job
runs on it) and a job's :class:`Ask` (``--mem``, ``--mem-per-gpu``, ``--cpus-per-gpu``, CPUs per
node, ``--exclusive``) bound how many GPUs of that node the job may take. The draft of a cycle
keeps each node's room and takes a started job's ask from it, so two jobs started in the same
cycle never share memory one of them needs (``phases/draft.py``). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NO_ASK", "Ask", "Room"]


@dataclass(frozen=True, slots=True)
class Room:
    """What a node has free besides GPUs: CPUs, memory (MB) and whether no job runs on it."""

    cpus: int
    mem_mb: int
    idle: bool = True


@dataclass(frozen=True, slots=True)
class Ask:
    """What a job asks of every node it runs on besides GPUs; the default asks nothing."""

    cpus: int = 0  # per node, whatever its GPUs
    mem_mb: int = 0  # per node (--mem, or --mem-per-cpu times its CPUs per node)
    cpus_per_gpu: int = 0  # --cpus-per-gpu
    mem_mb_per_gpu: int = 0  # --mem-per-gpu
    exclusive: bool = False  # --exclusive: the whole node, with no other job on it

    @property
    def empty(self) -> bool:
        return self == NO_ASK

    def gpus_on(self, room: Room, free: int) -> int:
        """How many of ``free`` GPUs of a node with ``room`` the job may take (0: none)."""
        if self.exclusive and not room.idle:
            return 0
        cpus, mem = room.cpus - self.cpus, room.mem_mb - self.mem_mb
        if cpus < 0 or mem < 0:
            return 0
        if self.cpus_per_gpu:
            free = min(free, cpus // self.cpus_per_gpu)
        if self.mem_mb_per_gpu:
            free = min(free, mem // self.mem_mb_per_gpu)
        return max(0, free)

    def short(self, room: Room, gpus: int) -> str:
        """What ``room`` lacks for ``gpus`` GPUs of the job ("" when it fits)."""
        if self.exclusive and not room.idle:
            return "another job runs there (--exclusive)"
        cpus = self.cpus + gpus * self.cpus_per_gpu
        mem = self.mem_mb + gpus * self.mem_mb_per_gpu
        if cpus > room.cpus:
            return f"{cpus} CPUs asked, {room.cpus} free"
        if mem > room.mem_mb:
            return f"{mem} MB of memory asked, {room.mem_mb} MB free"
        return ""

    def after(self, room: Room, gpus: int) -> Room:
        """``room`` once the job runs there on ``gpus`` GPUs."""
        if self.exclusive:
            return Room(0, 0, False)
        return Room(room.cpus - self.cpus - gpus * self.cpus_per_gpu,
                    room.mem_mb - self.mem_mb - gpus * self.mem_mb_per_gpu, False)

    def render(self) -> str:
        """``--mem=20480M --cpus-per-gpu=2``: the ask as reasons name it ("" for none)."""
        parts = []
        if self.mem_mb:
            parts.append(f"--mem={self.mem_mb}M")
        if self.mem_mb_per_gpu:
            parts.append(f"--mem-per-gpu={self.mem_mb_per_gpu}M")
        if self.cpus:
            parts.append(f"{self.cpus} CPUs per node")
        if self.cpus_per_gpu:
            parts.append(f"--cpus-per-gpu={self.cpus_per_gpu}")
        if self.exclusive:
            parts.append("--exclusive")
        return " ".join(parts)


NO_ASK = Ask()
