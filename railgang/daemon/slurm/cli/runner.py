"""Run Slurm commands: argument lists (never a shell), one timeout, typed errors, bounded retries.

Every Slurm client call of the CLI backend goes through one :class:`SlurmRunner`, so the
environment (``SLURM_CONF``), the timeout and the retry rule live in one place, and a test or a
benchmark can count the processes a cycle forks (``runner.calls``).

Retry rule: only *transient* failures are retried — slurmctld busy or unreachable, a timed-out
command — with exponential backoff. A refusal ("Invalid job id", "Requested node configuration
is not available", "Access/permission denied") is an answer, not a hiccup: it is returned at once
(:meth:`SlurmRunner.attempt`) or raised as :class:`SlurmCommandError` (:meth:`SlurmRunner.run`).

A read that timed out is tried again with twice the time, up to :data:`READ_TIMEOUT_GROWTH`
times ``timeout_s``, and the last time it was given is kept for that read from then on
(:meth:`SlurmRunner.run`), whether it then answered or not: a read's cost grows with the queue
(``squeue --json`` of 51,000 jobs on 26.05 took over 120 s on this 2-core machine, so no cycle
ever completed, BENCHMARKS.md), and the next cycle should not pay the short tries again. A
write's cost does not grow with the queue; a write that times out means slurmctld is stuck,
where waiting longer helps nobody.

Output is hostile (docs/security.md, "Slurm output"): 22.05 copies a job's name and Comment into
``squeue --json``/``sacct --json`` without checking that they are UTF-8, so output is decoded as
UTF-8 with every invalid byte replaced by U+FFFD (never a ``UnicodeDecodeError``), and it is
spooled to a temporary file and refused beyond :data:`MAX_OUTPUT_BYTES` instead of being read
whole into memory.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from railgang.daemon.config import SlurmSettings
from railgang.errors import SlurmCommandError

log = logging.getLogger(__name__)

# stderr fragments of Slurm 22.05 clients that mean "try again", not "no"
TRANSIENT_MARKERS = (
    "unable to contact slurm controller",
    "slurm_persist_conn_open",
    "socket timed out",
    "connection refused",
    "connection timed out",
    "resource temporarily unavailable",
    "slurm temporarily unable",
    "zero bytes were transmitted",
    "slurmctld is busy",
    "try again",
    "communication connection failure",
)

# a read's timeout grows to at most this many times [slurm] command_timeout_s (30 s: 240 s)
READ_TIMEOUT_GROWTH = 8

# a Slurm client's stdout (or stderr) larger than this is refused, not read: squeue --json of
# 100,000 jobs is about 400 MB on 22.05
MAX_OUTPUT_BYTES = 1 << 30


class OutputTooLarge(OSError):
    """A command wrote more than :data:`MAX_OUTPUT_BYTES`; nothing of it was read."""


def is_transient(stderr: str) -> bool:
    """True when ``stderr`` says slurmctld was busy or unreachable (worth a retry)."""
    low = stderr.lower()
    return any(marker in low for marker in TRANSIENT_MARKERS)


def read_key(args: Sequence[str]) -> tuple[str, ...]:
    """What a read's learned timeout is kept under: its program and the words before its
    options (``squeue``; ``scontrol show topology``), so ids and filters do not multiply keys."""
    words: list[str] = []
    for a in args:
        if a.startswith("-") or len(words) == 3:
            break
        words.append(a)
    return tuple(words) or tuple(args[:1])


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (Slurm prints its verdict last), stripped."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """One finished command (after retries): argv, exit status, output, attempts and seconds."""

    argv: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str
    attempts: int = 1
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def message(self) -> str:
        """Slurm's one-line verdict: the last line of stderr, else of stdout."""
        return last_line(self.stderr) or last_line(self.stdout)


Exec = Callable[[Sequence[str], Mapping[str, str], float, str | None], tuple[int, str, str]]
"""How a process is run: ``(argv, env, timeout_s, stdin) -> (rc, stdout, stderr)``; raises
``subprocess.TimeoutExpired`` or ``OSError``. The default is :func:`subprocess_exec`."""


def decode(data: bytes) -> str:
    """Slurm output as text: UTF-8, each invalid byte replaced by U+FFFD (never raises)."""
    return data.decode("utf-8", errors="replace")


def subprocess_exec(argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                    stdin: str | None = None, max_bytes: int | None = None) -> tuple[int, str, str]:
    """Run ``argv`` with stdout and stderr spooled to temporary files (memory stays flat
    whatever the command prints); raises :class:`OutputTooLarge` past ``max_bytes``
    (default :data:`MAX_OUTPUT_BYTES`)."""
    limit = MAX_OUTPUT_BYTES if max_bytes is None else max_bytes
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        res = subprocess.run(list(argv), stdout=out, stderr=err, env=dict(env), timeout=timeout_s,
                             check=False, input=(stdin or "").encode("utf-8"))
        texts = []
        for f in (out, err):
            size = f.seek(0, os.SEEK_END)
            if size > limit:
                raise OutputTooLarge(f"{argv[0]} wrote {size} bytes, more than the {limit} "
                                     "railgang reads")
            f.seek(0)
            texts.append(decode(f.read()))
    return res.returncode, texts[0], texts[1]


