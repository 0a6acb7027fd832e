"""Reader for the Philly-derived traces published with Gavel (see ../shared/traces/philly-gavel).

Layout: a directory with ``simulation_throughputs.json`` and ``seed=0/*.trace`` (one file per
Philly virtual cluster). All VC files are merged and ordered by arrival; the VC name (file stem)
becomes the job's ``account``. Each line is tab-separated::

    job_type  command  num_steps_arg  needs_data_dir  total_steps  arrival_time_s  scale_factor

Duration on V100 = total_steps / throughput, where throughput (steps/s) is
``simulation_throughputs.json["v100"]["('<job_type>', <scale_factor>)"]["null"]``.

**Missing (job_type, scale_factor) pairs** (about 10 % of jobs: sizes such as 16, 32, 64 and
multi-GPU runs of models Gavel measured only on one GPU, e.g. Recommendation, A3C, CycleGAN):
take the nearest measured size s' of the same job type (nearest in log2, ties to the larger) and
scale linearly, ``thr(s) = thr(s') * s / s'``. Linear scaling matches how the trace was generated:
for the one-GPU-only models the median ``total_steps`` grows roughly with the GPU count (A3C: 68k
steps at 1 GPU, 1.06M at 8; Recommendation: 3.8k at 1, 27k at 8), so dividing by a linearly
scaled throughput gives run times of the same order as the measured sizes. The loader records
how many jobs were derived this way in ``Trace.notes``.
"""

from __future__ import annotations

import ast
import math
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path

from railgang.daemon.sim.traces.csv_trace import TRACE_MAX_BYTES
from railgang.daemon.sim.traces.model import (
    MAX_TRACE_GPUS,
    MAX_TRACE_SECONDS,
    Item,
    Problem,
    Trace,
    TraceFormat,
    TraceJob,
    collect,
)
from railgang.errors import InputError
from railgang.topology.files import InputProblem, iter_lines, parse_json, read_text

GPU_TYPE = "v100"
OTHER_TYPES = ("p100", "k80")  # measured too: the per-type speeds of a mixed-cluster replay
_REPO_ROOT = Path(__file__).resolve().parents[4]
ENV_VAR = "RAILGANG_PHILLY_DIR"
THROUGHPUTS_MAX_BYTES = 64 * 2**20  # Gavel's table is 1.2 MB; bounded like every input (issue 11 part 7)


