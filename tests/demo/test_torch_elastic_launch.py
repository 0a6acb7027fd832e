"""The step railgang.demo.torch_elastic's batch script starts at each size (issue 39): torchrun's
command line is the one docs/training.md shows, and Debian 12's torch 1.13 gets srun + env://.
No torch and no Slurm needed: only the command lines are built."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from railgang.demo import torch_elastic
from railgang.training import Rendezvous, TrainingContext


def ctx(elastic: str = "1:2") -> TrainingContext:
    return TrainingContext({"SLURM_JOB_ID": "4242", "SLURM_SPANK_RAILGANG_ELASTIC": elastic})


def test_torchrun_step_meets_at_the_jobs_rendezvous_and_outlives_the_notice() -> None:
    argv = torch_elastic._ranks_argv("torchrun", ctx(), Rendezvous("127.0.0.1", 29642, "4242"),
                                     ["n1", "n2"])
    assert argv[:5] == ["srun", "-N2", "--nodelist=n1,n2", "--ntasks-per-node=1",
                        "--kill-on-bad-exit=1"]
    # the agent ignores SIGUSR1 (scancel --full would end it), then is exec'd
    assert argv[5:8] == ["bash", "-c", 'trap "" USR1; exec "$@"']
    assert argv[9:13] == [sys.executable, "-m", "railgang.demo.torch_elastic", "torchrun"]
    for flag in ("--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:29642", "--rdzv-id=4242",
                 "--nnodes=1:2", "--nproc-per-node=1", "--local-addr=127.0.0.1"):
        assert flag in argv, flag
    rank = argv.index("--nnodes=1:2") + 1
    assert argv[rank:rank + 3] == ["-m", "railgang.demo.torch_elastic", "train"]


def test_torchrun_step_after_a_shrink_waits_for_no_node_the_job_lost() -> None:
    argv = torch_elastic._ranks_argv("torchrun", ctx("1:4"), Rendezvous("n1", 29642, "4242"),
                                     ["n1"])
    assert "--nnodes=1:1" in argv and not any(a.startswith("--local-addr") for a in argv)


def test_srun_step_starts_the_ranks_themselves() -> None:
    argv = torch_elastic._ranks_argv("srun", ctx(), Rendezvous("127.0.0.1", 29642, "4242"),
                                     ["n1", "n2"])
    assert argv[5:9] == [sys.executable, "-m", "railgang.demo.torch_elastic", "train"]
    assert not any("rdzv" in a for a in argv)


@pytest.mark.parametrize(("version", "expected"), [("1.13.0a0+gitunknown", "srun"),
                                                   ("2.6.0+debian", "torchrun")])
def test_auto_picks_torchrun_from_torch_2(monkeypatch: pytest.MonkeyPatch, version: str,
                                          expected: str) -> None:
    monkeypatch.setattr(importlib.metadata, "version", lambda _name: version)
    assert torch_elastic._launcher("auto") == expected
    assert torch_elastic._launcher("srun") == "srun"
