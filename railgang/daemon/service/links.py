"""The daemon's live link-health collector (``daemon.links``; docs/topology.md "Live link health").

Every ``interval_s`` it reads the InfiniBand port counters of every host — node_exporter's
infiniband collector over HTTP (``exporter_url`` with ``{host}``, parsed with prometheus_client's
text parser) and/or per-host sysfs trees under ``sysfs_root`` — and feeds them to a
:class:`~railgang.topology.linktrack.LinkTracker`, which turns counter deltas into healthy /
congested / lame verdicts with hysteresis. The tracker's :class:`LinkHealth` goes into the next
cycle's snapshot (``DaemonService`` → ``run_cycle(health=...)``): quarantined nodes get the
core's lame-link tag, nodes the tracker vouches for again lose it. Each round also writes
``state_file`` (what ``railgang topology links`` shows) and updates ``/metrics``.

A host that cannot be scraped is one warning and one counted error, never an exception: its
ports keep their last verdict until it answers again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from railgang.daemon.config import LinkSettings
from railgang.topology import hostnames
from railgang.topology.counters import (
    PortKey,
    PortSample,
    parse_node_exporter,
    parse_perfquery,
    read_sysfs,
)
from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.inputs import InputProblem, read_text, write_atomic
from railgang.topology.linkstate import Thresholds
from railgang.topology.linktrack import Change, Hysteresis, LinkTracker, PortStatus

__all__ = ["LinkCollector", "LinkRound", "state_json"]

log = logging.getLogger("railgang.daemon.links")
MAX_PAGE_BYTES = 16 << 20  # a node_exporter page is ~100 kB; refuse a runaway one


@dataclass(frozen=True)
class LinkRound:
    """What one collection round did."""

    at: float  # epoch seconds
    hosts: int
    samples: int
    errors: tuple[str, ...]
    changes: tuple[Change, ...]
    seconds: float
    ports: tuple[PortStatus, ...] = field(repr=False, default=())
    health: LinkHealth = field(repr=False, default_factory=LinkHealth)


def _fetch(url: str, timeout: float) -> str:
    req = urllib.request.Request(url, headers={"Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        body = resp.read(MAX_PAGE_BYTES + 1)
    if len(body) > MAX_PAGE_BYTES:
        raise ValueError(f"page larger than {MAX_PAGE_BYTES >> 20} MiB")
    return str(body.decode("utf-8", errors="replace"))


class LinkCollector:
    """Scrapes, tracks and publishes link health; one per daemon (thread-safe reads)."""

    def __init__(self, settings: LinkSettings, fabric: Fabric | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.settings, self.clock, self.wall = settings, clock, wall
        self.thresholds = Thresholds(nominal_gbps=settings.nominal_gbps,
                                     lame_errors_per_s=settings.lame_errors_per_s,
                                     congested_wait_per_s=settings.congested_wait_per_s)
        self.hysteresis = Hysteresis(settings.quarantine_after, settings.window,
                                     settings.release_after)
        self._lock = threading.Lock()
        self._tracker: LinkTracker | None = None
        self._health: LinkHealth | None = None
        self.last: LinkRound | None = None
        self._switch_mtime: dict[str, float] = {}
        self._pool = ThreadPoolExecutor(settings.workers, thread_name_prefix="rg-links")
        if fabric is not None:
            self.set_fabric(fabric)

    def set_fabric(self, fabric: Fabric) -> None:
        """The fabric to fold ports onto (the daemon hands over each cycle's; history is kept)."""
        with self._lock:
            if self._tracker is None:
                self._tracker = LinkTracker(fabric, self.thresholds, self.hysteresis)
            else:
                self._tracker.fabric = fabric

    def health(self) -> LinkHealth | None:
        """The link health of the last round (None before the first round)."""
        with self._lock:
            return self._health

    def hosts(self) -> list[str]:
        if self.settings.hosts:
            return list(hostnames.expand(self.settings.hosts))
        tracker = self._tracker
        return list(tracker.fabric.nodes) if tracker is not None else []

    def _read_host(self, host: str) -> tuple[list[PortSample], list[str]]:
        s, samples, errors = self.settings, [], []
        if s.exporter_url:
            url = s.exporter_url.replace("{host}", host)
            try:
                text = _fetch(url, s.timeout_s)
                samples += parse_node_exporter(text, host, self.clock())
            except urllib.error.HTTPError as exc:
                errors.append(f"{host}: {url}: HTTP {exc.code} {exc.reason}")
            except (OSError, ValueError) as exc:  # URLError is an OSError: refused, timed out
                errors.append(f"{host}: {url}: {getattr(exc, 'reason', None) or exc}")
        if s.sysfs_root is not None:
            tree = s.sysfs_root / host / "class" / "infiniband"
            root = tree if tree.is_dir() else s.sysfs_root / host
            if root.is_dir():
                samples += read_sysfs(root, host, self.clock())
            else:
                errors.append(f"{host}: no sysfs tree under {s.sysfs_root / host}")
        return samples, errors

    def _read_switches(self) -> tuple[list[PortSample], list[str]]:
        """Switch ports from ``switch_perfquery_dir``: one ``<switch>.perfquery`` file per switch,
        parsed like a snapshot's. A file's mtime is its sample time and an unchanged file is not
        read again, so a refresh job slower than the round adds no zero-length intervals."""
        root = self.settings.switch_perfquery_dir
        if root is None:
            return [], []
        samples: list[PortSample] = []
        errors: list[str] = []
        try:
            files = sorted(root.glob("*.perfquery"))
        except OSError as exc:
            return [], [f"switch_perfquery_dir: {root}: {exc.strerror or exc}"]
        for f in files:
            try:
                mtime = f.stat().st_mtime
                if self._switch_mtime.get(f.stem) == mtime:
                    continue
                text = read_text(f, "perfquery file", limit=MAX_PAGE_BYTES)
            except (OSError, InputProblem) as exc:
                errors.append(f"{f.stem}: {exc}")
                continue
            self._switch_mtime[f.stem] = mtime
            samples += _merge_ports(parse_perfquery(text, f.stem, mtime))
        return samples, errors

    def collect(self) -> LinkRound | None:
        """One round over every host; None while no fabric is known yet."""
        if self._tracker is None:
            return None
        t0 = time.perf_counter()
        hosts = self.hosts()
        samples: list[PortSample] = []
        errors: list[str] = []
        for got, errs in self._pool.map(self._read_host, hosts):
            samples += got
            errors += errs
        got, errs = self._read_switches()
        samples += got
        errors += errs
        bad_values = sum(1 for s in samples if s.warnings)
        with self._lock:
            tracker = self._tracker
            changes = tracker.update(samples)
            health = tracker.health()
            ports = tracker.ports()
            self._health = health
        if bad_values:
            errors.append(f"{bad_values} port(s) had unreadable counter values (skipped)")
        result = LinkRound(self.wall(), len(hosts), len(samples), tuple(errors), tuple(changes),
                           time.perf_counter() - t0, ports, health)
        self.last = result
        for c in changes:
            log.warning("link %s %s port %d %s%s", c.key.host, c.key.device, c.key.port,
                        "quarantined" if c.quarantined else "released",
                        f": {'; '.join(c.reasons)}" if c.reasons else "")
        if errors:
            log.warning("link scrape: %d problem(s), e.g. %s", len(errors), "; ".join(errors[:3]))
        self._write_state(result)
        return result

    def _write_state(self, result: LinkRound) -> None:
        path = self.settings.state_file
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(state_json(result, self.settings.interval_s)))
        except OSError as exc:
            log.error("daemon.links.state_file: cannot write %s: %s", path, exc.strerror or exc)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _port_json(p: PortStatus) -> dict[str, Any]:
    return {"host": p.key.host, "device": p.key.device, "port": p.key.port, "status": p.verdict,
            "quarantined": p.quarantined, "factor": round(p.factor, 4),
            "effective_gbps": round(p.effective_gbps, 3), "lame_in_window": p.lame_in_window,
            "clean_streak": p.clean_streak, "intervals": p.intervals, "since": p.since,
            "reasons": list(p.reasons), "notes": list(p.notes)}


