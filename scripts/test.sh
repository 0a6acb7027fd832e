#!/usr/bin/env bash
# The test command (README and CI): install if needed, lint, type-check, then the whole suite,
# including the real Slurm cluster and PostgreSQL tests (they bring their services up themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
echo "== ruff"
.venv/bin/ruff check .
echo "== mypy"
# mypy cannot follow setuptools' editable import hook, so it reads the railgang.* namespace
# through a tree of symlinks to the top-level folders (setup.py says why the namespace exists)
mkdir -p build/mypy/railgang
for d in daemon topology db slurm_plugins; do ln -sfn "../../../$d" "build/mypy/railgang/$d"; done
.venv/bin/mypy
echo "== pytest"
set +e
.venv/bin/pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1  # an empty suite is a broken suite
fi
exit "$rc"
