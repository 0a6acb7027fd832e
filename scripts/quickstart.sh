#!/usr/bin/env bash
# One command for a newcomer (as root, Debian 12): install railgang, create the embedded SQLite
# database, bring up a real 16-node × 8-GPU Slurm 22.05 cluster on this machine, and show it
# working: a 4-node GPU gang submitted held, placed on one leaf switch, released, accounted.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
rg=.venv/bin/railgang
export RAILGANG_HOME=${RAILGANG_HOME:-/var/lib/railgang}

echo "== database (SQLite at $RAILGANG_HOME/railgang.sqlite)"
$rg db upgrade

echo "== local Slurm cluster"
$rg devcluster up
$rg devcluster status || true
conf=$($rg devcluster status --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["slurm_conf"])')
export SLURM_CONF=$conf

echo "== a 4-node × 8-GPU gang: submitted held, pinned to one leaf, released"
out="$RAILGANG_HOME/quickstart-gang.out"
job=$(sbatch --parsable --account=team-a -N4 --gres=gpu:8 --hold --output="$out" \
  --rg-parallel=tp8,dp4 --wrap='srun bash -c "echo \$(hostname) GPUs \$CUDA_VISIBLE_DEVICES"')
scontrol show job "$job" | grep -E 'JobState|AdminComment'
scontrol update jobid="$job" ReqNodeList='n[05-08]'
scontrol release "$job"
for _ in $(seq 100); do  # until accounting has the finished job
  state=$(sacct -n -X -j "$job" -o State 2>/dev/null | tr -d ' ' || true)
  [ "$state" = COMPLETED ] && break
  sleep 0.2
done
sacct -j "$job" -X -o JobID,Account,State,NNodes,AllocTRES%50
echo "-- job output (one line per node):"
sort "$out"
echo
echo "== where railgang would put a 32-GPU tp8/pp2/dp2 gang on this cluster's fabric (30 % busy)"
$rg place --topology "$(dirname "$conf")/topology.conf" --occupancy 0.3 --seed 1 \
  --gpus 32 --tp 8 --pp 2 --dp 2 | head -6

trace=${RAILGANG_PHILLY_DIR:-../shared/traces/philly-gavel}
if [ -d "$trace" ]; then
  echo "== the decision core on the first 2,000 jobs of the Philly-derived trace (512 simulated GPUs)"
  $rg sim --trace "$trace" --limit 2000 --compare fifo,default
else
  echo "(no Philly-derived trace at $trace: skipping the simulator demo; set RAILGANG_PHILLY_DIR)"
fi
echo
echo "railgang is installed. Try: export SLURM_CONF=$conf; sinfo; $rg --help"
echo "Stop the cluster with: $rg devcluster down"
