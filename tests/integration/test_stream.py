"""The run stream and the owned locks against a real Redis."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from cronos.keys import Keys
from cronos.locks import OwnedLock, TickLocks
from cronos.messages import RunToken
from cronos.scripts import Scripts
from cronos.stream import RunStream


def _tokens(n: int) -> list[RunToken]:
    return [RunToken(run_id=i, job_id=1, scheduled_for_ms=1000 + i) for i in range(n)]


async def test_publish_read_ack_and_trim_never_drops_pending(redis_client: aioredis.Redis, key_prefix: str) -> None:
    stream = RunStream(redis_client, Keys(key_prefix))
    assert await stream.ensure_group() is True
    assert await stream.ensure_group() is False
    assert await stream.publish(_tokens(2500)) == 2500

    first = await stream.read("c1", 10, block_ms=100)
    assert [d.token.run_id for d in first if d.token] == list(range(10))
    await stream.ack([d.entry_id for d in first[:4]])

    info = await stream.info()
    assert (info.length, info.pending, info.lag, info.consumers) == (2500, 6, 2490, {"c1": 6})

    assert await stream.trim_acknowledged() == 4
    again = await stream.read("c1", 100, block_ms=None, pending=True)
    assert [d.token.run_id for d in again if d.token] == list(range(4, 10))


async def test_restart_rereads_own_pending_and_autoclaim_takes_a_dead_consumers(
    redis_client: aioredis.Redis, key_prefix: str
) -> None:
    stream = RunStream(redis_client, Keys(key_prefix))
    await stream.ensure_group()
    await stream.publish(_tokens(3))
    await stream.read("dead", 3, block_ms=100)
    assert await stream.read("other", 3, block_ms=10) == []
    claimed = await stream.autoclaim("other", min_idle_ms=0, count=10)
    assert sorted(d.token.run_id for d in claimed if d.token) == [0, 1, 2]
    assert (await stream.info()).consumers["other"] == 3


async def test_undecodable_entry_is_delivered_as_none(redis_client: aioredis.Redis, key_prefix: str) -> None:
    keys = Keys(key_prefix)
    stream = RunStream(redis_client, keys)
    await stream.ensure_group()
    await redis_client.xadd(keys.stream, {"t": b"\xff\x00garbage"})
    await redis_client.xadd(keys.stream, {"other": b"x"})
    deliveries = await stream.read("c", 10, block_ms=100)
    assert [d.token for d in deliveries] == [None, None]


async def test_owned_lock_only_its_owner_renews_and_releases(redis_client: aioredis.Redis, key_prefix: str) -> None:
    scripts = Scripts(redis_client)
    key = f"{key_prefix}lock"
    mine = OwnedLock(redis_client, scripts, key, "a", ttl_ms=5000)
    theirs = OwnedLock(redis_client, scripts, key, "b", ttl_ms=5000)
    assert await mine.acquire() is True
    assert await theirs.acquire() is False
    assert await theirs.renew() is False
    assert await theirs.release() is False
    assert await mine.holder() == "a"
    assert await mine.renew() is True
    assert await mine.release() is True
    assert await theirs.acquire() is True


async def test_batch_locks(redis_client: aioredis.Redis, key_prefix: str) -> None:
    scripts = Scripts(redis_client)
    keys = [f"{key_prefix}l{i}" for i in range(5)]
    other, me = TickLocks(scripts, "other"), TickLocks(scripts, "me")
    assert await other.acquire(keys[:2], 5000) == [True, True]
    assert await me.acquire(keys, 5000) == [False, False, True, True, True]
    # Held by the same owner (its previous incarnation, restarted under the same id): taken again.
    assert await me.acquire(keys, 9000) == [False, False, True, True, True]
    assert await redis_client.pttl(keys[2]) > 5000
    assert await me.renew(keys, 9000) == 3
    assert await me.release(keys) == 3
    assert await redis_client.exists(*keys) == 2


async def test_settle_releases_own_locks_then_acks(redis_client: aioredis.Redis, key_prefix: str) -> None:
    keys = Keys(key_prefix)
    stream = RunStream(redis_client, keys)
    await stream.ensure_group()
    await stream.publish([RunToken(run_id=1, job_id=1, scheduled_for_ms=1000)])
    (delivery,) = await stream.read("c", 10, block_ms=100)
    scripts = Scripts(redis_client)
    mine, theirs = f"{key_prefix}mine", f"{key_prefix}theirs"
    await TickLocks(scripts, "other").acquire([theirs], 5000)
    await TickLocks(scripts, "c").acquire([mine], 5000)
    await stream.settle([delivery.ref], TickLocks(scripts, "c"), [mine, theirs])
    assert await redis_client.exists(mine) == 0 and await redis_client.exists(theirs) == 1
    assert (await stream.info()).pending == 0
    await redis_client.delete(keys.stream)  # Redis lost the stream: settling is a no-op, not an error
    await stream.settle([delivery.ref], TickLocks(scripts, "c"), [])


async def test_reading_after_redis_lost_the_stream_recreates_the_group(
    redis_client: aioredis.Redis, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    stream = RunStream(redis_client, keys)
    await stream.ensure_group()
    await redis_client.delete(keys.stream)  # what a restart without persistence looks like
    assert await stream.read("c", 10, block_ms=10) == []
    assert await stream.group_exists()
    await redis_client.delete(keys.stream)
    assert await stream.autoclaim("c", min_idle_ms=0, count=10) == []
    await stream.publish(_tokens(2))
    assert len(await stream.read("c", 10, block_ms=10)) == 2


class _Replies:
    """The real client, with chosen replies changed as a busy server can make them: entries
    acknowledged between XINFO and XPENDING, a group that reports no read position."""

    def __init__(self, client: aioredis.Redis, *, ack_first: bool = False, no_position: bool = False) -> None:
        self._client = client
        self._ack_first = ack_first
        self._no_position = no_position

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def xpending(self, name: str, groupname: str) -> Any:
        if self._ack_first:  # every pending entry acknowledged meanwhile: XPENDING has no min
            pending = await self._client.xpending_range(name, groupname, "-", "+", 1000)
            await self._client.xack(name, groupname, *[p["message_id"] for p in pending])
        return await self._client.xpending(name, groupname)

    async def xinfo_groups(self, name: str) -> Any:
        groups = await self._client.xinfo_groups(name)
        if self._no_position:
            return [{k: v for k, v in g.items() if k != "last-delivered-id"} for g in groups]
        return groups


async def test_trim_when_xpending_answers_nothing_trims_safely_instead_of_raising(
    redis_client: aioredis.Redis, key_prefix: str
) -> None:
    """Issue 13: XPENDING answered with no oldest entry (acknowledged meanwhile) and None became
    the id "None" (ValueError), which took the lone leader down."""
    keys = Keys(key_prefix)
    await RunStream(redis_client, keys).ensure_group()
    stream = RunStream(_Replies(redis_client, ack_first=True), keys)
    await stream.publish(_tokens(5))
    await stream.read("c", 3, block_ms=100)  # 3 pending, 2 unread
    assert await stream.trim_acknowledged() == 2  # below the read position; the unread stay
    assert [d.token.run_id for d in await stream.read("c", 10, block_ms=100) if d.token] == [3, 4]


async def test_trim_without_a_read_position_or_a_stream_trims_nothing(
    redis_client: aioredis.Redis, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    stream = RunStream(_Replies(redis_client, no_position=True), keys)
    await stream.ensure_group()
    await stream.publish(_tokens(3))
    await stream.ack([d.entry_id for d in await stream.read("c", 3, block_ms=100)])
    assert (await stream.info()).last_delivered_id is None
    assert await stream.trim_acknowledged() == 0
    await redis_client.delete(keys.stream)  # Redis lost its data
    assert await RunStream(redis_client, keys).trim_acknowledged() == 0


async def test_each_queue_is_its_own_stream_and_a_reader_gets_only_its_queues(
    redis_client: aioredis.Redis, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    pusher = RunStream(redis_client, keys)
    for queue, first in (("default", 0), ("gpu", 100), ("edge", 200)):
        await pusher.ensure_group(queue)
        await pusher.publish([RunToken(run_id=first + i, job_id=1, scheduled_for_ms=1000 + i) for i in range(5)], queue)
    both = RunStream(redis_client, keys, queues=("gpu", "edge"))
    got = await both.read("c", 4, block_ms=100)  # COUNT is per stream: the reader splits its budget
    assert len(got) == 4
    assert {d.queue for d in got} == {"gpu", "edge"}
    assert all((d.token.run_id >= 200) == (d.queue == "edge") for d in got if d.token)
    rest = await both.read("c", 100, block_ms=100)
    assert sorted(d.token.run_id for d in got + rest if d.token) == [*range(100, 105), *range(200, 205)]
    # Entry ids are per stream: acknowledging by (queue, id) touches only that queue.
    await both.settle([d.ref for d in got + rest if d.queue == "gpu"], TickLocks(Scripts(redis_client), "c"), [])
    assert (await both.info("gpu")).pending == 0 and (await both.info("edge")).pending == 5
    default = await pusher.info()
    assert (default.length, default.lag) == (5, 5)  # nobody serves the default queue here: its lag shows


async def test_a_read_smaller_than_its_queues_takes_turns(redis_client: aioredis.Redis, key_prefix: str) -> None:
    keys = Keys(key_prefix)
    queues = ("a", "b", "c")
    stream = RunStream(redis_client, keys, queues=queues)
    await stream.ensure_group()
    for n, queue in enumerate(queues):
        await stream.publish(
            [RunToken(run_id=10 * n + i, job_id=1, scheduled_for_ms=1000 + i) for i in range(3)], queue
        )
    seen = [d.queue for _ in range(3) for d in await stream.read("c", 1, block_ms=100)]
    assert sorted(seen) == ["a", "b", "c"]  # one entry a read, never more, every queue served


async def test_autoclaim_takes_idle_entries_of_every_queue_within_one_count(
    redis_client: aioredis.Redis, key_prefix: str
) -> None:
    keys = Keys(key_prefix)
    stream = RunStream(redis_client, keys, queues=("default", "gpu"))
    await stream.ensure_group()
    for queue in ("default", "gpu"):
        await stream.publish(_tokens(2), queue)
    held = await stream.read("dead", 10, block_ms=100)
    assert sorted(d.queue for d in held) == ["default", "default", "gpu", "gpu"]
    assert [d.queue for d in await stream.autoclaim("other", min_idle_ms=0, count=3)] == ["default", "default", "gpu"]
    assert [d.ref for d in await stream.autoclaim("other", min_idle_ms=0, count=10)] == [
        d.ref for d in held if d.queue == "default"
    ] + [d.ref for d in held if d.queue == "gpu"]
    assert (await stream.info("gpu")).consumers == {"dead": 0, "other": 2}
