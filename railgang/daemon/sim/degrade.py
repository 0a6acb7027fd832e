"""Link degradation in a simulated replay (``railgang sim --degrade``): a switch's paths run at a
fraction of their bandwidth from one time on, and optionally recover later.

Spec: ``SWITCH@START[-END]:FACTOR``, several joined by commas, e.g. ``spine1@3h:0.3`` (spine1's
paths at 30 % from three hours into the trace) or ``s2@90m-6h:0.5`` (leaf s2's uplinks at half
bandwidth from 90 minutes to six hours). Times count from the first submit; units ``s``, ``m``,
``h``, ``d`` (seconds without one). The factor is what ``LinkHealth.switches`` holds: every
all-reduce hop through the switch runs at that share (``topology.comm_model``), so running jobs
slow down at once, placement prefers other paths, and the decision core may migrate (R-T8).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["LinkEvent", "parse_degrade"]

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SPEC = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+?)@([0-9.]+)([smhd]?)(?:-([0-9.]+)([smhd]?))?:([0-9.]+)\s*$")


@dataclass(frozen=True, order=True)
class LinkEvent:
    """From ``at`` (seconds after the trace's first submit) ``switch`` counts at ``factor``."""

    at: float
    switch: str
    factor: float


def parse_degrade(spec: str, switches: Collection[str], origin: float = 0.0) -> tuple[LinkEvent, ...]:
    """Events of a ``--degrade`` spec, sorted by time (a repair is an event back to 1.0).

    Raises ``ValueError`` with one line naming the bad part and the expected form.
    """
    events: list[LinkEvent] = []
    for part in (p for p in spec.split(",") if p.strip()):
        m = _SPEC.match(part)
        if m is None:
            raise ValueError(f"--degrade {part.strip()!r}: expected SWITCH@START[-END]:FACTOR, "
                             "e.g. spine1@3h:0.3 or s2@90m-6h:0.5")
        switch, start, su, end, eu, factor = m.groups()
        if switch not in switches:
            known = ", ".join(sorted(switches)[:8])
            raise ValueError(f"--degrade {part.strip()!r}: no switch {switch!r} in the topology "
                             f"(switches: {known}{', ...' if len(switches) > 8 else ''})")
        try:
            t0, f = float(start) * _UNITS[su], float(factor)
            t1 = float(end) * _UNITS[eu] if end is not None else None
        except ValueError as exc:
            raise ValueError(f"--degrade {part.strip()!r}: {exc}") from exc
        if not 0.0 < f <= 1.0:
            raise ValueError(f"--degrade {part.strip()!r}: factor must be in (0, 1], got {f:g}")
        if t1 is not None and t1 <= t0:
            raise ValueError(f"--degrade {part.strip()!r}: the end must come after the start")
        events.append(LinkEvent(origin + t0, switch, f))
        if t1 is not None:
            events.append(LinkEvent(origin + t1, switch, 1.0))
    return tuple(sorted(events))
