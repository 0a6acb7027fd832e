"""Typed records of one Slurm observation: jobs, nodes, fair-share rows (pure parsing).

``parse_squeue``/``parse_sinfo``/``parse_sshare`` take the raw command output and return records
plus a list of one-line problems for the records they had to skip (a malformed job never stops
the observation of the others). Field names follow ``squeue --json``/``sinfo --json`` of 22.05
(openapi v0.0.38); a document of a later schema is first read by that schema's reader
(``schemas.py``, chosen by the document's own ``meta``), an unknown schema is refused.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from railgang.daemon.core.model.room import NO_ASK, Ask, Room
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.slurm.cli.asks import gpu_type, job_ask, node_room
from railgang.daemon.slurm.cli.parse import (
    ParseProblem,
    RailgangTag,
    expand_hosts,
    gpu_indices,
    gres_gpus,
    parse_tag,
)
from railgang.daemon.slurm.cli.schemas import (
    KNOWN_JOB_STATES,
    SchemaProblem,
    reader_for,
    schema_of,
)
from railgang.daemon.slurm.cli.sharing import sharing_request
from railgang.training import Progress, read_progress

# squeue job states that hold or will hold resources; everything else (COMPLETED, CANCELLED...)
# is history the snapshot ignores
PENDING_STATES = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})
ACTIVE_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING",
                           "SIGNALING", "STAGE_OUT"})
# ended jobs the daemon still acts on (docs/failures.md): a job a node failure killed and Slurm
# did not requeue, and railgang's burn-in jobs (their end state is the verdict on a node)
BURN_IN_NAME = "railgang-burnin"


@dataclass(frozen=True, slots=True)
class SqueueJob:
    """One job from ``squeue --json`` with the fields the backend uses."""

    job_id: str
    state: str  # PENDING, RUNNING, ...
    reason: str  # state_reason: BeginTime, Resources, JobHeldUser, None...
    account: str
    user: str
    name: str
    submit_time: float
    eligible_time: float
    start_time: float
    resize_time: float  # 0 when never resized
    time_limit_s: float | None
    priority: int
    restarts: int  # restart_cnt: bumped by every requeue
    nodes_requested: int  # node_count (pending: the minimum asked for)
    gpus_requested: int  # total GPUs asked for (per job, or per node x nodes)
    batch_host: str
    required_nodes: tuple[str, ...]  # ReqNodeList (set by a railgang Start)
    allocation: tuple[tuple[str, tuple[int, ...]], ...]  # (node, GPU indices), allocation order
    admin_comment: str
    tag: RailgangTag | None  # None: not a railgang job (or a malformed tag, see tag_problem)
    tag_problem: str = ""  # why a railgang: AdminComment was not understood
    alloc_problem: str = ""  # GPU indices unreadable: its nodes count as fully used
    progress: Progress | None = None  # the training helper's last report (job Comment)
    progress_problem: str = ""  # a malformed progress Comment (the job is kept, without it)
    exit_signal: int = 0  # the signal that ended the job's batch script (0: none, or still on)
    qos: str = ""  # the job's QOS (a class may be granted to a QOS)
    requeue: bool = True  # Slurm may requeue it (False: submitted with --no-requeue)
    node_list: tuple[str, ...] = ()  # squeue's "nodes": kept after the job ended (the GPU
    # allocation is not), the nodes a NODE_FAIL job ran on
    asks_gpus: bool = True  # some tres_per_{job,node,task,socket} names a GPU (job_submit.lua's
    # asks_gpus): a railgang shape with none behind it is skipped (slurm/cli/snapshot.py)
    shares_gpus: str = ""  # the GPU-sharing GRES it asks for (shard:2, mps:50; sharing.py)
    # Slurm's own rules on where it may run (docs/slurm-backend.md, "Slurm's own rules"):
    partition: str = ""  # its partition(s), comma-separated ("" = unknown: any)
    excluded_nodes: tuple[str, ...] = ()  # --exclude
    constraint: str = ""  # --constraint, as the user wrote it (features)
    dependency: str = ""  # --dependency still unmet (Slurm drops each one once it is met)
    reservation: str = ""  # --reservation
    het_job_id: int = 0  # the leader's id in a heterogeneous job (0: not one)
    ask: Ask = NO_ASK  # CPUs and memory per node beside its GPUs (asks.py)
    licenses: str = ""  # --licenses
    array_tasks: str = ""  # a job array's tasks not yet split off ("1-3"; "" for one job)
    gpu_type: str = ""  # the typed GRES it asks for (gpu:h100:8 -> h100; "" for any)

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


@dataclass(frozen=True, slots=True)
class SinfoNode:
    """One node from ``sinfo --json``."""

    name: str
    gpus: int
    state: NodeState  # the core's vocabulary: idle | mixed | alloc | drain | down
    reason: str
    features: frozenset[str]
    gres: str = ""  # as sinfo prints it (gpu:a100:8(S:0-1)): the typed GRES names the GPU type
    partitions: frozenset[str] = frozenset()  # the partitions it is in (empty: unknown)
    # who set ``reason`` (sinfo's reason_set_by_user, 24.11+ reason.user; "" when not shown):
    # Slurm's own reasons carry slurm.conf's SlurmUser (failures/respond.py rule 5)
    reason_by: str = ""
    room: Room | None = None  # free CPUs and memory (asks.py); None: unknown
    reserved: bool = False  # in an active reservation (only its jobs may use it)
    maint: bool = False  # in a MAINT one (sinfo "maint"; the state reads drain: no new work)


@dataclass(frozen=True, slots=True)
class ShareRow:
    """An account row of ``sshare -a -P``: normalised shares and raw (decayed) usage."""

    account: str
    norm_shares: float
    raw_usage: float


# a \uD800-\uDFFF escape that is not half of a pair: json.loads would make it a str that no
# UTF-8 encoder (database, log file) accepts; it becomes \uFFFD before parsing
# (one literal prefix, so the scan is fast; a pair matches whole and is kept by _lone)
_SURROGATE = re.compile(r"\\u[dD](?:[89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
                        r"|[c-fC-F][0-9a-fA-F]{2})")
_DIGITS_LIMIT = "Exceeds the limit"  # int("9" * 5000): CPython's int max_str_digits guard


def load_json(text: str, command: str) -> dict[str, Any]:
    """A Slurm command's JSON document, read tolerantly: ``NaN``/``Infinity`` stay floats for the
    per-record readers to refuse, an integer of thousands of digits reads as infinity (so the
    one record holding it is skipped, not the document), ``\\ud800``-style lone surrogates become
    U+FFFD, and a document nested past the JSON reader's depth is one :class:`ParseProblem`.

    Raises :class:`ParseProblem` (one line) when the whole document is unreadable or not an
    object; never anything else."""
    if "\\u" in text:
        text = _SURROGATE.sub(_lone, text)
    try:
        try:
            data = json.loads(text)
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError) or _DIGITS_LIMIT not in str(exc):
                raise
            data = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise ParseProblem(f"{command}: output is not JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError as exc:
        raise ParseProblem(f"{command}: output is nested too deeply to read") from exc
    except ValueError as exc:
        raise ParseProblem(f"{command}: output is not JSON ({str(exc)[:80]})") from exc
    if not isinstance(data, dict):
        raise ParseProblem(f"{command}: output is not a JSON object")
    doc: dict[str, Any] = data
    return doc


def _lone(m: re.Match[str]) -> str:
    return m.group(0) if len(m.group(0)) == 12 else "\\ufffd"


def _bounded_int(digits: str) -> int | float:
    return int(digits) if len(digits) <= 4000 else (-math.inf if digits.startswith("-") else math.inf)


def _num(raw: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, dict):  # later openapi versions wrap numbers as {"set":..,"number":..}
        value = value.get("number", default) if value.get("set", True) else default
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ParseProblem(f"field {key} is {_short(value)}, not a number")
    number = float(value)  # an int past a float's range is an OverflowError, caught per record
    if not math.isfinite(number):
        raise ParseProblem(f"field {key} is {value!r}, not a finite number")
    return number


def _short(value: Any, width: int = 40) -> str:
    """``repr`` of a user's value for a log line, cut to ``width`` characters."""
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= width else text[:width] + "..."


