from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.sim.traces import parse_csv, read_trace
from railgang.errors import InputError

HEADER = "job_id,submit_time,gpus,duration_s,account,tp,pp,dp,elastic_min,elastic_max,class,model\n"


def parse(text: str, *, strict: bool = False):
    return parse_csv(io.StringIO(text), path="t.csv", strict=strict)


def test_minimal_columns_and_defaults() -> None:
    trace = parse("job_id,submit_time,gpus,duration_s\nb,5,8,100\na,0,1,3600.5\n")
    assert [j.job_id for j in trace.jobs] == ["a", "b"]  # ordered by submit time
    a = trace.jobs[0]
    assert (a.gpus, a.duration_s, a.account, a.tp, a.pp, a.replicas, a.priority_class) == \
        (1, 3600.5, "default", 1, 1, 1, 3)
    assert a.elastic_min is None and trace.problems == ()


def test_all_columns() -> None:
    trace = parse(HEADER + "j1,10,64,7200,teamA,8,2,4,2,8,1,llama\n")
    j = trace.jobs[0]
    assert (j.tp, j.pp, j.dp, j.replicas, j.elastic_min, j.elastic_max, j.priority_class, j.model) == \
        (8, 2, 4, 4, 2, 8, 1, "llama")


@pytest.mark.parametrize(
    ("row", "line_field", "fragment"),
    [
        ("x,abc,1,10", "submit_time", "not a number"),
        ("x,-1,1,10", "submit_time", ">= 0"),
        ("x,0,0,10", "gpus", ">= 1"),
        ("x,0,2.5,10", "gpus", "not an integer"),
        ("x,0,1,0", "duration_s", "> 0"),
        ("x,0,1,inf", "duration_s", "not finite"),
        (",0,1,10", "job_id", "missing"),
        ("x,0,1", None, "expected 4 cells"),
    ],
    ids=["submit-nan", "submit-neg", "gpus-zero", "gpus-float", "duration-zero", "duration-inf",
         "no-id", "short-row"],
)
def test_malformed_rows_reported_with_line_numbers(row: str, line_field: str | None,
                                                   fragment: str) -> None:
    text = "job_id,submit_time,gpus,duration_s\n# a comment\nok,0,1,10\n" + row + "\nok2,1,1,10\n"
    trace = parse(text)
    assert [j.job_id for j in trace.jobs] == ["ok", "ok2"]
    (problem,) = trace.problems
    assert problem.line == 4 and problem.field == line_field and fragment in problem.message
    assert problem.render().startswith("t.csv:4: ")
    with pytest.raises(InputError) as err:
        parse(text, strict=True)
    assert (err.value.line, err.value.field, err.value.path) == (4, line_field, "t.csv")


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("j,0,8,10,,2,2,3,,,,", "gpus"),  # 2*2*3 != 8
        ("j,0,6,10,,4,,,,,,", "gpus"),  # not a multiple of tp
        ("j,0,8,10,,,,,2,,,", "elastic_max"),  # half an elastic range
        ("j,0,8,10,,,,,4,2,,", "elastic_min"),  # min > max
        ("j,0,8,10,,,,,,,7,", "class"),
    ],
    ids=["tp-pp-dp", "tp-multiple", "half-elastic", "elastic-order", "class-range"],
)
def test_consistency_checks(row: str, field: str) -> None:
    trace = parse(HEADER + row + "\n")
    assert trace.jobs == () and trace.problems[0].field == field and trace.problems[0].line == 2


def test_duplicate_id_and_missing_header_column() -> None:
    trace = parse("job_id,submit_time,gpus,duration_s\na,0,1,1\na,1,1,1\n")
    assert len(trace.jobs) == 1 and "duplicate" in trace.problems[0].message
    with pytest.raises(InputError, match="duration_s"):
        parse("job_id,submit_time,gpus\na,0,1\n")
    with pytest.raises(InputError, match="empty"):
        parse("")


def test_read_trace_from_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    path.write_text("job_id,submit_time,gpus,duration_s,extra\na,0,1,1,z\n")
    trace = read_trace(path)
    assert len(trace.jobs) == 1 and "extra" in trace.notes[0]
    with pytest.raises(InputError, match="cannot read"):
        read_trace(tmp_path / "missing.csv")


rows = st.tuples(
    st.text(alphabet="abcdefgh0123456789-_", min_size=1, max_size=8),
    st.floats(min_value=0, max_value=1e7, allow_nan=False),
    st.integers(min_value=1, max_value=512),
    st.floats(min_value=0.001, max_value=1e7, allow_nan=False),
)
junk = st.text(alphabet="abc,.-1\"x ", max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(rows, junk), max_size=25))
def test_property_every_line_is_a_job_or_a_numbered_problem(items: list[object]) -> None:
    lines = ["job_id,submit_time,gpus,duration_s"]
    for item in items:
        if isinstance(item, tuple):
            lines.append(f"{item[0]},{item[1]!r},{item[2]},{item[3]!r}")
        else:
            lines.append(str(item).replace("\n", " "))
    trace = parse("\n".join(lines) + "\n")
    problem_lines = [p.line for p in trace.problems]
    assert all(2 <= n <= len(lines) for n in problem_lines)
    assert len(set(problem_lines)) == len(problem_lines)
    assert len(trace.jobs) + len(trace.problems) <= len(lines) - 1
    assert [j.submit_time for j in trace.jobs] == sorted(j.submit_time for j in trace.jobs)
    for job in trace.jobs:
        assert job.gpus >= 1 and job.duration_s > 0 and job.submit_time >= 0


@settings(max_examples=60, deadline=None)
@given(st.lists(rows, max_size=25, unique_by=lambda r: r[0]))
def test_property_valid_rows_round_trip(items: list[tuple[str, float, int, float]]) -> None:
    text = "job_id,submit_time,gpus,duration_s\n" + "".join(
        f"{i},{s!r},{g},{d!r}\n" for i, s, g, d in items)
    trace = parse(text, strict=True)
    assert trace.problems == ()
    got = {j.job_id: (j.submit_time, j.gpus, j.duration_s) for j in trace.jobs}
    assert got == {i: (s, g, d) for i, s, g, d in items}
