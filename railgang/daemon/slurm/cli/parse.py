"""Slurm 22.05 CLI output -> small typed records (pure functions, no I/O).

Raw JSON from ``squeue --json`` / ``sinfo --json`` (openapi v0.0.38 data), ``sshare -P`` and
``scontrol show topology`` is turned into :class:`SqueueJob`, :class:`SinfoNode` and
:class:`ShareRow` first; building the decision core's snapshot from them is a separate step
(``snapshot.py``). Every malformed field raises :class:`ParseProblem` with a one-line message
naming the job or node and the field, so a caller can skip that one record and log why.

The railgang tag lives in a job's AdminComment, written by ``job_submit.lua``::

    railgang:tp=8,pp=4,dp=8;elastic=4:16;class=1[;serving=NAME][;needs=gpumem>=40G,nvlink][;begin=EPOCH][;preempt=DEADLINE@RESTARTS][;grow=DEADLINE@RESTARTS@n[01-04]x8][;ckpt=SECONDS]

``begin`` is the user's own ``--begin``, kept by ``job_submit.lua`` because the lease overwrites
Slurm's begin time: the daemon starts the job no earlier, and renews its lease no earlier either.

``preempt``/``grow`` are added by this backend while a checkpoint signal is in flight; they are
bound to the job's restart count, so they lapse by themselves once the job was requeued.
``ckpt`` is the Young–Daly checkpoint interval the daemon advised when it started the job
(``failures/advice.py``); the training helper reads it back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from railgang.daemon.core.model.job import PriorityClass
from railgang.daemon.core.model.needs import NO_NEEDS, Needs, NeedsError, parse_needs
from railgang.topology import hostnames

TAG_PREFIX = "railgang:"
_SERVING = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # job_submit.lua's rule


class ParseProblem(ValueError):
    """One record (job, node, line) of Slurm output cannot be read; ``str()`` says which and why."""


# ---- the railgang tag --------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Pending:
    """An in-flight checkpoint signal: act at ``deadline`` unless the job restarted since."""

    deadline: float
    restarts: int  # the job's restart_cnt when the signal was sent
    target: tuple[tuple[str, int], ...] = ()  # grow, shrink: (node, gpus) of the new size


@dataclass(frozen=True, slots=True)
class RailgangTag:
    """A job's railgang hints (and any in-flight preemption, grow or shrink notice) from its
    AdminComment."""

    tp: int = 1
    pp: int = 1
    dp: int | None = None  # None: no parallel hint; the GPU request decides
    elastic: tuple[int, int] | None = None  # DP replicas (min, max)
    priority_class: PriorityClass = PriorityClass.BATCH
    needs: Needs = NO_NEEDS  # what every node must offer (canonical text in the tag)
    serving: str = ""  # the serving deployment a class-0 replica belongs to (issue 19)
    begin: float | None = None  # the user's --begin (epoch s): not started before it
    preempt: Pending | None = None
    grow: Pending | None = None
    shrink: Pending | None = None  # a shrink's notice: the new size and when it applies
    ckpt: int | None = None  # advised checkpoint interval, seconds (failures/advice.py)

    def render(self) -> str:
        """The AdminComment for this tag (the inverse of :func:`parse_tag`)."""
        parts = []
        if self.dp is not None or self.tp != 1 or self.pp != 1:
            parts.append(f"tp={self.tp},pp={self.pp},dp={self.dp if self.dp is not None else 1}")
        if self.elastic is not None:
            parts.append(f"elastic={self.elastic[0]}:{self.elastic[1]}")
        parts.append(f"class={self.priority_class}")
        if self.serving:
            parts.append(f"serving={self.serving}")
        if not self.needs.empty:
            parts.append(f"needs={self.needs.render()}")
        if self.begin is not None:
            parts.append(f"begin={self.begin:.0f}")
        if self.preempt is not None:
            parts.append(f"preempt={self.preempt.deadline:.0f}@{self.preempt.restarts}")
        if self.grow is not None:
            parts.append(f"grow={self.grow.deadline:.0f}@{self.grow.restarts}@{render_target(self.grow.target)}")
        if self.shrink is not None:
            parts.append(f"shrink={self.shrink.deadline:.0f}@{self.shrink.restarts}@{render_target(self.shrink.target)}")
        if self.ckpt is not None:
            parts.append(f"ckpt={self.ckpt}")
        return TAG_PREFIX + ";".join(parts)


def render_target(target: Iterable[tuple[str, int]]) -> str:
    """``[(n01, 8), (n02, 8), (n03, 4)]`` -> ``n[01-02]x8+n03x4`` (nodes grouped by GPU count)."""
    groups: dict[int, list[str]] = {}
    for node, gpus in target:
        groups.setdefault(gpus, []).append(node)
    return "+".join(f"{hostnames.collect(nodes)}x{gpus}" for gpus, nodes in groups.items())


def parse_target(text: str) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    for group in text.split("+"):
        nodes, sep, gpus = group.rpartition("x")
        if not sep or not gpus.isdigit() or not nodes:
            raise ParseProblem(f"target '{group}' is not NODESxGPUS")
        out.extend((n, int(gpus)) for n in expand_hosts(nodes))
    return tuple(out)


def _int(value: str, what: str, lo: int, hi: int) -> int:
    if not value.isdigit() or not lo <= int(value) <= hi:
        raise ParseProblem(f"{what} '{value}' is not an integer in {lo}..{hi}")
    return int(value)


def _pending(value: str, what: str, with_target: bool) -> Pending:
    parts = value.split("@", 2)
    if len(parts) != (3 if with_target else 2):
        raise ParseProblem(f"{what} '{value}' is not DEADLINE@RESTARTS{'@TARGET' if with_target else ''}")
    deadline = _int(parts[0], f"{what} deadline", 0, 2**40)
    restarts = _int(parts[1], f"{what} restarts", 0, 2**31)
    return Pending(float(deadline), restarts, parse_target(parts[2]) if with_target else ())


def parse_tag(comment: str) -> RailgangTag | None:
    """The railgang tag of an AdminComment; ``None`` when the job is not a railgang job.

    Raises :class:`ParseProblem` for a comment that starts ``railgang:`` but is malformed.
    """
    if not comment.startswith(TAG_PREFIX):
        return None
    fields: dict[str, Any] = {}
    body = comment[len(TAG_PREFIX):]
    for item in filter(None, (i.strip() for i in body.split(";"))):
        key, sep, value = item.partition("=")
        if not sep:
            raise ParseProblem(f"AdminComment item '{item}' is not key=value")
        if key in ("tp", "pp", "dp"):
            for pair in item.split(","):
                k, s2, v = pair.partition("=")
                if not s2 or k not in ("tp", "pp", "dp") or k in fields:
                    raise ParseProblem(f"AdminComment parallel item '{pair}' is not tpN/ppN/dpN once each")
                fields[k] = _int(v, k, 1, 65536)
        elif key == "elastic":
            lo, s2, hi = value.partition(":")
            if not s2:
                raise ParseProblem(f"AdminComment elastic '{value}' is not MIN:MAX")
            lo_i, hi_i = _int(lo, "elastic min", 1, 65536), _int(hi, "elastic max", 1, 65536)
            if lo_i > hi_i:
                raise ParseProblem(f"AdminComment elastic '{value}': MIN > MAX")
            fields["elastic"] = (lo_i, hi_i)
        elif key == "class":
            fields["priority_class"] = PriorityClass(_int(value, "class", 0, 3))
        elif key == "serving":
            if not _SERVING.match(value):
                raise ParseProblem(f"AdminComment serving '{value[:80]}' is not a deployment name")
            fields["serving"] = value
        elif key == "needs":
            try:
                fields["needs"] = parse_needs(value)
            except NeedsError as exc:
                raise ParseProblem(f"AdminComment needs: {exc}") from exc
        elif key == "begin":
            fields["begin"] = float(_int(value, "begin", 0, 2**40))
        elif key == "preempt":
            fields["preempt"] = _pending(value, "preempt", with_target=False)
        elif key == "grow":
            fields["grow"] = _pending(value, "grow", with_target=True)
        elif key == "shrink":
            fields["shrink"] = _pending(value, "shrink", with_target=True)
        elif key == "ckpt":
            fields["ckpt"] = _int(value, "ckpt", 1, 2**31 - 1)
        else:
            raise ParseProblem(f"AdminComment has unknown key '{key}'")
    return RailgangTag(**fields)


# ---- GRES strings ------------------------------------------------------------------------------

_GRES_COUNT = re.compile(r"^(?:gres[:/])?gpu(?::[\w.-]+)?:(\d+)(?:\(.*\))?$")
_GRES_DETAIL = re.compile(r"^gpu(?::[\w.-]+)?:(\d+)\(IDX:([\d,\-]*|N/A)\)$")


def gres_gpus(gres: str) -> int:
    """GPUs in a GRES/TRES string: ``gpu:8``, ``gres:gpu:a100:4``, ``gpu:8(S:0-1)``; 0 if none.

    Only the ``gpu`` entry of a comma list counts (``gpu:8,nvme:1`` -> 8).
    """
    total = 0
    for part in _split_gres(gres):
        m = _GRES_COUNT.match(part)
        if m:
            total += int(m.group(1))
    return total


def _split_gres(gres: str) -> list[str]:
    # commas inside "(S:0-1)" or "(IDX:0,2)" do not separate entries
    out, depth, cur = [], 0, ""
    for ch in gres.strip():
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    return [p.strip() for p in out if p.strip() and p.strip() not in ("N/A", "(null)")]


def gpu_indices(detail: str) -> tuple[int, ...]:
    """``gpu:8(IDX:0-7)`` -> (0..7); ``gpu:3(IDX:0,2,5)``; raises ParseProblem if malformed.

    Raises when the index list does not hold exactly the count in front of it.
    """
    m = _GRES_DETAIL.match(detail.strip())
    if m is None:
        raise ParseProblem(f"gres_detail '{detail}' is not gpu:N(IDX:...)")
    count, idx = int(m.group(1)), m.group(2)
    indices: list[int] = []
    if idx and idx != "N/A":
        for rng in idx.split(","):
            lo, _, hi = rng.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ParseProblem(f"gres_detail '{detail}': bad index range '{rng}'")
            a, b = int(lo), int(hi or lo)
            if b < a or b - a > 4096:
                raise ParseProblem(f"gres_detail '{detail}': bad index range '{rng}'")
            indices.extend(range(a, b + 1))
    if len(indices) != count or len(set(indices)) != count:
        raise ParseProblem(f"gres_detail '{detail}': {count} GPUs but indices {idx}")
    return tuple(sorted(indices))


def expand_hosts(expr: str) -> tuple[str, ...]:
    try:
        return hostnames.expand(expr)
    except hostnames.HostListError as exc:
        raise ParseProblem(str(exc)) from None


__all__ = [
    "TAG_PREFIX",
    "ParseProblem",
    "Pending",
    "RailgangTag",
    "expand_hosts",
    "gpu_indices",
    "gres_gpus",
    "parse_tag",
    "parse_target",
    "render_target",
]
