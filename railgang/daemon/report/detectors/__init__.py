"""Anomaly detectors (DESIGN R-Q3, R-Q7): pure functions over stored telemetry and ledger data,
one file per idea, each returning :class:`Anomaly` rows. Thresholds: ``report.config``."""

from railgang.daemon.report.detectors.base import Anomaly
from railgang.daemon.report.detectors.comm_bound import comm_ratio, detect_comm_bound
from railgang.daemon.report.detectors.fleet_drop import bin_series, fleet_drops
from railgang.daemon.report.detectors.idle_reservation import idle_reservations
from railgang.daemon.report.detectors.overspec import detect_overspec, suggest_gpu_type
from railgang.daemon.report.detectors.queue_growth import queue_growth
from railgang.daemon.report.detectors.starvation import detect_starvation, starvation
from railgang.daemon.report.detectors.team_surge import team_surges
from railgang.daemon.report.detectors.zombie import detect_zombie, zombie_episodes

KINDS = ("team_surge", "queue_growth", "fleet_util_drop", "fleet_power_drop", "zombie",
         "data_starvation", "communication_bound", "over_specified", "idle_reservation")

__all__ = ["KINDS", "Anomaly", "bin_series", "comm_ratio", "detect_comm_bound",
           "detect_overspec", "detect_starvation", "detect_zombie", "fleet_drops",
           "idle_reservations", "queue_growth", "starvation", "suggest_gpu_type", "team_surges",
           "zombie_episodes"]
