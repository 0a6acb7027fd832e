"""Slurm host lists (``n[01-04,07],gpu9``): the one expander and collector railgang uses.

python-hostlist bounds one bracketed part (100,000 names) but not a list of many such parts, so a
host list read from anywhere (squeue, sinfo, sacct, a ledger row, SLURM_JOB_NODELIST, a file) is
expanded part by part here and refused once it names more than ``limit`` hosts, before the names
are built: ``n[0-99999],m[0-99999],…`` costs at most one part past the limit, never gigabytes.
"""

from __future__ import annotations

from collections.abc import Iterable

import hostlist

MAX_HOSTS = 100_000  # above any Slurm cluster's node count (MAX_SLURM_NODES is 64k)


class HostListError(ValueError):
    """A host list that is malformed or names more than the limit; the message names it."""


def _parts(expr: str) -> list[str]:
    """The top-level comma-separated parts (commas inside brackets stay in their part)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    parts.append(expr[start:])
    return [p.strip() for p in parts if p.strip()]


def _shown(expr: str) -> str:
    return expr if len(expr) <= 80 else f"{expr[:77]}..."


def expand(expr: str, limit: int = MAX_HOSTS) -> tuple[str, ...]:
    """Every host ``expr`` names, in its order, duplicates dropped; ``()`` for an empty one.
    Raises :class:`HostListError` for a malformed list or one of more than ``limit`` hosts."""
    if not expr or not expr.strip():
        return ()
    names: list[str] = []
    seen: set[str] = set()
    for part in _parts(expr):
        try:
            got = hostlist.expand_hostlist(part)
        except (hostlist.BadHostlist, ValueError, IndexError, OverflowError) as exc:
            raise HostListError(f"malformed host list '{_shown(expr)}': {exc}") from None
        for name in got:
            if name not in seen:
                seen.add(name)
                names.append(name)
        if len(names) > limit:
            raise HostListError(f"host list '{_shown(expr)}': more than {limit} hosts")
    return tuple(names)


def collect(names: Iterable[str]) -> str:
    """The shortest host list of ``names`` (``n[01-03]``), as Slurm writes it; raises
    :class:`HostListError` for a name it cannot write (``n]``, which slurmctld accepts)."""
    listed = list(names)
    try:
        return str(hostlist.collect_hostlist(listed))
    except (hostlist.BadHostlist, ValueError, IndexError) as exc:
        raise HostListError(f"host names {_shown(','.join(listed))}: {exc}") from None


__all__ = ["MAX_HOSTS", "HostListError", "collect", "expand"]
