"""``CliBackend``: the real Slurm cluster behind the backend seam, through the Slurm CLI
(22.05, 24.11, 26.05: each JSON document is read by the schema its ``meta`` names, schemas.py).

Per cycle it forks a small constant number of processes, independent of the number of jobs:

- ``snapshot(now)``: ``squeue --json`` (mostly the narrow ``squeue -O`` read instead,
  ``narrow.py``), ``sinfo --json``, ``sshare`` (fair-share; skipped after it fails once, e.g.
  without slurmdbd), plus the requeues of preemptions/grows whose grace is
  over (one ``scontrol requeue`` and one lease update for all of them). The topology is read
  once (topology.conf) and rebuilt only when the file or the nodes' GPU counts change.
- ``apply(actions, now)``: see ``apply.py`` (one scontrol on stdin for every per-job update, one
  scancel for every checkpoint signal); the failure step's requeues, burn-ins and resumes by
  ``failures.py``'s hands.
- ``facts()``: what the last observation read for the pipeline's steps (``pipeline.py``): the
  jobs and nodes as the failure rules see them (``failures.py``). Observing decides nothing
  (issue 34 item 2): drains, burn-ins and requeues are the failure step's actions.
- ``leases_due(job_ids, now)``: the waiting jobs whose lease ends within
  ``lease_renew_before_s`` (or lapsed), levelled to a steady rate, from the same squeue read:
  no process.
- ``renew_leases(job_ids, now)``: one ``scontrol update jobid=A,B,... StartTime=...`` per 300
  ids. scontrol sends one RPC per job id (22.05-26.05), so a renewal costs slurmctld one RPC per
  job: renewing only what is due keeps that near ``cycle_interval_s / (lease_s -
  lease_renew_before_s)`` of the queue per cycle instead of all of it.
- ``renew_leases_later(job_ids, now)``: the same on a thread of its own (``renewer.py``), so a
  cycle does not wait on those RPCs; ``apply`` (Starts) and releases first drop their jobs from
  its queue and wait while a renewal of one of them is in flight.

Call ``renew_leases(leases_due(queue))`` (or ``renew_leases_later``) right after ``snapshot`` and
before ``apply``: a Start ends a job's lease, and a renewal after it would set the lease again.

A Start Slurm refuses is not sent again blindly (``backoff.py``): the job sits out 1, 2, 4, ...
cycles, out of the core's queue, and after ``start_refusals_max`` refusals in a row its lease is
released and it is left to Slurm. ``held_back()`` says which jobs and why (``railgang explain``).

Schemas: the first read is a plain ``--json``. Where the output names a data_parser (23.02+),
later reads pin ``--json=v0.0.42`` (schemas.PINNED), so upgrading Slurm does not change what the
daemon reads; a default schema railgang does not know is asked again pinned, once. A schema it
cannot read at all fails the cycle with :class:`SlurmSchemaError` (logged, counted in
``railgang_slurm_schema_errors_total``, shown by ``railgang daemon status``), never an empty
cluster.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from railgang.daemon.backend import ActionResult, FollowUp, HeldBack
from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.actions import Action, Start
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.slurm.cli import commands as cmd
from railgang.daemon.slurm.cli.apply import ApplyConfig, apply_actions, finish_due
from railgang.daemon.slurm.cli.attained import AttainedService
from railgang.daemon.slurm.cli.backoff import StartBackoff, counts
from railgang.daemon.slurm.cli.class_grants import read_grants
from railgang.daemon.slurm.cli.facts import render_fleet_file, tier_terms
from railgang.daemon.slurm.cli.failures import FailureHands
from railgang.daemon.slurm.cli.narrow import (
    NarrowCache,
    NarrowProblem,
    NarrowRow,
    comments_argv,
    excluded_argv,
    narrow_argv,
    new_mark,
    parse_comments,
    parse_narrow,
    with_excluded,
    with_progress,
)
from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import (
    SinfoNode,
    SqueueJob,
    parse_sinfo,
    parse_squeue,
    parse_sshare,
    topology_from_show,
)
from railgang.daemon.slurm.cli.renewer import LeaseRenewer
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.daemon.slurm.cli.schemas import PINNED, SchemaProblem, json_flag
from railgang.daemon.slurm.cli.snapshot import (
    STARTING_GRACE_S,
    JobMemo,
    Observation,
    build_observation,
    exclude_reads,
    held_for_slurm,
)
from railgang.daemon.slurm.cli.speed import SpeedBook
from railgang.errors import SlurmCommandError, SlurmError, SlurmSchemaError
from railgang.topology.files import InputProblem, read_text
from railgang.topology.inputs import write_if_changed

log = logging.getLogger(__name__)
T = TypeVar("T")
# meta.plugin.data_parser of 23.02+ (Slurm writes the slash escaped: "data_parser\/v0.0.42")
_DATA_PARSER = re.compile(r'"data_parser\\?/v\d')

# at most this many changed jobs are read by id (one command line; a burst of more reads all)
CHANGED_READ_MAX = 500
# a full JSON read of more jobs than this is read by id in batches of this many where squeue
# honours -j: 26.05's squeue --json of 51,000 jobs wrote 441 MB in over 120 s with 7.3 GB of
# memory (one command past any timeout); 5,000 of them 42 MB in 13.5 s with 0.76 GB
FULL_READ_BATCH = 5000
SSHARE_ARGV = [cmd.SSHARE, "-a", "-P", "-n", "-o", "Account,User,NormShares,RawUsage"]


class CliBackend:
    """Observe and drive one Slurm cluster with its command-line clients.

    ``settings``: the ``[slurm]`` group (``conf``, ``command_timeout_s``, ``retries``,
    ``retry_backoff_s``, ``lease_s``, ``topology``, ``resize_grace_s``). ``runner``: inject one to
    count or trace processes (default: built from ``settings``). ``read_shares``: call ``sshare``.
    """

    def __init__(self, settings: SlurmSettings | None = None, runner: SlurmRunner | None = None, *,
                 read_shares: bool = True, grants_file: Path | None = None,
                 failures: FailureSettings | None = None, speed_file: Path | None = None) -> None:
        self.settings = settings or SlurmSettings()
        self.runner = runner or SlurmRunner.from_settings(self.settings)
        self.config = ApplyConfig(lease_s=float(self.settings.lease_s),
                                  resize_grace_s=self.settings.resize_grace_s)
        self.read_shares = read_shares
        # the class grants job_submit.lua reads (ledger.grants_file), re-checked every cycle
        self.grants_file = grants_file
        self.last: Observation | None = None
        self.finished: list[FollowUp] = []  # what the last snapshot's requeues did
        self._fabric_key: tuple[Any, ...] | None = None
        self._fabric: Any = None
        self._topology_text: str | None = None
        self._started: dict[str, float] = {}  # job id -> when this backend's Start ended its lease
        self.renewer = LeaseRenewer(self.renew_leases)  # renew_leases_later's thread (renewer.py)
        self._fleet_text: str | None = None  # the fleet file as last written (or tried)
        self.json_version: str | None = None  # --json=VERSION once the CLI is seen to take one
        self._due_at: float | None = None  # when leases_due last ran (the renewal rate's clock)
        self._owed = 0.0  # the fraction of a renewal the steady rate owes since (leases_due)
        # lease ends handed to the renewal thread: the squeue read a cycle takes while the thread
        # is still sending shows the old end, and would hand the same leases over again
        self._handed: dict[str, float] = {}
        self._json_read = False  # squeue --json read once: its schema (and so 22.05) is known
        self._narrow: NarrowCache | None = None  # the narrow reads between full ones
        self.full_reads = 0  # 1 when the last observe read squeue --json (benchmarks, tests)
        self.changed_reads = 0  # 1 when it read the JSON of only the changed jobs instead
        self._memo = JobMemo()  # waiting jobs' core Jobs while their records stay the same
        self.backoff = StartBackoff(self.settings.start_refusals_max)  # refused Starts per job
        self._pinned: set[str] = set()  # jobs this process started: their ReqNodeList is ours
        self._leaving: list[str] = []  # left to Slurm this cycle: released after its Starts
        # GPU-seconds of every run per job: squeue's current run, sacct -D's earlier ones (cached)
        self.attained = AttainedService(lambda argv: self.runner.run(argv).stdout)
        # node failures: the failure step's facts read, its actions carried out (failures.py)
        self.failures = (FailureHands(self.runner, failures)
                         if failures is not None and failures.enabled else None)
        self._facts: dict[str, Any] = {}
        # measured speed per job and model (speed.py; kept in ``speed_file`` across restarts)
        self.speed = SpeedBook(speed_file)

    # -- observe -------------------------------------------------------------------------------
    def observe(self, now: float) -> Observation:
        """One read of the cluster (and the requeues that fell due); kept as ``self.last``.
        Jobs whose Start Slurm refused lately are left out of its queue (``backoff.py``)."""
        self._release_left(now)  # the last cycle had no apply
        self.backoff.tick()
        try:
            seen, job_notes = self._read_jobs(now)
            # --Node: 24.11+ group nodes by sinfo's default columns (partition, state), so
            # nodes with other features or GRES shared one entry and lost theirs; node-oriented,
            # each entry is one node. 22.05 lists nodes one by one either way
            nodes, node_notes = self._read_json(cmd.SINFO, parse_sinfo, "--Node")
        except SchemaProblem as exc:
            log.error("slurm: %s", exc)
            raise SlurmSchemaError(str(exc).split(" ", 1)[0], f"cannot read the cluster: {exc}") from exc
        except ParseProblem as exc:
            raise SlurmError(f"cannot read the cluster: {exc}") from exc
        jobs = [j for j in seen if j.pending or j.active]
        ended = [j for j in seen if not (j.pending or j.active)]
        shares, share_notes = self._shares()
        self._facts = self._read_facts(seen, nodes)
        attained, attained_notes = self.attained.attained(jobs, now, json_flag(self.json_version))
        st = self.settings
        obs = build_observation(now, jobs, nodes, self._fabric_for(nodes), shares,
                                [*job_notes, *node_notes, *share_notes, *attained_notes],
                                lambda pools: tier_terms(pools, st.prices, st.spot_interruptions_per_node_day,
                                                         st.spot_notice_s),
                                lease_s=float(st.lease_s),
                                grants=read_grants(self.grants_file) if self.grants_file else None,
                                memo=self._memo,
                                pinned=frozenset(self._pinned), attained=attained)
        self._pinned &= obs.jobs.keys()
        obs = self._measured(obs, jobs, now)
        self._leave_to_slurm(obs, now)
        obs = self.backoff.hold_back(obs, [j.job_id for j in jobs if j.pending])
        for note in obs.skipped:
            log.warning("slurm: %s", note)
        self._write_fleet(obs)
        self.finished = finish_due(self.runner, obs, now, self.config, ended=ended)
        self.last = obs
        return obs

    def _read_facts(self, seen: list[SqueueJob], nodes: list[SinfoNode]) -> dict[str, Any]:
        """What the failure step reads (docs/failures.md); its trouble is logged, never the
        cycle's: the schedule goes on without it."""
        if self.failures is None:
            return {}
        try:
            return {"failures": self.failures.read(seen, nodes)}
        except Exception as exc:  # a bug here must not stop scheduling
            log.error("failures: reading failed this cycle: %s: %s", type(exc).__name__, exc)
            return {}

    def facts(self) -> Any:
        """What the last observation read for the pipeline's steps, by step name."""
        return MappingProxyType(self._facts)

    def _measured(self, obs: Observation, jobs: list[SqueueJob], now: float) -> Observation:
        """The jobs' measured curves and costs (speed.py) in the snapshot; its own trouble is
        logged, never the cycle's: the jobs then keep their constants."""
        try:
            notes = self.speed.observe(jobs, now)
            snap = self.speed.apply(obs.snapshot)
            self.speed.save()
        except Exception as exc:  # a bug here must not stop scheduling
            log.error("speed: measuring failed this cycle: %s: %s", type(exc).__name__, exc)
            return obs
        return dataclasses.replace(obs, snapshot=snap, skipped=(*obs.skipped, *notes))

    def snapshot(self, now: float) -> Snapshot:
        return self.observe(now).snapshot

    def followups(self) -> list[FollowUp]:
        """The requeues and restarts the last ``snapshot`` carried out (FollowUpBackend)."""
        return self.finished

    def _read_jobs(self, now: float) -> tuple[list[SqueueJob], list[str]]:
        """Every job: the narrow ``squeue -O`` read while it can stand alone (narrow.py), else
        ``squeue --json``. --states=all: 24.11+ leave ended jobs out by default, 22.05 ignores
        it; a job that died of the checkpoint signal must be seen (apply.died_of_the_signal)."""
        rows = None
        if self.settings.narrow_full_read_s > 0:  # (the first cycle too: it sizes the full read)
            try:  # the JSON writes every field of every job (24.11: 97 MB at 10,000 jobs)
                mark = new_mark()  # ends what users write (a GRES type): narrow.py
                rows = parse_narrow(self.runner.run(narrow_argv(mark)).stdout, mark)
            except (NarrowProblem, SlurmCommandError) as exc:
                log.warning("slurm: narrow squeue read failed (%s); reading the JSON", exc)
        cache = self._narrow
        self.changed_reads = 0
        every = self._full_read_every()
        if rows is not None and cache is not None and now - cache.oldest(rows) < every:
            why, said = cache.stale(rows), list[str]()
            # squeue honours -j: the changed jobs, new waiting ones' names, records due again
            due = (cache.due(rows, now, every, FULL_READ_BATCH - 2 * CHANGED_READ_MAX)
                   if self.json_version is not None else [])  # (one command with the changed)
            if self.json_version is not None and (why or due or cache.unseen_pending(rows)):
                why, said = self._read_changed(cache, rows, due, now)
            if not why:
                try:
                    jobs, notes = cache.read(rows)
                    notes = [*said, *(n for n in notes if n not in said)]
                    unseen = exclude_reads(jobs, cache.full, self._started)  # (no narrow form)
                    if unseen:
                        text = self.runner.run(excluded_argv(unseen, mark := new_mark())).stdout
                        jobs = with_excluded(jobs, parse_comments(text, unseen, mark,
                                                                  "squeue -o %x"))
                    ours = [j.job_id for j in jobs if j.active and j.tag is not None]
                    if ours:  # their progress, fresh (elastic sizing reads it)
                        text = self.runner.run(comments_argv(ours, mark := new_mark())).stdout
                        jobs = with_progress(jobs, parse_comments(text, ours, mark))
                    self.full_reads = 0
                    return jobs, notes
                except (NarrowProblem, SlurmCommandError) as exc:
                    log.warning("slurm: narrow squeue read: %s; reading the JSON", exc)
            log.debug("slurm: full squeue read: %s", why)
        seen, notes = self._read_all(rows)
        self._json_read = True
        self._narrow = NarrowCache.after_full_read(now, rows, seen) if rows is not None else None
        self.full_reads = 1
        return seen, notes

    def _read_all(self, rows: list[NarrowRow] | None) -> tuple[list[SqueueJob], list[str]]:
        """Every job's JSON (``squeue --json --states=all``); where squeue honours -j (24.11+)
        and the narrow read listed more than :data:`FULL_READ_BATCH` jobs, the jobs it listed,
        that many ids a command, so that no one command outgrows the timeout or the memory. A
        job submitted after the narrow read is read the next cycle (a new waiting job is read by
        id then, a new running one makes the cycle stale). A batch Slurm refuses (a job purged
        in between) reads everything at once instead. Before any JSON came back the schema is
        not known: a read of more jobs than a batch asks ``sinfo --json`` for it first (a fresh
        daemon on 26.05 with 50,000 waiting: one read of every job outlasts its timeouts), and
        22.05, whose squeue ignores -j, reads every job at once."""
        def parse(text: str) -> tuple[list[SqueueJob], list[str]]:
            return parse_squeue(text, keep_signalled=True)

        if rows is not None and len(rows) > FULL_READ_BATCH:
            if self.json_version is None and not self._json_read:  # (once read, None is 22.05)
                self._read_json(cmd.SINFO, parse_sinfo, "--Node")  # its schema: does -j hold?
            if self.json_version is not None:
                try:
                    return self._read_by_id(list(dict.fromkeys(r.job_id for r in rows)), parse)
                except SlurmCommandError as exc:
                    log.warning("slurm: squeue --json by id failed (%s); reading every job at once", exc)
        return self._read_json(cmd.SQUEUE, parse, "--states=all")

    def _read_by_id(self, ids: list[str], parse: Callable[[str], tuple[list[SqueueJob], list[str]]],
                    ) -> tuple[list[SqueueJob], list[str]]:
        """``squeue --json --states=all --jobs=...`` of ``ids``, :data:`FULL_READ_BATCH` a command."""
        seen: dict[str, SqueueJob] = {}
        notes: list[str] = []
        for lo in range(0, len(ids), FULL_READ_BATCH):
            got, said = self._read_json(cmd.SQUEUE, parse, "--states=all",
                                        "--jobs=" + ",".join(ids[lo:lo + FULL_READ_BATCH]))
            seen.update((j.job_id, j) for j in got if j.job_id not in seen)
            notes += said
        return list(seen.values()), notes

    def _full_read_every(self) -> float:
        """How old a record may get before every job is read: ``narrow_full_read_s`` (0: every
        cycle), at least ``narrow_full_read_filtered_s`` where records are read by id (24.11+)."""
        every = self.settings.narrow_full_read_s
        if every > 0 and self.json_version is not None:
            return max(every, self.settings.narrow_full_read_filtered_s)
        return every

    def _read_changed(self, cache: NarrowCache, rows: list[NarrowRow], due: list[str],
                      now: float) -> tuple[str, list[str]]:
        """The JSON of only the jobs that made the narrow read stale (``squeue --json -j``: a
        version with a data_parser, whose squeue honours its filters; 22.05 ignores them): on a
        busy cluster a job starts or ends in most cycles, and a full read of 10,000 waiting
        jobs costs 24.11 6-10 s, this one 0.2 s. New waiting jobs are read with them (their
        names: the narrow form has none), and the records ``due`` again (what an owner changed
        later in a name or Comment: ``NarrowCache.due``, a share each cycle instead of every job
        at once). Returns why a full read is still needed ("": none: too many changed, the read
        failed as for a job purged meanwhile, or a job changed again in between) and what the
        read said of records it skipped."""
        stale = list(cache.stale_jobs(rows))
        if len(stale) > CHANGED_READ_MAX:
            return f"{len(stale)} jobs changed", []
        # new waiting jobs' names; after a burst of submissions the rest in the next cycles
        ids = list(dict.fromkeys([*stale, *cache.unseen_pending(rows)[:CHANGED_READ_MAX - len(stale)], *due]))
        try:
            seen, said = self._read_json(cmd.SQUEUE, lambda text: parse_squeue(text, keep_signalled=True),
                                      "--states=all", "--jobs=" + ",".join(ids))
        except SlurmCommandError as exc:  # names and records due can wait for the next cycle
            return (f"squeue -j of the changed jobs failed: {exc}" if stale else ""), []
        cache.absorb(rows, ids, seen, now)
        self.changed_reads = 1
        return cache.stale(rows), said

    def _read_json(self, program: str, parse: Callable[[str], T], *args: str) -> T:
        """``program --json`` parsed by ``parse``; pins the schema version where the CLI takes
        one (see the module's docstring). 22.05 refuses ``--json=…``, and says openapi/v0.0.38
        in its ``meta``, so it is always asked plainly (one process per read, as before)."""
        pinned = self.json_version
        text = self.runner.run([program, json_flag(pinned), *args]).stdout
        try:
            result = parse(text)
        except SchemaProblem:
            if pinned is not None or not _DATA_PARSER.search(text):
                raise
            log.warning("slurm: %s --json: default schema unknown; asking for %s", program, PINNED)
            self.json_version = PINNED
            return parse(self.runner.run([program, json_flag(PINNED), *args]).stdout)
        if pinned is None and _DATA_PARSER.search(text):
            self.json_version = PINNED
        return result

    def _write_fleet(self, obs: Observation) -> None:
        """Keep the fleet file job_submit.lua reads in line with the nodes' facts. A write
        that fails is logged once, never fails the cycle: the lua then only checks the grammar."""
        path = self.settings.fleet_file
        if path is None or str(path) in ("", "."):
            return
        text = render_fleet_file((n.name, n.gpus, n.facts) for n in obs.snapshot.nodes.values())
        if text == self._fleet_text:
            return
        try:
            write_if_changed(path, text)
            self._fleet_text = text
        except OSError as exc:
            log.warning("slurm: cannot write the fleet file %s (%s); job_submit.lua cannot refuse "
                        "needs no node meets until it can", path, exc)
            self._fleet_text = text  # once per change, not every cycle

    def _shares(self) -> tuple[list[Any], list[str]]:
        if not self.read_shares:
            return [], []
        res = self.runner.attempt(SSHARE_ARGV)
        if not res.ok:  # no slurmdbd: fair-share is simply unknown; do not ask every cycle
            self.read_shares = False
            return [], [f"sshare failed ({res.message}); fair-share left out from now on"]
        return parse_sshare(res.stdout)

    # -- topology ------------------------------------------------------------------------------
    def topology_path(self) -> Path | None:
        """settings.topology, else topology.conf beside slurm.conf (where slurmctld reads it)."""
        if self.settings.topology is not None:
            return self.settings.topology
        conf = self.settings.conf or (Path(os.environ["SLURM_CONF"]) if os.environ.get("SLURM_CONF") else None)
        candidate = (conf.parent if conf else Path("/etc/slurm")) / "topology.conf"
        return candidate if candidate.exists() else None

    def _fabric_for(self, nodes: Sequence[SinfoNode]) -> Any:
        from railgang.topology.conf import TopologyError
        from railgang.topology.fabric import fabric_from_text
        from railgang.topology.node_facts import node_facts_from_gres

        path = self.topology_path()
        mtime = path.stat().st_mtime if path is not None and path.exists() else None
        key = (str(path), mtime, tuple((n.name, n.gpus, n.gres, n.features) for n in nodes))
        if key == self._fabric_key:
            return self._fabric
        if path is not None:
            try:  # the bounded reader: regular files only, a size limit, UTF-8
                text, source = read_text(path, "slurm.topology"), str(path)
            except InputProblem as exc:
                raise SlurmError(f"slurm.topology: {exc}") from exc
        else:
            if self._topology_text is None:
                self._topology_text = topology_from_show(
                    self.runner.run([cmd.SCONTROL, "show", "topology"]).stdout)
            text, source = self._topology_text, "scontrol show topology"
        facts = {n.name: node_facts_from_gres(n.name, n.gres, n.features, n.gpus)  # as the simulator's
                 for n in nodes}  # the fabric keeps those of the nodes the topology names
        try:  # railgang topology's and railgang top's text -> fabric; a cluster without a topology
            # plugin names no nodes, and is still scheduled (nothing placed by locality)
            fabric = fabric_from_text(text, source, facts, max((n.gpus for n in nodes), default=8),
                                      blocks_are_nvlink=self.settings.blocks_nvlink, empty_ok=True)
        except TopologyError as exc:  # its problems name the source already
            raise SlurmError(str(exc)) from exc
        missing = sorted({n.name for n in nodes} - set(fabric.nodes))
        if missing:
            log.warning("slurm: nodes %s are not in %s; railgang cannot place on them", missing, source)
        self._fabric = fabric
        self._fabric_key = key
        return self._fabric

    # -- act -----------------------------------------------------------------------------------
    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        if not actions:
            self._release_left(now)
            return []
        obs = self.last if self.last is not None else self.observe(now)
        # no renewal of a job may reach slurmctld after its Start (it would lease it again)
        self.renewer.withhold([a.job_id for a in actions if isinstance(a, Start)])
        try:
            results = apply_actions(self.runner, obs, actions, now, self.config,
                                    hands=self.failures.apply if self.failures else None)
        except SlurmCommandError as exc:  # slurmctld unreachable after retries: every action failed
            return [ActionResult(a, False, str(exc)) for a in actions]
        finally:
            self._release_left(now)
        self._started = {j: t for j, t in self._started.items() if now - t < STARTING_GRACE_S}
        self._started.update({r.action.job_id: now for r in results if r.ok and isinstance(r.action, Start)})
        self._pinned.update(r.action.job_id for r in results if r.ok and isinstance(r.action, Start))
        self._back_off(results, now)
        return results

    def _back_off(self, results: Sequence[ActionResult], now: float) -> None:
        """Remember the Starts Slurm refused (``backoff.py``); release the lease of each job
        refused ``start_refusals_max`` times in a row, leaving it to Slurm's own checks."""
        release = []
        for r in results:
            if not isinstance(r.action, Start):
                continue
            job_id = r.action.job_id
            if r.ok:
                self.backoff.started(job_id)
            elif counts(r.detail):
                entry = self.backoff.refused(job_id, r.detail)
                if entry.released:
                    release.append(job_id)
                    log.warning("slurm: job %s: Slurm refused its start %d times in a row (%s); "
                                "its lease is released and it is left to Slurm", job_id,
                                entry.count, r.detail)
                else:
                    log.info("slurm: job %s: start refused (%s); it sits out %d cycle(s)",
                             job_id, r.detail, entry.sits_out)
        self._release(release, now)

    def _leave_to_slurm(self, obs: Observation, now: float) -> None:
        """Mark for release the lease of each waiting job a rule railgang does not model applies
        to (``rules.py``), once: it is held out of the queue from now on, as a job refused too
        often is (``backoff.py``), and Slurm schedules it. The release waits for this cycle's
        Starts (:meth:`_release_left`): released first, Slurm could place it on the nodes the
        cycle is about to pin a gang to (this snapshot does not show where it went), and the
        gang's Start would be accepted and then wait behind it."""
        left = [j for j, why in obs.left.items() if self.backoff.leave(j, why)]
        for job_id in left:
            log.warning("slurm: job %s: %s; railgang does not model that: its lease is released "
                        "and it is left to Slurm", job_id, obs.left[job_id])
        self._leaving.extend(left)

    def _release_left(self, now: float) -> None:
        """Release the leases :meth:`_leave_to_slurm` marked: after the cycle's Starts, or at the
        next observation when the cycle had no action."""
        left, self._leaving = self._leaving, []
        self._release(left, now)

    def _release(self, release: Sequence[str], now: float) -> None:
        self.renewer.withhold(release)
        for argv in cmd.lease_argvs([j for j in release if cmd.valid_job_id(j)], now):
            try:  # a release Slurm refuses still ends: the lease is no longer renewed
                res = self.runner.attempt(argv)
                if not res.ok:
                    log.warning("slurm: releasing the lease of %s: %s", argv[2], res.message)
            except SlurmCommandError as exc:
                log.warning("slurm: releasing the lease of %s: %s", argv[2], exc)

    def held_back(self) -> list[HeldBack]:
        """The waiting jobs whose Start Slurm refused lately, as of the last observation: kept
        out of the core's queue (sitting out, or left to Slurm) or back in it; Slurm's reason;
        and those out of it for Slurm's sake (a dependency, a Start not run yet)."""
        held = self.backoff.held()  # (a job left to Slurm keeps that row, pinned or not)
        known = {h.job_id for h in held}
        return [*held, *(h for h in (held_for_slurm(self.last) if self.last else ())
                         if h.job_id not in known)]

    def leases_due(self, job_ids: Sequence[str], now: float) -> list[str]:
        """The leases to renew now among ``job_ids`` (plus the jobs waiting for a later
        ``--begin`` that entered their last lease), by the lease end the last squeue read showed
        (a waiting job's ``eligible_time`` on 22.05-26.05), or the end handed to the renewal
        thread when later (a renewal the read did not see yet is not due again):

        1. every lease ending within ``lease_renew_before_s``, lapsed, or not seen (must);
        2. then the earliest-ending others, up to the steady rate: the held leases times the
           time since the last call over ``lease_s - lease_renew_before_s`` (fractions carried).
           Without it, leases renewed together (a burst of submissions, the first cycle after a
           restart) would stay together and come due in one cycle again every renewal period; with it the
           renewals level out to about ``cycle_interval_s / (lease_s - lease_renew_before_s)``
           of the queue per cycle.

        No renewal sets a lease further out than ``now + lease_s``, so a dead daemon's jobs run
        natively within ``lease_s`` (plus one of Slurm's scheduling passes)."""
        obs = self.last
        seen = obs.jobs if obs is not None else {}
        before = min(self.settings.lease_renew_before_s, self.settings.lease_s)
        ends: dict[str, float] = {}
        handed = self._handed
        for job_id in dict.fromkeys([*job_ids, *(obs.leased if obs is not None else ())]):
            rec = seen.get(job_id)
            end = rec.eligible_time if rec is not None and rec.pending else -math.inf
            ends[job_id] = max(end, handed.get(job_id, -math.inf))
        self._handed = {j: e for j, e in handed.items() if j in ends and e > now}
        must = [j for j, end in ends.items() if end - now < before]
        period = max(1.0, self.settings.lease_s - before)
        since = now - self._due_at if self._due_at is not None else 0.0
        self._due_at = now
        # renewals owed at the steady rate, fractions carried (rounded up, a lone lease went every cycle)
        owed = self._owed + len(ends) * min(max(since, 0.0), period) / period
        level = int(owed)
        self._owed = owed - level if ends else 0.0
        early = sorted((end, j) for j, end in ends.items() if end - now >= before)
        return [*must, *(j for _, j in early[:max(0, level - len(must))])]

    def renew_leases(self, job_ids: Sequence[str], now: float) -> dict[str, str]:
        """Extend the lease of ``job_ids`` to ``now + lease_s``; returns {job id: why not} for
        those Slurm refused (e.g. finished meanwhile). One process per 300 ids."""
        # a job this backend started a moment ago must not get its lease back (call order slip)
        ids = [j for j in dict.fromkeys(job_ids) if cmd.valid_job_id(j) and j not in self._started]
        failed = {j: "not a Slurm job id" for j in job_ids if not cmd.valid_job_id(j)}
        for argv in cmd.lease_argvs(ids, now + self.settings.lease_s):
            try:
                res = self.runner.attempt(argv)
            except SlurmCommandError as exc:
                failed.update({j: str(exc) for j in argv[2].removeprefix("jobid=").split(",")})
                continue
            if not res.ok:
                per_job = cmd.failures_by_job(res.stderr)
                failed.update(per_job or {j: res.message for j in argv[2].removeprefix("jobid=").split(",")})
        return failed

    def renew_leases_later(self, job_ids: Sequence[str], now: float) -> tuple[int, dict[str, str]]:
        """Hand ``job_ids`` to the renewal thread (renewer.py) and return at once: the leases
        it renewed since the last call and ``{job id: why not}`` for those Slurm refused."""
        behind = self.renewer.pending()
        if behind:  # leases come due faster than slurmctld renews them: some may lapse
            log.warning("slurm: %d lease renewals still queued from the last cycle", behind)
        ids = [j for j in dict.fromkeys(job_ids) if j not in self._started]
        self.renewer.submit(ids, now)
        end = now + self.settings.lease_s  # the thread sets it later, so at least this far
        self._handed.update(dict.fromkeys(ids, end))
        done, refused = self.renewer.take()
        for j in refused:
            self._handed.pop(j, None)
        return done, refused

    def close(self) -> None:
        """Stop the renewal thread; leases still queued end on their own within lease_s."""
        self.renewer.close()


__all__ = ["SSHARE_ARGV", "CliBackend"]
