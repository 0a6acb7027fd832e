"""One set of settings (issue 34 item 4): the daemon's runner, its start-time estimator and
``railgang sim --config FILE`` build the same cycle and policy from one settings file
(cycle_settings.cycle_from), every CycleConfig field is reachable from the file, and a bad file is
one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from railgang.daemon import cycle_settings
from railgang.daemon.cli.main import app
from railgang.daemon.config import load_settings
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.cycle_settings import NAMED, cycle_from
from railgang.daemon.service import runner
from railgang.errors import ConfigError

# one settings file with every kind of knob off its default: named keys, [daemon.cycle] tables,
# the failures' spares, the policy's parameters
FILE = """
[daemon]
policy = "{policy}"
fair_share = true
fair_share_half_life_s = 3600
tiresias_thresholds_gpu_h = [2, 20]
leaf_wait_s = 300
leaf_wait_max_s = 900
leaf_holds = 3
whole_leaf_first = true
backfill_held_leaf = true
whole_domain_evict = true
defrag = true
preempt_grace_s = 30
seed = 7
[daemon.cycle]
lame_link_tag = "bad-link"
[daemon.cycle.migration]
min_loss = 0.25
[daemon.cycle.upgrade.spot_rules]
min_gpus = 16
[failures]
spares_per_leaf = 1
"""


def _file(tmp_path: Path, policy: str = "default", extra: str = "") -> Path:
    path = tmp_path / f"railgang-{policy}.toml"
    path.write_text(FILE.format(policy=policy) + extra)
    return path


def _trace(tmp_path: Path) -> Path:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration_s\n"
                     + "".join(f"j{i},{i * 5},{8 * (1 + i % 3)},{60 + i}\n" for i in range(12)))
    return trace


def _daemon(settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """What run_daemon hands its service: its policy, cycle config and estimator."""
    seen: dict[str, Any] = {}

    class Service:
        def __init__(self, **kwargs: Any) -> None:
            seen.update(kwargs)

        def run_once(self) -> None:
            raise RuntimeError("not run: the test only reads what the service was given")

    monkeypatch.setattr(runner, "DaemonService", Service)
    settings = settings.model_copy(update={
        "db": settings.db.model_copy(update={"url": f"sqlite:///{tmp_path / 'rg.sqlite'}"}),
        "slurm": settings.slurm.model_copy(update={"backend": "sim"}),
        "daemon": settings.daemon.model_copy(update={
            "metrics_port": 0, "heartbeat_file": tmp_path / "heartbeat", "speed_file": None})})
    runner.run_daemon(settings, once=True)
    return seen


def _sim(monkeypatch: pytest.MonkeyPatch, *args: str) -> dict[str, Any]:
    """What `railgang sim` hands the engine: its policy and engine config."""
    from railgang.daemon.sim import replay

    seen: dict[str, Any] = {}
    real = replay.simulate  # type: ignore[attr-defined]

    def spy(jobs: Any, policy: Any, fabric: Any, **kwargs: Any) -> Any:
        seen.update(policy=policy, config=kwargs["config"])
        return real(jobs, policy, fabric, **kwargs)

    monkeypatch.setattr(replay, "simulate", spy)
    result = CliRunner().invoke(app, ["sim", *args, "--nodes", "4", "--leaf", "2", "-q", "--json"])
    assert result.exit_code == 0, result.output
    return seen


@pytest.mark.parametrize("policy", ["default", "tiresias"])
def test_the_daemon_its_estimator_and_sim_config_run_one_cycle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str) -> None:
    path = _file(tmp_path, policy)
    settings = load_settings(path)
    daemon = _daemon(settings, monkeypatch, tmp_path)
    sim = _sim(monkeypatch, "--trace", str(_trace(tmp_path)), "--config", str(path))
    expected = cycle_from(settings)
    assert expected.config.leaf_wait_s == 300 and expected.config.spares.per_leaf == 1
    assert daemon["config"] == sim["config"].cycle == expected.config
    estimator = daemon["estimator"]
    assert estimator.cycle == expected.config
    # one policy, the same parameters: the daemon's, the estimator's fresh one, the replay's
    # (the replay adds only its spot rules, which the daemon's default already has)
    assert daemon["policy"] == estimator.make_policy() == sim["policy"] == expected.policy()
    if policy == "tiresias":
        assert sim["policy"].thresholds_gpu_h == (2.0, 20.0)
    else:
        assert sim["policy"].fair_share is True
    # the fair-share half-life and the seed come from the file too (no scontrol: as given)
    assert sim["config"].sim.fair_share_half_life_s == 3600 and sim["config"].seed == 7


def test_sim_options_given_override_the_file_and_those_left_out_take_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _file(tmp_path)
    sim = _sim(monkeypatch, "--trace", str(_trace(tmp_path)), "--config", str(path),
               "--leaf-wait-s", "0", "--seed", "3", "--policy", "fifo")
    assert sim["config"].cycle.leaf_wait_s == 0 and sim["config"].cycle.leaf_wait_max_s == 900
    assert sim["config"].seed == 3 and sim["policy"].name == "fifo"
    # the global --config of `railgang --config FILE sim` is the same file
    root = CliRunner().invoke(app, ["--config", str(path), "sim", "--trace", str(_trace(tmp_path)),
                                    "--nodes", "4", "--leaf", "2", "-q", "--json"])
    assert root.exit_code == 0, root.output


def test_sim_without_config_keeps_its_replay_defaults(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the pinned schedules rely on them: no leaf wait, the core's defaults (docs/simulator.md);
    # $RAILGANG_CONFIG is not read by sim (a replay is what its command line says)
    monkeypatch.setenv("RAILGANG_CONFIG", str(_file(tmp_path)))
    sim = _sim(monkeypatch, "--trace", str(_trace(tmp_path)))
    assert sim["config"].cycle is None and sim["config"].seed == 0
    assert sim["policy"].fair_share is False


def test_sim_config_decides_on_the_daemons_timer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon runs a cycle every daemon.cycle_interval_s, changed or not: with its file the
    replay's quantum and tick are that interval, unless the command line says otherwise."""
    path = _file(tmp_path)
    sim = _sim(monkeypatch, "--trace", str(_trace(tmp_path)), "--config", str(path))
    assert sim["config"].cycle_s == sim["config"].tick_s == 10.0  # the daemon's default
    slow = tmp_path / "slow.toml"
    slow.write_text(path.read_text().replace("[daemon]\n", "[daemon]\ncycle_interval_s = 45\n", 1))
    sim = _sim(monkeypatch, "--trace", str(_trace(tmp_path)), "--config", str(slow))
    assert sim["config"].cycle_s == sim["config"].tick_s == 45.0
    sim = _sim(monkeypatch, "--trace", str(_trace(tmp_path)), "--config", str(slow),
               "--cycle-s", "0", "--tick-s", "5")
    assert (sim["config"].cycle_s, sim["config"].tick_s) == (0.0, 5.0)
    # without a file: a cycle at every change and no tick (the replay's documented defaults)
    sim = _sim(monkeypatch, "--trace", str(_trace(tmp_path)))
    assert sim["config"].cycle_s == sim["config"].tick_s == 0.0


