"""The demand file: deployments as values, hostile rows skipped with their line, bad files one
error (issue 19 item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.daemon.serving.model import Demand, parse_demand, read_demand
from railgang.errors import InputError

GOOD = """# two deployments
time_s,deployment,replicas,tp,switch_in_s,max_replicas
0,chat,2,8,600,
3600,chat,5,8,,
0,code,1,2,,4
"""


def test_good_file_gives_deployments_and_step_demand() -> None:
    got = parse_demand(GOOD.splitlines(keepends=True))
    chat, code = got.deployments
    assert (chat.name, chat.tp, chat.max_replicas, chat.switch_in_s) == ("chat", 8, 5, 600.0)
    assert (code.tp, code.max_replicas, code.switch_in_s) == (2, 4, 900.0)
    assert got.pool_gpus == 5 * 8 + 4 * 2
    d = got.demand["chat"]
    assert [d.at(t) for t in (-1, 0, 3599, 3600, 1e9)] == [0, 2, 2, 5, 5]
    assert d.sampled(1800) == [2, 2, 5]
    assert not got.problems


@pytest.mark.parametrize(("row", "field"), [
    ("10,chat,nan,8", "replicas"),
    ("10,chat,-1,8", "replicas"),
    ("inf,chat,1,8", "time_s"),
    ("1e300,chat,1,8", "time_s"),
    ("10,chat,1,0", "tp"),
    ("10,chat,1,4", "tp"),  # chat is tp 8 on row 1
    ("10,,1,8", "deployment"),
    ("10,ch\x00at,1,8", "deployment"),
    ("10,chat,1," + "9" * 5000, "tp"),
    ("10,chat,1,8,9", None),  # too many cells
], ids=["nan", "negative", "inf-time", "far-future", "tp0", "tp-conflict", "no-name", "nul",
        "huge-int", "extra-cell"])
def test_hostile_row_is_skipped_with_its_line(row: str, field: str | None) -> None:
    got = parse_demand(["time_s,deployment,replicas,tp\n", "0,chat,1,8\n", row + "\n"])
    assert len(got.problems) == 1
    assert (got.problems[0].line, got.problems[0].field) == (3, field)
    assert got.demand["chat"].points == ((0.0, 1),)
    with pytest.raises(InputError, match=":3:"):
        parse_demand(["time_s,deployment,replicas,tp\n", "0,chat,1,8\n", row + "\n"], strict=True)


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty file"),
    ("time_s,deployment,replicas\n0,a,1\n", "lacks column"),
    ("time_s,deployment,replicas,tp\n0,a,x,1\n", "no valid demand rows"),
    ("time_s,deployment,replicas,tp,min_replicas,max_replicas\n0,a,1,1,5,2\n", "min_replicas"),
])
def test_unusable_file_is_one_error(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_demand(text.splitlines(keepends=True))


def test_hostile_paths_are_one_error(tmp_path: Path) -> None:
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"time_s,deployment,replicas,tp\n" + b"\xff\xfe" * 10 + b"\n")
    long = tmp_path / "long.csv"
    long.write_bytes(b"x" * (1 << 20))
    for path in (Path("/dev/zero"), tmp_path, binary, long, tmp_path / "missing.csv"):
        with pytest.raises(InputError):
            read_demand(path)


def test_later_row_wins_and_rows_need_no_order() -> None:
    got = parse_demand(["time_s,deployment,replicas,tp\n", "60,a,3,1\n", "0,a,1,1\n",
                        "60,a,4,1\n"])
    assert got.demand["a"] == Demand("a", ((0.0, 1), (60.0, 4)))


def test_a_pool_or_window_beyond_bounds_is_refused() -> None:
    from railgang.daemon.serving.replay import ServingKnobs, declare, plan_window
    from railgang.errors import ConfigError
    from railgang.topology.fabric import fabric_from_shape

    huge = parse_demand(["time_s,deployment,replicas,tp\n", "0,a,100000,64\n"])
    with pytest.raises(ConfigError, match="more than"):
        declare(fabric_from_shape(2, 8, 2), huge)
    small = parse_demand(["time_s,deployment,replicas,tp\n", "0,a,16,1\n"])
    with pytest.raises(ConfigError, match="leave no training nodes"):
        declare(fabric_from_shape(2, 8, 2), small)
    long = parse_demand(["time_s,deployment,replicas,tp\n", "0,a,1,1\n", "1e8,a,2,1\n"])
    with pytest.raises(ConfigError, match="cut the demand file"):
        plan_window(long, "static", ServingKnobs(history_days=3))
