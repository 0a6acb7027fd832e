"""``sacct --json`` (Slurm 22.05 openapi dbv0.0.38; 24.11+ data_parser v0.0.40+) -> ledger segments.

The schema is the one the document's ``meta`` names (``daemon/slurm/cli/schemas.py``); a later
schema's record is first read into the 22.05 shapes (``state.current`` one word: 24.11's
``["PENDING", "RESIZING"]`` is 22.05's ``RESIZING``). An unknown schema, or a window whose
records all fail to read, is refused instead of billing nothing.

One sacct record is one allocation interval of a job: a resized job has a RESIZING record per
size and a requeued job a REQUEUED record per earlier run, each carrying the job id. The rules:

1. A segment starts at ``max(time.start, time.submission)``: after a resize Slurm keeps the job's
   first start in ``time.start`` but stamps the new record's ``submission`` with the resize time.
2. It ends at ``time.end``; ``0`` means it is still open (running).
3. Segments are keyed by (cluster, job id, segment start). Two resizes within one second make
   Slurm overwrite the middle record, so the key (not the record's position) is what an upsert
   matches on; a record with no length is dropped.
4. Records that never started (``time.start == 0``) or hold no GPU are not usage.
5. Labels come from the job comment ``rg-labels:experiment=...,model=...``; a training job's
   comment is instead its latest progress report (``rg-progress:...``, training/contract.py),
   kept on the segment for the step timings; a malformed one is logged in one line and ignored.
6. ``time.limit`` (minutes; null when unlimited) and the run's own start (``time.start``) give a
   finished job's actual/requested run-time ratio, which the start-time estimator rebuilds its
   history from after a restart.
7. Slurm reuses job ids (the id wraps at ``MaxJobId``, or slurmctld's state is reset): a record
   submitted after the ledger's job of that id ended belongs to a new job
   (``time.submission`` on the segment; ``db.repositories.ledger.upsert_segments``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import RECORD_ERRORS, load_json, record_name
from railgang.daemon.slurm.cli.schemas import SchemaProblem, reader_for, schema_of
from railgang.db.segments import Segment
from railgang.errors import InputError
from railgang.training import Progress, read_progress

log = logging.getLogger(__name__)

LABEL_PREFIX = "rg-labels:"
NOTHING_FOUND = 9003  # "Nothing found with query": an empty window, not a failure
MAX_GPUS = 1 << 20  # GPUs one record may hold; more is a broken record, not a bill


def parse_labels(comment: str | None) -> tuple[tuple[str, str], ...]:
    if not comment or not comment.startswith(LABEL_PREFIX):
        return ()
    out: dict[str, str] = {}
    for part in comment[len(LABEL_PREFIX):].split(","):
        key, sep, value = part.partition("=")
        key, value = key.replace("\x00", "").strip(), value.replace("\x00", "").strip()
        if sep and key and value:  # NUL: PostgreSQL refuses it in text
            out[key[:32]] = value[:128]
    return tuple(sorted(out.items()))


def _gpus(tres: Any, default_type: str) -> tuple[int, str]:
    count, gpu_type = 0, default_type
    for t in tres or []:
        if t.get("type") == "gres" and str(t.get("name") or "").startswith("gpu"):
            n = t.get("count") or 0
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_GPUS:
                raise ValueError(f"tres gpu count {str(n)[:20]} is not a GPU count")
            count += n
            _, _, kind = str(t["name"]).partition(":")
            if kind:
                gpu_type = kind
    return count, gpu_type


def _record(rec: dict[str, Any], default_gpu_type: str) -> Segment | None:
    t = rec["time"]
    start, end, submit = _epoch(t, "start"), _epoch(t, "end"), _epoch(t, "submission")
    if start == 0:
        return None
    gpus, gpu_type = _gpus(rec.get("tres", {}).get("allocated"), default_gpu_type)
    if gpus <= 0:
        return None
    seg_start = max(start, submit)
    state = rec["state"]["current"]
    if not isinstance(state, str):
        raise ValueError(f"state.current is {type(state).__name__}, not a state")
    seg_end = end if end > 0 else None
    if seg_end is not None and seg_end <= seg_start:
        return None
    comment = (rec.get("comment") or {}).get("job")
    comment = comment if isinstance(comment, str) else None
    job_id = rec["job_id"]
    if isinstance(job_id, bool) or not isinstance(job_id, int | str) or len(str(job_id)) > 32:
        raise ValueError(f"job_id {str(job_id)[:40]} is not a Slurm job id")
    return Segment(cluster=str(rec["cluster"]), job_id=str(job_id),
                   account=str(rec.get("account") or ""), user=str(rec.get("user") or ""),
                   partition=str(rec.get("partition") or ""), state=state,
                   nodes=str(rec.get("nodes") or ""), gpus=gpus, gpu_type=gpu_type,
                   start=seg_start, end=seg_end, labels=parse_labels(comment),
                   time_limit_s=_limit_s(t.get("limit")), run_start=start,
                   progress=_progress(str(job_id), comment), submit=submit)


def _epoch(t: dict[str, Any], key: str) -> int:
    """A time of the record in epoch seconds (0: unset); ValueError for anything but a whole
    number in a sane range (``Infinity``, ``NaN``, text, a year past 9999)."""
    raw = t[key]
    if isinstance(raw, dict):  # later openapi versions: {"set": .., "number": ..}
        raw = raw.get("number") if raw.get("set", True) else 0
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw < 253402300800:
        raise ValueError(f"time.{key} is {str(raw)[:20]}, not a time")
    return int(raw)


def _limit_s(raw: Any) -> int | None:
    if isinstance(raw, dict):  # later openapi versions: {"set": .., "infinite": .., "number": ..}
        raw = raw.get("number") if raw.get("set", True) and not raw.get("infinite") else None
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 < raw < 10**8:
        return None  # null, unlimited (Slurm's INFINITE is 0xfffffffe) or nonsense
    return raw * 60


def _progress(job_id: str, comment: str | None) -> Progress | None:
    """The user writes the Comment: a bad one costs the job its timings, never the ingest."""
    try:
        return read_progress(comment or "")
    except ValueError as exc:
        log.warning("sacct job %s: Comment: %s; progress ignored", job_id, exc)
        return None


def parse_sacct(text: str, *, source: str = "sacct --json",
                default_gpu_type: str = "gpu") -> list[Segment]:
    """Every GPU segment of the document; later records of the same key win (rule 3).

    The document is read tolerantly (``records.load_json``); one malformed record (not an
    object, ``Infinity`` or text where a time belongs, a missing ``time``) is skipped with a
    warning naming its job, never the window. Raises :class:`InputError` (one line) only when
    the document as a whole is unreadable, has no ``jobs`` list or reports an sacct error."""
    try:
        doc = load_json(text, "sacct --json")
    except ParseProblem as exc:
        cause = exc.__cause__
        if isinstance(cause, json.JSONDecodeError):
            raise InputError(f"not JSON: {cause.msg}", path=source, line=cause.lineno) from exc
        raise InputError(str(exc).removeprefix("sacct --json: "), path=source) from exc
    if not isinstance(doc.get("jobs"), list):
        raise InputError("no 'jobs' list (is this `sacct --json` output?)", path=source)
    errors = doc.get("errors") or []
    for err in errors if isinstance(errors, list) else [errors]:
        number = err.get("error_number", 0) if isinstance(err, dict) else err
        if number != NOTHING_FOUND and number not in (0, None):
            what = (err.get("error") or err.get("description")) if isinstance(err, dict) else ""
            raise InputError(f"sacct reported error {str(number)[:20]}: {str(what)[:120]}",
                             path=source)
    try:
        schema = schema_of(doc, "sacct --json")
    except SchemaProblem as exc:
        raise InputError(str(exc).removeprefix("sacct --json: "), path=source) from exc
    reader = reader_for(schema)
    by_key: dict[tuple[str, str, int], Segment] = {}
    skipped: list[str] = []
    for i, rec in enumerate(doc["jobs"]):
        try:
            if not isinstance(rec, dict):
                raise TypeError("not an object")
            seg = _record(reader.accounting(rec) if reader else rec, default_gpu_type)
        except RECORD_ERRORS as exc:
            log.warning("%s: record %d (job %s) skipped: %s %s", source, i, record_name(rec),
                        type(exc).__name__, str(exc)[:120])
            skipped.append(f"job {record_name(rec)}: {str(exc)[:120]}")
            continue
        if seg is not None:
            by_key[seg.key] = seg
    if skipped and not by_key and 2 * len(skipped) >= len(doc["jobs"]):  # the format, not a record
        raise InputError(f"none of the {len(doc['jobs'])} records of schema {schema} could be "
                         f"read ({skipped[0]}); refusing to bill an empty window", path=source)
    return sorted(by_key.values(), key=lambda s: s.key)


def sacct_command(since: str, until: str) -> list[str]:
    """The argument list (never a shell) of one window: all users, JSON."""
    return ["sacct", "--json", "--allusers", "--starttime", since, "--endtime", until]


def segments_by_job(segments: Iterable[Segment]) -> dict[tuple[str, str], list[Segment]]:
    out: dict[tuple[str, str], list[Segment]] = {}
    for s in segments:
        out.setdefault((s.cluster, s.job_id), []).append(s)
    return out


__all__ = ["LABEL_PREFIX", "Segment", "parse_labels", "parse_sacct", "sacct_command",
           "segments_by_job"]
