"""sacct --json (22.05) from the real cluster -> segments, and clear errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from railgang.daemon.ledger.sacct import parse_labels, parse_sacct
from railgang.errors import InputError
from tests.daemon.ledger.builders import document, record

DATA = Path(__file__).parent / "data"
T = 1796057735


def test_real_capture_gives_one_segment_per_allocation_interval() -> None:
    jobs = json.loads((DATA / "jobs.json").read_text())
    segs = parse_sacct((DATA / "sacct_22.05_window.json").read_text())
    got = [(s.job_id, s.start - T, None if s.end is None else s.end - T, s.gpus, s.nodes,
            s.state) for s in segs]
    assert got == [
        (jobs["done"], 0, 2, 8, "n[05-06]", "COMPLETED"),
        # shrunk twice in place: 4 nodes -> 2 -> 1, one segment per size
        (jobs["shrunk"], 0, 2, 32, "n[01-04]", "RESIZING"),
        (jobs["shrunk"], 2, 4, 16, "n[01-02]", "RESIZING"),
        (jobs["shrunk"], 4, 12, 8, "n01", "COMPLETED"),
        (jobs["labelled"], 0, 3, 2, "n05", "COMPLETED"),
        # requeued: the first run, then the second on another node
        (jobs["requeued"], 0, 6, 8, "n07", "REQUEUED"),
        (jobs["requeued"], 9, 15, 8, "n02", "COMPLETED"),
        (jobs["running"], 12, None, 16, "n[03-04]", "RUNNING"),
    ]
    labelled = next(s for s in segs if s.job_id == jobs["labelled"])
    assert labelled.labels == (("experiment", "llm-7b"), ("model", "v3"))
    assert {s.account for s in segs} == {"team-a", "team-b"}


def test_empty_window_is_not_an_error() -> None:
    assert parse_sacct((DATA / "sacct_22.05_empty.json").read_text()) == []


def test_same_key_twice_keeps_the_last_record() -> None:
    # two resizes within one second: Slurm overwrites the middle record; the key decides
    recs = [record(1, "a", start=T, end=T + 5, submission=T - 1, gpus=32, state="RESIZING"),
            record(1, "a", start=T, end=T + 6, submission=T + 5, gpus=16, state="RESIZING"),
            record(1, "a", start=T, end=T + 9, submission=T + 5, gpus=8, state="COMPLETED")]
    segs = parse_sacct(document(recs))
    assert [(s.start, s.end, s.gpus) for s in segs] == [(T, T + 5, 32), (T + 5, T + 9, 8)]


def test_unstarted_gpuless_and_empty_records_are_not_usage() -> None:
    recs = [record(1, "a", start=0, end=0, submission=T, gpus=8, state="PENDING"),
            record(2, "a", start=T, end=T + 5, submission=T, gpus=0, state="COMPLETED"),
            record(3, "a", start=T, end=T, submission=T, gpus=8, state="CANCELLED")]
    assert parse_sacct(document(recs)) == []


def test_typed_gpus_come_from_the_gres_name() -> None:
    rec = record(1, "a", start=T, end=T + 5, submission=T, gpus=4, state="COMPLETED")
    rec["tres"]["allocated"][1]["name"] = "gpu:h200"
    assert parse_sacct(document([rec]))[0].gpu_type == "h200"
    assert parse_sacct(document([record(2, "a", start=T, end=T + 1, submission=T, gpus=1,
                                        state="COMPLETED")]),
                       default_gpu_type="a100")[0].gpu_type == "a100"


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", r"sacct --json:1: not JSON"),
    ('{"meta": {}}', "no 'jobs' list"),
    ('{"jobs": [], "errors": [{"error_number": 1, "error": "Unspecified error"}]}',
     "sacct reported error 1: Unspecified error"),
    ('{"jobs": 3}', "no 'jobs' list"),
    ('[' * 100_000 + ']' * 100_000, "nested too deeply"),
], ids=["not-json", "no-jobs", "sacct-error", "jobs-not-a-list", "deep-nesting"])
def test_bad_input_is_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_sacct(text)


@pytest.mark.parametrize(("comment", "labels"), [
    (None, ()), ("rg-progress:step=1,sps=2,t=3", ()),
    ("rg-labels:experiment=x, model = v1,junk,=y", (("experiment", "x"), ("model", "v1"))),
])
def test_labels(comment: str | None, labels: tuple[tuple[str, str], ...]) -> None:
    assert parse_labels(comment) == labels
