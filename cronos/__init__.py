"""Cronos: a distributed cron on PostgreSQL and Redis.

User task code imports this package for the `task` decorator and `RunContext`.
"""

from cronos.tasks import RunContext, task

__version__ = "0.1.0"

__all__ = ["RunContext", "__version__", "task"]
