"""Run generated topology.conf files through the real slurmctld and ``railgang topology check``.

    python -m tests.topology.conformance.run_conformance --cases 300 [--seed 0] [--save DIR]

prints cases run, agreements, deliberate differences and every disagreement (each file saved
under ``--save`` to become a regression case), plus the time per case. Needs root and Slurm
22.05 (``slurmctld``); ports and directories follow RAILGANG_TEST_PORT_BASE/RAILGANG_TEST_ROOT.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.topology.conformance.compare import compare, module_check, railgang_check
from tests.topology.conformance.generate import any_files
from tests.topology.conformance.slurmctld_oracle import SlurmctldOracle, Verdict

__all__ = ["Tally", "oracle_port", "report", "run"]


def oracle_port() -> int:
    # the session cluster uses BASE..BASE+99, the mini cluster BASE+1000..BASE+1099
    return int(os.environ.get("RAILGANG_TEST_PORT_BASE", "26817")) + 1100


@dataclass
class Tally:
    cases: int = 0
    refused: int = 0
    deliberate: int = 0
    seconds_slurmctld: float = 0.0
    seconds_railgang: float = 0.0
    disagreements: list[tuple[str, Verdict, tuple[str, ...]]] = field(default_factory=list)

    def summary(self) -> str:
        per = 1000 * self.seconds_slurmctld / max(self.cases, 1)
        ours = 1000 * self.seconds_railgang / max(self.cases, 1)
        return (f"{self.cases} cases ({self.refused} refused by slurmctld), {len(self.disagreements)} "
                f"disagreement(s), {self.deliberate} deliberate; slurmctld {per:.0f} ms/case, "
                f"railgang check {ours:.1f} ms/case")


def _load_check(path: Path) -> Callable[[str, str], Any]:
    spec = importlib.util.spec_from_file_location("conformance_alt_conf", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    check: Callable[[str, str], Any] = module.check_topology
    return check


def run(oracle: SlurmctldOracle, cases: int, seed_value: int, work: Path,
        parser: Path | None = None) -> Tally:
    """Draw ``cases`` files (deterministic for a seed) and compare each; never shrinks or stops."""
    tally = Tally()
    work.mkdir(parents=True, exist_ok=True)
    path = work / "topology.conf"
    alt = _load_check(parser) if parser is not None else None

    @seed(seed_value)
    @settings(max_examples=cases, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.generate])
    @given(any_files())
    def one(text: str) -> None:
        path.write_bytes(text.encode("utf-8"))
        verdict = oracle.ask(text)
        t0 = time.perf_counter()
        ours = railgang_check(path) if alt is None else module_check(alt, path)
        tally.seconds_railgang += time.perf_counter() - t0
        tally.seconds_slurmctld += verdict.seconds
        tally.cases += 1
        tally.refused += not verdict.accepted
        outcome = compare(verdict, ours)
        tally.deliberate += outcome.deliberate
        if not outcome.agree:
            tally.disagreements.append((text, verdict, outcome.reasons))

    one()
    return tally


def report(tally: Tally, save: Path | None, t0: float) -> None:
    """Print each disagreement (and keep its file under ``save``), then the tally."""
    for i, (text, verdict, reasons) in enumerate(tally.disagreements):
        print(f"--- disagreement {i}: {'; '.join(reasons)}\n{text}slurmctld: {verdict.summary()}")
        if save:
            save.mkdir(parents=True, exist_ok=True)
            (save / f"case{i:03d}.conf").write_text(text)
    print(f"{tally.summary()}; {time.monotonic() - t0:.1f} s in all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--parser", type=Path, default=None,
                        help="another conf.py to judge instead of `railgang topology check` "
                             "(e.g. `git show 5a105a7^:topology/conf.py > old.py`)")
    args = parser.parse_args()
    root = Path(os.environ.get("RAILGANG_TEST_ROOT", f"/tmp/railgang-pytest-{os.getuid()}")) / "conformance"
    oracle = SlurmctldOracle(root / "oracle", oracle_port())
    t0 = time.monotonic()
    tally = run(oracle, args.cases, args.seed, root / "work", args.parser)
    report(tally, args.save, t0)


if __name__ == "__main__":
    main()
