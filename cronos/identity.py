"""Which cluster a process belongs to, and whether its Redis keys are that cluster's.

A cluster is its PostgreSQL database: migration 0024 makes a random id there once. The first
process to start writes the same id to Redis under the key prefix (cronos.keys.Keys.cluster);
every process compares the two at start. Two deployments that share a Redis prefix by
accident (the defaults: `cronos:` on db 0) would otherwise form one cluster: one leader lock,
one stream, one set of tick locks for two unrelated sets of jobs.

Pure: the I/O is cronos.store.identity.
"""

from __future__ import annotations

from cronos.errors import ConfigError
from cronos.redact import redact_url


class ClusterMismatch(ConfigError):
    """This process's Redis keys belong to another cluster than its database."""


def mismatch(
    database_id: str, redis_id: str | None, *, database_url: str, redis_url: str, prefix: str
) -> ClusterMismatch | None:
    """The refusal to start when the keys under `prefix` carry another cluster's id, else None.
    No id in Redis (a fresh or flushed Redis) is no refusal: the caller writes its own.
    The message is one line, with any password in the URLs hidden."""
    if redis_id is None or redis_id == database_id:
        return None
    return ClusterMismatch(
        f"Redis prefix {prefix!r} at {redact_url(redis_url)} belongs to cluster {redis_id}"
        f" but database {redact_url(database_url)} is cluster {database_id}:"
        " give this deployment a CRONOS_KEY_PREFIX (or Redis db) of its own"
    )
