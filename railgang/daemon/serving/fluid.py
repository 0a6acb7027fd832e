"""Cluster utilisation with a training *backlog*: the chapter's own accounting (issue 19).

The chapter's scenario assumes training always has work queued ("积压任务保证 100% 利用率"), so
every GPU training holds is busy: its own pool, and whatever the serving side lends. A GPU taken
back costs the borrower a checkpoint (it saves on notice, the switch-in's first part) and a GPU
lent costs a restore before it does useful work: both are counted as lost GPU-hours. Utilisation
is busy GPU-hours over the cluster's GPU-hours: serving counts the demand it served (an idle warm
replica is idle), training what it held less what it lost.

``railgang sim --serving`` with a training trace replaces the backlog by real jobs
(``replay.py``); this model is the chapter's arithmetic and the upper bound of that one.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from railgang.daemon.serving.plan import Timeline, lent_total, outcome


@dataclass(frozen=True, slots=True)
class Backlog:
    gpus: int  # the training pool, always busy
    checkpoint_s: float = 120.0  # GPU-seconds lost per GPU taken back (the save on notice)
    restore_s: float = 120.0  # GPU-seconds lost per GPU lent (the borrower restores)


@dataclass(frozen=True, slots=True)
class Utilisation:
    hours: float
    total_gpus: int
    serving_gpu_h: float  # demand served
    training_gpu_h: float  # the pool and the borrowed GPUs, less what was lost
    borrowed_gpu_h: float  # GPU-hours training held on lent serving GPUs
    lost_gpu_h: float  # checkpoints on take-back, restores on lend

    @property
    def utilisation(self) -> float:
        denom = self.total_gpus * self.hours
        return (self.serving_gpu_h + self.training_gpu_h) / denom if denom else 0.0

    @property
    def mean_borrowed_gpus(self) -> float:
        return self.borrowed_gpu_h / self.hours if self.hours else 0.0


def utilisation(timelines: Sequence[Timeline], backlog: Backlog, total_gpus: int) -> Utilisation:
    """Utilisation of ``total_gpus`` over the plan's span (all timelines on one step grid)."""
    if not timelines or not timelines[0].demand:
        return Utilisation(0.0, total_gpus, 0.0, 0.0, 0.0, 0.0)
    step_s = timelines[0].step_s
    hours = len(timelines[0].demand) * step_s / 3600
    got = outcome(timelines)
    lent = lent_total(timelines)
    taken = sum(max(0, a - b) for a, b in itertools.pairwise(lent))
    given = lent[0] + sum(max(0, b - a) for a, b in itertools.pairwise(lent))
    lost = (taken * backlog.checkpoint_s + given * backlog.restore_s) / 3600
    training = backlog.gpus * hours + got.lent_gpu_h - lost
    return Utilisation(hours, total_gpus, got.served_gpu_h, training, got.lent_gpu_h, lost)


__all__ = ["Backlog", "Utilisation", "utilisation"]
