"""``config show`` hides every secret of the database URL and of any other URL it prints (issue 38
row 8; docs/security.md, "Configuration"): libpq's ``sslpassword``, a ``password``-like query
parameter under any spelling, the authority's password, and ``SecretStr`` values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.db.urls import mask_url

PG = "postgresql+psycopg://railgang:pg-s3cret-pw@db.example:5432/railgang"


@pytest.mark.parametrize(("url", "shown"), [
    (f"{PG}?sslmode=verify-full&sslpassword=k-s3cret",
     "postgresql+psycopg://railgang:***@db.example:5432/railgang?sslmode=verify-full&sslpassword=***"),
    ("postgresql://h/db?user=u&PASSWORD=s3cret&x=1", "postgresql://h/db?user=u&PASSWORD=***&x=1"),
    ("postgresql://h/db?passwd=s3cret", "postgresql://h/db?passwd=***"),
    ("postgresql://h/db?sslkey=/etc/k.pem&access_token=s3cret",
     "postgresql://h/db?sslkey=/etc/k.pem&access_token=***"),
    ("postgresql://h/db?client_secret=s3cret#frag", "postgresql://h/db?client_secret=***#frag"),
    ("postgresql://h/db?sslmode=require", "postgresql://h/db?sslmode=require"),
])
def test_every_password_parameter_is_masked(url: str, shown: str) -> None:
    assert mask_url(url) == shown


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_config_show_prints_no_secret_of_any_url(tmp_path: Path, as_json: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "railgang.toml"
    path.write_text(f'[db]\nurl = "{PG}?sslpassword=k-s3cret"\n'
                    '[daemon.links]\nexporter_url = "https://scrape:x-s3cret@{host}:9100/metrics"\n'
                    '[api]\nsecret_key = "api-s3cret-0123456789abcdef0123456789"\n')
    res = CliRunner().invoke(app, ["--config", str(path), "config", "show",
                                   *(["--json"] if as_json else [])])
    assert res.exit_code == 0, res.output
    assert "s3cret" not in res.output, res.output
    assert "sslpassword=***" in res.output and "https://scrape:***@{host}:9100" in res.output
    if as_json:
        assert json.loads(res.output)["api"]["secret_key"] == "**********"
