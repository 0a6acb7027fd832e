"""What the local test cluster looks like: its directory tree, ports and rendered config files.

Pure functions from a ``ClusterSpec`` to file contents, so the shape can be unit-tested without
root or Slurm. The traps these files avoid are written down in docs/devcluster.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from railgang.devcluster import site
from railgang.topology import hostnames
from railgang.topology.gpus import GPU_TYPES
from railgang.topology.tiers import Tier

SLURM_BIN = Path("/usr/sbin")
GPU_DEVICE_MAJOR = 195  # the NVIDIA character-device major; gres/gpu rejects plain files

# Node features a pool of each GPU type gets unless `--pools` names its own (docs/needs.md): the
# common SKU's memory, NVLink and interconnect, from the GPU catalogue (topology/gpus.py)
POOL_FEATURES: dict[str, tuple[str, ...]] = {
    t.name: (f"gpumem_{t.memory_gb:g}g", *(("nvlink",) if t.nvlink else ()), t.network)
    for t in GPU_TYPES.values() if t.compute_capability is not None
}
_POOL = re.compile(r"^([a-z0-9][a-z0-9_.\-]*)(?::([a-z\-]+))?=(\d+)(?::([A-Za-z0-9_.+\-]+))?$")
# capacity tier -> the node feature that carries it (daemon/slurm/cli/facts.py reads it back)
TIER_FEATURES: dict[str, str] = {Tier.RESERVED: "tier_reserved", Tier.ON_DEMAND: "tier_ondemand", Tier.SPOT: "tier_spot"}


@dataclass(frozen=True)
class Pool:
    """Nodes of one GPU type (and capacity tier): typed GRES ``gpu:TYPE:N`` and node features for
    the facts, the tier as a ``tier_*`` feature ("" = no tier: owned, unpriced)."""

    gpu_type: str
    nodes: int
    features: tuple[str, ...]
    tier: str = ""

    @property
    def name(self) -> str:
        """``v100`` or ``v100:spot``, as ``--pools`` names it."""
        return f"{self.gpu_type}:{self.tier}" if self.tier else self.gpu_type


MAX_POOL_NODES = 256  # = DevClusterSettings.nodes' upper bound


def parse_pools(text: str) -> tuple[Pool, ...]:
    """``a100=4,v100=4`` (TYPE=NODES, features from :data:`POOL_FEATURES`),
    ``a100=4:gpumem_40g+nvlink+roce`` (features given), ``v100:spot=4`` (a capacity tier, the
    syntax of ``railgang sim --gpus``); ValueError with a one-line message."""
    pools: list[Pool] = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        m = _POOL.match(item)
        if m is None or int(m.group(3)) < 1:
            raise ValueError(f"--pools: '{item}' is not TYPE=NODES[:FEATURE+FEATURE] or "
                             "TYPE:TIER=NODES (e.g. a100=8,v100=8,v100:spot=4 or a100=4:gpumem_40g+nvlink)")
        gpu_type, tier, feats = m.group(1), m.group(2) or "", m.group(4)
        if tier and tier not in TIER_FEATURES:
            raise ValueError(f"--pools: unknown tier '{tier}' in '{item}' (one of "
                             f"{', '.join(TIER_FEATURES)})")
        if feats is None and gpu_type not in POOL_FEATURES:
            raise ValueError(f"--pools: no default features for '{gpu_type}' (known: "
                             f"{', '.join(sorted(POOL_FEATURES))}); give them: {gpu_type}=N:gpumem_XXg+...")
        if any((p.gpu_type, p.tier) == (gpu_type, tier) for p in pools):
            raise ValueError(f"--pools: '{item.split('=')[0]}' is given twice")
        features = tuple(feats.split("+")) if feats else POOL_FEATURES[gpu_type]
        if tier:
            features = (*(f for f in features if not f.startswith("tier_")), TIER_FEATURES[tier])
        pools.append(Pool(gpu_type, int(m.group(3)), features, tier))
    total = sum(p.nodes for p in pools)
    if total > MAX_POOL_NODES:  # one slurmd process per node on this machine
        raise ValueError(f"--pools: {total:,} nodes in all; a local cluster takes at most "
                         f"{MAX_POOL_NODES} (devcluster.nodes has the same bound)")
    return tuple(pools)


@dataclass(frozen=True)
class ClusterSpec:
    """Size, ports and home of one local cluster."""

    dir: Path
    cluster_name: str = "railgang"
    nodes: int = 16
    gpus_per_node: int = 8
    nodes_per_leaf: int = 4
    slurmctld_port: int = 16817
    slurmdbd_port: int = 16819
    mariadb_port: int = 16306
    slurmd_base_port: int = 16900
    accounting: bool = True
    cpus_per_node: int = 16
    memory_mb_per_node: int = 65536
    # slurm.conf MaxJobCount; 0 = Slurm's default (10,000 jobs, ended ones within MinJobAge
    # included): the 10,000-waiting benchmark needs more
    max_job_count: int = 0
    # the railgang daemon's heartbeat file (daemon.heartbeat_file), so a daemon started with the
    # same configuration is the one job_submit.lua trusts; None = a file inside the cluster
    daemon_heartbeat: Path | None = None
    # where each daemon listens. The defaults put everything on this host's loopback; the
    # containerised cluster (docker-compose.yml, `devcluster render --containers`) gives each
    # its own host name and node_addr=None, i.e. every node is reachable under its own name
    slurmctld_host: str = "localhost(127.0.0.1)"
    dbd_host: str = "127.0.0.1"
    storage_host: str = "127.0.0.1"
    storage_pass: str = "slurm-devcluster"
    node_addr: str | None = "127.0.0.1"
    # the class grants file the daemon keeps current (ledger.grants_file); None = a file inside
    # the cluster, seeded at `up` with the test accounts' grants (no daemon writes it)
    grants_file: Path | None = None
    # mixed GPU pools (typed GRES + features), in node order; empty = untyped gpu:N on every node.
    # Their node counts must add up to `nodes` (`with_pools` sets both)
    pools: tuple[Pool, ...] = ()
    # the fleet file job_submit.lua reads (slurm.fleet_file); None = a file inside the cluster.
    # `up` writes it from sinfo; a daemon with the same setting keeps it current
    fleet_file: Path | None = None
    # the site-like configuration (site.py: partitions, CPUs and memory per node, a QOS, a
    # reservation, a license); build the spec with site_spec(), which sets its pools too
    site: bool = False

    def __post_init__(self) -> None:
        if self.pools and sum(p.nodes for p in self.pools) != self.nodes:
            raise ValueError(f"pools hold {sum(p.nodes for p in self.pools)} nodes, the cluster "
                             f"{self.nodes}; build the spec with with_pools()")

    def with_pools(self, pools: tuple[Pool, ...]) -> ClusterSpec:
        """This spec with ``pools`` (and as many nodes as they hold); no pools: unchanged."""
        if not pools:
            return self
        return replace(self, pools=pools, nodes=sum(p.nodes for p in pools))

    def pool_of(self) -> dict[str, Pool]:
        """node name -> its pool (empty without pools)."""
        out: dict[str, Pool] = {}
        names = iter(self.node_names)
        for pool in self.pools:
            for _ in range(pool.nodes):
                out[next(names)] = pool
        return out

    @property
    def node_names(self) -> list[str]:
        width = max(2, len(str(self.nodes)))
        return [f"n{i:0{width}d}" for i in range(1, self.nodes + 1)]

    @property
    def leaves(self) -> list[tuple[str, list[str]]]:
        names = self.node_names
        step = self.nodes_per_leaf
        return [(f"leaf{j // step + 1}", names[j:j + step]) for j in range(0, len(names), step)]

    def slurmd_port(self, index: int) -> int:
        return self.slurmd_base_port + index + 1

    @property
    def ports(self) -> dict[str, int]:
        ports = {"slurmctld": self.slurmctld_port}
        if self.accounting:
            ports |= {"slurmdbd": self.slurmdbd_port, "mariadb": self.mariadb_port}
        for i, name in enumerate(self.node_names):
            ports[f"slurmd {name}"] = self.slurmd_port(i)
        return ports

    # ---- the directory tree -------------------------------------------------------------
    @property
    def etc(self) -> Path:
        return self.dir / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def bin(self) -> Path:
        return self.dir / "bin"

    @property
    def run(self) -> Path:
        return self.dir / "run"

    @property
    def log(self) -> Path:
        return self.dir / "log"

    @property
    def dev(self) -> Path:
        return self.dir / "dev"

    @property
    def munge_socket(self) -> Path:
        return self.run / "munge" / "munge.socket"

    @property
    def mysql_socket(self) -> Path:
        return self.run / "mysqld.sock"

    @property
    def daemon_dir(self) -> Path:
        """Where the railgang daemon's files for slurmctld live (heartbeat, fleet): owned by the
        daemon's user (``DAEMON_USER``) when it exists, as /var/lib/railgang is in production."""
        return self.run / "railgang"

    @property
    def heartbeat_file(self) -> Path:
        """The daemon heartbeat job_submit.lua reads (leases only while it is fresh)."""
        return self.daemon_heartbeat or self.daemon_dir / "heartbeat"

    @property
    def gpu_fleet_file(self) -> Path:
        """The fleet file job_submit.lua reads to refuse needs no node meets."""
        return self.fleet_file or self.daemon_dir / "fleet"

    @property
    def class_grants_file(self) -> Path:
        """The class grants job_submit.lua reads (classes 0-2 only for who is listed)."""
        return self.grants_file or self.run / "railgang-grants"


