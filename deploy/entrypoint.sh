#!/usr/bin/env bash
# Entry point of the railgang image: one role per docker-compose service.
#   config     render the Slurm configs (railgang devcluster render --containers) into the shared
#              slurm-etc volume and create the munge key there on first start (one-shot)
#   slurmdbd   accounting daemon (MariaDB is its own service)
#   slurmctld  register the test accounts in slurmdbd, then the controller
#   slurmd     one emulated GPU node, named after the container's host name
#   migrate    railgang db upgrade (one-shot, before daemon and api)
#   daemon     railgang daemon run --log-format json, as the non-root user railgang (a Slurm
#              Administrator: `devcluster accounts` registers it, as the systemd unit expects)
#   api        railgang api --log-format json
# RAILGANG_NETWORK=host (deploy/docker-compose.host.yml): every container on the host's network,
# so the configs name loopback ports, not one host per service, and a node's name comes from
# RAILGANG_NODE (a host-network container has the host's name).
# Paths below are those of [devcluster] dir in deploy/railgang.toml (tests/deploy checks that
# they agree with ClusterSpec); every config file itself comes from the same rendering as
# `railgang devcluster up`.
set -euo pipefail

SLURM_DIR=/var/lib/railgang/slurm
ETC=$SLURM_DIR/etc
RUN=$SLURM_DIR/run
LOG=$SLURM_DIR/log
DEV=$SLURM_DIR/dev
MUNGE_DIR=$RUN/munge
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
MUNGE_KEY=$ETC/munge.key
SLURM_BIN=/opt/railgang-slurm/bin
SPANK_SO=/opt/railgang/lib/railgang_spank.so
GPU_DEVICE_MAJOR=195  # NVIDIA's character-device major; gres/gpu rejects plain files
DAEMON_USER=railgang  # created in deploy/Dockerfile
SHARED=/var/lib/railgang/shared  # the railgang-shared volume: heartbeat and class grants
REPORTS=/var/lib/railgang/reports  # the railgang-reports volume: report.dir (deploy/railgang.toml)

die() { echo "railgang-entrypoint: $*" >&2; exit 1; }

# Slurm writes to its LogFile; pointing that file at PID 1's stderr puts it in `docker compose logs`
log_to_stderr() {
  mkdir -p "$LOG"
  ln -sf /proc/1/fd/2 "$LOG/$1"
}

wait_for_config() {
  local i
  for i in $(seq 1 60); do
    [ -s "$ETC/slurm.conf" ] && [ -s "$MUNGE_KEY" ] && return 0
    sleep 1
  done
  die "no $ETC/slurm.conf or munge key after 60 s: is the slurm-config service done? (docker compose logs slurm-config)"
}

start_munge() {
  wait_for_config
  mkdir -p "$MUNGE_DIR" "$LOG"
  chmod 0755 "$MUNGE_DIR"
  # --force: munged refuses a root-owned key by default; it is this container's only user of it
  /usr/sbin/munged --force --socket="$MUNGE_SOCKET" --key-file="$MUNGE_KEY" \
    --pid-file="$MUNGE_DIR/munged.pid" --log-file="$LOG/munged.log" --seed-file="$MUNGE_DIR/munged.seed"
  local i
  for i in $(seq 1 50); do
    [ -S "$MUNGE_SOCKET" ] && return 0
    sleep 0.1
  done
  die "munged did not create $MUNGE_SOCKET; see $LOG/munged.log"
}

make_gpu_devices() {
  # as many devices as the rendered gres.conf names (File=.../nvidia[0-N] or .../nvidia0)
  local last
  last=$(sed -n 's/.*nvidia\[0-\([0-9]*\)\].*/\1/p' "$ETC/gres.conf")
  [ -n "$last" ] || last=0
  mkdir -p "$DEV"
  local i
  for i in $(seq 0 "$last"); do
    [ -c "$DEV/nvidia$i" ] || { rm -f "$DEV/nvidia$i"; mknod -m 666 "$DEV/nvidia$i" c "$GPU_DEVICE_MAJOR" "$i"; }
  done
}

role=${1:-}
[ $# -gt 0 ] && shift
mkdir -p "$RUN" "$LOG" "$SLURM_DIR/spool" "$SLURM_DIR/state"

case "$role" in
  config)
    mkdir -p "$ETC"
    if [ ! -s "$MUNGE_KEY" ]; then
      # generated once into the volume, never part of the image or the repository
      dd if=/dev/urandom of="$MUNGE_KEY" bs=1024 count=1 status=none
      echo "created a new munge key in $MUNGE_KEY"
    fi
    chmod 0400 "$MUNGE_KEY"
    if [ "${RAILGANG_NETWORK:-}" = host ]; then render=--host-network; else render=--containers; fi
    railgang devcluster render --dir "$SLURM_DIR" "$render" --spank "$SPANK_SO"
    ;;
  slurmdbd)
    start_munge
    log_to_stderr slurmdbd.log
    exec /usr/sbin/slurmdbd -D "$@"
    ;;
  slurmctld)
    start_munge
    railgang devcluster accounts --dir "$SLURM_DIR"
    log_to_stderr slurmctld.log
    exec "$SLURM_BIN/slurmctld" -D -f "$ETC/slurm.conf" "$@"
    ;;
  slurmd)
    start_munge
    make_gpu_devices
    node=${RAILGANG_NODE:-$(hostname)}
    mkdir -p "$SLURM_DIR/spool/$node"  # SlurmdSpoolDir=.../spool/%n: slurmstepd's sockets
    log_to_stderr "slurmd-$node.log"
    exec "$SLURM_BIN/slurmd" -D -N "$node" -d "$SLURM_BIN/slurmstepd" -f "$ETC/slurm.conf" "$@"
    ;;
  migrate)
    exec railgang db upgrade "$@"
    ;;
  daemon)
    start_munge
    # root only for munged and this chown (a fresh volume is root's); the daemon itself is the
    # unprivileged Slurm Administrator, never root (docs/deploy.md)
    mkdir -p "$SHARED" "$REPORTS"
    chown "$DAEMON_USER:" "$SHARED" "$REPORTS"
    exec setpriv --reuid="$DAEMON_USER" --regid="$DAEMON_USER" --init-groups --no-new-privs -- \
      railgang daemon run --log-format json "$@"
    ;;
  api)
    exec railgang api --log-format json "$@"
    ;;
  *)
    die "unknown role '${role}'; one of: config slurmdbd slurmctld slurmd migrate daemon api"
    ;;
esac
