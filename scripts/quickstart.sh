#!/usr/bin/env bash
# The main job, on the embedded defaults (as root, Debian 12): install railgang, create its SQLite
# database, bring up a real 16-node x 8-GPU Slurm 22.05 cluster on this machine, start the railgang
# daemon and the admin API (loopback) on it, grant the demo teams their priority classes, submit
# the demo workload (about 30 hinted training jobs: a batch wave, then guaranteed work that must
# shrink or preempt it), show placements live until the queue drains, ingest the usage ledger and
# read chargeback by team from the API, then stop the API, the daemon and the cluster.
# KEEP_CLUSTER=1 leaves the cluster (and nothing else) up.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
rg=$PWD/.venv/bin/railgang
export RAILGANG_HOME=${RAILGANG_HOME:-/var/lib/railgang}

# The daemon, the API and the admin commands run as the deployment runs them (docs/deploy.md):
# as the system user `railgang`, a Slurm administrator (devcluster up registers it), not root. It
# must reach this checkout and the Python behind .venv: directories above them that others
# cannot search get o+x (search only, never read), e.g. /root when Python is under /root/.pyenv.
id railgang >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
  --shell /usr/sbin/nologin railgang
for target in "$PWD/.venv/bin" "$(readlink -f .venv/bin/python)" "$RAILGANG_HOME"; do
  d=$(dirname "$target")
  while [ "$d" != / ]; do
    [ -d "$d" ] && [ "$(( 0$(stat -c %a "$d") & 1 ))" -eq 0 ] && chmod o+x "$d"
    d=$(dirname "$d")
  done
done
mkdir -p "$RAILGANG_HOME"
# the daemon's own files (database, lock, grants, logs of an earlier run); not devcluster/, whose
# MariaDB data belongs to mysql
chown railgang: "$RAILGANG_HOME"
find "$RAILGANG_HOME" -maxdepth 1 -type f -exec chown railgang: {} +
# an array, not a function: a background function is a subshell, and its PID would not be the
# daemon's (setpriv and env exec, so "${as_railgang[@]}" ... & leaves $! the process itself)
as_railgang=(setpriv --reuid=railgang --regid=railgang --clear-groups env HOME="$RAILGANG_HOME")
rg_admin() { "${as_railgang[@]}" "$rg" "$@"; }

echo "== database (SQLite at $RAILGANG_HOME/railgang.sqlite)"
rg_admin db upgrade

# a step that is already done (a second run on the same database) is fine; any other error stops
once() { local out; out=$("$@" 2>&1) && { echo "$out"; return; }
         case $out in *exists*|*already*) echo "  (kept: $out)";; *) echo "$out" >&2; return 1;; esac; }
echo "== organisation and class grants: classes 0-2 are granted by an admin, not claimed"
once rg_admin quota add ml-org --level org
once rg_admin quota add research --level dept --parent ml-org
for team in team-a team-b; do once rg_admin quota add "$team" --level team --parent research; done
once rg_admin quota grant 0 account team-b               # serving: team-b only
for team in team-a team-b; do
  once rg_admin quota grant 1 account "$team"              # production
  once rg_admin quota grant 2 account "$team"              # interactive (4 h limit)
done
once rg_admin quota rate gpu reserved 2.50               # price of a GPU-hour, for chargeback

echo "== local Slurm cluster"
$rg devcluster up
conf=$($rg devcluster status --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["slurm_conf"])')
export SLURM_CONF=$conf

daemon_pid=
api_pid=
cleanup() {
  if [ -n "$api_pid" ] && kill -0 "$api_pid" 2>/dev/null; then
    kill -TERM "$api_pid"; wait "$api_pid" || true
    echo "api stopped"
  fi
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"; wait "$daemon_pid" || true   # graceful: finishes its cycle
    echo "daemon stopped"
  fi
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    scancel --user=root 2>/dev/null || true
    $rg devcluster down
  fi
}
trap cleanup EXIT

