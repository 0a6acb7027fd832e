"""The regression corpus: tests/topology/data/conformance/*.conf, each with slurmctld's verdict.

Every file ends in a footer of comments (comments at the end change neither the meaning nor the
line numbers of what comes before) holding what the real slurmctld 22.05 said about it:

    # --- conformance: why this case is here
    # slurmctld 22.05: refused
    # slurmctld fatal: Switch (s1) has already been defined

Record or refresh footers (root and Slurm needed) with

    python -m tests.topology.conformance.corpus [--why TEXT] FILE...
    python -m tests.topology.conformance.corpus --block FILE...   # data/conformance_block: 24.11
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path

from tests.topology.conformance.slurmctld_oracle import SlurmctldOracle, Verdict, complaint

__all__ = ["BLOCK_CORPUS", "CORPUS", "Case", "load_cases", "record", "record_block"]

CORPUS = Path(__file__).resolve().parent.parent / "data" / "conformance"
BLOCK_CORPUS = CORPUS.parent / "conformance_block"  # topology/block, slurmctld 24.11
_MARK = "# --- conformance: "
_VERDICT = re.compile(r"^# slurmctld (?:22\.05|24\.11): (accepted|refused)$")  # 24.11: topology/block
_SAID = re.compile(r"^# slurmctld (fatal|error|warning): (.*)$")


@dataclass(frozen=True)
class Case:
    path: Path
    why: str
    verdict: Verdict  # as recorded

    @property
    def name(self) -> str:
        return self.path.stem


def _split(raw: bytes) -> tuple[bytes, list[str]]:
    at = raw.rfind(b"\n" + _MARK.encode())
    if at == -1:
        return raw, []
    return raw[:at + 1], raw[at + 1:].decode("utf-8").rstrip("\n").split("\n")


def load_cases(folder: Path = CORPUS) -> list[Case]:
    cases = []
    for path in sorted(folder.glob("*.conf")):
        _, footer = _split(path.read_bytes())
        if not footer:
            raise ValueError(f"{path}: no conformance footer; record it with tests/topology/conformance/corpus.py")
        why = footer[0].removeprefix(_MARK)
        accepted = None
        complaints = []
        for line in footer[1:]:
            if (m := _VERDICT.match(line)) is not None:
                accepted = m.group(1) == "accepted"
            elif (m := _SAID.match(line)) is not None:
                complaints.append(complaint(m.group(1), m.group(2)))
        if accepted is None:
            raise ValueError(f"{path}: footer has no '# slurmctld 22.05: accepted|refused' line")
        cases.append(Case(path, why, Verdict(accepted, tuple(complaints))))
    return cases


def record(oracle: SlurmctldOracle, path: Path, why: str | None) -> Verdict:
    body, footer = _split(path.read_bytes())
    if not body.endswith(b"\n"):
        body += b"\n"
    old_why = footer[0].removeprefix(_MARK) if footer else path.stem
    verdict = oracle.ask(body)
    lines = [_MARK + (why or old_why), f"# slurmctld 22.05: {'accepted' if verdict.accepted else 'refused'}"]
    lines += [f"# slurmctld {c.level}: {c.text}" for c in verdict.complaints]
    path.write_bytes(body + ("\n".join(lines) + "\n").encode("utf-8"))
    return verdict


def record_block(paths: list[Path], why: str | None) -> list[Verdict]:
    """Record 24.11's verdicts (topology/block, in the trixie container) in block case files."""
    from tests.topology.conformance.block_conformance import block_oracle_port, verdict_of
    from tests.topology.conformance.block_oracle import ask_many

    bodies, footers = [], []
    for path in paths:
        body, footer = _split(path.read_bytes())
        bodies.append(body if body.endswith(b"\n") else body + b"\n")
        footers.append(footer)
    answers = ask_many([b.decode("utf-8", "surrogateescape") for b in bodies], block_oracle_port(),
                       f"railgang-block-corpus-{os.getpid()}")
    verdicts = []
    for path, body, footer, answer in zip(paths, bodies, footers, answers, strict=True):
        verdict = verdict_of(answer)
        old_why = footer[0].removeprefix(_MARK) if footer else path.stem
        lines = [_MARK + (why or old_why), f"# slurmctld 24.11: {'accepted' if verdict.accepted else 'refused'}"]
        lines += [f"# slurmctld {c.level}: {c.text}" for c in verdict.complaints]
        path.write_bytes(body + ("\n".join(lines) + "\n").encode("utf-8"))
        verdicts.append(verdict)
    return verdicts


def main() -> None:
    from tests.topology.conformance.run_conformance import oracle_port

    parser = argparse.ArgumentParser(description="Record slurmctld's verdict in conformance case files.")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--why", default=None)
    parser.add_argument("--block", action="store_true", help="topology/block files: ask 24.11 in the container")
    args = parser.parse_args()
    if args.block:
        for path, verdict in zip(args.files, record_block(args.files, args.why), strict=True):
            print(f"{path}: {verdict.summary()}")
        return
    root = Path(os.environ.get("RAILGANG_TEST_ROOT", f"/tmp/railgang-pytest-{os.getuid()}")) / "conformance"
    oracle = SlurmctldOracle(root / "oracle", oracle_port())
    for path in args.files:
        print(f"{path}: {record(oracle, path, args.why).summary()}")


if __name__ == "__main__":
    main()
