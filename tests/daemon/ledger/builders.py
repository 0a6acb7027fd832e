"""Synthetic ``sacct --json`` (22.05) documents with the shapes the real cluster produced:
resize chains (RESIZING records keep the first start; ``submission`` is the resize time),
requeue chains (REQUEUED then a later run), running jobs (``end`` 0), labels in the comment."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

T0 = 1796000000


@dataclass(frozen=True)
class Piece:
    start: int
    end: int | None  # None: still running
    gpus: int


@dataclass(frozen=True)
class SJob:
    job_id: int
    account: str
    kind: str  # resize | requeue
    pieces: tuple[Piece, ...]
    labels: str | None = None

    def records(self) -> list[dict[str, Any]]:
        out = []
        first = self.pieces[0].start
        for i, p in enumerate(self.pieces):
            last = i == len(self.pieces) - 1
            if self.kind == "resize":
                start, submission = first, (p.start if i else first - 5)
                state = "RESIZING" if not last else ("RUNNING" if p.end is None else "COMPLETED")
            else:
                start = p.start
                submission = self.pieces[i - 1].end or 0 if i else first - 5
                state = "REQUEUED" if not last else ("RUNNING" if p.end is None else "COMPLETED")
            out.append(record(self.job_id, self.account, start=start,
                              end=p.end or 0, submission=submission, gpus=p.gpus,
                              state=state, comment=self.labels))
        return out


def record(job_id: int, account: str, *, start: int, end: int, submission: int, gpus: int,
           state: str, comment: str | None = None, nodes: str = "n[01-02]",
           cluster: str = "railgang") -> dict[str, Any]:
    """One job record with the fields the 22.05 JSON has (and the ledger reads)."""
    return {
        "account": account, "cluster": cluster, "job_id": job_id, "user": "alice",
        "partition": "gpu", "nodes": nodes, "allocation_nodes": 2,
        "comment": {"administrator": None, "job": comment, "system": None},
        "state": {"current": state, "reason": "None"},
        "time": {"start": start, "end": end, "submission": submission, "eligible": submission,
                 "elapsed": max(0, (end or start) - start), "suspended": 0},
        "tres": {"allocated": [{"count": 2, "id": 1, "name": None, "type": "cpu"},
                               {"count": gpus, "id": 1001, "name": "gpu", "type": "gres"}],
                 "requested": []},
    }


def document(records: Sequence[dict[str, Any]]) -> str:
    errors = [] if records else [{"description": "Nothing found", "error_number": 9003,
                                  "error": "Nothing found with query",
                                  "source": "slurmdb_jobs_get"}]
    return json.dumps({"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}, "errors": errors,
                       "jobs": list(records)})


def as_of(job: SJob, now: int) -> SJob | None:
    """The job as Slurm knew it at ``now``: later pieces not yet there, the current one open."""
    seen = []
    for p in job.pieces:
        if p.start >= now:
            break
        seen.append(Piece(p.start, None, p.gpus) if p.end is None or p.end > now else p)
    return SJob(job.job_id, job.account, job.kind, tuple(seen), job.labels) if seen else None


def window_view(jobs: Sequence[SJob], since: int, until: int, now: int | None = None) -> str:
    """What sacct -S since -E until answers (at ``now``; default: after everything): the
    records whose interval meets the window."""
    out = []
    for j in jobs:
        known = as_of(j, now) if now is not None else j
        if known is None:
            continue
        for rec in known.records():
            t = rec["time"]
            start = max(t["start"], t["submission"])
            if start < until and (t["end"] == 0 or t["end"] > since):
                out.append(rec)
    return document(out)
