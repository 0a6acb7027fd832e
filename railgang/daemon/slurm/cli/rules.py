"""Slurm's own rules on where a job may run (issue 35; docs/slurm-backend.md, "Slurm's own rules").

A Start pins a job to nodes (``ReqNodeList``); Slurm accepts the update even where the job may
never run (a node of another partition, one of its ``--exclude`` list, one without a feature its
``--constraint`` names) and keeps it pending forever, its GPUs counted as taken by the core. So:

- what railgang models narrows the nodes the core may place the job on (``Needs.nodes``): its
  partitions, less its ``--exclude`` list, with the plain features of its ``--constraint``
  (names joined by ``&`` or ``,``, all of them required);
- what it does not model is left to Slurm (:func:`left_to_slurm`): its lease is released and the
  daemon never plans it (``--nodelist``, a constraint with ``|``, ``[]``, ``*`` or counts, a
  ``--reservation``, a heterogeneous job);
- a job whose ``--dependency`` is not met yet waits out of the core's queue, its lease kept
  (:func:`waits_on`); Slurm drops each dependency once it is met, and the job is scheduled.

Pure: records in, node sets and one-line reasons out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from railgang.daemon.core.model.room import Room
from railgang.daemon.slurm.cli.commands import hosts
from railgang.daemon.slurm.cli.records import SinfoNode, SqueueJob

_FEATURE = re.compile(r"^[A-Za-z0-9_.\-]+$")
Where = tuple[frozenset[str] | None, str]  # the nodes it may use (None: any), and how reasons say so
ANYWHERE: Where = (None, "")


def plain_features(constraint: str) -> frozenset[str] | None:
    """The features a ``--constraint`` of plain names joined by ``&`` or ``,`` requires (all of
    them); None when it uses more than that (``|``, ``[]``, ``*`` counts, parentheses)."""
    names = re.split(r"[&,]", constraint)
    if not all(_FEATURE.match(n) for n in names):
        return None
    return frozenset(names)


_GRES_TYPE = re.compile(r"(?:^|,)(?:gres[:/])?gpu:([A-Za-z][\w.\-]*):\d+")


def _typed(gres: str) -> str:
    m = _GRES_TYPE.search(gres)
    return m.group(1).lower() if m else ""


def left_to_slurm(rec: SqueueJob, pinned: frozenset[str] | None = frozenset()) -> str:
    """Why railgang leaves this waiting job to Slurm ("" when it does not): a rule it does not
    model. ``pinned``: jobs this process started (their ``ReqNodeList`` is railgang's, not the
    user's); a job requeued since its start keeps the list railgang set, so it is planned again
    (a user's ``--nodelist`` on a requeued job is not told apart: docs, "Slurm's own rules");
    None: every ``ReqNodeList`` is taken as railgang's."""
    if rec.het_job_id:
        return "a heterogeneous job (Slurm starts its components together)"
    if rec.reservation:
        return f"it asks for reservation {rec.reservation} (--reservation)"
    if rec.licenses:
        return f"it asks for licenses {rec.licenses[:80]} (--licenses: Slurm counts them)"
    if rec.array_tasks:
        return f"a job array (tasks {rec.array_tasks[:40]}: Slurm splits off each task)"
    if limit_reason(rec.reason):
        return f"Slurm holds it on a limit ({rec.reason}: QOS or association)"
    if rec.required_nodes and rec.restarts == 0 and pinned is not None and rec.job_id not in pinned:
        return f"it asks for nodes {hosts(rec.required_nodes)} (--nodelist)"
    if rec.constraint and plain_features(rec.constraint) is None:
        return f"its --constraint {rec.constraint[:80]!r} uses more than plain features joined by & or ,"
    return ""


def limit_reason(reason: str) -> bool:
    """A pending reason that is a QOS or association limit (``QOSMaxGRESPerUser``,
    ``AssocGrpGRES``, ...): railgang does not count those limits, Slurm starts the job when
    they allow it."""
    return reason.startswith(("QOS", "Assoc")) and ("Limit" in reason or "Max" in reason
                                                   or "Grp" in reason or "Min" in reason)


def waits_on(rec: SqueueJob) -> str:
    """Why a waiting job is not placed yet ("" when it may be): its dependency is not met."""
    if rec.dependency:
        return f"it waits on its dependency {rec.dependency[:80]} (--dependency)"
    return ""


def rooms(nodes: Iterable[SinfoNode], starting: Iterable[SqueueJob]) -> dict[str, Room]:
    """Free CPUs and memory per node (nodes whose room is unknown are absent), less what jobs
    railgang just started ask there: Slurm counts them only once they run."""
    out = {n.name: n.room for n in nodes if n.room is not None}
    for job in starting:
        per_node = -(-job.gpus_requested // max(1, len(job.required_nodes)))
        for name in job.required_nodes:
            if name in out:
                out[name] = job.ask.after(out[name], per_node)
    return out


class Places:
    """The nodes each job may use by its partitions, ``--exclude`` list and plain constraint,
    worked out once per distinct (partitions, excluded, constraint) in one observation."""

    def __init__(self, nodes: Iterable[SinfoNode]) -> None:
        self.nodes: Mapping[str, SinfoNode] = {n.name: n for n in nodes}
        self.all = frozenset(self.nodes)
        # partitions unknown for every node (a reader that gives none): no partition rule
        self.partitioned = any(n.partitions for n in self.nodes.values())
        # nodes in an active reservation: only its jobs may use them, and those are Slurm's
        self.reserved = frozenset(n.name for n in self.nodes.values() if n.reserved)
        # drained or down: Slurm starts nothing new there, a pin onto one included
        self.closed = frozenset(n.name for n in self.nodes.values() if not n.state.usable)
        self._memo: dict[tuple[str, tuple[str, ...], str, str], Where] = {}

    def of(self, rec: SqueueJob) -> Where:
        """Where ``rec`` may run: ``(None, "")`` when anywhere on the cluster."""
        key = (rec.partition, rec.excluded_nodes, rec.constraint, rec.gpu_type)
        got = self._memo.get(key)
        if got is None:
            got = self._memo[key] = self._where(*key)
        return got

    def allows(self, rec: SqueueJob) -> bool:
        """Whether every node ``rec`` is pinned to (``ReqNodeList``) is one it may run on now: a
        Start planned on a record its owner changed since (``scontrol update ExcNodeList=``, a
        partition, a constraint), a node reserved since, or one drained, down or gone since pins
        it where Slurm never runs it."""
        pinned = rec.required_nodes
        if not self.all.issuperset(pinned) or not self.closed.isdisjoint(pinned):
            return False
        nodes, _ = self.of(rec)
        return nodes is None or nodes.issuperset(pinned)

    def _where(self, partition: str, excluded: tuple[str, ...], constraint: str, gpu: str) -> Where:
        nodes, words = self.all, []
        parts = frozenset(p for p in partition.split(",") if p)
        if parts and self.partitioned:
            nodes = frozenset(n for n in nodes if self.nodes[n].partitions & parts)
            if nodes != self.all:  # named only where it narrows
                words.append(f"of partition{'s' if len(parts) > 1 else ''} {','.join(sorted(parts))}")
        if excluded:
            nodes = nodes - frozenset(excluded)
            words.append("outside its --exclude list")
        features = plain_features(constraint) if constraint else None
        if features:
            nodes = frozenset(n for n in nodes if features <= self.nodes[n].features)
            words.append(f"with features {'&'.join(sorted(features))}")
        if gpu:  # gpu:h100:8 runs only where the typed GRES is h100
            nodes = frozenset(n for n in nodes if _typed(self.nodes[n].gres) == gpu)
            words.append(f"with {gpu} GPUs")
        if self.reserved:
            nodes = nodes - self.reserved
            words.append("outside reservations")
        if nodes == self.all:
            return ANYWHERE
        return nodes, " ".join(words)


__all__ = ["ANYWHERE", "Places", "Where", "left_to_slurm", "limit_reason", "plain_features", "rooms",
           "waits_on"]
