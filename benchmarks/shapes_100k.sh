#!/usr/bin/env bash
# Issue 24's scale goal: 100,000-job synthetic traces of several shapes at <= 85 % offered load
# on 1,024 GPUs, each policy's replay in <= 60 CPU s "whatever its queue does". One replay at a
# time (CPU seconds on a shared machine inflate with its load: run it alone), each stopped after
# CPU_LIMIT CPU s (then it says how many jobs finished and how far it simulated); one JSON line
# per replay from benchmarks/sim/cycle_cost.py, with the queue's length per cycle.
#
#   bash benchmarks/shapes_100k.sh [OUT.jsonl]
#   SHAPES="synthetic small diurnal gangs" POLICIES="fifo default" CPU_LIMIT=120 LOAD=0.8 \
#       TREE=/path/to/checkout bash benchmarks/shapes_100k.sh out.jsonl
#
# Shapes (benchmarks/sim/synthetic_trace.py): synthetic = Philly's sizes and per-size durations,
# small = a flood of 1-4-GPU jobs, diurnal = Philly's jobs arriving +-60 % over a day, gangs =
# many 16-64-GPU gangs with durations independent of size.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-/dev/stdout}
py=${PYTHON:-$here/../.venv/bin/python}
for shape in ${SHAPES:-synthetic small diurnal gangs}; do
  for policy in ${POLICIES:-fifo fifo-greedy slurm default tiresias themis pollux}; do
    (cd "$here/.." && "$py" -m benchmarks.sim.cycle_cost --policy "$policy" --trace "$shape" \
      --jobs "${JOBS:-100000}" --load "${LOAD:-0.8}" --seed "${SEED:-0}" \
      --cpu-limit "${CPU_LIMIT:-120}" --tree "${TREE:-$here/..}") >>"$out"
  done
done