@pytest.mark.parametrize(("text", "says"), [
    ("[daemon]\nleaf_wait_s = -1\n", "daemon.leaf_wait_s"),
    ("[daemon]\nnot_a_key = 1\n", "daemon.not_a_key: unknown key"),
    ("[daemon\n", "bad.toml:1:"),
    ("[daemon]\npolicy = \"nope\"\n", "unknown policy 'nope'"),
    ("[daemon.cycle]\nleaf_wait_s = 5\n", "set daemon.leaf_wait_s instead"),
    ("[daemon.cycle.migration]\nmin_loss = \"high\"\n", "daemon.cycle.migration.min_loss"),
    ("[daemon.cycle]\nbogus = 1\n", "daemon.cycle.bogus: unknown key"),
])
def test_sim_config_with_a_bad_file_is_one_line_exit_1(tmp_path: Path, text: str, says: str) -> None:
    # exit 1 as every command's bad --config (docs/cli.md's table: invalid input, a file's
    # content); 2 is click's own usage errors
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["sim", "--trace", str(_trace(tmp_path)), "--config", str(path),
                                      "-q"])
    assert result.exit_code == 1 and isinstance(result.exception, ConfigError), result.output
    message = str(result.exception)
    assert "\n" not in message and says in message, message


def test_sim_config_bad_file_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "bad.toml"
    path.write_text("[daemon.cycle.migration]\nmin_loss = -1\n")
    for bad in (path, tmp_path / "none.toml"):
        run = subprocess.run([sys.executable, "-c", "from railgang.daemon.cli.entry import main; main()",
                              "sim", "--trace", str(_trace(tmp_path)), "--config", str(bad), "-q"],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 1 and run.stdout == "", run
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr
        assert str(bad.name) in run.stderr or "min_loss" in run.stderr, run.stderr


def _leaves(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out.extend(_leaves(value, f"{prefix}{f.name}."))
        else:
            out.append((f"{prefix}{f.name}", value))
    return out


def _other(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.5 if value < 1 else value * 2
    assert isinstance(value, str), f"a field of a type the file cannot set: {value!r}"
    return value + "-x"


def _get(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


LEAVES = _leaves(CycleConfig())


@pytest.mark.parametrize(("path", "default"), LEAVES, ids=[p for p, _ in LEAVES])
def test_every_cycle_config_field_is_reachable_from_the_settings_file(
        path: str, default: Any) -> None:
    value = _other(default)
    data: dict[str, Any] = {}
    if path in NAMED:  # its own key, e.g. daemon.leaf_wait_s
        group, key = NAMED[path].split(".")
        data[group] = {key: value}
    else:  # the [daemon.cycle] table, nested as the dataclasses are
        *tables, key = path.split(".")
        table: dict[str, Any] = {}
        data["daemon"] = {"cycle": table}
        for name in tables:
            table = table.setdefault(name, {})
        table[key] = value
    setup = cycle_from(load_settings(**data))
    assert _get(setup.config, path) == value
    # and nothing else moved (but the shrink notice, which follows the preemption's grace)
    follows = {path} | ({"elastic.shrink_grace_s"} if path == "budget.grace_s" else set())
    others = {p: v for p, v in _leaves(setup.config) if p not in follows}
    assert others == {p: v for p, v in _leaves(cycle_from(load_settings()).config) if p not in follows}


def test_the_shrink_notice_is_the_preemptions_grace_unless_set() -> None:
    assert cycle_from(load_settings()).config.elastic.shrink_grace_s == 120.0
    grace = cycle_from(load_settings(daemon={"preempt_grace_s": 30})).config.elastic
    assert grace.shrink_grace_s == 30.0
    zero = cycle_from(load_settings(daemon={"preempt_grace_s": 30, "shrink_grace_s": 0}))
    assert zero.config.elastic.shrink_grace_s == 0.0


def test_named_keys_exist_in_the_settings() -> None:
    settings = load_settings()
    leaves = {p for p, _ in LEAVES}
    for path, key in NAMED.items():
        group, name = key.split(".")
        assert path in leaves and hasattr(getattr(settings, group), name), (path, key)


def test_the_daemons_defaults_are_the_cycle_without_a_file() -> None:
    config = cycle_from(load_settings()).config
    assert (config.leaf_wait_s, config.leaf_wait_max_s) == (120.0, 600.0)
    with pytest.raises(ConfigError, match=r"daemon\.cycle\.spares\.per_leaf: set failures\.spares_per_leaf"):
        cycle_from(load_settings(daemon={"cycle": {"spares": {"per_leaf": 1}}}))
    assert "cycle_from" in cycle_settings.__all__


def test_config_check_refuses_a_bad_cycle_table(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[daemon.cycle.defrag]\nmax_movers = 1.5\n")
    result = CliRunner().invoke(app, ["--config", str(path), "config", "check"])
    assert result.exit_code == 1 and "daemon.cycle.defrag.max_movers" in str(result.exception)


def test_the_estimators_profile_orders_the_queue_with_the_daemons_policy() -> None:
    # past a spent budget the profile takes the queue in the policy's order: that policy is the
    # daemon's too (fair share on here), not a bare one from the registry
    from railgang.daemon.core.model.job import Job, JobRequest, JobState, RunningJob
    from railgang.daemon.core.model.snapshot import Node, make_snapshot
    from railgang.daemon.service.estimate import EstimateConfig, StartEstimator
    from railgang.topology.fabric import fabric_from_shape

    fabric = fabric_from_shape(2, 8, 2)

    def job(job_id: str, gpus: int) -> Job:
        return Job(JobRequest(job_id, gpus, account="team-a", submit_time=-100.0, tp=min(gpus, 8),
                              time_limit_s=3600.0), JobState())

    running = RunningJob(job("a", 16), {"n01": tuple(range(8)), "n02": tuple(range(8))},
                         start_time=0.0, replicas=2)
    snapshot = make_snapshot(now=0.0, fabric=fabric, nodes=[Node(n, 8) for n in fabric.nodes],
                             running=[running], pending=[job("b", 8), job("c", 16), job("d", 8)])
    setup = cycle_from(load_settings(daemon={"fair_share": True}))
    made: list[Any] = []

    def make() -> Any:
        made.append(setup.policy())
        return made[-1]

    estimator = StartEstimator("default", make_policy=make,
                               config=EstimateConfig(cycle_s=0.0, max_events=1, samples=2))
    rows = estimator.refresh(snapshot)
    assert "GPU-count profile" in rows["c"].get("note", "")
    assert len(made) == 2 and all(p.fair_share for p in made)  # the simulations', the profile's


def test_sim_ledger_stores_the_replay_of_the_files_policy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `sim --ledger` replays once more to log it: with the policy the replay ran, the file's
    # parameters included, not a bare one from the registry
    from railgang.daemon.sim import ledger_cli

    seen: list[Any] = []
    monkeypatch.setattr(ledger_cli, "write_sim_ledger",
                        lambda err, url, jobs, policy, *a, **kw: seen.append(policy))
    result = CliRunner().invoke(app, ["--config", str(_file(tmp_path)), "sim", "--trace",
                                      str(_trace(tmp_path)), "--nodes", "4", "--leaf", "2", "-q",
                                      "--json", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"])
    assert result.exit_code == 0, result.output
    assert [p.fair_share for p in seen] == [True]


@pytest.mark.parametrize(("args", "says"), [
    (("--cycle-s", "inf"), "--cycle-s inf: 0 (off) or 0.1 to 86400 seconds"),
    (("--tick-s", "1e-9"), "--tick-s 1e-09: 0 (off) or 0.1 to 86400 seconds"),
    # the daemon's settings refuse it too, as they refuse it for the daemon (a busy loop)
    (("--config", "TINY"), "daemon.cycle_interval_s: Input should be greater than or equal to 0.1"),
])
def test_a_quantum_or_tick_that_would_never_end_is_one_line(tmp_path: Path, args: tuple[str, ...],
                                                            says: str) -> None:
    """Before: a replay ticking every 1e-9 s (a file's cycle_interval_s, or the flag) or every inf
    s ran until killed."""
    tiny = tmp_path / "tiny.toml"
    tiny.write_text("[daemon]\ncycle_interval_s = 1e-9\n")
    args = tuple(str(tiny) if x == "TINY" else x for x in args)
    result = CliRunner().invoke(app, ["sim", "--trace", str(_trace(tmp_path)), "--nodes", "4",
                                      "--leaf", "2", "-q", *args])
    # (the entry point prints the ConfigError as one line: `railgang sim ... --cycle-s inf`)
    assert result.exit_code == 1 and says in f"{result.output}{result.exception}", result.output
