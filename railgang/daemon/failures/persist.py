"""The failure memory a restarted daemon keeps (issue 33 item 3): per node, the times of the job
failures counted against it inside the flaky window, and which kills were already counted.

Without it a restart forgot every count below the flaky threshold (two failures of three: the
node started again from zero), and counted again the kills squeue still shows (``MinJobAge``).
What Slurm itself keeps is not stored here: nodes drained as flaky, burn-in jobs and their
reservations are taken over from Slurm (``adopt.py``).

One JSON file (``failures.memory_file``, next to the heartbeat by default), written atomically
after a cycle that changed what it holds. Reading is defensive: a file that is not ours, or a
malformed entry, is a warning and is left out, never a failed start; times in the future or
past the window are dropped.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from railgang.daemon.failures.flaky import FlakyRules, FlakyState, NodeStatus, _Node
from railgang.daemon.failures.respond import Memory
from railgang.daemon.failures.step import FailureMemory

log = logging.getLogger(__name__)

VERSION = 1
MAX_NODES = 100_000
MAX_NAME = 64


def dump(memory: Memory, now: float, rules: FlakyRules) -> str:
    """The part of ``memory`` a restart must not lose, as canonical JSON."""
    failures = {node: sorted(t for t in n.failures if now - t < rules.window_s)
                for node, n in sorted(memory.flaky.nodes.items())
                if n.status is NodeStatus.OK and n.failures}
    return json.dumps({"version": VERSION,
                       "failures": {k: v for k, v in failures.items() if v},
                       "counted": sorted([j, r] for j, r in memory.counted),
                       "running": {j: [r, list(nodes)] for j, (r, nodes) in sorted(memory.running.items())}},
                      sort_keys=True, separators=(",", ":"))


def _name(value: object) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= MAX_NAME else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else None


def load(text: str, now: float, rules: FlakyRules) -> tuple[Memory, int]:
    """A :class:`Memory` from :func:`dump`'s text, and how many entries were left out.

    Raises ``ValueError`` when the text is not this file at all (not JSON, another version)."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError(f"not a railgang failure memory of version {VERSION}")
    bad = 0
    nodes: dict[str, _Node] = {}
    raw_failures = data.get("failures")
    for node, times in (raw_failures.items() if isinstance(raw_failures, Mapping) else ()):
        ok = [t for t in times if isinstance(t, int | float) and not isinstance(t, bool)
              and math.isfinite(t) and 0 <= now - t < rules.window_s] if isinstance(times, list) else []
        if _name(node) is None or not isinstance(times, list) or len(nodes) >= MAX_NODES:
            bad += 1
        elif ok:
            nodes[node] = _Node(failures=tuple(sorted(ok)))
    counted: set[tuple[str, int]] = set()
    for item in data.get("counted") or ():
        job, restarts = [*item, None, None][:2] if isinstance(item, list) else (None, None)
        name, count = _name(job), _count(restarts)
        if name is None or count is None:
            bad += 1
        else:
            counted.add((name, count))
    running: dict[str, tuple[int, tuple[str, ...]]] = {}
    raw_running = data.get("running")
    for job, item in (raw_running.items() if isinstance(raw_running, Mapping) else ()):
        restarts, on = [*item, None, None][:2] if isinstance(item, list) else (None, None)
        names = [_name(n) for n in on] if isinstance(on, list) else [None]
        name, count = _name(job), _count(restarts)
        if name is None or count is None or None in names:
            bad += 1
        else:
            running[name] = (count, tuple(n for n in names if n is not None))
    memory = Memory(running=MappingProxyType(running), counted=frozenset(counted),
                    flaky=FlakyState(MappingProxyType(nodes)))
    return memory, bad


def merged(base: Memory, kept: Memory) -> Memory:
    """``base`` (a fresh memory) with what ``kept`` remembered."""
    return replace(base, running=kept.running, counted=kept.counted, flaky=kept.flaky)


def write(path: Path, text: str) -> None:
    """Atomically: a crash leaves the old file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class MemoryFile:
    """The failure step's memory store (``pipeline.MemoryStore``): read once before the first
    cycle, written after a cycle that changed what it holds."""

    def __init__(self, path: Path, rules: FlakyRules) -> None:
        self.path, self.rules, self._saved = path, rules, ""

    def load(self, memory: FailureMemory, now: float) -> FailureMemory:
        if not self.path.exists():
            return memory
        try:
            kept, bad = load(self.path.read_text(), now, self.rules)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.warning("failures: failure memory %s unreadable, starting from none: %s",
                        self.path, exc)
            return memory
        if bad:
            log.warning("failures: failure memory %s: %d malformed entries left out", self.path, bad)
        return dataclasses.replace(memory, memory=merged(memory.memory, kept))

    def save(self, memory: FailureMemory, now: float) -> None:
        text = dump(memory.memory, now, self.rules)
        if text != self._saved:
            try:
                write(self.path, text)
                self._saved = text
            except OSError as exc:  # counting goes on in memory; tried again next cycle
                log.warning("failures: failure memory %s not written: %s", self.path, exc)


__all__ = ["VERSION", "MemoryFile", "dump", "load", "merged", "write"]
