"""Cronos: a distributed cron on PostgreSQL and Redis.

User task code imports this package for the `task` decorator and `RunContext`.
"""

from importlib.metadata import PackageNotFoundError, version

from cronos.tasks import RunContext, task

# One place for the version: pyproject.toml, as the installed package's metadata carries it.
try:
    __version__ = version("cronos")
except PackageNotFoundError:  # a source tree on PYTHONPATH, never installed
    __version__ = "0+unknown"

__all__ = ["RunContext", "__version__", "task"]
