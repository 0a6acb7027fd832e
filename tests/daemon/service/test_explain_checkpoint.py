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
