"""--segment from the parallel shape (issue 21 item 2): job_submit.lua sets ``segment_size`` on
Slurm 26.05+ (the field its job_submit/lua exposes) from ``--rg-parallel`` when
RAILGANG_SEGMENT_BASE names the topology's base block, with the same rule as
``benchmarks.baselines.slurm_block.segment_size`` (the transcription of what Slurm accepts). The real
26.05 block cluster is tests/slurm_versions/test_segment_2605.py."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from benchmarks.baselines.slurm_block import segment_size
from tests.slurm_plugins.lua_harness import run_harness

# stdin lines "TP PP DP NODES GPUS_PER_NODE SEGMENT_FIELD" (SEGMENT_FIELD "nil": the field does
# not exist, as before 26.05) -> "OK <segment_size or nil>" or "ERR <message>"
BODY = """
    local tp, pp, dp, nodes, gpn, field = string.match(line, "^(%d+) (%d+) (%d+) (%d+) (%d+) (%w+)$")
    local job = {account = "team-a", user_name = "root", time_limit = slurm.NO_VAL,
                 comment = "rg:parallel=tp" .. tp .. ",pp" .. pp .. ",dp" .. dp,
                 min_nodes = tonumber(nodes), tres_per_node = "gres/gpu:" .. gpn,
                 segment_size = tonumber(field)}
    if slurm_job_submit(job, nil, 0) == slurm.SUCCESS then
        print("OK " .. tostring(job.segment_size))
    else
        print("ERR " .. (last or ""))
    end
"""


def run(tmp_path: Path, lines: list[str], base: str | None) -> list[str]:
    return run_harness(tmp_path, BODY, lines, {} if base is None else {"RAILGANG_SEGMENT_BASE": base})


def _cases() -> list[tuple[int, int, int, int, int]]:
    """Every (tp, pp, dp, nodes, GPUs per node) whose shape matches the GPUs asked for."""
    out = []
    for tp, pp, nodes, gpn in itertools.product((1, 2, 3, 4, 8, 16), (1, 2, 3, 4, 6), range(1, 25), (1, 2, 4, 8)):
        total = nodes * gpn
        if total % (tp * pp) == 0:
            out.append((tp, pp, total // (tp * pp), nodes, gpn))
    return out


@pytest.mark.parametrize("base", [1, 2, 4, 9, 18])
def test_lua_and_the_daemon_give_the_same_segment(tmp_path: Path, base: int) -> None:
    cases = _cases()
    got = run(tmp_path, [f"{tp} {pp} {dp} {nodes} {gpn} 0" for tp, pp, dp, nodes, gpn in cases], str(base))
    assert len(got) == len(cases)
    set_somewhere = 0
    for (tp, pp, _, nodes, gpn), line in zip(cases, got, strict=True):
        want = segment_size(nodes, tp, pp, gpn, base)
        assert line == f"OK {want}", (tp, pp, nodes, gpn, base, line)
        set_somewhere += want > 0
    assert set_somewhere > 20  # the grid reaches the cases that get a segment


def test_a_replica_of_two_nodes_in_blocks_of_four() -> None:
    # the 26.05 scenario's job: tp4,pp2 on 4-GPU nodes is 2 nodes a replica, 4 nodes in all
    assert segment_size(4, 4, 2, 4, 4) == 2


def test_no_base_no_field_or_own_segment_leaves_it_alone(tmp_path: Path) -> None:
    job = "4 2 2 4 4"
    assert run(tmp_path, [f"{job} 0"], None) == ["OK 0"]  # not a block cluster
    assert run(tmp_path, [f"{job} nil"], "4") == ["OK nil"]  # Slurm before 26.05
    assert run(tmp_path, [f"{job} 3"], "4") == ["OK 3"]  # the user's own --segment
    assert run(tmp_path, [f"{job} 65534"], "4") == ["OK 2"]  # NO_VAL16: not set


@pytest.mark.parametrize("base", ["", "x", "-4", "0", "4.5", "1e9", "65536", "\u00e9", " 4 x"])
def test_a_garbled_base_sets_no_segment(tmp_path: Path, base: str) -> None:
    assert run(tmp_path, ["4 2 2 4 4 0"], base) == ["OK 0"]
