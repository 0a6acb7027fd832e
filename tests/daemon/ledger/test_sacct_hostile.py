"""Hostile sacct output (issue 18 row 3, docs/security.md "Slurm output"): one bad record is
skipped with a warning naming its job, never the window; arbitrary text raises nothing but
:class:`InputError`."""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railgang.daemon.ledger.sacct import parse_sacct
from railgang.errors import InputError
from tests.daemon.ledger.builders import document, record

T = 1796057735
META = {"meta": {"plugin": {"type": "openapi/dbv0.0.38"}}}  # Slurm 22.05's schema


def good(job_id: int) -> dict[str, Any]:
    return record(job_id, "team-a", start=T, end=T + 60, submission=T - 5, gpus=8,
                  state="COMPLETED")


def _time(field: str, value: Any) -> dict[str, Any]:
    rec = good(66)
    rec["time"][field] = value
    return rec


BAD_RECORDS = {
    "not-an-object": 1,
    "a-list": [1, 2],
    "no-time": {k: v for k, v in good(66).items() if k != "time"},
    "time-not-an-object": {**good(66), "time": 5},
    "start-infinity": _time("start", float("inf")),
    "start-nan": _time("start", float("nan")),
    "start-text": _time("start", "soon"),
    "end-huge": _time("end", 10 ** 30),
    "submission-negative": _time("submission", -1),
    "gpus-infinite": {**good(66), "tres": {"allocated": [
        {"count": float("inf"), "id": 1001, "name": "gpu", "type": "gres"}]}},
    "tres-not-a-list": {**good(66), "tres": {"allocated": 7}},
    "state-not-an-object": {**good(66), "state": "COMPLETED"},
    "job-id-object": {**good(66), "job_id": {"a": 1}},
    "comment-not-text": {**good(66), "comment": {"job": [1, 2]}},
}


@pytest.mark.parametrize("bad", list(BAD_RECORDS.values()), ids=list(BAD_RECORDS))
def test_one_bad_record_is_skipped_with_a_warning(bad: Any,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    text = json.dumps({**META, "jobs": [good(1), bad, good(2)]})  # json.dumps writes NaN/Infinity
    with caplog.at_level(logging.WARNING):
        segs = parse_sacct(text)
    assert {s.job_id for s in segs} >= {"1", "2"}
    if bad is not BAD_RECORDS["comment-not-text"]:
        assert "66" not in {s.job_id for s in segs}
        assert any("record 1" in r.message and "skipped" in r.message for r in caplog.records)


def test_invalid_utf8_in_a_comment_is_read_after_tolerant_decoding() -> None:
    rec = good(7)
    rec["comment"]["job"] = "rg-labels:experiment=XX"
    raw = json.dumps({**META, "jobs": [rec, good(8)]}).encode().replace(b"XX", b"\xff\xfe")
    from railgang.daemon.slurm.cli.runner import decode

    segs = parse_sacct(decode(raw))
    assert [s.job_id for s in segs] == ["7", "8"]
    assert segs[0].labels == (("experiment", "\ufffd\ufffd"),)


def test_lone_surrogate_and_nul_in_labels_are_made_storable() -> None:
    rec = good(7)
    rec["comment"]["job"] = "rg-labels:experiment=a\ud800b\u0000c"
    [seg] = parse_sacct(json.dumps({**META, "jobs": [rec]}))
    assert seg.labels == (("experiment", "a\ufffdbc"),)
    seg.labels[0][1].encode("utf-8")  # storable


def test_an_integer_of_thousands_of_digits_skips_its_record_only() -> None:
    text = document([good(1), good(2)]).replace(f'"end": {T + 60}', '"end": ' + "9" * 5000, 1)
    assert [s.job_id for s in parse_sacct(text)] == ["2"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_input_error(data: bytes) -> None:
    from railgang.daemon.slurm.cli.runner import decode

    with contextlib.suppress(InputError):
        parse_sacct(decode(data))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(JSON, st.builds(lambda f, v: _time(f, v),
                                          st.sampled_from(["start", "end", "submission"]),
                                          JSON)), max_size=4))
def test_good_records_survive_any_neighbours(bad: list[Any]) -> None:
    """Good records next to arbitrary JSON values still become segments."""
    segs = parse_sacct(json.dumps({**META, "jobs": [good(1), *bad, good(2)]}))
    assert {"1", "2"} <= {s.job_id for s in segs}
