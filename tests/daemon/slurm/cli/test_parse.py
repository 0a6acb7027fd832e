"""Parsers of the railgang tag and GRES strings (pure; hypothesis where inputs are open-ended)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railgang.daemon.slurm.cli.parse import (
    ParseProblem,
    Pending,
    RailgangTag,
    gpu_indices,
    gres_gpus,
    parse_tag,
    parse_target,
    render_target,
)


@pytest.mark.parametrize(
    ("comment", "tag"),
    [
        ("railgang:tp=8,pp=4,dp=8;elastic=4:16;class=1",
         RailgangTag(tp=8, pp=4, dp=8, elastic=(4, 16), priority_class=1)),
        ("railgang:class=3", RailgangTag()),
        ("railgang:tp=2,pp=1,dp=3;class=0;preempt=1796057400@2",
         RailgangTag(tp=2, dp=3, priority_class=0, preempt=Pending(1796057400.0, 2))),
        ("railgang:tp=8,pp=1,dp=1;class=2;grow=99@0@n[01-02]x8+n05x4",
         RailgangTag(tp=8, dp=1, priority_class=2, grow=Pending(99.0, 0, (("n01", 8), ("n02", 8), ("n05", 4))))),
    ],
    ids=["full", "class-only", "preempt-mark", "grow-mark"],
)
def test_parse_tag(comment: str, tag: RailgangTag) -> None:
    assert parse_tag(comment) == tag
    assert parse_tag(tag.render()) == tag  # render is the inverse


def test_untagged_comment_is_not_railgang() -> None:
    assert parse_tag("") is None
    assert parse_tag("some admin note") is None


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("railgang:tp=x;class=1", "tp 'x' is not an integer"),
        ("railgang:tp=8,tp=4", "tpN/ppN/dpN once each"),
        ("railgang:elastic=8:4", "MIN > MAX"),
        ("railgang:elastic=4", "is not MIN:MAX"),
        ("railgang:class=7", "class '7' is not an integer in 0..3"),
        ("railgang:colour=red", "unknown key 'colour'"),
        ("railgang:class", "is not key=value"),
        ("railgang:preempt=12", "is not DEADLINE@RESTARTS"),
        ("railgang:grow=1@0@n01", "is not NODESxGPUS"),
        ("railgang:grow=1@0@n[01-x8", "host list"),
    ],
)
def test_malformed_tag_is_one_line_problem(comment: str, message: str) -> None:
    with pytest.raises(ParseProblem, match=message.replace("(", r"\(").replace("[", r"\[")) as info:
        parse_tag(comment)
    assert "\n" not in str(info.value)


@given(st.text(max_size=60))
def test_any_admin_comment_parses_or_fails_cleanly(body: str) -> None:
    try:
        tag = parse_tag("railgang:" + body)
    except ParseProblem as exc:
        assert str(exc)
    else:
        assert tag is not None and 0 <= tag.priority_class <= 3 and tag.tp >= 1 and tag.pp >= 1


@given(st.integers(1, 64), st.integers(1, 64), st.one_of(st.none(), st.integers(1, 64)),
       st.integers(0, 3))
def test_render_round_trips(tp: int, pp: int, dp: int | None, priority_class: int) -> None:
    tag = RailgangTag(tp=tp, pp=pp, dp=dp if dp is not None else 1, priority_class=priority_class)
    assert parse_tag(tag.render()) == tag


@pytest.mark.parametrize(
    ("gres", "count"),
    [("gpu:8", 8), ("gres:gpu:8", 8), ("gres:gpu:a100:4", 4), ("gpu:8(S:0-1)", 8),
     ("gpu:2,nvme:1", 2), ("gres/gpu:3", 3), ("", 0), ("N/A", 0), ("(null)", 0), ("nvme:4", 0)],
)
def test_gpu_count(gres: str, count: int) -> None:
    assert gres_gpus(gres) == count


@pytest.mark.parametrize(
    ("detail", "indices"),
    [("gpu:8(IDX:0-7)", tuple(range(8))), ("gpu:4(IDX:3-6)", (3, 4, 5, 6)),
     ("gpu:3(IDX:0,2,5)", (0, 2, 5)), ("gpu:4(IDX:0-1,4-5)", (0, 1, 4, 5)),
     ("gpu:a100:2(IDX:6-7)", (6, 7)), ("gpu:0(IDX:N/A)", ())],
)
def test_gpu_indices(detail: str, indices: tuple[int, ...]) -> None:
    assert gpu_indices(detail) == indices


@pytest.mark.parametrize("detail", ["gpu:8", "gpu:8(IDX:0-6)", "gpu:2(IDX:1-0)", "gpu:2(IDX:0,0)",
                                    "nvme:1(IDX:0)", "gpu:x(IDX:0)"])
def test_bad_gres_detail(detail: str) -> None:
    with pytest.raises(ParseProblem, match="gres_detail"):
        gpu_indices(detail)


@given(st.lists(st.integers(0, 15), min_size=1, max_size=16, unique=True))
def test_gres_detail_round_trip(indices: list[int]) -> None:
    idx = ",".join(str(i) for i in sorted(indices))
    assert gpu_indices(f"gpu:{len(indices)}(IDX:{idx})") == tuple(sorted(indices))


def test_target_round_trip() -> None:
    target = (("n01", 8), ("n02", 8), ("n07", 4))
    assert render_target(target) == "n[01-02]x8+n07x4"
    assert parse_target(render_target(target)) == target
