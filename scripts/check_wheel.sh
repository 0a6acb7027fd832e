#!/usr/bin/env bash
# Build the wheel, install it into a clean virtualenv next to python-daemon (whose import name is
# `daemon`), and run the CLI from it: proves the railgang.* namespace installs without shadowing
# anything and that the wheel carries its data files (migrations, lua, the SPANK source, templates).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.venv/bin/pip wheel -q --no-deps -w "$work/dist" . >/dev/null
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$work"/dist/railgang-*.whl python-daemon
cd "$work"  # away from the source tree, so only the installed wheel can be imported
"$work/venv/bin/python" - <<'PY'
import daemon, daemon.daemon  # python-daemon, untouched
import railgang.daemon.cli.main, railgang.topology, railgang.db.migrate, railgang.slurm_plugins
from importlib.resources import files
assert "railgang" not in daemon.__file__, daemon.__file__
assert files("railgang.db").joinpath("migrations/env.py").is_file()
assert files("railgang.slurm_plugins").joinpath("job_submit.lua").is_file()
print("python-daemon at", daemon.__file__)
print("railgang at", railgang.daemon.cli.__file__)
PY
"$work/venv/bin/railgang" --version
"$work/venv/bin/railgang" paths  # exit 1 unless job_submit.lua and the SPANK source are installed
RAILGANG_DB__URL="sqlite:///$work/rg.sqlite" "$work/venv/bin/railgang" db upgrade
"$work/venv/bin/railgang" topology generate --nodes 8 --nodes-per-leaf 4 > "$work/t.conf"
"$work/venv/bin/railgang" topology check "$work/t.conf"
echo "wheel check passed"
