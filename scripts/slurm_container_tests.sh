#!/usr/bin/env bash
# Run railgang's real-cluster pytest suites against a newer Debian's Slurm, inside a container:
#   bash scripts/slurm_container_tests.sh trixie tests/daemon/slurm/cli/test_cli_backend_slurm.py
#   bash scripts/slurm_container_tests.sh sid -m slurm tests/slurm_plugins
# The image is scripts/slurm_image.sh's (built if missing); this tree's wheel and pytest's
# wheels (fetched here for the image's Python) are installed in a fresh container on the host
# network; the session cluster of tests/conftest.py comes up inside on ports 13817+ (trixie) or
# 14817+ (sid), set RAILGANG_TEST_PORT_BASE to move them. The container is removed afterwards.
# Root and a Docker engine needed (docs/devcluster.md, "Newer Slurm").
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:?usage: slurm_container_tests.sh trixie|sid [pytest args]}
shift
case "$suite" in trixie) base=13817 ;; sid) base=14817 ;; *) base=13817 ;; esac
base=${RAILGANG_TEST_PORT_BASE:-$base}
image=railgang/slurm:$suite
name=railgang-suite-$suite-$$
work=$(mktemp -d /var/tmp/railgang-suite-XXXXXX)
chmod 755 "$work"
cleanup() { docker rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

bash scripts/slurm_image.sh "$suite" >/dev/null
pyver=$(docker run --rm --network host "$image" python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
.venv/bin/pip wheel -q --no-deps -w "$work/wheels" . >/dev/null
.venv/bin/pip download -q -d "$work/wheels" --only-binary=:all: --python-version "$pyver" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any "pytest>=8" "hypothesis>=6.100" "httpx>=0.27" "httpx2>=2.0" \
  2>&1 | grep -v "^WARNING: Location" || true
docker run -d --name "$name" --network host --cap-add ALL --cap-drop SYS_RESOURCE \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --device-cgroup-rule 'c 195:* rmw' -v "$PWD:/src:ro" -v "$work/wheels:/wheels:ro" \
  "$image" sleep infinity >/dev/null
docker exec "$name" sh -c 'pip install -q --no-deps /wheels/railgang-*.whl &&
  pip install -q --no-index --find-links /wheels pytest hypothesis httpx httpx2'
# the tree is mounted read-only: no bytecode, no pytest cache
docker exec -w /src -e PYTHONDONTWRITEBYTECODE=1 -e RAILGANG_TEST_ROOT=/var/tmp/railgang-tests \
  -e RAILGANG_TEST_PORT_BASE="$base" -e RAILGANG_TEST_REQUIRE="${RAILGANG_TEST_REQUIRE:-slurm}" \
  "$name" python3 -m pytest -p no:cacheprovider "$@"
