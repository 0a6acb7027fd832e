"""A seeded synthetic trace with Philly-like sizes and durations at a chosen offered load.

    .venv/bin/python -m benchmarks.sim.synthetic_trace --jobs 100000 --out /tmp/syn100k.csv \
        [--gpus 1024] [--load 0.8] [--seed 0]

Writes the generic CSV trace format (``daemon/sim/traces/csv_trace.py``:
``job_id,submit_time,gpus,duration_s,account``) that ``railgang sim --trace FILE.csv`` reads.

The distribution is fitted from the Philly-derived trace (all 15 VCs of
``/work/shared/traces/philly-gavel``, 15,264 jobs, as ``read_philly`` returns them) and embedded
below, so the generator needs no data file:

- **size**: the empirical GPU-count histogram (``PHILLY_SIZES``, counts per size);
- **duration**: log-normal per size, with the mean and standard deviation of ``ln(duration_s)``
  measured for that size (``PHILLY_LOG_DURATION``; sizes seen fewer than 30 times use the
  nearest well-sampled size's fit), clipped to the trace's own range [3 s, 11.34 M s];
- **account**: the trace's 15 VCs with their job counts as weights;
- **arrivals**: a Poisson process whose rate gives the offered load exactly: the generator draws
  all sizes and durations first, then sets the mean inter-arrival gap so that
  sum(gpus x duration) / (gpus_total x span) == load.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# GPUs requested -> jobs in the merged Philly-derived trace (read_philly, 15,264 jobs)
PHILLY_SIZES: dict[int, int] = {1: 10480, 2: 463, 4: 2044, 7: 2, 8: 1916, 12: 6, 16: 255, 20: 1,
                                24: 5, 32: 91, 64: 1}
# GPUs -> (mean, std) of ln(duration_s) over that size's jobs (sizes with >= 30 jobs)
PHILLY_LOG_DURATION: dict[int, tuple[float, float]] = {
    1: (9.231, 2.336), 2: (10.447, 2.164), 4: (9.442, 2.216), 8: (8.634, 2.422),
    16: (7.732, 2.172), 32: (6.455, 1.862)}
PHILLY_VCS: dict[str, int] = {
    "11cb48": 2000, "6214e9": 2000, "6c71a0": 2000, "b436b2": 2000, "ee9e8c": 2000,
    "0e4a51": 1181, "103959": 986, "7f04ca": 972, "ed69ec": 951, "e13805": 607, "2869ce": 533,
    "51b7ef": 18, "23dbec": 9, "925e2b": 4, "795a4c": 3}
MIN_DURATION_S, MAX_DURATION_S = 3.0, 11_337_573.0  # the trace's shortest and longest job


@dataclass(frozen=True)
class SynJob:
    job_id: str
    submit_time: float
    gpus: int
    duration_s: float
    account: str


def _fit_for(gpus: int) -> tuple[float, float]:
    """The log-duration fit of the nearest well-sampled size (ties go to the smaller size)."""
    best = min(PHILLY_LOG_DURATION, key=lambda g: (abs(math.log2(g) - math.log2(gpus)), g))
    return PHILLY_LOG_DURATION[best]


class _Weighted:
    """Draw keys with probability proportional to their weights (cumulative table + bisect)."""

    def __init__(self, weights: dict[int, int] | dict[str, int]) -> None:
        self.keys = list(weights)
        self.cum = list(itertools.accumulate(weights.values()))

    def draw(self, rng: random.Random) -> object:
        return self.keys[bisect.bisect_right(self.cum, rng.random() * self.cum[-1])]


# Shapes besides Philly's (issue 24: "any 100,000-job trace at <= 85 % offered load"): sizes and
# one log-normal fit of ln(duration_s) shared by every size (duration independent of size), and
# whether arrivals follow a day (rate x (1 + 0.6 sin(2 pi t / 1 day)): a queue builds each day)
SHAPES: dict[str, tuple[dict[int, int], tuple[float, float] | None, bool]] = {
    "philly": (PHILLY_SIZES, None, False),  # Philly's sizes, per-size durations, Poisson
    "gangs": ({1: 40, 2: 10, 4: 10, 8: 15, 16: 12, 32: 8, 64: 5}, (8.5, 1.8), False),  # many
    # 16-64-GPU gangs, durations independent of size (issue 24's second shape)
    "small": ({1: 70, 2: 15, 4: 15}, (7.0, 1.5), False),  # a flood of short 1-4-GPU jobs
    "diurnal": (PHILLY_SIZES, None, True),  # Philly's jobs, arrivals swinging +-60 % over a day
}


def generate(n: int, *, gpus_total: int = 1024, load: float = 0.8, seed: int = 0,
             max_gpus: int | None = None, shape: str = "philly") -> list[SynJob]:
    """``n`` jobs at ``load`` offered load on ``gpus_total`` GPUs (sizes above ``max_gpus``,
    default ``gpus_total``, are drawn again so every job fits the cluster), of one of
    ``SHAPES`` (``philly``: the fitted trace, the same jobs as before shapes existed)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r} (one of {', '.join(SHAPES)})")
    size_weights, fit, daily = SHAPES[shape]
    if n < 1 or gpus_total < 1 or not 0 < load <= 10:
        raise ValueError("need n >= 1, gpus_total >= 1 and 0 < load <= 10")
    cap = max_gpus or gpus_total
    if cap < 1:
        raise ValueError("max_gpus must be >= 1")
    rng = random.Random(seed)
    sizes, vcs = _Weighted(size_weights), _Weighted(PHILLY_VCS)
    drawn: list[tuple[int, float, str]] = []
    for _ in range(n):
        g = int(sizes.draw(rng))  # type: ignore[call-overload]
        while g > cap:
            g = int(sizes.draw(rng))  # type: ignore[call-overload]
        mu, sigma = fit or _fit_for(g)
        d = min(max(rng.lognormvariate(mu, sigma), MIN_DURATION_S), MAX_DURATION_S)
        drawn.append((g, round(d, 1), str(vcs.draw(rng))))
    work = sum(g * d for g, d, _ in drawn)
    gap = work / (load * gpus_total) / n  # mean inter-arrival gap for the wanted load
    t, out = 0.0, []
    for i, (g, d, vc) in enumerate(drawn):
        out.append(SynJob(f"syn{i:07d}", round(t, 1), g, d, vc))
        step = rng.expovariate(1.0 / gap)
        t += step / (1.0 + 0.6 * math.sin(2.0 * math.pi * t / 86400.0)) if daily else step
    return out


