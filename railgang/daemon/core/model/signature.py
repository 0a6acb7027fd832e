"""Scheduling signatures: the waiting jobs one walk of the place phase treats as the same.

Two jobs with one :class:`Signature` read the same from everything the place phase consults for
them: the admission checks (larger than the cluster, needs, quota), the sizes it tries, the
nodes it may use, the gang the placer searches, the backfill test. So while the draft's free
GPUs and the queue's head are unchanged (``Draft.version``, ``PlacePhase.head``), the verdict
found for the first of them (the check that holds it, or the start attempt that missed) is
the verdict of the rest, given without another search; they are recorded together, parked
behind that verdict for the rest of the walk (``Draft.wait_behind``). KAI Scheduler does the same with a pod
group's scheduling-constraints signature (``PodGroupInfo.GetSchedulingConstraintsSignature``):
a group no easier than one that already failed is not searched again.

The same reuse, at the other places a verdict is searched for, each with what ends it:

- behind a strict FIFO head, once no admission check before the head's can hold a job (no
  quota, leaf wait or serving pool; none larger than the cluster or with needs from there on),
  the rest of the queue reads the same and is recorded in bulk (``PlacePhase._admitted_from``);
- under the signature, the placer's own misses: a gang shape that missed on the free GPUs misses
  again until some are given back (``Draft._failed``, cleared by ``Draft._give``), and a held
  leaf that could not take a shape cannot until GPUs are given back (``LeafWait`` and
  ``Draft.given``);
- the preempt phase's eviction memo: a gang (shape, nodes it may use, class, level, whether it
  is still waiting out its whole-leaf patience) for which no victim set was found is answered
  the same until an eviction is carried out (``EvictPhase.hopeless``).

A verdict is not carried into the next cycle. There, besides the free GPUs, every input of the
search the snapshot brings may have moved (node states and their CPU and memory room, link
health, hot spares, serving nodes lent by forecast, quotas and the accounts' use, reservations),
and a job parked on a stale miss would wait beside GPUs it could use. (What such parking could
save is measured in BENCHMARKS.md, "Parking across cycles, measured".)

Each field names what a difference in it can change (the unit tests in
``tests/daemon/core/test_signature.py`` hold one per field):

``priority_class``  the class walked, the serving nodes and hot spares it may use
``shape``           GPUs per replica, TP, PP, requested GPUs: the gang the placer searches, spares
``sizes``           the plan's wanted and minimum replicas, the request's elastic range (the
                    minimum admission reads, the largest size node room is checked for)
``pools``           the (GPU type, tier) pools the plan tries, in order
``needs``           needs (None: none; GPU memory, NVLink, ...), serving deployment: the nodes it may use
``quota``           the account, when a flat quota or the quota tree reaches it (its room then
                    differs by account); None when no quota does
``time``            what the walk reads of its run time (see :func:`time_key`)
``requeued``        requeued after a node fault: it may use hot spares
``submitted``       submit time, while leaf waits are on (how long it may still wait for a leaf)
``reserves``        under backfill, whether it holds the reservation if it misses (the plan's
                    ``reserve_for``; None: the plan reserves for nobody by name)
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import NamedTuple

from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.needs import NO_NEEDS, Needs
from railgang.daemon.core.model.plan import Want


class Signature(NamedTuple):
    """What the place phase reads of one waiting job (the module docstring names each field)."""

    priority_class: int
    shape: tuple[int, int, int, int]
    sizes: tuple[int, int, int, int]
    pools: tuple[tuple[str, str], ...]
    needs: tuple[Needs | None, str]
    quota: str | None
    time: Hashable
    requeued: bool
    submitted: float | None
    reserves: bool | None = None


def signature(job: Job, want: Want, quota: str | None, time: Hashable, submitted: float | None,
              reserves: bool | None = None) -> Signature:
    """``job``'s signature as ``want`` asks for it; the caller gives the parts that depend on
    the cycle: ``quota`` (the account when a quota reaches it), ``time`` (:func:`time_key`),
    ``submitted`` (the submit time while leaf waits are on) and ``reserves`` (under backfill,
    whether the plan names it to hold the reservation)."""
    r = job.request
    needs = r.needs
    return Signature(r.priority_class, (r.replica_gpus, r.tp, r.pp, r.gpus),
                     (want.replicas, want.min_replicas, r.min_replicas, r.max_replicas), want.pools,
                     # (no needs read as None, as the field list above says)
                     (None if needs is NO_NEEDS else needs, r.serving),
                     quota, time, job.state.after_fault, submitted, reserves)


def time_key(job: Job, own: bool, ends_before: bool | None, lent: bool) -> Hashable:
    """The ``time`` field: what one walk reads of ``job``'s run time.

    ``own``: the walk reads the job's own curve (whether starting small pays, whether a slower
    pool pays): its job id, so no other job shares its verdict. Else ``ends_before``: behind a
    backfill reservation, whether its one size ends before the reserved start (all the backfill
    test reads of its run time; None: no reservation reads it). ``lent``: serving pools or hot
    spares lend nodes by the time limit and the work left, which then count too."""
    if own:
        return job.job_id
    return ends_before, (job.request.time_limit_s, job.state.work_remaining_s) if lent else None


__all__ = ["Signature", "signature", "time_key"]
