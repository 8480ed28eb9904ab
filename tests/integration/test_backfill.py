"""Backfill (issue 25, item 3): POST /api/jobs/{id}/backfill against a real API, PostgreSQL and Redis,
with the leader's outbox releasing the paced runs and a real executor running them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import asyncpg
import msgspec
import pytest

from cronos import tasks
from cronos.settings import Settings
from cronos.store.tokens import TokenStore
from executor.service import Executor
from tests.integration.api_client import Api, Reply, running_api
from tests.integration.ledger_helpers import Harness
from tests.waiting import wait_for

PROBE = "backfill-probe"
HOUR = timedelta(hours=1)


class Seen:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail: set[tuple[datetime, int]] = set()  # (tick, attempt) that fail
        self.hold_s = 0.0
        self.running = 0
        self.most_at_once = 0


@pytest.fixture
def seen() -> Iterator[Seen]:
    found = Seen()

    @tasks.task(PROBE, replace=True)
    async def probe(payload: dict[str, Any], ctx: tasks.RunContext) -> dict[str, Any]:
        found.running += 1
        found.most_at_once = max(found.most_at_once, found.running)
        try:
            found.calls.append({"tick": ctx.scheduled_for, "key": ctx.idempotency_key, "attempt": ctx.attempt,
                                "at": datetime.now(UTC)})  # fmt: skip
            await asyncio.sleep(found.hold_s)
            if (ctx.scheduled_for, ctx.attempt) in found.fail:
                raise RuntimeError("this attempt fails")
            return {"ok": True}
        finally:
            found.running -= 1

    yield found
    tasks.unregister(PROBE)


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(settings) as client:
        yield client


async def _backfill(api: Api, job_id: int, body: Any, **kw: Any) -> Reply:
    return await api.call("POST", f"/api/jobs/{job_id}/backfill", json=body, **kw)


async def _old_job(api: Api, pool: asyncpg.Pool, days: int = 1, **fields: Any) -> dict[str, Any]:
    """An hourly job (paused: the leader writes none of its ticks) that has existed for `days`."""
    fields = {"name": "nightly", "cron_expression": "0 * * * *", "status": "paused",
              "payload": {"action": PROBE}} | fields  # fmt: skip
    job = await api.create(**fields)
    await pool.execute(
        "UPDATE job_revisions SET at = at - make_interval(days => $2) WHERE job_id = $1", job["id"], days
    )
    return job


def _range(hours: int) -> tuple[datetime, datetime, dict[str, str]]:
    """[from, to): the last `hours` whole hours, to the top of the current one."""
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - hours * HOUR
    return start, end, {"from": start.isoformat(), "to": end.isoformat()}


async def _seed(pool: asyncpg.Pool, job_id: int, tick: datetime, attempt: int, state: str) -> int:
    """A ledger row for a tick (the facts a backfill decides on)."""
    finished = state in ("completed", "failed", "skipped")
    started = state in ("completed", "failed", "running")
    return int(await pool.fetchval(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, started_at, finished_at,"
        " skip_reason) VALUES ($1, $2::timestamptz, $3, 'schedule', $4, $2::timestamptz,"
        " CASE WHEN $5 THEN $2::timestamptz END, CASE WHEN $6 THEN now() END,"
        " CASE WHEN $4 = 'skipped' THEN 'misfired' END) RETURNING id",
        job_id, tick, attempt, state, started, finished,
    ))  # fmt: skip


def _shape(reply: Reply) -> list[tuple[datetime, str, int, str]]:
    assert reply.status == 200, reply.body
    return [(datetime.fromisoformat(t["scheduled_for"]), t["state"], t["attempt"], t["action"])
            for t in reply.body["items"]]  # fmt: skip


async def test_each_mode_in_a_dry_run_lists_its_ticks_and_writes_nothing(api: Api, pg_pool: asyncpg.Pool) -> None:
    job = await _old_job(api, pg_pool)
    start, _end, window = _range(6)
    t = [start + i * HOUR for i in range(6)]
    await _seed(pg_pool, job["id"], t[0], 1, "completed")
    await _seed(pg_pool, job["id"], t[1], 1, "failed")
    await _seed(pg_pool, job["id"], t[2], 1, "skipped")
    busy = await _seed(pg_pool, job["id"], t[3], 1, "queued")  # not started, not ended
    before = await pg_pool.fetchval("SELECT count(*) FROM runs")

    missing = await _backfill(api, job["id"], {**window, "dry_run": True})
    assert _shape(missing) == [(t[2], "skipped", 2, "queue"), (t[3], "queued", 2, "busy"),
                               (t[4], "none", 1, "queue"), (t[5], "none", 1, "queue")]  # fmt: skip
    assert (missing.body["mode"], missing.body["ticks"], missing.body["queued"]) == ("missing", 6, 3)
    assert all(item.get("run_id") is None for item in missing.body["items"])
    failed = await _backfill(api, job["id"], {**window, "mode": "failed", "dry_run": True})
    assert _shape(failed) == [(t[1], "failed", 2, "queue")]
    every = await _backfill(api, job["id"], {**window, "mode": "all", "dry_run": True, "pace": 2})
    assert [row[:3] for row in _shape(every)] == [
        (t[0], "completed", 2), (t[1], "failed", 2), (t[2], "skipped", 2), (t[3], "queued", 2), (t[4], "none", 1),
        (t[5], "none", 1),
    ]  # fmt: skip
    dues = [datetime.fromisoformat(i["due_at"]) for i in every.body["items"] if i["action"] == "queue"]
    assert [b - a for a, b in pairwise(dues)] == [timedelta(seconds=0.5)] * 4
    # ticks before the job existed are not its own; a range inside them holds none
    old = await _backfill(api, job["id"], {"from": (start - timedelta(days=3)).isoformat(),
                                           "to": (start - timedelta(days=2)).isoformat(), "mode": "all"})  # fmt: skip
    assert old.status == 200 and (old.body["ticks"], old.body["items"]) == (0, []), old.body

    assert await pg_pool.fetchval("SELECT count(*) FROM runs") == before
    assert await pg_pool.fetchval("SELECT count(*) FROM audit_log WHERE action = 'backfilled'") == 0
    assert await pg_pool.fetchval("SELECT state FROM runs WHERE id = $1", busy) == "queued"


async def _executed(harness: Harness, settings: Settings, ids: list[int], timeout: float = 10) -> None:
    async def ended() -> bool:
        states = await harness.pool.fetch("SELECT state FROM runs WHERE id = ANY($1::bigint[])", ids)
        return all(r["state"] in ("completed", "failed", "skipped") for r in states)

    async with harness.outbox(), Executor(settings) as executor:
        task = asyncio.create_task(executor.run())
        try:
            await wait_for(ended, timeout=timeout, what=f"runs {ids} ended")
        finally:
            executor.stop()
            await asyncio.wait_for(task, 10)


async def test_runs_keep_their_ticks_date_and_key_take_the_next_attempt_and_are_paced(
    api: Api, harness: Harness, settings: Settings, seen: Seen, pg_pool: asyncpg.Pool
) -> None:
    job = await _old_job(api, pg_pool)
    start, end, window = _range(4)
    ticks = [start + i * HOUR for i in range(4)]
    seen.fail.add((ticks[1], 1))
    reply = await _backfill(api, job["id"], {**window, "pace": 2})
    assert reply.status == 200 and reply.body["queued"] == 4, reply.body
    ids = [item["run_id"] for item in reply.body["items"]]
    rows = await pg_pool.fetch("SELECT * FROM runs WHERE id = ANY($1::bigint[]) ORDER BY scheduled_for", ids)
    assert [(r["scheduled_for"], r["attempt"], r["trigger"], r["state"]) for r in rows] == [
        (t, 1, "backfill", "queued" if t == ticks[0] else "waiting") for t in ticks  # forbid: behind the first
    ]
    dues = [r["due_at"] for r in rows]
    assert [b - a for a, b in pairwise(dues)] == [timedelta(seconds=0.5)] * 3

    await _executed(harness, settings, ids)
    calls = sorted(seen.calls, key=lambda c: c["tick"])
    assert [(c["tick"], c["attempt"]) for c in calls] == [(t, 1) for t in ticks]
    assert [c["key"] for c in calls] == [tasks.idempotency_key(job["id"], t) for t in ticks]
    for call, due in zip(calls, dues, strict=True):  # none before its paced due time (less the push lead)
        assert call["at"] >= due - timedelta(milliseconds=300), (call, due)
    assert calls[-1]["at"] >= dues[0] + timedelta(seconds=1.2)  # 4 runs at 2/s: the last 1.5 s after the first
    first_key = calls[1]["key"]
    states = {
        r["scheduled_for"]: r["state"] for r in await pg_pool.fetch("SELECT * FROM runs WHERE job_id = $1", job["id"])
    }
    assert states[ticks[1]] == "failed" and sum(s == "completed" for s in states.values()) == 3

    # the failed tick again: its attempt 2, same key; then nothing is missing or failed any more
    again = await _backfill(api, job["id"], {**window, "mode": "failed"})
    assert _shape(again) == [(ticks[1], "failed", 2, "queue")]
    await _executed(harness, settings, [again.body["items"][0]["run_id"]])
    assert (seen.calls[-1]["tick"], seen.calls[-1]["attempt"]) == (ticks[1], 2)
    assert seen.calls[-1]["key"] == first_key
    for mode in ("missing", "failed"):
        none = await _backfill(api, job["id"], {**window, "mode": mode})
        assert none.body["items"] == [] and none.body["queued"] == 0, none.body

    # the ticks API shows them as the ticks' runs; each backfill is audited once
    span = f"from={start:%Y-%m-%dT%H:%M:%SZ}&to={end - timedelta(seconds=1):%Y-%m-%dT%H:%M:%SZ}"
    shown = await api.call("GET", f"/api/jobs/{job['id']}/ticks?{span}")
    assert [tick["outcome"] for tick in shown.body["items"]] == ["ran"] * 4, shown.body
    audit = await pg_pool.fetch("SELECT detail FROM audit_log WHERE action = 'backfilled' ORDER BY id")
    details = [a["detail"] if isinstance(a["detail"], dict) else msgspec.json.decode(a["detail"]) for a in audit]
    assert [(d["mode"], d["queued"]) for d in details] == [("missing", 4), ("failed", 1)]


async def test_the_overlap_policy_holds_for_backfilled_runs(
    api: Api, harness: Harness, settings: Settings, seen: Seen, pg_pool: asyncpg.Pool
) -> None:
    seen.hold_s = 0.3
    job = await _old_job(api, pg_pool, concurrency_policy="forbid")
    _start, _end, window = _range(3)
    reply = await _backfill(api, job["id"], {**window, "pace": 20})
    ids = [item["run_id"] for item in reply.body["items"]]
    assert len(ids) == 3, reply.body
    await _executed(harness, settings, ids)
    assert seen.most_at_once == 1  # forbid: never two runs of the job at once, whatever their pace
    rows = await pg_pool.fetch("SELECT state, started_at, finished_at FROM runs WHERE id = ANY($1::bigint[])"
                               " ORDER BY started_at", ids)  # fmt: skip
    started = [r for r in rows if r["started_at"] is not None]
    assert started and all(a["finished_at"] <= b["started_at"] for a, b in pairwise(started))


async def test_refusals_name_the_field_and_the_limit(api: Api, settings: Settings, pg_pool: asyncpg.Pool) -> None:
    job = await _old_job(api, pg_pool)
    now = datetime.now(UTC)
    for body, field in [
        ({"from": now.isoformat(), "to": (now - HOUR).isoformat()}, "$.to"),
        ({"from": (now + HOUR).isoformat(), "to": (now + 2 * HOUR).isoformat()}, "$.from"),
        ({"from": "2026-01-01T00:00:00", "to": now.isoformat()}, "$.from"),
        ({"from": "0001-01-01T00:00:00+14:00", "to": now.isoformat()}, "$.from"),  # no UTC instant (issue 36)
        ({"from": (now - HOUR).isoformat(), "to": now.isoformat(), "mode": "some"}, "$.mode"),
        ({"from": (now - HOUR).isoformat(), "to": now.isoformat(), "pace": 0}, "$.pace"),
        ({"from": (now - HOUR).isoformat(), "to": now.isoformat(), "when": 1}, None),
        ({"to": now.isoformat()}, None),
    ]:
        reply = await _backfill(api, job["id"], body)
        assert reply.status == 422, (body, reply.body)
        if field is not None:
            assert reply.body["field"] == field, reply.body
    busy = await _old_job(api, pg_pool, name="every-second", cron_expression="* * * * * *")
    big = await _backfill(api, busy["id"], {"from": (now - 3 * HOUR).isoformat(), "to": now.isoformat()})
    assert (big.status, big.body["field"]) == (422, "$.to") and "10000 ticks" in big.body["detail"], big.body
    for edge in ("0002-02-01T01:01:00Z", "0002-01-01T12:00:00Z"):  # the stored range's first day: no 500
        first = await _backfill(api, job["id"], {"from": "0002-01-01T00:00:00Z", "to": edge})
        assert first.status == 200 and first.body["items"] == [], first.body
    before = await _backfill(api, job["id"], {"from": "0001-01-01T00:00:00Z", "to": "0002-01-01T00:00:00Z"})
    assert (before.status, before.body["field"]) == (422, "$.from"), before.body  # PostgreSQL's -infinity
    assert (await _backfill(api, 999_999, {"from": (now - HOUR).isoformat(), "to": now.isoformat()})).status == 404

    tokens = TokenStore(pg_pool)
    writer = (await tokens.create("writer", ("write",), None, actor="cli"))[1]
    reader = (await tokens.create("reader", ("read",), None, actor="cli"))[1]
    admin = (await tokens.create("boss", ("admin",), None, actor="cli"))[1]
    shell_job = {"name": "sh", "cron_expression": "0 * * * *", "kind": "shell", "payload": {"argv": ["true"]},
                 "status": "paused"}  # fmt: skip
    window = {"from": (now - 2 * HOUR).isoformat(), "to": now.isoformat(), "dry_run": True}
    async with running_api(msgspec.structs.replace(settings, allow_shell=True)) as guarded:
        shell = await guarded.call("POST", "/api/jobs", json=shell_job, token=admin)
        await pg_pool.execute("UPDATE job_revisions SET at = at - interval '1 day' WHERE job_id = $1", shell.body["id"])
        refused = await _backfill(guarded, shell.body["id"], window, token=writer)
        assert refused.status == 403 and "`admin`" in refused.body["detail"], refused.body
        assert (await _backfill(guarded, job["id"], window, token=reader)).status == 403
        assert (await _backfill(guarded, job["id"], window, token=writer)).status == 200
        assert (await _backfill(guarded, shell.body["id"], window, token=admin)).status == 200


async def test_one_backfill_is_bounded_in_runs_and_pace(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    """Issue 36: one request queued up to 10,000 runs at up to 1,000 a second (2,000 by default)."""
    bounded = msgspec.structs.replace(settings, backfill_max_runs=5, backfill_max_per_s=20.0)
    async with running_api(bounded) as api:
        job = await _old_job(api, pg_pool)
        _start, _end, six = _range(6)
        many = await _backfill(api, job["id"], {**six, "dry_run": True})
        assert many.status == 422 and many.body["field"] == "$.to", many.body
        assert "CRONOS_BACKFILL_MAX_RUNS" in many.body["detail"] and "6 runs" in many.body["detail"], many.body
        _start, _end, three = _range(3)
        fast = await _backfill(api, job["id"], {**three, "pace": 50})
        assert fast.status == 422 and fast.body["field"] == "$.pace", fast.body
        assert "CRONOS_BACKFILL_MAX_PER_S" in fast.body["detail"], fast.body
        default = await _backfill(api, job["id"], three)  # the catch-up pace (2,000 a second), held to 20
        assert default.status == 200 and default.body["pace"] == 20.0 and default.body["queued"] == 3, default.body
    assert await pg_pool.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", job["id"]) == 3


async def test_backfills_releasing_runs_are_bounded_per_job_and_per_token(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    """Issue 36: nothing limited repeating the call. A backfill is active until it releases its last run."""
    bounded = msgspec.structs.replace(settings, backfill_max_active_per_job=1, backfill_max_active_per_token=2)
    tokens = TokenStore(pg_pool)
    one = (await tokens.create("one", ("write",), None, actor="cli"))[1]
    other = (await tokens.create("other", ("write",), None, actor="cli"))[1]
    async with running_api(bounded, token=one) as api:
        jobs = [await _old_job(api, pg_pool, name=f"nightly-{i}") for i in range(4)]
        _start, _end, window = _range(2)
        slow = {**window, "pace": 0.01}  # its second run is released 100 s from now
        assert (await _backfill(api, jobs[0]["id"], slow)).status == 200
        again = await _backfill(api, jobs[0]["id"], {**window, "mode": "all"})
        assert again.status == 409 and "CRONOS_BACKFILL_MAX_ACTIVE_PER_JOB" in again.body["detail"], again.body
        assert (await _backfill(api, jobs[0]["id"], {**window, "mode": "all", "dry_run": True})).status == 200
        assert (await _backfill(api, jobs[1]["id"], slow)).status == 200
        crowded = await _backfill(api, jobs[2]["id"], slow)
        assert crowded.status == 429 and "CRONOS_BACKFILL_MAX_ACTIVE_PER_TOKEN" in crowded.body["detail"], crowded.body
        assert crowded.body["type"] == "urn:cronos:problem:too-many-requests", crowded.body
        assert (await _backfill(api, jobs[2]["id"], slow, token=other)).status == 200  # another token's own count
        # A backfill that released its last run counts no more: `other`'s quick one (its last run due
        # 50 ms from now) holds jobs[3] until then, and the older ticks of jobs[3] can be backfilled after.
        assert (await _backfill(api, jobs[3]["id"], {**window, "pace": 20}, token=other)).status == 200
        _start, _end, older = _range(4)

        async def admitted() -> bool:
            reply = await _backfill(api, jobs[3]["id"], {**older, "pace": 20}, token=other)
            assert reply.status in (200, 409, 429), reply.body
            return reply.status == 200

        await wait_for(admitted, timeout=10, what="a backfill once the job's last one released its runs")
    audited = await pg_pool.fetchval("SELECT count(*) FROM audit_log WHERE action = 'backfilled'")
    assert audited == 5  # the refusals and the dry run wrote nothing


async def test_runs_of_a_forbid_job_wait_in_the_ledger_not_after_a_claim(
    api: Api, harness: Harness, settings: Settings, seen: Seen, pg_pool: asyncpg.Pool,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Issue 36: released faster than the job runs them one at a time, each backfilled run was
    claimed, parked waiting, woken, released and claimed again: ~37 transactions a run. Queued
    behind the first, they wait in the ledger and each end releases the next."""
    caplog.set_level(logging.INFO, logger="cronos.executor")
    seen.hold_s = 0.2
    job = await _old_job(api, pg_pool, concurrency_policy="forbid")
    _start, _end, window = _range(6)
    reply = await _backfill(api, job["id"], {**window, "pace": 20})  # one released every 50 ms
    ids = [item["run_id"] for item in reply.body["items"]]
    assert len(ids) == 6, reply.body
    await _executed(harness, settings, ids)
    assert seen.most_at_once == 1 and [c["tick"] for c in seen.calls] == sorted(c["tick"] for c in seen.calls)
    states = await pg_pool.fetch("SELECT state FROM runs WHERE id = ANY($1::bigint[])", ids)
    assert {r["state"] for r in states} == {"completed"}, states
    parked = [r for r in caplog.records if getattr(r, "event", None) == "run.waiting"]
    assert parked == [], [(r.__dict__.get("run_id"), r.getMessage()) for r in parked]
