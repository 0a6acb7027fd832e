"""The class grants as ``job_submit.lua`` reads them, for the daemon's own re-check each cycle.

job_submit.lua checks a class 0-2 job's grant once, at submission. A pending job can then be
moved to another account or QOS (Slurm lets its owner; job_submit.lua re-checks that too), and
an admin can revoke a grant while jobs that relied on it still wait. So the daemon re-reads the
same file every cycle (the one it keeps current from the database, ``ledger.grants_file``) and
schedules a waiting job whose class is no longer granted as class 3. One parser of the file's
format lives here; ``railgang.db.repositories.admin.grants_file_text`` writes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MAX_GRANTS_BYTES = 1 << 20  # job_submit.lua ignores a larger file too


@dataclass(frozen=True, slots=True)
class ClassGrants:
    """``CLASS KIND SUBJECT`` grants and ``open CLASS`` lines (class 3 is always open)."""

    allowed: frozenset[tuple[int, str, str]] = frozenset()
    open_classes: frozenset[int] = field(default=frozenset({3}))

    def allows(self, priority_class: int, account: str, user: str, qos: str) -> bool:
        if priority_class in self.open_classes:
            return True
        return any((priority_class, kind, subject) in self.allowed
                   for kind, subject in (("account", account), ("user", user), ("qos", qos)) if subject)


def parse_grants(text: str) -> ClassGrants:
    """The file's text -> :class:`ClassGrants`; lines it does not know are skipped, as the lua does."""
    allowed: set[tuple[int, str, str]] = set()
    open_classes = {3}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] in "012" and len(words[0]) == 1 and words[1] in (
                "account", "user", "qos"):
            allowed.add((int(words[0]), words[1], words[2]))
        elif len(words) == 2 and words[0] == "open" and words[1] in ("0", "1", "2", "3"):
            open_classes.add(int(words[1]))
    return ClassGrants(frozenset(allowed), frozenset(open_classes))


def read_grants(path: Path) -> ClassGrants | None:
    """The grants in ``path``; None when it is missing, unreadable, not a regular file or too large
    (then nothing is re-checked this cycle: the file is the daemon's own, rewritten every cycle)."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as f:
            data = f.read(MAX_GRANTS_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_GRANTS_BYTES:
        return None
    return parse_grants(data.decode("utf-8", errors="replace"))


__all__ = ["MAX_GRANTS_BYTES", "ClassGrants", "parse_grants", "read_grants"]
