#!/usr/bin/env bash
# Build the image of a newer Debian's Slurm for the containerised test clusters:
#   bash scripts/slurm_image.sh trixie     # Slurm 24.11 -> image railgang/slurm:trixie
#   bash scripts/slurm_image.sh sid        # Slurm 26.05 -> image railgang/slurm:sid
# No registry is reachable, so the base image comes from debootstrap + `docker import`
# (railgang/debian:SUITE); `docker build --network host` installs Debian's Slurm, munge, MariaDB,
# gcc and Python, and railgang's dependencies from wheels downloaded here on the host for the
# image's Python (pip inside a container would fail TLS). railgang itself is not in the image: a
# test installs the wheel of the tree it tests (`pip install --no-deps`, a second).
# Idempotent: an image that exists is kept (RAILGANG_IMAGE_REBUILD=1 rebuilds). Needs root, a
# running dockerd (started with --iptables=false --bridge=none; docs/devcluster.md) and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:?usage: slurm_image.sh trixie|sid|forky}
mirror=${RAILGANG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=${RAILGANG_IMAGE_WORK:-/var/tmp/railgang-image}
base=railgang/debian:$suite
image=railgang/slurm:$suite
start=$(date +%s)

docker info >/dev/null 2>&1 || { echo "no Docker engine: start dockerd --iptables=false --bridge=none" >&2; exit 1; }
if [ -n "${RAILGANG_IMAGE_REBUILD:-}" ]; then docker image rm -f "$image" "$base" >/dev/null 2>&1 || true; fi
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image exists"; exit 0
fi
mkdir -p "$work"

if ! docker image inspect "$base" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  root="$work/$suite-root"
  rm -rf "$root"
  echo "debootstrap $suite (about 80 s)"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap-$suite.log" 2>&1 \
    || { tail -5 "$work/debootstrap-$suite.log" >&2; exit 1; }
  tar -C "$root" -c . | docker import - "$base" >/dev/null
  rm -rf "$root"
fi

# stage 1: Debian's packages (the same list as the native cluster, scripts/install.sh; slurmrestd
# for benchmarks/slurm/slurmrestd_reads.py, which compares its read with the CLI's)
ctx="$work/ctx-$suite"
rm -rf "$ctx" && mkdir -p "$ctx/wheels"
cat >"$ctx/Dockerfile.apt" <<EOF
FROM $base
ENV DEBIAN_FRONTEND=noninteractive
RUN printf 'deb $mirror $suite main\n' > /etc/apt/sources.list \\
 && rm -f /etc/apt/sources.list.d/* \\
 && printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \\
 && apt-get -o Acquire::Check-Valid-Until=false update -qq \\
 && apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge \\
      slurm-wlm-basic-plugins lua5.1 libslurm-dev slurmdbd slurm-wlm-mysql-plugin mariadb-server slurmrestd \\
      gcc libc6-dev python3 python3-venv procps util-linux passwd \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
# Debian's CPU PyTorch (with a torchrun that works on trixie's Python) for the PyTorch job's e2e
# test, in a layer of its own; no recommends: torch needs none of them (docs/devcluster.md has
# what it costs the build)
RUN apt-get -o Acquire::Check-Valid-Until=false update -qq \\
 && apt-get install -y -qq --no-install-recommends python3-torch \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
EOF
echo "docker build $image-apt (apt-get in the container)"
docker build -q --force-rm --network host -t "$image-apt" -f "$ctx/Dockerfile.apt" "$ctx" >/dev/null

# stage 2: railgang's dependencies for the image's Python, as wheels fetched on the host
pyver=$(docker run --rm --network host "$image-apt" python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
deps=$(python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))')
printf '%s\n' "$deps" >"$ctx/requirements.txt"
echo "wheels for Python $pyver"
pip_host=${PIP:-.venv/bin/pip}
# python-hostlist is published as source only: build its (pure Python) wheel here first
"$pip_host" wheel -q --no-deps -w "$ctx/wheels" "$(grep '^python-hostlist' "$ctx/requirements.txt")"
"$pip_host" download -q -d "$ctx/wheels" --find-links "$ctx/wheels" --only-binary=:all: --python-version "$pyver" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform linux_x86_64 --platform any -r "$ctx/requirements.txt"
cat >"$ctx/Dockerfile" <<EOF
FROM $image-apt
COPY wheels /tmp/wheels
COPY requirements.txt /tmp/requirements.txt
RUN python3 -m venv /opt/railgang \\
 && /opt/railgang/bin/pip install -q --no-index --find-links /tmp/wheels -r /tmp/requirements.txt \\
 && rm -rf /tmp/wheels
ENV PATH=/opt/railgang/bin:\$PATH
EOF
docker build -q --force-rm --network host -t "$image" "$ctx" >/dev/null
docker image rm "$image-apt" >/dev/null 2>&1 || true
rm -rf "$ctx"
echo "$image built in $(( $(date +%s) - start )) s: $(docker run --rm --network host "$image" dpkg-query -W -f 'slurm ${Version}' slurmctld)"
