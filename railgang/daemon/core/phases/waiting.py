"""The reasons one cycle gives its waiting jobs, built when they are read.

A long queue mostly waits for one reason (behind a strict FIFO head; with nothing left that fits
the free GPUs), recorded once by ``Draft.wait_behind`` as a :class:`Behind`. Its readers
mostly read only a few of them: the simulator's recorder stops
once the free GPUs are claimed, its engine looks only for jobs larger than the cluster, the
daemon writes them all. So :class:`CycleReasons` is a sequence that builds each one on iteration,
in the queue's order, and equals the tuple it stands for.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import overload

from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.model.reasons import PendingReason, Reason


@dataclass(frozen=True, slots=True)
class Behind:
    """Jobs that wait for one reason, recorded once (``Draft.wait_behind``): each one's
    ``PendingReason`` is built only when it is read."""

    wants: Mapping[str, Want]
    jobs: Mapping[str, Job]
    code: Reason
    detail: str
    free: int

    def reason(self, job_id: str) -> PendingReason:
        needed = self.wants[job_id].needed(self.jobs[job_id].replica_gpus)
        return PendingReason(job_id, self.code, self.detail, needed, self.free)


class BulkWaits(Mapping[str, Behind]):
    """The jobs recorded in bulk (``Draft.wait_behind``), by job id: the records as they came
    (each has its own map of wants), merged into one map only when a job is taken out of them
    (it starts, or waits for a reason of its own) or two records share a job. Read any way, it
    is the one map ``dict.update`` would build from the records, the last one winning
    (test_waiting_reasons.py::test_bulk_waits_read_as_the_merged_map_they_stand_for); a record
    stands for a signature's skipped turns (``model/signature.py``) and stays as it came until a
    job is taken out of it."""

    __slots__ = ("_merged", "_records")

    def __init__(self) -> None:
        self._records: list[Behind] = []
        self._merged: dict[str, Behind] | None = None

    def add(self, behind: Behind) -> None:
        if self._merged is None and all(b.wants.keys().isdisjoint(behind.wants.keys()) for b in self._records):
            self._records.append(behind)
        else:
            self._map().update(dict.fromkeys(behind.wants, behind))

    def _map(self) -> dict[str, Behind]:
        if self._merged is None:
            self._merged = {}
            for b in self._records:
                self._merged.update(dict.fromkeys(b.wants, b))
            self._records = []
        return self._merged

    def merged(self) -> Mapping[str, Behind]:
        """The one map the records stand for (the test named in the class docstring), built now
        if it was not; ``CycleReasons`` reads every job through it."""
        return self._map()

    def pop(self, job_id: str) -> None:
        """``job_id`` no longer waits in bulk."""
        if self._merged is not None or any(job_id in b.wants for b in self._records):
            self._map().pop(job_id, None)

    def count(self) -> int | None:
        """How many jobs wait in bulk, while no record was merged (the records are disjoint);
        else None."""
        return sum(len(b.wants) for b in self._records) if self._merged is None else None

    def get(self, job_id: str, default: Behind | None = None) -> Behind | None:  # type: ignore[override]
        if self._merged is not None:
            return self._merged.get(job_id, default)
        records = self._records
        return next((b for b in records if job_id in b.wants), default)

    def __getitem__(self, job_id: str) -> Behind:
        b = self.get(job_id)
        if b is None:
            raise KeyError(job_id)
        return b

    def __contains__(self, job_id: object) -> bool:
        return isinstance(job_id, str) and self.get(job_id) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self._map())

    def __len__(self) -> int:
        n = self.count()
        return n if n is not None else len(self._map())

    def __bool__(self) -> bool:
        return any(b.wants for b in self._records) if self._merged is None else bool(self._merged)


class CycleReasons(Sequence[PendingReason]):
    """One reason per waiting job of ``pending`` that has one, in ``pending``'s order: those
    recorded one by one (``reasons``) and those recorded in bulk (``behind``, whose codes are
    among ``bulk_codes``; the two maps are disjoint). Read-only: it takes over the draft's maps,
    which nothing changes afterwards."""

    __slots__ = ("_behind", "_built", "_bulk_codes", "_pending", "_reasons")

    def __init__(self, pending: Sequence[Job], reasons: Mapping[str, PendingReason],
                 behind: Mapping[str, Behind], bulk_codes: frozenset[Reason]) -> None:
        self._pending, self._reasons, self._behind = pending, reasons, behind
        self._bulk_codes = bulk_codes
        self._built: tuple[PendingReason, ...] | None = None  # all of them, once asked by index

    def __iter__(self) -> Iterator[PendingReason]:
        if self._built is not None:
            yield from self._built
            return
        reasons, behind = self._reasons, self._behind
        if isinstance(behind, BulkWaits):
            behind = behind.merged()
        for j in self._pending:
            jid = j.request.job_id
            r = reasons.get(jid)
            if r is None:
                b = behind.get(jid)
                if b is None:
                    continue
                r = b.reason(jid)
            yield r

    def coded(self, code: Reason) -> Iterator[PendingReason]:
        """The reasons of ``code``, in the queue's order (the simulator asks for
        ``larger_than_cluster``). Bulk records carry one code each: a code none of them has is
        found among the single records."""
        if code in self._bulk_codes and self._behind:
            yield from (r for r in self if r.code is code)
            return
        hits = [r for r in self._reasons.values() if r.code is code]
        if len(hits) > 1:  # recorded in the phases' order: put them in the queue's
            at = {j.request.job_id: i for i, j in enumerate(self._pending)}
            hits.sort(key=lambda r: at[r.job_id])
        yield from hits

    def _all(self) -> tuple[PendingReason, ...]:
        if self._built is None:
            self._built = tuple(self.__iter__())  # not tuple(self): it asks __len__ first
        return self._built

    def __len__(self) -> int:
        return len(self._all())

    def __bool__(self) -> bool:
        return next(iter(self), None) is not None

    @overload
    def __getitem__(self, i: int) -> PendingReason: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[PendingReason, ...]: ...
    def __getitem__(self, i: int | slice) -> PendingReason | tuple[PendingReason, ...]:
        return self._all()[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CycleReasons | tuple):
            return self._all() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())


def coded(reasons: Sequence[PendingReason], code: Reason) -> Iterator[PendingReason]:
    """The reasons of ``code`` in ``reasons``: :meth:`CycleReasons.coded` when it is one."""
    if isinstance(reasons, CycleReasons):
        return reasons.coded(code)
    return (r for r in reasons if r.code is code)


__all__ = ["Behind", "BulkWaits", "CycleReasons", "coded"]
