"""Generated topology/block files through the real Slurm 24.11 slurmctld and ``railgang topology
check``, compared as for topology/tree (``compare.compare``).

    python -m tests.topology.conformance.block_conformance --cases 300 [--seed 0] [--save DIR]

prints cases, agreements, deliberate differences and every disagreement (saved under ``--save``
to become regression cases). Needs root, a Docker engine and the railgang/slurm:trixie image
(scripts/slurm_image.sh trixie); the oracle listens on RAILGANG_TEST_PORT_BASE + 1101.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from railgang.topology.conf import TopologyError, parse_topology
from tests.topology.conformance.block_generate import draw_block_files
from tests.topology.conformance.block_oracle import ask_many
from tests.topology.conformance.compare import Outcome, compare, railgang_check
from tests.topology.conformance.run_conformance import Tally, report
from tests.topology.conformance.slurmctld_oracle import Verdict, complaint

__all__ = ["block_oracle_port", "judge", "run_block", "verdict_of"]


def block_oracle_port() -> int:
    return int(os.environ.get("RAILGANG_TEST_PORT_BASE", "26817")) + 1101


def verdict_of(answer: dict[str, object]) -> Verdict:
    said = answer.get("complaints") or []
    assert isinstance(said, list)
    return Verdict(bool(answer["accepted"]), tuple(complaint(c["level"], c["text"]) for c in said),
                   float(answer.get("seconds") or 0.0))  # type: ignore[arg-type]


_KNOWN = {f"n{i:03d}" for i in range(1, 129)}  # NODES_2411


def _unknown_nodes(text: str, verdict: Verdict) -> bool:
    """The one documented difference (docs/topology.md "Conformance"): slurmctld drops nodes its
    slurm.conf lacks before it compares a block with the base size, and ``railgang topology
    check`` does not read slurm.conf, so it counts them."""
    if verdict.accepted or not any("children count lower" in c.text for c in verdict.complaints):
        return False
    try:
        conf = parse_topology(text)
    except TopologyError:
        return False
    return any(n not in _KNOWN for n in conf.nodes)


def judge(texts: list[str], answers: list[dict[str, object]]) -> Tally:
    """Compare slurmctld's answers with ``railgang topology check`` on the same texts."""
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="rg-block-judge-") as tmp:
        path = Path(tmp) / "topology.conf"
        for text, answer in zip(texts, answers, strict=True):
            verdict = verdict_of(answer)
            path.write_bytes(text.encode("utf-8", "surrogateescape"))
            t0 = time.perf_counter()
            ours = railgang_check(path)
            tally.seconds_railgang += time.perf_counter() - t0
            tally.seconds_slurmctld += verdict.seconds
            tally.cases += 1
            tally.refused += not verdict.accepted
            outcome = compare(verdict, ours)
            if not outcome.agree and _unknown_nodes(text, verdict):
                outcome = Outcome(True, True, ("names a node slurm.conf lacks",))
            tally.deliberate += outcome.deliberate
            if not outcome.agree:
                tally.disagreements.append((text, verdict, outcome.reasons))
    return tally


def run_block(cases: int, seed_value: int, answers_file: Path | None = None) -> Tally:
    """Draw, ask slurmctld, judge. With ``answers_file``: slurmctld's answers are read from it
    when it exists (judge again after a parser change, no container), else written to it."""
    if answers_file is not None and answers_file.exists():
        saved = json.loads(answers_file.read_text())
        return judge([s["text"] for s in saved], saved)
    texts = draw_block_files(cases, seed_value)
    answers = ask_many(texts, block_oracle_port(), f"railgang-block-oracle-{os.getpid()}")
    if answers_file is not None:
        answers_file.write_text(json.dumps([{"text": t, **a} for t, a in zip(texts, answers, strict=True)]))
    return judge(texts, answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--answers", type=Path, default=None,
                        help="JSON of slurmctld's answers: read if it exists, else written")
    args = parser.parse_args()
    t0 = time.monotonic()
    tally = run_block(args.cases, args.seed, args.answers)
    report(tally, args.save, t0)


if __name__ == "__main__":
    main()
