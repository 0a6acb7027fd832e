"""The CLI backend's hands for failures: carries out what ``failures/respond.py`` decided.

Once per observation (``CliBackend.observe``), from the same squeue and sinfo read:

- ``scontrol requeue`` for jobs that ended ``NODE_FAIL`` and that Slurm did not requeue;
- the ids of failed-over jobs, which the snapshot marks ``after_fault`` (first in their class);
- a flaky node: ``scontrol update nodename=N State=DRAIN Reason="railgang: flaky: ..."``;
- its burn-in, once no job is left on it: a maintenance reservation on the node that only the
  daemon's user may use (``railgang_burnin_N``), the burn-in job submitted into it pinned to the
  node, then the node resumed *into the reservation* (Slurm runs nothing on a drained node, and
  nothing but the burn-in runs inside the reservation). Passed: the reservation is deleted and the
  node is back in service. Failed: drained again with the reason, reservation deleted, retried
  after ``burn_in_retry_s``.
- the nodes held out (drained as flaky, or burning in) look drained to the core, so it never
  places a railgang job where Slurm would not run it.

Each step is one :class:`FollowUp` for the journal and the log. Nothing here raises for a
refused command: a step that failed is logged and tried again when the state asks for it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pwd
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from railgang.daemon.backend import FollowUp
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.failures import persist
from railgang.daemon.failures.adopt import adopt
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.flaky import Step, StepKind
from railgang.daemon.failures.respond import (
    JobView,
    Memory,
    NodeView,
    Response,
    Setters,
    burn_in_refused,
    burn_in_submitted,
    drained_by_other,
    respond,
)
from railgang.daemon.slurm.cli import commands as cmd
from railgang.daemon.slurm.cli.records import BURN_IN_NAME, SinfoNode, SqueueJob
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.errors import SlurmCommandError
from railgang.slurm_plugins.paths import FILES

log = logging.getLogger(__name__)
SBATCH = "sbatch"
RESERVATION_PREFIX = "railgang_burnin_"
_JOB_ID = re.compile(r"^(\d+)")
_SLURM_USER = re.compile(r"^SlurmUser\s*=\s*([^\s(]+)", re.MULTILINE)
# what Slurm shows of a reservation reservation_argv made (SPEC_NODES: Slurm adds it to any
# reservation of named nodes)
_OUR_FLAGS = frozenset({"MAINT", "IGNORE_JOBS"})
_SHOWN_FLAGS = _OUR_FLAGS | {"SPEC_NODES"}


def job_view(rec: SqueueJob, user: str = "") -> JobView:
    """``user``: the daemon's own user; only its jobs (or root's) named ``railgang-burnin-NODE``
    are burn-ins (anyone may name a job so)."""
    tag = rec.tag
    ours_requeue = tag is not None and any(
        m is not None and m.restarts + 1 == rec.restarts for m in (tag.preempt, tag.grow))
    p = rec.progress
    return JobView(job_id=rec.job_id, state=rec.state, restarts=rec.restarts,
                   nodes=tuple(n for n, _ in rec.allocation) or rec.node_list,
                   railgang_requeue=ours_requeue,
                   may_requeue=rec.requeue, ours=tag is not None,
                   progress=None if p is None else (float(p.t), p.step, p.step_s),
                   started_at=rec.start_time, burn_in_of=_burn_in_of(rec, user))


def _burn_in_of(rec: SqueueJob, user: str) -> str:
    prefix = f"{BURN_IN_NAME}-"
    if not user or rec.user not in (user, "root") or not rec.name.startswith(prefix):
        return ""  # root: a daemon run by hand as root (`daemon run --once`) submits as root
    node = rec.name[len(prefix):]
    return node if cmd.valid_node(node) else ""


def node_view(rec: SinfoNode, busy: set[str]) -> NodeView:
    return NodeView(rec.name, rec.state, rec.reason, rec.name in busy, rec.reason_by)


def _me() -> str:
    """The daemon's user as Slurm knows it: from the uid, not $USER (getpass reads the
    environment, which names root under ``setpriv`` or ``sudo -E``: a burn-in reservation for
    root that the daemon's own burn-in job may not enter)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def reservation(node: str) -> str:
    return f"{RESERVATION_PREFIX}{node}"


