"""Run listing (newest first, state filter, pagination) and single runs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from api.bodies import encode_cursor
from cronos.settings import Settings
from tests.integration.api_client import Api, running_api


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _insert_runs(pool: asyncpg.Pool, job_id: int, states: list[str]) -> list[int]:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    ids = []
    for i, state in enumerate(states):
        at = base + timedelta(minutes=i)
        run_id = await pool.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, skip_reason, error,"
            " traceback, result, node_id) VALUES ($1, $2, 1, 'schedule', $3, $2, $4, $5, $6, $7, 'n1') RETURNING id",
            job_id,
            at,
            state,
            "misfired" if state == "skipped" else None,
            "boom" if state == "failed" else None,
            "Traceback: boom" if state == "failed" else None,
            "ok" if state == "completed" else None,
        )
        ids.append(run_id)
    return ids


async def test_runs_newest_first_filtered_and_paginated(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create()
    states = ["completed", "failed", "skipped", "completed", "completed", "queued"]
    ids = await _insert_runs(pg_pool, job["id"], states)
    other = await api.create(name="other")
    await _insert_runs(pg_pool, other["id"], ["completed"])

    everything = await api.call("GET", f"/api/jobs/{job['id']}/runs")
    assert everything.status == 200
    assert [r["id"] for r in everything.body["items"]] == ids[::-1]
    assert everything.body["next_cursor"] is None
    first = everything.body["items"][-1]
    assert (first["state"], first["attempt"], first["trigger"], first["node_id"]) == ("completed", 1, "schedule", "n1")
    assert "traceback" not in first and "result" not in first  # only on the single run
    assert "lease_until" not in first  # the executor's, not the client's

    assert await api.walk(f"/api/jobs/{job['id']}/runs?state=completed", limit=2) == [ids[4], ids[3], ids[0]]

    skipped = await api.call("GET", f"/api/jobs/{job['id']}/runs?state=skipped")
    assert [r["skip_reason"] for r in skipped.body["items"]] == ["misfired"]
    bad = await api.call("GET", f"/api/jobs/{job['id']}/runs?state=done")
    assert bad.status == 422 and bad.body["field"] == "state"
    empty = await api.create(name="never ran")
    none = await api.call("GET", f"/api/jobs/{empty['id']}/runs")
    assert none.status == 200 and none.body == {"items": [], "next_cursor": None}


async def test_runs_newest_tick_first_across_days(api: Api, pg_pool: asyncpg.Pool) -> None:
    """Ticks in day partitions, ids not in tick order (a run written late for an older tick, a
    retry): pages follow (scheduled_for, id) newest first, a cursor carrying both, none lost or
    repeated; an "id:" cursor from before still continues the walk."""
    job = await api.create()
    ticks = [datetime(2026, 1, day, 12, tzinfo=UTC) for day in (3, 1, 2, 5, 4)]
    ids = {}
    for n, at in enumerate(ticks):
        for attempt in (1, 2) if n == 2 else (1,):
            ids[(at, attempt)] = await pg_pool.fetchval(
                "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at)"
                " VALUES ($1, $2, $3, 'schedule', 'completed', $2) RETURNING id",
                job["id"], at, attempt,
            )  # fmt: skip
    expected = [ids[key] for key in sorted(ids, reverse=True)]
    assert expected != sorted(expected, reverse=True)  # the id order would be another one
    for limit in (1, 2, 5):
        assert await api.walk(f"/api/jobs/{job['id']}/runs", limit=limit) == expected
    page = await api.call("GET", f"/api/jobs/{job['id']}/runs?limit=2")
    assert [r["id"] for r in page.body["items"]] == expected[:2]
    legacy = encode_cursor(expected[1])
    rest = await api.call("GET", f"/api/jobs/{job['id']}/runs?limit=50&cursor={legacy}")
    assert rest.status == 200 and [r["id"] for r in rest.body["items"]] == expected[2:]
    gone = await api.call("GET", f"/api/jobs/{job['id']}/runs?cursor={encode_cursor(max(expected) + 1000)}")
    assert gone.status == 200 and gone.body == {"items": [], "next_cursor": None}
    bad = await api.call("GET", f"/api/jobs/{job['id']}/runs?cursor=dHgx")  # "tx1": too short
    assert bad.status == 422 and bad.body["field"] == "cursor"


async def test_runs_pages_span_the_store_windows(api: Api, pg_pool: asyncpg.Pool) -> None:
    """The store looks a day back, then a week, then everything older: pages that end inside
    one window or span several list every run once, newest tick first."""
    job = await api.create()
    now = datetime.now(UTC)
    hours = [-0.001, 1, 23, 25, 72, 191, 193, 960, 9600]  # ahead, then across a day, a week, older
    ago = [timedelta(hours=h) for h in hours]
    ids = [
        await pg_pool.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at)"
            " VALUES ($1, $2, 1, 'schedule', 'completed', $2) RETURNING id",
            job["id"],
            now - back,
        )
        for back in reversed(ago)  # oldest first: here the id order is the tick order
    ][::-1]
    for limit in (1, 2, 3, 4, 50):
        assert await api.walk(f"/api/jobs/{job['id']}/runs", limit=limit) == ids, limit
    assert await api.walk(f"/api/jobs/{job['id']}/runs?state=failed", limit=2) == []


async def test_get_one_run_with_details(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await api.create()
    failed, done = await _insert_runs(pg_pool, job["id"], ["failed", "completed"])
    reply = await api.call("GET", f"/api/runs/{failed}")
    assert reply.status == 200
    assert reply.body["state"] == "failed" and reply.body["error"] == "boom"
    assert reply.body["traceback"] == "Traceback: boom" and reply.body["result"] is None
    assert "lease_until" not in reply.body
    assert reply.body["scheduled_for"] == "2026-01-01T00:00:00Z"
    assert (await api.call("GET", f"/api/runs/{done}")).body["result"] == "ok"
    assert (await api.call("GET", f"/api/runs/{done + 100}")).status == 404
