"""Several schedules per job (`schedules`) against a real API, dispatcher, executor, PostgreSQL and Redis.

A job firing every 2 s with one more entry every 3 s runs at the union, the instants both share (every
6 s) once; the ticks API explains the union; an edit of the entries is a revision whose diff compares the
unions. Then validation (422 naming the entry's field), the preview of a union and its apply-like echo.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import asyncpg
import pytest

from cronos.settings import Settings
from cronos.ticks import UNACCOUNTED
from dispatcher.auditor import Auditor
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.integration.api_client import running_api
from tests.integration.roles import running_role
from tests.integration.test_api_ticks import _past, _ran_after, _ticks
from tests.integration.test_auditor import add_job
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

SECOND = timedelta(seconds=1)


def _union(t: datetime) -> bool:
    return t.microsecond == 0 and (t.second % 2 == 0 or t.second % 3 == 0)


async def test_a_job_with_two_entries_runs_on_the_union_and_a_shared_instant_once(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(settings) as api, running_role(Executor(settings)), running_role(Dispatcher(settings)):
        job = await api.create(
            name="two-schedules", cron_expression="*/2 * * * * *", schedules=[{"cron": "*/3 * * * * *"}],
            payload={"action": "noop"},
        )  # fmt: skip
        assert job["schedules"] == [{"cron": "*/3 * * * * *"}]
        jid, created = job["id"], datetime.fromisoformat(job["created_at"])
        assert _union(datetime.fromisoformat(job["next_run_at"]))
        await _ran_after(api, jid, created + SECOND, 8)  # at least 12 s: two instants both entries share
        rows = await pg_pool.fetch(
            "SELECT scheduled_for, attempt, trigger, state FROM runs WHERE job_id = $1 AND trigger = 'schedule'", jid
        )
        ticks = sorted(r["scheduled_for"] for r in rows)
        assert all(_union(t) for t in ticks), ticks
        assert len(ticks) == len(set(ticks)), "a tick two entries share runs once"
        expected, t = [], created.replace(microsecond=0) + SECOND  # ticks strictly after the creation
        while t <= ticks[-1]:
            expected += [t] if _union(t) else []
            t += SECOND
        assert ticks == expected, "every instant of the union, none missed"
        assert any(t.second % 6 == 0 for t in ticks), "a shared instant ran, once"

        end = datetime.now(UTC) - 2 * SECOND

        async def settled() -> list[dict[str, Any]] | None:
            found = await _ticks(api, jid, created, end)
            return None if any(t["outcome"] == "pending" or t["reason"] == UNACCOUNTED for t in found) else found

        accounted = await wait_for(settled, timeout=30, what="the union's ticks all accounted for")
        assert accounted and all(_union(datetime.fromisoformat(t["scheduled_for"])) for t in accounted)
        assert {t["outcome"] for t in accounted} <= {"ran", "none"}

        # An edit of the entries is a schedule change: a revision, and the diff of the two unions.
        reply = await api.call("PATCH", f"/api/jobs/{jid}", json={"schedules": [{"every": "5s"}]})
        assert reply.status == 200, reply.body
        assert reply.body["schedules"] == [{"every": "5s"}] and reply.body["revision"] == 2
        revisions = await api.call("GET", f"/api/jobs/{jid}/revisions?limit=1")
        assert revisions.body["items"][0]["changes"] == {"schedules": [{"every": "5s"}]}
        diff = reply.body["schedule_diff"]
        assert diff["previous_schedules"] == [{"cron": "*/3 * * * * *"}]
        added = [datetime.fromisoformat(f["at"]) for f in diff["added"]]
        removed = [datetime.fromisoformat(f["at"]) for f in diff["removed"]]
        assert added and all(t.second % 5 == 0 and t.second % 2 for t in added)
        assert removed and all(t.second % 3 == 0 and t.second % 2 for t in removed)


async def test_entries_are_checked_as_the_job_is_and_the_preview_shows_the_union(settings: Settings) -> None:
    async with running_api(settings) as api:
        for entries, field in (
            ([{"cron": "0 8 * * *", "every": "1h"}], "$.schedules[0]"),
            ([{"every": "1h"}, {"cron": "61 * * * *"}], "$.schedules[1].cron"),
            ([{"cron": "0 8 * * *", "timezone": "Mars/Olympus"}], "$.schedules[0].timezone"),
            ([{"every": "1h", "anchor": "2026-01-01T00:00:00"}], "$.schedules[0].anchor"),
            ([{"cron": "0 8 * * *", "zone": "UTC"}], "$.schedules[0]"),
        ):
            body = {"name": "bad", "cron_expression": "0 9 * * *", "payload": {"action": "noop"}, "schedules": entries}
            reply = await api.call("POST", "/api/jobs", json=body)
            assert reply.status == 422, (entries, reply.body)
            assert field in reply.body["detail"], (entries, reply.body)
        once = await api.call("POST", "/api/jobs", json={"name": "once", "run_at": "2030-01-01T00:00:00Z",
                                                         "payload": {"action": "noop"},
                                                         "schedules": [{"every": "1h"}]})  # fmt: skip
        assert once.status == 422 and "$.schedules" in once.body["detail"]

        # Created through the API alone; a PATCH of another field keeps the entries.
        job = await api.create(name="weekdays", cron_expression="0 8 * * 1-5", timezone="Europe/Paris",
                               schedules=[{"cron": "0 17 * * 1-5"}, {"cron": "0 10 * * 6", "timezone": "UTC"},
                                          {"every": "90m", "anchor": "2026-01-01T00:00:00Z"}])  # fmt: skip
        assert job["schedules"][2] == {"every": "1h30m", "anchor": "2026-01-01T00:00:00Z"}
        reply = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"timeout_s": 30})
        assert reply.status == 200 and reply.body["schedules"] == job["schedules"]
        assert "schedule_diff" not in reply.body
        # An empty zone is the job's, as null is: stored as null, so the text form shows no `TZ=`.
        empty = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"schedules": [{"cron": "0 9 * * 6",
                                                                                        "timezone": ""}]})  # fmt: skip
        assert empty.status == 200 and empty.body["schedules"] == [{"cron": "0 9 * * 6"}], empty.body
        reply = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"schedules": job["schedules"]})
        assert reply.status == 200, reply.body

        overview = await api.call("GET", "/api/jobs/overview?search=weekdays")
        (row,) = overview.body["items"]
        assert row["description"].count("; and ") == 3 and "(UTC)" in row["description"], row
        # The next fire time of the union (the 90 min interval's, within the next 90 minutes), as the job's.
        shown = (await api.call("GET", f"/api/jobs/{job['id']}")).body["next_run_at"]
        assert row["next_run_at"] == shown
        assert datetime.fromisoformat(shown) - datetime.now(UTC) <= timedelta(minutes=90)

        entries = quote('[{"cron": "0 17 * * 1-5"}, {"cron": "0 10 * * 6", "timezone": "UTC"}]')
        path = (f"/api/schedule/preview?cron_expression={quote('0 8 * * 1-5')}&timezone=Europe/Paris&count=11"
                f"&from=2026-03-02T00:00:00Z&schedules={entries}")  # fmt: skip
        preview = await api.call("GET", path)
        assert preview.status == 200, preview.body
        at = [datetime.fromisoformat(f["at"]) for f in preview.body["fire_times"]]
        assert at == sorted(set(at)) and len(at) == 11
        assert datetime(2026, 3, 7, 10, tzinfo=UTC) in at  # Saturday 10:00 UTC, the entry's own zone
        assert datetime(2026, 3, 2, 16, tzinfo=UTC) in at  # Monday 17:00 in Paris
        assert " and " in preview.body["description"] and len(preview.body["schedules"]) == 2
        bad = await api.call("GET", "/api/schedule/preview?cron_expression=*+*+*+*+*&schedules=%5B%7B%7D%5D")
        assert bad.status == 422 and "schedules[0]" in bad.body["detail"]


async def test_the_auditor_expects_the_unions_ticks_each_once(pg_pool: asyncpg.Pool) -> None:
    """The leader's audit (dispatcher.auditor) reads a job's further schedules: a missing tick that only an
    entry has is a missed tick, and an instant two entries share is expected once."""
    t0 = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=10)
    job_id = await add_job(pg_pool, t0, schedules=[{"cron": "*/15 * * * * *"}])  # its own: */10 s
    ticks = [t0 + timedelta(seconds=s) for s in (10, 15, 20, 30, 40, 45, 50, 60)]  # 30 and 60 shared
    written = [t for t in ticks if t.second != 45]
    await pg_pool.execute(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, finished_at)"
        " SELECT $1, t, 1, 'schedule', 'completed', t, t FROM unnest($2::timestamptz[]) t",
        job_id, written,
    )  # fmt: skip
    result = await Auditor(pg_pool, interval_s=60, settle_s=0).once(t0 + timedelta(seconds=60))
    assert result.expected == len(ticks)
    assert result.unaccounted == [(job_id, t0 + timedelta(seconds=45))]


async def test_a_backfill_re_runs_the_unions_ticks(settings: Settings) -> None:
    """No dispatcher: every tick of the union since the creation is missing, and a dry-run backfill
    lists each once, the ones both entries share too."""
    async with running_api(settings) as api:
        job = await api.create(name="backfilled", cron_expression="*/2 * * * * *",
                               schedules=[{"cron": "*/3 * * * * *"}], payload={"action": "noop"})  # fmt: skip
        created = datetime.fromisoformat(job["created_at"])
        await wait_for(lambda: _past(created + 7 * SECOND), timeout=15, what="7 s of ticks")
        body = {"from": created.isoformat(), "to": (created + 7 * SECOND).isoformat(), "dry_run": True}
        reply = await api.call("POST", f"/api/jobs/{job['id']}/backfill", json=body)
        assert reply.status == 200, reply.body
        listed = [datetime.fromisoformat(item["scheduled_for"]) for item in reply.body["items"]]
        expected = [t for k in range(1, 8) if _union(t := created.replace(microsecond=0) + k * SECOND)]
        assert listed == [t for t in expected if t < created + 7 * SECOND] and reply.body["ticks"] == len(listed)