# A cluster without a daemon's grants file trusts its own test accounts with every class, the
# way it registers them in slurmdbd (one `CLASS KIND SUBJECT` line each; daemon/ledger docs)
TEST_GRANTS = ("# railgang devcluster: its test accounts' class grants\nlimit 2 14400\n"
               + "".join(f"{c} account {a}\n" for c in (0, 1, 2) for a in ("team-a", "team-b")))


def site_spec(spec: ClusterSpec) -> ClusterSpec:
    """``spec`` as the site-like cluster (site.py): its pools, six nodes, accounting on (the QOS
    lives in slurmdbd)."""
    return replace(spec, site=True, accounting=True).with_pools(parse_pools(site.SITE_POOLS))


def node_range(names: list[str]) -> str:
    return str(hostnames.collect(names))


def render_slurm_conf(spec: ClusterSpec) -> str:
    gres_gpu = f"gpu:{spec.gpus_per_node}"
    lines = [
        "# Generated by `railgang devcluster up`; edits are overwritten on the next `up`.",
        f"ClusterName={spec.cluster_name}",
        f"SlurmctldHost={spec.slurmctld_host}",
        f"SlurmctldPort={spec.slurmctld_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        # our own munged on our own socket: never touches the host's munge
        f"AuthInfo=socket={spec.munge_socket}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={spec.dir / 'state'}",
        f"SlurmdSpoolDir={spec.dir / 'spool'}/%n",
        f"SlurmctldPidFile={spec.run}/slurmctld.pid",
        f"SlurmdPidFile={spec.run}/slurmd-%n.pid",
        f"SlurmctldLogFile={spec.log}/slurmctld.log",
        f"SlurmdLogFile={spec.log}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "GresTypes=gpu",
        "TopologyPlugin=topology/tree",
        "JobSubmitPlugins=lua",
        # fake hardware: 16-CPU/64-GB nodes register on a 2-core machine
        "SlurmdParameters=config_overrides",
        "DefMemPerCPU=1024",
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=300",
        "JobAcctGatherType=jobacct_gather/none",
        "PriorityType=priority/multifactor",
        "PriorityWeightAge=1000",
        "PriorityWeightFairshare=10000",
        "PriorityWeightJobSize=1000",
    ]
    if spec.accounting:
        lines += [
            "AccountingStorageType=accounting_storage/slurmdbd",
            f"AccountingStorageHost={spec.dbd_host}",
            f"AccountingStoragePort={spec.slurmdbd_port}",
            # for slurmdbd connections this names the munge socket (AuthInfo is not used there)
            f"AccountingStoragePass={spec.munge_socket}",
            "AccountingStorageTRES=gres/gpu",
            # the site's QOS limits are enforced only with limits,qos
            f"AccountingStorageEnforce=associations{',limits,qos' if spec.site else ''}",
            "AccountingStoreFlags=job_comment",
        ]
    else:
        lines.append("AccountingStorageType=accounting_storage/none")
    if spec.max_job_count:
        lines.append(f"MaxJobCount={spec.max_job_count}")
    if spec.site:
        lines += site.site_conf_lines()
    lines.append(
        f"NodeName=DEFAULT CPUs={spec.cpus_per_node} RealMemory={spec.memory_mb_per_node} "
        f"Gres={gres_gpu} State=UNKNOWN"
    )
    # NodeAddr is not allowed on NodeName=DEFAULT; every slurmd needs its own port
    pool_of = spec.pool_of()
    for i, name in enumerate(spec.node_names):
        addr = spec.node_addr or name
        pool = pool_of.get(name)
        typed = (f" Gres=gpu:{pool.gpu_type}:{spec.gpus_per_node} Feature={','.join(pool.features)}"
                 if pool else "")
        extra = site.site_node(name) if spec.site else ""
        lines.append(f"NodeName={name} NodeAddr={addr} NodeHostname={name} Port={spec.slurmd_port(i)}"
                     f"{typed}{extra}")
    # GPU billing weights need gres/gpu as an accounted TRES, i.e. slurmdbd
    billing = ' TRESBillingWeights="CPU=1.0,GRES/gpu=2.0"' if spec.accounting else ""
    lines += site.site_partitions(billing) if spec.site else [
        f"PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP{billing}"]
    return "\n".join(lines) + "\n"


