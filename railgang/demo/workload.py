"""A reproducible stream of about 30 hinted training jobs, submitted with plain ``sbatch``.

The mix is what a small ML team's morning looks like: many one-node jobs, a few multi-node gangs
with tensor/pipeline/data parallel shapes, elastic jobs, and every priority class (one serving
job, some production, some interactive, mostly batch). Each job runs
:mod:`railgang.demo.train_example`, so preemption, resizing and restarts are real.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# (weight, GPUs per node, nodes, tp, pp): one-node jobs dominate, gangs are what topology is for
SHAPES: tuple[tuple[int, int, int, int, int], ...] = (
    (6, 1, 1, 1, 1), (5, 2, 1, 1, 1), (5, 4, 1, 2, 1), (6, 8, 1, 8, 1),
    (4, 8, 2, 8, 1), (2, 8, 2, 4, 2), (2, 8, 4, 8, 2),
)
CLASS_WEIGHTS = {0: 1, 1: 4, 2: 3, 3: 12}


@dataclass(frozen=True)
class DemoJob:
    name: str
    account: str
    nodes: int
    gpus_per_node: int
    tp: int
    pp: int
    dp: int
    elastic: tuple[int, int] | None
    priority_class: int
    steps: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def sbatch_argv(self, python: str, out_dir: str, step_s: float) -> list[str]:
        argv = ["sbatch", "--parsable", f"--job-name={self.name}", f"--account={self.account}",
                f"--nodes={self.nodes}", f"--gres=gpu:{self.gpus_per_node}",
                f"--rg-parallel=tp{self.tp},pp{self.pp},dp{self.dp}",
                # append: a requeued run would truncate the log and lose the first run's lines
                f"--rg-class={self.priority_class}", "--open-mode=append",
                f"--output={out_dir}/%x-%j.out"]
        if self.elastic:
            argv.append(f"--rg-elastic={self.elastic[0]}:{self.elastic[1]}")
        if self.priority_class == 2:
            argv.append("--time=10")  # interactive work is short by contract (DESIGN R-S7)
        # exec: the batch shell must not die of the preemption signal (docs/training.md)
        argv.append(f"--wrap=exec {python} -m railgang.demo.train_example "
                    f"--steps {self.steps} --step-s {step_s}")
        return argv


def _steps(base: int, dp: int, priority_class: int) -> int:
    """Steps for about ``base`` x 2 step-times of wall time (batch) or ``base`` / 2 (guaranteed
    work): the example shares a step's work among its DP replicas, so steps scale with ``dp``."""
    return max(5, base * dp * 2 if priority_class == 3 else base * dp // 2)


def make_workload(n: int = 30, seed: int = 1) -> list[DemoJob]:
    """``n`` jobs drawn from :data:`SHAPES` and :data:`CLASS_WEIGHTS` with a fixed seed.

    Batch work (class 3) comes first and more than fills a 128-GPU cluster; the guaranteed work
    (classes 0-2) follows, so submitted after a pause (:func:`submit` ``wave_gap_s``) it must
    shrink or preempt batch jobs to start: the demo shows priority classes at work.
    """
    rng = random.Random(seed)
    classes = list(CLASS_WEIGHTS)
    jobs: list[DemoJob] = []
    for i in range(n):
        _, per_node, nodes, tp, pp = rng.choices(SHAPES, weights=[s[0] for s in SHAPES])[0]
        dp = per_node * nodes // (tp * pp)
        cls = rng.choices(classes, weights=list(CLASS_WEIGHTS.values()))[0]
        if cls == 0 and any(j.priority_class == 0 for j in jobs):
            cls = 1  # one serving job is enough to show preemption
        # whole-node DP jobs of two or more nodes may flex down to one node's worth of replicas
        elastic = (max(1, dp // nodes), dp) if nodes > 1 and cls == 3 and i % 2 == 0 else None
        jobs.append(DemoJob(name=f"demo-{i:02d}", account=("team-a", "team-b")[i % 2],
                            nodes=nodes, gpus_per_node=per_node, tp=tp, pp=pp, dp=dp,
                            elastic=elastic, priority_class=cls,
                            steps=_steps(rng.randint(20, 60), dp, cls)))
    return sorted(jobs, key=lambda j: j.priority_class != 3)  # stable: batch wave first


Runner = Callable[[Sequence[str]], str]


def _sbatch(argv: Sequence[str]) -> str:
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    if res.returncode != 0:
        why = " ".join(res.stderr.split()) or f"exit {res.returncode}"  # lua's message comes first
        raise RuntimeError(f"sbatch refused {argv[2]}: {why}")
    return res.stdout


def submit(jobs: Sequence[DemoJob], *, out_dir: str, step_s: float = 1.0,
           python: str = sys.executable, runner: Runner = _sbatch, wave_gap_s: float = 0.0,
           sleep: Callable[[float], None] = time.sleep) -> list[tuple[DemoJob, str]]:
    """Submit every job; returns (job, Slurm job id) pairs in submission order.

    ``wave_gap_s``: pause before the first job of class 0-2, so the batch wave is running when
    the guaranteed work arrives."""
    submitted = []
    for i, job in enumerate(jobs):
        if wave_gap_s > 0 and job.priority_class != 3 and (i == 0 or jobs[i - 1].priority_class == 3):
            sleep(wave_gap_s)
        out = runner(job.sbatch_argv(python, out_dir, step_s)).strip()
        submitted.append((job, out.split(";")[0]))
    return submitted


__all__ = ["CLASS_WEIGHTS", "SHAPES", "DemoJob", "make_workload", "submit"]
