"""Settings: one pydantic-settings object from a TOML file plus ``RAILGANG_*`` variables.

Precedence (highest first): explicit keyword arguments, environment (``RAILGANG_DB__URL`` for
nested keys), the TOML file (``--config PATH`` or ``RAILGANG_CONFIG``), then defaults. Nothing
(engine, client) is built here: this module only describes and validates.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.report.config import ReportSettings
from railgang.daemon.serving.config import ServingSettings
from railgang.db.urls import mask_url
from railgang.errors import ConfigError
from railgang.topology.tiers import Capacity

DEFAULT_STATE_DIR = Path(os.environ.get("RAILGANG_HOME", "/var/lib/railgang"))
DEV_API_SECRET = "railgang-dev-secret-change-me"


class DatabaseSettings(BaseModel):
    model_config = {"extra": "forbid"}
    # SQLite file is the embedded default; PostgreSQL by URL, e.g.
    # postgresql+psycopg://railgang:...@127.0.0.1:5432/railgang
    url: str = Field(default=f"sqlite:///{DEFAULT_STATE_DIR / 'railgang.sqlite'}")
    echo: bool = False

    @field_validator("url")
    @classmethod
    def _known_dialect(cls, v: str) -> str:
        if not v.startswith(("sqlite:", "postgresql")):
            raise ValueError("must start with sqlite:/// or postgresql+psycopg://")
        return v


# the backends `daemon run` drives; "pyslurm" is a valid value but no daemon backend yet, so
# `config check` refuses it as `daemon run` does (unsupported_backend, the one message)
DAEMON_BACKENDS = ("cli", "sim")


def unsupported_backend(kind: str) -> ConfigError:
    """The error ``daemon run`` and ``config check`` give for a ``slurm.backend`` the daemon
    cannot drive (one not in :data:`DAEMON_BACKENDS`)."""
    return ConfigError(f"slurm.backend = {kind!r}: not supported by the daemon (pyslurm needs "
                       "Slurm 25.11; see docs/daemon.md); use 'cli' or 'sim'")


class SlurmSettings(BaseModel):
    model_config = {"extra": "forbid"}
    backend: Literal["cli", "pyslurm", "sim"] = "cli"
    # slurm.conf of the cluster to drive; empty = the client's default lookup
    conf: Path | None = None
    # per try; a read that timed out is retried with twice the time (at most 8x) and keeps the
    # last time it was given for its next calls (its cost grows with the queue: runner.py)
    command_timeout_s: float = Field(default=30.0, gt=0)
    # transient failures (slurmctld busy/unreachable, timeouts) are retried this often, with
    # exponential backoff from retry_backoff_s; refusals are never retried
    retries: int = Field(default=2, ge=0, le=10)
    retry_backoff_s: float = Field(default=0.5, ge=0)
    # begin-time lease of waiting railgang jobs (job_submit.lua); keep it several cycle
    # intervals long: a dead daemon's jobs run natively after at most this long
    lease_s: int = Field(default=120, ge=5, le=86400)
    # a waiting job's lease is renewed once fewer than this many seconds of it are left (or it
    # lapsed): a cycle renews what expires soon, about cycle_interval_s / (lease_s -
    # lease_renew_before_s) of the queue, not all of it (one Slurm RPC per job). Keep it above
    # two cycle intervals, so a slow or failed cycle does not let leases lapse; lease_s (or more:
    # it is capped at lease_s) renews every lease every cycle. A dead daemon's jobs still run
    # natively within lease_s
    lease_renew_before_s: int = Field(default=40, ge=1, le=86400)
    # renew those leases on a thread of the backend's own, so a cycle does not wait on one
    # slurmctld RPC per lease (~1,250 a cycle at 10,000 waiting); a Start waits only while a
    # renewal of its own job is in flight. false: renew inline between observing and applying
    lease_renew_thread: bool = True
    # a Start Slurm refuses is not sent again at once: the job sits out 1, 2, 4, ... cycles (at
    # most 32), out of the queue the core plans, so it holds no GPUs from others; after this many
    # refusals in a row its lease is released and it is left to Slurm's own checks (a bad GRES:
    # BadConstraints), never planned again by this daemon process (docs/slurm-backend.md)
    start_refusals_max: int = Field(default=5, ge=1, le=100)
    # squeue --json writes every field of every job (10,000 waiting: 36 MB on 22.05, which
    # ignores its filters; 97 MB and 5.6 s on 24.11): between full JSON reads, jobs are read
    # from the plain `squeue -O` form of the fields the daemon needs (slurm/cli/narrow.py, 2 MB,
    # 0.2 s; every version); the JSON is read at least this often (job names, progress
    # Comments) and whenever a job that is not pending is new or changed. 0 = the JSON every
    # cycle. Default 60 since every real-Slurm 22.05 suite passed with it (e2e 16, the rest
    # 137) and 24.11/26.05 build the same records (BENCHMARKS.md "10,000 waiting")
    narrow_full_read_s: float = Field(default=60.0, ge=0, le=86400)
    # where squeue honours -j (24.11+) a new waiting job is read by id (its name) in the cycle
    # that first lists it, so the full read only refreshes what an owner changed later in a
    # waiting job's name or Comment (neither is read while it waits but for the start-time
    # estimate's model): each record is read again by id in turn within this period there (no
    # read of every job for it: 24.11 at 10,000 waiting took 9-11 s, BENCHMARKS.md "10,000
    # waiting jobs on Slurm 24.11"), not narrow_full_read_s
    narrow_full_read_filtered_s: float = Field(default=600.0, ge=0, le=86400)
    # topology.conf to build the fabric from; empty = topology.conf beside slurm.conf, else
    # `scontrol show topology`
    topology: Path | None = None
    # topology/block: each block is one multi-node NVLink domain (GB200/GB300 NVL72 racks), so a
    # TP group wider than a node stays inside one block (docs/topology.md)
    blocks_nvlink: bool = False
    # a grow is checkpoint + requeue: seconds between the checkpoint signal and the requeue
    resize_grace_s: float = Field(default=60.0, ge=0)
    # the fleet file job_submit.lua reads (RAILGANG_FLEET_FILE) to refuse needs no node meets;
    # rewritten from sinfo when the nodes' facts change (docs/needs.md); unset = not written
    fleet_file: Path | None = None
    # capacity tiers (docs/needs.md): a node's tier is its tier_spot/tier_ondemand/tier_reserved
    # feature; USD per GPU-hour as TYPE[:TIER]=USD, the syntax of `railgang sim --price` (types
    # and tiers not listed: the simulator's list prices); spot's reclaims per node-day and notice
    prices: str = ""
    spot_interruptions_per_node_day: float = Field(default=0.0, ge=0, le=1000)
    spot_notice_s: float = Field(default=120.0, ge=0, le=3600)

    @field_validator("prices")
    @classmethod
    def _prices_parse(cls, v: str) -> str:
        from railgang.daemon.pricing import parse_prices  # lazy: pricing imports the errors module

        try:
            parse_prices(v)
        except ConfigError as exc:
            raise ValueError(str(exc).replace("--price", "prices", 1)) from None
        return v


class DevClusterSettings(BaseModel):
    model_config = {"extra": "forbid"}
    dir: Path = DEFAULT_STATE_DIR / "devcluster"
    cluster_name: str = "railgang"
    nodes: int = Field(default=16, ge=1, le=256)
    gpus_per_node: int = Field(default=8, ge=1, le=16)
    nodes_per_leaf: int = Field(default=4, ge=1)
    # loopback ports: slurmctld, slurmdbd, mariadb; slurmd i gets slurmd_base_port + i
    slurmctld_port: int = Field(default=16817, ge=1024, le=65535)
    slurmdbd_port: int = Field(default=16819, ge=1024, le=65535)
    mariadb_port: int = Field(default=16306, ge=1024, le=65535)
    slurmd_base_port: int = Field(default=16900, ge=1024, le=65000)
    accounting: bool = True
    # mixed GPU pools TYPE=NODES[:FEATURE+...], e.g. "a100=4,v100=4" (docs/needs.md); "" = one
    # untyped pool of `nodes` nodes
    pools: str = ""


class LinkSettings(BaseModel):
    """Live InfiniBand link health (docs/topology.md "Live link health"): scrape counters every
    ``interval_s``, quarantine a port after ``quarantine_after`` lame intervals of the last
    ``window``, release it after ``release_after`` clean intervals in a row."""

    model_config = {"extra": "forbid"}
    enabled: bool = False
    # node_exporter's infiniband collector, one URL per host: "{host}" is replaced by the node name
    exporter_url: str = ""  # e.g. "http://{host}:9100/metrics"
    hosts: str = ""  # hostlist of the hosts to scrape, e.g. "gpu[001-128]"; empty = every node
    # sysfs trees gathered per host: <sysfs_root>/<host>/class/infiniband/<dev>/ports/<p>/counters
    sysfs_root: Path | None = None
    interval_s: float = Field(default=30.0, gt=0)
    timeout_s: float = Field(default=5.0, gt=0)  # per scrape
    workers: int = Field(default=32, ge=1, le=512)  # scrapes in flight at once
    nominal_gbps: float = Field(default=50.0, gt=0)  # expected GB/s per port (4X NDR = 50)
    lame_errors_per_s: float = Field(default=0.01, ge=0)  # physical errors/s that make a port lame
    congested_wait_per_s: float = Field(default=1e6, ge=0)  # port_xmit_wait ticks/s: congested
    quarantine_after: int = Field(default=3, ge=1)
    window: int = Field(default=5, ge=1)
    release_after: int = Field(default=5, ge=1)
    state_file: Path = DEFAULT_STATE_DIR / "links.json"  # what `railgang topology links` shows
    # switch ports: <dir>/<switch>.perfquery, `perfquery -x` text a site job refreshes (e.g. from cron)
    switch_perfquery_dir: Path | None = None

    @field_validator("exporter_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if v and (not v.startswith(("http://", "https://")) or "{host}" not in v):
            raise ValueError("must be an http(s) URL containing {host}, e.g. "
                             "http://{host}:9100/metrics")
        return v

    @model_validator(mode="after")
    def _window(self) -> LinkSettings:
        if self.quarantine_after > self.window:
            raise ValueError(f"quarantine_after ({self.quarantine_after}) must not exceed window "
                             f"({self.window})")
        if (self.enabled and not self.exporter_url and self.sysfs_root is None
                and self.switch_perfquery_dir is None):
            raise ValueError("enabled without a source: set exporter_url or sysfs_root")
        return self


class DaemonSettings(BaseModel):
    model_config = {"extra": "forbid"}
    policy: str = "default"
    # 0.1 s to a day, as a replay takes it (`sim --config`): a tiny interval is a busy loop
    cycle_interval_s: float = Field(default=10.0, ge=0.1, le=86400)
    heartbeat_file: Path = DEFAULT_STATE_DIR / "heartbeat"
    # measured speed per job and model (slurm/cli/speed.py), kept across restarts; None: in memory
    speed_file: Path | None = DEFAULT_STATE_DIR / "speed.json"
    # the core's cycle knobs (daemon/core/cycle.py CycleConfig)
    preempt: bool = True  # allow the preempt phase
    resize: bool = True  # allow shrinking and growing elastic jobs
    emit_priorities: bool = False  # also hand the policy's order to Slurm as job priorities
    preempt_grace_s: float = Field(default=120.0, ge=0)  # PreemptionBudget.grace_s: signal to requeue
    # ElasticRules.shrink_grace_s: a shrink's notice, signal to shrink (docs/training.md); unset:
    # preempt_grace_s. 0: shrink at once, without a signal (the ranks on the nodes dropped die)
    shrink_grace_s: float | None = Field(default=None, ge=0)
    # PreemptionBudget.churn_cap: share of the GPUs that may be preempted per 10-min window (a small
    # cluster needs more than 5 % to free one whole NVLink block at all)
    preempt_churn_cap: float = Field(default=0.05, ge=0, le=1)
    resize_min_interval_s: float = Field(default=600.0, ge=0)  # ElasticRules.min_interval_s
    # CycleConfig.leaf_wait_s / leaf_holds: a multi-node gang one leaf could hold waits up to this
    # long after submit for one leaf instead of spreading, holding up to leaf_holds leaves; 0 = off
    leaf_wait_s: float = Field(default=120.0, ge=0)
    leaf_holds: int = Field(default=2, ge=0)
    # past leaf_wait_s and up to this, a gang keeps waiting only while a leaf is expected to have
    # room for it by then (a whole-leaf gang queued behind others; like Slurm's
    # --switches=1@10:00); <= leaf_wait_s: no second bound
    leaf_wait_max_s: float = Field(default=600.0, ge=0)
    # CycleConfig.whole_leaf_first: a gang that needs a whole leaf holds one ahead of the smaller
    # jobs before it in the order (docs/policies.md "Gangs that need a whole leaf")
    whole_leaf_first: bool = False
    # CycleConfig.backfill_held_leaf: a job that would wait starts on a held leaf's GPUs when it
    # ends before that leaf's holder expects room there (docs/topology.md "Whole leaves on a tree")
    backfill_held_leaf: bool = False
    # issue 21 (docs/topology.md "Whole blocks"): a multi-node gang evicts whole jobs inside one
    # leaf/NVLink block (CycleConfig.whole_domain_evict), and small jobs are moved out of a nearly
    # free block for a waiting gang when it pays (CycleConfig.defrag); both off by default
    whole_domain_evict: bool = False
    defrag: bool = False
    # PreemptionBudget.domain_patience_s: with whole_domain_evict, a gang evicts for a whole leaf/
    # block only after waiting this long (0 = at once; on NVL72 racks 3600 with leaf_wait_s 1200
    # and leaf_wait_max_s 3600 lost fewer GPU-hours than Slurm 24.11's own placement at a 4-11x
    # shorter wait: docs/topology.md, BENCHMARKS.md "Patience before evicting")
    domain_patience_s: float = Field(default=0.0, ge=0)
    # PreemptionBudget.churn_burst_gpus: GPUs that may be preempted at once when above the churn
    # cap, e.g. one whole leaf (64 on 8 x 8-GPU leaves); the window stretches to keep the cap's
    # long-run rate. 0 = the cap (docs/topology.md "Whole leaves on a tree")
    churn_burst_gpus: int = Field(default=0, ge=0, le=1_000_000)
    # fair share with a half-life (docs/policies.md "Fair share with a half-life"): inside a
    # Tiresias queue, default orders the account that used fewer GPU-hours lately first (its
    # ledger runs and running jobs, decayed); off by default (the pinned schedules)
    fair_share: bool = False
    # None: Slurm's PriorityDecayHalfLife (scontrol show config), else 7 days; 0: no decay
    fair_share_half_life_s: float | None = Field(default=None, ge=0)
    # quota guarantees × this where the measured busy share supports it (x × busy <= 91 %);
    # 1.0 = off (docs/policies.md "Quotas")
    quota_oversubscription: float = Field(default=1.0, ge=1.0, le=2.0)
    seed: int = 0  # seed of the core's tie-breaking rng (and of the sim demo's workload)
    # Prometheus /metrics on metrics_host:metrics_port; port 0 turns the endpoint off
    metrics_host: str = "127.0.0.1"
    metrics_port: int = Field(default=9781, ge=0, le=65535)
    # bounded tables: settled journal entries and departed jobs' explanations are kept this long
    journal_retention_days: float = Field(default=7.0, gt=0)
    explain_retention_s: float = Field(default=86400.0, gt=0)
    # a waiting job's position, jobs ahead, free GPUs, fair share and estimate in `railgang
    # explain` are refreshed this often (its reason at once); 0 = every cycle (docs/daemon.md)
    explain_refresh_s: float = Field(default=60.0, ge=0, le=86400)
    keep_cycles: int = Field(default=10000, ge=10)  # rows of the cycle log
    demo_jobs: int = Field(default=30, ge=0, le=100000)  # slurm.backend = "sim": jobs to replay
    # start-time estimates `railgang explain` shows (docs/estimate.md): the queue is simulated
    # forward again this often (0 = off), within a wall-clock budget, horizon and draw count
    estimate_interval_s: float = Field(default=60.0, ge=0)
    estimate_wall_s: float = Field(default=1.0, gt=0, le=30)
    estimate_horizon_h: float = Field(default=168.0, gt=0, le=8760)
    estimate_samples: int = Field(default=8, ge=0, le=100)
    links: LinkSettings = LinkSettings()  # live link health (off by default)
    # policy tiresias: its queues' bounds in attained GPU-hours (Tiresias.thresholds_gpu_h)
    tiresias_thresholds_gpu_h: tuple[float, ...] = Field(default=(1.0, 10.0, 100.0), min_length=1,
                                                         max_length=16)
    # every other CycleConfig field by its name, nested rules as tables ([daemon.cycle.migration]
    # min_loss = 0.2); checked by cycle_settings.cycle_from, which refuses a field that has a key
    # of its own above (docs/configuration.md "Every cycle knob")
    cycle: dict[str, Any] = {}

    @field_validator("tiresias_thresholds_gpu_h")
    @classmethod
    def _rising(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not (v[0] > 0 and all(map(math.isfinite, v)) and list(v) == sorted(set(v))):
            raise ValueError("must be positive, finite and rising, e.g. [1, 10, 100]")
        return v


class ApiSettings(BaseModel):
    model_config = {"extra": "forbid"}
    host: str = "127.0.0.1"
    port: int = Field(default=8780, ge=1, le=65535)
    secret_key: SecretStr = SecretStr(DEV_API_SECRET)
    # pagination: ?limit= defaults to page_default and is refused above page_max
    page_default: int = Field(default=100, ge=1)
    page_max: int = Field(default=1000, ge=1, le=100000)
    # request bodies over this many bytes are refused (413) as they stream, before parsing
    max_body_bytes: int = Field(default=1 << 20, ge=1024, le=1 << 30)
    # requests holding a database session at once, per worker; the others wait in the event
    # loop, not in a thread (the engine's pool holds 15: more would deadlock the thread pool)
    db_sessions: int = Field(default=10, ge=1, le=14)
    # usage/chargeback/utilisation answers over ended windows are kept this long, per worker,
    # keyed by the ledger's version (daemon/api/cache.py); 0 turns the cache off
    cache_seconds: float = Field(default=30.0, ge=0, le=3600)
    cache_entries: int = Field(default=512, ge=1, le=100_000)


class LedgerSettings(BaseModel):
    """The usage ledger (docs/accounting.md): sacct ingest and chargeback tiers."""

    model_config = {"extra": "forbid"}
    # GPU type of a job whose TRES says only gres/gpu (no gres/gpu:<type>)
    default_gpu_type: str = "gpu"
    # capacity tier of a partition's GPUs for rates; partitions not listed get default_capacity
    capacity_by_partition: dict[str, Capacity] = {}
    default_capacity: Capacity = Capacity.RESERVED
    # each ingest re-reads this much before the watermark (slurmdbd can record late); harmless,
    # because segments are upserted by key
    overlap_s: int = Field(default=600, ge=0, le=86400)
    # the cluster name the watermark is kept under (Slurm's ClusterName)
    cluster: str = "railgang"
    # a long --since/--until range is ingested in windows of this many seconds, one
    # transaction each, so a crash resumes from the last committed window
    window_s: int = Field(default=3600, ge=60, le=7 * 86400)
    # a first ingest with no watermark and no --since starts this long ago
    first_lookback_s: int = Field(default=86400, ge=60)
    # step/compute time rows for the report's communication-bound detector: at most one per job
    # per this many seconds (the daemon's live recorder and the sacct ingest alike)
    step_timing_every_s: int = Field(default=300, ge=10, le=86400)
    # the class grants file job_submit.lua reads (written by `railgang quota grants-file`)
    grants_file: Path = DEFAULT_STATE_DIR / "class_grants.txt"
    # the daemon (cli backend) ingests sacct from the watermark every this many seconds, as
    # `railgang ledger ingest` does; 0 = only by hand (issue 36 item 1)
    ingest_every_s: int = Field(default=300, ge=0, le=86400)
    # GPU telemetry: the base URL of a Prometheus that scrapes the DCGM exporter ("" = none;
    # `railgang ledger telemetry FILE` stays the import path), read every telemetry_every_s
    telemetry_prometheus_url: str = Field(default="", pattern=r"^(https?://\S+)?$")
    telemetry_every_s: int = Field(default=300, ge=10, le=86400)
    telemetry_step_s: int = Field(default=30, ge=1, le=3600)  # one sample per GPU per step
    # label matchers added to every DCGM query, e.g. 'job="dcgm"' (a site with two exporters)
    telemetry_selector: str = ""


MAX_FLOAT_SETTING = 1e9


def _floats(data: Any, key: str = "") -> Iterator[tuple[str, float]]:
    """(dotted key, value) of every float in a settings dump, nested groups and tables included."""
    if isinstance(data, dict):
        for name, value in data.items():
            yield from _floats(value, f"{key}.{name}" if key else str(name))
    elif isinstance(data, float):
        yield key, data


class Settings(BaseSettings):
    """Everything railgang can be told. See docs/configuration.md for each key."""

    model_config = SettingsConfigDict(
        env_prefix="RAILGANG_", env_nested_delimiter="__", extra="forbid"
    )

    environment: Literal["dev", "prod"] = "dev"
    db: DatabaseSettings = DatabaseSettings()
    slurm: SlurmSettings = SlurmSettings()
    devcluster: DevClusterSettings = DevClusterSettings()
    daemon: DaemonSettings = DaemonSettings()
    api: ApiSettings = ApiSettings()
    ledger: LedgerSettings = LedgerSettings()
    report: ReportSettings = ReportSettings()  # docs/report.md
    failures: FailureSettings = FailureSettings()  # docs/failures.md
    serving: ServingSettings = ServingSettings()  # docs/serving.md

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The TOML file is passed in as init kwargs by load_settings(); env overrides it.
        return (env_settings, init_settings)

    @model_validator(mode="after")
    def _floats_in_range(self) -> Settings:
        # pydantic takes "inf", "nan" and 1e300 for a float; the loop then overflows (timedelta,
        # int(), Event.wait) long after start-up, in a traceback. Every float setting is finite
        # and within MAX_FLOAT_SETTING (31 years in seconds), whatever its own bounds say.
        for key, value in _floats(self.model_dump()):
            if not math.isfinite(value):
                raise ValueError(f"{key}: {value} is not a finite number")
            if abs(value) > MAX_FLOAT_SETTING:
                raise ValueError(f"{key}: {value:g} is out of range (at most {MAX_FLOAT_SETTING:g})")
        return self

    def check_secrets(self) -> None:
        if self.environment == "prod" and self.api.secret_key.get_secret_value() == DEV_API_SECRET:
            raise ConfigError(
                "api.secret_key: the development default is refused when environment = 'prod'; "
                "set RAILGANG_API__SECRET_KEY or [api] secret_key"
            )


# A config file is a few kilobytes; reading at most this much keeps `--config /dev/zero` (or a
# log file given by mistake) from filling memory before the size is refused.
MAX_CONFIG_BYTES = 1 << 20
_TOML_LINE = re.compile(r"\(at line (\d+), column (\d+)\)$")


def _read_toml(path: Path) -> dict[str, Any]:
    """The TOML table in ``path``, read through the one bounded reader (``topology.files``: a
    regular file only, so a FIFO cannot hang the command; at most 1 MiB; UTF-8 without NUL;
    nesting bounded); every problem is one ConfigError naming the file (and line)."""
    from railgang.topology.files import InputProblem, parse_toml, read_text

    try:
        text = read_text(path, "config file", limit=MAX_CONFIG_BYTES)
    except InputProblem as exc:
        hint = " (give --config PATH or unset RAILGANG_CONFIG)" if "not found" in exc.message else ""
        raise ConfigError(f"{exc}{hint}") from exc
    try:
        return parse_toml(text, str(path), "config file", finite=False)  # floats: Settings names the key
    except InputProblem as exc:
        message = exc.message
        where = _TOML_LINE.search(message)
        if where is None:
            raise ConfigError(str(exc)) from exc
        raise ConfigError(f"{path}:{where.group(1)}: {message[:where.start()].rstrip()} "
                          f"(column {where.group(2)})") from exc


def load_settings(path: Path | None = None, **overrides: Any) -> Settings:
    """Build validated settings; any problem becomes one ConfigError naming the key."""
    if path is None and os.environ.get("RAILGANG_CONFIG"):
        path = Path(os.environ["RAILGANG_CONFIG"])
    data: dict[str, Any] = _read_toml(path) if path is not None else {}
    data.update(overrides)
    source = str(path) if path is not None else "configuration"
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            msg = "unknown key (check spelling; see docs/configuration.md)" if err["type"] == "extra_forbidden" else err["msg"]
            if not key:  # a check over several keys (the float ranges): its message names the key
                msg = msg.removeprefix("Value error, ")
            problems.append(f"{source}: {key}: {msg}" if key else f"{source}: {msg}")
        raise ConfigError("; ".join(problems)) from exc
    settings.check_secrets()
    return settings


def masked_dump(settings: Settings) -> dict[str, Any]:
    """The effective configuration as plain data: ``SecretStr`` values shown as '**********' and
    the secrets of every URL (``db.url``, ``daemon.links.exporter_url``...) as ``***``
    (``mask_url``: the authority's password, ``password=``/``sslpassword=``-like parameters).
    What ``config show`` prints and what may be logged."""

    def masked(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: masked(v) for k, v in value.items()}
        if isinstance(value, list):
            return [masked(v) for v in value]
        return mask_url(value) if isinstance(value, str) and "://" in value else value

    return masked(settings.model_dump(mode="json"))  # type: ignore[no-any-return]


def render_toml(data: dict[str, Any]) -> str:
    """``masked_dump``'s data as TOML that loads back (``config show``): scalars as TOML values
    (JSON's spelling of strings, numbers, booleans and arrays is valid TOML), groups as tables,
    nested groups as ``[group.sub]`` tables, and an unset value (None, which TOML cannot spell)
    as a commented line, so the file loads with the same defaults."""
    out: list[str] = []

    def table(name: str, values: dict[str, Any]) -> None:
        if name:
            out.extend(["", f"[{name}]"])
        nested = []
        for key, value in values.items():
            if isinstance(value, dict):
                nested.append((key, value))
            elif value is None:
                out.append(f"# {key} = (unset)")
            else:
                out.append(f"{key} = {json.dumps(value)}")
        for key, value in nested:
            table(f"{name}.{key}" if name else key, value)

    table("", data)
    return "\n".join(out).lstrip("\n") + "\n"


__all__ = ["Settings", "load_settings", "mask_url", "masked_dump", "render_toml"]
