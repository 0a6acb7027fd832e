"""What slurmdbd's hourly rollup adds to ``sreport cluster utilization``'s Down beyond the node
events' own time: a miscount in ``_setup_cluster_usage`` (as_mysql_rollup.c, the same in 22.05.8,
24.11.6 and Slurm's master of 2026-08).

For each node event of an hour the rollup walks the reservations of that hour that hold the
node, and keeps in ``resv_seconds`` the overlap with the last one, which is negative when they
do not meet (a drain at 10:05, a reservation of the node from 10:40); it then adds ``seconds -
resv_seconds`` to Down, so the gap between them is counted as down time too. An event that does
overlap its reservations is counted right (each overlap as Down, or PLND Down in a MAINT one).
Seen on the local cluster: a node's 8 s cold-start event at 03:16:39 and a reservation of it
from 03:16:57 made sreport count 18 s of down time (tests/e2e/test_sreport_capacity_e2e.py).

The e2e test subtracts this from sreport's figure; railgang counts the event's own time.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import hostlist

HOUR = 3600
MAINT_BIT = 1 << 15  # NODE_STATE_MAINT (slurm.h, 22.05 and 24.11)


@dataclass(frozen=True, slots=True)
class Event:
    node: str
    start: int
    end: int | None  # None: still open (rolled up to the hour's end)
    maint: bool = False  # events with the MAINT state bit are left to the reservations


@dataclass(frozen=True, slots=True)
class Resv:
    nodes: frozenset[str]
    start: int
    end: int
    maint: bool


def overcount_s(events: Iterable[Event], resvs: Sequence[Resv], lo: int, hi: int) -> dict[str, int]:
    """node -> the seconds of Down the rollup of the hours [lo, hi) adds beyond the events'
    own time (less what a MAINT reservation moves to PLND Down). ``resvs`` in the rollup's
    order (time_start)."""
    out: dict[str, int] = {}
    for h in range(lo, hi, HOUR):
        # _setup_resv_usage: clipped to the hour, kept from one second on
        held = [(r, max(r.start, h), min(r.end, h + HOUR)) for r in resvs
                if r.start < h + HOUR and r.end >= h]
        held = [(r, s, e) for r, s, e in held if e - s >= 1]
        for ev in events:
            if ev.maint or ev.start >= h + HOUR or (ev.end is not None and ev.end < h):
                continue
            start, end = max(ev.start, h), min(h + HOUR if ev.end is None else ev.end, h + HOUR)
            if end - start < 1:
                continue
            # as the rollup does: each overlap goes to Down (PLND Down in a MAINT one), then
            # the event's time less the LAST reservation's overlap, even a negative one
            down, resv_seconds, in_maint = 0, 0, 0
            for r, rs, re in held:
                if ev.node not in r.nodes:
                    continue
                resv_seconds = min(re, end) - max(rs, start)
                if resv_seconds < 1:
                    continue
                if r.maint:
                    in_maint += resv_seconds
                else:
                    down += resv_seconds
            down += max(0, (end - start) - resv_seconds)
            true = end - start - in_maint
            out[ev.node] = out.get(ev.node, 0) + down - true
    return {n: s for n, s in out.items() if s}


def _epoch(text: str) -> int | None:
    if text in ("", "Unknown", "None"):
        return None
    return int(time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))


def parse_events(text: str) -> list[Event]:
    """``sacctmgr -n -P show event ... format=NodeName,TimeStart,TimeEnd,StateRaw`` -> the node
    events (the cluster's own rows, without a node, are skipped)."""
    out = []
    for line in text.splitlines():
        node, start, end, raw = line.split("|")
        if node:
            out.append(Event(node, _epoch(start) or 0, _epoch(end), bool(int(raw) & MAINT_BIT)))
    return out


def parse_resvs(text: str) -> list[Resv]:
    """``sacctmgr -n -P show reservation ... format=ID,NodeNames,TimeStart,TimeEnd,Flags``, in
    the rollup's order."""
    rows = []
    for line in text.splitlines():
        rid, nodes, start, end, flags = line.split("|")
        rows.append((_epoch(start) or 0, int(rid), Resv(
            frozenset(hostlist.expand_hostlist(nodes)) if nodes else frozenset(),
            _epoch(start) or 0, _epoch(end) or 0, "MAINT" in flags.split(","))))
    return [r for *_, r in sorted(rows, key=lambda x: (x[0], x[1]))]


__all__ = ["Event", "Resv", "overcount_s", "parse_events", "parse_resvs"]
