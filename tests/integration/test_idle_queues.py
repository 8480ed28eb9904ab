"""Queues no job names go away, and their number is capped (issue 22, item 7).

1,000 queues made by jobs that were then deleted stayed forever: the leader's housekeeping went
through every one of them each pass (idle CPU 0.7 % -> 23 % of a core), /api/cluster read each
(8 -> ~450 ms), /metrics carried three series each.
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg
import msgspec
from prometheus_client import generate_latest

from cronos import metrics, presence
from cronos.keys import Keys
from cronos.models import DEFAULT_QUEUE
from cronos.settings import Settings
from cronos.store.ledger import QueuedRun
from cronos.store.queues import QueueStore
from cronos.stream import RunStream
from dispatcher.housekeeping import Housekeeping
from dispatcher.publisher import Publisher
from tests.integration.api_client import Api, running_api

QUEUES = 200
YEARLY = "0 0 1 1 *"  # no tick while the test runs: the test pushes each job's token itself


async def _cluster(api: Api) -> tuple[dict[str, Any], float]:
    began = time.perf_counter()
    reply = await api.call("GET", "/api/cluster")
    assert reply.status == 200, reply.body
    return reply.body["queues"], time.perf_counter() - began


def _series(queue: str) -> int:
    return generate_latest(metrics.REGISTRY).decode().count(f'queue="{queue}"')


async def test_queues_no_job_names_are_dropped_once_empty(
    settings: Settings, redis_client: Any, pg_pool: asyncpg.Pool
) -> None:
    keys = Keys(settings.key_prefix)
    names = [f"q-{i:03}" for i in range(QUEUES)]
    publisher = Publisher(redis_client, keys)
    housekeeping = Housekeeping(publisher, object(), settings, QueueStore(pg_pool))  # type: ignore[arg-type]
    async with running_api(msgspec.structs.replace(settings, max_queues=QUEUES + 10)) as api:
        jobs = {name: (await api.create(name=name, cron_expression=YEARLY, queue=name))["id"] for name in names}
        kept = {"named": (await api.create(name="named", cron_expression=YEARLY, queue="named"))["id"]}
        for extra in ("unread", "pending"):
            jobs[extra] = (await api.create(name=extra, cron_expression=YEARLY, queue=extra))["id"]
        # What a leader and executors did: a token pushed to each queue, read and acknowledged,
        # but for `pending` (read, not acknowledged: an executor holds it) and `unread`.
        runs = [QueuedRun(i, job, 1000 * i, 1, "schedule", 0, queue) for i, (queue, job) in enumerate(jobs.items(), 1)]
        await publisher.publish([*runs, QueuedRun(0, kept["named"], 0, 1, "schedule", 0, "named")], epoch=1)
        consumer = RunStream(redis_client, keys, queues=[*names, "pending", "named"])
        read = await consumer.read("exec-1", count=QUEUES + 10, block_ms=None)
        assert len(read) == QUEUES + 2
        for delivery in read:
            if delivery.queue != "pending":
                await consumer.ack([delivery.entry_id], delivery.queue)
        await housekeeping.tidy()
        assert all(_series(name) == 3 for name in names)
        before, before_s = await _cluster(api)
        assert len(before) == QUEUES + 4

        for job in jobs.values():
            assert (await api.call("DELETE", f"/api/jobs/{job}")).status == 204
        await housekeeping.tidy()

        assert await publisher.queues() == [DEFAULT_QUEUE, "named", "pending", "unread"]
        assert await redis_client.exists(*(keys.queue_stream(name) for name in names)) == 0
        assert [name for name in names if _series(name)] == []
        assert _series("pending") == _series("unread") == _series("named") == 3
        after, after_s = await _cluster(api)
        assert sorted(after) == [DEFAULT_QUEUE, "named", "pending", "unread"]
        assert after["pending"]["pending"] == 1 and after["unread"]["lag"] == 1
        print(f"/api/cluster: {before_s * 1000:.0f} ms with {QUEUES + 4} queues, {after_s * 1000:.0f} ms after")
        assert after_s < 0.25

        # A job naming a dropped queue again makes it again with its first push.
        again = await api.create(name="again", cron_expression=YEARLY, queue="q-007")
        await publisher.publish([QueuedRun(10_000, again["id"], 1, 1, "schedule", 0, "q-007")], epoch=1)
        assert (await RunStream(redis_client, keys, queues=["q-007"]).info("q-007")).lag == 1
        assert "q-007" in await publisher.queues()


async def test_a_job_naming_one_queue_too_many_is_refused(settings: Settings) -> None:
    async with running_api(msgspec.structs.replace(settings, max_queues=3)) as api:
        a = await api.create(name="a", queue="a")
        await api.create(name="b", queue="b")  # default, a, b: three queues
        refused = await api.call("POST", "/api/jobs", json={"name": "c", "queue": "c", "payload": {"action": "noop"},
                                                            "cron_expression": "* * * * *"})  # fmt: skip
        assert refused.status == 422 and refused.body["field"] == "$.queue", refused.body
        assert "CRONOS_MAX_QUEUES" in refused.body["detail"]
        assert (await api.call("PATCH", f"/api/jobs/{a['id']}", json={"queue": "c"})).status == 200  # a goes, c comes
        moved = await api.call("PATCH", f"/api/jobs/{a['id']}", json={"queue": "d"})
        assert moved.status == 200  # c goes with it: still three
        await api.create(name="e", queue="d")
        await api.create(name="f")  # the default queue, and a named one, are always there
        blocked = await api.call("PATCH", f"/api/jobs/{a['id']}", json={"queue": "z"})
        assert blocked.status == 422 and blocked.body["field"] == "$.queue"  # e still names d


async def test_an_orphaned_queue_counts_toward_the_cap_until_the_leader_drops_it(
    settings: Settings, redis_client: Any, pg_pool: asyncpg.Pool
) -> None:
    """Issue 36 (LOW): a deleted job's token left on a queue no executor reads kept its stream
    forever, and the queue did not count toward CRONOS_MAX_QUEUES."""
    keys = Keys(settings.key_prefix)
    fresh = Publisher(redis_client, keys)  # the leader's: an orphan's entries must be a minute old
    aged = Publisher(redis_client, keys, orphan_age_ms=0)
    tidy = Housekeeping(aged, object(), settings, QueueStore(pg_pool))  # type: ignore[arg-type]
    payload = {"payload": {"action": "noop"}, "cron_expression": YEARLY}
    async with running_api(msgspec.structs.replace(settings, max_queues=3)) as api:
        gone = await api.create(name="gone", queue="gone-pool", **payload)
        served = await api.create(name="served", queue="served", **payload)
        runs = [
            QueuedRun(1, gone["id"], 0, 1, "schedule", 0, "gone-pool"),
            QueuedRun(2, served["id"], 0, 1, "schedule", 0, "served"),
        ]
        await fresh.publish(runs, epoch=1)
        for job in (gone, served):
            assert (await api.call("DELETE", f"/api/jobs/{job['id']}")).status == 204
        # A live executor still reads `served` (it will take its token); none reads `gone-pool`.
        await presence.beat(redis_client, keys, "executor", "exec-1", 30, queues="default,served")

        await Housekeeping(fresh, object(), settings, QueueStore(pg_pool)).tidy()  # type: ignore[arg-type]
        assert await fresh.queues() == [DEFAULT_QUEUE, "gone-pool", "served"]  # a fresh entry: not yet
        # default, gone-pool and served have streams: a job naming a fourth queue is one too many.
        refused = await api.call("POST", "/api/jobs", json={"name": "c", "queue": "c", **payload})
        assert refused.status == 422 and refused.body["field"] == "$.queue", refused.body

        await tidy.tidy()  # the orphan's entry is old enough now (its age bound 0)
        assert await aged.queues() == [DEFAULT_QUEUE, "served"]
        assert await redis_client.exists(keys.queue_stream("gone-pool")) == 0
        assert _series("gone-pool") == 0
        assert (await RunStream(redis_client, keys, queues=["served"]).info("served")).lag == 1  # read: kept
        # default, served and c: three.
        assert (await api.call("POST", "/api/jobs", json={"name": "c", "queue": "c", **payload})).status == 201
