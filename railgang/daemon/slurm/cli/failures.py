"""The CLI backend's eyes and hands for failures (issue 34 item 2: a backend only reads and
carries out; the decisions are the failure step's, ``failures/step.py``, in the pipeline).

Reads, once per observation (``CliBackend.observe``), from the same squeue and sinfo read:
:class:`~railgang.daemon.failures.facts.FailureFacts`: every job and node as the failure rules
see them, who sets node reasons (slurm.conf's ``SlurmUser``, asked once a node shows a setter),
and the burn-in reservations railgang made (``scontrol -o show reservation``, until Slurm
answers once: a restarted daemon takes them over).

Carries out (``apply.py`` hands these actions here):

- :class:`Requeue`: one ``scontrol requeue`` for all of them;
- :class:`SubmitBurnIn`: a maintenance reservation on the node that only the daemon's user may
  use (``railgang_burnin_N``), the burn-in job submitted into it pinned to the node, then the
  node resumed *into the reservation* (Slurm runs nothing on a drained node, and nothing but the
  burn-in runs inside the reservation); the result's detail names the job (``BURN_IN_DETAIL``);
- :class:`ReleaseBurnIn`: the reservation deleted (a passed burn-in: the node is back);
- :class:`Resume`: ``scontrol update State=RESUME`` (into the reservation).

A reservation named like a burn-in one that railgang did not make is never touched. Nothing here
raises for a refused command: the action's result says it, and the step asks again when the
state asks for it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pwd
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.actions import (
    BURN_IN_DETAIL,
    Action,
    ReleaseBurnIn,
    Requeue,
    Resume,
    SubmitBurnIn,
)
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.facts import FailureFacts, JobView, NodeView, Setters
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


HANDS = (Requeue, SubmitBurnIn, ReleaseBurnIn, Resume)  # the actions carried out here


class FailureHands:
    """Reads the failure step's facts and carries out its actions on one Slurm cluster."""

    def __init__(self, runner: SlurmRunner, settings: FailureSettings, user: str | None = None,
                 slurm_user: str | None = None) -> None:
        self.runner, self.settings = runner, settings
        self.user = user or _me()
        # slurm.conf's SlurmUser (who sets Slurm's own node reasons), asked once it matters
        self._slurm_user = slurm_user
        self._account: str | None = None  # the daemon user's default account, once asked
        self._reserved: tuple[str, ...] | None = None  # our burn-in reservations, once read
        # reservations named like a burn-in one that railgang did not make: never deleted
        self._theirs: frozenset[str] = frozenset()

    # -- read ----------------------------------------------------------------------------------
    def read(self, seen: Sequence[SqueueJob], nodes: Sequence[SinfoNode]) -> FailureFacts:
        busy = {n for j in seen if j.active for n, _ in j.allocation}
        if self._reserved is None:
            found = self._burn_in_reservations()
            self._reserved = tuple(found) if found is not None else None
        return FailureFacts(jobs=tuple(job_view(j, self.user) for j in seen),
                            nodes={n.name: node_view(n, busy) for n in nodes},
                            setters=self._setters(nodes), reserved=self._reserved)

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

    # -- carry out -----------------------------------------------------------------------------
    def apply(self, actions: Mapping[int, Action]) -> dict[int, ActionResult]:
        """One result per action (by its index in the cycle's list), in their order."""
        out: dict[int, ActionResult] = {}
        requeue = {i: a for i, a in actions.items() if isinstance(a, Requeue)}
        if requeue:
            out.update(self._requeue(requeue))
        for i, a in actions.items():
            if not isinstance(a, Requeue):
                out[i] = self._node_op(a)
        return out

    def _requeue(self, actions: Mapping[int, Requeue]) -> dict[int, ActionResult]:
        ids = [a.job_id for a in actions.values() if cmd.valid_job_id(a.job_id)]
        bad: dict[str, str] = {a.job_id: "not a Slurm job id" for a in actions.values()
                               if not cmd.valid_job_id(a.job_id)}
        if ids:
            try:
                res = self.runner.attempt(cmd.requeue_argv(ids))
                if not res.ok:
                    bad.update(cmd.failures_by_job(res.stderr) or dict.fromkeys(ids, res.message))
            except SlurmCommandError as exc:
                bad.update(dict.fromkeys(ids, str(exc)))
        return {i: ActionResult(a, a.job_id not in bad,
                                f"requeue failed: {bad[a.job_id]}" if a.job_id in bad else "requeued")
                for i, a in actions.items()}

    def _node_op(self, action: Action) -> ActionResult:
        node = str(getattr(action, "node", ""))
        if not cmd.valid_node(node):  # never an argument scontrol could misread
            return ActionResult(action, False, f"node {node[:64]!r}: not a node name")
        try:
            if isinstance(action, SubmitBurnIn):
                return ActionResult(action, True, self._burn_in(node))
            if isinstance(action, ReleaseBurnIn):
                if reservation(node) in self._theirs:
                    return ActionResult(action, True, f"reservation {reservation(node)} is not "
                                                      "railgang's: left alone")
                res = self.runner.attempt(cmd.delete_reservation_argv(reservation(node)))
                if res.ok:
                    return ActionResult(action, True, f"node {node}: {action.reason}; its burn-in "
                                                      "reservation deleted")
                if action.quiet:  # none left (the usual case after a first drain)
                    return ActionResult(action, True, f"node {node}: no burn-in reservation")
                return ActionResult(action, False, f"node {node}: {res.message}")
            if isinstance(action, Resume):
                self._run(cmd.resume_argv(node))
                return ActionResult(action, True, f"node {node} resumed")
        except SlurmCommandError as exc:
            return ActionResult(action, False, f"node {node}: {exc}")
        return ActionResult(action, False, f"unsupported action {type(action).__name__}")

    def _burn_in(self, node: str) -> str:
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
        self._run(cmd.resume_argv(node))
        return f"{BURN_IN_DETAIL.format(job_id=m.group(1))} in reservation {name} on {node}"

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




def hide(nodes: Iterable[SinfoNode], held_out: frozenset[str],
         why: Callable[[str], str | None] = lambda _: None) -> list[SinfoNode]:
    """``nodes`` with the held-out ones drained, as the core must see them, with ``why(node)``
    as their reason: the node inventory records it, so the report's down-and-drained list and
    ``railgang explain NODE`` say why the node is out and where its burn-in stands."""
    return [dataclasses.replace(n, state=NodeState.DRAIN,
                                reason=why(n.name) or n.reason or "railgang: flaky")
            if n.name in held_out else n for n in nodes]


__all__ = ["HANDS", "RESERVATION_PREFIX", "FailureHands", "burn_in_reservations", "hide", "job_view",
           "node_view", "reservation"]