def render_gres_conf(spec: ClusterSpec) -> str:
    last = spec.gpus_per_node - 1
    devices = f"{spec.dev}/nvidia[0-{last}]" if last > 0 else f"{spec.dev}/nvidia0"
    head = ("# Generated by `railgang devcluster up`. All emulated nodes share the same device nodes.\n"
            "AutoDetect=off\n")
    if not spec.pools:
        return head + f"NodeName={node_range(spec.node_names)} Name=gpu File={devices}\n"
    by_pool: dict[str, list[str]] = {}
    for name, pool in spec.pool_of().items():
        by_pool.setdefault(pool.gpu_type, []).append(name)
    return head + "".join(f"NodeName={node_range(names)} Name=gpu Type={t} File={devices}\n"
                          for t, names in by_pool.items())


def render_topology_conf(spec: ClusterSpec) -> str:
    lines = ["# Generated by `railgang devcluster up`: leaf switches under one spine."]
    for leaf, members in spec.leaves:
        lines.append(f"SwitchName={leaf} Nodes={node_range(members)}")
    leaves = [leaf for leaf, _ in spec.leaves]
    lines.append(f"SwitchName=spine Switches={node_range(leaves)}")
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(spec: ClusterSpec) -> str:
    return "\n".join([
        "# Generated by `railgang devcluster up` (slurmdbd refuses this file unless mode 600).",
        "AuthType=auth/munge",
        f"AuthInfo=socket={spec.munge_socket}",
        # DbdHost is the short host name slurmdbd checks it runs on; DbdAddr where clients reach it
        f"DbdHost={'localhost' if spec.dbd_host == '127.0.0.1' else spec.dbd_host}",
        f"DbdAddr={spec.dbd_host}",
        f"DbdPort={spec.slurmdbd_port}",
        "SlurmUser=root",
        f"PidFile={spec.run}/slurmdbd.pid",
        f"LogFile={spec.log}/slurmdbd.log",
        "StorageType=accounting_storage/mysql",
        # 127.0.0.1, not localhost: with localhost the client ignores the port
        f"StorageHost={spec.storage_host}",
        f"StoragePort={spec.mariadb_port}",
        "StorageUser=slurm",
        f"StoragePass={spec.storage_pass}",
        "StorageLoc=slurm_acct_db",
        "",
    ])


def render_plugstack_conf(spank_so: Path | None) -> str:
    head = "# Generated by `railgang devcluster up`.\n"
    if spank_so is None:
        return head + "# railgang SPANK plugin not built (gcc or libslurm-dev missing)\n"
    return head + f"optional {spank_so}\n"


__all__ = [
    "MAX_POOL_NODES",
    "POOL_FEATURES",
    "TEST_GRANTS",
    "TIER_FEATURES",
    "ClusterSpec",
    "Pool",
    "parse_pools",
    "render_gres_conf",
    "render_plugstack_conf",
    "render_slurm_conf",
    "render_slurmdbd_conf",
    "render_topology_conf",
    "site_spec",
]
