"""One ledger segment: a run of a job on its GPUs between two accounting events, as sacct
reports it (``daemon/ledger/sacct.py`` reads them; ``repositories/ledger.py`` stores them). It is
the ledger's record, so it lives with the database: the daemon imports it from here, never the
other way round.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Segment:
    cluster: str
    job_id: str
    account: str
    user: str
    partition: str
    state: str
    nodes: str
    gpus: int
    gpu_type: str
    start: int
    end: int | None
    labels: tuple[tuple[str, str], ...] = field(default=())
    time_limit_s: int | None = None  # the job's time limit; None: unlimited or unknown
    run_start: int = 0  # when the run this record belongs to started (a resize keeps it)
    progress: Any = None  # the training helper's latest report (slurm_plugins.training.Progress)
    submit: int = 0  # the record's time.submission: tells apart two jobs that share an id

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.cluster, self.job_id, self.start)

    def gpu_seconds(self, now: int) -> int:
        return self.gpus * max(0, (self.end if self.end is not None else now) - self.start)


__all__ = ["Segment"]
