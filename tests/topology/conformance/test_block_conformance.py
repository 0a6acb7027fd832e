"""railgang's topology/block verdicts against the real Slurm 24.11 slurmctld (issue 21 item 1).

- the block corpus (tests/topology/data/conformance_block/*.conf, each with 24.11's recorded
  verdict and messages) against ``railgang topology check``: in the normal suite, no Slurm needed;
- with marker slurm2411 (root, a Docker engine, the railgang/slurm:trixie image): the recorded
  verdicts still hold on the live slurmctld 24.11, and a bounded sample of generated files
  (RAILGANG_BLOCK_CONFORMANCE_CASES, default 120, seed RAILGANG_CONFORMANCE_SEED, default 0;
  about 0.25 s a file) agrees with it. Where CI requires slurm2411 a missing engine fails.
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import REQUIRED
from tests.topology.conformance.block_conformance import block_oracle_port, judge
from tests.topology.conformance.block_generate import draw_block_files
from tests.topology.conformance.block_oracle import ask_many, block_oracle_unavailable
from tests.topology.conformance.compare import compare, railgang_check
from tests.topology.conformance.corpus import BLOCK_CORPUS, load_cases

CASES = load_cases(BLOCK_CORPUS)


def test_block_corpus_covers_both_verdicts_and_the_fatal_kinds() -> None:
    assert len(CASES) >= 35
    said = " ".join(c.text for case in CASES for c in case.verdict.complaints)
    for needle in ("has already been defined", "Invalid node name", "children count lower",
                   "hasn't got nodes", "Invalid BlockSizes value", "unrecognized key", "Parse error in file",
                   "crashed", "specified more than once", "Block not contains any nodes"):
        assert needle in said, needle
    assert {case.verdict.accepted for case in CASES} == {True, False}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_railgang_agrees_with_recorded_slurmctld_2411(case) -> None:  # type: ignore[no-untyped-def]
    outcome = compare(case.verdict, railgang_check(case.path))
    assert outcome.agree, f"{case.why}: {'; '.join(outcome.reasons)}"


def test_the_generator_draws_the_same_files_for_a_seed() -> None:
    a, b = draw_block_files(20, 7), draw_block_files(20, 7)
    assert a == b and len(set(a)) > 10


@pytest.fixture(scope="module")
def oracle_ready() -> None:
    why = block_oracle_unavailable()
    if why is not None:
        if "slurm2411" in REQUIRED:
            pytest.fail(f"slurm2411 is required (RAILGANG_TEST_REQUIRE) but the 24.11 oracle cannot run: {why}")
        pytest.skip(f"slurmctld 24.11 oracle unavailable: {why}")


@pytest.mark.slurm2411
@pytest.mark.slow
def test_recorded_and_generated_files_agree_with_live_slurmctld_2411(oracle_ready: None) -> None:
    cases = int(os.environ.get("RAILGANG_BLOCK_CONFORMANCE_CASES", "120"))
    seed = int(os.environ.get("RAILGANG_CONFORMANCE_SEED", "0"))
    generated = draw_block_files(cases, seed)
    recorded = [case.path.read_bytes().decode("utf-8", "surrogateescape") for case in CASES]
    answers = ask_many(recorded + generated, block_oracle_port(), f"railgang-block-conformance-{os.getpid()}")
    for case, live in zip(CASES, answers[:len(CASES)], strict=True):
        said = [(c["level"], c["text"]) for c in live["complaints"]]  # type: ignore[attr-defined]
        assert (live["accepted"], said) == (case.verdict.accepted,
                                            [(c.level, c.text) for c in case.verdict.complaints]), case.name
    tally = judge(generated, answers[len(CASES):])
    print(tally.summary())
    assert tally.cases == len(generated) and len(generated) >= 0.9 * cases
    assert 0.2 * tally.cases < tally.refused < 0.8 * tally.cases, tally.summary()  # both verdicts drawn
    shown = "\n".join(f"--- {'; '.join(r)}\n{text}slurmctld: {v.summary()}" for text, v, r in tally.disagreements[:5])
    assert not tally.disagreements, f"{tally.summary()}\n{shown}"
