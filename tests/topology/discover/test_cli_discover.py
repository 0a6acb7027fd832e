"""``railgang topology discover`` through the real ``railgang`` app: outputs, report, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.errors import InputError
from railgang.topology.conf import parse_topology
from railgang.topology.discover import FACTS_FORMAT, Shape, generate_ibnetdiscover

from .conftest import DATA

runner = CliRunner()


def _run(*args: str) -> tuple[int, str, str, BaseException | None]:
    res = runner.invoke(app, ["topology", "discover", *args])
    return res.exit_code, res.stdout, res.stderr, res.exception


def test_discover_prints_topology_conf_and_reports_on_stderr() -> None:
    code, out, err, _ = _run(str(DATA / "x5.topofile"), "--node-name-map", str(DATA / "x5.map"))
    assert code == 0
    conf = parse_topology(out, "stdout")
    assert len(conf.nodes) == 86 and len(conf.roots) == 1
    assert "discovered 86 nodes (86 HCAs, 1 rail), 11 switches in 3 level(s)" in err
    assert "warning: 3 unknown devices:" in err
    assert "warning: 21 links slower than the rest:" in err and "… and 16 more" in err


def test_discover_files_and_facts(tmp_path: Path) -> None:
    gen = generate_ibnetdiscover(Shape(nodes=64, rails=8, nodes_per_leaf=16, spines=2), "ports")
    src = tmp_path / "fabric.ports"
    src.write_text(gen.text)
    conf_path, facts_path = tmp_path / "topology.conf", tmp_path / "facts.json"
    code, out, _, _ = _run(str(src), "-o", str(conf_path), "--facts-out", str(facts_path))
    assert code == 0 and out.startswith("discovered 64 nodes (512 HCAs, 8 rails, rail-optimised)")
    assert tuple(sw.nodes for sw in parse_topology(conf_path.read_text()).switches if sw.nodes) == gen.groups
    facts = json.loads(facts_path.read_text())
    assert facts["format"] == FACTS_FORMAT and facts["rails"] == 8 and facts["levels"] == 2
    assert facts["link_gbps"]["host"] == {"400": 512}
    hcas = facts["nodes"]["gpu001"]["hcas"]
    assert [h["rail"] for h in hcas] == list(range(8)) and hcas[3]["switch"] == "leaf-su1-r3"
    assert {s["slurm_switch"] for s in facts["switches"] if s["level"] == 1} == {"su1", "su2", "su3", "su4"}


def test_discover_json_and_vendor_names_need_the_map(tmp_path: Path) -> None:
    gen = generate_ibnetdiscover(Shape(nodes=8, rails=2, nodes_per_leaf=4, spines=1), "vendor")
    src, names = tmp_path / "fabric.txt", tmp_path / "names.map"
    src.write_text(gen.text)
    names.write_text(gen.name_map)
    code, _, _, exc = _run(str(src))
    assert code == 1 and isinstance(exc, InputError) and "give --node-name-map" in str(exc)
    code, out, _, _ = _run(str(src), "--node-name-map", str(names), "--json")
    data = json.loads(out)
    assert code == 0 and data["nodes_count"] == 8 and data["rails"] == 2 and data["unclassified"] == {}
    assert "SwitchName=su1 Nodes=gpu[001-004]" in data["topology_conf"]


def test_strict_fails_on_anything_unclassified() -> None:
    capture = str(DATA / "infiniband_exporter-test.ports")
    assert _run(capture)[0] == 0
    code, _, err, _ = _run(capture, "--strict")
    assert code == 1 and "1 switches with no hosts" in err and "joined under a made-up 'root'" in err


def test_discover_reads_stdin() -> None:
    text = (DATA / "infiniband_exporter-test2.ports").read_text()
    res = runner.invoke(app, ["topology", "discover", "-"], input=text)
    assert res.exit_code == 0 and "SwitchName=5FB0405-leaf-IB01 Nodes=worker20" in res.stdout


BAD = [
    ("empty", "", None, "empty: no ibnetdiscover output"),
    ("prose", "hello\nworld\n", None, "no InfiniBand device found"),
    ("binary", "Switch\0\0\0\n", None, "NUL bytes"),
    ("bad-map", None, "not a map line\n", "expected `<guid> \"<name>\"`"),
    ("empty-map", None, "# nothing\n", "empty node name map"),
]


@pytest.mark.parametrize(("capture", "name_map", "needle"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_inputs_are_one_line_exit_1(tmp_path: Path, capture: str | None, name_map: str | None,
                                        needle: str) -> None:
    src = tmp_path / "cap.txt"
    if capture is None:
        src = DATA / "x5.topofile"
    else:
        src.write_text(capture)
    args = [str(src)]
    if name_map is not None:
        (tmp_path / "m.map").write_text(name_map)
        args += ["--node-name-map", str(tmp_path / "m.map")]
    code, _, _, exc = _run(*args)
    assert code == 1 and isinstance(exc, InputError) and needle in str(exc)
    assert "\n" not in str(exc)


def test_an_unwritable_output_is_one_line(tmp_path: Path) -> None:
    code, _, _, exc = _run(str(DATA / "infiniband_exporter-test.ports"), "-o", str(tmp_path / "no" / "such" / "t.conf"))
    assert code == 1 and isinstance(exc, InputError) and "cannot write: No such file or directory" in str(exc)


def test_dev_zero_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    code, _, _, exc = _run("/dev/zero")  # not a regular file: refused before a byte is read
    assert code == 1 and isinstance(exc, InputError) and "is a character device" in str(exc)
    zeros = tmp_path / "zeros"
    zeros.write_bytes(b"\0" * (128 * 1024))  # a regular file of zeros: the line bound
    code, _, _, exc = _run(str(zeros))
    assert code == 1 and isinstance(exc, InputError) and "line longer than 64 KiB" in str(exc)


_MAXRSS = ("import atexit, resource, sys\n"
           "atexit.register(lambda: print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr))\n"
           "from railgang.daemon.cli.main import main\n"
           "sys.argv = ['railgang', 'topology', 'discover', sys.argv[1]]\n"
           "main()\n")


def _peak_kib(path: Path) -> tuple[int, str, int]:
    res = subprocess.run([sys.executable, "-c", _MAXRSS, str(path)], capture_output=True, text=True, timeout=300)
    peak = int(res.stderr.rsplit("MAXRSS", 1)[1].split()[0])
    return res.returncode, res.stdout, peak


def test_fifty_megabytes_of_repeats_stay_small(tmp_path: Path) -> None:
    """50 MB of the same two cables: streamed and deduplicated, so the peak memory is that of a
    one-cable file, not 50 MB more (measured in a child process, ru_maxrss)."""
    block = ('Switch\t2 "S-00000000000000e1"\t\t# "leaf1" enhanced port 0 lid 1 lmc 0\n'
             '[1]\t"H-00000000000000a1"[1](a1) \t\t# "gpu001 mlx5_0" lid 2 4xHDR\n')
    small, big = tmp_path / "small.txt", tmp_path / "big.txt"
    small.write_text(block)
    with big.open("w") as f:
        for _ in range(50 * 2**20 // (len(block) * 1000) + 1):
            f.write(block * 1000)
    code_small, out_small, peak_small = _peak_kib(small)
    code_big, out_big, peak_big = _peak_kib(big)
    assert code_small == code_big == 0 and "SwitchName=leaf1 Nodes=gpu001" in out_big
    assert out_big.replace(str(big), "X") == out_small.replace(str(small), "X")
    assert peak_big - peak_small < 20 * 2**10, (peak_small, peak_big)  # KiB: well under the file's 50 MB
