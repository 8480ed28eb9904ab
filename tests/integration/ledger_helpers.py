"""Write jobs and queued runs straight into the ledger and push their tokens, as the
leader would, so executor tests do not depend on the dispatcher."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from cronos import lifecycle
from cronos.messages import RunToken
from cronos.models import Run
from cronos.store.db import to_struct
from cronos.store.ledger import Ledger
from cronos.store.queries import notifications as notifications_q
from cronos.stream import RunStream
from dispatcher.publisher import token_of

_names = itertools.count(1)
BASE = datetime(2030, 1, 1, tzinfo=UTC)


async def insert_job(
    pool: asyncpg.Pool,
    *,
    kind: str = "task",
    payload: dict[str, Any] | None = None,
    timeout_s: float = 30,
    max_retries: int = 0,
    retry_backoff_s: float = 0,
    concurrency_policy: str = "forbid",
    misfire_grace_s: float = 3600,
) -> int:
    return int(
        await pool.fetchval(
            "INSERT INTO jobs (name, cron_expression, kind, payload, timeout_s, max_retries, retry_backoff_s,"
            " concurrency_policy, misfire_grace_s) VALUES ($1, '* * * * *', $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            f"job-{next(_names)}",
            kind,
            payload or {"action": "noop"},
            timeout_s,
            max_retries,
            retry_backoff_s,
            concurrency_policy,
            misfire_grace_s,
        )
    )


def tick(n: int) -> datetime:
    return BASE + timedelta(minutes=n)


async def insert_run(
    pool: asyncpg.Pool,
    job_id: int,
    scheduled_for: datetime,
    *,
    attempt: int = 1,
    due_at: datetime | None = None,
    trigger: str = "schedule",
) -> RunToken:
    grace = lifecycle.grace(await pool.fetchval("SELECT misfire_grace_s FROM jobs WHERE id = $1", job_id))
    row = await pool.fetchrow(  # stamped with its expiry as every insert of the store does (lifecycle.expiry)
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, exclusive, expires_at)"
        " SELECT $1, $2, $3, $4, 'queued', coalesce($5, now()), concurrency_policy <> 'allow', coalesce($5, now()) + $6"
        " FROM jobs WHERE id = $1 RETURNING id",
        job_id,
        scheduled_for,
        attempt,
        trigger,
        due_at,
        grace,
    )
    return token_for(row["id"], job_id, scheduled_for, attempt, trigger)


def token_for(
    run_id: int, job_id: int, scheduled_for: datetime, attempt: int = 1, trigger: Any = "schedule"
) -> RunToken:
    return RunToken(
        run_id=run_id,
        job_id=job_id,
        scheduled_for_ms=int(scheduled_for.timestamp() * 1000),
        attempt=attempt,
        trigger=trigger,
    )


async def push_due_retries(pool: asyncpg.Pool, stream: RunStream) -> list[RunToken]:
    """What the leader does for retries: push a token for each queued retry that is due."""
    rows = await pool.fetch(
        "SELECT id, job_id, scheduled_for, attempt FROM runs WHERE state = 'queued' AND trigger = 'retry'"
        " AND due_at <= now() ORDER BY id"
    )
    tokens = [token_for(r["id"], r["job_id"], r["scheduled_for"], r["attempt"], "retry") for r in rows]
    await stream.publish(tokens)
    return tokens


async def runs_of(pool: asyncpg.Pool, job_id: int) -> list[Run]:
    rows = await pool.fetch("SELECT * FROM runs WHERE job_id = $1 ORDER BY attempt, scheduled_for, id", job_id)
    return [to_struct({k: v for k, v in r.items() if k != "exclusive"}, Run) for r in rows]


async def run_state(pool: asyncpg.Pool, run_id: int) -> str:
    return str(await pool.fetchval("SELECT state FROM runs WHERE id = $1", run_id))


async def set_epoch(pool: asyncpg.Pool, epoch: int) -> None:
    await pool.execute("UPDATE leader_epoch SET epoch = $1, holder = 'test' WHERE id = 1", epoch)


class Harness:
    """A test's view of one executor's world: the ledger, the stream and its tokens."""

    def __init__(self, pool: asyncpg.Pool, stream: RunStream) -> None:
        self.pool = pool
        self.stream = stream

    async def job(self, **kwargs: Any) -> int:
        return await insert_job(self.pool, **kwargs)

    async def queue(self, job_id: int, n: int = 0, **kwargs: Any) -> RunToken:
        """A queued run for tick `n` of the job, with its token on the stream."""
        token = await insert_run(self.pool, job_id, tick(n), **kwargs)
        await self.stream.publish([token])
        return token

    async def runs(self, job_id: int) -> list[Run]:
        return await runs_of(self.pool, job_id)

    @contextlib.asynccontextmanager
    async def outbox(self, epoch: int = 1) -> AsyncIterator[None]:
        """The leader's outbox, standing in for a dispatcher: the runs a finish queues (a retry, a
        chain run, a waiting run woken) are pushed when its NOTIFY arrives, as the leader pushes them."""
        await set_epoch(self.pool, epoch)
        ledger, notified = Ledger(self.pool), asyncio.Event()
        listener = await self.pool.acquire()

        def wake(*_: object) -> None:
            notified.set()

        await listener.add_listener(notifications_q.JOBS_CHANNEL, wake)

        async def pump() -> None:
            while True:
                notified.clear()
                now = datetime.now(UTC)
                runs, _ = await ledger.take(epoch, now, now + timedelta(milliseconds=250))
                # Without due_ms (claimed when read): the tests' ticks lie in 2030, and an executor never
                # claims a token carrying a due time before its tick.
                await self.stream.publish([token_of(r, epoch, due_ms=None) for r in runs])
                due = await ledger.next_due()  # a retry's backoff ends without a NOTIFY
                wait_s = 1.0 if due is None else (due - datetime.now(UTC)).total_seconds() - 0.25
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(notified.wait(), min(1.0, max(0.01, wait_s)))

        task = asyncio.create_task(pump())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await listener.remove_listener(notifications_q.JOBS_CHANNEL, wake)
            await self.pool.release(listener)

    async def state(self, run_id: int) -> str:
        return await run_state(self.pool, run_id)
