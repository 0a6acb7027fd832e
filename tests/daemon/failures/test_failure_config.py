"""[failures]: flaky-node rules, the burn-in command, hot spares into the core's CycleConfig."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from railgang.daemon.config import Settings
from railgang.daemon.core.model.spares import SpareRules
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.service.runner import cycle_config


def test_defaults_drain_after_three_kills_in_a_day_and_keep_no_spares() -> None:
    f = Settings().failures
    assert f.enabled and f.rules().count == 3 and f.rules().window_s == 86400.0
    assert cycle_config(Settings()).spares == SpareRules()  # off: the core as pinned


def test_spares_reach_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_FAILURES__SPARES_PER_LEAF", "2")
    monkeypatch.setenv("RAILGANG_FAILURES__SPARES_MIN_GANG_GPUS", "1024")
    assert cycle_config(Settings()).spares == SpareRules(per_leaf=2, min_gang_gpus=1024)


@pytest.mark.parametrize("command", ["a\nb", "x" * 5000, "nul\x00"], ids=["newline", "huge", "nul"])
def test_a_burn_in_command_is_one_sane_line(command: str) -> None:
    with pytest.raises(ValidationError, match="burn_in_command"):
        FailureSettings(burn_in_command=command)


@pytest.mark.parametrize("field", ["flaky_count", "spares_min_gang_gpus"])
def test_counts_below_one_are_refused(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        FailureSettings(**{field: 0})  # type: ignore[arg-type]
