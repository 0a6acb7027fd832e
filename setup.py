"""Install ``railgang/`` as the ``railgang.*`` import namespace.

The real modules live in ``railgang/daemon``, ``railgang/topology``, ``railgang/db`` and
``railgang/slurm_plugins``; the design card's top-level folders (``daemon/`` …) are symlinks to
them, so a path a newcomer reads in the docs still opens, while every ``railgang.*`` import
resolves from the checkout as it is (import graphs, IDEs, mypy: docs/layout.md says why).
The folders are not installed under their own names: python-daemon already owns ``daemon`` and
PyPI has packages called ``db`` and ``topology``. ``railgang`` itself is a namespace package (no
``__init__.py``). Everything else (metadata, dependencies, entry points) is in pyproject.toml.
"""

from setuptools import find_packages, setup

setup(packages=[f"railgang.{name}" for name in find_packages("railgang")])
