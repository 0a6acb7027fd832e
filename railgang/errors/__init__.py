"""The one exception hierarchy of railgang.

Adapters translate foreign errors (Slurm CLI, SQLAlchemy, file parsing) at the boundary with
``raise X from exc``; the CLI maps every ``RailgangError`` to a one-line message and exit code 1 (or
the code the error carries), never a traceback. "A job cannot be placed" is *not* an error: it is a
``Reason`` returned as data by the decision core.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The one exit-code table of every ``railgang`` command (docs/cli.md repeats it).

    A command ends with one of these and nothing else: errors carry theirs (``exit_code`` below),
    the CLI raises ``typer.Exit(ExitCode.X)`` for the outcomes that are not errors.
    """

    OK = 0  # done; for a check: the thing checked is fine
    ERROR = 1  # invalid input (file, option value the command checks itself) or a failure
    USAGE = 2  # typer/click's own: unknown option, missing argument, value not among the choices
    NOT_NOW = 3  # valid, but not possible now: `place` cannot place, `ledger reconcile` differs
    NOT_RUNNING = 4  # a service is not running: no daemon, not the leader (--no-wait), cluster down


class RailgangError(Exception):
    """Base class: a problem the user can act on; ``str(err)`` says what and what to do."""

    exit_code: int = ExitCode.ERROR


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


class SlurmSchemaError(SlurmError):
    """Slurm's JSON speaks a schema railgang does not read (its ``meta``), or every record of it
    failed to read: the cycle fails loudly instead of seeing an empty cluster. ``command`` is
    the command whose output it was (``squeue``, ``sinfo``)."""

    def __init__(self, command: str, message: str) -> None:
        self.command = command
        super().__init__(message)


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

    exit_code = ExitCode.NOT_RUNNING


class UnknownJobError(RailgangError):
    """``railgang explain``: the daemon has no record of this job."""


class DomainError(RailgangError):
    """A request the API or the admin CLI refuses; ``code`` names the kind, ``fields`` maps each
    failing field to what is wrong with it. The API answers with ``status``."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, fields: dict[str, str] | None = None) -> None:
        self.message = message
        self.fields = dict(fields or {})
        detail = "; ".join(f"{k}: {v}" for k, v in self.fields.items())
        super().__init__(f"{message} ({detail})" if detail else message)


class NotFoundError(DomainError):
    status = 404
    code = "not_found"


class ConflictError(DomainError):
    """The object exists already, or is in a state that forbids the change."""

    status = 409
    code = "conflict"


class ValidationFailed(DomainError):
    """The change would break a rule (e.g. the quota hierarchy); nothing was written."""

    status = 422
    code = "validation_failed"


class AuthenticationError(DomainError):
    """No token, an unknown one, or one expired or revoked."""

    status = 401
    code = "unauthenticated"


class PermissionDeniedError(DomainError):
    """A valid token whose role or team scope does not cover the request."""

    status = 403
    code = "forbidden"


__all__ = [
    "AuthenticationError",
    "ConfigError",
    "ConflictError",
    "DaemonError",
    "DatabaseError",
    "DevClusterError",
    "DomainError",
    "ExitCode",
    "InputError",
    "NotFoundError",
    "NotLeaderError",
    "PermissionDeniedError",
    "RailgangError",
    "SlurmCommandError",
    "SlurmError",
    "SlurmSchemaError",
    "UnknownJobError",
    "ValidationFailed",
]