def offered_load(jobs: list[SynJob], gpus_total: int) -> float:
    """sum(gpus x duration) / (gpus_total x arrival span)."""
    span = jobs[-1].submit_time - jobs[0].submit_time
    return sum(j.gpus * j.duration_s for j in jobs) / (gpus_total * span) if span > 0 else math.inf


def csv_lines(jobs: list[SynJob]) -> Iterator[str]:
    yield "job_id,submit_time,gpus,duration_s,account\n"
    for j in jobs:
        yield f"{j.job_id},{j.submit_time:.1f},{j.gpus},{j.duration_s:.1f},{j.account}\n"


def write_csv(jobs: list[SynJob], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        f.writelines(csv_lines(jobs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="philly")
    args = ap.parse_args(argv)
    try:
        jobs = generate(args.jobs, gpus_total=args.gpus, load=args.load, seed=args.seed,
                        shape=args.shape)
    except ValueError as exc:
        print(f"synthetic_trace: {exc}", file=sys.stderr)
        return 1
    write_csv(jobs, args.out)
    print(f"{len(jobs):,} jobs over {jobs[-1].submit_time / 3600:.1f} h, offered load "
          f"{offered_load(jobs, args.gpus):.2f} on {args.gpus} GPUs -> {args.out}", file=sys.stderr)
    return 0


__all__ = ["PHILLY_SIZES", "SHAPES", "SynJob", "csv_lines", "generate", "offered_load", "write_csv"]

if __name__ == "__main__":
    raise SystemExit(main())
