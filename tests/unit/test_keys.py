from __future__ import annotations

from redis.crc import key_slot

from cronos.keys import Keys


def test_every_key_starts_with_the_prefix() -> None:
    keys = Keys("acme:")
    names = [
        keys.leader,
        keys.stream,
        keys.queue_stream("gpu"),
        keys.queues,
        keys.redis_marker,
        keys.tick_lock(1, 2, 3),
        keys.node_heartbeat("executor", "n"),
    ]
    assert all(name.startswith("acme:") for name in names)
    assert keys.node_heartbeat("executor", "n").startswith(keys.node_pattern.rstrip("*"))


def test_keys_one_script_touches_share_a_cluster_slot() -> None:
    keys = Keys("acme:")
    locks = {
        key_slot(keys.tick_lock(job, ms, attempt).encode())
        for job in range(50)
        for ms in (0, 999)
        for attempt in (1, 2)
    }
    assert len(locks) == 1, "a batch of tick locks is taken in one script call"
    runs = {key_slot(k.encode()) for k in (keys.stream, keys.queue_stream("gpu"), keys.queues, keys.redis_marker)}
    assert len(runs) == 1, "one XREADGROUP reads the streams of every queue an executor serves"


def test_each_queue_has_its_own_stream_and_the_default_keeps_the_old_key() -> None:
    keys = Keys("p:")
    assert keys.stream == keys.queue_stream("default") == "p:{runs}:stream"
    assert len({keys.stream, keys.queue_stream("gpu"), keys.queue_stream("gpu-2")}) == 3


def test_a_tick_lock_names_the_tick_identity() -> None:
    keys = Keys("p:")
    assert len({keys.tick_lock(1, 1000, 1), keys.tick_lock(1, 1000, 2), keys.tick_lock(2, 1000, 1)}) == 3