# what a malformed record can raise in a reader besides ParseProblem: a wrong type where a field
# is read (TypeError, AttributeError, KeyError, IndexError), an out-of-range number
# (OverflowError, ValueError) or a value nested too deeply to print (RecursionError)
RECORD_ERRORS = (ParseProblem, TypeError, ValueError, AttributeError, KeyError, IndexError,
                 OverflowError, RecursionError)


def record_name(raw: Any) -> str:
    """How a log line names one record: its job id (cut short), else ``?``."""
    ident = raw.get("job_id", "?") if isinstance(raw, dict) else "?"
    return ident if isinstance(ident, str) and len(ident) <= 32 else _short(ident, 32)


def _allocation(raw: Mapping[str, Any], job_id: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Per-node GPU indices: ``gres_detail[i]`` belongs to ``job_resources.allocated_nodes[i]``."""
    res = raw.get("job_resources") or {}
    nodes = [n.get("nodename", "") for n in res.get("allocated_nodes") or []]
    if not nodes and raw.get("nodes"):
        nodes = list(expand_hosts(str(raw["nodes"])))
    details = list(raw.get("gres_detail") or [])
    if not details:
        return tuple((n, ()) for n in nodes)
    if len(details) != len(nodes):
        raise ParseProblem(f"{len(details)} gres_detail entries for {len(nodes)} nodes")
    return tuple((n, gpu_indices(d)) for n, d in zip(nodes, details, strict=True))


_REASON_WORD = re.compile(r"[^,:(\s]+")


def reason_word(value: Any) -> str:
    """Slurm's reason name (BeginTime, ReqNodeNotAvail, RaisedSignal), without the description
    some outputs append ("RaisedSignal:10(User defined signal 1)", "ReqNodeNotAvail,
    UnavailableNodes:n01"): squeue -O prints one, 24.11's JSON does not, and only the name is
    read (snapshot.QUEUE_REASONS)."""
    found = _REASON_WORD.match(str(value or ""))
    return found.group(0) if found else "None"


def exit_signal(raw: Mapping[str, Any]) -> int:
    """The signal number that ended the job, from ``exit_code``: a wait status on 22.05
    (openapi 0.0.38: ``10`` is "killed by signal 10"), an object with ``signal.id`` later."""
    code = raw.get("exit_code")
    if isinstance(code, dict):
        sig = code.get("signal")
        ident = sig.get("id") if isinstance(sig, dict) else None
        if isinstance(ident, dict):  # {"set": true, "number": 10}
            ident = ident.get("number") if ident.get("set", True) else 0
        return _signal_number(ident)
    return _signal_number(code) & 0x7F


def _signal_number(value: Any) -> int:
    """A whole number from JSON, or 0 for anything else (NaN, infinity, text, booleans)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return 0
    return max(0, min(int(value), 2**31 - 1))


def squeue_job(raw: Mapping[str, Any]) -> SqueueJob:
    """One ``jobs[]`` entry -> :class:`SqueueJob`; raises :class:`ParseProblem` naming the job
    and the field, and nothing else, whatever the entry holds."""
    job_id = record_name(raw)
    try:
        return _squeue_job(raw, job_id)
    except ParseProblem as exc:
        raise ParseProblem(f"job {job_id}: {exc}") from exc
    except RECORD_ERRORS as exc:
        raise ParseProblem(f"job {job_id}: unreadable record ({type(exc).__name__}: "
                           f"{str(exc)[:80]})") from exc


def _squeue_job(raw: Mapping[str, Any], job_id: str) -> SqueueJob:
    nodes_requested = int(_num(raw, "node_count", 1)) or 1
    per_job = gres_gpus(str(raw.get("tres_per_job") or ""))
    per_node = gres_gpus(str(raw.get("tres_per_node") or ""))
    limit = raw.get("time_limit")
    comment = str(raw.get("admin_comment") or "")
    shares = sharing_request(raw)
    try:
        allocation, alloc_problem = _allocation(raw, job_id), ""
    except RECORD_ERRORS as exc:  # keep the job: its nodes must not look free
        nodes = expand_hosts(str(raw.get("nodes") or ""))
        allocation = tuple((n, ()) for n in nodes)
        # a shard's detail names no whole GPU: sharing.py counts what it holds
        alloc_problem = "" if shares else f"job {job_id}: {exc}; its nodes count as fully used"
    try:
        tag, tag_problem = parse_tag(comment), ""
    except ParseProblem as exc:  # the job still holds its GPUs: keep it, just not as ours
        tag, tag_problem = None, f"job {job_id}: {exc}; skipped by railgang (fix the AdminComment)"
    try:  # the Comment is the user's: a bad one costs the job its estimate, nothing more
        progress, progress_problem = read_progress(str(raw.get("comment") or "")), ""
    except ValueError as exc:
        progress, progress_problem = None, f"job {job_id}: Comment: {exc}; progress ignored"
    return SqueueJob(
        job_id=job_id,
        state=str(raw.get("job_state", "")),
        reason=reason_word(raw.get("state_reason")),
        account=str(raw.get("account") or "default"),
        user=str(raw.get("user_name") or ""),
        qos=str(raw.get("qos") or ""),
        name=str(raw.get("name") or ""),
        submit_time=_num(raw, "submit_time"),
        eligible_time=_num(raw, "eligible_time"),
        start_time=_num(raw, "start_time"),
        resize_time=_num(raw, "resize_time"),
        time_limit_s=None if limit is None else _num(raw, "time_limit") * 60.0,
        priority=int(_num(raw, "priority")),
        restarts=int(_num(raw, "restart_cnt")),
        nodes_requested=nodes_requested,
        gpus_requested=per_job or per_node * nodes_requested,
        batch_host=str(raw.get("batch_host") or ""),
        required_nodes=expand_hosts(str(raw.get("required_nodes") or "")),
        allocation=allocation,
        alloc_problem=alloc_problem,
        admin_comment=comment,
        tag=tag,
        tag_problem=tag_problem,
        progress=progress,
        progress_problem=progress_problem,
        exit_signal=exit_signal(raw),
        requeue=raw.get("requeue") is not False,
        asks_gpus=any("gpu" in str(raw.get(f"tres_per_{k}") or "")
                      for k in ("job", "node", "task", "socket")),
        shares_gpus=shares,
        node_list=expand_hosts(str(raw.get("nodes") or "")),
        partition=str(raw.get("partition") or ""),
        excluded_nodes=expand_hosts(str(raw.get("excluded_nodes") or "")),
        constraint=_unset(raw.get("features")),
        dependency=_unset(raw.get("dependency")),
        reservation=_unset(raw.get("resv_name")),
        het_job_id=int(_num(raw, "het_job_id")),
        # a waiting job's (a running one holds what it holds; 22.05 keeps a shrunk one's first ask)
        ask=job_ask(raw, nodes_requested) if str(raw.get("job_state", "")) in PENDING_STATES else NO_ASK,
        licenses=_unset(raw.get("licenses")),
        array_tasks=_array_tasks(raw.get("array_task_string")),
        gpu_type=gpu_type(raw),
    )


NONE_WORDS = frozenset({"", "N/A", "n/a", "(null)", "None", "Unknown", "NONE"})  # squeue -O's "none"


def _unset(value: Any) -> str:
    """A text field; Slurm's words for none (``(null)``) are "", as the narrow read has them."""
    text = str(value or "")
    return "" if text in NONE_WORDS else text


def _array_tasks(value: Any) -> str:
    """An array's tasks not yet split off (``1-3``, ``1,4``, ``1-9%2``); "" for one job (a task
    split off prints its own number in ``-O ArrayTaskID``, nothing in the JSON)."""
    text = _unset(value)
    return text if any(c in text for c in "-,%") else ""


def unreadable_job(raw: Mapping[str, Any], problem: str) -> SqueueJob | None:
    """What is left of an active job whose record could not be read: its nodes (all their GPUs
    count as used, so nothing is placed on them) and nothing of its own for railgang to act on.
    ``None`` when even the job id, state or node list are unreadable."""
    try:
        job_id, state = raw.get("job_id"), raw.get("job_state")
        nodes = expand_hosts(str(raw.get("nodes") or ""))
    except RECORD_ERRORS:
        return None
    if (not isinstance(job_id, int | str) or isinstance(job_id, bool) or not isinstance(state, str)
            or state not in ACTIVE_STATES or not nodes):
        return None
    return SqueueJob(job_id=record_name(raw), state=str(state), reason="None", account="", user="",
                     name="", submit_time=0.0, eligible_time=0.0, start_time=0.0, resize_time=0.0,
                     time_limit_s=None, priority=0, restarts=0, nodes_requested=len(nodes),
                     gpus_requested=0, batch_host="", required_nodes=(),
                     allocation=tuple((n, ()) for n in nodes),
                     alloc_problem=f"{problem}; its nodes count as fully used",
                     admin_comment="", tag=None)


def parse_squeue(text: str, *, keep_signalled: bool = False,
                 ) -> tuple[list[SqueueJob], list[str]]:
    """``squeue --json`` output -> (jobs that hold or wait for resources, skip messages).

    One bad record (not an object, a field of the wrong type, ``Infinity`` where a count
    belongs) is one skip message naming the job; an active job's nodes stay used if its node
    list can be read (:func:`unreadable_job`). Raises :class:`ParseProblem` only when the
    document as a whole is unreadable or has no ``jobs`` list, and :class:`SchemaProblem` when
    its ``meta`` names no schema railgang reads or none of its job records could be read (a
    state this Slurm does not have counts as unreadable).

    ``keep_signalled`` also keeps jobs that ended of a signal (squeue shows ended jobs for
    ``MinJobAge``): a batch script killed by railgang's checkpoint signal must still be
    requeued (``apply.died_of_the_signal``); and jobs that ended ``NODE_FAIL`` and burn-ins
    (``BURN_IN_NAME``), which the failure responder reads (``failures.py``)."""
    data = load_json(text, "squeue --json")
    entries = data.get("jobs", [])
    if not isinstance(entries, list):
        raise ParseProblem("squeue --json: 'jobs' is not a list")
    schema = schema_of(data, "squeue --json")
    reader = reader_for(schema)
    jobs: list[SqueueJob] = []
    problems: list[str] = []
    skipped = 0
    for i, raw in enumerate(entries):
        if reader is not None:
            raw = _read(reader.job, raw)
        if not isinstance(raw, dict):
            problems.append(f"squeue: jobs[{i}] is {_short(raw)}, not a job; skipped")
            skipped += 1
            continue
        try:
            state = raw.get("job_state", "")
            if not isinstance(state, str):
                raise ParseProblem(f"job {record_name(raw)}: job_state is {_short(state)}")
            if state not in KNOWN_JOB_STATES:
                raise ParseProblem(f"job {record_name(raw)}: job_state {_short(state)} is not a "
                                   f"Slurm job state")
            if state not in PENDING_STATES | ACTIVE_STATES and not (keep_signalled and (
                    exit_signal(raw) or state == "NODE_FAIL"
                    or str(raw.get("name") or "").startswith(BURN_IN_NAME))):
                continue
            job = squeue_job(raw)
        except ParseProblem as exc:
            problems.append(f"{exc}; skipped")
            skipped += 1
            salvage = unreadable_job(raw, str(exc))
            if salvage is not None:
                jobs.append(salvage)
            continue
        jobs.append(job)
        problems.extend(p for p in (job.tag_problem, job.alloc_problem, job.progress_problem) if p)
    if entries and not jobs and skipped == len(entries):
        raise SchemaProblem(f"squeue --json {schema}: none of its {len(entries)} job records "
                            f"could be read ({problems[0][:160]}); refusing an empty cluster")
    return jobs, problems


def _read(read: Any, raw: Any) -> Any:
    """A schema reader's view of one record; the record as it is if the reader trips on it
    (the record reader then says what is wrong with it)."""
    try:
        return read(raw)
    except RECORD_ERRORS:
        return raw


def node_state(base: str, flags: list[str]) -> NodeState:
    """sinfo's state and flags -> the core's :class:`NodeState` (drain wins over busy)."""
    flagset = {f.upper() for f in flags}
    base = base.lower()
    if base in ("down", "error", "future", "unknown") or flagset & {"NOT_RESPONDING", "POWERED_DOWN",
                                                                   "POWERING_DOWN", "FAIL"}:
        return NodeState.DOWN
    if flagset & {"DRAIN", "MAINTENANCE", "REBOOT_REQUESTED", "REBOOT_ISSUED"}:
        return NodeState.DRAIN
    return {"allocated": NodeState.ALLOCATED, "mixed": NodeState.MIXED,
            "idle": NodeState.IDLE}.get(base, NodeState.DOWN)


def parse_sinfo(text: str) -> tuple[list[SinfoNode], list[str]]:
    """``sinfo --json`` output -> (nodes, skip messages); one bad node is one message.

    :class:`SchemaProblem` when ``meta`` names no schema railgang reads, or the document lists
    nodes and none of them could be read."""
    data = load_json(text, "sinfo --json")
    schema = schema_of(data, "sinfo --json")
    reader = reader_for(schema)
    if reader is None:
        listed = data.get("nodes", [])
        if not isinstance(listed, list):
            raise ParseProblem("sinfo --json: 'nodes' is not a list")
        entries: list[tuple[str, Any]] = [(f"nodes[{i}]", raw) for i, raw in enumerate(listed)]
    else:
        entries = list(reader.nodes(data))
    nodes: list[SinfoNode] = []
    problems: list[str] = []
    for i, (where, raw) in enumerate(entries):
        try:
            nodes.append(_sinfo_node(raw, i))
        except RECORD_ERRORS as exc:
            problems.append(f"sinfo: {where}: {str(exc)[:120]}; skipped")
    if entries and not nodes:
        raise SchemaProblem(f"sinfo --json {schema}: none of its {len(entries)} node records "
                            f"could be read ({problems[0][:160]}); refusing an empty cluster")
    return nodes, problems


def _sinfo_node(raw: Any, i: int) -> SinfoNode:
    if not isinstance(raw, dict):
        raise ParseProblem(f"{_short(raw)} is not a node")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ParseProblem("a node without a name")
    feats = str(raw.get("active_features") or raw.get("features") or "")
    flags = raw.get("state_flags") or []
    return SinfoNode(
        name=name,
        gpus=gres_gpus(str(raw.get("gres") or "")),
        state=node_state(str(raw.get("state") or ""), [str(f) for f in flags] if isinstance(flags, list) else []),
        reason=str(raw.get("reason") or ""),
        reason_by=str(raw.get("reason_set_by_user") or "") if raw.get("reason") else "",
        features=frozenset(f for f in feats.split(",") if f),
        gres=str(raw.get("gres") or ""),
        partitions=frozenset(str(p) for p in raw.get("partitions") or () if p),
        room=node_room(raw),
        reserved="RESERVED" in flags if isinstance(flags, list) else False,
        maint="MAINTENANCE" in flags if isinstance(flags, list) else False,
    )


def parse_sshare(text: str) -> tuple[list[ShareRow], list[str]]:
    """``sshare -a -P -n -o Account,User,NormShares,RawUsage`` -> account rows (users skipped);
    a row whose shares or usage is not a finite number >= 0 is one skip message."""
    rows: list[ShareRow] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.strip().split("|")
        if len(parts) < 4 or not parts[0] or parts[1]:
            continue  # blank line or a user's row: fair-share is per account here
        try:
            shares, usage = float(parts[2] or 0), float(parts[3] or 0)
        except ValueError:
            shares = usage = math.nan
        if not (math.isfinite(shares) and math.isfinite(usage) and shares >= 0 and usage >= 0):
            problems.append(f"sshare line {number}: {_short(line.strip(), 80)} has no numeric "
                            "shares/usage")
            continue
        rows.append(ShareRow(parts[0], shares, usage))
    return rows, problems


def topology_from_show(text: str) -> str:
    """``scontrol show topology`` -> topology.conf text (for sites without a readable file).

    The show form adds ``Level=`` and lists, on every upper switch, all nodes below it; a
    topology.conf names only the nodes attached directly, so upper switches keep ``Switches=``.
    """
    lines = []
    for line in text.splitlines():
        pairs = [p for p in line.split() if "=" in p and not p.startswith("Level=")]
        if any(p.startswith("Switches=") for p in pairs):
            pairs = [p for p in pairs if not p.startswith("Nodes=")]
        if pairs:
            lines.append(" ".join(pairs))
    return "\n".join(lines) + "\n"


__all__ = [
    "ACTIVE_STATES",
    "NONE_WORDS",
    "PENDING_STATES",
    "RECORD_ERRORS",
    "ShareRow",
    "SinfoNode",
    "SqueueJob",
    "exit_signal",
    "load_json",
    "node_state",
    "parse_sinfo",
    "parse_squeue",
    "parse_sshare",
    "record_name",
    "squeue_job",
    "topology_from_show",
    "unreadable_job",
]
