"""The CLI backend's public surface (the daemon service builds on it) is pinned here."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

PUBLIC = {
    "railgang.daemon.slurm.cli": {"CliBackend", "CommandResult", "SlurmRunner", "read_heartbeat",
                                  "write_heartbeat"},
    "railgang.daemon.backend": {"ActionResult", "Backend", "BackgroundLeaseBackend",
                                "ExpiringLeaseBackend", "FollowUp",
                                "FollowUpBackend", "HeldBack", "HoldingBackend", "LeaseBackend"},
    "railgang.daemon.slurm.cli.backend": {"SSHARE_ARGV", "CliBackend"},
    "railgang.daemon.slurm.cli.lease": {"heartbeat_line", "read_heartbeat", "write_heartbeat"},
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_exported_members(module: str) -> None:
    mod = importlib.import_module(module)
    assert set(mod.__all__) == PUBLIC[module]
    for name in mod.__all__:
        assert hasattr(mod, name)


def test_backend_signatures() -> None:
    from railgang.daemon.backend import BackgroundLeaseBackend, ExpiringLeaseBackend, LeaseBackend
    from railgang.daemon.slurm.cli import CliBackend

    assert list(inspect.signature(CliBackend).parameters) == ["settings", "runner", "read_shares",
                                                                "grants_file", "failures",
                                                                "speed_file"]
    for method in ("snapshot", "observe", "facts", "apply", "renew_leases", "renew_leases_later",
                   "close"):
        assert callable(getattr(CliBackend, method))
    assert issubclass(CliBackend, LeaseBackend) and issubclass(CliBackend, ExpiringLeaseBackend)
    assert issubclass(CliBackend, BackgroundLeaseBackend)  # renewals off the cycle's path
    from railgang.daemon.backend import HoldingBackend

    assert issubclass(CliBackend, HoldingBackend)  # refused Starts sit out (backoff.py)


def test_heartbeat_round_trip(tmp_path: Path) -> None:
    from railgang.daemon.slurm.cli import read_heartbeat, write_heartbeat

    path = tmp_path / "run" / "hb"
    write_heartbeat(path, 1796057400.7, 90)
    assert path.read_text() == "1796057400 90\n" and read_heartbeat(path) == (1796057400, 90)
    assert read_heartbeat(tmp_path / "missing") is None
    path.write_text("garbage\n")
    assert read_heartbeat(path) is None


def test_heartbeat_reader_is_bounded(tmp_path: Path) -> None:
    """A FIFO or a huge file at the heartbeat path reads as 'no heartbeat', never a hang."""
    import os

    from railgang.daemon.slurm.cli import read_heartbeat

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_heartbeat(fifo) is None
    assert read_heartbeat(Path("/dev/zero")) is None
    big = tmp_path / "big"
    big.write_text("1796057400 90 " + "x" * 10_000)
    assert read_heartbeat(big) is None
