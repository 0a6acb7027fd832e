"""job_submit.lua's needs grammar is the core's: the real script under lua5.1 (Slurm's table
stubbed by plain values, as in test_class_grants) gives the same canonical tag or the same
refusal as ``railgang.daemon.core.model.needs`` for every text, and refuses needs the fleet cannot meet."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.core.model.needs import GpuFacts, NeedsError, parse_needs
from railgang.daemon.slurm.cli.facts import render_fleet_file
from tests.slurm_plugins.lua_harness import run_harness

# one needs text per stdin line -> "OK\t<admin_comment>" or "ERR\t<message>" per line
BODY = """
    local gres = arg[2]
    local job = {account = "team-a", user_name = "root", comment = "rg:class=3;needs=" .. line,
                 time_limit = slurm.NO_VAL, tres_per_node = gres ~= "" and gres or nil, min_nodes = 1}
    if slurm_job_submit(job, nil, 0) == slurm.SUCCESS then
        print("OK\\t" .. (job.admin_comment or "") .. (job.exc_nodes and ("\\texclude=" .. job.exc_nodes) or ""))
    else
        print("ERR\\t" .. (last or ""))
    end
"""


def run_lua(tmp_path: Path, texts: list[str], fleet: str | None = None, gres: str = "") -> list[str]:
    env = {}
    if fleet is not None:
        (tmp_path / "fleet.txt").write_text(fleet)
        env["RAILGANG_FLEET_FILE"] = str(tmp_path / "fleet.txt")
    return run_harness(tmp_path, BODY, texts, env, (gres,))


def python_answer(text: str) -> str:
    try:
        needs = parse_needs(text)
    except NeedsError as exc:
        return f"ERR\trailgang: --rg-needs: {exc}"
    return "OK\trailgang:class=3" + (f";needs={needs.render()}" if not needs.empty else "")


# texts near the grammar: its words, digits, separators and noise (no ';' or newline: the
# comment form splits hints on ';', and the harness reads one text per line)
_word = st.sampled_from(["type=", "gpumem>=", "nvlink", "net=", "cc>=", "ib", "roce", "eth", "a100",
                         "H100", "v100", "g", "GB", "/", ",", ".", " ", "40", "8", "0", "4097",
                         "1.5", "x", "-", "_", ">", "=", "\t", "opa", "12"])
texts = st.lists(_word, max_size=8).map("".join)
ascii_noise = st.text(st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters=";"),
                      max_size=20)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.one_of(texts, ascii_noise), min_size=40, max_size=40))
def test_lua_and_python_give_the_same_answer_for_every_text(tmp_path_factory: pytest.TempPathFactory,
                                                             batch: list[str]) -> None:
    got = run_lua(tmp_path_factory.mktemp("lua"), batch)
    assert got == [python_answer(t) for t in batch]


@pytest.mark.parametrize("text", ["gpumem>=40G,nvlink", "type=V100/a100,cc>=7", "net=roce/ib",
                                  "gpumem>=40G,gpumem>=80G", "nvlink,,", "cc>=8.10"])
def test_hand_picked_texts_agree(tmp_path: Path, text: str) -> None:
    assert run_lua(tmp_path, [text]) == [python_answer(text)]


A100 = GpuFacts("a100", 80.0, True, "ib", (8, 0))
V100 = GpuFacts("v100", 32.0, False, "eth", (7, 0))
FLEET = render_fleet_file([(f"n{i:02d}", 8, A100 if i <= 2 else V100) for i in range(1, 5)])


def test_a_need_no_node_meets_is_refused_with_what_exists(tmp_path: Path) -> None:
    out = run_lua(tmp_path, ["gpumem>=100G", "type=h100", "gpumem>=40G,nvlink", "net=eth"], FLEET)
    exists = ("the cluster has n[01-02] (2 x 8 GPUs a100 80G nvlink ib cc8.0); "
              "n[03-04] (2 x 8 GPUs v100 32G eth cc7.0)")
    assert out == [
        f"ERR\trailgang: --rg-needs=gpumem>=100G: no node meets it; {exists}",
        f"ERR\trailgang: --rg-needs=type=h100: no node meets it; {exists}",
        # plain Slurm must keep off the nodes that fail the needs too (no daemon, lapsed lease)
        "OK\trailgang:class=3;needs=gpumem>=40G,nvlink\texclude=n[03-04]",
        "OK\trailgang:class=3;needs=net=eth\texclude=n[01-02]",
    ]


def test_a_job_larger_than_the_capacity_meeting_its_needs_is_refused(tmp_path: Path) -> None:
    # --gres=gpu:8 on one node is fine; -N3 would need 24 GPUs and only 16 meet nvlink
    assert run_lua(tmp_path, ["nvlink"], FLEET, gres="gres:gpu:8") == [
        "OK\trailgang:class=3;needs=nvlink\texclude=n[03-04]"]
    (tmp_path / "n3").mkdir()
    (tmp_path / "n3" / "fleet.txt").write_text(FLEET)
    out = run_harness(tmp_path / "n3", BODY.replace("min_nodes = 1", "min_nodes = 3"), ["nvlink"],
                      {"RAILGANG_FLEET_FILE": str(tmp_path / "n3" / "fleet.txt")}, ("gres:gpu:8",))
    assert out[0].startswith("ERR\trailgang: --rg-needs=nvlink: only 16 GPUs meet it, the job asks for 24")


def test_without_a_fleet_file_only_the_grammar_is_checked(tmp_path: Path) -> None:
    assert run_lua(tmp_path, ["type=h100"]) == ["OK\trailgang:class=3;needs=type=h100"]
    assert run_lua(tmp_path, ["type=h100"], fleet="") == ["OK\trailgang:class=3;needs=type=h100"]
