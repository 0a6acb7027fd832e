"""Issue 18 row 9 / Deliver 4: one hostile-input corpus against every file-reading entry point of
the ``railgang`` CLI, each run as the real command in a subprocess under an address-space limit
and a timeout: never a traceback, never a hang, never a full memory.

The entry points are a table (``READERS``), and ``test_every_path_option_is_classified`` walks the
CLI and fails when a command grows a path-typed option or argument that is neither in the table
nor in ``NOT_READERS`` (outputs and directories railgang owns), so a new reader cannot skip it.

File-level kinds (empty, /dev/zero, a FIFO, a directory, binary, not UTF-8, NUL bytes, 50 MB,
nesting 100,000 deep) must end in one clear line naming the file and a non-zero exit. Record-level
kinds (NaN/Infinity, far-future times, written in each reader's own format) may also be accepted
(a bad record is skipped with a warning, docs/security.md); they must not crash either.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

RAILGANG = str(Path(sys.executable).with_name("railgang"))
ADDRESS_LIMIT = 3 * 2**30  # far above what these commands need, far below /dev/zero slurped whole
TIMEOUT_S = 60  # a FIFO read blocks for ever; anything near this is a hang
SINCE = ["--since", "2026-11-30T00:00:00", "--until", "2026-11-30T01:00:00"]
VALID_CONF = "SwitchName=leaf1 Nodes=gpu[001-004]\n"
VALID_TRACE = "job_id,submit_time,gpus,duration_s\nj1,0,8,3600\n"


@dataclass(frozen=True)
class Reader:
    """How to run one entry point: ``{}`` in ``args`` is the hostile path, ``{conf}``/``{trace}``
    valid companions. ``nan``/``future``: the record-level kinds in this reader's own format."""

    args: tuple[str, ...]
    nan: str = '{"value": NaN, "other": Infinity}\n'
    future: str = '{"time": "9999-12-31T23:59:59", "epoch": 253402300799}\n'
    max_lines: int = 1  # stderr lines allowed for a refusal (warnings before the error)
    accepts: frozenset[str] = field(default_factory=frozenset)  # file-level kinds it may accept


CSV_NAN = "job_id,submit_time,gpus,duration_s\nj1,nan,8,inf\nj2,0,8,NaN\n"
CSV_FUTURE = "job_id,submit_time,gpus,duration_s\nj1,1e300,8,3600\nj2,253402300799,8,1e300\n"
SACCT_NAN = '{"jobs": [{"job_id": 1, "time": {"start": NaN, "end": Infinity}}]}\n'
SACCT_FUTURE = ('{"jobs": [{"job_id": 1, "state": {"current": ["COMPLETED"]}, "time": '
                '{"submission": 253402300799, "start": 253402300799, "end": 253402300800}}]}\n')
SMI = "timestamp, index, utilization.gpu [%]\n"
FACTS_NAN = '{"defaults": {"gpus": NaN, "gpu_mem_gb": Infinity}}\n'
FREE_NAN = '{"gpu001": [NaN], "gpu002": Infinity}\n'
DEMAND_NAN = "time_s,deployment,replicas,tp\n0,chat,nan,8\ninf,chat,1,8\n"
DEMAND_FUTURE = "time_s,deployment,replicas,tp\n1e300,chat,1,8\n253402300799,chat,1,8\n"

