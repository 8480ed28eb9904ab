"""GET /api/runs (every job's runs, filtered, paged) and POST /api/runs/{id}/retry, against a real
API and PostgreSQL with a ledger of a few thousand runs over several days, jobs and queues."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from cronos.settings import Settings
from cronos.store.run_views import SCAN
from cronos.store.tokens import TokenStore
from cronos.tasks import idempotency_key
from tests.integration.api_client import Api, running_api

DAY0 = datetime(2026, 1, 1, tzinfo=UTC)
RUNS = 3 * SCAN // 2  # more than one scan's worth


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


@pytest.fixture
async def ledger(api: Api, pg_pool: asyncpg.Pool) -> dict[str, int]:
    """Three jobs (two in queue `default`, one in `gpu`) and RUNS runs over five days: mostly completed,
    every 50th failed, every 70th skipped; every 400th manual. Ids do not follow the ticks."""
    jobs = {
        "a": (await api.create(name="a"))["id"],
        "b": (await api.create(name="b"))["id"],
        "gpu": (await api.create(name="gpu", queue="gpu"))["id"],
    }
    await pg_pool.execute(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, finished_at, error, skip_reason)"
        " SELECT (ARRAY[$1, $2, $3]::bigint[])[g % 3 + 1], $4::timestamptz + (g * 7919 % $5) * interval '4 min', 1,"
        " CASE WHEN g % 400 = 0 THEN 'manual' ELSE 'schedule' END,"
        " CASE WHEN g % 50 = 0 THEN 'failed' WHEN g % 70 = 0 THEN 'skipped' ELSE 'completed' END,"
        " $4::timestamptz, now(), CASE WHEN g % 50 = 0 THEN 'boom' END,"
        " CASE WHEN g % 50 <> 0 AND g % 70 = 0 THEN 'misfired' END"
        " FROM generate_series(1, $5) g ORDER BY g",
        jobs["a"],
        jobs["b"],
        jobs["gpu"],
        DAY0,
        RUNS,
    )
    return jobs


async def _expected(pool: asyncpg.Pool, where: str, *args: Any) -> list[int]:
    sql = f"SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id WHERE {where} ORDER BY r.id DESC"
    return [r["id"] for r in await pool.fetch(sql, *args)]


async def test_every_filter_walks_to_what_the_ledger_holds(
    api: Api, pg_pool: asyncpg.Pool, ledger: dict[str, int]
) -> None:
    since, until = DAY0 + timedelta(days=1, hours=6), DAY0 + timedelta(days=3, hours=1)
    window = f"from={since.isoformat().replace('+00:00', 'Z')}&to={until.isoformat().replace('+00:00', 'Z')}"
    cases = {
        "": ("true",),
        "state=failed": ("r.state = 'failed'",),
        "state=failed&state=skipped": ("r.state IN ('failed', 'skipped')",),
        "state=failed,completed": ("r.state IN ('failed', 'completed')",),
        f"job={ledger['a']}": ("r.job_id = $1", ledger["a"]),
        f"job={ledger['b']}&state=failed": ("r.job_id = $1 AND r.state = 'failed'", ledger["b"]),
        "queue=gpu": ("j.queue = 'gpu'",),
        "trigger=manual": ("r.trigger = 'manual'",),
        window: ("r.scheduled_for >= $1 AND r.scheduled_for < $2", since, until),
        f"{window}&state=skipped&queue=default": (
            "r.scheduled_for >= $1 AND r.scheduled_for < $2 AND r.state = 'skipped' AND j.queue = 'default'",
            since,
            until,
        ),
    }
    for query, (where, *args) in cases.items():
        expected = await _expected(pg_pool, where, *args)
        assert expected, query
        walked = await api.walk(f"/api/runs?{query}", limit=500)
        assert walked == expected, (query, len(walked), len(expected))


async def test_a_rare_match_gives_short_pages_with_a_cursor_never_a_whole_ledger_read(
    api: Api, pg_pool: asyncpg.Pool, ledger: dict[str, int]
) -> None:
    page = await api.call("GET", "/api/runs?trigger=manual&limit=10")
    assert page.status == 200
    # the newest SCAN runs hold fewer than 10 manual ones: a short page, and a cursor past the scan
    assert len(page.body["items"]) < 10 and page.body["next_cursor"] is not None
    first = await api.call("GET", "/api/runs?limit=3")
    assert [r["id"] for r in first.body["items"]] == (await _expected(pg_pool, "true"))[:3]
    assert set(first.body["items"][0]) >= {"id", "job_id", "scheduled_for", "attempt", "trigger", "state"}
    assert "traceback" not in first.body["items"][0]
    widest = await api.call("GET", "/api/runs?from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59.999999Z&limit=3")
    assert widest.status == 200 and widest.body["items"] == first.body["items"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("state=done", "state"),
        ("state=failed,nope", "state"),
        ("job=abc", "job"),
        ("job=0", "job"),
        ("job=99999999999999999999", "job"),
        ("queue=no%20spaces", "queue"),
        ("trigger=cron", "trigger"),
        ("from=yesterday", "from"),
        ("to=2026-13-01T00:00:00Z", "to"),
        ("from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "to"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("cursor=!!", "cursor"),
    ],
)
async def test_a_bad_filter_is_a_422_naming_it(api: Api, query: str, field: str) -> None:
    reply = await api.call("GET", f"/api/runs?{query}")
    assert reply.status == 422, reply.body
    assert reply.body["field"] == field and reply.headers["Content-Type"].startswith("application/problem+json")


async def _run(pool: asyncpg.Pool, job_id: int, state: str, *, attempt: int = 1, at: datetime = DAY0) -> int:
    ended = state not in ("queued", "waiting", "running")
    return int(
        await pool.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, finished_at, node_id,"
            " skip_reason) VALUES ($1, $2, $3, 'schedule', $4, $2, CASE WHEN $5 THEN now() END, 'n1',"
            " CASE WHEN $4 = 'skipped' THEN 'misfired' END) RETURNING id",
            job_id,
            at,
            attempt,
            state,
            ended,
        )
    )


async def test_retry_queues_the_next_attempt_of_the_same_tick_once(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create(name="flaky", parents=[])
    failed = await _run(pg_pool, job["id"], "failed")
    reply = await api.call("POST", f"/api/runs/{failed}/retry")
    assert reply.status == 202, reply.body
    again = reply.body
    assert (again["job_id"], again["scheduled_for"], again["attempt"]) == (job["id"], "2026-01-01T00:00:00Z", 2)
    assert (again["state"], again["trigger"]) == ("queued", "retry")
    tick = await pg_pool.fetchval("SELECT scheduled_for FROM runs WHERE id = $1", again["id"])
    assert idempotency_key(job["id"], tick) == f"{job['id']}:2026-01-01T00:00:00+00:00"  # the same key as attempt 1

    # while attempt 2 is unfinished, no retry of the tick: neither of attempt 1 nor of attempt 2
    for run_id, why in ((failed, "has not ended yet"), (again["id"], "only a run that ended")):
        refused = await api.call("POST", f"/api/runs/{run_id}/retry")
        assert refused.status == 409 and why in refused.body["detail"], refused.body
    # attempt 2 fails too: a retry of attempt 1 queues attempt 3 (after the tick's newest)
    await pg_pool.execute("UPDATE runs SET state = 'failed', finished_at = now() WHERE id = $1", again["id"])
    third = await api.call("POST", f"/api/runs/{failed}/retry")
    assert third.status == 202 and third.body["attempt"] == 3 and third.body["scheduled_for"] == again["scheduled_for"]

    history = await api.call("GET", f"/api/jobs/{job['id']}/history")
    retried = [e for e in history.body["items"] if e["action"] == "run_retried"]
    assert [(e["actor"], e["detail"]["run_id"], e["detail"]["retry_run_id"]) for e in retried] == [
        ("local", failed, third.body["id"]),
        ("local", failed, again["id"]),
    ]
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", job["id"]) == 3


async def test_retry_takes_ended_runs_that_did_not_succeed(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create(name="various")
    skipped = await _run(pg_pool, job["id"], "skipped", at=DAY0)
    completed = await _run(pg_pool, job["id"], "completed", at=DAY0 + timedelta(minutes=1))
    queued = await _run(pg_pool, job["id"], "queued", at=DAY0 + timedelta(minutes=2))
    assert (await api.call("POST", f"/api/runs/{skipped}/retry")).status == 202
    done = await api.call("POST", f"/api/runs/{completed}/retry")
    assert done.status == 409 and "trigger job" in done.body["detail"]
    assert (await api.call("POST", f"/api/runs/{queued}/retry")).status == 409
    assert (await api.call("POST", "/api/runs/987654321/retry")).status == 404
    assert (await api.call("POST", "/api/runs/99999999999999999999/retry")).status == 404


async def test_retry_needs_scope_write(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    _info, reader = await TokenStore(pg_pool).create("reader", ["read"], None, actor="cli")
    _info, writer = await TokenStore(pg_pool).create("writer", ["write"], None, actor="cli")
    async with running_api(settings, token=writer) as api:
        job = await api.create(name="guarded")
        failed = await _run(pg_pool, job["id"], "failed")
        listed = await api.call("GET", f"/api/runs?job={job['id']}", token=reader)
        assert listed.status == 200 and [r["id"] for r in listed.body["items"]] == [failed]
        assert (await api.call("POST", f"/api/runs/{failed}/retry", token=reader)).status == 403
        reply = await api.call("POST", f"/api/runs/{failed}/retry")
        assert reply.status == 202
        history = await api.call("GET", f"/api/jobs/{job['id']}/history")
        assert [e["actor"] for e in history.body["items"] if e["action"] == "run_retried"] == ["writer"]


async def test_two_retries_of_one_run_at_once_queue_one_attempt(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create(name="raced")
    failed = await _run(pg_pool, job["id"], "failed")
    replies = await asyncio.gather(*(api.call("POST", f"/api/runs/{failed}/retry") for _ in range(4)))
    assert sorted(r.status for r in replies) == [202, 409, 409, 409], [r.body for r in replies]
    attempts = await pg_pool.fetch("SELECT attempt, state FROM runs WHERE job_id = $1 ORDER BY attempt", job["id"])
    assert [(r["attempt"], r["state"]) for r in attempts] == [(1, "failed"), (2, "queued")]