def _merge_ports(samples: list[PortSample]) -> list[PortSample]:
    """One sample per port: ``perfquery`` prints the extended (data) and the basic (error) counters
    of a port as two blocks; the tracker must see them as one reading, or each block would look
    like the other's counters went missing."""
    merged: dict[PortKey, PortSample] = {}
    for s in samples:
        old = merged.get(s.key)
        merged[s.key] = s if old is None else replace(
            old, counters=MappingProxyType({**s.counters, **old.counters}),  # extended (64-bit) first
            widths=MappingProxyType({**s.widths, **old.widths}), warnings=old.warnings + s.warnings)
    return list(merged.values())


def state_json(result: LinkRound, interval_s: float) -> dict[str, Any]:
    """The state file: one round's ports, quarantine and problems (``topology links`` reads it)."""
    counts = {k: 0 for k in ("healthy", "congested", "lame", "unknown")}
    for p in result.ports:
        counts[p.verdict] += 1
    return {"collected_at": result.at, "interval_s": interval_s, "hosts": result.hosts,
            "samples": result.samples, "seconds": round(result.seconds, 4), "counts": counts,
            "quarantined_ports": sum(p.quarantined for p in result.ports),
            "errors": list(result.errors[:50]), "errors_total": len(result.errors),
            "quarantine": [{"node": n, "reason": r} for n, r in sorted(result.health.quarantined.items())],
            "ports": [_port_json(p) for p in result.ports]}
