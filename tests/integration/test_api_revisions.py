"""Edits take effect exactly (issue 17), through the API, with a dispatcher, an executor and a real
HTTP receiver running: a tick written ahead under an older revision that the current schedule
does not have never runs, the new schedule's ticks start at the change, and a run that starts
after a change uses the current definition and records the revision that planned it.

Tokens go out 600 ms before their tick here, and each change is made while the job's next tick is
written ahead *and* its token is already in the executor's hands (`_token_out`): the case a
change handled only by the leader would miss.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import msgspec
import pytest

from cronos.settings import Settings
from cronos.store.tokens import TokenStore
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.cluster.receiver import Delivery, Receiver
from tests.integration.api_client import Api, running_api
from tests.waiting import wait_for

SECOND = timedelta(seconds=1)


@dataclass
class Stack:
    api: Api
    receiver: Receiver
    pool: asyncpg.Pool

    async def http_job(self, path: str, expression: str = "* * * * * *", **fields: Any) -> dict[str, Any]:
        payload = {"url": self.receiver.url(path), "method": "POST", "body": fields.pop("body", None)}
        return await self.api.create(name=path, cron_expression=expression, kind="http", payload=payload, **fields)

    async def change(self, method: str, path: str, body: Any = None) -> datetime:
        """Make a change; returns its instant (its revision's time: the database's now())."""
        reply = await self.api.call(method, path, json=body)
        assert reply.status in (200, 201, 204), reply.body
        job_id = path.split("/")[3]
        revisions = await self.api.call("GET", f"/api/jobs/{job_id}/revisions?limit=1")
        return datetime.fromisoformat(revisions.body["items"][0]["at"])

    def ticks(self, path: str) -> list[tuple[int, datetime]]:
        """(job id, tick) of each delivery to `path`, in arrival order."""
        return [_tick(d) for d in self.receiver.deliveries() if d.path == path]

    async def runs(self, job_id: int) -> dict[datetime, dict[str, Any]]:
        reply = await self.api.call("GET", f"/api/jobs/{job_id}/runs?limit=500")
        assert reply.status == 200, reply.body
        return {
            datetime.fromisoformat(r["scheduled_for"]): r for r in reply.body["items"] if r["trigger"] == "schedule"
        }

    async def since(self, job_id: int, path: str, instant: datetime) -> list[datetime]:
        """The ticks after `instant` delivered to `path`, sorted. One due before it may be there too
        only if it started after it (a slow executor): a run uses the definition current as it starts."""
        runs = await self.runs(job_id)
        late = [t for _, t in self.ticks(path) if t <= instant]
        assert all(datetime.fromisoformat(runs[t]["started_at"]) > instant for t in late), late
        return sorted(t for _, t in self.ticks(path) if t > instant)

    async def delivered(self, path: str, count: int, after: datetime | None = None) -> None:
        async def enough() -> bool:
            return len([t for _, t in self.ticks(path) if after is None or t > after]) >= count

        await wait_for(enough, timeout=30, interval=0.05, what=f"{count} deliveries to {path}")

    async def token_out(self, job_id: int, want: Callable[[datetime], bool] = lambda t: True) -> datetime:
        """A tick of the job that `want` accepts, written ahead, whose token is already out (600 ms
        before it: queued, or reserved by the executor holding it) and that is still at least 300 ms
        away: change the job now, before it is due."""

        async def probe() -> datetime | None:
            now = datetime.now(UTC)
            rows = await self.pool.fetch(
                "SELECT scheduled_for FROM runs WHERE job_id = $1 AND trigger = 'schedule'"
                " AND state IN ('queued', 'reserved')"
                " AND scheduled_for > $2",
                job_id,
                now,
            )
            found = [r["scheduled_for"] for r in rows if want(r["scheduled_for"])]
            return next((t for t in found if t - timedelta(seconds=0.55) <= now <= t - timedelta(seconds=0.3)), None)

        return await wait_for(probe, timeout=30, interval=0.01, what="a tick written ahead with its token out")


def _tick(delivery: Delivery) -> tuple[int, datetime]:
    assert delivery.idempotency_key is not None
    job_id, _, scheduled_for = delivery.idempotency_key.partition(":")
    return int(job_id), datetime.fromisoformat(scheduled_for)


def _seconds(after: datetime, until: datetime, every: int = 1) -> list[datetime]:
    """Whole seconds in (after, until] divisible by `every`: the fire times of `*/every * * * * *`."""
    first = after.replace(microsecond=0) + SECOND
    count = int((until - first).total_seconds()) + 1
    return [t for t in (first + i * SECOND for i in range(max(count, 0))) if t.second % every == 0]


@contextlib.asynccontextmanager
async def _roles(*roles: Dispatcher | Executor) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        tasks = []
        for role in roles:
            await stack.enter_async_context(role)
            tasks.append(asyncio.create_task(role.run(), name=f"test:{role.name}"))
        try:
            yield
        finally:
            for role in roles:
                role.stop()
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=15)


@pytest.fixture
async def stack(settings: Settings, pg_pool: asyncpg.Pool) -> AsyncIterator[Stack]:
    settings = msgspec.structs.replace(settings, push_lead_ms=600)
    receiver = Receiver()
    receiver.start()
    try:
        async with running_api(settings) as api, _roles(Dispatcher(settings), Executor(settings)):
            yield Stack(api, receiver, pg_pool)
    finally:
        receiver.stop()


pytestmark = pytest.mark.timeout(120)


async def test_faster_to_slower_never_runs_a_tick_of_the_old_schedule_and_loses_none_of_the_new(
    stack: Stack,
) -> None:
    job = await stack.http_job("/a")
    await stack.delivered("/a", 2)
    ahead = await stack.token_out(job["id"], lambda t: t.second % 5 != 0)
    changed = await stack.change("PATCH", f"/api/jobs/{job['id']}", {
        "cron_expression": "*/5 * * * * *", "payload": {"url": stack.receiver.url("/b"), "method": "POST"},
    })  # fmt: skip
    assert changed < ahead, "the change was made before the tick written ahead was due"
    await stack.delivered("/b", 2, after=changed)
    until = max(t for _, t in stack.ticks("/b"))

    assert all(t <= changed for _, t in stack.ticks("/a")), "the old URL gets nothing after the change"
    assert await stack.since(job["id"], "/b", changed) == _seconds(changed, until, 5), "the new schedule, none lost"
    runs = await stack.runs(job["id"])
    after = {t: r for t, r in runs.items() if t > changed}
    assert (after[ahead]["state"], after[ahead]["skip_reason"], after[ahead]["revision"]) == (
        "skipped", "schedule changed", 1,
    )  # fmt: skip
    assert {(r["state"], r["revision"]) for t, r in after.items() if t.second % 5 == 0 and t <= until} == {
        ("completed", 2)
    }
    assert all(r["state"] == "skipped" for t, r in after.items() if t.second % 5 != 0)


async def test_slower_to_faster_keeps_the_tick_both_schedules_have_and_starts_at_the_change(stack: Stack) -> None:
    job = await stack.http_job("/slow", "*/5 * * * * *")
    await stack.delivered("/slow", 1)
    ahead = await stack.token_out(job["id"])  # a multiple of 5: the new schedule fires then too
    changed = await stack.change("PATCH", f"/api/jobs/{job['id']}", {
        "cron_expression": "* * * * * *", "payload": {"url": stack.receiver.url("/fast"), "method": "POST"},
    })  # fmt: skip
    assert changed < ahead
    await stack.delivered("/fast", 4)
    until = max(t for _, t in stack.ticks("/fast"))

    assert all(t <= changed and t.second % 5 == 0 for _, t in stack.ticks("/slow"))
    assert await stack.since(job["id"], "/fast", changed) == _seconds(changed, until), "every second from the change"
    runs = await stack.runs(job["id"])
    # The tick written ahead under revision 1 runs once, with the current definition (the new URL).
    assert (runs[ahead]["state"], runs[ahead]["revision"]) == ("completed", 1)
    assert {r["revision"] for t, r in runs.items() if ahead < t <= until} == {2}


async def test_a_time_zone_change_stops_and_restarts_ticks_exactly_at_each_change(stack: Stack) -> None:
    # Every second of the current hour and the next in Kathmandu (UTC+05:45): never in those hours of UTC.
    hour = datetime.now(ZoneInfo("Asia/Kathmandu")).hour
    expression = f"* * {hour},{(hour + 1) % 24} * * *"
    job = await stack.http_job("/tz", expression, timezone="Asia/Kathmandu")
    await stack.delivered("/tz", 2)
    ahead = await stack.token_out(job["id"])
    to_utc = await stack.change("PATCH", f"/api/jobs/{job['id']}", {"timezone": "UTC"})
    assert to_utc < ahead
    silence_until = to_utc + 3 * SECOND  # the old zone's ticks would have come meanwhile
    await wait_for(lambda: _past(silence_until), timeout=10, what="three seconds in UTC")
    back = await stack.change("PATCH", f"/api/jobs/{job['id']}", {"timezone": "Asia/Kathmandu"})
    await stack.delivered("/tz", 3, after=back)
    until = max(t for _, t in stack.ticks("/tz"))

    ticks = sorted(t for _, t in stack.ticks("/tz"))
    assert [t for t in ticks if t > to_utc] == _seconds(back, until), "nothing in UTC, every second from the return"
    runs = await stack.runs(job["id"])
    assert (runs[ahead]["state"], runs[ahead]["skip_reason"]) == ("skipped", "schedule changed")
    assert not [t for t in runs if ahead < t <= back], "no tick planned while the schedule has none"
    assert {r["revision"] for t, r in runs.items() if back < t <= until} == {3}


async def test_a_run_that_starts_after_a_payload_change_sends_the_new_payload(stack: Stack) -> None:
    job = await stack.http_job("/p", body={"v": 1})
    await stack.delivered("/p", 2)
    ahead = await stack.token_out(job["id"])
    changed = await stack.change("PATCH", f"/api/jobs/{job['id']}", {
        "payload": {"url": stack.receiver.url("/p"), "method": "POST", "body": {"v": 2}},
    })  # fmt: skip
    committed = datetime.now(UTC)
    assert committed < ahead, "the change was committed before the tick written ahead was due"
    await stack.delivered("/p", 3, after=ahead)

    sent = {_tick(d)[1]: json.loads(d.body)["v"] for d in stack.receiver.deliveries()}
    runs = await stack.runs(job["id"])
    started = {t: datetime.fromisoformat(runs[t]["started_at"]) for t in sent}
    assert all(sent[t] == 1 for t in sent if started[t] < changed), "runs started before the change: the old body"
    assert all(sent[t] == 2 for t in sent if started[t] > committed), "runs started after it: the new body"
    # Planned (written ahead) under revision 1, started after the change: the current body, and
    # the run says which revision planned it.
    assert (sent[ahead], runs[ahead]["revision"]) == (2, 1)
    later = [t for t in sent if t > ahead]
    assert later and all(runs[t]["revision"] == 2 for t in later)
    assert len(sent) == len(stack.receiver.deliveries()), "each tick delivered once"


async def test_pause_edit_resume_runs_nothing_while_paused_and_only_the_new_schedule_after(stack: Stack) -> None:
    job = await stack.http_job("/before")
    path = f"/api/jobs/{job['id']}"
    await stack.delivered("/before", 2)
    ahead = await stack.token_out(job["id"])
    paused = await stack.change("POST", f"{path}/pause")
    assert paused < ahead
    await stack.change("PATCH", path, {
        "cron_expression": "*/2 * * * * *", "payload": {"url": stack.receiver.url("/after"), "method": "POST"},
    })  # fmt: skip
    await wait_for(lambda: _past(paused + 3 * SECOND), timeout=10, what="three seconds paused")
    resumed = await stack.change("POST", f"{path}/resume")
    await stack.delivered("/after", 2)
    until = max(t for _, t in stack.ticks("/after"))

    assert all(t <= paused for _, t in stack.ticks("/before"))
    assert await stack.since(job["id"], "/after", resumed) == _seconds(resumed, until, 2)
    runs = await stack.runs(job["id"])
    assert (runs[ahead]["state"], runs[ahead]["skip_reason"]) == ("skipped", "job paused or deleted")
    assert not [t for t in runs if ahead < t <= resumed], "nothing planned while paused"
    revisions = (await stack.api.call("GET", f"{path}/revisions")).body["items"]
    assert [(r["number"], r["kind"], r["status"]) for r in revisions] == [
        (4, "resumed", "active"), (3, "updated", "paused"), (2, "paused", "paused"), (1, "created", "active"),
    ]  # fmt: skip
    assert revisions[1]["fields"] == ["cron_expression", "payload"]


async def test_a_job_deleted_and_created_again_under_its_name_shares_nothing_with_the_old_one(
    stack: Stack,
) -> None:
    old = await stack.http_job("/old")
    await stack.delivered("/old", 2)
    ahead = await stack.token_out(old["id"])
    deleted = await stack.change("DELETE", f"/api/jobs/{old['id']}")
    assert deleted < ahead
    payload = {"url": stack.receiver.url("/new"), "method": "POST"}
    new = await stack.api.create(name="/old", cron_expression="* * * * * *", kind="http", payload=payload)
    await stack.delivered("/new", 2)

    assert new["id"] != old["id"] and new["revision"] == 1
    assert all(job_id == old["id"] and t <= deleted for job_id, t in stack.ticks("/old"))
    created = datetime.fromisoformat(new["created_at"])
    assert all(job_id == new["id"] and t > created for job_id, t in stack.ticks("/new"))
    assert await stack.pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", old["id"]) == 0
    assert (await stack.api.call("GET", f"/api/jobs/{old['id']}/runs")).status == 404
    assert {r["revision"] for r in (await stack.runs(new["id"])).values()} == {1}
    old_revisions = (await stack.api.call("GET", f"/api/jobs/{old['id']}/revisions")).body["items"]
    assert [(r["number"], r["kind"], r["status"]) for r in old_revisions] == [
        (2, "deleted", "deleted"), (1, "created", "active"),
    ]  # fmt: skip
    new_revisions = (await stack.api.call("GET", f"/api/jobs/{new['id']}/revisions")).body["items"]
    assert [(r["number"], r["kind"]) for r in new_revisions] == [(1, "created")]


async def test_revisions_name_the_token_hide_secrets_and_page(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    _info, token = await TokenStore(pg_pool).create("deployer", ["write"], None, actor="cli")
    async with running_api(settings, token=token) as api:
        job = await api.create(kind="http", payload={"url": "https://example.com/x", "headers": {"X-Api-Key": "k1"}})
        path = f"/api/jobs/{job['id']}"
        for body in ({"timeout_s": 5}, {}, {"timeout_s": 5}, {"jitter_s": 1}):  # two no-ops among them
            assert (await api.call("PATCH", path, json=body)).status == 200
        got = await api.call("GET", path)
        assert got.body["revision"] == 3
        noop = await api.call("PATCH", path, json={"jitter_s": 1.0, "payload": got.body["payload"]})  # *** sent back
        assert (noop.body["revision"], noop.body["updated_at"]) == (3, got.body["updated_at"])
        first = await api.call("GET", f"{path}/revisions?limit=2")
        assert [(r["number"], r["actor"], r["changes"]) for r in first.body["items"]] == [
            (3, "deployer", {"jitter_s": 1.0}), (2, "deployer", {"timeout_s": 5.0}),
        ]  # fmt: skip
        rest = await api.call("GET", f"{path}/revisions?limit=2&cursor={first.body['next_cursor']}")
        (created,) = rest.body["items"]
        assert created["number"] == 1 and created["changes"]["payload"]["headers"] == {"X-Api-Key": "***"}
        assert rest.body["next_cursor"] is None
        run = await api.call("POST", f"{path}/trigger")
        assert run.status == 202 and run.body["revision"] == 3
        missing = await api.call("GET", "/api/jobs/987654/revisions")
        assert missing.status == 404 and missing.body["title"]


async def _past(instant: datetime) -> bool:
    return datetime.now(UTC) > instant
