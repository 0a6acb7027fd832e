"""What the daemon's own forecast fit costs and finds (issue 19 item 2, ``forecast = "fit"``).

    .venv/bin/python -m benchmarks.serving.serving_autofit [FILE] [--days 7,10] [--holdout-days 3]

One ``fit_demand`` per deployment of the demand file (default benchmarks/serving_two_weeks.csv)
with the history up to each of ``--days``: wall and CPU seconds, the quantile buffer, and the
day-ahead error on the held-back days. Prints Markdown rows for BENCHMARKS.md with the load
average.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.common import REPO as ROOT
from railgang.daemon.serving.autofit import fit_demand
from railgang.daemon.serving.forecast import ForecastConfig
from railgang.daemon.serving.model import read_demand


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", nargs="?", type=Path, default=ROOT / "benchmarks/serving_two_weeks.csv")
    ap.add_argument("--days", default="7,10")
    ap.add_argument("--holdout-days", type=int, default=3)
    ap.add_argument("--sample-s", type=float, default=900.0)
    args = ap.parse_args()
    demand = read_demand(args.file)
    tp = {d.name: d.tp for d in demand.deployments}
    config = ForecastConfig(step_s=args.sample_s, holdout_days=args.holdout_days)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| deployment | history up to | wall s | CPU s | buffer (0.99 quantile, replicas) | "
          "held-back MAE | inside the 95 % interval |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in sorted(demand.demand):
        for day in (int(d) for d in args.days.split(",")):
            wall, cpu = time.perf_counter(), time.process_time()
            fitted = fit_demand(demand.demand[name], day * 86400.0, config, 86400.0)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            bt = fitted.backtest
            err = f"{bt.mae:.2f} | {bt.coverage:.1%}" if bt is not None else "- | -"
            print(f"| {name} (TP {tp[name]}) | day {day} | {wall:.1f} | {cpu:.1f} | "
                  f"{fitted.buffer:.2f} | {err} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
