"""The API and explain show serving (issue 19): GET /v1/serving after a daemon cycle with the
serving step, and a borrower's explanation saying until when it keeps the lent nodes."""

from __future__ import annotations

from pathlib import Path

from railgang.daemon.clock import SimClock
from railgang.daemon.config import load_settings
from railgang.daemon.service.status import render
from railgang.daemon.serving.config import ServingSettings
from railgang.daemon.serving.live import LiveServing
from tests.daemon.api.conftest import Api
from tests.daemon.core.core_builders import job
from tests.daemon.service.conftest import service
from tests.daemon.serving.test_controller import RAMP, Cluster, demand_csv, on_nodes


def test_deployments_and_a_borrowers_take_back_time(api: Api, tmp_path: Path) -> None:
    status = tmp_path / "serving.json"
    live = LiveServing(ServingSettings(enabled=True, demand_file=demand_csv(tmp_path),
                                       pools={"chat": "n[002-003]"}, status_file=status), 0.0)
    replica = job("r0").gpus(8).tp(8).cls(0).with_(serving="chat").build()
    borrower = job("el").gpus(32).tp(8).elastic(1, 4).cls(3).build()
    cluster = Cluster([replica, borrower])
    svc = service(api.engine, cluster, SimClock(0.0), placer=on_nodes, serving=live)
    svc.run_once()  # el starts on all four nodes, two of them lent
    svc.clock.advance(60.0)  # type: ignore[attr-defined]
    svc.run_once()  # observed running: its row says what it borrows
    api.client.app.state.settings = load_settings(  # type: ignore[attr-defined]
        db={"url": "sqlite://"}, serving={"status_file": str(status)})
    got = api.client.get("/v1/serving", headers=api.admin)
    assert got.status_code == 200, got.text
    (dep,) = got.json()["deployments"]
    back = RAMP - 600 - 300  # a switch-in and the margin before the ramp
    assert (dep["deployment"], dep["target"], dep["running"], dep["queued"]) == ("chat", 0, 0, 1)
    assert dep["lent"] == {"n002": back, "n003": back}
    row = api.client.get("/v1/jobs/el", headers=api.admin).json()
    assert row["data"]["serving_lent"] == {"n002": back, "n003": back}
    held = api.client.get("/v1/jobs/r0", headers=api.admin).json()  # the core never saw it
    assert (held["state"], held["reason"]) == ("waiting", "serving_not_needed")
    assert held["detail"] == ("deployment chat: the forecast holds 0 replica(s) now, 0 running; "
                              "the forecast wants more from 1970-01-01 00:45:00 UTC")
    text = render({**row, **row["data"], "cycle": 2, "age_s": 0.0})
    assert "lent to batch work (n[002-003]); expected to keep it until 1970-01-01 00:45:00 UTC" in text


def test_serving_off_is_a_404_and_a_foreign_file_too(api: Api, tmp_path: Path) -> None:
    status = tmp_path / "serving.json"
    api.client.app.state.settings = load_settings(  # type: ignore[attr-defined]
        db={"url": "sqlite://"}, serving={"status_file": str(status)})
    assert api.client.get("/v1/serving", headers=api.admin).status_code == 404
    status.write_bytes(b"\x00\xff" * 10)
    got = api.client.get("/v1/serving", headers=api.admin)
    assert got.status_code == 404 and "unreadable" in got.text


def test_a_deep_or_nan_status_file_is_a_clean_404_not_a_500(api: Api, tmp_path: Path) -> None:
    """Issue 38 row 8: 100,000 nested ``[`` was a RecursionError and a 500."""
    status = tmp_path / "serving.json"
    api.client.app.state.settings = load_settings(  # type: ignore[attr-defined]
        db={"url": "sqlite://"}, serving={"status_file": str(status)})
    for body, why in ((b"[" * 100_000 + b"]" * 100_000, "nested too deep"),
                      (b'{"deployments": [], "as_of": NaN}', "NaN is not a number")):
        status.write_bytes(body)
        got = api.client.get("/v1/serving", headers=api.admin)
        assert got.status_code == 404 and why in got.text, got.text
        assert str(status) in got.text
