"""Ask the real Slurm 22.05 ``slurmctld`` whether it accepts a ``topology.conf``.

The cheapest honest question: start ``slurmctld -D -i -c`` (foreground, clean state) on a minimal
``slurm.conf`` with ``TopologyPlugin=topology/tree`` and nodes ``n[001-064]``, then read its log
until it either dies (a ``fatal:``: refused) or says "Running as primary controller" (accepted),
and stop it by PID. auth/none and cred/none keep munge out of it; no slurmd is started. One
answer takes about 40-100 ms. slurmctld reads topology.conf only while it builds its
configuration, so every ``error:`` line between "Reading the topology.conf file" and the end is a
complaint about the file; the ones before it (MPI plugins, ...) are not.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["NODES", "Complaint", "SlurmctldOracle", "Verdict", "complaint", "oracle_unavailable"]

SLURMCTLD = Path("/usr/sbin/slurmctld-wlm")
NODES = "n[001-064]"  # the nodes slurm.conf defines; generated files also name others
_START = "Reading the topology.conf file"
_START_BLOCK = re.compile(r"topology/block: _read_topo_file: Reading the .*topology\.conf file")  # 24.11
_READY = "Running as primary controller"


def _no_core_dumps() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@dataclass(frozen=True)
class Complaint:
    """One ``error:``/``fatal:`` line about the file, and what it points at."""

    level: str  # "fatal", "error" or "warning" (an error: line that says WARNING)
    text: str
    lines: tuple[int, ...] = ()  # "Parse error in file F line N"
    switches: tuple[str, ...] = ()  # switch names the message names
    keys: tuple[str, ...] = ()  # keys the message names


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    complaints: tuple[Complaint, ...] = ()
    seconds: float = 0.0
    log: tuple[str, ...] = field(default=(), repr=False)

    @property
    def errors(self) -> tuple[Complaint, ...]:
        return tuple(c for c in self.complaints if c.level != "warning")

    def summary(self) -> str:
        head = "accepted" if self.accepted else "refused"
        return head + "".join(f"\n  {c.level}: {c.text}" for c in self.complaints)


# What each message of topology_tree.c / parse_config.c / parse_value.c / hostlist.c points at.
_ANCHORS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Parse error in file .* line (?P<line>\d+):"), "line"),
    (re.compile(r"Parsing error at unrecognized key: (?P<key>\S+)"), "key"),
    (re.compile(r"^(?P<key>\w+) value \(.*\) is "), "key"),
    (re.compile(r"^(?P<key>\w+) 1 specified more than once"), "key"),
    (re.compile(r"Switch \((?P<switch>.*)\) has already been defined"), "switch"),
    (re.compile(r"Invalid node name \(.*\) in switch config \((?P<switch>.*)\)$"), "switch"),
    (re.compile(r"Switch configuration (?P<switch>.*) has invalid child \((?P<child>.*)\)$"), "switch"),
    (re.compile(r"^switch (?P<switch>.*) has (neither child switches nor nodes|both child switches"
                r" and nodes|no nodes)"), "switch"),
    # topology/block, 24.11 block_record.c (a block's name goes where a switch's does)
    (re.compile(r"^Block \((?P<switch>.*)\) has already been defined"), "switch"),
    (re.compile(r"^Invalid node name \(.*\) in block config \((?P<switch>.*)\)$"), "switch"),
    (re.compile(r"^Block configuration \((?P<switch>.*)\) children count lower"), "switch"),
    (re.compile(r"^block (?P<switch>.*) hasn't got nodes$"), "switch"),
    (re.compile(r"^Invalid (?P<key>BlockSizes) value"), "key"),
)
# Not about the file's grammar: the closing fatal of a parse error (the errors before it say
# what), one line per node slurm.conf lacks (the WARNING after them lists them all), and the
# empty state directory of a clean start.
_NOISE = ("something wrong with opening/reading", "_find_node_record: lookup failure",
          "state file", "Trying backup state save file")


def complaint(level: str, text: str) -> Complaint:
    """A complaint from one log line's level and text (also used to replay recorded ones)."""
    lines: list[int] = []
    switches: list[str] = []
    keys: list[str] = []
    for pattern, _kind in _ANCHORS:
        m = pattern.search(text)
        if m is None:
            continue
        groups = m.groupdict()
        if groups.get("line"):
            lines.append(int(groups["line"]))
        if groups.get("switch") is not None:
            switches.append(groups["switch"])
        if groups.get("key"):
            keys.append(groups["key"])
    if level == "error" and ("WARNING" in text or text.startswith("TOPOLOGY: warning")):
        level = "warning"
    return Complaint(level, text, tuple(lines), tuple(switches), tuple(keys))


