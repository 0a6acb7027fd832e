#!/usr/bin/env bash
# The test command (README and CI): install if needed, lint, type-check, then the whole suite,
# including the real Slurm cluster and PostgreSQL tests (they bring their services up themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
echo "== ruff"
.venv/bin/ruff check .
echo "== mypy"
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
