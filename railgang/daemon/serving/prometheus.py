"""Serving demand history from Prometheus (the live source; issue 19 item 2).

``railgang serving fetch URL --query Q`` asks Prometheus' HTTP API for a range query
(``/api/v1/query_range``) and writes the demand file the other commands read: one deployment per
series, named by a label (``--label``, default ``deployment``), the value rounded to replicas.
The answer is hostile input like any other: read bounded in bytes and in time (``timeout_s`` for the
whole answer, not per packet: a server that drips a byte at a time is given up), parsed once; an
answer that is not a successful matrix, or with more than ``MAX_SERIES`` series or ``MAX_POINTS``
points in one, is one error; a sample that is not a finite number >= 0 is skipped and counted.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from railgang.errors import InputError

MAX_POINTS = 11_000  # Prometheus' own limit per series of a range query
# a demand file is read by the daemon for a few pools; 32 series of 11,000 points written one row
# per point stay under its 16 MiB (model.DAEMON_DEMAND_MAX_BYTES)
MAX_SERIES = 32
# 32 full series at ~30 bytes a point ("[1800000000.000,\"12\"],") is ~11 MB, labels aside
MAX_ANSWER_BYTES = 24 * 2**20
_CHUNK = 2**16


@dataclass(frozen=True, slots=True)
class Fetched:
    series: dict[str, list[tuple[float, int]]]  # deployment -> (time_s from start, replicas)
    skipped: int  # samples that were not finite numbers >= 0


def query_range(url: str, query: str, start: float, end: float, step_s: float, *,
                timeout_s: float = 30.0) -> Any:
    """The decoded JSON answer of ``query_range`` (bounded read; errors are one line)."""
    if not url.startswith(("http://", "https://")):
        raise InputError(f"not an http(s) URL: {url[:80]!r}")
    if (end - start) / step_s > MAX_POINTS:
        raise InputError(f"{(end - start) / step_s:,.0f} points per series is more than "
                         f"Prometheus answers ({MAX_POINTS:,}): a longer --step-s or fewer days")
    params = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}",
                                     "end": f"{end:.3f}", "step": f"{step_s:g}"})
    target = url.rstrip("/") + "/api/v1/query_range?" + params
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    size = 0
    try:
        with urllib.request.urlopen(target, timeout=timeout_s) as answer:  # http(s) only: above
            # read1: at most one receive per call, so the clock is looked at between packets
            while chunk := answer.read1(_CHUNK):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise InputError(f"Prometheus answered more than "
                                     f"{MAX_ANSWER_BYTES // 2**20} MiB")
                if time.monotonic() > deadline:
                    raise InputError(f"Prometheus at {url[:80]}: no whole answer within "
                                     f"{timeout_s:g} s")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise InputError(f"Prometheus at {url[:80]}: {exc}") from exc
    body = b"".join(chunks)
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"Prometheus answered no JSON: {str(exc)[:80]}") from exc


def matrix_result(answer: Any, max_series: int, *, not_matrix: str = "",
                  too_many: str = "") -> list[Any]:
    """The series of a successful ``query_range`` answer (the serving and the ledger readers):
    InputError for anything else, so garbage is one error, never an empty success; ``not_matrix``
    and ``too_many`` end those errors with the reader's own advice."""
    if not isinstance(answer, Mapping) or answer.get("status") != "success":
        why = answer.get("error") if isinstance(answer, Mapping) else None
        raise InputError(f"Prometheus query failed: {str(why or 'not a success answer')[:120]}")
    data = answer.get("data")
    result = data.get("result") if isinstance(data, Mapping) else None
    if not isinstance(data, Mapping) or data.get("resultType") != "matrix" \
            or not isinstance(result, list):
        raise InputError(f"Prometheus answer is not a matrix{not_matrix}")
    if len(result) > max_series:
        raise InputError(f"Prometheus answered {len(result):,} series, more than "
                         f"{max_series:,}{too_many}")
    return result


def parse_matrix(answer: Any, start: float, label: str) -> Fetched:
    """Deployments from a ``query_range`` answer; times relative to ``start``."""
    result = matrix_result(answer, MAX_SERIES, not_matrix=" (use a range query)",
                           too_many=": a query of the configured deployments only")
    series: dict[str, list[tuple[float, int]]] = {}
    skipped = 0
    for item in result:
        metric = item.get("metric") if isinstance(item, Mapping) else None
        values = item.get("values") if isinstance(item, Mapping) else None
        name = metric.get(label) if isinstance(metric, Mapping) else None
        if not isinstance(name, str) or not name or not isinstance(values, list):
            skipped += len(values) if isinstance(values, list) else 1
            continue
        if len(values) > MAX_POINTS + 1:  # the query asked for at most MAX_POINTS steps
            raise InputError(f"Prometheus answered {len(values):,} points for {name[:40]!r}, "
                             f"more than {MAX_POINTS:,}")
        points = series.setdefault(name, [])
        for pair in values:
            try:
                t, v = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError, KeyError):
                skipped += 1
                continue
            if not (math.isfinite(t) and math.isfinite(v)) or v < 0 or t < start:
                skipped += 1
                continue
            points.append((t - start, round(v)))
    return Fetched({k: sorted(v) for k, v in series.items() if v}, skipped)


def demand_csv(fetched: Fetched, tp: Mapping[str, int], default_tp: int) -> str:
    """The demand file for ``fetched`` (one row per change)."""
    lines = ["time_s,deployment,replicas,tp"]
    for name in sorted(fetched.series):
        last = None
        for t, replicas in fetched.series[name]:
            if replicas != last:
                safe = name.replace(",", "_").replace('"', "_").replace("\n", "_")
                lines.append(f"{t:g},{safe},{replicas},{tp.get(name, default_tp)}")
                last = replicas
    return "\n".join(lines) + "\n"


__all__ = ["MAX_POINTS", "MAX_SERIES", "Fetched", "demand_csv", "matrix_result", "parse_matrix",
           "query_range"]