def _slurm_conf(root: Path, port: int, plugin: str = "tree", nodes: str = NODES) -> str:
    return "\n".join([
        "# railgang conformance oracle: just enough for slurmctld to read topology.conf",
        "ClusterName=rgconform",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={port}",
        "AuthType=auth/none",
        "CredType=cred/none",
        "SlurmUser=root",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        "SlurmctldDebug=debug",
        "MailProg=/bin/true",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SchedulerType=sched/builtin",
        # topology/block needs cons_tres (24.11 refuses it with select/linear)
        "SelectType=select/linear" if plugin == "tree" else "SelectType=select/cons_tres",
        f"TopologyPlugin=topology/{plugin}",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        f"NodeName={nodes} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
        "PartitionName=p Nodes=ALL Default=YES",
        "",
    ])


def oracle_unavailable() -> str | None:
    """Why the oracle cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "slurmctld must run as root (SlurmUser=root)"
    if not SLURMCTLD.exists():
        return f"{SLURMCTLD} missing; apt-get install -y slurmctld slurm-wlm-basic-plugins"
    if not list(Path("/usr/lib").glob("*/slurm-wlm/topology_tree.so")):
        return "topology_tree.so missing; apt-get install -y slurm-wlm-basic-plugins"
    return None


class SlurmctldOracle:
    """One private slurmctld configuration under ``root``, asked about one file at a time."""

    def __init__(self, root: Path, port: int, *, timeout_s: float = 20.0, plugin: str = "tree",
                 nodes: str = NODES, binary: Path = SLURMCTLD) -> None:
        """``plugin`` "block" with ``binary`` a 24.11 slurmctld-wlm asks topology/block
        (tests/topology/conformance/block_oracle.py, inside the trixie container)."""
        self.root = root
        self.port = port
        self.timeout_s = timeout_s
        (root / "state").mkdir(parents=True, exist_ok=True)
        (root / "bin").mkdir(exist_ok=True)
        # Slurm decides "am I a daemon" from basename(argv[0]): run slurmctld-wlm as "slurmctld"
        link = root / "bin" / "slurmctld"
        if not link.is_symlink():
            link.symlink_to(binary)
        self.plugin = plugin
        self.slurm_conf = root / "slurm.conf"
        self.slurm_conf.write_text(_slurm_conf(root, port, plugin, nodes))
        self.topology_conf = root / "topology.conf"

    def ask(self, text: str | bytes) -> Verdict:
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
        self.topology_conf.write_bytes(data)
        env = {"PATH": "/usr/sbin:/usr/bin:/bin", "SLURM_CONF": str(self.slurm_conf)}
        t0 = time.monotonic()
        proc = subprocess.Popen(  # argument list, never a shell
            [str(self.root / "bin" / "slurmctld"), "-D", "-i", "-c"], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            cwd=self.root, preexec_fn=_no_core_dumps)  # Switches="" crashes 22.05.8: no core file
        try:
            log, ready = self._read(proc)
        finally:
            self._stop(proc)
        seconds = time.monotonic() - t0
        complaints: list[Complaint] = []
        reading = False
        for raw in log:
            line = raw.removeprefix("slurmctld: ")
            if _START in line or _START_BLOCK.search(line):
                reading = True
                continue
            if not reading:
                continue
            for level in ("fatal", "error"):
                if line.startswith(f"{level}: "):
                    body = line[len(level) + 2:].strip()
                    body = re.sub(rf"^topology/{self.plugin}: \w+: ", "", body)
                    body = body.replace(str(self.topology_conf), "topology.conf")
                    # control characters quoted from the file (a CR, a form feed) stay visible
                    body = re.sub(r"[\x00-\x1f]", lambda m: f"\\x{ord(m.group()):02x}", body)
                    if not any(n in body for n in _NOISE):
                        complaints.append(complaint(level, body))
        fatal = any(c.level == "fatal" for c in complaints) or any(
            "something wrong with opening/reading" in ln for ln in log)
        if not ready and proc.returncode is not None and proc.returncode < 0 and not fatal:
            # a crash (SIGSEGV) while reading the file: slurmctld does not run on it either
            complaints.append(Complaint("fatal", f"slurmctld crashed (signal {-proc.returncode})"))
            fatal = True
        if not ready and not fatal:
            tail = "\n".join(log[-5:])
            raise RuntimeError(f"slurmctld neither started nor failed on the file (rc {proc.returncode}):\n{tail}")
        return Verdict(ready and not fatal, tuple(complaints), seconds, tuple(log))

    def _read(self, proc: subprocess.Popen[bytes]) -> tuple[list[str], bool]:
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        lines: list[str] = []
        deadline = time.monotonic() + self.timeout_s
        try:
            while time.monotonic() < deadline:
                if not sel.select(timeout=0.2):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:  # slurmctld exited (a fatal)
                    break
                buf += chunk
                *done, buf = buf.split(b"\n")
                lines.extend(d.decode("utf-8", "replace") for d in done)
                if any(_READY in ln for ln in lines[-len(done):] if done):
                    return lines, True
        finally:
            sel.close()
        if buf:
            lines.append(buf.decode("utf-8", "replace"))
        return lines, False

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM the slurmctld we started (it stops its own slurmscriptd), SIGKILL if it hangs."""
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
