"""GET /api/jobs/overview: the console's jobs page (words, next fire, last run, success rate, search)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from cronos.settings import Settings
from tests.integration.api_client import Api, running_api


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _runs(
    pool: asyncpg.Pool, job_id: int, states: list[str], delay_ms: float = 0, held_back_ms: float = 0
) -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for i, state in enumerate(states):
        at = base + timedelta(minutes=i)
        started = None if state in ("queued", "skipped") else at + timedelta(milliseconds=delay_ms)
        await pool.execute(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, started_at, duration_ms,"
            " skip_reason) VALUES ($1, $2, 1, 'schedule', $3, $7, $4, $5, $6)",
            job_id, at, state, started, None if started is None else 12.5, "expired" if state == "skipped" else None,
            at + timedelta(milliseconds=held_back_ms),
        )  # fmt: skip


async def test_each_job_with_words_next_fire_last_run_and_success_rate(api: Api, pg_pool: asyncpg.Pool) -> None:
    busy = await api.create(name="busy", cron_expression="*/5 * * * *", timezone="Europe/Paris")
    idle = await api.create(name="idle", cron_expression="30 2 * * 1")
    await api.call("POST", f"/api/jobs/{idle['id']}/pause")
    # 25 finished runs: the rate is over the newest 20 (15 completed, 5 failed); then one skipped
    # and one queued, which are not the "last run" (the last that started or ended is the skip).
    await _runs(pg_pool, busy["id"], ["failed"] * 5 + ["completed"] * 15 + ["failed"] * 5 + ["skipped", "queued"])
    reply = await api.call("GET", "/api/jobs/overview")
    assert reply.status == 200, reply.body
    first, second = reply.body["items"]
    assert first["name"] == "busy" and first["description"] == "every 5 minutes" and first["timezone"] == "Europe/Paris"
    assert first["next_run_at"] is not None and first["status"] == "active"
    assert first["success_rate"] == 0.75 and first["finished"] == 20
    assert first["last_run"]["state"] == "skipped" and first["last_run"]["start_delay_ms"] is None
    assert first["last_run"]["waited_ms"] is None and first["last_run"]["held_back_ms"] == 0.0
    assert "payload" not in first
    assert second["name"] == "idle" and second["next_run_at"] is None and second["last_run"] is None
    assert second["success_rate"] is None and second["description"] == "at 02:30 on Monday"


async def test_the_start_delay_is_from_the_tick_with_its_parts_beside_it(api: Api, pg_pool: asyncpg.Pool) -> None:
    # A catch-up run held back 1.2 s past its tick, started 0.3 s after that: the console's jobs
    # page shows 1.5 s as the CLI does (it showed 0.3 s, from due_at), the parts beside it.
    job = await api.create(name="late", cron_expression="* * * * *")
    await _runs(pg_pool, job["id"], ["completed"], delay_ms=1500, held_back_ms=1200)
    item = (await api.call("GET", "/api/jobs/overview")).body["items"][0]
    assert item["last_run"]["start_delay_ms"] == 1500.0 and item["last_run"]["duration_ms"] == 12.5
    assert item["last_run"]["held_back_ms"] == 1200.0 and item["last_run"]["waited_ms"] == 300.0
    assert item["success_rate"] == 1.0


async def test_the_rate_reads_only_a_jobs_newest_runs(api: Api, pg_pool: asyncpg.Pool) -> None:
    # Finished runs older than the newest 200 (RECENT) are not read: a job's read is bounded.
    job = await api.create(name="backlog", cron_expression="* * * * *")
    await _runs(pg_pool, job["id"], ["completed"] * 5 + ["skipped"] * 200)
    item = (await api.call("GET", "/api/jobs/overview")).body["items"][0]
    assert item["success_rate"] is None and item["finished"] == 0
    assert item["last_run"]["state"] == "skipped"


async def test_search_by_name_status_filter_and_pages(api: Api) -> None:
    for name in ("backup db", "backup files", "report", "50%_off"):
        await api.create(name=name)
    paused = await api.create(name="backup paused")
    await api.call("POST", f"/api/jobs/{paused['id']}/pause")

    async def names(query: str) -> list[str]:
        reply = await api.call("GET", "/api/jobs/overview?" + query)
        assert reply.status == 200, reply.body
        return [item["name"] for item in reply.body["items"]]

    assert await names("q=BACKUP") == ["backup db", "backup files", "backup paused"]
    assert await names("q=backup&status=paused") == ["backup paused"]
    assert await names("q=%25_") == ["50%_off"]  # wildcards are literal text
    assert await names("q=zzz") == []
    assert await names("status=active&q=") == ["backup db", "backup files", "report", "50%_off"]
    ids = await api.walk("/api/jobs/overview?q=backup", limit=2)
    assert len(ids) == 3 and ids == sorted(ids)


async def test_bad_filters_name_their_field(api: Api) -> None:
    for query, field in (
        ("status=gone", "status"),
        ("q=" + "x" * 201, "q"),
        ("limit=0", "limit"),
        ("cursor=@", "cursor"),
    ):
        reply = await api.call("GET", "/api/jobs/overview?" + query)
        assert reply.status == 422 and reply.body["field"] == field, (query, reply.body)


async def test_the_console_is_served_with_a_strict_policy(api: Api) -> None:
    page = await api.call("GET", "/")
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "unsafe" not in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff" and page.headers["X-Frame-Options"] == "DENY"
    script = await api.call("GET", "/ui/app.js")
    assert script.status == 200 and script.headers["Content-Type"].startswith("text/javascript")
    assert "export" in script.body or "import" in script.body
    assert (await api.call("GET", "/ui/pages/job.js")).status == 200
    for missing in ("/ui/nope.js", "/ui/../routes_ui.py", "/ui/%2e%2e/routes_ui.py", "/ui/pages/../../app.py"):
        reply = await api.call("GET", missing)
        assert reply.status == 404, (missing, reply.status)


async def test_the_page_is_open_while_the_api_keeps_its_auth(api: Api) -> None:
    created = await api.call("POST", "/api/tokens", json={"name": "console", "scopes": ["read"]})
    assert created.status == 201, created.body
    # A token exists: protected mode is over, so an API call without one is a 401 ...
    assert (await api.call("GET", "/api/jobs/overview")).status == 401
    assert (await api.call("GET", "/api/schedule/preview?cron_expression=*+*+*+*+*")).status == 401
    # ... but the page and its scripts hold no data and load for anyone, so the page can ask for one.
    assert (await api.call("GET", "/")).status == 200
    assert (await api.call("GET", "/ui/api.js")).status == 200
    token = created.body["token"]
    assert (await api.call("GET", "/api/jobs/overview", token=token)).status == 200
