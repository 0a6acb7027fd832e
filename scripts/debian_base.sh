#!/usr/bin/env bash
# A Debian base image without a registry: debootstrap --variant=minbase SUITE, then `docker
# import` as railgang/debian:SUITE (about 80 s; kept once made). bookworm carries Slurm 22.05,
# trixie 24.11, sid 26.05. scripts/slurm_image.sh and the compose stack
# (deploy/docker-compose.host.yml) start from these. Needs root, debootstrap and a Docker engine.
#   bash scripts/debian_base.sh bookworm
set -euo pipefail
suite=${1:?usage: debian_base.sh bookworm|trixie|sid}
mirror=${RAILGANG_DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=${RAILGANG_IMAGE_WORK:-/var/tmp/railgang-image}
base=railgang/debian:$suite

docker info >/dev/null 2>&1 || { echo "no Docker engine: start dockerd --iptables=false --bridge=none" >&2; exit 1; }
if docker image inspect "$base" >/dev/null 2>&1; then
  echo "$base exists"; exit 0
fi
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
mkdir -p "$work"
root=$(mktemp -d "$work/$suite-root.XXXXXX")  # two callers at once never share a tree
trap 'rm -rf "$root"' EXIT
start=$(date +%s)
echo "debootstrap $suite (about 80 s)"
debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 \
  || { tail -5 "$root.log" >&2; exit 1; }
tar -C "$root" -c . | docker import - "$base" >/dev/null
rm -f "$root.log"
echo "$base built in $(( $(date +%s) - start )) s"
