"""One error hierarchy for Cronos.

Expected outcomes (lock denied, tick already ran) are return values, not exceptions;
these are failures. Driver errors (asyncpg, redis) are translated once, at the store
and transport boundary, with the original kept as ``__cause__``.
"""

from __future__ import annotations


class CronosError(Exception):
    """Base of every error Cronos raises on purpose."""


class ConfigError(CronosError):
    """A setting has a bad value; the message names the variable."""


class InvalidInput(CronosError):
    """Input that fails validation. ``field`` is a JSON path such as ``$.cron_expression``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidSchedule(InvalidInput):
    """A cron expression or time zone that cannot be parsed."""


class NotFound(CronosError):
    """The job or run asked for does not exist."""


class Conflict(CronosError):
    """A write that would break a uniqueness rule (e.g. a duplicate job name)."""


class TooManyRequests(CronosError):
    """A caller past a limit on how much it may ask for at once; it may ask again later."""


class BackendUnavailable(CronosError):
    """PostgreSQL or Redis cannot be reached; the caller backs off and retries."""

    def __init__(self, backend: str, message: str) -> None:
        super().__init__(f"{backend} unavailable: {message}")
        self.backend = backend


class Contention(BackendUnavailable):
    """PostgreSQL rolled a transaction back (deadlock, serialization failure): retry it."""


class NotLeader(CronosError):
    """A fenced write was refused because this node's epoch is no longer current."""
