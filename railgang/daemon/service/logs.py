"""Structured logs: ``--log-format json`` writes one JSON object per line, ``text`` a readable line
(``railgang daemon run`` and ``railgang api``).

Every record carries ``ts`` (epoch seconds), ``level``, ``logger`` and ``msg``; a cycle's record
adds the fields of :meth:`~railgang.daemon.service.cycle.CycleReport.as_log` (cycle id, phase
milliseconds, action counts, ...) passed as ``extra={"fields": {...}}``.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, Literal

LogFormat = Literal["json", "text"]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                               "logger": record.name, "msg": record.getMessage()}
        out.update(getattr(record, "fields", None) or {})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info).splitlines()[-1]
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "fields", None)
        if fields:
            line += " " + " ".join(f"{k}={json.dumps(v, default=str, separators=(',', ':'))}"
                                   for k, v in fields.items() if v not in (None, {}, 0))
        return line


def setup_logging(fmt: LogFormat, level: int = logging.INFO) -> None:
    """Send railgang's and apscheduler's logs to stderr in ``fmt``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.addHandler(handler)
    root.setLevel(level)
    # one line per job run, and alembic's per-connection chatter, are noise in a service log
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def logging_config(fmt: LogFormat, level: str = "info") -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for uvicorn (``railgang api``): its own loggers and the
    app's, all through one stderr handler in ``fmt``. uvicorn applies it in every worker process
    (``--workers N``), which a handler set up in the parent would not reach."""
    formatter = JsonFormatter if fmt == "json" else TextFormatter
    upper = "DEBUG" if level == "trace" else level.upper()
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"railgang": {"()": f"{formatter.__module__}.{formatter.__qualname__}"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "railgang",
                                "stream": "ext://sys.stderr"}},
        "root": {"handlers": ["stderr"], "level": upper},
        # uvicorn's loggers propagate to the root's handler instead of printing their own lines
        "loggers": {name: {"handlers": [], "propagate": True, "level": upper}
                    for name in ("uvicorn", "uvicorn.error", "uvicorn.access")},
    }


__all__ = ["JsonFormatter", "LogFormat", "TextFormatter", "logging_config", "setup_logging"]
