"""What the benchmark scripts share: where the checkout is, the Philly trace, the ``railgang``
command of this checkout, and the one way to import code that lives outside it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the checkout: benchmarks/ and railgang/ side by side
BENCHMARKS = REPO / "benchmarks"  # the data files the scripts read (traces, quota trees, sweeps)
# `railgang` from this checkout, whatever is installed (a benchmark measures the code beside it)
RAILGANG = (sys.executable, "-c", "from railgang.daemon.cli.main import main; main()")


def philly_dir() -> Path:
    """The Philly-derived trace (Gavel's copy): ``$RAILGANG_PHILLY_DIR`` or
    ../shared/traces/philly-gavel next to the checkout."""
    return Path(os.environ.get("RAILGANG_PHILLY_DIR", REPO.parent / "shared/traces/philly-gavel"))


def import_first(directory: Path) -> None:
    """Make the modules of a directory outside this checkout importable ahead of everything
    else: Gavel's simulator (``scheduler``, ``utils``), or another checkout's ``railgang`` that a
    before/after measurement runs. The benchmarks themselves are a package and need no path."""
    path = str(directory.resolve())
    if path not in sys.path[:1]:
        sys.path.insert(0, path)


__all__ = ["BENCHMARKS", "RAILGANG", "REPO", "import_first", "philly_dir"]
