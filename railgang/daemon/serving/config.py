"""``[serving]``: the daemon's serving step (docs/serving.md; read by ``serving/live.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator


class ServingSettings(BaseModel):
    model_config = {"extra": "forbid"}
    enabled: bool = False
    demand_file: Path | None = None  # observed demand (demand CSV)
    forecast_file: Path | None = None  # the forecast's mean (demand CSV); None: demand_file
    # "file": the forecast is forecast_file (or demand_file); "fit": the daemon fits its own from
    # demand_file's history up to now, buffer = a quantile of its day-ahead error (autofit.py)
    forecast: Literal["file", "fit"] = "file"
    fit_sample_s: float = Field(default=900.0, ge=60, le=3600)  # file seconds per sample
    refit_s: float = Field(default=86400.0, ge=600, le=7 * 86400)  # file seconds between fits
    fit_holdout_days: int = Field(default=2, ge=1, le=14)  # days held back to measure the error
    buffer_quantile: float = Field(default=0.99, gt=0, lt=1)  # of that error, kept warm
    pools: dict[str, str] = {}  # deployment -> Slurm host list of its pool's nodes
    origin: int = Field(default=0, ge=0, le=2**40)  # epoch seconds of time_s 0 in the files
    time_scale: float = Field(default=1.0, gt=0, le=10000)  # file seconds per wall second
    buffer_replicas: float = Field(default=0.0, ge=0, le=100000)  # kept warm on top
    margin_s: float = Field(default=300.0, ge=0, le=86400)  # wall seconds before switch-in
    drain_grace_s: float = Field(default=60.0, ge=0, le=3600)
    lend_to_rigid: bool = False  # rigid batch jobs may borrow too (checkpointed at the take-back);
    # False: only when their time limit ends before it (docs/serving.md)
    step_s: float = Field(default=60.0, gt=0, le=3600)  # forecast step, wall seconds
    horizon_s: float = Field(default=86400.0, gt=0, le=14 * 86400)  # how far take-backs are seen
    # the last step's deployments (GET /v1/serving reads it); None: serving.json beside the
    # daemon's heartbeat file
    status_file: Path | None = None

    @field_validator("demand_file", "forecast_file", "status_file", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value


__all__ = ["ServingSettings"]
