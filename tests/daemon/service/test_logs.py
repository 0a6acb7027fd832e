"""Log formats: one JSON object per line (with the cycle's fields), or a readable text line."""

from __future__ import annotations

import json
import logging

from railgang.daemon.service.logs import JsonFormatter, TextFormatter


def _record(fields: dict[str, object] | None, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise RuntimeError("slurmctld unreachable")
        except RuntimeError:
            import sys

            info = sys.exc_info()
    rec = logging.LogRecord("railgang.daemon", logging.INFO, __file__, 1, "cycle %d", (7,), info)
    if fields is not None:
        rec.fields = fields
    return rec


def test_json_lines_carry_the_cycle_fields() -> None:
    line = JsonFormatter().format(_record({"cycle": 7, "ms": {"place": 1.5}, "actions": {}}))
    assert "\n" not in line
    data = json.loads(line)
    assert data["msg"] == "cycle 7" and data["level"] == "info" and data["cycle"] == 7
    assert data["ms"] == {"place": 1.5} and data["logger"] == "railgang.daemon"
    assert isinstance(data["ts"], float)


def test_json_keeps_only_the_exception_line() -> None:
    data = json.loads(JsonFormatter().format(_record(None, exc=True)))
    assert data["exc"] == "RuntimeError: slurmctld unreachable"


def test_text_lines_show_non_empty_fields_as_key_value() -> None:
    line = TextFormatter().format(_record({"cycle": 7, "failed": 0, "error": None,
                                           "actions": {"Start": 2}}))
    assert line.endswith('railgang.daemon: cycle 7 cycle=7 actions={"Start":2}')
