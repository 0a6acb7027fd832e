"""``railgang explain`` on a running job shows its checkpoint advice (issue 20) when the row has
it, and nothing (no error) when the stored value is missing or not advice."""

from __future__ import annotations

from typing import Any

import pytest

from railgang.daemon.failures.young_daly import advise
from railgang.daemon.service.status import render


def _row(**extra: Any) -> dict[str, Any]:
    return {"job_id": "7", "account": "a", "priority_class": 1, "gpus": 16, "cycle": 3,
            "age_s": 2.0, "state": "running", "nodes": "n[1-2]",
            "gpus_per_node": {"n1": [0, 1, 2, 3, 4, 5, 6, 7], "n2": [0, 1, 2, 3, 4, 5, 6, 7]},
            "leaves": ["s1"], "rail_aligned": True, "replicas": 2, "policy": "default",
            "how": "started", **extra}


def test_running_job_shows_checkpoint_advice() -> None:
    advice = advise(3 * 3600.0, 10.0, 120.0, current_interval_s=1800.0)
    text = render(_row(checkpoint=advice.as_dict()))
    assert "checkpoint every 8 min (Young-Daly" in text and "now every 30 min" in text


@pytest.mark.parametrize("stored", [None, "junk", {"waste": "x"}, [1, 2]],
                         ids=["absent", "str", "bad-waste", "list"])
def test_no_or_bad_advice_renders_the_rest(stored: object) -> None:
    text = render(_row(checkpoint=stored))
    assert "running on n[1-2]" in text and "Young-Daly" not in text


def test_explanation_rows_carry_advice_for_the_jobs_nodes() -> None:
    from railgang.daemon.core import Job, JobRequest
    from railgang.daemon.failures.rates import LLAMA3
    from railgang.daemon.failures.young_daly import young_daly_s
    from railgang.daemon.service.explain import checkpoint_advice
    from railgang.topology.fabric import fabric_from_shape

    fabric = fabric_from_shape(8, 8, 4)
    job = Job(JobRequest("7", 16, checkpoint_cost_s=10.0, checkpoint_interval_s=1800.0))
    assignment = {"n01": tuple(range(8)), "n02": tuple(range(8))}
    advice = checkpoint_advice(job, assignment, fabric, ["s1"])
    assert advice is not None
    assert advice["interval_s"] == pytest.approx(young_daly_s(10.0, LLAMA3.mtbf_s(2, 8, 1)), abs=1e-3)
    assert advice["current_interval_s"] == 1800.0
    half = checkpoint_advice(job, {"n01": (0, 1, 2, 3)}, fabric, ["s1"])  # rate counts all 8 GPUs
    assert half is not None and half["mtbf_s"] == pytest.approx(LLAMA3.mtbf_s(1, 8, 1), abs=1e-3)
    assert checkpoint_advice(job, {}, fabric, []) is None
