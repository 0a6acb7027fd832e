"""GPU telemetry as time series, and readers for the formats sites record.

A :class:`GpuSeries` is what every GPU detector reads: one GPU's samples in time order, SM
utilisation in percent (NVML "a kernel was running"), memory used in MiB and power in W where the
source has them. Readers validate every row and fail with one ``file:line: field: problem``.

* NVML scenario recordings (``t_s, scenario, sm_util_pct, ...``; ../shared/telemetry/h200):
  :func:`read_nvml_scenarios` returns one series per labelled scenario stretch.
* ``nvidia-smi --query-gpu=... --format=csv`` text: :func:`read_nvidia_smi_query`, through the
  ledger's own reader (``accounting.telemetry.parse_nvidia_smi_csv``) so both agree on the format.
* ``nvidia-smi dmon -s pucm`` text: :func:`read_dmon` (the ``# gpu pwr ... sm ... fb`` header
  names the columns; the sample interval is dmon's one second unless told).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, tzinfo

import numpy as np
import numpy.typing as npt

from railgang.daemon.ledger.telemetry import Sample, parse_nvidia_smi_csv
from railgang.errors import InputError

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's samples, sorted by time (seconds; any origin)."""

    key: str  # "node:gpu" (or a label for recordings)
    t: Floats
    sm: Floats  # 0..100
    mem_mib: Floats | None = None
    power_w: Floats | None = None
    mem_total_mib: float | None = None

    def __post_init__(self) -> None:
        n = len(self.t)
        for name in ("sm", "mem_mib", "power_w"):
            arr = getattr(self, name)
            if arr is not None and len(arr) != n:
                raise ValueError(f"{name} has {len(arr)} values for {n} times")
        if n > 1 and bool(np.any(np.diff(self.t) < 0)):
            raise ValueError("times must be sorted")

    def __len__(self) -> int:
        return len(self.t)

    def slice(self, lo: float, hi: float) -> GpuSeries:
        """Samples with lo <= t < hi."""
        a, b = np.searchsorted(self.t, [lo, hi])
        return GpuSeries(self.key, self.t[a:b], self.sm[a:b],
                         None if self.mem_mib is None else self.mem_mib[a:b],
                         None if self.power_w is None else self.power_w[a:b], self.mem_total_mib)


def series_from_samples(samples: list[Sample], *, key: str | None = None) -> GpuSeries:
    """Samples of one GPU (ledger ``Sample`` rows) as a series; time in seconds."""
    samples = sorted(samples, key=lambda x: x.at_ms)
    mem = [x.mem_used_mib for x in samples]
    power = [x.power_w for x in samples]
    first = samples[0] if samples else None
    return GpuSeries(
        key or (f"{first.node}:{first.gpu}" if first else "empty"),
        np.array([x.at_ms / 1000.0 for x in samples], dtype=np.float64),
        np.array([x.sm_util for x in samples], dtype=np.float64),
        None if any(v is None for v in mem) else np.array(mem, dtype=np.float64),
        None if any(v is None for v in power) else np.array(power, dtype=np.float64))


_NVML_COLUMNS = ("t_s", "scenario", "sm_util_pct", "mem_used_mib", "mem_total_mib", "power_w")


