"""benchmarks/sim/failures_54d.py runs end to end on a small fleet (the 54-day replay at full scale
takes minutes: BENCHMARKS.md), and the big job's effective training time is a share in (0, 1]."""

from __future__ import annotations

import json
from pathlib import Path


def test_small_fleet(tmp_path: Path) -> None:
    from benchmarks.sim import failures_54d as module

    out = tmp_path / "r.json"
    assert module.main(["--nodes", "64", "--leaf", "8", "--big-gpus", "448", "--days", "2",
                        "--failures", "llama3,scale=20", "--scenarios", "naive,railgang,railgang-spares",
                        "--time-limits", "--spares-min-gpus", "256", "--json", str(out)]) == 0
    rows = {r["scenario"]: r for r in json.loads(out.read_text())["rows"]}
    for row in rows.values():
        assert 0 < row["effective_training"] <= 1 and row["big_failures"] > 0
    assert rows["railgang"]["checkpoint_interval_s"] < rows["naive"]["checkpoint_interval_s"]
