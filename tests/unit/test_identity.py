"""cronos.identity: when a process refuses to start, and the one line it says."""

from __future__ import annotations

from cronos.identity import ClusterMismatch, mismatch

OURS, THEIRS = "9f8e0000-0000-4000-8000-000000000001", "1b2c0000-0000-4000-8000-000000000002"
URLS = {"database_url": "postgresql://app:hunter2@db:5432/cronos", "redis_url": "redis://:s3cret@cache:6379/0"}


def test_keys_of_the_same_cluster_or_none_are_no_refusal() -> None:
    assert mismatch(OURS, OURS, prefix="cronos:", **URLS) is None
    assert mismatch(OURS, None, prefix="cronos:", **URLS) is None  # a fresh or flushed Redis: claimed, not refused


def test_another_clusters_keys_are_refused_in_one_line_without_passwords() -> None:
    refusal = mismatch(OURS, THEIRS, prefix="cronos:", **URLS)
    assert isinstance(refusal, ClusterMismatch)
    assert str(refusal) == (
        f"Redis prefix 'cronos:' at redis://:***@cache:6379/0 belongs to cluster {THEIRS}"
        f" but database postgresql://app:***@db:5432/cronos is cluster {OURS}:"
        " give this deployment a CRONOS_KEY_PREFIX (or Redis db) of its own"
    )