def read_nvml_scenarios(text: str, *, source: str = "nvml.csv") -> list[tuple[str, GpuSeries]]:
    """``(scenario, series)`` for each stretch of consecutive rows with one label, in order."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise InputError("empty file", path=source)
    header = [h.strip() for h in rows[0]]
    missing = [c for c in _NVML_COLUMNS if c not in header]
    if missing:
        raise InputError(f"header lacks {', '.join(missing)}", path=source, line=1)
    col = {h: i for i, h in enumerate(header)}
    out: list[tuple[str, list[tuple[float, float, float, float, float]]]] = []
    last_t = -np.inf
    mem_total = None
    for n, row in enumerate(rows[1:], start=2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(header):
            raise InputError(f"{len(row)} fields, the header has {len(header)}", path=source,
                             line=n)
        values: dict[str, float] = {}
        for name in ("t_s", "sm_util_pct", "mem_used_mib", "mem_total_mib", "power_w"):
            try:
                values[name] = float(row[col[name]])
            except ValueError as exc:
                raise InputError(f"{row[col[name]]!r} is not a number", path=source, line=n,
                                 field=name) from exc
            if not np.isfinite(values[name]):
                raise InputError("not a finite number", path=source, line=n, field=name)
        if not 0 <= values["sm_util_pct"] <= 100:
            raise InputError(f"{values['sm_util_pct']} is not a percentage", path=source,
                             line=n, field="sm_util_pct")
        if values["t_s"] < last_t:
            raise InputError("time goes backwards", path=source, line=n, field="t_s")
        last_t = values["t_s"]
        label = row[col["scenario"]].strip()
        if not label:
            raise InputError("empty scenario label", path=source, line=n, field="scenario")
        mem_total = values["mem_total_mib"]
        point = (values["t_s"], values["sm_util_pct"], values["mem_used_mib"],
                 values["power_w"], mem_total)
        if out and out[-1][0] == label:
            out[-1][1].append(point)
        else:
            out.append((label, [point]))
    if not out:
        raise InputError("no samples", path=source)
    result = []
    for label, pts in out:
        arr = np.array(pts, dtype=np.float64)
        result.append((label, GpuSeries(label, arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3],
                                        float(arr[0, 4]))))
    return result


def read_nvidia_smi_query(text: str, *, node: str = "gpu-node", source: str = "nvidia-smi.csv",
                          tz: tzinfo = UTC) -> dict[int, GpuSeries]:
    """One series per GPU index of an ``nvidia-smi --query-gpu`` CSV capture."""
    samples = parse_nvidia_smi_csv(text, node=node, source=source, tz=tz)
    if not samples:
        raise InputError("no samples", path=source)
    total = _mem_total(text)
    by_gpu: dict[int, list[Sample]] = {}
    for smp in samples:
        by_gpu.setdefault(smp.gpu, []).append(smp)
    out = {}
    for gpu, smps in sorted(by_gpu.items()):
        s = series_from_samples(smps, key=f"{node}:{gpu}")
        out[gpu] = GpuSeries(s.key, s.t, s.sm, s.mem_mib, s.power_w, total.get(gpu))
    return out


def _mem_total(text: str) -> dict[int, float]:
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    header = [h.strip().split(" [")[0] for h in rows[0]]
    if "memory.total" not in header or "index" not in header:
        return {}
    i, g = header.index("memory.total"), header.index("index")
    out: dict[int, float] = {}
    for row in rows[1:]:
        if len(row) > max(i, g):
            try:
                out.setdefault(int(row[g]), float(row[i].split()[0]))
            except (ValueError, IndexError):
                continue  # parse_nvidia_smi_csv has already refused malformed rows
    return out


def read_dmon(text: str, *, source: str = "dmon.txt", interval_s: float = 1.0
              ) -> dict[int, GpuSeries]:
    """``nvidia-smi dmon`` output: one series per GPU (sm %, fb MiB, pwr W)."""
    header: list[str] | None = None
    rows: dict[int, list[tuple[float, float, float]]] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.startswith("#"):
            if header is None:
                header = line.lstrip("#").split()
            continue
        if header is None:
            raise InputError("data before the '# gpu ...' header line", path=source, line=n)
        need = [c for c in ("gpu", "sm", "pwr") if c not in header]
        if need:
            raise InputError(f"header lacks {', '.join(need)} (run dmon with -s pu)",
                             path=source, line=1)
        parts = line.split()
        if len(parts) != len(header):
            raise InputError(f"{len(parts)} columns, the header has {len(header)}",
                             path=source, line=n)
        field = "gpu"
        try:
            gpu = int(parts[header.index("gpu")])
            field = "sm"
            sm = _dash(parts[header.index("sm")])
            field = "pwr"
            pwr = _dash(parts[header.index("pwr")])
            field = "fb"
            fb = _dash(parts[header.index("fb")]) if "fb" in header else np.nan
        except ValueError as exc:
            raise InputError(f"not a number: {exc}", path=source, line=n, field=field) from exc
        if not 0 <= sm <= 100:
            raise InputError(f"{sm} is not a percentage", path=source, line=n, field="sm")
        rows.setdefault(gpu, []).append((sm, fb, pwr))
    if not rows:
        raise InputError("no samples", path=source)
    out = {}
    for gpu, pts in sorted(rows.items()):
        arr = np.array(pts, dtype=np.float64)
        t = np.arange(len(arr), dtype=np.float64) * interval_s
        mem = None if bool(np.isnan(arr[:, 1]).any()) else arr[:, 1]
        out[gpu] = GpuSeries(f"dmon:{gpu}", t, arr[:, 0], mem, arr[:, 2])
    return out


def _dash(text: str) -> float:
    return 0.0 if text == "-" else float(text)


__all__ = ["Floats", "GpuSeries", "read_dmon", "read_nvidia_smi_query", "read_nvml_scenarios",
           "series_from_samples"]
