"""Anomalies an operator acts on (issue 36 item 6): suggestions only among the GPU types the
fleet has, idle-reservation rows that say which hours they judged, and findings grouped and
ranked with a count instead of hundreds of rows."""

from __future__ import annotations

from railgang.daemon.report.anomalies import grouped
from railgang.daemon.report.config import DEFAULT_GPU_MEMORY_GIB, DetectorThresholds
from railgang.daemon.report.detectors import Anomaly, detect_overspec, idle_reservations

TH = DetectorThresholds()
H = 3600.0


def test_over_specified_suggests_only_types_the_fleet_has() -> None:
    """On an all-H100 fleet it said "request t4" (and v100, a10)."""
    anywhere = detect_overspec("j", "a", 0, "h100", 10 * 1024, DEFAULT_GPU_MEMORY_GIB, TH)
    assert anywhere is not None and anywhere.suggestion.startswith("request t4")
    assert detect_overspec("j", "a", 0, "h100", 10 * 1024, DEFAULT_GPU_MEMORY_GIB, TH,
                           fleet={"H100"}) is None  # nothing smaller to move to: no finding
    mixed = detect_overspec("j", "a", 0, "h100", 10 * 1024, DEFAULT_GPU_MEMORY_GIB, TH,
                            fleet={"h100", "L40S"})
    assert mixed is not None and mixed.suggestion.startswith("request l40s")


def test_idle_reservation_states_the_hours_it_judged() -> None:
    """It said "over the last 72 h" whatever the report's range."""
    until = 1_764_547_200.0  # 2025-12-01 00:00 UTC
    [row] = idle_reservations({"c": 8}, {}, 72 * H, TH, until=until)
    assert row.detail == ("used 0% of its 8-GPU guarantee from 2025-11-28 00:00 to 2025-12-01 "
                          "00:00 UTC (72 h)")
    assert row.at == until - 72 * H


def _a(kind: str, subject: str, team: str | None, cost: float | None, at: float = 0.0,
       value: float = 1.0) -> Anomaly:
    return Anomaly(kind, subject, team, at, value, 0.5, f"{kind} {subject}", "do x", "u", cost)


def test_findings_are_grouped_ranked_and_counted() -> None:
    found = ([_a("zombie", f"j{i}", "team-a", 10.0, at=i) for i in range(300)]
             + [_a("zombie", f"k{i}", "team-b", 50.0) for i in range(100)]
             + [_a("fleet_util_drop", "fleet", None, None, at=t) for t in (5.0, 1.0, 9.0)]
             + [_a("over_specified", "big", "team-a", 9000.0)])
    groups = grouped(found)
    assert [(g.kind, g.team, g.count, g.cost) for g in groups] == [
        ("over_specified", "team-a", 1, 9000.0), ("zombie", "team-b", 100, 5000.0),
        ("zombie", "team-a", 300, 3000.0), ("fleet_util_drop", None, 3, None)]
    z = groups[2]
    assert z.subjects[:2] == ["j0", "j1"] and len(z.subjects) == 300
    assert (z.first_at, z.last_at) == (0.0, 299.0) and z.detail == "zombie j0"
    assert groups[3].first_at == 1.0
