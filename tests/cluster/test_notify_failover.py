"""Notifications across a leader's kill -9 (issue 24): real `cronos dispatcher` processes, a real
HTTP receiver.

- Receiver down: while it refuses (503) the leader has routed every event and retries the
  deliveries; it is killed with -9, more events arrive while no one leads, the receiver comes back,
  and the standby that takes over delivers every notification: each webhook-id accepted exactly
  once, none lost, no event routed twice.
- Receiver slow: the leader is killed while its requests are in flight. The receiver may have
  handled them (the leader never heard back), so the standby sends them again once their lease
  ran out, with the same webhook-ids: a receiver that keeps the ids it handled (as Standard
  Webhooks asks) handles each notification exactly once; the repeats are only those in flight.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from cronos.events import JobEvent, JobEventKind
from cronos.notify.channels import ChannelFields
from cronos.store.events import insert_events
from cronos.store.notify import ChannelStore
from tests.cluster.node import Node
from tests.notify_receivers import http_receiver
from tests.services import Services
from tests.waiting import wait_for

pytestmark = pytest.mark.cluster

CRONOS = str(Path(sys.executable).with_name("cronos"))
BEFORE, AFTER = 12, 4  # events written before the kill, and while no one leads


@pytest.fixture
def dispatchers(services: Services, database_url: str, key_prefix: str, tmp_path: Path) -> Iterator[list[Node]]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "DATABASE_URL": database_url,
        "REDIS_URL": services.redis_url,
        "CRONOS_KEY_PREFIX": key_prefix,
        "CRONOS_LEADER_TTL_MS": "1000",
        "CRONOS_LOG_FORMAT": "json",
        "CRONOS_HTTP_ALLOW_NETS": "127.0.0.0/8",
        "CRONOS_NOTIFY_TIMEOUT_S": "2",  # a lease of 5 s
        "CRONOS_NOTIFY_RETRY_BASE_S": "0.1",
        "CRONOS_NOTIFY_RETRY_CAP_S": "0.3",
        "CRONOS_NOTIFY_MAX_ATTEMPTS": "100",
    }
    nodes = [
        Node("dispatcher", f"n{i}", [CRONOS, "dispatcher"], {**env, "CRONOS_NODE_ID": f"n{i}"}, tmp_path,
             tmp_path / f"n{i}.log")
        for i in range(2)
    ]  # fmt: skip
    for node in nodes:
        node.start()
    try:
        yield nodes
    finally:
        for node in nodes:
            node.kill()


def _events(job_id: int, numbers: range) -> list[JobEvent]:
    now = datetime.now(UTC)
    return [JobEvent(job_id, JobEventKind.FAILED, now, f"failed:{job_id}:{n}", None, {"n": n}) for n in numbers]


async def test_pending_notifications_survive_a_leader_kill_9_and_arrive_exactly_once(
    dispatchers: list[Node], pg_pool: asyncpg.Pool
) -> None:
    job = await pg_pool.fetchval(
        "INSERT INTO jobs (name, cron_expression, status) VALUES ('nightly', '0 3 1 1 *', 'active') RETURNING id"
    )
    async with http_receiver(statuses=[503]) as receiver:
        await ChannelStore(pg_pool).create(ChannelFields(name="hook", kind="webhook", url=receiver.url))
        async with pg_pool.acquire() as conn:
            await insert_events(conn, _events(job, range(BEFORE)))

        async def tried_all() -> bool:
            count = await pg_pool.fetchval("SELECT count(*) FROM notification_deliveries WHERE attempts >= 1")
            return bool(count == BEFORE)

        await wait_for(tried_all, timeout=20, what="the leader to route and try every delivery")
        assert not receiver.accepted()
        holder = await pg_pool.fetchval("SELECT holder FROM leader_epoch WHERE id = 1")
        leader = next(node for node in dispatchers if node.name == holder)
        leader.kill()  # -9: no clean release; its leases on deliveries run out on their own
        async with pg_pool.acquire() as conn:
            await insert_events(conn, _events(job, range(BEFORE, BEFORE + AFTER)))
        receiver.statuses[:] = [200]

        async def all_sent() -> bool:
            count = await pg_pool.fetchval("SELECT count(*) FROM notification_deliveries WHERE state = 'sent'")
            return bool(count == BEFORE + AFTER)

        await wait_for(all_sent, timeout=30, interval=0.1, what="every notification sent by the new leader")
        new_holder = await pg_pool.fetchval("SELECT holder FROM leader_epoch WHERE id = 1")
        assert new_holder != holder
        ids = [r.headers["webhook-id"] for r in receiver.accepted()]
        numbers = sorted(r.json["event"]["detail"]["n"] for r in receiver.accepted())
    assert len(ids) == len(set(ids)) == BEFORE + AFTER  # each accepted exactly once
    assert numbers == list(range(BEFORE + AFTER))  # none lost
    assert await pg_pool.fetchval("SELECT count(*) FROM notification_deliveries") == BEFORE + AFTER
    assert await pg_pool.fetchval("SELECT count(*) FROM job_events WHERE routed_at IS NULL") == 0
    survivor = next(node for node in dispatchers if node.name == new_holder)
    assert "notify.sent" in survivor.events()


async def test_requests_in_flight_at_a_leader_kill_9_are_repeated_with_their_webhook_id_only(
    dispatchers: list[Node], pg_pool: asyncpg.Pool
) -> None:
    job = await pg_pool.fetchval(
        "INSERT INTO jobs (name, cron_expression, status) VALUES ('nightly', '0 3 1 1 *', 'active') RETURNING id"
    )
    async with http_receiver(delay_s=1.5) as receiver:
        await ChannelStore(pg_pool).create(ChannelFields(name="hook", kind="webhook", url=receiver.url))
        async with pg_pool.acquire() as conn:
            await insert_events(conn, _events(job, range(BEFORE)))

        async def all_in_flight() -> bool:
            return len(set(receiver.arrived)) == BEFORE

        await wait_for(all_in_flight, timeout=20, interval=0.01, what="every notification in flight")
        holder = await pg_pool.fetchval("SELECT holder FROM leader_epoch WHERE id = 1")
        next(node for node in dispatchers if node.name == holder).kill()
        in_flight = set(receiver.arrived)
        receiver.delay_s = 0

        async def all_sent() -> bool:
            count = await pg_pool.fetchval("SELECT count(*) FROM notification_deliveries WHERE state = 'sent'")
            return bool(count == BEFORE)

        await wait_for(all_sent, timeout=30, interval=0.1, what="every notification marked sent by the new leader")
        handled: dict[str, int] = {}  # what a de-duplicating receiver does: each webhook-id handled once
        for got in receiver.accepted():
            handled.setdefault(got.headers["webhook-id"], got.json["event"]["detail"]["n"])
        repeated = [i for i in receiver.arrived if receiver.arrived.count(i) > 1]
    assert sorted(handled.values()) == list(range(BEFORE))  # none lost, each handled once
    assert set(repeated) <= in_flight  # only what was in flight at the kill came again
    assert await pg_pool.fetchval("SELECT count(*) FROM notification_deliveries") == BEFORE
