"""Cronos: a distributed cron on PostgreSQL and Redis.

User task code imports this package for the `task` decorator and `RunContext`.
"""

__version__ = "0.1.0"
