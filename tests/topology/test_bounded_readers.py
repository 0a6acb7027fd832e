"""Issue 11 part 7 at every reader of a topology-related file: ``load_fabric`` (``railgang sim``,
``railgang report``), the trace readers of ``railgang sim`` and the ``railgang topology`` commands.
``/dev/zero``, a directory, 50 MB of repeats, binary data and an empty file each end in one clear
line and exit 1, never a traceback and never a full memory (the real CLI runs in a subprocess
under an address-space limit, so a reader that slurps ``/dev/zero`` fails here instead of taking
the machine down)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

RAILGANG = str(Path(sys.executable).with_name("railgang"))
VALID_CONF = "SwitchName=leaf1 Nodes=gpu[001-004]\n"
VALID_TRACE = "job_id,submit_time,gpus,duration_s\nj1,0,8,3600\n"
ADDRESS_LIMIT = 3 * 2**30  # far above what these commands need, far below /dev/zero slurped whole


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_LIMIT, ADDRESS_LIMIT))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([RAILGANG, *args], capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit, env=env, check=False)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    big = root / "big.conf"
    line = b"SwitchName=leaf1 Nodes=gpu[001-004]\n"
    big.write_bytes(line * (50 * 2**20 // len(line) + 1))
    binary = root / "binary.conf"
    binary.write_bytes(bytes(range(256)) * 64)
    empty = root / "empty.conf"
    empty.write_bytes(b"")
    comments = root / "comments.conf"
    comments.write_text("# only a comment\n\n")
    return {"/dev/zero": Path("/dev/zero"), "directory": root, "50MB": big, "binary": binary,
            "empty": empty, "comments only": comments}


KINDS = ["/dev/zero", "directory", "50MB", "binary", "empty", "comments only"]


def _one_clear_line(proc: subprocess.CompletedProcess[str], path: Path, *, lines: int = 1) -> None:
    err = proc.stderr.strip()
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-500:], err[-2000:])
    assert "Traceback" not in err and "Traceback" not in proc.stdout, err[-2000:]
    assert 1 <= len(err.splitlines()) <= lines, err[-2000:]
    assert str(path) in err, err


@pytest.mark.parametrize("kind", KINDS)
def test_sim_topology_hostile(kind: str, hostile: dict[str, Path], tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(VALID_TRACE)
    path = hostile[kind]
    proc = _run("sim", "--trace", str(trace), "--topology", str(path))
    _one_clear_line(proc, path)


@pytest.mark.parametrize("kind", ["/dev/zero", "directory", "binary", "empty"])
def test_sim_trace_hostile(kind: str, hostile: dict[str, Path]) -> None:
    path = hostile[kind]
    proc = _run("sim", "--trace", str(path), "--format", "csv")
    _one_clear_line(proc, path)


COMMANDS = {
    "topology check": ["topology", "check", "{}"],
    "topology show": ["topology", "show", "{}"],
    "topology discover": ["topology", "discover", "{}"],
    "place": ["place", "-t", "{}", "--gpus", "8"],
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_topology_commands_hostile(command: str, kind: str, hostile: dict[str, Path]) -> None:
    path = hostile[kind]
    proc = _run(*(a.format(path) for a in COMMANDS[command]))
    # `check` lists every problem (warnings included) and a count: its documented output
    _one_clear_line(proc, path, lines=3 if command == "topology check" else 1)


def test_load_fabric_refuses_without_reading_all(hostile: dict[str, Path]) -> None:
    from railgang.topology.conf import TopologyError
    from railgang.topology.fabric import load_fabric

    for kind in KINDS[1:]:  # /dev/zero only under the CLI's address-space limit: a regression must not eat the test run
        with pytest.raises(TopologyError) as err:
            load_fabric(hostile[kind])
        assert str(hostile[kind]) in str(err.value)


def test_load_fabric_valid(tmp_path: Path) -> None:
    from railgang.topology.fabric import load_fabric

    conf = tmp_path / "topology.conf"
    conf.write_text(VALID_CONF)
    assert len(load_fabric(conf).nodes) == 4


@pytest.mark.parametrize("kind", ["/dev/zero", "binary"])
def test_sim_philly_trace_hostile(kind: str, hostile: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "simulation_throughputs.json").write_text(
        '{"v100": {"(\'ResNet-18 (batch size 16)\', 1)": {"null": 10.0}}}')
    (tmp_path / "seed=0").mkdir()
    trace = tmp_path / "seed=0" / "vc1.trace"
    if kind == "/dev/zero":
        trace.symlink_to("/dev/zero")
    else:
        trace.write_bytes(hostile["binary"].read_bytes())
    proc = _run("sim", "--trace", str(tmp_path), "--format", "philly-gavel")
    _one_clear_line(proc, trace)


# -- issue 11 part 4 sweep: every `railgang topology` subcommand's help, and the hostile inputs
# that printed a traceback, hung or ate memory before ----------------------------------------------


@pytest.mark.parametrize("command", ["check", "show", "links", "generate", "discover"])
def test_topology_help(command: str) -> None:
    proc = _run("topology", command, "--help")
    assert proc.returncode == 0 and "Usage" in proc.stdout and not proc.stderr, proc.stderr[-500:]


@pytest.mark.parametrize("kind", ["/dev/zero", "directory", "binary", "empty"])
def test_links_state_hostile(kind: str, hostile: dict[str, Path]) -> None:
    path = hostile[kind]
    _one_clear_line(_run("topology", "links", "--state", str(path)), path)


@pytest.mark.parametrize("args", [["--nodes", "100000000"], ["--prefix", "a" * 100000]])
def test_generate_refuses_runaway_sizes(args: list[str]) -> None:
    proc = _run("topology", "generate", *args)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-300:]
    assert args[0] in proc.stderr and not proc.stdout


def test_place_empty_free_file_is_invalid(hostile: dict[str, Path], tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text(VALID_CONF)
    path = hostile["empty"]
    _one_clear_line(_run("place", "-t", str(conf), "--gpus", "8", "--free", str(path)), path)


def test_links_snapshot_counter_file_never_ends(tmp_path: Path) -> None:
    # a sysfs snapshot whose counter file is /dev/zero: one warning for that counter, not a hang
    for snap in ("before", "after"):
        port = tmp_path / snap / "gpu001" / "mlx5_0" / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        (port / "counters" / "port_rcv_errors").symlink_to("/dev/zero")
        (port / "counters" / "port_xmit_data").write_text("1000\n" if snap == "before" else "2000\n")
        (port / "state").write_text("4: ACTIVE\n")
    conf = tmp_path / "topology.conf"
    conf.write_text(VALID_CONF)
    proc = _run("topology", "links", str(tmp_path / "before"), str(tmp_path / "after"), "-t", str(conf),
                "--all")
    assert proc.returncode in (0, 3) and "Traceback" not in proc.stderr, proc.stderr[-1000:]
    assert "port_rcv_errors: unreadable (is a character device)" in proc.stdout + proc.stderr


def test_links_snapshot_counter_fifo_does_not_hang(tmp_path: Path) -> None:
    # issue 18 row 9: a FIFO among the counters blocked the open for ever; refused unread now
    for snap in ("before", "after"):
        port = tmp_path / snap / "gpu001" / "mlx5_0" / "ports" / "1"
        (port / "counters").mkdir(parents=True)
        os.mkfifo(port / "counters" / "port_rcv_errors")
        (port / "counters" / "port_xmit_data").write_text("1000\n" if snap == "before" else "2000\n")
    conf = tmp_path / "topology.conf"
    conf.write_text(VALID_CONF)
    proc = _run("topology", "links", str(tmp_path / "before"), str(tmp_path / "after"), "-t", str(conf))
    assert proc.returncode in (0, 3) and "Traceback" not in proc.stderr, proc.stderr[-1000:]
    assert "port_rcv_errors: unreadable (is a FIFO (named pipe))" in proc.stderr