@dataclass
class SlurmRunner:
    """Runs Slurm client commands for one cluster.

    ``conf``: slurm.conf of the cluster (exported as ``SLURM_CONF``; without it 22.05 clients try
    DNS SRV and die). ``timeout_s``: per attempt. ``retries``: extra attempts for transient
    failures, sleeping ``backoff_s``, 2×, 4×… in between. ``calls`` counts processes started.
    """

    conf: Path | None = None
    timeout_s: float = 30.0
    retries: int = 2
    backoff_s: float = 0.5
    exec_fn: Exec = subprocess_exec
    sleep: Callable[[float], None] = time.sleep
    calls: int = 0
    history: list[CommandResult] = field(default_factory=list, repr=False)
    # per read (its program and sub-command): the timeout its last grown retry had, kept as
    # its first try's timeout from then on
    read_timeouts: dict[tuple[str, ...], float] = field(default_factory=dict, repr=False)
    keep_history: int = 200  # recent commands kept for `explain`/debugging and for tests

    @classmethod
    def from_settings(cls, slurm: SlurmSettings) -> SlurmRunner:
        """From ``Settings.slurm``."""
        return cls(conf=slurm.conf, timeout_s=slurm.command_timeout_s, retries=slurm.retries,
                   backoff_s=slurm.retry_backoff_s)

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.conf is not None:
            env["SLURM_CONF"] = str(self.conf)
        return env

    def attempt(self, argv: Sequence[str], stdin: str | None = None,
                grow_timeout: bool = False) -> CommandResult:
        """Run ``argv`` (feeding ``stdin``); retry transient failures; return the final result
        whatever its rc. Callers only retry-wrap idempotent commands (absolute updates).
        ``grow_timeout`` (reads): a timed-out try is retried with twice its timeout, at most
        :data:`READ_TIMEOUT_GROWTH` times ``timeout_s``, and the last one is kept for the next call.

        Raises :class:`SlurmCommandError` only when the command could not produce an answer at
        all: not installed, or timed out / unreachable on every attempt.
        """
        args = tuple(str(a) for a in argv)
        env = self.env()
        t0 = time.monotonic()
        key = read_key(args)
        timeout = self.timeout_s
        if grow_timeout:
            timeout = max(timeout, self.read_timeouts.get(key, 0.0))
        for attempt in range(1, self.retries + 2):
            self.calls += 1
            try:
                rc, out, err = self.exec_fn(args, env, timeout, stdin)
            except subprocess.TimeoutExpired:
                rc, out, err = -1, "", f"timed out after {timeout:g}s"
                transient = True
            except OutputTooLarge as exc:  # an answer nobody can read: no retry helps either
                raise SlurmCommandError(list(args), None, str(exc)) from exc
            except OSError as exc:  # not installed / not executable: no retry helps
                raise SlurmCommandError(list(args), None, f"cannot run: {exc.strerror or exc}") from exc
            else:
                transient = rc != 0 and is_transient(err)
            if not transient or attempt > self.retries:
                break
            delay = self.backoff_s * (2 ** (attempt - 1))
            grown = grow_timeout and rc == -1 and timeout < self.timeout_s * READ_TIMEOUT_GROWTH
            if grown:
                timeout = min(2 * timeout, self.timeout_s * READ_TIMEOUT_GROWTH)
            log.warning("slurm: %s transient failure (%s); retry %d/%d in %.1fs%s",
                        args[0], last_line(err), attempt, self.retries, delay,
                        f" with a {timeout:g}s timeout (a queue this long wants a larger [slurm] "
                        "command_timeout_s)" if grown else "")
            self.sleep(delay)
        result = CommandResult(args, rc, out, err, attempt, time.monotonic() - t0)
        self._remember(result)
        if grow_timeout and timeout > self.timeout_s:
            self.read_timeouts[key] = timeout
        if rc == -1 or (rc != 0 and transient):
            raise SlurmCommandError(list(args), None if rc == -1 else rc, last_line(err))
        return result

    def run(self, argv: Sequence[str], stdin: str | None = None) -> CommandResult:
        """Like :meth:`attempt`, but a non-zero exit is a :class:`SlurmCommandError`, and a
        timed-out try is retried with twice the time (for reads)."""
        result = self.attempt(argv, stdin, grow_timeout=True)
        if not result.ok:
            raise SlurmCommandError(list(result.argv), result.rc, result.message)
        return result

    def _remember(self, result: CommandResult) -> None:
        self.history.append(result)
        if len(self.history) > self.keep_history:
            del self.history[: len(self.history) - self.keep_history]


__all__ = ["MAX_OUTPUT_BYTES", "CommandResult", "Exec", "OutputTooLarge", "SlurmRunner", "decode",
           "is_transient", "last_line", "subprocess_exec"]
