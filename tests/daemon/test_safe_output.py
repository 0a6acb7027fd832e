"""The two output rules (issue 38 rows 6 and 7; docs/security.md, "Output"): a user's text never
reaches a spreadsheet as a formula nor a terminal as a control sequence. The route, CLI and top
tests that use these helpers are in tests/daemon/api/test_output_hostile.py and
tests/daemon/test_terminal_hostile.py."""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal
from pathlib import Path

import pytest

from railgang.daemon.safe_output import CsvWriter, csv_cell, term_safe, term_text

ROOT = Path(__file__).parents[2] / "railgang"
FORMULAS = ["=HYPERLINK(\"http://evil\",\"x\")", "-2+3+cmd|' /C calc'!A0", "+1", "@SUM(A1)",
            "\t=1", "\r=1", "-5"]


@pytest.mark.parametrize("value", FORMULAS)
def test_text_that_a_sheet_would_run_gets_a_leading_quote(value: str) -> None:
    assert csv_cell(value) == "'" + value


@pytest.mark.parametrize("value", [-2.5, -3, 0, 1e9, Decimal("-1.25"), True, None])
def test_railgangs_own_numbers_stay_numbers(value: object) -> None:
    assert csv_cell(value) is value


@pytest.mark.parametrize("value", ["team-a", "llm-7b", "a=b", "", "é", "2026-11-26"])
def test_ordinary_text_is_unchanged(value: str) -> None:
    assert csv_cell(value) == value


def test_a_carriage_return_cannot_add_a_row() -> None:
    buf = io.StringIO()
    w = CsvWriter(buf)
    w.writerow(["label", "gpu_seconds"])
    w.writerow(["x\ry,=1", -6.5])
    assert buf.getvalue().startswith("label,gpu_seconds\n")  # the line ending asked for
    rows = list(csv.reader(io.StringIO(buf.getvalue(), newline="")))
    assert rows == [["label", "gpu_seconds"], ["x\ry,=1", "-6.5"]]


def test_the_report_csv_escapes_users_text() -> None:
    from railgang.daemon.report.model import Chaos, JobRow, Report
    from railgang.daemon.report.render import to_csv

    job = JobRow(job="=cmd|' /C calc'!A0", team="@team", user="-u", gpus=8, gpu_type="h100",
                 gpu_h=-1.5, compute_pct=None, productive_pct=None, cost=2.0)
    rep = Report(date="2026-11-26", since=0, until=86400, generated_at="now", teams_scope=None,
                 totals={"cost": -3.0}, teams=[], top_jobs=[job], pools=[], queue=[],
                 chaos=Chaos(0, 0, 0, 0.0, 0.0), anomalies=[], series={})
    [_, row] = list(csv.reader(io.StringIO(to_csv(rep, "jobs"))))
    assert row[:5] == ["'=cmd|' /C calc'!A0", "'@team", "'-u", "8", "h100"]
    assert row[5] == "-1.5"  # railgang's number, not escaped
    long = to_csv(rep, "all")
    assert "jobs,0,job,'=cmd|' /C calc'!A0" in long and "totals,0,cost,-3.0" in long


def test_every_csv_writer_goes_through_the_helper() -> None:
    # a new CSV export must use CsvWriter: a plain csv.writer would hand users' text on as is
    found = [f"{p.relative_to(ROOT)}" for p in ROOT.rglob("*.py")
             if p.name != "safe_output.py"
             and re.search(r"csv\.(writer|DictWriter)\(", p.read_text(encoding="utf-8"))]
    assert found == []


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b]0;pwned\x07\x1b[2J", "\\x1b]0;pwned\\x07\\x1b[2J"),
    ("a\x9b2Jb", "a\\x9b2Jb"),  # C1 CSI
    ("x\x7fy\x00z", "x\\x7fy\\x00z"),
    ("safe\u202eexe.txt", "safe\\u202eexe.txt"),  # right-to-left override
    ("\u2066isolate\u2069", "\\u2066isolate\\u2069"),
    ("two\nlines\r\tx", "two\\x0alines\\x0d\\x09x"),
    ("llm-7b é 中 ▪ [red]", "llm-7b é 中 ▪ [red]"),
])
def test_control_characters_are_shown_not_obeyed(raw: str, shown: str) -> None:
    assert term_safe(raw) == shown


def test_our_own_newlines_may_stay() -> None:
    assert term_safe("a\x1b\nb", newlines=True) == "a\\x1b\nb"


def test_rich_never_reads_markup_from_users_text() -> None:
    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=80).print(term_text("[red]job[/red] [link=http://x]y[/link]\x1b[2J"))
    assert buf.getvalue() == "[red]job[/red] [link=http://x]y[/link]\\x1b[2J\n"
