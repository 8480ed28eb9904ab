"""Leader election on a real Redis lock with epochs from a real PostgreSQL."""

from __future__ import annotations

import asyncpg
import pytest
import redis.asyncio as aioredis

from cronos.keys import Keys
from cronos.locks import OwnedLock
from cronos.scripts import Scripts
from cronos.settings import Settings
from cronos.store.epoch import EpochStore
from dispatcher.election import Election, LeadershipLost


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _candidate(
    redis_client: aioredis.Redis, pg_pool: asyncpg.Pool, settings: Settings, node: str, clock: FakeClock
) -> Election:
    lock = OwnedLock(redis_client, Scripts(redis_client), Keys(settings.key_prefix).leader, node, 1000)
    return Election(lock, EpochStore(pg_pool), node, 1000, clock=clock)


async def test_one_winner_increasing_epochs_and_a_logged_handover(
    settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis
) -> None:
    clock = FakeClock()
    a, b, c = (_candidate(redis_client, pg_pool, settings, n, clock) for n in ("a", "b", "c"))
    results = [await e.campaign() for e in (a, b, c)]
    assert results[0] is not None and results[1:] == [None, None]
    assert a.leading and a.check() == results[0]
    assert not b.leading
    with pytest.raises(LeadershipLost):
        b.check()

    await a.resign()  # compare-and-delete: the next candidate wins at once, with a higher epoch
    assert not a.leading and await redis_client.get(Keys(settings.key_prefix).leader) is None
    second = await b.campaign()
    assert second is not None and second > results[0]
    log = await pg_pool.fetch("SELECT epoch, holder FROM leader_log ORDER BY epoch")
    assert [(r["epoch"], r["holder"]) for r in log] == [(results[0], "a"), (second, "b")]
    current = await EpochStore(pg_pool).current()
    assert (current.epoch, current.holder) == (second, "b")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def leader(settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis, clock: FakeClock) -> Election:
    """Candidate "a", elected."""
    a = _candidate(redis_client, pg_pool, settings, "a", clock)
    assert await a.campaign() is not None
    return a


async def test_a_leader_stops_acting_once_its_lease_is_too_old(leader: Election, clock: FakeClock) -> None:
    clock.now += 0.5
    await leader.renew()
    clock.now += 0.79  # ttl 1 s minus a 0.2 s margin: still (just) valid
    assert leader.leading
    clock.now += 0.02
    assert not leader.leading  # no I/O needed to know it
    with pytest.raises(LeadershipLost):
        leader.check()
    with pytest.raises(LeadershipLost):
        await leader.renew()


async def test_renewal_fails_when_another_node_holds_the_lock(
    settings: Settings, redis_client: aioredis.Redis, leader: Election
) -> None:
    await redis_client.set(Keys(settings.key_prefix).leader, "b")  # the lock expired and b took it
    with pytest.raises(LeadershipLost, match="another node"):
        await leader.renew()
    leader.step_down("lost")
    await leader.resign()  # compare-and-delete leaves b's lock alone
    assert await redis_client.get(Keys(settings.key_prefix).leader) == b"b"


async def test_a_leader_without_a_recent_postgresql_round_trip_stops_renewing(
    settings: Settings, pg_pool: asyncpg.Pool, redis_client: aioredis.Redis
) -> None:
    """Leading needs both backends: the renewer refuses once PostgreSQL has not answered for
    db_timeout + 2 renew intervals, although Redis would still extend the lock (issue 16)."""
    clock = FakeClock()
    lock = OwnedLock(redis_client, Scripts(redis_client), Keys(settings.key_prefix).leader, "a", 1000)
    a = Election(lock, EpochStore(pg_pool), "a", 1000, db_timeout_ms=400, clock=clock)
    assert await a.campaign() is not None
    assert a.db_stale_s == pytest.approx(0.4 + 2 / 3)
    for _ in range(4):  # PostgreSQL answers: renewals go on past the stale bound
        clock.now += 0.3
        a.db_ok()
        await a.renew()
    for _ in range(3):  # PostgreSQL silent: 0.9 s, still within 1.07 s
        clock.now += 0.3
        await a.renew()
    clock.now += 0.3
    with pytest.raises(LeadershipLost, match="no PostgreSQL round trip"):
        await a.renew()
    assert not a.leading
    assert await lock.holder() == "a"  # stepping down is local; the term's end releases the lock
