"""Bring a local GPU Slurm cluster up and down: munge, MariaDB + slurmdbd, slurmctld, N slurmd.

Everything lives under one directory with its own ports on 127.0.0.1, so it never touches the
host's Slurm or munge. ``up`` is idempotent (a running cluster is left alone); ``down`` stops only
the processes ``up`` recorded.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from railgang.devcluster import layout
from railgang.devcluster.layout import (
    GPU_DEVICE_MAJOR,
    SLURM_BIN,
    TEST_GRANTS,
    ClusterSpec,
)
from railgang.devcluster.leftovers import kill_stepd_trees
from railgang.devcluster.processes import (
    ProcessTable,
    is_running,
    port_in_use,
    wait_for_path,
    wait_for_port,
)
from railgang.devcluster.site import site_commands
from railgang.errors import DevClusterError
from railgang.slurm_plugins.paths import PLUGINS

PLUGIN_SRC = PLUGINS  # job_submit.lua and the SPANK source, as installed
APT_HINT = ("apt-get install -y slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins "
            "lua5.1 libslurm-dev slurmdbd slurm-wlm-mysql-plugin mariadb-server")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class UpResult:
    already_running: bool
    seconds: float
    processes: int


def _required_programs(spec: ClusterSpec) -> dict[str, Path]:
    progs = {
        "slurmctld": SLURM_BIN / "slurmctld-wlm",
        "slurmd": SLURM_BIN / "slurmd-wlm",
        "slurmstepd": SLURM_BIN / "slurmstepd-wlm",
        "munged": Path("/usr/sbin/munged"),
        "sinfo": Path("/usr/bin/sinfo"),
        "scontrol": Path("/usr/bin/scontrol"),
        "unshare": Path("/usr/bin/unshare"),
    }
    if spec.accounting:
        progs |= {
            "slurmdbd": SLURM_BIN / "slurmdbd",
            "sacctmgr": Path("/usr/bin/sacctmgr"),
            "mariadbd": Path("/usr/sbin/mariadbd"),
            "mariadb-install-db": Path("/usr/bin/mariadb-install-db"),
            "mariadb": Path("/usr/bin/mariadb"),
        }
    return progs


def ephemeral_port_range() -> tuple[int, int]:
    """Local ports Linux gives outgoing connections: a listener there can lose its port at random."""
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def preflight(spec: ClusterSpec) -> None:
    """Ports, root, packages: each problem is one line saying what to do."""
    lo, hi = ephemeral_port_range()
    ephemeral = [f"{what} {port}" for what, port in spec.ports.items() if lo <= port <= hi]
    if ephemeral:
        raise DevClusterError(
            f"ports {', '.join(ephemeral[:3])}{' …' if len(ephemeral) > 3 else ''} are in the kernel's "
            f"ephemeral range {lo}-{hi}, where any client connection may take them; "
            f"choose devcluster ports outside it")
    if os.geteuid() != 0:
        raise DevClusterError("the local Slurm cluster needs root (device nodes, slurmd); run as root")
    missing = [name for name, path in _required_programs(spec).items() if not path.exists()]
    if spec.accounting and not any(Path("/usr/lib").glob("*/slurm-wlm/accounting_storage_mysql.so")):
        missing.append("slurm-wlm-mysql-plugin")
    if Path("/etc/alternatives/slurmctld").exists() and "emulator" in os.path.realpath(
            "/etc/alternatives/slurmctld"):
        raise DevClusterError("slurm-wlm-emulator is installed and repoints slurmctld; "
                              "apt-get remove slurm-wlm-emulator")
    if missing:
        raise DevClusterError(f"missing: {', '.join(missing)}; install with: {APT_HINT}")
    taken = [f"{what} {port}" for what, port in spec.ports.items() if port_in_use(port)]
    if taken:
        raise DevClusterError(
            f"port taken on 127.0.0.1: {', '.join(taken[:4])}"
            f"{' …' if len(taken) > 4 else ''}; stop what uses it or set devcluster ports "
            f"(RAILGANG_DEVCLUSTER__SLURMCTLD_PORT, …__SLURMD_BASE_PORT, …)")


def _run(argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 60,
         what: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        res = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=timeout,
                             check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevClusterError(f"{what or argv[0]} failed: {exc}") from exc
    if check and res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise DevClusterError(f"{what or ' '.join(argv[:3])} failed: {msg[-1] if msg else res.returncode}")
    return res


def slurm_env(spec: ClusterSpec) -> dict[str, str]:
    env = dict(os.environ)
    env["SLURM_CONF"] = str(spec.slurm_conf)
    return env


def write_configs(spec: ClusterSpec, spank_so: Path | None) -> None:
    """Write every Slurm config file of ``spec`` into ``spec.etc``: the one rendering used both
    by ``up`` and by the container images (``railgang devcluster render``)."""
    spec.etc.mkdir(parents=True, exist_ok=True)
    spec.slurm_conf.write_text(layout.render_slurm_conf(spec))
    (spec.etc / "gres.conf").write_text(layout.render_gres_conf(spec))
    (spec.etc / "topology.conf").write_text(layout.render_topology_conf(spec))
    shutil.copyfile(PLUGIN_SRC / "job_submit.lua", spec.etc / "job_submit.lua")
    (spec.etc / "plugstack.conf").write_text(layout.render_plugstack_conf(spank_so))
    if spec.accounting:
        dbd = spec.etc / "slurmdbd.conf"
        dbd.write_text(layout.render_slurmdbd_conf(spec))
        dbd.chmod(0o600)  # slurmdbd refuses a readable slurmdbd.conf


# The railgang daemon's user of the documented deployment (docs/deploy.md, deploy/systemd): a
# system user without a shell that is a Slurm operator. job_submit.lua trusts it by name
# (RAILGANG_TRUSTED_USERS defaults to "slurm,railgang"), so the cluster creates it before
# slurmctld loads the script, and the end-to-end tests run the daemon as it.
DAEMON_USER = "railgang"


def daemon_uid() -> int | None:
    try:
        return pwd.getpwnam(DAEMON_USER).pw_uid
    except KeyError:
        return None


def ensure_daemon_user() -> int | None:
    """The daemon user's uid, created as a system user when missing and we are root; None when
    it cannot be (not root): the cluster then works as before, with root as the only operator."""
    uid = daemon_uid()
    if uid is not None or os.geteuid() != 0:
        return uid
    subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                    "--shell", "/usr/sbin/nologin", DAEMON_USER], capture_output=True, check=False)
    return daemon_uid()


def register_accounts(spec: ClusterSpec) -> None:
    """Cluster plus a small org -> dept -> team hierarchy, so enforce=associations admits jobs."""
    env = slurm_env(spec)
    mgr = "/usr/bin/sacctmgr"
    cmds = [
        ["add", "cluster", spec.cluster_name],
        ["add", "account", "ml-org", "Description=organisation", "Organization=ml-org"],
        ["add", "account", "research", "parent=ml-org", "Description=department"],
        ["add", "account", "team-a", "parent=research", "fairshare=3", "Description=team"],
        ["add", "account", "team-b", "parent=research", "fairshare=1", "Description=team"],
        ["add", "user", "root", "account=team-a,team-b", "DefaultAccount=team-a"],
    ]
    if daemon_uid() is not None:
        # the daemon's user is a Slurm administrator, not only an operator: railgang keeps its
        # tag and in-flight preemption/grow marks in AdminComment, which Slurm lets only root,
        # SlurmUser and Administrators set (docs/deploy.md, docs/security.md)
        cmds += [["add", "user", DAEMON_USER, "account=team-a", "AdminLevel=Administrator"],
                 ["modify", "user", DAEMON_USER, "set", "AdminLevel=Administrator"]]
    for args in cmds:
        # "already exists" / "nothing new" are fine: registration is idempotent
        _run([mgr, "-i", *args, f"cluster={spec.cluster_name}"] if args[:2] == ["add", "user"]
             else [mgr, "-i", *args], env=env, check=False, what="sacctmgr")
    res = _run([mgr, "-n", "-P", "show", "assoc", "format=account,user"], env=env, what="sacctmgr")
    if "team-a|root" not in res.stdout:
        raise DevClusterError(f"sacctmgr did not register the test accounts; see {spec.log}/slurmdbd.log")


class DevCluster:
    def __init__(self, spec: ClusterSpec, progress: Progress | None = None) -> None:
        self.spec = spec
        self.procs = ProcessTable(spec.run / "pids")
        self._say = progress or (lambda _msg: None)

    # ---- queries -----------------------------------------------------------------------
    def expected_processes(self) -> list[str]:
        names = ["munged", "slurmctld"] + [f"slurmd-{n}" for n in self.spec.node_names]
        if self.spec.accounting:
            names[1:1] = ["mariadbd", "slurmdbd"]
        return names

    def running(self) -> dict[str, bool]:
        recs = {r.name: r for r in self.procs.records()}
        return {name: name in recs and is_running(recs[name]) for name in self.expected_processes()}

    def is_up(self) -> bool:
        return all(self.running().values())

    # ---- up ----------------------------------------------------------------------------
    def up(self, *, timeout_s: float = 60) -> UpResult:
        t0 = time.monotonic()
        if self.is_up():
            return UpResult(True, time.monotonic() - t0, len(self.expected_processes()))
        if any(self.running().values()):
            self._say("a previous bring-up is half running; stopping its processes first")
            self.down()
        preflight(self.spec)
        try:
            self._write_tree()
            self._start_munge()
            if self.spec.accounting:
                self._start_accounting()
            self._start_slurmctld()
            self._delete_reservations()
            self._start_slurmds()
            self._wait_nodes_idle(timeout_s)
            if self.spec.site:
                self._site_rules()
            self.write_fleet_file()
        except BaseException:
            self.down()  # never leave a half-started cluster behind
            raise
        return UpResult(False, time.monotonic() - t0, len(self.expected_processes()))

    def _write_tree(self) -> None:
        s = self.spec
        self._say(f"writing configs under {s.dir}")
        for d in (s.etc, s.bin, s.run, s.log, s.dev, s.dir / "state", s.dir / "spool", s.run / "pids",
                  s.daemon_dir):
            d.mkdir(parents=True, exist_ok=True)
        s.dir.chmod(0o755)
        s.run.chmod(0o755)
        uid = ensure_daemon_user()
        if uid is not None:  # the daemon (its user) writes here, slurmctld (SlurmUser) reads
            os.chown(s.daemon_dir, uid, -1)
            s.daemon_dir.chmod(0o755)
        # the program-name trap: Slurm decides "am I slurmd" from basename(argv[0])
        for name in ("slurmctld", "slurmd", "slurmstepd"):
            link = s.bin / name
            link.unlink(missing_ok=True)
            link.symlink_to(SLURM_BIN / f"{name}-wlm")
        # gres/gpu needs real character devices, file-less or plain-file GPUs are dropped
        for i in range(s.gpus_per_node):
            dev = s.dev / f"nvidia{i}"
            if not (dev.exists() and stat.S_ISCHR(dev.stat().st_mode)):
                dev.unlink(missing_ok=True)
                os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(GPU_DEVICE_MAJOR, i))
        write_configs(s, self._build_spank())

    def _build_spank(self) -> Path | None:
        src = PLUGIN_SRC / "spank" / "railgang_spank.c"
        out = self.spec.dir / "lib" / "railgang_spank.so"
        if not src.exists() or not Path("/usr/include/slurm/spank.h").exists() or not shutil.which("gcc"):
            return None
        out.parent.mkdir(exist_ok=True)
        if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
            _run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", str(out), str(src)],
                 what="building the SPANK plugin")
        return out

    def _start_munge(self) -> None:
        s = self.spec
        mdir = s.munge_socket.parent
        mdir.mkdir(parents=True, exist_ok=True)
        mdir.chmod(0o755)
        key = s.etc / "munge.key"
        if not key.exists():
            key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._say("starting munged")
        self.procs.start("munged", [
            "/usr/sbin/munged", "--foreground", "--force", f"--socket={s.munge_socket}",
            f"--key-file={key}", f"--pid-file={mdir / 'munged.pid'}",
            f"--log-file={s.log / 'munged.log'}", f"--seed-file={mdir / 'munged.seed'}",
        ], log=s.log / "munged.out")
        wait_for_path(s.munge_socket, timeout_s=10, what="munged", log=s.log / "munged.log")

    def _start_accounting(self) -> None:
        s = self.spec
        datadir = s.dir / "mysql"
        if not (datadir / "mysql").exists():
            self._say("initialising MariaDB data directory (first run only)")
            datadir.mkdir(parents=True, exist_ok=True)
            shutil.chown(datadir, "mysql", "mysql")
            _run(["/usr/bin/mariadb-install-db", "--no-defaults", "--user=mysql",
                  f"--datadir={datadir}", "--auth-root-authentication-method=socket",
                  "--skip-test-db"], timeout=120, what="mariadb-install-db")
        shutil.chown(s.run, "mysql", "mysql")  # mariadbd writes its socket there
        self._say("starting MariaDB and slurmdbd")
        rec = self.procs.start("mariadbd", [
            "/usr/sbin/mariadbd", "--no-defaults", "--user=mysql", f"--datadir={datadir}",
            f"--socket={s.mysql_socket}", "--bind-address=127.0.0.1", f"--port={s.mariadb_port}",
            f"--pid-file={s.run / 'mariadbd.pid'}", f"--log-error={s.log / 'mariadbd.log'}",
            "--skip-name-resolve", "--innodb-buffer-pool-size=64M",
        ], log=s.log / "mariadbd.out")
        wait_for_port(s.mariadb_port, timeout_s=30, what="mariadbd", log=s.log / "mariadbd.log", rec=rec)
        sql = ("CREATE DATABASE IF NOT EXISTS slurm_acct_db; "
               "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm-devcluster'; "
               "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;")
        _run(["/usr/bin/mariadb", f"--socket={s.mysql_socket}", "-u", "root", "-e", sql],
             what="creating the accounting database")
        rec = self.procs.start("slurmdbd", [str(SLURM_BIN / "slurmdbd"), "-D"],
                               log=s.log / "slurmdbd.out", env=slurm_env(s))
        wait_for_port(s.slurmdbd_port, timeout_s=30, what="slurmdbd", log=s.log / "slurmdbd.out", rec=rec)
        register_accounts(self.spec)

    def _start_slurmctld(self) -> None:
        s = self.spec
        self._say("starting slurmctld")
        # -c: clean state, so a node that once failed registration does not come back DRAINED
        if s.grants_file is None:
            s.class_grants_file.parent.mkdir(parents=True, exist_ok=True)
            s.class_grants_file.write_text(TEST_GRANTS)
        env = slurm_env(s) | {"RAILGANG_HEARTBEAT_FILE": str(s.heartbeat_file),  # job_submit.lua
                              "RAILGANG_GRANTS_FILE": str(s.class_grants_file),
                              "RAILGANG_FLEET_FILE": str(s.gpu_fleet_file)} | self.job_submit_env()
        rec = self.procs.start("slurmctld", [str(s.bin / "slurmctld"), "-D", "-c", "-f", str(s.slurm_conf)],
                               log=s.log / "slurmctld.out", env=env)
        wait_for_port(s.slurmctld_port, timeout_s=30, what="slurmctld", log=s.log / "slurmctld.out", rec=rec)

    def job_submit_env(self) -> dict[str, str]:
        """More of job_submit.lua's settings in slurmctld's environment (a block cluster names
        its base block: RAILGANG_SEGMENT_BASE)."""
        return {}

    def _delete_reservations(self) -> None:
        """slurmctld -c forgets jobs and node states but recovers reservations from its state
        files: a burn-in reservation a stopped daemon left (railgang_burnin_N, MAINT) would keep
        its node out of every later run. A test cluster starts without any."""
        env = slurm_env(self.spec)
        res = _run(["/usr/bin/scontrol", "-o", "show", "reservation"], env=env, check=False,
                   timeout=30)
        for name in re.findall(r"(?:^|\s)ReservationName=(\S+)", res.stdout, re.MULTILINE):
            self._say(f"deleting the leftover reservation {name}")
            _run(["/usr/bin/scontrol", "delete", f"ReservationName={name}"], env=env,
                 what=f"deleting reservation {name}", timeout=30)

    def _site_rules(self) -> None:
        """The site-like cluster's QOS and reservation (site.py): they need slurmdbd and
        slurmctld up, and the reservation comes after the leftover ones are deleted."""
        self._say("adding the site's QOS and reservation")
        for argv in site_commands():
            # sacctmgr says "nothing new" (rc 1) on a second bring-up over the same database
            _run(argv, env=slurm_env(self.spec), what=" ".join(argv[1:4]), timeout=30,
                 check=not argv[0].endswith("sacctmgr"))

    def _start_slurmds(self) -> None:
        self._say(f"starting {self.spec.nodes} slurmd")
        for name in self.spec.node_names:
            self.start_slurmd(name)

    def start_slurmd(self, name: str) -> int:
        """Start node ``name``'s slurmd (again: the failure tests kill one by its PID); its PID."""
        s = self.spec
        # own UTS namespace so `hostname` inside jobs prints the node name
        script = 'hostname "$1" && exec "$2" -D -N "$1" -d "$3" -f "$4"'
        rec = self.procs.start(f"slurmd-{name}", [
            "/usr/bin/unshare", "--uts", "--", "/bin/sh", "-c", script, "slurmd", name,
            str(s.bin / "slurmd"), str(s.bin / "slurmstepd"), str(s.slurm_conf),
        ], log=s.log / f"slurmd-{name}.out", env=slurm_env(s))
        return rec.pid

    def _wait_nodes_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = self.node_states()
            if len(states) == self.spec.nodes and all(st == "idle" for st in states.values()):
                return
            time.sleep(0.1)
        bad = {n: st for n, st in states.items() if st != "idle"}
        raise DevClusterError(f"nodes not idle after {timeout_s:.0f} s: {bad}; "
                              f"see {self.spec.log}/slurmctld.log")

    def write_fleet_file(self) -> bool:
        """Write the fleet file job_submit.lua reads from what slurmctld registered (sinfo),
        through the daemon's own code, so a need no node meets is refused before any daemon
        runs; True if it changed."""
        from railgang.daemon.slurm.cli.facts import render_fleet_file
        from railgang.daemon.slurm.cli.records import parse_sinfo
        from railgang.daemon.slurm.cli.snapshot import core_node
        from railgang.topology.inputs import write_if_changed

        res = _run(["/usr/bin/sinfo", "--json"], env=slurm_env(self.spec), timeout=30, what="sinfo --json")
        nodes, _ = parse_sinfo(res.stdout)
        text = render_fleet_file((n.name, n.gpus, core_node(n).facts) for n in nodes)
        return write_if_changed(self.spec.gpu_fleet_file, text)

    def node_states(self) -> dict[str, str]:
        res = _run(["/usr/bin/sinfo", "-h", "-N", "-o", "%N %t"], env=slurm_env(self.spec),
                   check=False, timeout=10)
        out: dict[str, str] = {}
        for line in res.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1].rstrip("*~#!%$@^-")
        return out

    # ---- down --------------------------------------------------------------------------
    def down(self) -> int:
        """Stop every recorded process, slurmds first and munge last; return how many. The
        jobs' slurmstepds (detached from their slurmd) and their processes go first
        (leftovers.py): they would outlive the cluster."""
        jobs = kill_stepd_trees(self.spec.slurm_conf)
        if jobs:
            self._say(f"killed {jobs} job processes (slurmstepd and below)")
        order = {"slurmctld": 1, "slurmdbd": 2, "mariadbd": 3, "munged": 4}
        recs = sorted(self.procs.records(), key=lambda r: order.get(r.name, 0))
        for rec in recs:
            self._say(f"stopping {rec.name} (pid {rec.pid})")
            self.procs.stop(rec)
        return len(recs)


__all__ = ["DevCluster", "UpResult", "preflight", "register_accounts", "slurm_env", "write_configs"]