def default_dir() -> Path:
    """``$RAILGANG_PHILLY_DIR`` or ``../shared/traces/philly-gavel`` next to the repository."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return _REPO_ROOT.parent / "shared" / "traces" / "philly-gavel"


def load_throughputs(path: Path, gpu_type: str = GPU_TYPE) -> dict[str, dict[int, float]]:
    """``{job_type: {gpus: steps_per_s}}`` for the jobs measured running alone on ``gpu_type``."""
    try:
        raw = parse_json(read_text(path, "throughputs file", limit=THROUGHPUTS_MAX_BYTES), str(path),
                         "throughputs file")
    except InputProblem as exc:
        raise InputError(exc.message, path=exc.path, line=exc.line, field=exc.field) from exc
    if not isinstance(raw, dict) or gpu_type not in raw:
        raise InputError(f"no {gpu_type!r} table", path=str(path))
    table: dict[str, dict[int, float]] = {}
    for key, entry in raw[gpu_type].items():
        try:
            parsed = ast.literal_eval(key)
        except (ValueError, SyntaxError):
            continue
        if (not isinstance(parsed, tuple) or len(parsed) != 2 or not isinstance(parsed[0], str)
                or not isinstance(parsed[1], int)):
            continue  # packed pairs of jobs, not a job running alone
        value = entry.get("null") if isinstance(entry, dict) else None
        if isinstance(value, int | float) and value > 0:
            table.setdefault(parsed[0], {})[parsed[1]] = float(value)
    return table


def throughput(measured: Mapping[int, float], gpus: int) -> tuple[float, bool]:
    """Steps/s at ``gpus`` GPUs and whether it was derived (see the module docstring)."""
    if gpus in measured:
        return measured[gpus], False
    nearest = min(measured, key=lambda s: (abs(math.log2(s) - math.log2(gpus)), -s))
    return measured[nearest] * gpus / nearest, True


def _trace_files(path: Path) -> tuple[list[Path], Path]:
    if path.is_file():
        files = [path]
        root = path.parent
    else:
        files = sorted(path.glob("seed=0/*.trace")) or sorted(path.glob("*.trace"))
        root = path
        if not files:
            raise InputError("no *.trace files (expected seed=0/*.trace)", path=str(path))
    for candidate in (root, root.parent, root.parent.parent):
        if (candidate / "simulation_throughputs.json").is_file():
            return files, candidate / "simulation_throughputs.json"
    raise InputError("simulation_throughputs.json not found beside the trace", path=str(path))


def read_philly(path: Path | None = None, *, strict: bool = False,
                limit: int | None = None) -> Trace:
    """Read one ``.trace`` file or a whole trace directory (all VCs merged by submit time); with
    ``limit``, only the first ``limit`` jobs, each file read no further than that needs."""
    path = default_dir() if path is None else path
    if not path.exists():
        raise InputError(f"trace not found (set --trace or ${ENV_VAR})", path=str(path))
    files, thr_path = _trace_files(path)
    table = load_throughputs(thr_path)
    others = {t: load_throughputs(thr_path, t) for t in OTHER_TYPES if _has_type(thr_path, t)}
    derived: dict[str, str] = {}  # job id -> "model xGPUs" of jobs whose throughput was derived

    def items(file: Path) -> Iterator[Item]:
        lines = iter_lines(file, "trace", max_bytes=TRACE_MAX_BYTES)
        while True:  # streamed: an InputProblem (binary, a FIFO, over the cap) comes from next()
            try:
                lineno, line = next(lines)
            except StopIteration:
                return
            except InputProblem as exc:
                raise InputError(exc.message, path=exc.path, line=exc.line, field=exc.field) from exc
            if not line.strip():
                continue
            problem, job, was_derived = _parse_line(line, table, file.stem, str(file), lineno, others)
            if problem is not None:
                if strict:
                    raise InputError(problem.message, path=problem.path, line=problem.line,
                                     field=problem.field)
                yield problem
            elif job is not None:
                if was_derived:
                    derived[job.job_id] = f"{job.model} x{job.gpus}"
                yield job

    jobs, problems = collect([items(f) for f in files], limit=limit,
                             key=lambda job, _n: (job.submit_time, job.job_id))
    notes: list[str] = []
    kept = Counter(derived[j.job_id] for j in jobs if j.job_id in derived)
    if kept:
        total = sum(kept.values())
        notes.append(f"{total} of {len(jobs)} jobs had no measured throughput for their size; "
                     "derived linearly from the nearest measured size of the same model")
    return Trace(jobs=tuple(jobs), problems=tuple(problems), notes=tuple(notes))


def _has_type(path: Path, gpu_type: str) -> bool:
    try:
        return gpu_type in parse_json(read_text(path, "throughputs file", limit=THROUGHPUTS_MAX_BYTES),
                                      str(path), "throughputs file")
    except InputProblem:
        return False


def type_rates(job_type: str, gpus: int, thr: float,
               others: Mapping[str, Mapping[str, Mapping[int, float]]]) -> dict[str, float]:
    """Speed on each other GPU type relative to V100 at this size (the same nearest-size rule
    when a size was not measured); types that never ran the model are left out."""
    out = {GPU_TYPE: 1.0}
    for gpu_type, table in others.items():
        measured = table.get(job_type)
        if measured:
            out[gpu_type] = throughput(measured, gpus)[0] / thr
    return out


def _parse_line(line: str, table: Mapping[str, Mapping[int, float]], vc: str, path: str,
                lineno: int, others: Mapping[str, Mapping[str, Mapping[int, float]]] | None = None,
                ) -> tuple[Problem | None, TraceJob | None, bool]:
    cells = line.split("\t")
    if len(cells) != 7:
        return Problem(path, lineno, None, f"expected 7 tab-separated cells, got {len(cells)}"), \
            None, False
    job_type = cells[0].strip()
    try:
        steps = int(cells[4])
    except ValueError:
        return Problem(path, lineno, "total_steps", f"not an integer: {cells[4]!r}"), None, False
    try:
        arrival = float(cells[5])
    except ValueError:
        return Problem(path, lineno, "arrival_time_s", f"not a number: {cells[5]!r}"), None, False
    try:
        gpus = int(cells[6])
    except ValueError:
        return Problem(path, lineno, "scale_factor", f"not an integer: {cells[6]!r}"), None, False
    if steps <= 0:
        return Problem(path, lineno, "total_steps", f"must be > 0, got {steps}"), None, False
    if not math.isfinite(arrival) or not 0 <= arrival <= MAX_TRACE_SECONDS:
        return Problem(path, lineno, "arrival_time_s",
                       f"must be in 0..{MAX_TRACE_SECONDS:g}, got {cells[5]}"), None, False
    if not 1 <= gpus <= MAX_TRACE_GPUS:
        return Problem(path, lineno, "scale_factor", f"must be in 1..{MAX_TRACE_GPUS}, got {gpus}"), \
            None, False
    measured = table.get(job_type)
    if not measured:
        return Problem(path, lineno, "job_type", f"no measured throughput for {job_type!r}"), \
            None, False
    thr, derived = throughput(measured, gpus)
    if steps > MAX_TRACE_SECONDS * thr:  # compared, not divided: 400 digits overflow a float
        return Problem(path, lineno, "total_steps", f"{steps} steps run longer than "
                       f"{MAX_TRACE_SECONDS:g} s"), None, False
    # the per-size table becomes the job's scaling curve (sizes above 8 derived linearly)
    curve = dict(measured)
    curve[gpus] = thr
    job = TraceJob(job_id=f"{vc}-{lineno}", submit_time=arrival, gpus=gpus,
                   duration_s=steps / thr, account=vc, model=job_type,
                   throughput_by_gpus=curve, type_rates=type_rates(job_type, gpus, thr, others or {}))
    return None, job, derived


FORMAT = TraceFormat(
    name="philly-gavel",
    summary="Gavel's Philly-derived traces: a directory with seed=0/*.trace, or one .trace file",
    read=read_philly,
    claims=lambda path: path.is_dir() or path.suffix == ".trace",
)

__all__ = ["ENV_VAR", "FORMAT", "GPU_TYPE", "default_dir", "load_throughputs", "read_philly", "throughput"]
