"""Install the design card's top-level folders under one import namespace, ``railgang``.

The repository keeps ``daemon/``, ``topology/``, ``db/`` and ``slurm_plugins/`` at the top (the
design card's layout), but installing them under those names would put a package called
``daemon`` into site-packages, where python-daemon already lives, and PyPI has packages named
``db`` and ``topology``. So each folder is installed as ``railgang.<folder>`` through a
package-dir mapping; ``railgang`` itself is a namespace package (no ``__init__.py``).
Everything else (metadata, dependencies, entry points) is in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_packages, setup

FOLDERS = ("daemon", "topology", "db", "slurm_plugins")
ROOT = Path(__file__).parent

package_dir: dict[str, str] = {}
for folder in FOLDERS:
    for sub in ["", *find_packages(str(ROOT / folder))]:
        dotted = f"{folder}.{sub}" if sub else folder
        package_dir[f"railgang.{dotted}"] = dotted.replace(".", "/")

setup(packages=sorted(package_dir), package_dir=package_dir)
