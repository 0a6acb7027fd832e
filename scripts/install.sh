#!/usr/bin/env bash
# Install what railgang needs on Debian 12, idempotently: Slurm 22.05 + munge + MariaDB (for the
# local test cluster), PostgreSQL (for database tests), gcc (SPANK plugin), and a Python venv in
# .venv with railgang and its dev tools. Safe to run again; it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins lua5.1 libslurm-dev
              slurmdbd slurm-wlm-mysql-plugin mariadb-server postgresql gcc
              docker-compose shellcheck systemd  # these three: tests/deploy (no engine needed)
              prometheus  # promtool: tests/deploy checks and unit-tests the alert rules (not started)
              chromium  # headless, for the report's browser test (tests/daemon/report)
              python3-torch)  # CPU PyTorch for /usr/bin/python3: tests/e2e/test_torch_elastic_e2e.py

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  for try in 1 2 3; do  # mirrors hiccup; a second try usually goes through
    apt-get update -qq && break
    echo "apt-get update failed (try $try); retrying" >&2; sleep 5
  done
  # keep Debian from starting the packaged services: railgang runs its own, on its own ports
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  for try in 1 2 3; do
    apt-get install -y -qq "${missing[@]}" >/dev/null && break
    [ "$try" = 3 ] && { echo "apt-get install ${missing[*]} failed" >&2; exit 1; }
    echo "apt-get install failed (try $try); retrying" >&2; sleep 5
  done
  if [ "$created_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi

PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "railgang needs Python >= 3.11 ($PY is $("$PY" --version))" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.railgang-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/pip install -q -e '.[dev]'
  touch "$stamp"
fi
echo "railgang installed: $(.venv/bin/railgang --version)"

# Slurm 24.11 / 26.05 in a container (tests/slurm_versions, markers slurm2411 / slurm2605): only
# when asked for, as CI asks for slurm/postgres. A Docker engine (Debian's docker.io, started here
# with host networking only if none runs) and the images railgang/slurm:trixie / :sid
# (scripts/slurm_image.sh, 3-4 min each, once). The compose stack (marker compose,
# tests/deploy/test_compose_stack.py) needs the same engine and Compose v2 (scripts/compose_v2.sh,
# from Debian trixie's docker-compose package); its test builds its images itself.
require=",${RAILGANG_TEST_REQUIRE:-},"
if [[ "$require" == *",slurm2411,"* || "$require" == *",slurm2605,"* || "$require" == *",compose,"* ]]; then
  for p in docker.io debootstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || { apt-get install -y -qq "$p" >/dev/null || { echo "apt-get install $p failed" >&2; exit 1; }; }
  done
  if ! docker info >/dev/null 2>&1; then
    mkdir -p /var/tmp/railgang-image
    echo "starting dockerd (--iptables=false --bridge=none; pid in /var/tmp/railgang-image/dockerd.pid)"
    nohup dockerd --iptables=false --bridge=none >/var/tmp/railgang-image/dockerd.log 2>&1 &
    echo $! >/var/tmp/railgang-image/dockerd.pid
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || { echo "dockerd did not start: /var/tmp/railgang-image/dockerd.log" >&2; exit 1; }
  fi
  if [[ "$require" == *",slurm2411,"* ]]; then bash scripts/slurm_image.sh trixie; fi
  if [[ "$require" == *",slurm2605,"* ]]; then bash scripts/slurm_image.sh sid; fi
  if [[ "$require" == *",compose,"* ]]; then echo "compose v2: $(bash scripts/compose_v2.sh)"; fi
fi
