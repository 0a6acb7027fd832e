"""A serving replica declared by an sbatch hint (issue 19): job_submit.lua writes
``serving=NAME`` into the tag for class 0 only, and the daemon's parser reads it back into the
core's request."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.daemon.slurm.cli.parse import ParseProblem, parse_tag
from tests.slurm_plugins.lua_harness import run_harness

# one --comment per stdin line -> "OK\t<admin_comment>" or "ERR\t<message>"; class 0 is open
BODY = """
    local job = {account = "team-a", user_name = "root", comment = line,
                 time_limit = slurm.NO_VAL, min_nodes = 1, tres_per_node = "gres:gpu:8"}
    if slurm_job_submit(job, nil, 0) == slurm.SUCCESS then
        print("OK\\t" .. (job.admin_comment or ""))
    else
        print("ERR\\t" .. (last or ""))
    end
"""


def submit(tmp_path: Path, comments: list[str]) -> list[str]:
    grants = tmp_path / "grants.txt"
    grants.write_text("open 0\n")
    return run_harness(tmp_path, BODY, comments, {"RAILGANG_GRANTS_FILE": str(grants)})


def test_a_replica_hint_reaches_the_core(tmp_path: Path) -> None:
    got = submit(tmp_path, ["rg:class=0;parallel=tp8,pp1,dp1;serving=chat-7b"])
    assert got[0].startswith("OK\t"), got
    tag = parse_tag(got[0].split("\t", 1)[1])
    assert tag is not None and tag.serving == "chat-7b" and tag.priority_class == 0
    assert parse_tag(tag.render()) == tag


@pytest.mark.parametrize("comment", [
    "rg:class=3;serving=chat",  # only serving work is a replica
    "rg:class=0;serving=",  # no name
    "rg:class=0;serving=a b",  # not a name
    "rg:class=0;serving=" + "x" * 65,  # too long
], ids=["class3", "empty", "space", "long"])
def test_a_bad_replica_hint_is_refused_with_one_line(tmp_path: Path, comment: str) -> None:
    got = submit(tmp_path, [comment])
    assert got[0].startswith("ERR\t") and "serving=NAME" in got[0], got


@pytest.mark.parametrize("comment", ["railgang:class=0;serving=", "railgang:class=0;serving=../x",
                                     "railgang:class=0;serving=" + "y" * 80])
def test_the_parser_refuses_a_bad_deployment_name(comment: str) -> None:
    with pytest.raises(ParseProblem, match="serving"):
        parse_tag(comment)