# every file-reading option and argument of the CLI ("command option" -> how to run it)
READERS: dict[str, Reader] = {
    "--config": Reader(("--config", "{}", "config", "show"),
                       nan="[daemon]\ncycle_interval_s = nan\n",
                       future="[daemon]\nexplain_retention_s = 1e300\n",
                       accepts=frozenset({"empty"})),  # an empty config file means the defaults
    "ledger ingest --file": Reader(("ledger", "ingest", "--file", "{}", *SINCE),
                                   nan=SACCT_NAN, future=SACCT_FUTURE, max_lines=3),
    "ledger reconcile --file": Reader(("ledger", "reconcile", "--file", "{}", *SINCE),
                                      nan=SACCT_NAN, future=SACCT_FUTURE, max_lines=3),
    "ledger telemetry path": Reader(("ledger", "telemetry", "{}", "--format", "nvidia-smi",
                                     "--node", "gpu001"),
                                    nan=SMI + "2026/11/30 00:00:00.000, 0, nan\n",
                                    future=SMI + "9999/12/31 23:59:59.000, 0, 50\n"),
    "sim --trace": Reader(("sim", "--trace", "{}", "--format", "csv", "--nodes", "2", "-q"),
                          nan=CSV_NAN, future=CSV_FUTURE, max_lines=12),
    "sim --trace (philly-gavel)": Reader(("sim", "--trace", "{}", "--format", "philly-gavel",
                                          "--nodes", "2", "-q"),
                                         nan="ResNet-18\tx\ty\tz\t100\tnan\t1\n",
                                         future="ResNet-18\tx\ty\tz\t100\t1e300\t1\n", max_lines=12),
    "sim --topology": Reader(("sim", "--trace", "{trace}", "--topology", "{}", "-q")),
    "sim --quotas": Reader(("sim", "--trace", "{trace}", "--nodes", "2", "--quotas", "{}", "-q"),
                           nan='[org]\nname = "o"\nguaranteed = nan\n',
                           future='[org]\nname = "o"\nguaranteed = 1e300\n'),
    "sim sweep grid_file": Reader(("sim", "sweep", "{}", "--local", "1"),
                                  nan='[sweep]\ntimeout_s = nan\n',
                                  future='[fixed]\ntrace = "t.csv"\nseed = 1e300\n'),
    "sim --serving": Reader(("sim", "--trace", "{trace}", "--nodes", "2", "--serving", "{}", "-q"),
                            nan=DEMAND_NAN, future=DEMAND_FUTURE, max_lines=3),
    "serving show path": Reader(("serving", "show", "{}"), nan=DEMAND_NAN, future=DEMAND_FUTURE,
                                max_lines=3),
    "serving forecast path": Reader(("serving", "forecast", "{}"), nan=DEMAND_NAN,
                                    future=DEMAND_FUTURE, max_lines=3),
    "serving plan path": Reader(("serving", "plan", "{}"), nan=DEMAND_NAN, future=DEMAND_FUTURE,
                                max_lines=3),
    "topology check file": Reader(("topology", "check", "{}"), max_lines=3),
    "topology show file": Reader(("topology", "show", "{}")),
    "topology check --slurm-conf": Reader(("topology", "check", "{conf}", "--slurm-conf", "{}")),
    "topology show --facts": Reader(("topology", "show", "{conf}", "--facts", "{}"),
                                    nan=FACTS_NAN),
    # a snapshot is a directory: an empty one is an empty snapshot (0 ports), not an error
    "topology links before": Reader(("topology", "links", "{}", "{snap}", "-t", "{conf}"),
                                    accepts=frozenset({"directory"})),
    "topology links after": Reader(("topology", "links", "{snap}", "{}", "-t", "{conf}"),
                                   accepts=frozenset({"directory"})),
    "topology links --topology": Reader(("topology", "links", "{snap}", "{snap}", "-t", "{}")),
    "topology links --state": Reader(("topology", "links", "--state", "{}"),
                                     nan='{"ports": [{"gbps": NaN}], "hosts": Infinity}\n'),
    "topology links --facts": Reader(("topology", "links", "{snap}", "{snap}", "-t", "{conf}",
                                      "--facts", "{}"), nan=FACTS_NAN),
    "topology discover source": Reader(("topology", "discover", "{}"), max_lines=3),
    "topology discover --node-name-map": Reader(("topology", "discover", "{ibnet}",
                                                 "--node-name-map", "{}")),
    "topology discover --rail-map": Reader(("topology", "discover", "{ibnet}", "--rail-map", "{}"),
                                           nan='{"*": {"mlx5_0": NaN}}\n'),
    "topology discover --nvidia-smi": Reader(("topology", "discover", "{ibnet}", "--nvidia-smi",
                                              "{}")),
    "place --topology": Reader(("place", "-t", "{}", "--gpus", "8")),
    "place --free": Reader(("place", "-t", "{conf}", "--gpus", "8", "--free", "{}"),
                           nan=FREE_NAN),
    "place --facts": Reader(("place", "-t", "{conf}", "--gpus", "8", "--facts", "{}"),
                            nan=FACTS_NAN),
}

# path-typed options that are not input files, and why
NOT_READERS: dict[str, str] = {
    "quota grants-file path": "output: the grants file it writes",
    "topology discover --output": "output: the topology.conf it writes",
    "topology discover --facts-out": "output: the facts file it writes",
    "sim --jobs-csv": "output: the per-job CSV it writes",
    "serving fetch --out": "output: the demand CSV it writes",
    "sim sweep --out": "output directory of the sweep",
    "demo --out": "output directory of the demo",
    "report --out": "output directory of the report",
    "devcluster up --dir": "the test cluster's own state directory",
    "devcluster render --dir": "the test cluster's own state directory",
    "devcluster render --spank": "a built plugin slurmctld loads; railgang only names it",
    "devcluster accounts --dir": "the test cluster's own state directory",
    "devcluster down --dir": "the test cluster's own state directory",
    "devcluster status --dir": "the test cluster's own state directory",
}

