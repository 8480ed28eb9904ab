"""The leader's health evaluator against real PostgreSQL: each job event once, verdicts, edits
judged by the rule of their tick, the fence, the per-job metrics' cap and allow-list."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

from api.schemas import JobCreate
from cronos import metrics
from cronos.errors import NotLeader
from cronos.events import JobEvent, JobEventKind
from cronos.health import Health
from cronos.settings import Settings
from cronos.store import health as store_health
from cronos.store.epoch import EpochStore
from cronos.store.health import HealthStore
from cronos.store.jobs import JobStore
from dispatcher.health import Evaluator
from tests.integration.api_client import SEED_JOB, running_api
from tests.waiting import wait_for

_names = itertools.count(1)


async def create(pool: asyncpg.Pool, **fields: Any) -> int:
    body = JobCreate(name=f"health-{next(_names)}", cron_expression="* * * * *", payload={"action": "noop"}, **fields)
    job, _secret = await JobStore(pool).create(msgspec.structs.asdict(body))
    return job.id


async def run(
    pool: asyncpg.Pool,
    job_id: int,
    state: str,
    *,
    tick_ago_s: float = 60,
    started_after_s: float | None = 1,
    took_s: float = 1,
    attempt: int = 1,
    scheduled_for: datetime | None = None,
    skip_reason: str | None = None,
    error: str | None = None,
) -> int:
    """A run as the ledger holds it. An ended one ends now (by PostgreSQL's clock: as a finish
    commits), after `took_s`, having started `started_after_s` after its tick; a queued or running
    one was ticked `tick_ago_s` ago."""
    now: datetime = await pool.fetchval("SELECT clock_timestamp()")
    ended = state in ("completed", "failed", "skipped")
    if ended and started_after_s is not None and scheduled_for is None:
        tick = now - timedelta(seconds=took_s + started_after_s)
    else:
        tick = scheduled_for or now - timedelta(seconds=tick_ago_s)
    started = None if started_after_s is None else tick + timedelta(seconds=started_after_s)
    lease = now + timedelta(seconds=30) if state == "running" else None
    duration = took_s * 1000 if ended and started is not None else None
    return int(
        await pool.fetchval(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, revision, started_at,"
            " finished_at, lease_until, duration_ms, skip_reason, error, node_id)"
            " SELECT $1, $2, $3, 'schedule', $4, $2, revision, $5, $6, $7, $8, $9, $10, 'n' FROM jobs WHERE id = $1"
            " RETURNING id",
            job_id,
            tick,
            attempt,
            state,
            started,
            now if ended else None,
            lease,
            duration,
            skip_reason,
            error,
        )
    )


async def events(pool: asyncpg.Pool, job_id: int) -> list[tuple[str, Any]]:
    rows = await pool.fetch("SELECT kind, run_id, detail FROM job_events WHERE job_id = $1 ORDER BY id", job_id)
    return [(r["kind"], r["run_id"]) for r in rows]


async def health_row(pool: asyncpg.Pool, job_id: int) -> asyncpg.Record:
    return await pool.fetchrow("SELECT * FROM job_health WHERE job_id = $1", job_id)


@pytest.fixture
async def epoch(pg_pool: asyncpg.Pool) -> int:
    # The scan starts where migration 0028 left it (the template's migration): the runs here end earlier.
    await pg_pool.execute("UPDATE health_scan SET scanned_to = now() - interval '1 hour'")
    return (await EpochStore(pg_pool).take("health-test")).epoch


def evaluator(pool: asyncpg.Pool, epoch: int, **kw: Any) -> Evaluator:
    return Evaluator(HealthStore(pool), lambda: epoch, 5.0, **kw)


async def test_failures_recovery_and_skips_are_each_one_event_whoever_evaluates(
    pg_pool: asyncpg.Pool, epoch: int
) -> None:
    job = await create(pg_pool, max_retries=1)
    tick = datetime.now(UTC) - timedelta(minutes=5)
    retried = await run(pg_pool, job, "failed", scheduled_for=tick, error="boom")  # its retry follows
    final = await run(pg_pool, job, "failed", scheduled_for=tick, attempt=2, error="boom again")
    await evaluator(pg_pool, epoch).once()
    assert await events(pg_pool, job) == [("failed", final)], "a failure with a retry left is no event"
    row = await health_row(pg_pool, job)
    assert (row["verdict"], row["consecutive_failures"]) == ("failing", 1)

    second = await run(pg_pool, job, "failed", tick_ago_s=120, error="still")
    overlap = await run(
        pg_pool, job, "skipped", tick_ago_s=110, started_after_s=None, skip_reason="previous run still running"
    )
    await run(pg_pool, job, "skipped", tick_ago_s=100, started_after_s=None, skip_reason="schedule changed")
    await evaluator(pg_pool, epoch).once()
    detail = await pg_pool.fetchval("SELECT detail FROM job_events WHERE run_id = $1 AND kind = 'failed'", second)
    assert detail["consecutive_failures"] == 2 and detail["error"] == "still"
    ok = await run(pg_pool, job, "completed", tick_ago_s=30)
    first = evaluator(pg_pool, epoch)
    await first.once()
    await first.once()  # again: nothing new
    later = (await EpochStore(pg_pool).take("health-test-2")).epoch
    await evaluator(pg_pool, later).once()  # a new leader re-reads the overlap: nothing new
    assert retried not in [r for _k, r in await events(pg_pool, job)]
    assert sorted(await events(pg_pool, job)) == sorted([
        ("failed", final), ("failed", second), ("skipped", overlap), ("recovered", ok),
    ]), "an edit's skip (schedule changed) is no alarm"  # fmt: skip
    row = await health_row(pg_pool, job)
    assert (row["verdict"], row["consecutive_failures"]) == ("ok", 0)
    assert row["last_success_at"] is not None

    with pytest.raises(NotLeader):  # a deposed leader writes nothing
        await run(pg_pool, job, "failed", tick_ago_s=10)
        await evaluator(pg_pool, epoch).once()
    assert len(await events(pg_pool, job)) == 4


async def test_expectations_raise_late_start_overran_too_fast_and_no_success_once(
    pg_pool: asyncpg.Pool, epoch: int
) -> None:
    exp = {"start_within_s": 10, "finish_within_s": 5, "not_faster_than_s": 1, "success_every_s": 60}
    job = await create(pg_pool, expectations=exp)
    on_time = await run(pg_pool, job, "completed", tick_ago_s=300, started_after_s=2, took_s=2)
    late = await run(pg_pool, job, "completed", tick_ago_s=240, started_after_s=20, took_s=2)
    fast = await run(pg_pool, job, "completed", tick_ago_s=180, started_after_s=1, took_s=0.2)
    long = await run(pg_pool, job, "completed", tick_ago_s=120, started_after_s=1, took_s=9)
    running = await run(pg_pool, job, "running", tick_ago_s=60, started_after_s=1)
    waiting = await run(pg_pool, job, "queued", tick_ago_s=30, started_after_s=None)
    ev = evaluator(pg_pool, epoch)
    await ev.once()
    await ev.once()
    found = await events(pg_pool, job)
    assert sorted(found) == sorted([
        ("late_start", late), ("too_fast", fast), ("overran", long), ("overran", running), ("late_start", waiting),
    ]), on_time  # fmt: skip
    row = await health_row(pg_pool, job)
    assert row["verdict"] == "overrunning" and row["judged_run_id"] == long, "judged for good up to the running run"

    # The running run ends: the verdict clears. No success for success_every_s since its last change: no_success.
    await pg_pool.execute(
        "UPDATE runs SET state = 'completed', finished_at = clock_timestamp(), duration_ms = 2000, lease_until = NULL"
        " WHERE id = ANY($1::bigint[])", [running, waiting],
    )  # fmt: skip
    await pg_pool.execute("UPDATE runs SET started_at = scheduled_for WHERE id = $1", waiting)
    await ev.once()
    assert (await health_row(pg_pool, job))["verdict"] == "ok"
    async with pg_pool.acquire() as conn, conn.transaction():  # one now(): the newest success, everywhere
        await conn.execute(
            "UPDATE job_health SET last_success_at = now() - interval '5 minutes' WHERE job_id = $1", job
        )
        await conn.execute("UPDATE jobs SET updated_at = now() - interval '10 minutes' WHERE id = $1", job)
        await conn.execute("UPDATE runs SET finished_at = now() - interval '5 minutes' WHERE job_id = $1", job)
    await ev.once()
    await ev.once()
    assert [k for k, _r in await events(pg_pool, job)].count("no_success") == 1
    assert (await health_row(pg_pool, job))["verdict"] == "missing"


async def test_a_run_is_judged_by_the_expectations_of_the_revision_that_planned_it(
    pg_pool: asyncpg.Pool, epoch: int
) -> None:
    job = await create(pg_pool, expectations={"start_within_s": 60})
    before_edit = await run(pg_pool, job, "completed", tick_ago_s=200, started_after_s=30)
    await JobStore(pg_pool).update(job, {"expectations": {"start_within_s": 10}}, lambda fields: None)
    after_edit = await run(pg_pool, job, "completed", tick_ago_s=100, started_after_s=30)
    await evaluator(pg_pool, epoch).once()
    assert await events(pg_pool, job) == [("late_start", after_edit)], before_edit

    # Expectations removed: the runs planned before still had them, the new ones none.
    await JobStore(pg_pool).update(job, {"expectations": None}, lambda fields: None)
    await run(pg_pool, job, "completed", tick_ago_s=50, started_after_s=30)
    await evaluator(pg_pool, epoch).once()
    assert await events(pg_pool, job) == [("late_start", after_edit)]


async def test_a_run_past_its_timeout_is_overrunning_without_expectations(pg_pool: asyncpg.Pool, epoch: int) -> None:
    job = await create(pg_pool, timeout_s=10)
    stuck = await run(pg_pool, job, "running", tick_ago_s=40, started_after_s=1)
    await evaluator(pg_pool, epoch).once()
    assert await events(pg_pool, job) == [("overran", stuck)]
    assert (await health_row(pg_pool, job))["verdict"] == "overrunning"


async def test_per_job_metrics_are_capped_and_allow_listed(pg_pool: asyncpg.Pool, epoch: int) -> None:
    jobs = [await create(pg_pool) for _ in range(4)]
    names = {j: await pg_pool.fetchval("SELECT name FROM jobs WHERE id = $1", j) for j in jobs}
    await run(pg_pool, jobs[0], "completed", tick_ago_s=20)
    await run(pg_pool, jobs[1], "failed", tick_ago_s=20)
    ev = evaluator(pg_pool, epoch, metrics_max=2)
    await ev.once()
    await ev.export()
    assert _series("cronos_job_consecutive_failures") == {names[jobs[0]]: 0, names[jobs[1]]: 1}
    assert names[jobs[0]] in _series("cronos_job_last_success_timestamp_seconds")
    total = await pg_pool.fetchval("SELECT count(*) FROM jobs")
    assert _sample("cronos_job_metrics_dropped") == total - 2

    only = evaluator(pg_pool, epoch, metrics_jobs=[names[jobs[3]], "no-such-*"])
    await only.export()
    assert _series("cronos_job_consecutive_failures") == {names[jobs[3]]: 0}
    assert _sample("cronos_job_metrics_dropped") == 0
    metrics.forget_jobs()
    assert _series("cronos_job_consecutive_failures") == {}


async def test_allow_listed_label_keys_are_labels_of_the_per_job_series(pg_pool: asyncpg.Pool, epoch: int) -> None:
    labelled = await create(pg_pool, labels={"team": "data", "example.com/tier": "gold", "secret-ish": "no"})
    bare = await create(pg_pool)
    await run(pg_pool, labelled, "completed", tick_ago_s=20)
    names = {j: await pg_pool.fetchval("SELECT name FROM jobs WHERE id = $1", j) for j in (labelled, bare)}
    ev = evaluator(pg_pool, epoch, metrics_jobs=list(names.values()), metric_label_keys=["team", "example.com/tier"])
    await ev.export()
    got = {
        s.labels["job_name"]: (s.labels, s.value)
        for family in metrics.REGISTRY.collect()
        for s in family.samples
        if s.name == "cronos_job_consecutive_failures"
    }
    tier = "label_example_com_tier"  # example.com/tier: / and . as _
    assert got[names[labelled]][0] == {"job_name": names[labelled], "label_team": "data", tier: "gold"}
    assert got[names[bare]][0] == {"job_name": names[bare], "label_team": "", tier: ""}
    assert set(got) == set(names.values())  # only the allow-listed keys: `secret-ish` is not exported
    success = {
        s.labels["job_name"]: s.labels.get("label_team")
        for family in metrics.REGISTRY.collect()
        for s in family.samples
        if s.name == "cronos_job_last_success_timestamp_seconds"
    }
    assert success == {names[labelled]: "data"}
    await evaluator(pg_pool, epoch, metrics_jobs=list(names.values())).export()  # no keys: job_name alone again
    assert all(
        set(s.labels) == {"job_name"}
        for family in metrics.REGISTRY.collect()
        for s in family.samples
        if s.name == "cronos_job_consecutive_failures"
    )
    metrics.forget_jobs()


def _series(name: str) -> dict[str, float]:
    return {
        s.labels["job_name"]: s.value
        for family in metrics.REGISTRY.collect()
        for s in family.samples
        if s.name == name and "job_name" in s.labels
    }


def _sample(name: str) -> float:
    value = metrics.REGISTRY.get_sample_value(name)
    assert value is not None
    return value


async def test_the_list_shows_each_job_as_its_own_page_does(settings: Settings, pg_pool: asyncpg.Pool) -> None:
    # The console's jobs list showed no badge for a job never judged whose page said "ok" (issue 37).
    async with running_api(settings) as api:
        succeeded, fresh = await api.create(name="succeeded"), await api.create(name="fresh")
        await run(pg_pool, succeeded["id"], "completed")
        listed = await api.call("GET", f"/api/jobs/health?ids={succeeded['id']},{fresh['id']},999999")
        pages = [(await api.call("GET", f"/api/jobs/{j['id']}/health")).body for j in (succeeded, fresh)]
        assert listed.body["items"] == pages
        assert [page["verdict"] for page in pages] == ["ok", "unknown"]


async def test_the_api_shows_expectations_and_the_verdict_with_its_reason(
    settings: Settings, pg_pool: asyncpg.Pool, epoch: int
) -> None:
    async with running_api(settings) as api:
        bad = await api.call("POST", "/api/jobs", json={**SEED_JOB, "expectations": {"start_within_s": -1}})
        assert bad.status == 422 and "$.expectations.start_within_s" in str(bad.body), bad.body
        unknown = await api.call("POST", "/api/jobs", json={**SEED_JOB, "expectations": {"start_in": 5}})
        assert unknown.status == 422 and "start_in" in str(unknown.body)
        job = await api.create(expectations={"finish_within_s": 60, "success_every_s": 3600})
        assert job["expectations"] == {"finish_within_s": 60, "success_every_s": 3600}
        fresh = await api.call("GET", f"/api/jobs/{job['id']}/health")
        assert (fresh.status, fresh.body["verdict"], fresh.body["updated_at"]) == (200, "unknown", None)

        await run(pg_pool, job["id"], "failed", error="boom")
        await run(pg_pool, job["id"], "failed", error="boom")
        await evaluator(pg_pool, epoch).once()
        judged = await api.call("GET", f"/api/jobs/{job['id']}/health")
        assert judged.body["verdict"] == "failing" and judged.body["consecutive_failures"] == 2
        assert judged.body["reason"] == "the last 2 runs failed"
        listed = await api.call("GET", f"/api/jobs/health?ids={job['id']},999999")
        assert [(i["job_id"], i["verdict"]) for i in listed.body["items"]] == [(job["id"], "failing")]
        assert (await api.call("GET", "/api/jobs/health?ids=x")).status == 422
        assert (await api.call("GET", "/api/jobs/999999/health")).status == 404

        cleared = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"expectations": None})
        assert cleared.status == 200 and cleared.body["expectations"] is None
        revisions = await api.call("GET", f"/api/jobs/{job['id']}/revisions")
        assert revisions.body["items"][0]["changes"] == {"expectations": None}


async def test_a_long_backlog_is_judged_over_several_passes_each_run_once(
    pg_pool: asyncpg.Pool, epoch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_health, "ENDED_BATCH", 2)
    monkeypatch.setattr(store_health, "ENDED_PER_PASS", 4)
    job = await create(pg_pool)
    skipped = [await run(pg_pool, job, "skipped", started_after_s=None, skip_reason="misfired") for _ in range(7)]
    ev = evaluator(pg_pool, epoch)
    first = await ev.once()
    assert len(await events(pg_pool, job)) == 4 and first.scanned_to is not None
    await ev.once()
    await ev.once()
    assert sorted(await events(pg_pool, job)) == sorted(("skipped", r) for r in skipped)


async def _blocked(pool: asyncpg.Pool) -> bool | None:
    waiting = await pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return True if waiting else None


@pytest.mark.parametrize("part", ["events", "rows"])
async def test_a_job_deleted_while_a_pass_writes_fails_no_pass(pg_pool: asyncpg.Pool, epoch: int, part: str) -> None:
    """Probed from outside: deleting a job in the instant a health pass wrote failed the whole pass
    (`job_events_job_id_fkey`): the statement's join still saw the job, its foreign key check the
    deletion. The job's facts are dropped instead and the others' written."""
    gone, kept = await create(pg_pool), await create(pg_pool)
    now = datetime.now(UTC)
    events = (
        [JobEvent(j, JobEventKind.FAILED, now, f"failed:race:{j}") for j in (gone, kept)] if part == "events" else []
    )
    rows = [Health(j, verdict="failing") for j in (gone, kept)] if part == "rows" else []
    async with pg_pool.acquire() as deleter:
        deleting = deleter.transaction()
        await deleting.start()
        await deleter.execute("DELETE FROM jobs WHERE id = $1", gone)
        writing = asyncio.create_task(HealthStore(pg_pool).write(epoch, events, rows, now))
        await wait_for(lambda: _blocked(pg_pool), timeout=10, what="the pass waiting on the deleted job")
        await deleting.commit()
    assert await writing == len(events) // 2
    table = "job_events" if part == "events" else "job_health"
    written = await pg_pool.fetch(f"SELECT job_id FROM {table} WHERE job_id = ANY($1::bigint[])", [gone, kept])
    assert [r["job_id"] for r in written] == [kept]
