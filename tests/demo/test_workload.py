"""The demo workload is reproducible, covers what the demo must show, and every line is a job the
railgang job_submit.lua accepts (checked against the real cluster in the slurm-marked test)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.demo.workload import make_workload, submit


def test_same_seed_same_workload() -> None:
    assert make_workload(30, 1) == make_workload(30, 1)
    assert make_workload(30, 1) != make_workload(30, 2)


def test_mix_covers_sizes_shapes_elastic_and_classes() -> None:
    jobs = make_workload(30, 1)
    assert len(jobs) == 30
    assert min(j.gpus for j in jobs) == 1 and max(j.gpus for j in jobs) == 32
    assert {j.priority_class for j in jobs} == {0, 1, 2, 3}
    assert sum(j.priority_class == 0 for j in jobs) == 1
    assert any(j.elastic for j in jobs)
    assert any(j.pp > 1 for j in jobs) and any(j.nodes > 1 for j in jobs)


@pytest.mark.parametrize("seed", range(20))
def test_every_job_is_consistent(seed: int) -> None:
    for j in make_workload(30, seed):
        assert j.tp * j.pp * j.dp == j.gpus  # what job_submit.lua checks
        assert j.gpus_per_node <= 8
        if j.elastic:
            lo, hi = j.elastic
            assert 1 <= lo <= hi == j.dp


def test_submit_passes_hints_and_returns_ids() -> None:
    seen: list[list[str]] = []

    def sbatch(argv: Sequence[str]) -> str:
        seen.append(list(argv))
        return f"{100 + len(seen)};railgang\n"

    out = submit(make_workload(3, 1), out_dir="/tmp/x", python="/py", runner=sbatch)
    assert [jid for _, jid in out] == ["101", "102", "103"]
    assert all("--rg-parallel=" in " ".join(a) for a in seen)
    assert seen[0][-1].startswith("--wrap=exec /py -m railgang.demo.train_example")


def test_batch_wave_first_then_guaranteed_work_after_the_gap() -> None:
    jobs = make_workload(30, 1)
    classes = [j.priority_class for j in jobs]
    first_guaranteed = next(i for i, c in enumerate(classes) if c != 3)
    assert all(c == 3 for c in classes[:first_guaranteed])
    assert all(c != 3 for c in classes[first_guaranteed:])
    assert sum(j.gpus for j in jobs[:first_guaranteed]) > 128  # more than fills the demo cluster
    slept: list[float] = []
    submit(jobs, out_dir="/tmp/x", runner=lambda argv: "1\n", wave_gap_s=20, sleep=slept.append)
    assert slept == [20]


def test_cli_dry_run_prints_sbatch_lines() -> None:
    res = CliRunner().invoke(app, ["demo", "--jobs", "4", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert res.output.count("sbatch --parsable") == 4
