"""Link health over time: per-port verdicts with hysteresis, for a live collector (R-T2, R-T3).

``linkstate.classify`` judges one interval. A daemon that quarantined on one interval would
flap: one noisy sample (a burst of symbol errors while a cable is touched, a counter reset that
looks like a jump) would drain a node, the next clean interval would release it. The tracker
keeps a short history per port instead:

- a port is **quarantined** when at least ``quarantine_after`` of its last ``window`` intervals
  were lame (so a flapping port, lame every other interval, is caught, and one bad sample is not);
- it is **released** after ``release_after`` consecutive clean intervals (healthy or congested):
  the repair has held for that long;
- while quarantined it counts at the factor of the lame verdict that quarantined it (or a worse
  later one); a lame interval below the quarantine bar counts as healthy (not proven yet);
  congestion counts at once (it only steers placement, it never quarantines).

Samples come from any reader in ``counters`` (sysfs, node_exporter, perfquery); rates come from
consecutive samples of one port (``port_rates``: wraps and resets handled). A port seen once has
no verdict yet (``unknown``). A sample missing a counter the previous one had (an unreadable
value) is not judged: the next complete sample closes the longer interval instead, so a bad read
never passes for a clean interval (after ``window`` such samples in a row it becomes the new base). Pure: no I/O, no clock; ``now`` is passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from railgang.topology.counters import PortKey, PortSample, port_rates
from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.linkstate import (
    DEFAULT_THRESHOLDS,
    LinkState,
    Thresholds,
    _fold,
    _Verdict,
    classify,
    rail_from_device,
)

__all__ = ["Change", "Hysteresis", "LinkTracker", "PortStatus"]

Verdict = Literal["unknown", "healthy", "congested", "lame"]


@dataclass(frozen=True)
class Hysteresis:
    """How many intervals it takes to quarantine and to release a port."""

    quarantine_after: int = 3  # lame intervals among the last ``window`` that quarantine
    window: int = 5
    release_after: int = 5  # consecutive clean intervals that release a quarantined port

    def __post_init__(self) -> None:
        if not 1 <= self.quarantine_after <= self.window:
            raise ValueError(f"quarantine_after must be within 1..window ({self.window}), "
                             f"got {self.quarantine_after}")
        if self.release_after < 1:
            raise ValueError(f"release_after must be at least 1, got {self.release_after}")


@dataclass(frozen=True)
class PortStatus:
    """One port as the tracker sees it now."""

    key: PortKey
    verdict: Verdict  # the last interval's classification
    quarantined: bool
    factor: float  # what placement counts it at (hysteresis applied)
    effective_gbps: float
    lame_in_window: int  # lame intervals among the last ``window``
    clean_streak: int  # consecutive clean intervals up to now
    intervals: int  # intervals judged so far
    since: float | None  # when ``quarantined`` last changed (None: never)
    last_seen: float
    reasons: tuple[str, ...] = ()  # the evidence: the quarantining verdict, else the last one
    notes: tuple[str, ...] = ()  # wraps, resets, saturation in the last interval


@dataclass(frozen=True)
class Change:
    """A port that was quarantined or released by the last update."""

    key: PortKey
    quarantined: bool
    at: float
    reasons: tuple[str, ...]


@dataclass
class _Port:
    last: PortSample
    history: deque[bool]
    state: LinkState | None = None
    evidence: LinkState | None = None  # the lame verdict that holds the quarantine
    quarantined: bool = False
    clean_streak: int = 0
    intervals: int = 0
    since: float | None = None
    gaps: int = 0  # samples in a row skipped for a counter the previous sample had
    notes: tuple[str, ...] = field(default=())


class LinkTracker:
    """Per-port history across collection rounds; mutable, owned by one collector."""

    def __init__(self, fabric: Fabric, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                 hysteresis: Hysteresis = Hysteresis(),
                 rail_of: Callable[[PortKey], int | None] = rail_from_device) -> None:
        self.fabric, self.th, self.hy, self.rail_of = fabric, thresholds, hysteresis, rail_of
        self._ports: dict[PortKey, _Port] = {}

    def update(self, samples: Iterable[PortSample]) -> list[Change]:
        """Judge the interval each sample closes; returns the quarantines and releases it caused."""
        hy, changes = self.hy, []
        for s in samples:
            port = self._ports.get(s.key)
            if port is None:
                self._ports[s.key] = _Port(s, deque(maxlen=hy.window))
                continue
            if any(k not in s.counters for k in port.last.counters) and port.gaps < hy.window:
                port.gaps += 1  # a counter unreadable this time: judge the longer interval next
                continue  # time (a missing error counter must not read as a clean interval)
            rates = port_rates(port.last, s)
            if rates is None:  # not later than the last sample: nothing to judge
                continue
            port.last, port.gaps = s, 0
            state = classify(rates, self.th)
            port.state, port.notes = state, rates.notes
            port.intervals += 1
            lame = state.status == "lame"
            port.history.append(lame)
            port.clean_streak = 0 if lame else port.clean_streak + 1
            if port.quarantined:
                if lame and (port.evidence is None or state.factor <= port.evidence.factor):
                    port.evidence = state
                if port.clean_streak >= hy.release_after:
                    port.quarantined, port.evidence, port.since = False, None, s.time
                    changes.append(Change(s.key, False, s.time, ()))
            elif sum(port.history) >= hy.quarantine_after:
                port.quarantined, port.since = True, s.time
                port.evidence = state if lame else port.evidence or state
                changes.append(Change(s.key, True, s.time, state.reasons))
        return changes

    def _factor(self, port: _Port) -> float:
        if port.quarantined:
            return port.evidence.factor if port.evidence is not None else self.th.lame_factor
        if port.state is not None and port.state.status == "congested":
            return port.state.factor
        return 1.0

    def ports(self) -> tuple[PortStatus, ...]:
        """Every port seen, sorted by key."""
        out = []
        for key in sorted(self._ports):
            p = self._ports[key]
            factor = self._factor(p)
            shown = p.evidence if p.quarantined and p.evidence is not None else p.state
            out.append(PortStatus(
                key, "unknown" if p.state is None else p.state.status, p.quarantined, factor,
                self.th.nominal_gbps * factor, sum(p.history), p.clean_streak, p.intervals,
                p.since, p.last.time, shown.reasons if shown is not None else (), p.notes))
        return tuple(out)

    def health(self) -> LinkHealth:
        """The ``LinkHealth`` placement and the decision core read, with ``observed`` set to the
        nodes whose every watched port has at least ``release_after`` judged intervals."""
        verdicts: list[_Verdict] = []
        vouched: dict[str, bool] = {}
        for key, p in self._ports.items():
            why = None
            if p.quarantined:
                why = "; ".join(p.evidence.reasons) if p.evidence is not None else "lame"
            verdicts.append((key, self._factor(p), why))
            if key.host in self.fabric:
                enough = p.intervals >= self.hy.release_after
                vouched[key.host] = vouched.get(key.host, True) and enough
        observed = frozenset(n for n, ok in vouched.items() if ok)
        return _fold(self.fabric, verdicts, self.rail_of, observed)[0]

    def forget(self, keys: Iterable[PortKey]) -> None:
        """Drop ports (a node that left the fabric)."""
        for key in keys:
            self._ports.pop(key, None)
