"""GET /api/jobs/{id}/ticks against a real dispatcher, executor, PostgreSQL and Redis: an every-second
job created, paused, resumed, given a new expression and carried across a leader failover has every
tick of the window accounted for (a run, a ledger reason, or why none was due); a run row removed
behind Cronos's back shows as `unaccounted`; a deleted job's ticks say so. And the window's bounds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import asyncpg
import msgspec
import pytest

from api.routes_ticks import MAX_REVISIONS, MAX_TICKS
from cronos.models import SKIP_JOB_INACTIVE, SKIP_SCHEDULE_CHANGED
from cronos.settings import Settings
from cronos.ticks import BEFORE_CREATED, DELETED, PAUSED, RUNS_DELETED, UNACCOUNTED
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.roles import running_role
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

SECOND = timedelta(seconds=1)


def _iso(instant: datetime) -> str:
    return quote(instant.isoformat())


async def _ticks(api: Api, job_id: int, start: datetime, until: datetime, limit: int = 500) -> list[dict[str, Any]]:
    """Every page of the window, following `next_cursor`."""
    items: list[dict[str, Any]] = []
    cursor = ""
    while True:
        path = f"/api/jobs/{job_id}/ticks?from={_iso(start)}&to={_iso(until)}&limit={limit}{cursor}"
        page = await api.call("GET", path)
        assert page.status == 200, page.body
        assert len(page.body["items"]) <= limit
        items += page.body["items"]
        if page.body["next_cursor"] is None:
            return items
        cursor = f"&cursor={page.body['next_cursor']}"


async def _at(api: Api, job_id: int) -> datetime:
    """The instant of the job's newest revision (the change just made)."""
    reply = await api.call("GET", f"/api/jobs/{job_id}/revisions?limit=1")
    return datetime.fromisoformat(reply.body["items"][0]["at"])


async def _past(instant: datetime) -> bool:
    return datetime.now(UTC) > instant


async def _ran_after(api: Api, job_id: int, instant: datetime, count: int) -> None:
    async def enough() -> bool:
        reply = await api.call("GET", f"/api/jobs/{job_id}/runs?state=completed&limit=200")
        return sum(datetime.fromisoformat(r["scheduled_for"]) > instant for r in reply.body["items"]) >= count

    await wait_for(enough, timeout=40, interval=0.1, what=f"{count} completed runs after {instant}")


def _at_tick(ticks: list[dict[str, Any]]) -> dict[datetime, dict[str, Any]]:
    return {datetime.fromisoformat(t["scheduled_for"]): t for t in ticks}


