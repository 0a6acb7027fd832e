"""``railgang sim --ledger`` then ``railgang report`` end to end, and every bad input as one
line with its documented exit code (docs/cli.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.report.service import NoReportData
from railgang.errors import ExitCode, InputError
from tests.daemon.report.conftest import week_trace


def run(*args: str) -> tuple[int, str, BaseException | None]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output, res.exception


@pytest.fixture(scope="module")
def ledger_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("cli")
    trace = root / "trace.csv"
    with trace.open("w") as f:
        f.write("job_id,submit_time,gpus,duration_s,account,class\n")
        for j in week_trace(jobs=60)[:60]:
            f.write(f"{j.job_id},{j.submit_time:.0f},{j.gpus},{j.duration_s:.0f},"
                    f"{j.account},{j.priority_class}\n")
    url = f"sqlite:///{root / 'ledger.sqlite'}"
    code, out, exc = run("sim", "--trace", str(trace), "--nodes", "2", "--gpus-per-node", "8",
                         "--leaf", "2", "-q", "--ledger", url, "--ledger-start", "2026-11-23",
                         "--telemetry-interval-s", "120")
    assert code == 0, (out, exc)
    assert "ledger: 60 jobs" in out
    return url


@pytest.fixture
def env(ledger_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("RAILGANG_DB__URL", ledger_url)
    monkeypatch.setenv("RAILGANG_HOME", str(tmp_path / "home"))
    return tmp_path


def test_report_writes_html_csv_json(env: Path) -> None:
    out = env / "reports" / "2026-11-24"
    code, text, exc = run("report", "--date", "2026-11-24", "--out", str(out))
    assert code == ExitCode.OK, (text, exc)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["anomalies.csv", "ended.csv", "jobs.csv", "nodes.csv", "pools.csv",
                     "queue.csv", "report.csv", "report.html", "report.json", "teams.csv",
                     "users.csv", "waits.csv"]
    assert f"wrote {out / 'report.html'}" in text
    html = (out / "report.html").read_text()
    assert html.count("data:image/svg+xml;base64,") == 6 and "<script" not in html
    assert "http://" not in html and "https://" not in html  # nothing from the network


def test_report_json_on_stdout(env: Path) -> None:
    code, text, _ = run("report", "--date", "2026-11-24", "--json")
    assert code == 0
    data = json.loads(text)
    assert data["date"] == "2026-11-24" and data["teams"] and data["pools"][0]["gpus"] == 16


@pytest.mark.parametrize("date", ["2026-13-01", "yesterdays", "2026-11-31", "26-11-24", "",
                                  "now-1fortnight"])
def test_malformed_date_is_one_line_exit_1(env: Path, date: str) -> None:
    _, _, exc = run("report", "--date", date)
    assert isinstance(exc, InputError) and exc.exit_code == ExitCode.ERROR
    assert "--date" in str(exc) and "\n" not in str(exc)


def test_relative_days(env: Path) -> None:
    """--date/--from/--to take daemon/when.py's relative forms (yesterday, today-7d, now-1day)."""
    from datetime import UTC, datetime, timedelta

    want = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    for form in ("yesterday", "now-1day", "today-1d"):
        _, text, exc = run("report", "--date", form, "--json")
        got = json.loads(text)["date"] if exc is None else str(exc)
        assert want in got, (form, got)  # the report, or "no ledger segments … for <day>"


def test_day_without_data_is_exit_3(env: Path) -> None:
    _, _, exc = run("report", "--date", "2025-01-01", "--out", str(env / "x"))
    assert isinstance(exc, NoReportData) and exc.exit_code == ExitCode.NOT_NOW
    assert "no ledger segments or telemetry for 2025-01-01" in str(exc)
    assert not (env / "x").exists()


def test_unwritable_out_is_exit_1(env: Path) -> None:
    # /proc refuses new directories even to root (CI runs as root, where chmod does not bind)
    code, _, exc = run("report", "--date", "2026-11-24", "--out", "/proc/railgang-report")
    assert code == ExitCode.ERROR and isinstance(exc, InputError)
    assert str(exc).startswith("/proc/railgang-report: --out: cannot write the report")
    assert "choose a writable --out directory" in str(exc)


def test_out_that_is_a_file_is_exit_1(env: Path) -> None:
    blocker = env / "file"
    blocker.write_text("x")
    code, _, exc = run("report", "--date", "2026-11-24", "--out", str(blocker / "sub"))
    assert code == ExitCode.ERROR and isinstance(exc, InputError)
    assert str(exc) == f"{blocker}: --out: exists and is not a directory"


