"""The daemon service's public surface is declared with __all__ and pinned here."""

from __future__ import annotations

import importlib

import pytest

from tests.support.exports import assert_public_surface

PUBLIC = {
    "railgang.daemon.loop": {"CycleJournal", "CycleOutcome", "run_cycle"},
    "railgang.daemon.service.backends": {"make_backend"},
    "railgang.daemon.sim.live": {"LiveSim", "demo_jobs"},
    "railgang.daemon.service.cli": {"EXIT_NOT_RUNNING", "daemon_app", "explain"},
    "railgang.daemon.service.codec": {"KINDS", "PayloadError", "decode", "encode", "kind_of",
                                      "subject"},
    "railgang.daemon.service.cycle": {"CycleReport", "DaemonService", "RecordingPolicy"},
    "railgang.daemon.service.explain": {"DRIFT", "HELD", "LEFT_TO_SLURM", "STARTING", "START_REFUSED",
                                        "Tracker", "build_rows", "held_back_rows", "placement"},
    "railgang.daemon.service.journal": {"HISTORY_S", "SessionJournal", "open_entries",
                                        "preemption_history", "utc"},
    "railgang.daemon.service.leader": {"PG_KEY", "AdvisoryLock", "FileLock", "LeaderLock",
                                       "lock_for", "probe"},
    "railgang.daemon.service.logs": {"JsonFormatter", "LogFormat", "TextFormatter",
                                     "logging_config", "setup_logging"},
    "railgang.daemon.service.links": {"LinkCollector", "LinkRound", "state_json"},
    "railgang.daemon.service.metrics": {"BUCKETS", "DaemonMetrics", "gpu_state",
                                       "jobs_fitting_free", "leaf_gpus",
                                       "newest_report", "observe_links"},
    "railgang.daemon.service.reconcile": {"OpenEntry", "Settlement", "Verdict", "judge",
                                          "reconcile"},
    "railgang.daemon.service.runner": {"cycle_config", "leader_name", "run_daemon"},
    "railgang.daemon.service.status": {"daemon_status", "explanation", "render", "render_refused"},
    "railgang.db.repositories.journal": {
        "SETTLED", "PlannedRow", "add_planned", "applied_since", "begin_cycle", "counts_by_state",
        "entries_of_cycle", "finish_cycle", "get_leader", "idempotency_key", "last_cycle",
        "open_entries", "prune", "set_leader", "settle"},
    "railgang.db.repositories.explanations": {"ExplanationRow", "drop_gone", "get", "live",
                                              "mark_gone", "upsert", "waiting_reasons",
                                              "with_reasons"},
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_exported_members(module: str) -> None:
    assert_public_surface(module, PUBLIC[module])


def test_the_service_never_reaches_into_the_core_internals() -> None:
    """The service uses the core's public seams (decide via run_cycle, actions, reasons,
    snapshot, policy registry, the CycleConfig knobs' types), never its working state."""
    import pathlib

    root = pathlib.Path(importlib.import_module("railgang.daemon.service").__file__).parent
    for path in root.glob("*.py"):
        text = path.read_text()
        for private in ("core.work", "core.phases", "core.evict"):
            assert private not in text, f"{path.name} imports railgang.daemon.{private}"
