"""Hostile Slurm output (issue 18 row 3, docs/security.md "Slurm output").

22.05 copies a job's name and Comment into ``squeue --json`` without checking UTF-8; odd records
(``"jobs": [1]``, ``Infinity`` in ``node_count``/``priority``) and deep nesting must cost one
record with a warning naming the job, never the observation. Property tests feed arbitrary
bytes and arbitrary JSON neighbours to the readers.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli.backend import CliBackend
from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import (
    load_json,
    parse_sinfo,
    parse_squeue,
    parse_sshare,
)
from railgang.daemon.slurm.cli.runner import SlurmRunner, decode, subprocess_exec
from railgang.errors import SlurmCommandError
from tests.daemon.slurm.cli.capture import DATA, NOW

SQUEUE = json.loads((DATA / "squeue_mixed.json").read_text())
PENDING = next(j for j in SQUEUE["jobs"] if j["job_id"] == 11)  # a leased railgang job
RUNNING = next(j for j in SQUEUE["jobs"] if j["job_id"] == 9)  # railgang, n[01-02]


def squeue_text(*jobs: Any) -> str:
    return json.dumps({**SQUEUE, "jobs": list(jobs)})


def with_(base: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**base, **fields}


BAD_JOBS = {
    "int": 1,
    "list": [1],
    "null": None,
    "node-count-infinity": with_(PENDING, job_id=66, node_count=math.inf),
    "node-count-nan": with_(PENDING, job_id=66, node_count=math.nan),
    "priority-infinity": with_(PENDING, job_id=66, priority=-math.inf),
    "priority-huge": with_(PENDING, job_id=66, priority=1e308 * 10),
    "submit-text": with_(PENDING, job_id=66, submit_time="yesterday"),
    "limit-object": with_(PENDING, job_id=66, time_limit={"set": True, "number": math.inf}),
    "state-list": with_(PENDING, job_id=66, job_state=["PENDING"]),
    "resources-list": with_(RUNNING, job_id=66, job_resources=[1]),
    "gres-detail-number": with_(RUNNING, job_id=66, gres_detail=7),
    "exit-code-weird": with_(PENDING, job_id=66, exit_code={"signal": [1]}),
    "deep-comment": with_(PENDING, job_id=66, comment=json.loads("[" * 500 + "]" * 500)),
}


@pytest.mark.parametrize("bad", list(BAD_JOBS.values()), ids=list(BAD_JOBS))
def test_one_bad_job_costs_only_itself(bad: Any) -> None:
    jobs, problems = parse_squeue(squeue_text(RUNNING, bad, PENDING))
    ids = {j.job_id for j in jobs}
    assert {"9", "11"} <= ids
    readable = ids - {"9", "11"}
    assert readable <= {"66"}
    if "66" not in ids or next(j for j in jobs if j.job_id == "66").tag is None:
        assert problems and all(isinstance(p, str) for p in problems)
    if isinstance(bad, dict) and bad is not BAD_JOBS["deep-comment"] and "66" not in ids:
        assert any("job 66" in p for p in problems)


def test_a_running_job_whose_record_is_broken_keeps_its_nodes_used() -> None:
    broken = with_(RUNNING, priority=math.inf)
    jobs, problems = parse_squeue(squeue_text(broken))
    [job] = jobs
    assert job.tag is None and job.alloc_problem and "job 9" in problems[0]
    assert [n for n, _ in job.allocation] == ["n01", "n02"]


def test_invalid_utf8_in_name_and_comment_is_replaced_not_fatal() -> None:
    raw = squeue_text(with_(PENDING, name="NAME", comment="COMM"), RUNNING).encode()
    raw = raw.replace(b'"NAME"', b'"tr\xffain"').replace(b'"COMM"', b'"\xc3(\xed\xa0\x80"')
    jobs, _problems = parse_squeue(decode(raw))
    by_id = {j.job_id: j for j in jobs}
    assert by_id["11"].name == "tr\ufffdain" and by_id["11"].tag is not None and "9" in by_id
    by_id["11"].name.encode("utf-8")


def test_lone_surrogate_escape_is_replaced() -> None:
    jobs, _ = parse_squeue(squeue_text(with_(PENDING, name="a\ud800b")))
    assert jobs[0].name == "a\ufffdb"


@pytest.mark.parametrize(("text", "message"), [
    ("", "not JSON"), ("{", "not JSON"), ("[1]", "not a JSON object"),
    ('{"jobs": {"a": 1}}', "'jobs' is not a list"),
    ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
], ids=["empty", "truncated", "array", "jobs-object", "deep"])
def test_an_unreadable_document_is_one_parse_problem(text: str, message: str) -> None:
    with pytest.raises(ParseProblem, match=message):
        parse_squeue(text)


def test_an_integer_of_thousands_of_digits_skips_its_job_only() -> None:
    text = squeue_text(with_(PENDING, job_id=66), PENDING).replace('"priority": ', '"priority": '
                                                                   + "9" * 5000 + ", \"x\": ", 1)
    jobs, problems = parse_squeue(text)
    assert [j.job_id for j in jobs] == ["11"] and "job 66" in problems[0]
    assert math.isinf(load_json('{"a": ' + "9" * 5000 + "}", "t")["a"])


def test_sinfo_bad_nodes_are_skipped() -> None:
    nodes = json.loads((DATA / "sinfo_mixed.json").read_text())
    good = nodes["nodes"][:2]
    text = json.dumps({**nodes, "nodes": [good[0], 1, {"name": 5}, {"name": "x", "state_flags": 3},
                                          {"name": "y", "gres": ["gpu:8"]}, good[1]]})
    got, problems = parse_sinfo(text)
    assert next(n.name for n in got) == good[0]["name"] and got[-1].name == good[1]["name"]
    assert len(problems) >= 2


@pytest.mark.parametrize("line", ["a||nan|0", "a||inf|0", "a||1|-inf", "a||x|1", "a||-1|0"])
def test_sshare_non_finite_rows_are_skipped(line: str) -> None:
    rows, problems = parse_sshare(f"{line}\nb||0.5|10\n")
    assert [r.account for r in rows] == ["b"] and len(problems) == 1


# -- property tests ------------------------------------------------------------------------------

READERS = [parse_squeue, parse_sinfo]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_parse_problem(data: bytes) -> None:
    text = decode(data)
    for reader in READERS:
        with contextlib.suppress(ParseProblem):
            reader(text)
    parse_sshare(text)  # line-based: never raises


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
FIELDS = ["job_state", "node_count", "priority", "submit_time", "time_limit", "nodes",
          "job_resources", "gres_detail", "admin_comment", "comment", "name", "tres_per_node",
          "exit_code", "required_nodes", "restart_cnt", "state_reason"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(JSON, st.builds(lambda f, v: with_(with_(PENDING, job_id=66), **{f: v}),
                                          st.sampled_from(FIELDS), JSON)), max_size=4))
def test_good_jobs_survive_any_neighbours(bad: list[Any]) -> None:
    jobs, _ = parse_squeue(squeue_text(RUNNING, *bad, PENDING), keep_signalled=True)
    by_id = {j.job_id: j for j in jobs}
    assert by_id["9"].tag is not None and by_id["11"].tag is not None


# -- through the runner and the backend ----------------------------------------------------------

def test_subprocess_output_is_decoded_tolerantly() -> None:
    rc, out, err = subprocess_exec(["sh", "-c", "printf 'a\\377b'; printf '\\376' >&2"], {}, 10)
    assert (rc, out, err) == (0, "a\ufffdb", "\ufffd")


def test_output_past_the_limit_is_refused_not_read(tmp_path: Path) -> None:
    def big(argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
            stdin: str | None) -> tuple[int, str, str]:
        return subprocess_exec(["head", "-c", "5000", "/dev/zero"], env, timeout_s, stdin,
                               max_bytes=4096)

    with pytest.raises(SlurmCommandError, match="more than the 4096"):
        SlurmRunner(exec_fn=big).run(["squeue", "--json"])


def test_a_cycle_with_bad_bytes_still_places_the_others(tmp_path: Path) -> None:
    """The backend's observation through real processes: invalid UTF-8 and a broken record
    among good jobs; the others are observed, the bad ones are named in the skip notes."""
    from railgang.daemon.slurm.cli.records import topology_from_show

    bad_bytes = with_(PENDING, job_id=67, name="NAME")
    squeue = squeue_text(RUNNING, bad_bytes, 1, with_(PENDING, job_id=66, node_count=math.inf),
                         PENDING).encode().replace(b'"NAME"', b'"\xff\xfe"')
    (tmp_path / "squeue").write_bytes(squeue)
    (tmp_path / "sinfo").write_bytes((DATA / "sinfo_mixed.json").read_bytes())
    topo = tmp_path / "topology.conf"
    topo.write_text(topology_from_show((DATA / "scontrol_topology.txt").read_text()))

    def cat(argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
            stdin: str | None) -> tuple[int, str, str]:
        return subprocess_exec(["cat", str(tmp_path / argv[0])], env, timeout_s, stdin)

    backend = CliBackend(SlurmSettings(topology=topo), SlurmRunner(exec_fn=cat), read_shares=False)
    obs = backend.observe(NOW)
    assert [j.job_id for j in obs.snapshot.pending] == ["11", "67"]
    assert "9" in obs.snapshot.running
    assert any("job 66" in s for s in obs.skipped) and any("jobs[2]" in s for s in obs.skipped)
