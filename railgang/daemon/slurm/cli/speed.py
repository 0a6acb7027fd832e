"""Measured speed and resize costs of railgang jobs, kept across cycles and daemon restarts.

Every cycle :meth:`SpeedBook.observe` reads the training helper's progress report
(``rg-progress:...,sps=…``, the job's own Comment) of each RUNNING railgang job and counts its
samples/s at the job's replica count *as Slurm allocated it* (GPUs held // tp×pp), never at a
size the report names. A report counts once (its ``t`` changed) and only when it was written
after the current allocation began (start or in-place resize), so the last report of the old
size is not taken for the new one. Each size keeps the median of its last :data:`WINDOW` counted
rates. A size with enough reports also becomes the *model prior* of the same user's job name
(``--job-name``, the ``model`` the core already reads): the next run of that model starts from
that curve, not a straight line. The prior is per user, so one user's reports never shape
another user's jobs.

Resize costs are timed by the daemon's own clock, from the last cycle that saw the job running
at its old size to the first report counted at the new one (a grow on 22.05 is checkpoint +
requeue + restart + restore, all of it); a restart's restore cost from Slurm's new start time to
that first report. Each is blended with the job's constant (``speed_fit.blend_cost``).

:meth:`SpeedBook.apply` hands the core each job's fitted curve (``core/model/speed_fit.py``) as
its ``speedup_fn`` and the blended costs as ``transition_cost_s`` / ``restore_cost_s``.
State lives in one JSON file (``daemon.speed_file``), written after a cycle that changed it
(atomically); an unreadable file is a warning and an empty book, never a failed cycle.
Rules for hostile reports: docs/security.md, "Speed reports".
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from railgang.daemon.core.model.job import Job, JobRequest
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.model.speed_fit import (
    DEFAULT,
    MIN_REPORTS,
    blend_cost,
    bound_claim,
    fit_curve,
    fitted,
)
from railgang.daemon.slurm.cli.records import SqueueJob

log = logging.getLogger(__name__)
WINDOW = 9  # counted rates kept per size (their median is the size's rate)
COSTS_KEPT = 8  # measured resize / restore costs kept per job and per model
MODELS_MAX = 10000  # model priors kept (the oldest are dropped)
DEFAULTS = JobRequest("x", 1)  # the constants every cost is blended with


@dataclass
class JobSpeed:
    """What the daemon measured of one job (mutable: the book's own working state)."""

    user: str
    model: str
    submit: float
    rates: dict[int, list[float]] = field(default_factory=dict)  # replicas -> counted samples/s
    resize_s: list[float] = field(default_factory=list)
    restore_s: list[float] = field(default_factory=list)
    replicas: int = 0  # the size it was last seen running at (0: never seen running)
    restarts: int = 0
    since: float = 0.0  # when the current allocation began (start or in-place resize)
    last_t: int = -1  # the report last counted
    seen_at: float | None = None  # the daemon's time it was last seen running at ``replicas``
    moved_at: float | None = None  # set by a resize/restart: when the old size was last seen
    restarted: bool = False  # that move was a requeue (a restore follows)

    def medians(self) -> dict[int, tuple[float, int]]:
        return {k: (statistics.median(v), len(v)) for k, v in self.rates.items() if v}


def _key(user: str, model: str) -> str:
    return f"{user}/{model}"


class SpeedBook:
    """Measured rates per job and per (user, model), and the curves and costs fitted to them."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.jobs: dict[str, JobSpeed] = {}
        # user/model -> {"rates": {k: [rate, reports]}, "resize_s": [...], "restore_s": [...], "at": t}
        self.models: dict[str, dict[str, Any]] = {}
        self._warned: set[tuple[str, str]] = set()
        self._dirty = False
        if path is not None:
            self._load(path)

    # -- observe ---------------------------------------------------------------------------
    def observe(self, recs: Iterable[SqueueJob], now: float) -> list[str]:
        """Count the new reports of running railgang jobs; returns warnings (one per job and
        kind), each naming the job. Forgets jobs no longer queued or running."""
        notes: list[str] = []
        present = set()
        jobs, models = self.jobs, self.models
        for rec in recs:
            if rec.tag is None:
                continue
            js = jobs.get(rec.job_id)
            if js is not None and ((js.user, js.model) != (rec.user, rec.name)
                                   or rec.restarts < js.restarts):
                js = None  # Slurm reused the id (not told by submit time: a requeue resets it)
            if js is None:
                if rec.state != "RUNNING" and (not models or _key(rec.user, rec.name) not in models):
                    continue  # waiting, of a model never measured: nothing to know (yet)
                js = jobs[rec.job_id] = JobSpeed(rec.user, rec.name, rec.submit_time)
            present.add(rec.job_id)
            if rec.state == "RUNNING":
                self._running(js, rec, now, notes)
        gone = [j for j in self.jobs if j not in present]
        for j in gone:
            self._dirty |= self.jobs.pop(j).replicas > 0  # only those that ran are in the file
        self._warned = {w for w in self._warned if w[0] in present}
        return notes

    def _running(self, js: JobSpeed, rec: SqueueJob, now: float, notes: list[str]) -> None:
        assert rec.tag is not None
        k = sum(len(g) for _, g in rec.allocation) // (rec.tag.tp * rec.tag.pp)
        if k < 1:
            return
        if k != js.replicas or rec.restarts != js.restarts:
            if js.replicas and js.seen_at is not None:  # a resize or restart it was seen through
                js.moved_at, js.restarted = js.seen_at, rec.restarts != js.restarts
            js.replicas, js.restarts = k, rec.restarts
            js.since = max(rec.start_time, rec.resize_time)
            self._dirty = True
        js.seen_at = now
        p = rec.progress
        if p is None or p.t == js.last_t or p.t < int(js.since):
            return  # no report, the one already counted, or one from before this allocation
        js.last_t = p.t
        prior = self._prior(js)
        own = js.medians()
        sps = bound_claim(k, p.sps, own, prior)
        if sps is None:
            if p.sps != 0:  # 0: a helper that has not timed a step yet; nothing to say
                self._warn(notes, rec.job_id, "invalid",
                           f"progress sps={p.sps!r} at {k} replica(s) is not a rate; not counted")
            return
        if sps < p.sps:
            self._warn(notes, rec.job_id, "clamped",
                       f"progress sps={p.sps:g} at {k} replica(s) is more than its own earlier "
                       f"rates (or its model's) allow; counted as {sps:g} (docs/security.md)")
        vals = js.rates.setdefault(k, [])
        vals.append(sps)
        del vals[:-WINDOW]
        if js.moved_at is not None:  # the first report after a resize: its cost, timed here
            js.resize_s = [*js.resize_s, max(0.0, now - js.moved_at)][-COSTS_KEPT:]
            if js.restarted:
                js.restore_s = [*js.restore_s, max(0.0, now - rec.start_time)][-COSTS_KEPT:]
            js.moved_at = None
        self._dirty = True
        self._teach(js, k, now)

    def _teach(self, js: JobSpeed, k: int, now: float) -> None:
        """Hand a size with enough reports, and the job's costs, to its model's prior."""
        if not js.model:
            return
        rate = statistics.median(js.rates[k])
        m = self.models.setdefault(_key(js.user, js.model), {"rates": {}})
        if len(js.rates[k]) >= MIN_REPORTS:
            m["rates"][str(k)] = [rate, len(js.rates[k])]
        for name in ("resize_s", "restore_s"):
            if getattr(js, name):
                m[name] = getattr(js, name)[-COSTS_KEPT:]
        m["at"] = now
        if len(self.models) > MODELS_MAX:
            for old in sorted(self.models, key=lambda x: self.models[x].get("at", 0))[
                    :len(self.models) - MODELS_MAX]:
                del self.models[old]

    def _prior(self, js: JobSpeed) -> dict[int, tuple[float, int]]:
        m = self.models.get(_key(js.user, js.model)) if js.model else None
        if not m:
            return {}
        return {int(k): (float(v[0]), int(v[1])) for k, v in m.get("rates", {}).items()}

    def _warn(self, notes: list[str], job_id: str, kind: str, text: str) -> None:
        if (job_id, kind) not in self._warned:
            self._warned.add((job_id, kind))
            notes.append(f"job {job_id}: {text}")

    # -- what the core reads ---------------------------------------------------------------
    def curve(self, job_id: str) -> tuple[fitted, float | None, float | None] | None:
        """The job's fitted curve and its measured-and-blended resize and restore costs (None:
        not measured); None when the book knows nothing of the job."""
        js = self.jobs.get(job_id)
        if js is None:
            return None
        m = self.models.get(_key(js.user, js.model), {}) if js.model else {}
        if not (js.rates or js.resize_s or js.restore_s or m):
            return None  # a waiting job of a model never measured: most of a long queue
        resize = js.resize_s or m.get("resize_s") or []
        restore = js.restore_s or m.get("restore_s") or []
        return (fit_curve(js.medians(), self._prior(js)),
                blend_cost(DEFAULTS.transition_cost_s, tuple(resize)) if resize else None,
                blend_cost(DEFAULTS.restore_cost_s, tuple(restore)) if restore else None)

    def with_speed(self, job: Job) -> Job:
        """``job`` with its measured curve and costs (the same object when nothing is known)."""
        got = self.curve(job.job_id)
        if got is None:
            return job
        curve, resize, restore = got
        if curve.source == DEFAULT and not curve.rates and resize is None and restore is None:
            return job
        curve = dataclasses.replace(curve, resize_s=resize, restore_s=restore)
        changes: dict[str, Any] = {"speedup_fn": curve}
        if resize is not None:
            changes["transition_cost_s"] = resize
        if restore is not None:
            changes["restore_cost_s"] = restore
        return Job(dataclasses.replace(job.request, **changes), job.state)

    def apply(self, snapshot: Snapshot) -> Snapshot:
        """The snapshot with every known job's measured curve and costs."""
        known = self.jobs
        pending = tuple(self.with_speed(j) if j.job_id in known else j for j in snapshot.pending)
        running = {i: (r if (j := self.with_speed(r.job)) is r.job else r.with_job(j))
                   for i, r in snapshot.running.items()}
        if all(a is b for a, b in zip(pending, snapshot.pending, strict=True)) and all(
                running[i] is r for i, r in snapshot.running.items()):
            return snapshot  # nothing measured of any job in it: the same snapshot
        return snapshot.replace(pending=pending, running=running)

    # -- state file ------------------------------------------------------------------------
    def save(self) -> None:
        """Write the book if it changed (atomically); a failure is a warning."""
        if self.path is None or not self._dirty:
            return
        body = {"version": 1, "models": self.models,
                "jobs": {j: {**dataclasses.asdict(v), "rates": {str(k): r for k, r in v.rates.items()}}
                         for j, v in self.jobs.items() if v.replicas > 0}}
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(body, sort_keys=True, separators=(",", ":")))
            os.replace(tmp, self.path)
            self._dirty = False
        except OSError as exc:
            log.warning("speed: cannot write %s: %s; measured speeds are kept in memory only",
                        self.path, exc.strerror or exc)

    def _load(self, path: Path) -> None:
        try:
            body = json.loads(path.read_text())
            models = body.get("models", {})
            jobs = {str(j): _job_speed(v) for j, v in body.get("jobs", {}).items()}
            if not isinstance(models, dict):
                raise ValueError("models is not an object")
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("speed: %s is unreadable (%s); starting with no measured speeds",
                        path, exc)
            return
        self.models, self.jobs = models, jobs


def _job_speed(v: Mapping[str, Any]) -> JobSpeed:
    fields = {f.name for f in dataclasses.fields(JobSpeed)}
    js = JobSpeed(**{k: x for k, x in v.items() if k in fields})
    js.rates = {int(k): [float(x) for x in r] for k, r in dict(v.get("rates", {})).items()}
    return js


__all__ = ["WINDOW", "JobSpeed", "SpeedBook"]
