"""Check that a regenerated pin file only *adds* keys: every metric the old file pinned, and every
job's row (start, finish, preemptions, resizes, GPU-s lost) or its digest, is identical.

    .venv/bin/python -m tests.daemon.sim.pin_diff OLD.json NEW.json

Exit 0 and a summary when nothing pinned changed; exit 1 with the differences otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _same(old: Any, new: Any) -> bool:
    """``new`` holds everything ``old`` did, unchanged (dicts may gain keys, e.g. per account)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _same(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return (isinstance(new, list) and len(old) == len(new)
                and all(_same(a, b) for a, b in zip(old, new, strict=True)))
    return json.dumps(old) == json.dumps(new)


def differences(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], set[str]]:
    """(what changed, which metric keys are new) between two pinned files."""
    changed: list[str] = []
    added: set[str] = set()
    for run, want in old.items():
        got = new.get(run)
        if got is None:
            changed.append(f"{run}: missing")
            continue
        for key in ("jobs", "jobs_sha256"):
            if key in want and json.dumps(want[key]) != json.dumps(got.get(key)):
                changed.append(f"{run}: {key} differs")
        for key, value in want["metrics"].items():
            if not _same(value, got["metrics"].get(key)):
                changed.append(f"{run}: metric {key} {value!r} -> {got['metrics'].get(key)!r}")
        added |= set(got["metrics"]) - set(want["metrics"])
    return changed, added


def main() -> None:
    old, new = (json.loads(Path(p).read_text()) for p in sys.argv[1:3])
    changed, added = differences(old, new)
    for line in changed:
        print(line)
    print(f"{len(old)} runs; {len(changed)} differences; new metric keys: {sorted(added)}")
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
