"""Instants at the edges (issue 36): accepted only when PostgreSQL gives them back exactly, and a
stored one no role can use (PostgreSQL's infinity, written by an older version or by hand) skipped,
logged and counted: never a crash, never a leader that stops after each election."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta, timezone

import asyncpg
import msgspec
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from cronos import instants
from cronos.metrics import REGISTRY
from cronos.settings import Settings
from cronos.store.db import connect
from cronos.store.ledger import Ledger
from dispatcher.auditor import Auditor
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.instant_fields import FIELDS, path_of, same_instant
from tests.integration.roles import running_role
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)
ADMIN = "instants-admin-token-0123456789abcdef"
EDGES = (
    "0001-01-01T00:00:00Z",  # asyncpg writes it as -infinity
    "9999-12-31T23:59:59.999999Z",  # and this as infinity
    "0001-01-01T23:59:59+14:00",  # year 0 in UTC
    "9999-12-31T23:00:00-14:00",  # year 10000 in UTC
    "0002-01-01T00:00:00+00:01",  # a minute before the range
    "9999-01-01T00:00:00Z",  # the range's end
)
INSIDE = ("0002-01-01T00:00:00Z", "9998-12-31T23:59:59.999999Z", "9998-12-31T23:59:59.999999+14:00")


def _admin(settings: Settings) -> Settings:
    return msgspec.structs.replace(settings, admin_token=ADMIN)


async def _judge(api: Api, key: str, value: str) -> bool:
    """One field, one value: a 422 naming the field, or the same instant everywhere it is shown.
    An unusable instant is always refused; True when the API stored it."""
    reply, shown = await FIELDS[key](api, value)
    usable = instants.usable(datetime.fromisoformat(value))
    if reply.status >= 400:
        assert reply.status < 500, (key, value, reply.body)
        if not usable:
            assert (reply.status, reply.body.get("field")) == (422, path_of(key)), (key, value, reply.body)
            assert "0002-01-01T00:00:00Z" in reply.body["detail"], reply.body
        return False
    assert usable, f"{key} accepted {value}: {reply.body}"
    assert all(same_instant(value, s) for s in shown), (key, value, shown)
    return bool(shown)


@pytest.mark.parametrize("key", sorted(FIELDS))
async def test_each_instant_field_refuses_the_edges_naming_itself_and_round_trips_inside(
    settings: Settings, key: str
) -> None:
    async with running_api(_admin(settings), token=ADMIN) as api:
        for value in EDGES:
            await _judge(api, key, value)
        recent = (datetime.now(UTC) - timedelta(minutes=30)).astimezone(timezone(timedelta(hours=-9, minutes=-30)))
        stored = [await _judge(api, key, value) for value in (*INSIDE, recent.isoformat())]
    # Backfill's bounds are not stored, a re-run's tick is one of the job's since its creation.
    assert any(stored) or key in ("$.from", "$.to", "$.scheduled_for"), (key, stored)


def _count(table: str) -> float:
    return REGISTRY.get_sample_value("cronos_rows_unusable_instant_total", {"table": table}) or 0.0


async def _runs_after(pg_pool: asyncpg.Pool, job_id: int, after: datetime, n: int) -> int | None:
    found = await pg_pool.fetchval(
        "SELECT count(*) FROM runs WHERE job_id = $1 AND scheduled_for > $2 AND state = 'completed'", job_id, after
    )
    return found if found >= n else None


async def test_rows_with_infinity_are_skipped_logged_and_counted_and_the_leader_keeps_scheduling(
    settings: Settings, pg_pool: asyncpg.Pool, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_api(_admin(settings), token=ADMIN) as api:
        # A calendar's days are dates, not instants: the calendar's own edges round-trip (PostgreSQL's
        # date infinities are asyncpg's date.min/max both ways) and a leader computes with them.
        days = {"dates": ["0001-01-01", "9999-12-31"], "ranges": [{"from": "0001-01-01", "to": "0001-01-02"}]}
        calendar = await api.call("POST", "/api/calendars", json={"name": "edges", "timezone": "Etc/GMT-14", **days})
        assert calendar.status == 201 and {k: calendar.body[k] for k in days} == days, calendar.body
        assert {k: (await api.call("GET", "/api/calendars/edges")).body[k] for k in days} == days
        healthy = await api.create(name="healthy", cron_expression="* * * * * *", payload={"action": "noop"},
                                   calendars=[{"name": "edges"}])  # fmt: skip
        ids = [(await api.create(name=f"edge-{n}", cron_expression="* * * * * *"))["id"] for n in range(5)]
        token = await api.call("POST", "/api/tokens", json={"name": "forever", "scopes": ["read"]})
        assert token.status == 201, token.body
        # What an older version wrote (or a hand): PostgreSQL's infinities, past Python's calendar too.
        await pg_pool.execute("UPDATE jobs SET status = 'paused', paused_until = '-infinity' WHERE id = $1", ids[0])
        await pg_pool.execute("UPDATE jobs SET status = 'paused', paused_until = 'infinity' WHERE id = $1", ids[1])
        await pg_pool.execute("UPDATE jobs SET end_at = 'infinity' WHERE id = $1", ids[2])
        await pg_pool.execute("UPDATE jobs SET start_at = '-infinity' WHERE id = $1", ids[3])
        await pg_pool.execute("UPDATE jobs SET end_at = '20000-01-01T00:00:00Z' WHERE id = $1", ids[4])
        await pg_pool.execute(
            "INSERT INTO blackouts (name, action, starts_at, ends_at, timezone, selector, note)"
            " VALUES ('forever', 'skip', '-infinity', 'infinity', 'UTC', '{}', '')"
        )
        await pg_pool.execute("UPDATE api_tokens SET expires_at = 'infinity' WHERE name = 'forever'")
        before = {table: _count(table) for table in ("jobs", "pauses", "blackouts", "tokens")}

        started = datetime.now(UTC)
        async with running_role(Executor(settings)), running_role(Dispatcher(settings)):
            # Past a resync (5 s in tests): ticks of the healthy job keep being written and run.
            await wait_for(lambda: _runs_after(pg_pool, healthy["id"], started + timedelta(seconds=6), 2),
                           timeout=40, interval=0.2, what="the healthy job's runs past a resync")  # fmt: skip
        # The auditor skips them as the leader does: no tick of theirs is reported missed.
        audit = await Auditor(pg_pool, interval_s=60, settle_s=0).once(datetime.now(UTC))
        assert not {job_id for job_id, _tick in audit.unaccounted} & set(ids), audit.unaccounted
        refused = await api.call("GET", "/api/jobs", token=token.body["token"])
        assert refused.status == 401 and "expires_at" in refused.body["detail"], refused.body
        shown = (await api.call("GET", f"/api/jobs/{ids[2]}")).body
        assert shown["end_at"] == "9999-12-31T23:59:59.999999Z", shown  # an instant, with its offset
        # The API still shows every such row, so it can be mended.
        reads = ["/api/jobs", "/api/jobs/overview", "/api/jobs/health", "/api/blackouts", "/api/tokens"]
        reads += [f"/api/jobs/{job_id}{tail}" for job_id in ids for tail in ("", "/ticks", "/health", "/revisions")]
        for path in reads:
            reply = await api.call("GET", path)
            assert reply.status < 500, (path, reply.body)
        rows = await pg_pool.fetch("SELECT id, status FROM jobs WHERE id = ANY($1)", ids)
        statuses = {r["id"]: r["status"] for r in rows}
        assert statuses[ids[0]] == statuses[ids[1]] == "paused", statuses  # an unusable pause is never lifted
        ran = await pg_pool.fetchval("SELECT count(*) FROM runs WHERE job_id = ANY($1)", ids[2:])
        assert ran == 0  # nothing computed with an unusable window
        # And each can be mended through the API.
        blackout = (await api.call("GET", "/api/blackouts")).body["items"][0]["id"]
        mends = [
            ("PATCH", f"/api/jobs/{ids[2]}", {"end_at": None}),
            ("PATCH", f"/api/jobs/{ids[3]}", {"start_at": None}),
            ("POST", f"/api/jobs/{ids[0]}/resume", None),
            ("DELETE", f"/api/blackouts/{blackout}", None),
        ]
        for method, path, body in mends:
            reply = await api.call(method, path, json=body)
            assert reply.status in (200, 204), (path, reply.body)
        after = {table: _count(table) for table in before}
    assert after["tokens"] > before["tokens"] and after["blackouts"] > before["blackouts"], (before, after)
    assert after["jobs"] >= before["jobs"] + 3 and after["pauses"] >= before["pauses"] + 2, (before, after)
    skipped = [r for r in caplog.records if getattr(r, "event", None) == "store.instant_unusable"]
    assert {getattr(r, "job_id", None) for r in skipped} >= set(ids), skipped


# Instants anywhere in Python's calendar, in any offset Python allows (RFC 3339 takes ±23:59).
async def test_a_one_off_at_the_first_usable_instant_leaves_no_row_the_leader_skips(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    """Probed from outside: `run_at: 0002-01-01T00:00:00Z` is accepted, but the cursor stored with
    it (run_at - 1 us) lay before the range: the leader logged the job unusable and counted it, which
    fires CronosRowsUnusable for a value the API itself let in."""
    async with running_api(_admin(settings), token=ADMIN) as api:
        ids = [
            (await api.create(name=f"first-{status}", cron_expression=None, run_at="0002-01-01T00:00:00Z",
                              status=status))["id"]
            for status in ("active", "paused")
        ]  # fmt: skip
    cursors = await pg_pool.fetch("SELECT last_scheduled_for FROM jobs WHERE id = ANY($1::bigint[])", ids)
    assert all(instants.usable(row["last_scheduled_for"]) for row in cursors), cursors
    before = _count("jobs")
    assert sorted(job.id for job in await Ledger(pg_pool).jobs(ids)) == sorted(ids)
    assert _count("jobs") == before


_offsets = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))
_instants = st.one_of(
    st.sampled_from(EDGES + INSIDE),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=_offsets).map(
        lambda d: d.isoformat()
    ),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=_offsets).map(
        lambda d: d.isoformat()
    ),
)
PROPERTY = hypothesis_settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.timeout(180)
def test_any_instant_in_any_field_is_refused_or_round_trips_and_the_leader_runs_over_them(
    settings: Settings, database_url: str
) -> None:
    live = _admin(settings)
    loop = asyncio.new_event_loop()
    stack = contextlib.AsyncExitStack()
    api = loop.run_until_complete(stack.enter_async_context(running_api(live, token=ADMIN)))
    accepted: list[tuple[str, str]] = []

    @PROPERTY
    @given(key=st.sampled_from(sorted(FIELDS)), value=_instants)
    def judge(key: str, value: str) -> None:
        if loop.run_until_complete(_judge(api, key, value)):
            accepted.append((key, value))

    async def leader_over_them() -> None:
        pool = await connect(database_url, min_size=1, max_size=2)
        try:
            healthy = await api.create(name="healthy", cron_expression="* * * * * *", payload={"action": "noop"})
            started = datetime.now(UTC)
            async with running_role(Executor(live)), running_role(Dispatcher(live)):
                await wait_for(lambda: _runs_after(pool, healthy["id"], started + timedelta(seconds=2), 2),
                               timeout=30, interval=0.2, what="the healthy job's runs")  # fmt: skip
                await Auditor(pool, interval_s=60, settle_s=0).once(datetime.now(UTC))  # raises on an error
        finally:
            await pool.close()

    try:
        judge()
        assert accepted, "no example was stored"
        loop.run_until_complete(leader_over_them())
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()
