"""Stored jobs whose schedule the parser now refuses (issue 12): they keep their old meaning.

Rows are written straight into the jobs table, as a database migrated from an older
Cronos holds them: the leader dispatches them on the legacy meaning, the API flags them
in `schedule_notice`, and an edit must bring the expression up to date.
"""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from cronos.settings import Settings
from tests.integration.api_client import running_api
from tests.integration.test_dispatcher_ticks import T0, Stack, add_job, stack  # noqa: F401 (fixture)

OLD = "50-10/7 * * * *"  # the legacy meaning fires at :50, :57 and :05 (cron's is :04)


async def test_the_leader_runs_a_refused_stored_schedule_on_its_old_meaning(stack: Stack) -> None:  # noqa: F811
    legacy = await add_job(stack.pool, OLD)
    never = await add_job(stack.pool, "not a cron at all")
    current = await add_job(stack.pool, "4 * * * *")
    await stack.new_ticker().run_once(T0 + timedelta(minutes=6))
    assert [r["scheduled_for"] for r in await stack.runs(legacy)] == [T0 + timedelta(minutes=5)]
    assert [r["scheduled_for"] for r in await stack.runs(current)] == [T0 + timedelta(minutes=4)]
    assert await stack.runs(never) == []  # refused by both meanings: logged, never dispatched


async def test_the_api_flags_a_refused_stored_schedule_until_it_is_edited(
    settings: Settings,
    pg_pool: asyncpg.Pool,
) -> None:
    legacy = await add_job(pg_pool, OLD)
    zone = await add_job(pg_pool, "0 9 * * *")
    await pg_pool.execute("UPDATE jobs SET timezone = 'right/UTC' WHERE id = $1", zone)  # on hosts with it only
    async with running_api(settings) as api:
        shown = (await api.call("GET", f"/api/jobs/{legacy}")).body
        assert shown["next_run_at"] is not None
        assert "write 50-59/7,4-10/7" in shown["schedule_notice"]
        assert "keeps its previous meaning until its schedule is edited" in shown["schedule_notice"]
        listed = {j["id"]: j for j in (await api.call("GET", "/api/jobs")).body["items"]}
        assert "$.timezone" in listed[zone]["schedule_notice"]
        # The console's overview reads the stored row on its old meaning too (not a 4xx for the page).
        overview = await api.call("GET", "/api/jobs/overview")
        assert overview.status == 200, overview.body
        rows = {j["id"]: j for j in overview.body["items"]}
        assert rows[legacy]["next_run_at"] is not None
        assert listed[zone]["next_run_at"] is not None

        # Any edit validates the whole job, so it needs the schedule brought up to date.
        renamed = await api.call("PATCH", f"/api/jobs/{legacy}", json={"name": "renamed"})
        assert renamed.status == 422 and renamed.body["field"] == "$.cron_expression"
        edit = {"cron_expression": "50-59/7,4-10/7 * * * *", "payload": {"action": "reindex"}}
        fixed = await api.call("PATCH", f"/api/jobs/{legacy}", json=edit)
        assert fixed.status == 200, fixed.body
        assert fixed.body["schedule_notice"] is None

        created = await api.create(name="fresh")
        assert created["schedule_notice"] is None
        refused = await api.call("POST", "/api/jobs", json={"name": "x", "cron_expression": OLD, "payload": {}})
        assert refused.status == 422 and refused.body["field"] == "$.cron_expression"
