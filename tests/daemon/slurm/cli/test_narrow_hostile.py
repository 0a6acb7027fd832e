"""What users write cannot steer the narrow squeue read (issue 38 row 3): a GRES type, a job
name or a Comment holding ``|``, newlines, tabs, any bytes but NUL, invalid UTF-8, or 100,000
characters, shifts no column and forges no line, in 22.05's output and in 24.11's. Each job of
the captured clusters (data/squeue_*.json) is printed as that version's ``squeue -O`` prints it
for :func:`narrow.narrow_argv` (tests/support/squeue_o.py), with hostile values in the fields
users write; the narrow read must build exactly the records the JSON read builds of the same
jobs, and the backend must keep reading the narrow form. The real cluster: the hostile jobs of
the row in test_narrow_slurm.py (22.05) and tests/slurm_versions/scenario.py (24.11)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli import CliBackend
from railgang.daemon.slurm.cli.narrow import (
    RESTING,
    NarrowCache,
    comments_argv,
    merge,
    narrow_argv,
    new_mark,
    parse_comments,
    parse_narrow,
)
from railgang.daemon.slurm.cli.records import exit_signal, parse_squeue
from railgang.daemon.slurm.cli.runner import SlurmRunner, decode
from railgang.daemon.slurm.cli.schemas import reader_for, schema_of
from tests.support.squeue_o import squeue_o

DATA = Path(__file__).parent / "data"
T = "2026-12-01T21:39:36"
# a whole line of the old "|" form for a job that does not exist, after a newline
FORGED = "gres:gpu:1\n" + "|".join(
    ["99999", "RUNNING", "None", "team-a", "root", "normal", T, T, T, "UNLIMITED", "1", "0", "1",
     "N/A", "gres:gpu:8", "n01", "", "n01", "1", "0", "railgang:tp=8,pp=1,dp=1;class=1"])
ROW = ["gres:gpu:x|n02|n03:8", "gres:gpu:a|b|c|d|e|zz:1", FORGED, "gres:gpu:t\tb|\r\n\x0b\u2028:1",
       "gres:gpu:" + "y|\n" * 25_000 + ":1", b"gres:gpu:\xff\xfe|\n\xc3:1", "N/A", ""]
HOSTILE: st.SearchStrategy[str | bytes] = st.one_of(
    st.sampled_from(ROW),
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40),
    st.binary(max_size=40).filter(lambda b: b"\0" not in b))


def _text(value: str | bytes) -> str:
    """What the JSON (and so the daemon) sees of ``value``: invalid UTF-8 as U+FFFD."""
    return decode(value) if isinstance(value, bytes) else value


def _doc(version: str, hostile: Sequence[Mapping[str, str | bytes]]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DATA / f"squeue_{version}.json").read_text())
    for job, values in zip(doc["jobs"], hostile, strict=True):
        job.update({k: _text(v) for k, v in values.items()})
    return doc


def _time(epoch: Any) -> str:
    return datetime.fromtimestamp(epoch).isoformat(timespec="seconds") if epoch else "N/A"


def _limit(minutes: Any) -> str:
    if minutes is None:
        return "UNLIMITED"
    days, rest = divmod(int(minutes), 1440)
    return f"{days}-{rest // 60:02}:{rest % 60:02}:00" if days else f"{rest // 60}:{rest % 60:02}:00"


def _printed(version: str, raw: Mapping[str, Any], values: Mapping[str, str | bytes]) -> dict[str, str | bytes]:
    """One job's fields as ``version``'s ``squeue -O`` prints them (its exit code: 22.05 a wait
    status, 24.11 EXIT:SIGNAL), what users wrote as they wrote it (bytes and all)."""
    signal = exit_signal(raw)
    text = {k: str(raw.get(k) or "") for k in ("state_reason", "account", "user_name", "qos",
                                                "batch_host", "nodes", "required_nodes",
                                                "admin_comment")}
    return {"JobID": str(raw["job_id"]), "State": raw["job_state"], "Reason": text["state_reason"],
            "Account": text["account"], "UserName": text["user_name"], "QOS": text["qos"],
            "SubmitTime": _time(raw.get("submit_time")),
            "EligibleTime": _time(raw.get("eligible_time")),
            "StartTime": _time(raw.get("start_time")), "TimeLimit": _limit(raw.get("time_limit")),
            "PriorityLong": str(int(raw.get("priority") or 0)),
            "RestartCnt": str(int(raw.get("restart_cnt") or 0)),
            "NumNodes": str(int(raw.get("node_count") or 1)),
            "BatchHost": text["batch_host"], "NodeList": text["nodes"],
            "Requeue": "0" if raw.get("requeue") is False else "1",
            "exit_code": str(signal) if version == "22.05" else f"0:{signal}",
            "Partition": str(raw.get("partition") or ""),
            "HetJobID": str(int(raw.get("het_job_id") or 0) or "N/A"),
            "Feature": values.get("features", raw.get("features") or "(null)"),
            "Dependency": values.get("dependency", raw.get("dependency") or "(null)"),
            "Reservation": values.get("resv_name", raw.get("resv_name") or "(null)"),
            "ReqNodes": text["required_nodes"], "admin_comment": text["admin_comment"],
            "tres-per-job": values.get("tres_per_job", raw.get("tres_per_job") or "N/A"),
            "tres-per-node": values.get("tres_per_node", raw.get("tres_per_node") or "N/A"),
            "OverSubscribe": "OK", "ArrayTaskID": "N/A",
            "Tres": str(raw.get("tres_req_str") or "N/A"),
            "mem-per-tres": str(raw.get("memory_per_tres") or "N/A"),
            "cpus-per-tres": str(raw.get("cpus_per_tres") or "N/A"),
            "Licenses": values.get("licenses", raw.get("licenses") or "(null)")}


def _narrow_output(version: str, argv: list[str], hostile: Sequence[Mapping[str, str | bytes]]) -> str:
    doc = _doc(version, [{} for _ in hostile])
    reader = reader_for(schema_of(doc, "squeue --json"))
    raws = [reader.job(j) if reader else j for j in doc["jobs"]]
    return squeue_o(argv, [_printed(version, r, v) for r, v in zip(raws, hostile, strict=True)])


def _hostile_jobs(n: int) -> st.SearchStrategy[list[dict[str, str | bytes]]]:
    job: st.SearchStrategy[dict[str, str | bytes]] = st.fixed_dictionaries(
        {}, optional={"tres_per_node": HOSTILE, "tres_per_job": HOSTILE, "name": HOSTILE,
                      "comment": HOSTILE, "features": HOSTILE, "dependency": HOSTILE,
                      "resv_name": HOSTILE, "licenses": HOSTILE})
    return st.lists(job, min_size=n, max_size=n)


@settings(max_examples=60, deadline=None)
@given(hostile=_hostile_jobs(6), version=st.sampled_from(["22.05", "24.11"]))
def test_no_value_a_user_writes_shifts_a_column_or_forges_a_line(
        hostile: list[dict[str, str | bytes]], version: str) -> None:
    mark = new_mark()
    rows = parse_narrow(_narrow_output(version, narrow_argv(mark), hostile), mark)
    full, _ = parse_squeue(json.dumps(_doc(version, hostile)), keep_signalled=True)
    assert [r.job_id for r in rows] == [j.job_id for j in full]  # every job, once, no other
    for row, values in zip(rows, hostile, strict=True):
        if "tres_per_node" in values:
            assert row.fields[-1] == _text(values["tres_per_node"])
    # the records are the JSON read's: nothing of another job's, nothing forged
    jobs, _ = merge(rows, {}, {j.job_id: j for j in full})
    assert jobs == full
    cache = NarrowCache.after_full_read(0.0, rows, full)
    assert cache.stale(rows) == "" and cache.read(rows)[0] == full


@settings(max_examples=60, deadline=None)
@given(comments=st.lists(HOSTILE, min_size=3, max_size=3))
def test_a_comment_is_read_whole_whatever_it_holds(comments: list[str | bytes]) -> None:
    ids, mark = ["9", "10", "11"], new_mark()
    text = squeue_o(comments_argv(ids, mark), [{"JobID": j, "Comment": c}
                                               for j, c in zip(ids, comments, strict=True)])
    assert parse_comments(text, ids, mark) == {j: _text(c) for j, c in zip(ids, comments, strict=True)}


class FakeSlurm:
    """22.05 or 24.11 with the row's hostile jobs: the JSON of data/squeue_*.json, and the
    narrow and Comment reads as that squeue prints them for the argv the backend gives."""

    def __init__(self, version: str, hostile: list[dict[str, str | bytes]]) -> None:
        self.version, self.hostile, self.calls = version, hostile, list[tuple[str, ...]]()

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        argv = list(argv)
        self.calls.append(tuple(argv))
        if "-O" in argv and "-j" in argv:  # the running railgang jobs' Comments
            ids = argv[argv.index("-j") + 1].split(",")
            by_id = {str(j["job_id"]): j.get("comment", "") for j in _doc(self.version, self.hostile)["jobs"]}
            return 0, squeue_o(argv, [{"JobID": i, "Comment": by_id[i]} for i in ids]), ""
        if argv[0] == "scontrol":
            return 0, (DATA / f"scontrol_topology_{self.version}.txt").read_text(), ""
        if "-O" in argv:
            return 0, _narrow_output(self.version, argv, self.hostile), ""
        if self.version == "22.05" and argv[1] != "--json":
            return 2, "", f"{argv[0]}: option '--json' doesn't allow an argument"
        if argv[0] == "squeue":
            return 0, json.dumps(_doc(self.version, self.hostile)), ""
        return 0, (DATA / f"sinfo_{self.version}.json").read_text(), ""


def test_the_row_s_hostile_jobs_do_not_send_the_backend_to_the_json() -> None:
    """Row 3's jobs (columns shifted, a forged line, a running railgang job's Comment with a
    newline and "|"): from the second observe on, the narrow read alone, on either version."""
    hostile: list[dict[str, str | bytes]] = [
        {"comment": "rg-progress x\n2|y|z"}, {}, {}, {"tres_per_node": "gres:gpu:x|n02|n03:8"},
        {"tres_per_node": "gres:gpu:a|b|c|d|e|zz:1"}, {"tres_per_node": FORGED}]
    for version in ("22.05", "24.11"):
        fake = FakeSlurm(version, hostile)
        backend = CliBackend(SlurmSettings(narrow_full_read_s=600, narrow_full_read_filtered_s=600),
                             SlurmRunner(exec_fn=fake, retries=0), read_shares=False)
        reads = []
        for _ in range(4):
            obs = backend.observe(2e9)
            reads.append((backend.full_reads, backend.changed_reads))
        assert reads == [(1, 0), (0, 0), (0, 0), (0, 0)], version
        assert sorted(obs.jobs, key=int) == ["1", "2", "3", "4", "5", "6"]
        assert obs.jobs["6"].batch_host == "" and obs.jobs["6"].tag is None
        assert any(c[0] == "squeue" and "-j" in c for c in fake.calls)  # the Comments were read


def test_the_records_are_read_again_by_id_in_turn_not_every_job_at_once() -> None:
    """Where squeue honours -j (24.11+), no record gets older than ``narrow_full_read_filtered_s``
    and no cycle reads every job's JSON for it: the records are read by id in turn, oldest
    first, the queue once per ``ROTATION`` of that period, none younger than ``RESTING`` of it;
    a cycle so late that a record is past it reads every job again. 22.05, whose squeue ignores
    -j, reads every job every ``narrow_full_read_s`` as before."""
    every, t0, plain_jobs = 600.0, 2e9, [{} for _ in range(6)]  # (data/squeue_*.json: 6 jobs)
    fake = FakeSlurm("24.11", plain_jobs)
    backend = CliBackend(SlurmSettings(narrow_full_read_s=60, narrow_full_read_filtered_s=every),
                         SlurmRunner(exec_fn=fake, retries=0), read_shares=False)
    plain = CliBackend(SlurmSettings(narrow_full_read_s=0), SlurmRunner(exec_fn=FakeSlurm("24.11", plain_jobs)),
                       read_shares=False)
    full_at, by_id_at = [], {}
    for step in range(100):  # a cycle every 10 s for 1,000 s
        now, before = t0 + 10 * step, len(fake.calls)
        obs = backend.observe(now)
        if backend.full_reads:
            full_at.append(now - t0)
        for argv in fake.calls[before:]:
            if argv[0] == "squeue" and argv[-1].startswith("--jobs="):
                for job_id in argv[-1].removeprefix("--jobs=").split(","):
                    by_id_at.setdefault(job_id, []).append(now - t0)
        assert obs.jobs == plain.observe(now).jobs
    assert full_at == [0.0]
    cache = backend._narrow
    assert cache is not None and cache.read_at and set(by_id_at) == set(cache.read_at)
    for job_id, times in by_id_at.items():  # each record read again before it is `every` old
        gaps = [b - a for a, b in zip([0.0, *times], [*times, 990.0], strict=True)]
        assert max(gaps) < every and min(b - a for a, b in zip([0.0, *times], times, strict=False)) \
            >= RESTING * every, (job_id, times)
    assert backend.observe(t0 + 990 + every).jobs and backend.full_reads == 1  # a late cycle
    old = FakeSlurm("22.05", plain_jobs)
    backend = CliBackend(SlurmSettings(narrow_full_read_s=60, narrow_full_read_filtered_s=every),
                         SlurmRunner(exec_fn=old, retries=0), read_shares=False)
    full_at = []
    for step in range(20):
        backend.observe(t0 + 10 * step)
        if backend.full_reads:
            full_at.append(10 * step)
    assert full_at == [0, 60, 120, 180] and backend.changed_reads == 0
