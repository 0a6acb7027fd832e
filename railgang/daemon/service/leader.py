"""One leader: a PostgreSQL advisory lock, or an ``flock`` on a file beside the SQLite database.

Both locks belong to the holder's lifetime, not to anything it must remember to undo: the
advisory lock lives with the dedicated database session (it ends when the process dies and the
server notices the closed connection), the ``flock`` with the open file descriptor (the kernel
drops it when the process dies, even on ``kill -9``). So a crashed leader never blocks the next
one. ``probe`` answers "is a leader alive?" for ``railgang daemon status`` by trying the lock.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import Protocol

from sqlalchemy import Connection, Engine, text

from railgang.errors import DaemonError

# pg advisory locks take a signed 64-bit key; derive it from a fixed name so every railgang
# daemon pointed at the same database competes for the same lock
LOCK_NAME = "railgang-daemon-leader"
PG_KEY = int.from_bytes(hashlib.sha256(LOCK_NAME.encode()).digest()[:8], "big", signed=True)


class LeaderLock(Protocol):
    def try_acquire(self) -> bool:
        """Take the lock if it is free; True when this process now holds it."""
        ...

    def release(self) -> None: ...

    def describe(self) -> str: ...


class FileLock:
    """``flock(LOCK_EX | LOCK_NB)`` on ``path``; the holder writes ``pid host`` into it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise DaemonError(f"{self.path}: cannot open the leader lock file: {exc.strerror}; "
                              "check the database folder's permissions") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {os.uname().nodename}\n".encode())
        self._fd = fd
        return True

    def held(self) -> bool:
        """True when another process holds the lock now. Opens the file read-only and never
        creates it: ``daemon status`` run as root before the daemon (its own user) started left
        a root-owned lock file the daemon could not open."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise DaemonError(f"{self.path}: cannot read the leader lock file: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a lock we took
        return False

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def describe(self) -> str:
        return f"file lock {self.path}"


class AdvisoryLock:
    """``pg_try_advisory_lock`` held on a connection of its own for as long as we lead."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._conn: Connection | None = None

    def try_acquire(self) -> bool:
        if self._conn is not None:
            return True
        conn = self.engine.connect()
        got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": PG_KEY}).scalar())
        conn.commit()  # end the implicit transaction; the session-level lock stays
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        if self._conn is not None:
            try:
                self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PG_KEY})
                self._conn.commit()
            finally:
                self._conn.close()
                self._conn = None

    def describe(self) -> str:
        return f"PostgreSQL advisory lock {PG_KEY}"


def lock_for(engine: Engine) -> LeaderLock:
    """The advisory lock on PostgreSQL; on SQLite a file lock ``<database>.leader``."""
    url = engine.url
    if url.get_backend_name() == "postgresql":
        return AdvisoryLock(engine)
    if not url.database or url.database == ":memory:":
        raise DaemonError("db.url: the daemon needs a database file or PostgreSQL, not an "
                          "in-memory SQLite database")
    return FileLock(Path(url.database + ".leader").expanduser())


def probe(lock: LeaderLock) -> bool:
    """True when a leader holds the lock now (taking and at once dropping it otherwise; a file
    lock is only looked at, never created)."""
    if isinstance(lock, FileLock):
        return lock.held()
    if lock.try_acquire():
        lock.release()
        return False
    return True


__all__ = ["PG_KEY", "AdvisoryLock", "FileLock", "LeaderLock", "lock_for", "probe"]
