"""The public surface of the foundation modules is declared with __all__ and pinned here."""

from __future__ import annotations

import pytest

from tests.support.exports import assert_public_surface

PUBLIC = {
    "railgang.errors": {"ConfigError", "DaemonError", "DatabaseError", "DevClusterError",
                               "ExitCode", "InputError", "NotLeaderError", "RailgangError", "SlurmCommandError", "SlurmError", "SlurmSchemaError",
                               "UnknownJobError", "AuthenticationError", "ConflictError",
                               "DomainError", "NotFoundError", "PermissionDeniedError",
                               "ValidationFailed"},
    "railgang.daemon.config": {"Settings", "load_settings", "mask_url", "masked_dump",
                               "render_toml"},
    "railgang.daemon.inputs": {"QUOTAS_MAX_BYTES", "SACCT_MAX_BYTES", "TELEMETRY_MAX_BYTES",
                               "input_error", "read_input", "read_json_text", "read_toml"},
    "railgang.db.session": {"check_connection", "make_engine", "session_scope", "unit_of_work"},
    "railgang.db.migrate": {"current", "engine_at_head", "head", "require_head", "upgrade"},
    "railgang.db.models": {"JOURNAL_STATES", "Account", "DaemonCycle", "DaemonLeader", "Job",
                           "JobExplanation", "JournalEntry", "UsageRecord"},
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_exported_members(module: str) -> None:
    assert_public_surface(module, PUBLIC[module])


def test_errors_render_location() -> None:
    from railgang.errors import InputError

    err = InputError("unknown switch 'leaf9'", path="topology.conf", line=12, field="Switches")
    assert str(err) == "topology.conf:12: Switches: unknown switch 'leaf9'"
    assert str(InputError("bad", line=3)) == "line 3: bad"