def burn_in_reservations(listing: str, user: str) -> tuple[list[str], list[str]]:
    """``scontrol -o show reservation`` (one line each) -> (the nodes of the burn-in
    reservations railgang made, the names of the others named like one). Anyone with the rights
    may name a reservation ``railgang_burnin_N`` (issue 38 row 5): it is railgang's only when
    Slurm shows what ``reservation_argv`` asks for (that node alone, ``Users=`` the daemon's
    user alone, ``Flags=MAINT,IGNORE_JOBS``)."""
    ours: list[str] = []
    theirs: list[str] = []
    for line in listing.splitlines():
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        name = f.get("ReservationName", "")
        if not name.startswith(RESERVATION_PREFIX):
            continue
        node = name[len(RESERVATION_PREFIX):]
        flags = set(f.get("Flags", "").split(","))
        if (cmd.valid_node(node) and f.get("Nodes") == node and f.get("Users") == user
                and _OUR_FLAGS <= flags <= _SHOWN_FLAGS):
            ours.append(node)
        else:
            theirs.append(name)
    return ours, theirs


class FailureResponder:
    """Keeps :class:`Memory` between cycles and runs the Slurm commands of each response."""

    def __init__(self, runner: SlurmRunner, settings: FailureSettings, user: str | None = None,
                 slurm_user: str | None = None, memory_file: Path | None = None) -> None:
        self.runner, self.settings = runner, settings
        self.rules, self.hangs = settings.rules(), settings.hangs()
        self.user = user or _me()
        # slurm.conf's SlurmUser (who sets Slurm's own node reasons), asked once it matters
        self._slurm_user = slurm_user
        self.memory = Memory()
        self.last = Response()
        self._account: str | None = None  # the daemon user's default account, once asked
        self._adopted = False  # what a previous daemon left in Slurm is taken over once (adopt.py)
        # reservations named like a burn-in one that railgang did not make: never deleted
        self._theirs: frozenset[str] = frozenset()
        # counts per node and kills already counted, kept across restarts (failures/persist.py)
        self.memory_file, self._saved = memory_file, ""
        self._loaded = memory_file is None

    def step(self, seen: Sequence[SqueueJob], nodes: Sequence[SinfoNode],
             now: float) -> tuple[Response, list[FollowUp]]:
        busy = {n for j in seen if j.active for n, _ in j.allocation}
        views = [job_view(j, self.user) for j in seen]
        node_views = {n.name: node_view(n, busy) for n in nodes}
        setters = self._setters(nodes)
        done: list[FollowUp] = []
        if not self._loaded:
            self._load(now)
        if not self._adopted:
            reserved = self._burn_in_reservations()
            if reserved is not None:
                self._adopted = True
                self.memory, settle = adopt(self.memory, views, node_views, reserved, now,
                                            setters)
                done += [self._do(s, now) for s in settle]
        states = {j.job_id: j.state for j in seen}
        burn_in_states = {b.job_id: states[b.job_id] for b in self.memory.burn_ins.values()
                          if b.job_id in states}
        self.memory, resp = respond(self.memory, views, node_views, burn_in_states, now,
                                    self.rules, self.hangs, setters)
        for f in resp.faults:
            log.warning("failure: %s", f.render())
        if resp.requeue:
            done += self._requeue(resp.requeue)
        for s in resp.steps:
            done.append(self._do(s, now))
        done += self._resume_stuck(nodes, resp, setters)
        self.last = resp
        self._save(now)
        return resp, done

    def _load(self, now: float) -> None:
        self._loaded = True
        path = self.memory_file
        if path is None or not path.exists():
            return
        try:
            kept, bad = persist.load(path.read_text(), now, self.rules)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.warning("failures: failure memory %s unreadable, starting from none: %s", path, exc)
            return
        if bad:
            log.warning("failures: failure memory %s: %d malformed entries left out", path, bad)
        self.memory = persist.merged(self.memory, kept)

    def _save(self, now: float) -> None:
        if self.memory_file is None:
            return
        text = persist.dump(self.memory, now, self.rules)
        if text != self._saved:
            try:
                persist.write(self.memory_file, text)
                self._saved = text
            except OSError as exc:  # counting goes on in memory; tried again next cycle
                log.warning("failures: failure memory %s not written: %s", self.memory_file, exc)

    def _burn_in_reservations(self) -> list[str] | None:
        """The nodes of this daemon's burn-in reservations (``scontrol show reservation``, one
        line each); None when Slurm did not answer (asked again next cycle)."""
        try:
            res = self.runner.attempt([cmd.SCONTROL, "-o", "show", "reservation"])
        except SlurmCommandError as exc:
            log.warning("failures: could not list reservations (asked again): %s", exc)
            return None
        if not res.ok:
            if "No reservations" in res.message:
                return []
            log.warning("failures: could not list reservations (asked again): %s", res.message)
            return None
        ours, theirs = burn_in_reservations(res.stdout, self.user)
        for name in theirs:
            log.warning("failures: reservation %s is named like a burn-in reservation but is not "
                        "one railgang made (not its node alone, Users=%s, Flags=MAINT,IGNORE_JOBS): "
                        "left alone", name[:80], self.user)
        self._theirs = frozenset(theirs)
        return ours

    def _setters(self, nodes: Sequence[SinfoNode]) -> Setters:
        """Who sets node reasons: SlurmUser from ``scontrol show config``, asked once a node
        shows who set its reason ("slurm", Slurm's default, when it cannot be read; asked again
        next cycle when Slurm did not answer)."""
        if self._slurm_user is None and any(n.reason_by for n in nodes):
            try:
                res = self.runner.attempt([cmd.SCONTROL, "show", "config"])
            except SlurmCommandError as exc:
                log.warning("failures: could not read SlurmUser (taken as slurm): %s", exc)
                return Setters("slurm", self.user)
            found = _SLURM_USER.search(res.stdout) if res.ok else None
            if found is None:
                log.warning("failures: scontrol show config names no SlurmUser (taken as slurm)%s",
                            f": {res.message[:160]}" if res.message else "")
            self._slurm_user = found.group(1) if found else "slurm"
        return Setters(self._slurm_user or "slurm", self.user)

    def _resume_stuck(self, nodes: Sequence[SinfoNode], resp: Response,
                      setters: Setters) -> list[FollowUp]:
        """Burn-ins waiting on a node that is still drained or down: the resume that should have
        let them run was refused (a node still completing its killed job refuses it), so it is
        tried again every cycle until Slurm takes it."""
        waiting = {n for n in self.memory.burn_ins if not any(
            s.node == n and s.kind is StepKind.BURN_IN for s in resp.steps)}
        out = []
        for n in nodes:
            # someone else's drain since: theirs to resume (failures/respond.py rule 5)
            if n.name in waiting and not n.state.usable and not drained_by_other(
                    node_view(n, set()), setters):
                res = self.runner.attempt(cmd.resume_argv(n.name))
                if res.ok:
                    out.append(FollowUp(n.name, "resume", True,
                                        f"node {n.name} resumed into its burn-in reservation"))
        return out

    def _requeue(self, ids: Sequence[str]) -> list[FollowUp]:
        res = self.runner.attempt(cmd.requeue_argv(list(ids)))
        bad = cmd.failures_by_job(res.stderr) if not res.ok else {}
        if not res.ok and not bad:
            bad = dict.fromkeys(ids, res.message)
        return [FollowUp(j, "requeue", False, f"requeue after NODE_FAIL failed: {bad[j]}")
                if j in bad else FollowUp(j, "requeue", True, "ended NODE_FAIL, requeued")
                for j in ids]

    def _do(self, step: Step, now: float) -> FollowUp:
        node = step.node
        if not cmd.valid_node(node):  # sinfo's own names; never an argument scontrol could misread
            return FollowUp(node[:64], step.kind.value, False, f"node {node[:64]!r}: not a node name")
        try:
            if step.kind is StepKind.DRAIN:
                self._run(cmd.drain_argv(node, step.reason))
                self._drop_reservation(node, must=False)
                return FollowUp(node, "drain", True, f"node {node} drained: {step.reason}")
            if step.kind is StepKind.BURN_IN:
                try:
                    return self._burn_in(node, now)
                except SlurmCommandError:
                    self.memory = burn_in_refused(self.memory, node, now, self.rules)
                    raise
            if step.kind is StepKind.RELEASE:
                self._drop_reservation(node)
                return FollowUp(node, "release", True,
                                f"node {node}: {step.reason}; its burn-in reservation deleted")
            self._drop_reservation(node)
            return FollowUp(node, "resume", True, f"node {node}: burn-in passed, back in service")
        except SlurmCommandError as exc:
            return FollowUp(node, step.kind.value, False, f"node {node}: {step.kind.value} failed: {exc}")

    def _drop_reservation(self, node: str, must: bool = True) -> None:
        """Delete ``node``'s burn-in reservation unless it is someone else's of that name."""
        if reservation(node) not in self._theirs:
            self._run(cmd.delete_reservation_argv(reservation(node)), must=must)

    def _burn_in(self, node: str, now: float) -> FollowUp:
        name = reservation(node)
        if name in self._theirs:
            raise SlurmCommandError([SBATCH], 0, f"reservation {name} is not railgang's: no burn-in")
        self._run(cmd.delete_reservation_argv(name), must=False)  # a leftover of a crash
        self._run(cmd.reservation_argv(name, node, self.user))
        try:
            out = self._run(self._sbatch(node, name))
        except SlurmCommandError:
            self._run(cmd.delete_reservation_argv(name), must=False)
            raise
        m = _JOB_ID.match(out.strip())
        if m is None:
            self._run(cmd.delete_reservation_argv(name), must=False)
            raise SlurmCommandError([SBATCH], 0, f"sbatch printed no job id: {out.strip()[:80]!r}")
        self.memory = burn_in_submitted(self.memory, node, m.group(1), now)
        self._run(cmd.resume_argv(node))
        return FollowUp(m.group(1), "burn_in", True,
                        f"node {node}: burn-in job {m.group(1)} in reservation {name}")

    def _sbatch(self, node: str, reservation_name: str) -> list[str]:
        s = self.settings
        argv = [SBATCH, "--parsable", f"--job-name={BURN_IN_NAME}-{node}", f"--nodelist={node}",
                "--nodes=1", "--exclusive", f"--reservation={reservation_name}",
                f"--time={s.burn_in_time_limit_min}", "--output=/dev/null", "--no-requeue"]
        account = s.burn_in_account or self._default_account()
        if account:  # job_submit.lua refuses a job without one (docs/failures.md)
            argv.append(f"--account={account}")
        if s.burn_in_command:
            return [*argv, f"--wrap={s.burn_in_command}"]
        return [*argv, str(FILES["burn_in_script"])]

    def _default_account(self) -> str:
        """The daemon user's default account from sacctmgr, asked once ("" without slurmdbd)."""
        if self._account is None:
            res = self.runner.attempt(["sacctmgr", "-n", "-P", "show", "user", self.user,
                                       "format=DefaultAccount"])
            words = res.stdout.split() if res.ok else []
            self._account = words[0] if words and cmd.valid_tag(words[0]) else ""
        return self._account

    def _run(self, argv: list[str], must: bool = True) -> str:
        res = self.runner.attempt(argv)
        if not res.ok and must:
            raise SlurmCommandError(argv, 1, res.message)
        return res.stdout

    def held_out(self) -> frozenset[str]:
        return frozenset(self.last.held_out)

    def why(self, node: str) -> str | None:
        return self.memory.flaky.why(node)


def hide(nodes: Iterable[SinfoNode], held_out: frozenset[str],
         why: Callable[[str], str | None] = lambda _: None) -> list[SinfoNode]:
    """``nodes`` with the held-out ones drained, as the core must see them, with ``why(node)``
    as their reason: the node inventory records it, so the report's down-and-drained list and
    ``railgang explain NODE`` say why the node is out and where its burn-in stands."""
    return [dataclasses.replace(n, state=NodeState.DRAIN,
                                reason=why(n.name) or n.reason or "railgang: flaky")
            if n.name in held_out else n for n in nodes]


__all__ = ["RESERVATION_PREFIX", "FailureResponder", "burn_in_reservations", "hide", "job_view",
           "node_view", "reservation"]
