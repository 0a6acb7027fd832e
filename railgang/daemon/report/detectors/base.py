"""What every detector returns: an :class:`Anomaly`, plain data the report shows as a row."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Anomaly:
    kind: str  # one of detectors.KINDS
    subject: str  # a job id, a team, a pool or "fleet"
    team: str | None  # whose it is (team-scoped readers see only their teams' anomalies)
    at: float | None  # epoch seconds where it starts (None: the whole day)
    value: float  # the measured number the threshold was applied to
    threshold: float
    detail: str  # one sentence: what was seen
    suggestion: str = ""  # what to do about it
    unit: str = ""  # of value and threshold (the report fills it in per kind)
    cost: float | None = None  # what is at stake, in the rates' currency (None: not priced)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["Anomaly"]
