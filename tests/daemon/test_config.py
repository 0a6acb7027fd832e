"""Settings: TOML file + RAILGANG_* environment, validated with messages that name the key."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.config import load_settings
from railgang.errors import ConfigError


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "railgang.toml"
    p.write_text(text)
    return p


def test_defaults_use_embedded_sqlite() -> None:
    s = load_settings()
    assert s.db.url.startswith("sqlite:///")
    assert s.devcluster.nodes == 16 and s.devcluster.gpus_per_node == 8


def test_file_then_environment_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, '[devcluster]\nnodes = 8\n[daemon]\npolicy = "tiresias"\n')
    monkeypatch.setenv("RAILGANG_DEVCLUSTER__NODES", "4")
    s = load_settings(path)
    assert s.devcluster.nodes == 4  # environment wins over the file
    assert s.daemon.policy == "tiresias"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[devcluster]\nnodez = 3\n", "devcluster.nodez: unknown key"),
        ("[devcluster]\nnodes = 0\n", "devcluster.nodes: Input should be greater than or equal to 1"),
        ('[db]\nurl = "mysql://x"\n', "db.url: Value error, must start with sqlite"),
        ('[slurm]\nbackend = "rest"\n', "slurm.backend: Input should be 'cli', 'pyslurm' or 'sim'"),
        ("[db\n", "not valid TOML"),
    ],
    ids=["unknown-key", "out-of-range", "bad-url", "bad-enum", "bad-toml"],
)
def test_invalid_config_names_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_settings(write(tmp_path, text))


def test_prod_refuses_the_dev_secret(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"api\.secret_key"):
        load_settings(write(tmp_path, 'environment = "prod"\n'))
    s = load_settings(write(tmp_path, 'environment = "prod"\n[api]\nsecret_key = "s3cr3t-value"\n'))
    assert s.api.secret_key.get_secret_value() == "s3cr3t-value"


def test_config_show_masks_secrets(tmp_path: Path) -> None:
    path = write(tmp_path, '[api]\nsecret_key = "hunter2-hunter2"\n')
    res = CliRunner().invoke(app, ["--config", str(path), "config", "show", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["api"]["secret_key"] == "**********"
    assert "hunter2" not in res.output


def test_cli_reports_config_errors_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write(tmp_path, "[devcluster]\nnodez = 3\n")
    res = subprocess.run([sys.executable, "-c", "from railgang.daemon.cli.main import main; main()",
                          "--config", str(path), "config", "show"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 1
    assert "devcluster.nodez: unknown key" in res.stderr
    assert "Traceback" not in res.stderr


def test_daemon_grace_and_resize_interval_reach_the_core(tmp_path: Path) -> None:
    from railgang.daemon.service.runner import cycle_config

    default = cycle_config(load_settings(write(tmp_path, "")))
    assert (default.budget.grace_s, default.elastic.min_interval_s) == (120.0, 600.0)
    path = write(tmp_path, "[daemon]\npreempt_grace_s = 5\nresize_min_interval_s = 10\n")
    short = cycle_config(load_settings(path))
    assert (short.budget.grace_s, short.elastic.min_interval_s) == (5.0, 10.0)


def test_daemon_leaf_wait_reaches_the_core(tmp_path: Path) -> None:
    from railgang.daemon.core.cycle import CycleConfig
    from railgang.daemon.service.runner import cycle_config

    assert CycleConfig().leaf_wait_s == 0  # off in the core: simulated schedules stay pinned
    default = cycle_config(load_settings(write(tmp_path, "")))
    assert (default.leaf_wait_s, default.leaf_holds) == (120.0, 2)  # on in the daemon
    path = write(tmp_path, "[daemon]\nleaf_wait_s = 30\nleaf_holds = 0\n")
    tuned = cycle_config(load_settings(path))
    assert (tuned.leaf_wait_s, tuned.leaf_holds) == (30.0, 0)


def test_daemon_whole_domain_eviction_and_defrag_reach_the_core(tmp_path: Path) -> None:
    from railgang.daemon.service.runner import cycle_config

    default = cycle_config(load_settings(write(tmp_path, "")))
    assert (default.whole_domain_evict, default.defrag.enabled) == (False, False)
    on = cycle_config(load_settings(write(tmp_path, "[daemon]\nwhole_domain_evict = true\ndefrag = true\n")))
    assert (on.whole_domain_evict, on.defrag.enabled) == (True, True)
    assert default.budget.churn_cap == 0.05
    assert cycle_config(load_settings(write(tmp_path, "[daemon]\npreempt_churn_cap = 0.5\n"))).budget.churn_cap == 0.5
    assert default.budget.churn_burst_gpus == 0 and not default.backfill_held_leaf
    assert cycle_config(load_settings(write(tmp_path, "[daemon]\nbackfill_held_leaf = true\n"))).backfill_held_leaf
    assert cycle_config(load_settings(write(tmp_path, "[daemon]\nchurn_burst_gpus = 64\n"))).budget.churn_burst_gpus == 64


@pytest.mark.parametrize("value", ["-1", "nan", '"a leaf"', "1.5", "1e12"], ids=["negative", "nan", "garbage", "fraction", "huge"])
def test_churn_burst_gpus_refuses_what_is_not_a_gpu_count(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, f"[daemon]\nchurn_burst_gpus = {value}\n"))
    assert "churn_burst_gpus" in str(err.value) and "\n" not in str(err.value)


# -- issue 18 row 10: the database password is a secret too ------------------------------------

PG_URL = "postgresql+psycopg://railgang:pg-s3cret-pw@db.example:5432/railgang"


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_config_show_masks_the_database_password(tmp_path: Path, as_json: bool) -> None:
    path = write(tmp_path, f'[db]\nurl = "{PG_URL}?sslmode=require&password=q-s3cret"\n')
    res = CliRunner().invoke(app, ["--config", str(path), "config", "show",
                                   *(["--json"] if as_json else [])])
    assert res.exit_code == 0, res.output
    assert "s3cret" not in res.output
    assert "postgresql+psycopg://railgang:***@db.example:5432/railgang" in res.output


@pytest.mark.parametrize(("url", "shown"), [
    (PG_URL, "postgresql+psycopg://railgang:***@db.example:5432/railgang"),
    ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("postgresql://h/db?user=u&password=pw", "postgresql://h/db?user=u&password=***"),
    ("sqlite:////var/lib/railgang/railgang.sqlite", "sqlite:////var/lib/railgang/railgang.sqlite"),
], ids=["authority", "at-in-password", "no-password", "query", "sqlite"])
def test_mask_url(url: str, shown: str) -> None:
    from railgang.daemon.config import mask_url

    assert mask_url(url) == shown


def test_unparsable_db_url_hides_the_password() -> None:
    from railgang.db.session import make_engine
    from railgang.errors import DatabaseError

    with pytest.raises(DatabaseError) as err:
        make_engine("postgresql+psycopg://u:pg-s3cret-pw@h:notaport/db")
    assert "s3cret" not in str(err.value) and "u:***@h:notaport" in str(err.value)


# -- issue 18 row 14: every float setting is finite and in range --------------------------------


def _float_keys() -> list[str]:
    from railgang.daemon.config import _floats

    return sorted(key for key, _ in _floats(load_settings().model_dump()))


def _nested(key: str, value: float) -> dict[str, object]:
    data: dict[str, object] = {}
    node = data
    *groups, last = key.split(".")
    for group in groups:
        node = node.setdefault(group, {})  # type: ignore[assignment]
    node[last] = value
    return data


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e300, -1.0],
                         ids=["inf", "-inf", "nan", "1e300", "negative"])
@pytest.mark.parametrize("key", _float_keys())
def test_every_float_setting_is_finite_and_in_range(key: str, value: float) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(**_nested(key, value))
    message = str(err.value)
    assert key.rsplit(".", 1)[-1] in message and "\n" not in message, message


@pytest.mark.parametrize("text", ["inf", "nan", "1e300", "-5", "0", "1e-9", "0.09", "86401"])
def test_cycle_interval_from_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  text: str) -> None:
    path = write(tmp_path, f"[daemon]\ncycle_interval_s = {text}\n")
    with pytest.raises(ConfigError, match=r"daemon\.cycle_interval_s"):
        load_settings(path)
    monkeypatch.setenv("RAILGANG_DAEMON__CYCLE_INTERVAL_S", text)
    with pytest.raises(ConfigError, match=r"daemon\.cycle_interval_s"):
        load_settings()