FILE_KINDS = ["empty", "/dev/zero", "fifo", "directory", "binary", "not-utf8", "nul", "50MB",
              "deep-json", "deep-toml"]
RECORD_KINDS = ["nan", "future"]


def _path_options() -> set[str]:
    """Every path-typed option or argument of the real CLI, as 'command option'."""
    import typer
    from typer._click.core import Context

    from railgang.daemon.cli.main import app

    found: set[str] = set()

    def walk(cmd: Any, ctx: Any, prefix: list[str]) -> None:
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                walk(sub, Context(sub, parent=ctx, info_name=name), [*prefix, name])
        for param in cmd.params:
            descriptor = getattr(param, "type_descriptor", None)
            if descriptor is not None and "Path" in str(descriptor.annotation):
                found.add(" ".join([*prefix, max(param.opts, key=len) if param.opts
                                    and param.opts[0].startswith("-") else str(param.name)]))

    root = typer.main.get_command(app)
    walk(root, Context(root, info_name="railgang"), [])
    return found


def test_every_path_option_is_classified() -> None:
    listed = {key.split(" (")[0] for key in READERS} | set(NOT_READERS)
    found = {key.strip() for key in _path_options()}
    assert found - listed == set(), ("path options no hostile-file test covers: add them to "
                                     f"READERS (or NOT_READERS with a reason): {sorted(found - listed)}")
    assert listed - found == set(), f"no longer in the CLI: {sorted(listed - found)}"


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    # not tmp_path_factory: other pytest sessions on the machine rotate its numbered folders away
    with tempfile.TemporaryDirectory(prefix="railgang-hostile-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def corpus(workdir: Path) -> dict[str, Path]:
    root = workdir / "corpus"
    root.mkdir()
    files = {
        "empty": b"",
        "binary": bytes(range(256)) * 64,
        "not-utf8": b"job_id,submit_time\n\xff\xfe caf\xe9 \xc3\x28\n",
        "nul": b"SwitchName=leaf1 Nodes=gpu001\n\0\0\0\n",
        "deep-json": b"[" * 100_000 + b"]" * 100_000,
        "deep-toml": b"a = " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
    }
    out: dict[str, Path] = {"/dev/zero": Path("/dev/zero"), "directory": root / "a-directory"}
    out["directory"].mkdir()
    for name, data in files.items():
        out[name] = root / name
        out[name].write_bytes(data)
    big = root / "50MB"
    row = b"j,0,8,3600,SwitchName=leaf1 Nodes=gpu001,{\"a\": 1}\n"
    with big.open("wb") as fh:
        for _ in range(50 * 2**20 // (len(row) * 1000) + 1):
            fh.write(row * 1000)
    out["50MB"] = big
    out["fifo"] = root / "fifo"
    os.mkfifo(out["fifo"])
    # philly-gavel looks for its throughputs table beside the trace: give it one, so the
    # corpus files are read as traces instead of refused for the missing table
    (root / "simulation_throughputs.json").write_text(json.dumps(
        {"v100": {"('ResNet-18', 1)": {"null": 10.0}}}))
    return out


@pytest.fixture(scope="module")
def valid(workdir: Path) -> dict[str, str]:
    root = workdir / "valid"
    snap = root / "snap" / "gpu001" / "mlx5_0" / "ports" / "1" / "counters"
    snap.mkdir(parents=True)
    (snap / "port_xmit_data").write_text("1000\n")
    (root / "topology.conf").write_text(VALID_CONF)
    (root / "trace.csv").write_text(VALID_TRACE)
    ibnet = Path(__file__).parent / "topology" / "data" / "ibnetdiscover" / "infiniband_exporter-test.ports"
    return {"conf": str(root / "topology.conf"), "trace": str(root / "trace.csv"),
            "snap": str(root / "snap"), "ibnet": str(ibnet)}


@pytest.fixture(scope="module")
def env(workdir: Path) -> dict[str, str]:
    """A migrated SQLite database, so the ledger commands get as far as reading their file."""
    from railgang.db import migrate

    url = f"sqlite:///{workdir / 'railgang.sqlite'}"
    migrate.upgrade(url)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "RAILGANG_DB__URL": url,
           "RAILGANG_HOME": str(workdir)}
    env.pop("RAILGANG_CONFIG", None)
    return env


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str] | None:
    """The command's result, or None when it hung."""
    try:
        return subprocess.run([RAILGANG, *args], capture_output=True, text=True, errors="replace",
                              timeout=TIMEOUT_S, preexec_fn=_limit, env=env, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None


def _problem(spec: Reader, kind: str, path: Path, args: list[str],
             proc: subprocess.CompletedProcess[str] | None) -> str | None:
    """What is wrong with one run, or None."""
    if proc is None:
        return f"hung (no answer in {TIMEOUT_S} s): railgang {' '.join(args)}"
    out = proc.stdout + proc.stderr
    if "Traceback" in out or "MemoryError" in out:
        return f"traceback: {out[-1500:]}"
    if proc.returncode == 0:
        if kind in RECORD_KINDS or kind in spec.accepts:
            return None
        return f"accepted it (exit 0): {out[-300:]}"
    lines = proc.stderr.strip().splitlines()
    if proc.returncode != 1 or not 1 <= len(lines) <= spec.max_lines:
        return f"exit {proc.returncode}, {len(lines)} stderr line(s): {proc.stderr[-800:]}"
    if kind in FILE_KINDS and str(path) not in proc.stderr and path.name not in proc.stderr:
        return f"the message does not name the file: {proc.stderr[-300:]}"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("reader", list(READERS))
def test_hostile_files(reader: str, corpus: dict[str, Path], valid: dict[str, str],
                       env: dict[str, str], workdir: Path) -> None:
    """The whole corpus against one entry point (three commands at a time)."""
    spec = READERS[reader]
    own = workdir / "records" / reader.replace(" ", "_").replace("/", "_")
    own.mkdir(parents=True)
    paths = dict(corpus)
    for kind in RECORD_KINDS:
        paths[kind] = own / f"{kind}.input"
        paths[kind].write_text(spec.nan if kind == "nan" else spec.future)
    runs = {kind: [a.format(paths[kind], **valid) for a in spec.args]
            for kind in FILE_KINDS + RECORD_KINDS}
    with ThreadPoolExecutor(max_workers=3) as pool:
        procs = dict(zip(runs, pool.map(lambda args: _run(args, env), runs.values()), strict=True))
    problems = {kind: p for kind in runs
                if (p := _problem(spec, kind, paths[kind], runs[kind], procs[kind])) is not None}
    assert not problems, f"{reader}:\n" + "\n".join(f"  {k}: {v}" for k, v in problems.items())


# -- sim --trace --limit streams: a 50 MB trace is not read whole for 10 jobs ---------------------

# VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss across fork + exec, so under the whole
# suite the child reported pytest's own 650 MB; VmHWM belongs to the new address space alone
_PEAK = ("import runpy, sys\n"
         "sys.argv = ['railgang', *sys.argv[1:]]\n"
         "try:\n"
         "    runpy.run_module('railgang.daemon.cli.main', run_name='__main__')\n"
         "finally:\n"
         "    hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')]\n"
         "    print('PEAK_KB', hwm[0], file=sys.stderr)\n")


def test_sim_limit_streams_a_50mb_trace(workdir: Path, env: dict[str, str]) -> None:
    import time

    trace = workdir / "big.csv"
    with trace.open("w") as fh:
        fh.write("job_id,submit_time,gpus,duration_s\n")
        n = 0
        while fh.tell() < 50 * 2**20:
            fh.writelines(f"j{i},{i},8,3600\n" for i in range(n, n + 10_000))
            n += 10_000
    cli = "from railgang.daemon.cli.main import main; main()"
    args = ["sim", "--trace", str(trace), "--limit", "10", "--nodes", "2", "-q", "--json"]
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _PEAK.replace(
        "runpy.run_module('railgang.daemon.cli.main', run_name='__main__')", cli), *args],
        capture_output=True, text=True, timeout=TIMEOUT_S, env=env, check=False)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["jobs"] == 10
    peak_mb = int(proc.stderr.rsplit("PEAK_KB", 1)[1].split()[0]) / 1024
    print(f"sim --limit 10 on a {trace.stat().st_size / 2**20:.0f} MB trace: {wall:.1f} s, "
          f"peak RSS {peak_mb:.0f} MB")
    assert peak_mb < 400 and wall < 20, (peak_mb, wall)
