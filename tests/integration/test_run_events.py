"""Start and end events (issue 39, item 4): channels that ask for `started`, `completed` or `ended`
hear of the runs of their jobs, from the leader's health evaluator, through the notifier, to a
real HTTP receiver and a real SMTP server; the jobs no channel asks them of pay nothing."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

import asyncpg
import msgspec
import pytest

from cronos.http_guard import guarded_session
from cronos.settings import Settings
from cronos.store.epoch import EpochStore
from cronos.store.health import HealthStore
from cronos.store.notify import Outbox
from dispatcher.health import Evaluator
from dispatcher.notifier import Notifier
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.ledger_helpers import Harness, run_state
from tests.integration.test_executor_pipeline import RELEASE, gate, running
from tests.integration.test_health import run as ran_before
from tests.notify_receivers import http_receiver, smtp_server
from tests.waiting import wait_for


@pytest.fixture
def fast(settings: Settings) -> Settings:
    return msgspec.structs.replace(
        settings, notify_retry_base_s=0.01, notify_retry_cap_s=0.02, notify_max_attempts=3, notify_timeout_s=2.0
    )


@pytest.fixture
async def api(fast: Settings) -> AsyncIterator[Api]:
    async with running_api(fast) as client:
        yield client


@pytest.fixture
async def epoch(pg_pool: asyncpg.Pool) -> int:
    return (await EpochStore(pg_pool).take("test-leader")).epoch


@pytest.fixture
async def notifier(pg_pool: asyncpg.Pool, fast: Settings, epoch: int) -> AsyncIterator[Notifier]:
    found = Notifier(Outbox(pg_pool), lambda: epoch, fast)
    async with guarded_session(fast.http_allow_nets) as http:
        found.http = http
        yield found


def evaluator(pool: asyncpg.Pool, epoch: int) -> Evaluator:
    return Evaluator(HealthStore(pool), lambda: epoch, interval_s=60)


async def channel(api: Api, **fields: Any) -> dict[str, Any]:
    reply = await api.call("POST", "/api/channels", json=fields)
    assert reply.status == 201, reply.body
    return dict(reply.body)


async def events_of(pool: asyncpg.Pool, job_id: int) -> list[tuple[str, int | None]]:
    rows = await pool.fetch("SELECT kind, run_id FROM job_events WHERE job_id = $1 ORDER BY id", job_id)
    return [(r["kind"], r["run_id"]) for r in rows]


async def test_channels_hear_of_starts_and_ends_of_the_jobs_that_ask_and_no_other(
    api: Api, notifier: Notifier, harness: Harness, settings: Settings, epoch: int
) -> None:
    pool = harness.pool
    watched = (await api.create(name="watched", payload=gate("watched")))["id"]
    quiet = (await api.create(name="quiet", payload={"action": "noop"}))["id"]
    before = await ran_before(pool, watched, "completed", took_s=1, started_after_s=1, tick_ago_s=86400)
    await pool.execute("UPDATE runs SET started_at = started_at - interval '1 day', finished_at = finished_at"
                       " - interval '1 day' WHERE id = $1", before)  # fmt: skip
    judge = evaluator(pool, epoch)
    async with http_receiver() as receiver:
        with smtp_server() as smtp:
            await channel(api, name="hook", kind="webhook", url=receiver.url, jobs=[watched],
                          events=["started", "completed", "ended"])  # fmt: skip
            await channel(api, name="mail", kind="email", jobs=[watched], events=["ended"], smtp={
                "host": smtp.host, "port": smtp.port, "security": "none", "from": "cronos@alerts.example.com",
                "to": ["ops@example.com"]})  # fmt: skip
            await harness.queue(watched)
            await harness.queue(quiet)
            async with Executor(settings) as ex, running(ex):
                await wait_for(lambda: _state_is(pool, watched, "running"), timeout=10, what="the watched run running")
                await judge.once()
                (run,) = [r for r in await harness.runs(watched) if r.state == "running"]
                assert await events_of(pool, watched) == [("started", run.id)]  # while it runs; none of the past run
                RELEASE["watched"].set()
                await wait_for(lambda: _state_is(pool, watched, "completed", run.id), timeout=10, what="its end")
                await wait_for(lambda: _state_is(pool, quiet, "completed"), timeout=10, what="the quiet job's run")
            await judge.once()
            assert sorted(await events_of(pool, watched)) == [
                ("completed", run.id),
                ("ended", run.id),
                ("started", run.id),
            ]
            assert await events_of(pool, quiet) == []  # no channel asks: nothing derived for it
            assert (await judge.once()).events == 0  # each fact once

            assert await notifier.route_once(datetime.now(UTC)) == 3
            await wait_for(lambda: _sent(notifier, lambda: len(receiver.accepted()) == 3 and smtp.mailbox.messages),
                           timeout=10, what="the notifications sent")  # fmt: skip
            mails = list(smtp.mailbox.messages)
    got = [r.json for r in receiver.accepted()]
    assert sorted(m["type"] for m in got) == ["job.completed", "job.ended", "job.started"]
    assert {m["run"]["id"] for m in got} == {run.id} and {m["run"]["state"] for m in got} == {"completed"}
    ended = next(m for m in got if m["type"] == "job.ended")
    assert ended["event"]["detail"]["state"] == "completed" and ended["event"]["detail"]["duration_s"] >= 0
    (mail,) = mails
    assert mail["Subject"] == "[Cronos] watched ended"
    assert abs(parsedate_to_datetime(mail["Date"]) - datetime.now(UTC)) < timedelta(minutes=5)
    assert re.fullmatch(r"<cronos\.notification\.\d+\.[0-9a-f]{20}@alerts\.example\.com>", mail["Message-ID"])


async def test_run_events_are_rate_limited_like_the_others(
    api: Api, notifier: Notifier, harness: Harness, settings: Settings, epoch: int
) -> None:
    pool = harness.pool
    job = (await api.create(name="chatty", payload={"action": "noop"}, concurrency_policy="allow"))["id"]
    limited = await channel(api, name="limited", kind="webhook", url="https://hooks.example.com/x", jobs=[job],
                            events=["completed"], rate_limit_s=3600)  # fmt: skip
    for n in range(2):
        await harness.queue(job, n)
    async with Executor(settings) as ex:
        assert await ex.run_once() == {"completed": 2}
    await evaluator(pool, epoch).once()
    assert [kind for kind, _ in await events_of(pool, job)] == ["completed", "completed"]
    assert await notifier.route_once(datetime.now(UTC)) == 2
    rows = await pool.fetch("SELECT state, reason FROM notification_deliveries WHERE channel_id = $1 ORDER BY id",
                            limited["id"])  # fmt: skip
    assert [r["state"] for r in rows] == ["pending", "suppressed"]
    assert rows[1]["reason"].startswith("rate limited")


async def _state_is(pool: asyncpg.Pool, job_id: int, state: str, run_id: int | None = None) -> bool:
    if run_id is not None:
        return await run_state(pool, run_id) == state
    return bool(await pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1 AND state = $2", job_id, state))


async def _sent(notifier: Notifier, done: Any) -> bool:
    await notifier.send_once()
    await asyncio.sleep(0)
    return bool(done())
