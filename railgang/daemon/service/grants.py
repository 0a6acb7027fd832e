"""The class grants file ``job_submit.lua`` reads, kept current by the daemon every cycle.

Classes 0-2 are granted, not claimed: an admin grants them (``railgang quota grant``, the API),
the grants live in the database, and slurmctld must not reach the database (no network inside
it). So each cycle the daemon renders the file from the database
(``admin.grants_file_text``: sorted, so the same grants give the same bytes) and replaces it
only when the bytes differ, by an atomic rename: slurmctld never sees a half-written file, and
an unchanged file is never touched. The comparison is against the file on disk, not a memory of
the last write, so a file deleted or overwritten by hand is restored within one cycle.
"""

from __future__ import annotations

import logging
from pathlib import Path

from sqlalchemy.orm import Session

from railgang.db.repositories import admin
from railgang.topology.inputs import write_if_changed

log = logging.getLogger("railgang.daemon")


class GrantsFile:
    """One cycle's step: bring the grants file in line with the database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writes = 0
        self._failing: str | None = None  # the last error, logged once until it changes

    def sync(self, s: Session) -> bool:
        """Rewrite the file if the grants changed; True if written. A write that fails (full
        disk, permissions) is logged, never fails the cycle: job_submit.lua keeps the last good
        file, or refuses classes 0-2 when there is none."""
        text = admin.grants_file_text(s)
        try:
            written = write_if_changed(self.path, text)
        except OSError as exc:
            error = f"{exc.strerror or exc}"
            if error != self._failing:
                log.error("class grants file %s: cannot write it: %s; job_submit.lua keeps the "
                          "last one (classes 0-2 refused if none); fix the path or "
                          "ledger.grants_file", self.path, error)
            self._failing = error
            return False
        self._failing = None
        if written:
            self.writes += 1
            grants = sum(1 for line in text.splitlines() if line[:1].isdigit())
            log.info("class grants file %s written: %d grant(s)", self.path, grants)
        return written


__all__ = ["GrantsFile"]