echo "== railgang daemon as user railgang, a non-root Slurm administrator (cycle every 3 s; log in $RAILGANG_HOME/daemon.log)"
RAILGANG_DAEMON__CYCLE_INTERVAL_S=${RAILGANG_DAEMON__CYCLE_INTERVAL_S:-3} \
  "${as_railgang[@]}" "$rg" daemon run --log-format json >"$RAILGANG_HOME/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do $rg daemon status >/dev/null 2>&1 && break; sleep 0.2; done
$rg daemon status
grants=$($rg config show --json 2>/dev/null | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["ledger"]["grants_file"])' 2>/dev/null || echo "$RAILGANG_HOME/class_grants.txt")
for _ in $(seq 50); do grep -q "^0 account team-b" "$grants" 2>/dev/null && break; sleep 0.2; done
echo "-- the daemon keeps $grants current for job_submit.lua:"; grep -v '^#' "$grants"
echo "-- an ungranted class is refused at submission:"
sbatch --account=team-a --rg-class=0 --gres=gpu:1 --wrap=true 2>&1 | grep railgang || true

echo "== railgang api on 127.0.0.1:${RAILGANG_API__PORT:-8780} (log in $RAILGANG_HOME/api.log)"
token=$(rg_admin token create "quickstart-$(date +%s)" --role admin --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)["token"])')
"${as_railgang[@]}" "$rg" api --host 127.0.0.1 >"$RAILGANG_HOME/api.log" 2>&1 &
api_pid=$!
api=http://127.0.0.1:${RAILGANG_API__PORT:-8780}
for _ in $(seq 100); do curl -sf "$api/healthz" >/dev/null && break; sleep 0.2; done
curl -sf "$api/healthz"; echo "  (an admin token was made with \`railgang token create NAME --role admin\`)"

echo "== demo workload: a batch wave, then guaranteed work 20 s later"
out=$RAILGANG_HOME/demo
rm -rf "$out"  # this run's job outputs only: the summary below counts them
$rg demo --out "$out" --step-s "${DEMO_STEP_S:-0.5}" --wave-gap 20 &
submitter=$!
sleep 8
first_waiting=
for _ in $(seq 60); do  # at most 60 rounds
  echo; echo "-- railgang top, $(date +%T)"
  $rg top --once
  if [ -z "$first_waiting" ]; then
    first_waiting=$(squeue -h -t PENDING -o %i | head -1)
    if [ -n "$first_waiting" ]; then echo "-- railgang explain $first_waiting"; $rg explain "$first_waiting" || true; fi
  fi
  if ! kill -0 "$submitter" 2>/dev/null && [ -z "$(squeue -h -o %i)" ]; then break; fi
  sleep 10
done
wait "$submitter" || true

echo; echo "== usage ledger: railgang ledger ingest (sacct), then chargeback by team from the API"
rg_admin ledger ingest
echo "-- GET $api/v1/chargeback?group_by=team&format=csv"
curl -sf -H "Authorization: Bearer $token" "$api/v1/chargeback?group_by=team&format=csv"

echo; echo "== what happened (from the daemon's journal and Slurm)"
$rg daemon status
# a job's log holds every run (--open-mode=append): the checkpoint line, then a restart
requeued=0
for log in "$out"/*.out; do
  [ -e "$log" ] || continue
  if grep -q "(preempted)" "$log" && grep -q "(restart [1-9]" "$log"; then requeued=$((requeued + 1)); fi
done
echo "jobs that checkpointed on a preemption signal and resumed: $requeued"
.venv/bin/python - "$RAILGANG_HOME/daemon.log" <<'PY'
import collections, json, sys
actions, failed = collections.Counter(), 0
for line in open(sys.argv[1]):
    try:
        rec = json.loads(line)
    except ValueError:
        continue
    actions.update(rec.get("actions") or {})
    failed += rec.get("failed") or 0
print(f"daemon actions by kind: {dict(actions)}; refused by Slurm: {failed}")
PY
echo
echo "railgang works. Next: export SLURM_CONF=$conf; KEEP_CLUSTER=1 bash scripts/quickstart.sh; $rg --help"
