"""Windows, max_runs, one-offs and the per-job catch-up pace (issue 14 items 6 and 5), through the
API with a dispatcher, an executor and a real HTTP receiver: the ticks that run are exactly the
window's, and the leader ends the job (`completed`/`expired`) as it writes its last tick."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from cronos.settings import Settings
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.cluster.receiver import Receiver
from tests.integration.api_client import Api, running_api
from tests.integration.test_api_revisions import _roles, _tick
from tests.waiting import wait_for

SECOND = timedelta(seconds=1)

pytestmark = pytest.mark.timeout(120)


def _iso(instant: datetime) -> str:
    return instant.isoformat()


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _whole(instant: datetime) -> datetime:
    return instant.replace(microsecond=0)


class Stack:
    def __init__(self, api: Api, receiver: Receiver, pool: asyncpg.Pool) -> None:
        self.api, self.receiver, self.pool = api, receiver, pool

    async def http_job(self, path: str, **fields: Any) -> dict[str, Any]:
        fields.setdefault("cron_expression", "* * * * * *")
        payload = {"url": self.receiver.url(path), "method": "POST"}
        return await self.api.create(name=path, kind="http", payload=payload, **fields)

    def ticks(self, path: str) -> list[datetime]:
        return sorted(_tick(d)[1] for d in self.receiver.deliveries() if d.path == path)

    async def job(self, job_id: int) -> dict[str, Any]:
        reply = await self.api.call("GET", f"/api/jobs/{job_id}")
        assert reply.status == 200, reply.body
        return dict(reply.body)

    async def ended(self, job_id: int) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            job = await self.job(job_id)
            return job if job["status"] in ("completed", "expired") else None

        return await wait_for(probe, timeout=30, interval=0.05, what=f"job {job_id} to end")

    async def runs(self, job_id: int) -> list[dict[str, Any]]:
        reply = await self.api.call("GET", f"/api/jobs/{job_id}/runs?limit=500")
        assert reply.status == 200, reply.body
        return [r for r in reply.body["items"] if r["trigger"] == "schedule"]

    async def finished(self, job_id: int, count: int) -> list[dict[str, Any]]:
        async def probe() -> list[dict[str, Any]] | None:
            runs = await self.runs(job_id)
            done = [r for r in runs if r["state"] in ("completed", "failed", "skipped")]
            return runs if len(done) >= count and len(done) == len(runs) else None

        return await wait_for(probe, timeout=30, interval=0.05, what=f"{count} finished runs of job {job_id}")


@contextlib.asynccontextmanager
async def _stack(settings: Settings, pool: asyncpg.Pool, *, dispatcher: bool = True) -> AsyncIterator[Stack]:
    receiver = Receiver()
    receiver.start()
    try:
        roles: list[Dispatcher | Executor] = [Executor(settings)] + ([Dispatcher(settings)] if dispatcher else [])
        async with running_api(settings) as api, _roles(*roles):
            yield Stack(api, receiver, pool)
    finally:
        receiver.stop()


@pytest.fixture
async def stack(settings: Settings, pg_pool: asyncpg.Pool) -> AsyncIterator[Stack]:
    async with _stack(settings, pg_pool) as built:
        yield built


async def test_a_window_runs_exactly_its_ticks_then_the_job_is_completed(stack: Stack) -> None:
    start = _whole(datetime.now(UTC)) + 2 * SECOND
    end = start + 3 * SECOND
    job = await stack.http_job("/window", start_at=_iso(start), end_at=_iso(end))
    assert (_at(job["start_at"]), _at(job["end_at"]), job["status"]) == (start, end, "active")
    assert datetime.fromisoformat(job["next_run_at"]) == start
    ended = await stack.ended(job["id"])
    assert ended["status"] == "completed" and ended["next_run_at"] is None
    runs = await stack.finished(job["id"], 4)
    assert sorted(datetime.fromisoformat(r["scheduled_for"]) for r in runs) == [start + n * SECOND for n in range(4)]
    assert {r["state"] for r in runs} == {"completed"}
    assert stack.ticks("/window") == [start + n * SECOND for n in range(4)], "nothing before start_at or after end_at"
    revisions = await stack.api.call("GET", f"/api/jobs/{job['id']}/revisions")
    newest = revisions.body["items"][0]
    assert (newest["kind"], newest["actor"], newest["status"], newest["number"]) == (
        "ended", "dispatcher", "completed", ended["revision"],
    )  # fmt: skip
    toggle = await stack.api.call("PATCH", f"/api/jobs/{job['id']}/toggle")
    assert toggle.status == 409 and "completed" in toggle.body["detail"], toggle.body


async def test_max_runs_ends_the_job_after_that_many_runs(stack: Stack) -> None:
    job = await stack.http_job("/max", max_runs=3)
    assert (await stack.ended(job["id"]))["status"] == "completed"
    runs = await stack.finished(job["id"], 3)
    assert len(runs) == 3 and {r["state"] for r in runs} == {"completed"}
    assert len(stack.ticks("/max")) == 3
    listed = await stack.api.call("GET", "/api/jobs?status=completed")
    assert listed.status == 200 and [j["id"] for j in listed.body["items"]] == [job["id"]]
    # Raised to 5 and made active again: two more runs, then it ends again.
    revived = await stack.api.call("PATCH", f"/api/jobs/{job['id']}", json={"max_runs": 5, "status": "active"})
    assert revived.status == 200 and revived.body["status"] == "active", revived.body
    assert (await stack.ended(job["id"]))["status"] == "completed"
    assert len(await stack.finished(job["id"], 5)) == 5 and len(stack.ticks("/max")) == 5


async def test_a_patch_switches_a_job_between_a_schedule_and_a_one_off(stack: Stack) -> None:
    job = await stack.http_job("/switch", cron_expression="@daily")
    run_at = datetime.now(UTC) + 3600 * SECOND
    once = await stack.api.call("PATCH", f"/api/jobs/{job['id']}", json={"run_at": _iso(run_at)})
    assert once.status == 200 and once.body["cron_expression"] is None, once.body
    assert _at(once.body["next_run_at"]) == run_at
    back = await stack.api.call("PATCH", f"/api/jobs/{job['id']}", json={"cron_expression": "@hourly"})
    assert back.status == 200 and (back.body["cron_expression"], back.body["run_at"]) == ("@hourly", None)


async def test_a_one_off_runs_once_and_completes(stack: Stack) -> None:
    run_at = datetime.now(UTC) + 1.5 * SECOND
    job = await stack.http_job("/once", cron_expression=None, run_at=_iso(run_at))
    assert job["cron_expression"] is None and datetime.fromisoformat(job["next_run_at"]) == run_at
    assert (await stack.ended(job["id"]))["status"] == "completed"
    runs = await stack.finished(job["id"], 1)
    assert [(datetime.fromisoformat(r["scheduled_for"]), r["state"]) for r in runs] == [(run_at, "completed")]
    assert stack.ticks("/once") == [run_at]


async def test_a_one_off_created_past_its_grace_expires_and_one_within_it_runs_late(stack: Stack) -> None:
    now = datetime.now(UTC)
    gone = await stack.http_job("/gone", cron_expression=None, run_at=_iso(now - 120 * SECOND), misfire_grace_s=60)
    assert (gone["status"], gone["next_run_at"]) == ("expired", None)
    late = await stack.http_job("/late", cron_expression=None, run_at=_iso(now - 5 * SECOND), misfire_grace_s=60)
    assert late["status"] == "active"
    assert (await stack.ended(late["id"]))["status"] == "completed"  # as its one tick is written
    assert [r["state"] for r in await stack.finished(late["id"], 1)] == ["completed"]
    assert stack.ticks("/late") == [now - 5 * SECOND]
    assert await stack.runs(gone["id"]) == [] and stack.ticks("/gone") == []
    resume = await stack.api.call("POST", f"/api/jobs/{gone['id']}/resume")
    assert resume.status == 409, resume.body


async def test_a_job_created_past_its_window_or_with_an_empty_one_is_expired(stack: Stack) -> None:
    end = datetime.now(UTC) - 10 * SECOND
    job = await stack.http_job("/past", end_at=_iso(end))
    assert (job["status"], job["next_run_at"]) == ("expired", None)
    later = datetime.now(UTC) + 3600 * SECOND
    empty = await stack.http_job("/empty", start_at=_iso(later), end_at=_iso(later - 60 * SECOND))
    assert empty["status"] == "expired"
    outside = await stack.http_job("/outside", cron_expression=None, run_at=_iso(later), end_at=_iso(end))
    assert outside["status"] == "expired"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"run_at": "2030-01-01T00:00:00Z"}, "$.cron_expression"),  # both
        ({"cron_expression": None}, "$.cron_expression"),  # neither
        ({"run_at": "2030-01-01T00:00:00", "cron_expression": None}, "$.run_at"),  # no offset
        ({"max_runs": 0}, "$.max_runs"),
        ({"catchup_max_per_s": 0}, "$.catchup_max_per_s"),
        ({"status": "completed"}, "$.status"),
    ],
)
async def test_bad_windows_are_422_naming_the_field(stack: Stack, body: dict[str, Any], field: str) -> None:
    reply = await stack.api.call("POST", "/api/jobs", json={"name": "w", "payload": {"action": "x"}, **body, **(
        {} if "cron_expression" in body else {"cron_expression": "* * * * *"})})  # fmt: skip
    assert reply.status == 422 and field in str(reply.body), reply.body


async def test_the_seed_body_still_creates_a_recurring_job(stack: Stack) -> None:
    reply = await stack.api.call(
        "POST", "/api/jobs", json={"name": "seed", "cron_expression": "*/5 * * * *", "payload": {"action": "x"}}
    )
    assert reply.status == 201 and reply.body["status"] == "active", reply.body
    assert {reply.body[k] for k in ("run_at", "start_at", "end_at", "max_runs", "catchup_max_per_s")} == {None}


async def test_a_per_job_catch_up_pace_is_measured_as_a_rate(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    """A leader down 20 s (the cursors moved back behind its back): the paced job's late runs reach
    their target at its 4/s, the other job's at once (the global pace, 2000/s by default)."""
    async with _stack(settings, pg_pool, dispatcher=False) as stack:
        # `allow`: runs of one job may overlap, so the target sees the pace, not one run after another.
        common = {"misfire_policy": "run_all", "misfire_grace_s": 3600, "concurrency_policy": "allow"}
        paced = await stack.http_job("/paced", catchup_max_per_s=4, **common)
        free = await stack.http_job("/free", **common)
        await pg_pool.execute(
            "UPDATE jobs SET last_scheduled_for = now() - interval '20 seconds' WHERE id = ANY($1::bigint[])",
            [paced["id"], free["id"]],
        )
        late_before = datetime.now(UTC) - 2 * SECOND  # ticks before this are late when the leader starts
        async with _roles(Dispatcher(settings)):
            for path in ("/paced", "/free"):
                await wait_for(
                    lambda path=path: _async(len(_late(stack, path, late_before)) >= 17),
                    timeout=60,
                    what=f"the catch-up of {path}",
                )
        rates = {path: _rate(_late(stack, path, late_before)) for path in ("/paced", "/free")}
    print(f"catch-up deliveries/s: paced (catchup_max_per_s=4) {rates['/paced']:.2f}, global {rates['/free']:.1f}")
    assert 3.0 <= rates["/paced"] <= 4.4, rates
    assert rates["/free"] > 10, rates


async def _async(value: bool) -> bool:
    return value


def _late(stack: Stack, path: str, before: datetime) -> list[float]:
    """Arrival times of the deliveries to `path` of ticks before `before` (the late ones)."""
    return sorted(d.at for d in stack.receiver.deliveries() if d.path == path and _tick(d)[1] < before)


def _rate(arrivals: list[float]) -> float:
    """Deliveries a second: the least-squares slope of the arrivals against their rank, so that one
    late first or last delivery (a busy box) does not move the figure as a first-to-last span does."""
    n = len(arrivals)
    mean_rank, mean_at = (n - 1) / 2, sum(arrivals) / n
    spread = sum((i - mean_rank) ** 2 for i in range(n))
    seconds_per_delivery = sum((i - mean_rank) * (at - mean_at) for i, at in enumerate(arrivals)) / spread
    return 1 / max(seconds_per_delivery, 1e-6)
