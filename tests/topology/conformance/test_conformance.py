"""railgang's topology.conf verdicts against the real Slurm 22.05 slurmctld (issue 11 part 2).

- the corpus (tests/topology/data/conformance/*.conf, each with slurmctld's recorded verdict and
  messages) against ``railgang topology check``: in the normal suite, no Slurm needed;
- the same corpus against the live slurmctld: the recorded verdicts still hold (slurm marker);
- generated files, valid and malformed, through both (slurm + slow; RAILGANG_CONFORMANCE_CASES,
  default 300, and RAILGANG_CONFORMANCE_SEED, default 0, pick how many and which).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.topology.conformance.compare import compare, railgang_check
from tests.topology.conformance.corpus import load_cases
from tests.topology.conformance.run_conformance import run
from tests.topology.conformance.slurmctld_oracle import SlurmctldOracle

CASES = load_cases()


def test_corpus_covers_both_verdicts_and_the_fatal_kinds() -> None:
    assert len(CASES) >= 60
    said = " ".join(c.text for case in CASES for c in case.verdict.complaints)
    for needle in ("has already been defined", "has invalid child", "is not a tree", "Invalid node name",
                   "neither child switches nor nodes", "both child switches and nodes", "unrecognized key",
                   "is not a valid number", "Parse error in file", "crashed", "Multiple leaf switches"):
        assert needle in said, needle
    assert {case.verdict.accepted for case in CASES} == {True, False}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_railgang_agrees_with_recorded_slurmctld(case) -> None:  # type: ignore[no-untyped-def]
    outcome = compare(case.verdict, railgang_check(case.path))
    assert outcome.agree, f"{case.why}: {'; '.join(outcome.reasons)}"


def test_show_and_place_take_every_file_slurmctld_accepts() -> None:
    """What slurmctld accepts, railgang must also build a fabric from: node 'n]', empty leaves,
    two parents, a node named like a switch, a 5,000-character name (no traceback, exit 0/1/3)."""
    from typer.testing import CliRunner

    from railgang.daemon.cli.main import app
    from railgang.errors import InputError

    runner = CliRunner()
    for case in CASES:
        if not case.verdict.accepted or case.name == "max":  # 65,536 nodes: 16 s, covered by the parser tests
            continue
        for args in (["topology", "show", "--json"], ["place", "--gpus", "8", "-t"]):
            res = runner.invoke(app, [*args, str(case.path)])
            assert res.exit_code in (0, 1, 3), (case.name, args, res.output)
            assert res.exception is None or isinstance(res.exception, (SystemExit, InputError)), (case.name, res.exception)


@pytest.mark.slurm
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_recorded_verdicts_hold_on_live_slurmctld(case, slurmctld_oracle: SlurmctldOracle) -> None:  # type: ignore[no-untyped-def]
    live = slurmctld_oracle.ask(case.path.read_bytes())
    assert live.accepted == case.verdict.accepted, live.summary()
    assert [(c.level, c.text) for c in live.complaints] == [(c.level, c.text) for c in case.verdict.complaints]
    assert compare(live, railgang_check(case.path)).agree


@pytest.mark.slurm
@pytest.mark.slow
def test_generated_files_agree_with_live_slurmctld(slurmctld_oracle: SlurmctldOracle, tmp_path: Path) -> None:
    cases = int(os.environ.get("RAILGANG_CONFORMANCE_CASES", "300"))
    seed = int(os.environ.get("RAILGANG_CONFORMANCE_SEED", "0"))
    tally = run(slurmctld_oracle, cases, seed, tmp_path)
    print(tally.summary())
    assert tally.cases == cases
    assert 0.2 * cases < tally.refused < 0.9 * cases, tally.summary()  # both verdicts are exercised
    shown = "\n".join(f"--- {'; '.join(r)}\n{text}slurmctld: {v.summary()}" for text, v, r in tally.disagreements[:5])
    assert not tally.disagreements, f"{tally.summary()}\n{shown}"
