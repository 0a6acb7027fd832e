"""``[failures]``: what the daemon does when nodes fail under jobs (docs/failures.md).

A group of its own, like ``[report]``, so the settings of one feature live beside its code.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, field_validator

from railgang.daemon.core.model.spares import SpareRules
from railgang.daemon.failures.flaky import FlakyRules
from railgang.daemon.failures.respond import HangRules

MAX_COMMAND = 4096  # a burn-in command is a line, not a script


class FailureSettings(BaseModel):
    model_config = {"extra": "forbid"}
    # act on failures at all: requeue NODE_FAIL jobs, order failed-over jobs first in their
    # class, drain flaky nodes and burn them in (false: detect nothing, as before issue 20)
    enabled: bool = True
    # a node where this many jobs were killed by a node failure within flaky_window_s is flaky
    flaky_count: int = Field(default=3, ge=1, le=1000)
    flaky_window_s: float = Field(default=86400.0, gt=0)
    # a failed burn-in is tried again after this long (the node stays drained meanwhile)
    burn_in_retry_s: float = Field(default=3600.0, gt=0)
    # the failure counts per node and the kills already counted, kept across daemon restarts
    # (failures/persist.py); empty: failures.json next to daemon.heartbeat_file
    memory_file: Path | None = None
    # the burn-in: empty = the shipped check (railgang/slurm_plugins/burnin.sh: nvidia-smi where
    # it exists, a CPU and node-local filesystem check otherwise); else one shell command line
    # run by `sbatch --wrap` on the node; exit 0 = passed
    burn_in_command: str = ""
    burn_in_time_limit_min: int = Field(default=15, ge=1, le=1440)  # its --time
    # its --account (job_submit.lua refuses a job without one); empty = the daemon user's
    # default account, asked from sacctmgr once
    burn_in_account: str = ""

    # a running railgang job whose progress reports stop for max(hang_steps x its step time,
    # hang_floor_s) is hung (an NCCL hang looks like this): requeued, first in its class, from
    # its last checkpoint; jobs without reports are never called hung
    requeue_hung: bool = True
    hang_steps: float = Field(default=10.0, ge=1, le=1e6)
    hang_floor_s: float = Field(default=1800.0, ge=10, le=7 * 86400)

    @field_validator("burn_in_command")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if len(v) > MAX_COMMAND or "\n" in v or "\x00" in v:
            raise ValueError(f"one line of at most {MAX_COMMAND} characters, without NUL")
        return v

    # hot spares (core/model/spares.py): idle nodes kept per leaf where a gang of at least
    # spares_min_gang_gpus runs, for its restart after a node failure, lent meanwhile only to
    # class-3 work whose time limit is at most spares_lend_max_s; 0 = off (the default)
    spares_per_leaf: int = Field(default=0, ge=0, le=64)
    spares_min_gang_gpus: int = Field(default=64, ge=1)
    spares_lend_max_s: float = Field(default=3600.0, ge=0)

    def spares(self) -> SpareRules:
        return SpareRules(per_leaf=self.spares_per_leaf, min_gang_gpus=self.spares_min_gang_gpus,
                          lend_max_s=self.spares_lend_max_s)

    def hangs(self) -> HangRules | None:
        if not self.requeue_hung:
            return None
        return HangRules(steps=self.hang_steps, floor_s=self.hang_floor_s)

    def rules(self) -> FlakyRules:
        return FlakyRules(count=self.flaky_count, window_s=self.flaky_window_s,
                          retry_s=self.burn_in_retry_s)


__all__ = ["FailureSettings"]
