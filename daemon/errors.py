"""The one exception hierarchy of railgang.

Adapters translate foreign errors (Slurm CLI, SQLAlchemy, file parsing) at the boundary with
``raise X from exc``; the CLI maps every ``RailgangError`` to a one-line message and exit code 1 (or
the code the error carries), never a traceback. "A job cannot be placed" is *not* an error: it is a
``Reason`` returned as data by the decision core.
"""

from __future__ import annotations


class RailgangError(Exception):
    """Base class: a problem the user can act on; ``str(err)`` says what and what to do."""

    exit_code: int = 1


class ConfigError(RailgangError):
    """The configuration file or a RAILGANG_* variable is invalid."""


class InputError(RailgangError):
    """An external input (file, trace, counters, hints) is malformed.

    Carries the location so messages read ``file:line: field: problem``.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.message = message
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path + (f":{self.line}" if self.line is not None else "") + ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"


class DatabaseError(RailgangError):
    """The database cannot be reached or migrated."""


class SlurmError(RailgangError):
    """A Slurm command failed or returned something we cannot read."""


class SlurmCommandError(SlurmError):
    """A Slurm command could not be run or exited non-zero (after any retries).

    ``command`` is the argument list, ``rc`` the exit status (``None`` when it timed out or could
    not start), ``stderr`` the last line of its error output.
    """

    def __init__(self, command: list[str], rc: int | None, stderr: str) -> None:
        self.command = list(command)
        self.rc = rc
        self.stderr = stderr
        status = "timed out" if rc is None else f"exited {rc}"
        super().__init__(f"`{' '.join(self.command[:3])}` {status}: {stderr or '(no error output)'}")


class DevClusterError(RailgangError):
    """The local test cluster cannot be brought up or down."""


class DaemonError(RailgangError):
    """The daemon cannot start or keep running (lock file, backend, metrics port)."""


class NotLeaderError(DaemonError):
    """Another daemon holds the leader lock (``railgang daemon run --no-wait``)."""

    exit_code = 4


class UnknownJobError(RailgangError):
    """``railgang explain``: the daemon has no record of this job."""


__all__ = [
    "ConfigError",
    "DaemonError",
    "DatabaseError",
    "DevClusterError",
    "InputError",
    "NotLeaderError",
    "RailgangError",
    "SlurmCommandError",
    "SlurmError",
    "UnknownJobError",
]
