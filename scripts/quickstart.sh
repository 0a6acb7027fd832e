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
for _ in $(seq 50); do
  state=$(squeue -h -j "$job" -o %T 2>/dev/null || true)
  [ -z "$state" ] && break
  sleep 0.2
done
sacct -j "$job" -X -o JobID,Account,State,NodeList%12,AllocTRES%50
echo "-- job output (one line per node):"
sort "$out"
echo
echo "railgang is installed. Try: export SLURM_CONF=$conf; sinfo; $rg --help"
echo "Stop the cluster with: $rg devcluster down"
