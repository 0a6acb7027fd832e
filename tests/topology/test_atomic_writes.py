"""Two writers at once on a file railgang writes (issue 11 part 7): the daemon's link state file and
``railgang topology discover -o``. Each write replaces the file whole: a reader never sees a torn or
empty file and no writer fails because another renamed its temporary file away."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from railgang.daemon.config import LinkSettings
from railgang.daemon.service.links import LinkCollector, LinkRound
from railgang.topology.inputs import write_atomic

ROUNDS = 300


def _hammer(writers: list[threading.Thread], path: Path) -> list[str]:
    """Start the writers and read ``path`` until they end; the texts that did not parse."""
    torn: list[str] = []
    for w in writers:
        w.start()
    while any(w.is_alive() for w in writers):
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        try:
            json.loads(text)
        except json.JSONDecodeError:
            torn.append(text[:80])
    for w in writers:
        w.join()
    return torn


def test_write_atomic_two_writers(tmp_path: Path) -> None:
    path = tmp_path / "facts.json"
    bodies = [json.dumps({"writer": k, "pad": "x" * 200_000}) for k in range(2)]
    failures: list[BaseException] = []

    def write(body: str) -> None:
        try:
            for _ in range(ROUNDS // 3):
                write_atomic(path, body)
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    torn = _hammer([threading.Thread(target=write, args=(b,)) for b in bodies], path)
    assert not failures and not torn
    assert path.read_text() in bodies
    assert [p.name for p in tmp_path.iterdir()] == ["facts.json"]  # no temporary file left behind


def test_link_state_file_two_collectors(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    state = tmp_path / "links.json"
    collectors = [LinkCollector(LinkSettings(state_file=state)) for _ in range(2)]
    result = LinkRound(at=1.0, hosts=0, samples=0, errors=("x" * 100_000,), changes=(), seconds=0.0)

    def write(c: LinkCollector) -> None:
        for _ in range(ROUNDS):
            c._write_state(result)

    with caplog.at_level(logging.ERROR, logger="railgang.daemon.links"):
        torn = _hammer([threading.Thread(target=write, args=(c,)) for c in collectors], state)
    for c in collectors:
        c.close()
    assert not torn
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert json.loads(state.read_text())["collected_at"] == 1.0
