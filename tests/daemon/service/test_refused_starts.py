"""The daemon's view of Starts Slurm refuses (issue 38 row 2): ``railgang explain JOB`` shows
Slurm's one line while the job sits out, and once it is left to Slurm; ``railgang daemon status``
lists such jobs. The CLI backend runs against the scripted 22.05 of test_start_backoff.py."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from railgang.daemon.clock import SimClock
from railgang.daemon.config import load_settings
from railgang.daemon.service.status import daemon_status, explanation, render, render_refused
from tests.daemon.service.conftest import service
from tests.daemon.slurm.cli.capture import NOW
from tests.daemon.slurm.cli.test_start_backoff import BAD, GANG, GRES_REFUSAL, FakeSlurm, backend


def test_explain_and_status_show_slurms_refusal(engine: Engine, tmp_path: Path) -> None:
    fake = FakeSlurm([BAD, GANG], bad={"66"})
    clock = SimClock(NOW)
    svc = service(engine, backend(fake, tmp_path, start_refusals_max=2), clock)
    settings = load_settings(db={"url": engine.url.render_as_string(hide_password=False)})
    svc.run_once()  # 66 planned and refused
    clock.advance(10)
    svc.run_once()  # 66 sits out; the gang is planned
    e = explanation(settings, "66")
    assert e["state"] == "waiting" and e["reason"] == "start_refused"
    assert e["start_refused"] == f"{GRES_REFUSAL} (job 66)" and e["refusals"] == 1
    text = render(e)
    assert f"Slurm refused its start: {GRES_REFUSAL} (job 66)" in text
    assert "sits out 1 cycle(s)" in text
    assert explanation(settings, "67")["state"] == "running"  # started by the second cycle

    clock.advance(10)
    svc.run_once()  # refused again: the second refusal is the last (start_refusals_max=2)
    clock.advance(10)
    svc.run_once()
    e = explanation(settings, "66")
    assert e["reason"] == "left_to_slurm" and e["refusals"] == 2
    assert "lease was released" in render(e)
    st = daemon_status(settings)
    assert st["refused_starts"]["jobs"] == 1
    assert st["refused_starts"]["latest"] == [{"job_id": "66", "left_to_slurm": True,
                                               "refusals": 2,
                                               "slurm": f"{GRES_REFUSAL} (job 66)"}]
    lines = render_refused(st["refused_starts"])
    assert lines[0].startswith("refused starts: 1 job(s)") and "left to Slurm" in lines[1]


def test_a_job_back_in_the_queue_keeps_slurms_line_in_explain() -> None:
    """After its sit-out the job is in the core's queue again and gets the core's reason (the
    cluster may be full by then); its row still says what Slurm answered last time."""
    import json

    from railgang.daemon.backend import HeldBack
    from railgang.daemon.loop import CycleOutcome
    from railgang.daemon.service.explain import build_rows
    from tests.daemon.slurm.cli.capture import observation

    snap = observation().snapshot
    back = HeldBack(job_id="12", account="team-a", priority_class=3, gpus=6, needed=2,
                    refusals=3, reason=f"{GRES_REFUSAL} (job 12)", sits_out=4,
                    left_to_slurm=False, held=False)
    outcome = CycleOutcome(now=NOW, actions=(), reasons=(), results=(), snapshot=snap)
    rows = {r.job_id: r for r in build_rows(outcome, None, "fifo", refused={"12": back})}
    data = json.loads(rows["12"].data)
    assert data["start_refused"] == f"{GRES_REFUSAL} (job 12)" and data["refusals"] == 3
    assert "start_refused" not in json.loads(rows["11"].data)
