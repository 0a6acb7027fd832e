"""A private PostgreSQL server for the test session, from Debian's postgresql package.

Used when RAILGANG_TEST_PG_URL is not given. initdb refuses to run as root, so the cluster is
owned by the ``postgres`` system user; it listens on 127.0.0.1 only, on its own port.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class PrivatePostgres:
    root: Path
    port: int = 25432

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://railgang:railgang@127.0.0.1:{self.port}/railgang"

    @staticmethod
    def bindir() -> Path | None:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        return found[-1].parent if found else None

    def _as_postgres(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)

    def start(self) -> None:
        bindir = self.bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed: apt-get install -y postgresql")
        data = self.root / "data"
        live = self._running_pid()
        if live is not None:  # another test session's server: deleting its files breaks it
            raise RuntimeError(f"a PostgreSQL server (pid {live}) already runs in {data}: another "
                               "test session uses this RAILGANG_TEST_ROOT; give this one its own")
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", "postgres",
                           "--auth=trust", "-E", "UTF8"])
        self._as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-w", "-l",
                           str(self.root / "postgres.log"), "-o",
                           f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1", "start"])
        psql = [str(bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                "-v", "ON_ERROR_STOP=1"]
        self._as_postgres([*psql, "-c", "CREATE ROLE railgang LOGIN PASSWORD 'railgang'"])
        self._as_postgres([*psql, "-c", "CREATE DATABASE railgang OWNER railgang"])

    def _running_pid(self) -> int | None:
        """The PID in the data directory's postmaster.pid when that process is alive and is a
        postgres (a stale file's PID may have been reused by anything)."""
        try:
            pid = int((self.root / "data" / "postmaster.pid").read_text().split()[0])
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        except (OSError, ValueError, IndexError):
            return None
        return pid if exe.startswith("postgres") else None

    def stop(self) -> None:
        bindir = self.bindir()
        if bindir is not None and (self.root / "data" / "postmaster.pid").exists():
            self._as_postgres([str(bindir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast",
                               "-w", "stop"])
