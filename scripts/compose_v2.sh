#!/usr/bin/env bash
# Print the path of a Docker Compose v2 binary, fetching it once if needed. Debian 12 ships only
# Compose v1 (docker-compose 1.29, which knows neither `up --wait` nor `!reset`); Debian 13
# (trixie) packages v2 as docker-compose 2.26 (one static Go binary, libc >= 2.34: it runs on
# Debian 12). The .deb is fetched by apt inside the trixie base image (signed archive, the
# mirror apt already uses) and unpacked here; nothing is installed into the host's dpkg.
#   compose=$(bash scripts/compose_v2.sh) && "$compose" version
set -euo pipefail
cd "$(dirname "$0")/.."
work=${RAILGANG_IMAGE_WORK:-/var/tmp/railgang-image}
dir=$work/compose-v2
bin=$dir/usr/libexec/docker/cli-plugins/docker-compose

if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
for found in /usr/libexec/docker/cli-plugins/docker-compose /usr/lib/docker/cli-plugins/docker-compose; do
  if [ -x "$found" ]; then echo "$found"; exit 0; fi  # a host that has the plugin already
done
bash scripts/debian_base.sh trixie >&2
mkdir -p "$work"
tmp=$(mktemp -d "$work/compose-v2.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
docker run --rm --network host -v "$tmp:/out" railgang/debian:trixie \
  sh -c 'apt-get update -qq && cd /out && apt-get download -qq docker-compose' >&2
dpkg-deb -x "$tmp"/docker-compose_*.deb "$tmp/root"
rm -rf "$dir" && mv "$tmp/root" "$dir"
"$bin" version >&2
echo "$bin"
