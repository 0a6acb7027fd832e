"""Measured speed on the real Slurm cluster (issue 33 item 2): two runs of one model report
their samples/s through the training helper at 1 and 2 replicas (Slurm's allocations), the
daemon fits the model's curve (flat: the model does not scale), and ``pollux`` sizes the next
elastic job of that model from it: it starts on one node while an elastic job of an unmeasured
model, submitted with it, gets the spare nodes (on straight lines they would have shared them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import EXAMPLE, Cluster, Daemon, wait_for
from tests.e2e.test_daemon_e2e import Start, running_on

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
# one global batch per step, all of it serial: the same samples/s on any number of replicas
FLAT = ("--steps", "100000", "--step-s", "0.2", "--serial-share", "1.0", "--report-every-s", "1",
        "--resize-check-every", "100000")
ELASTIC = ("-N1", "--gres=gpu:8", "--rg-parallel=tp8", "--rg-elastic=1:3", "--rg-class=3", "--hold")


def model_prior(d: Daemon, model: str) -> dict[str, object] | None:
    path = Path(d.db).parent / "speed.json"  # daemon.speed_file under the daemon's home
    if not path.exists():
        return None
    models = json.loads(path.read_text()).get("models", {})
    return next((m for key, m in models.items() if key.endswith(f"/{model}")), None)


def test_pollux_sizes_an_elastic_job_from_its_models_measured_speed(slurm: Cluster,
                                                                     daemon: Start) -> None:
    d = daemon(daemon__policy="pollux")
    filler = slurm.sbatch("-N12", "--gres=gpu:8", args=("300",))  # plain Slurm
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    last = slurm.sbatch("-N1", "--gres=gpu:8", args=("300",))  # plain: 3 nodes stay free
    wait_for(lambda: running_on(slurm, last), 30, "the second filler to run")
    one = slurm.sbatch("-N1", "--gres=gpu:8", "--job-name=flatmodel", "--rg-parallel=tp8",
                       "--rg-class=3", script=EXAMPLE, args=FLAT)
    two = slurm.sbatch("-N2", "--gres=gpu:8", "--job-name=flatmodel", "--rg-parallel=tp8,dp2",
                       "--rg-class=3", script=EXAMPLE, args=FLAT)
    wait_for(lambda: running_on(slurm, one) and running_on(slurm, two), 30, "both runs to start")

    def measured() -> bool:
        prior = model_prior(d, "flatmodel")
        return prior is not None and set(prior["rates"]) == {"1", "2"}  # type: ignore[call-overload]
    wait_for(measured, 40, "the model's rates at 1 and 2 replicas")
    rates = model_prior(d, "flatmodel")["rates"]  # type: ignore[index]
    assert rates["1"][0] == rates["2"][0] == pytest.approx(160.0)  # 32 samples / 0.2 s

    # both elastic jobs wait (held) while the cluster is full; then 4 nodes free at once
    flat = slurm.sbatch(*ELASTIC, "--job-name=flatmodel", args=("60",))
    fresh = slurm.sbatch(*ELASTIC, "--job-name=freshmodel", args=("60",))
    slurm.sl("scancel", one, two, last)
    wait_for(lambda: not slurm.sl("squeue", "-h", "-j", f"{one},{two},{last}",
                                  check=False).stdout.strip(), 30, "the three runs to leave")
    slurm.sl("scontrol", "release", f"{flat},{fresh}")
    wait_for(lambda: running_on(slurm, flat) and running_on(slurm, fresh), 30,
             "both elastic jobs to start")
    assert len(running_on(slurm, flat)) == 1  # measured flat: more nodes would not speed it up
    assert len(running_on(slurm, fresh)) == 3  # unmeasured (a straight line): gets the rest
    wait_for(lambda: (d.explain(flat).get("speed") or {}).get("source") == "model prior", 20,
             "explain to show the model prior")
    speed = d.explain(flat)["speed"]
    assert speed["serial"] == 1.0 and [1, 1.0] in speed["speedup"], speed  # type: ignore[index]
    slurm.sl("scancel", flat, fresh, filler)