@pytest.mark.parametrize(("date", "code", "message"), [
    ("2026-02-30", 1, "--date: '2026-02-30' is not a calendar date"),
    ("2025-01-01", 3, "no ledger segments or telemetry for 2025-01-01"),
], ids=["bad-date", "no-data"])
def test_exit_codes_through_main(env: Path, date: str, code: int, message: str) -> None:
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", "from railgang.daemon.cli.main import main; main()",
                          "report", "--date", date], capture_output=True, text=True,
                         env={**os.environ}, check=False)
    assert res.returncode == code
    assert res.stderr.strip().count("\n") == 0 and "Traceback" not in res.stderr
    assert message in res.stderr


def test_sim_ledger_refuses_a_second_replay(ledger_url: str, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration_s\nw000,0,1,60\n")
    code, _, exc = run("sim", "--trace", str(trace), "-q", "--ledger", ledger_url)
    assert code == 1 and "already in the ledger" in str(exc)
    code, _, exc = run("sim", "--trace", str(trace), "-q", "--compare", "fifo,default",
                       "--ledger", ledger_url)
    assert code == 1 and "--ledger stores one replay" in str(exc)


def test_report_for_a_range(env: Path) -> None:
    code, text, exc = run("report", "--from", "2026-11-23", "--to", "2026-11-25", "--json")
    assert code == 0, (text, exc)
    data = json.loads(text)
    assert data["date"] == "2026-11-23..2026-11-25" and data["until"] - data["since"] == 3 * 86400
    assert data["totals"]["capacity_gpu_h"] == 16 * 72 and data["trend"]["days"][-1] == "2026-11-25"


@pytest.mark.parametrize(("args", "message"), [
    (("--from", "2026-11-23"), "--to: a range needs both --from and --to"),
    (("--to", "2026-11-23"), "--from: a range needs both --from and --to"),
    (("--date", "2026-11-24", "--from", "2026-11-23", "--to", "2026-11-24"),
     "--date: give --date or --from/--to, not both"),
    (("--from", "2026-11-25", "--to", "2026-11-23"), "--to 2026-11-23 is before --from"),
], ids=["from-alone", "to-alone", "date-and-range", "backwards"])
def test_bad_range_is_one_line_exit_1(env: Path, args: tuple[str, ...], message: str) -> None:
    code, _, exc = run("report", *args)
    assert code == ExitCode.ERROR and isinstance(exc, InputError)
    assert message in str(exc) and "\n" not in str(exc)


def test_report_for_some_accounts_only(env: Path) -> None:
    """`report --account A` (or --team, -A; a comma list), as sreport's Accounts=: only those
    teams' rows, jobs and anomalies (issue 36 item 5)."""
    code, text, exc = run("report", "--date", "2026-11-24", "--json")
    assert code == ExitCode.OK, (text, exc)
    whole = json.loads(text)
    names = sorted(t["team"] for t in whole["teams"])
    assert len(names) >= 2, names
    code, text, exc = run("report", "--date", "2026-11-24", "--json", "--account", names[0])
    assert code == ExitCode.OK, (text, exc)
    one = json.loads(text)
    assert [t["team"] for t in one["teams"]] == [names[0]]
    assert {j["team"] for j in one["top_jobs"]} <= {names[0]}
    assert {j["team"] for j in whole["top_jobs"]} - {names[0]}  # the filter took some out
    code, text, _ = run("report", "--date", "2026-11-24", "--json", "--team", ",".join(names[:2]))
    assert sorted(t["team"] for t in json.loads(text)["teams"]) == names[:2]


def test_a_department_stands_for_its_teams(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from railgang.daemon.report.service import teams_under
    from railgang.db import migrate
    from railgang.db.session import make_engine, session_scope

    url = f"sqlite:///{tmp_path / 'q.sqlite'}"
    migrate.upgrade(url)
    monkeypatch.setenv("RAILGANG_DB__URL", url)
    for args in (["ml", "--level", "org"], ["vision", "--level", "dept", "--parent", "ml"],
                 ["team-a", "--level", "team", "--parent", "vision"],
                 ["team-b", "--level", "team", "--parent", "vision"]):
        assert run("quota", "add", *args)[0] == 0
    engine = make_engine(url)
    with session_scope(engine) as s:
        assert teams_under(s, ["vision"]) == {"vision", "team-a", "team-b"}
        assert teams_under(s, ["team-a", "slurm-only"]) == {"team-a", "slurm-only"}
    engine.dispose()