async def test_every_tick_is_accounted_for_across_a_pause_a_new_expression_and_a_failover(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    other = msgspec.structs.replace(settings, node_id=settings.node_id + "-b")
    async with running_api(settings) as api, running_role(Executor(settings)):
        async with running_role(Dispatcher(settings)):
            job = await api.create(name="ticks", cron_expression="* * * * * *", payload={"action": "noop"})
            jid = job["id"]
            created = datetime.fromisoformat(job["created_at"])
            await _ran_after(api, jid, created, 2)
            assert (await api.call("POST", f"/api/jobs/{jid}/pause")).status == 200
            paused = await _at(api, jid)
            await wait_for(lambda: _past(paused + 2.5 * SECOND), timeout=10, what="paused for 2.5 s")
            assert (await api.call("POST", f"/api/jobs/{jid}/resume")).status == 200
            resumed = await _at(api, jid)
            await _ran_after(api, jid, resumed, 2)
            reply = await api.call("PATCH", f"/api/jobs/{jid}", json={"cron_expression": "*/2 * * * * *"})
            assert reply.status == 200, reply.body
            changed = await _at(api, jid)
            await _ran_after(api, jid, changed, 1)
            leader_gone = datetime.now(UTC)
        # No leader for 2.5 s, then another node takes over and catches up from the cursors.
        await wait_for(lambda: _past(leader_gone + 2.5 * SECOND), timeout=10, what="2.5 s without a leader")
        async with running_role(Dispatcher(other)):
            took_over = datetime.now(UTC)
            await _ran_after(api, jid, took_over, 2)
            end = datetime.now(UTC) - SECOND
            start = created - 3 * SECOND

            async def settled() -> list[dict[str, Any]] | None:
                ticks = await _ticks(api, jid, start, end)
                return None if any(t["outcome"] == "pending" or t["reason"] == UNACCOUNTED for t in ticks) else ticks

            try:
                ticks = await wait_for(settled, timeout=30, interval=0.2, what="every tick of the window settled")
            except AssertionError:
                left = [t for t in await _ticks(api, jid, start, end) if t["outcome"] == "pending" or t["reason"]]
                raise AssertionError(left) from None

    by_tick = _at_tick(ticks)
    assert list(by_tick) == sorted(by_tick), "oldest first"
    for t, tick in by_tick.items():
        if t <= created:
            assert (tick["outcome"], tick["reason"], tick["runs"]) == ("none", BEFORE_CREATED, []), tick
        elif paused < t <= resumed:
            assert tick["revision"] == 2
            assert (tick["outcome"], tick["reason"]) in {("none", PAUSED), ("skipped", SKIP_JOB_INACTIVE)}, tick
        elif t > changed and t.second % 2:  # the old schedule's tick written ahead, handed over
            assert (tick["outcome"], tick["reason"]) == ("skipped", SKIP_SCHEDULE_CHANGED), tick
        else:
            assert tick["outcome"] == "ran", tick
            assert tick["cron_expression"] == ("*/2 * * * * *" if t > changed else "* * * * * *")
            first = tick["runs"][0]
            assert first["attempt"] == 1 and first["state"] == "completed" and first["start_delay_s"] >= 0, tick
    whole = {t for t in by_tick if t > created and not paused < t <= resumed and (t <= changed or t.second % 2 == 0)}
    expected = {created.replace(microsecond=0) + n * SECOND for n in range(1, int((end - created).total_seconds()) + 1)}
    assert {t for t in expected if t <= changed or t.second % 2 == 0} - set(by_tick) == set(), "no tick missing"
    assert whole, "the window has ticks that ran"
    gap = [tick for t, tick in by_tick.items() if leader_gone + SECOND < t < took_over and tick["outcome"] == "ran"]
    assert gap, "the ticks due without a leader were caught up by the next one"
    assert max(tick["runs"][0]["start_delay_s"] for tick in gap) > 0.5, "caught up late, and the delay says so"


async def test_pages_follow_the_cursor_a_removed_run_is_unaccounted_and_a_deleted_jobs_ticks_say_so(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(settings) as api:
        # A job and a ledger written as the leader would, for a window in the past.
        job = await api.create(name="past", cron_expression="* * * * * *", payload={"action": "noop"})
        jid = job["id"]
        created = datetime.fromisoformat(job["created_at"])
        base = created.replace(microsecond=0)
        ticks_written = [base + n * SECOND for n in range(1, 11)]
        await pg_pool.execute("UPDATE jobs SET last_scheduled_for = $2 WHERE id = $1", jid, ticks_written[-1])
        for t in ticks_written:
            await pg_pool.execute(
                "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, started_at, finished_at,"
                " revision) VALUES ($1, $2, 1, 'schedule', 'completed', $2, $3, $3, 1)",
                jid, t, t + timedelta(milliseconds=40),
            )  # fmt: skip
        await wait_for(lambda: _past(ticks_written[-1]), timeout=15, what="the ten ticks due")
        start, end = base - 2 * SECOND, ticks_written[-1]

        whole = await _ticks(api, jid, start, end)
        assert [t["outcome"] for t in whole] == ["none"] * 3 + ["ran"] * 10, "base itself is not after the creation"
        assert {t["runs"][0]["start_delay_s"] for t in whole[3:]} == {0.04}
        assert await _ticks(api, jid, start, end, limit=3) == whole, "pages of 3 add up to the window"

        removed = ticks_written[4]
        await pg_pool.execute("DELETE FROM runs WHERE job_id = $1 AND scheduled_for = $2", jid, removed)
        after = _at_tick(await _ticks(api, jid, start, end))
        assert (after[removed]["outcome"], after[removed]["reason"], after[removed]["runs"]) == (
            "none", UNACCOUNTED, [],
        )  # fmt: skip

        assert (await api.call("DELETE", f"/api/jobs/{jid}")).status == 204
        deleted = await _at(api, jid)
        later = deleted + 3 * SECOND
        await wait_for(lambda: _past(later), timeout=10, what="three seconds after the delete")
        gone = _at_tick(await _ticks(api, jid, start, later))
        assert {t["reason"] for at, t in gone.items() if created < at <= deleted} == {RUNS_DELETED}
        assert {t["reason"] for at, t in gone.items() if at > deleted} == {DELETED}
        assert {t["reason"] for at, t in gone.items() if at <= created} == {BEFORE_CREATED}


async def test_the_window_is_bounded_and_bad_parameters_are_named(settings: Settings) -> None:
    async with running_api(settings) as api:
        job = await api.create(name="bounds", cron_expression="* * * * * *", payload={"action": "noop"})
        base = f"/api/jobs/{job['id']}/ticks"
        now = datetime.now(UTC)
        cases = {
            f"?from={_iso(now - timedelta(days=8))}": "to",
            f"?from={_iso(now - timedelta(days=1))}": "to",  # 86,400 ticks of an every-second job
            f"?from={_iso(now + SECOND)}&to={_iso(now)}": "from",
            "?from=tomorrow": "from",
            "?to=later": "to",
            "?limit=0": "limit",
            "?cursor=nope": "cursor",
        }
        for query, name in cases.items():
            reply = await api.call("GET", base + query)
            assert reply.status == 422, (query, reply.body)
            assert name in str(reply.body), (query, reply.body)
        longest = now - (MAX_TICKS - 5) * SECOND
        assert (await api.call("GET", f"{base}?from={_iso(longest)}&to={_iso(now)}&limit=1")).status == 200
        assert (await api.call("GET", "/api/jobs/987654/ticks")).status == 404
        openapi = await api.call("GET", "/openapi.json")
        assert "/api/jobs/{id}/ticks" in openapi.body["paths"], list(openapi.body["paths"])


async def test_a_window_with_too_many_changes_of_the_job_is_refused(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    """Only the revisions within the window are read, at most MAX_REVISIONS of them: past that the
    window must be narrowed (issue 22); a window before the burst of changes is answered."""
    async with running_api(settings) as api:
        job = await api.create(name="churn", cron_expression="0 * * * *", payload={"action": "noop"})
        await pg_pool.execute(
            "INSERT INTO job_revisions (job_id, number, kind, at, actor, status, fields, changes)"
            " SELECT $1, g, 'updated', now() - interval '10 min' + g * interval '1 ms', 'test', 'active',"
            " ARRAY['payload'], '{\"payload\": {}}' FROM generate_series(2, $2 + 2) g",
            job["id"],
            MAX_REVISIONS,
        )
        reply = await api.call("GET", f"/api/jobs/{job['id']}/ticks")
        assert reply.status == 422 and "narrow" in str(reply.body) and "to" in str(reply.body), reply.body
        now = datetime.now(UTC)
        earlier = f"?from={_iso(now - timedelta(days=2))}&to={_iso(now - timedelta(days=1))}"
        reply = await api.call("GET", f"/api/jobs/{job['id']}/ticks{earlier}")
        assert reply.status == 200, reply.body
        assert {t["reason"] for t in reply.body["items"]} == {BEFORE_CREATED}
