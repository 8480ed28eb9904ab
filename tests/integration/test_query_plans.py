"""The hot statements read rows in proportion to their batch, not to the backlog, even when
the table's statistics are stale (autovacuum off, or a backlog that grew faster than its
analyze): PostgreSQL here plans with statistics that say no run is queued while 20,000 are.

Each statement runs under EXPLAIN ANALYZE in a rolled-back transaction, with PostgreSQL's
generic plan as well as a custom one (a prepared statement switches to the generic plan after
five executions); the check counts the rows its plan read from `runs`' partitions, from its
CTEs and from its unnest() of the batch (returned plus filtered out, times loops): a
deterministic measure of cost, not a timing. A CTE or a batch rescanned once per row of
another input reads n² rows and fails it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from cronos.store.jobs import RUN_WINDOWS
from cronos.store.queries import joins as joins_q
from cronos.store.queries import runs as runs_q
from cronos.store.queries import views as views_q

BACKLOG = 20_000
BATCH = 200
SECOND = timedelta(seconds=1)


@pytest.fixture
async def backlog(pg_pool: asyncpg.Pool) -> list[int]:
    """100 jobs; statistics taken while every run was completed; then a backlog of queued runs
    (pushed, due within their grace) behind 20,000 completed ones. Returns the queued ids."""
    async with pg_pool.acquire() as conn:
        for name in await _partitions(conn):  # a partitioned table has no storage (options) of its own
            await conn.execute(f'ALTER TABLE "{name}" SET (autovacuum_enabled = false)')
        await conn.execute(
            "INSERT INTO jobs (name, cron_expression, kind, payload, misfire_grace_s)"
            " SELECT 'job-' || g, '* * * * * *', 'task', '{\"action\": \"noop\"}', 3600 FROM generate_series(1, 100) g"
        )
        await _insert_runs(conn, 1, 50, "completed")
        await conn.execute("ANALYZE runs")
        await _insert_runs(conn, 51, BACKLOG, "completed")
        await _insert_runs(conn, BACKLOG + 1, 2 * BACKLOG, "queued")
        rows = await conn.fetch("SELECT id FROM runs WHERE state = 'queued' ORDER BY id")
    return [r["id"] for r in rows]


async def _insert_runs(conn: Any, first: int, last: int, state: str) -> None:
    await conn.execute(
        "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, exclusive, pushed_epoch, expires_at)"
        " SELECT (SELECT min(id) FROM jobs) + g % 100, now() - interval '1 day' + g * interval '1 ms', 1,"
        " 'schedule', $3, now() - interval '10 s', true, 1, now() + interval '3590 s'"  # within its 3600 s grace
        " FROM generate_series($1::int, $2::int) g",
        first,
        last,
        state,
    )


async def _partitions(conn: Any) -> set[str]:
    rows = await conn.fetch(
        "SELECT inhrelid::regclass::text AS name FROM pg_inherits WHERE inhparent = 'runs'::regclass"
    )
    return {r["name"] for r in rows}


async def rows_read(pool: asyncpg.Pool, sql: str, *args: Any, prelude: str = "") -> int:
    """The most rows read from the partitions of runs, over a custom and a generic plan (after
    `prelude`, the statement its caller sends first in the same transaction)."""
    async with pool.acquire() as conn:
        tables = await _partitions(conn)
    read = []
    for mode in ("force_custom_plan", "force_generic_plan"):
        async with pool.acquire() as conn:
            tx = conn.transaction()
            await tx.start()
            try:
                await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                if prelude:
                    await conn.execute(prelude)
                raw = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, *args)
            finally:
                await tx.rollback()
        plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
        read.append(
            sum(
                (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * node.get("Actual Loops", 1)
                for node in _nodes(plan)
                if node.get("Relation Name") in tables or node.get("Node Type") in ("CTE Scan", "Function Scan")
            )
        )
    return max(read)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):  # InitPlans and SubPlans are children too
        yield from _nodes(child)


def _finish_args(ids: list[int]) -> tuple[Any, ...]:
    n = len(ids)
    return (ids, ["n"] * n, ["completed"] * n, [None] * n, [None] * n, [None] * n, [1.0] * n, None, None)


async def _new_runs(pool: asyncpg.Pool, ids: list[int]) -> tuple[Any, ...]:
    """RUNS_QUEUE's arrays for the next attempts of these runs (retries)."""
    rows = await pool.fetch("SELECT id, job_id, scheduled_for FROM runs WHERE id = ANY($1) ORDER BY id", ids)
    n, now = len(rows), datetime.now(UTC)
    return ([r["job_id"] for r in rows], [r["scheduled_for"] for r in rows], [2] * n, ["retry"] * n, [now] * n,
            [1] * n, [None] * n, [now + timedelta(hours=1)] * n, [r["id"] for r in rows])  # fmt: skip


async def test_batch_statements_read_rows_in_proportion_to_the_batch(pg_pool: asyncpg.Pool, backlog: list[int]) -> None:
    batch = backlog[-BATCH:]
    jobs = [r["id"] for r in await pg_pool.fetch("SELECT id FROM jobs ORDER BY id")]
    statements: dict[str, tuple[str, tuple[Any, ...]]] = {
        "CLAIM_FREE": (runs_q.CLAIM_FREE, (batch, "n", 10.0, None, None, "running")),  # ticks unknown: every partition
        "CLAIM_FACTS": (runs_q.CLAIM_FACTS, (batch, None, None)),
        "CLAIM_FREE reserving": (runs_q.CLAIM_FREE, (batch, "n", 10.0, None, None, "reserved")),
        "RUNS_START": (runs_q.RUNS_START, (batch, "n", None, None)),
        "RUNS_UNRESERVE": (runs_q.RUNS_UNRESERVE, (batch, "n")),
        "CLAIM_RUNS": (runs_q.CLAIM_RUNS, (batch, [False] * BATCH, "n", 10.0, None, None)),  # (two per job: G3 aside)
        "RUNS_WAIT": (runs_q.RUNS_WAIT, (batch,)),
        "RUNS_WAKE": (runs_q.RUNS_WAKE, (batch,)),
        "RUNS_SKIP": (runs_q.RUNS_SKIP, (batch, "x")),
        "RUNS_SKIP_QUEUED": (runs_q.RUNS_SKIP_QUEUED, (batch, "x")),
        "EXTEND_LEASES": (runs_q.EXTEND_LEASES, (batch, "n", 10.0, None, None)),
        "FINISH_RUNS": (runs_q.FINISH_RUNS, _finish_args(batch)),
        "FOLLOW_UP_FACTS": (runs_q.FOLLOW_UP_FACTS, (jobs, jobs, 8)),
        "RUNS_QUEUE": (runs_q.RUNS_QUEUE, await _new_runs(pg_pool, batch)),
        # the outbox after an election: every queued run back in it, a page taken in due order
        "OUTBOX_TAKE": (runs_q.OUTBOX_TAKE, (datetime.now(UTC), BATCH)),
        "OUTBOX_MARK": (runs_q.OUTBOX_MARK, (2, batch, batch[:10], datetime.now(UTC), [datetime.now(UTC)] * 10)),
        # an election's unmark, one page of the backlog (the Ledger pages through it by id)
        "OUTBOX_UNMARK": (runs_q.OUTBOX_UNMARK, (backlog[BATCH], BATCH)),
        # the watchdog's page, leaving out the oldest runs (put back moments ago)
        "OUTBOX_UNMARK_OVERDUE": (runs_q.OUTBOX_UNMARK_OVERDUE, (3.0, backlog[:BATCH], BATCH, [])),
        # ... while another queue's stream lags (its jobs' runs are left out, looked up by job)
        "OUTBOX_UNMARK_OVERDUE_LAGGING": (runs_q.OUTBOX_UNMARK_OVERDUE, (3.0, backlog[:BATCH], BATCH, ["gpu"])),
    }
    preludes = {  # what the Ledger sends first
        "OUTBOX_TAKE": runs_q.OUTBOX_PLAN + "; UPDATE runs SET pushed_epoch = NULL WHERE state = 'queued'",
        "OUTBOX_UNMARK": runs_q.OUTBOX_PLAN,
        "OUTBOX_UNMARK_OVERDUE": runs_q.OUTBOX_PLAN,
        "OUTBOX_UNMARK_OVERDUE_LAGGING": runs_q.OUTBOX_PLAN,
    }
    read = {
        name: await rows_read(pg_pool, sql, *args, prelude=preludes.get(name, ""))
        for name, (sql, args) in statements.items()
    }
    assert all(n <= 8 * BATCH for n in read.values()), {k: v for k, v in read.items() if v > 8 * BATCH}


async def test_waiting_runs_are_read_through_their_own_index_not_the_backlog(
    pg_pool: asyncpg.Pool, backlog: list[int]
) -> None:
    """Each job runs one run and has two waiting behind it (buffer_one): a claim of each job's next
    run counts its job's waiting runs, a finish reads each job's first waiting runs, the leader's
    sweep every waiting run once; none of them reads the 20,000 queued runs."""
    await pg_pool.execute("UPDATE jobs SET concurrency_policy = 'buffer_one'")
    ranked = await pg_pool.fetch(
        "SELECT id, n FROM (SELECT id, row_number() OVER (PARTITION BY job_id ORDER BY scheduled_for) AS n"
        " FROM runs WHERE state = 'queued') q WHERE n <= 4"
    )
    by_rank = {n: [r["id"] for r in ranked if r["n"] == n] for n in (1, 2, 3, 4)}
    await pg_pool.execute(
        "UPDATE runs SET state = 'running', node_id = 'n', started_at = now() WHERE id = ANY($1)", by_rank[1]
    )
    await pg_pool.execute("UPDATE runs SET state = 'waiting' WHERE id = ANY($1)", by_rank[2] + by_rank[3])
    jobs = [r["id"] for r in await pg_pool.fetch("SELECT id FROM jobs ORDER BY id")]
    read = {
        "CLAIM_FACTS": await rows_read(pg_pool, runs_q.CLAIM_FACTS, by_rank[4], None, None),
        "FOLLOW_UP_FACTS": await rows_read(pg_pool, runs_q.FOLLOW_UP_FACTS, [], jobs, 8),
        "WAITERS_SWEEP": await rows_read(pg_pool, runs_q.WAITERS_SWEEP, 5000),
    }
    assert all(n <= 12 * len(jobs) < len(backlog) for n in read.values()), read


async def test_single_run_and_scan_statements_do_not_read_the_backlog(
    pg_pool: asyncpg.Pool, backlog: list[int]
) -> None:
    now = datetime.now(UTC)
    one = backlog[-1]
    early = await pg_pool.fetchval("SELECT min(scheduled_for) FROM runs") + 10 * SECOND
    statements: dict[str, tuple[str, tuple[Any, ...]]] = {
        "CLAIM_FACTS": (runs_q.CLAIM_FACTS, ([one], None, None)),
        "CLAIM_FREE": (runs_q.CLAIM_FREE, ([one], "n", 10.0, None, None, "running")),
        "OUTBOX_TAKE": (runs_q.OUTBOX_TAKE, (now, 5000)),  # the backlog was pushed already
        "OUTBOX_NEXT_DUE": (runs_q.OUTBOX_NEXT_DUE, ()),
        "EXPIRE_PENDING": (runs_q.EXPIRE_PENDING, (1000, "expired")),  # the backlog is within its grace
        "WAITERS_SWEEP": (runs_q.WAITERS_SWEEP, (5000,)),  # none waits
        "LOST_RUNS": (runs_q.LOST_RUNS, (1000,)),
        # the leader's join sweep and forgetting (no join: none of the 20,000 queued runs read)
        "JOIN_NEXT_DEADLINE": (joins_q.JOIN_NEXT_DEADLINE, ()),
        "JOINS_DUE": (joins_q.JOINS_DUE, (100,)),
        "JOINS_FORGET": (joins_q.JOINS_FORGET, (now, 100)),
        # an edit's hand-over: the job's ticks written ahead (none), not its 400 queued runs
        "RUNS_AHEAD_OF_JOB": (views_q.RUNS_AHEAD_OF_JOB, (await pg_pool.fetchval("SELECT min(id) FROM jobs"),)),
        # GET /api/jobs/{id}/ticks: half a second of one job's ticks (5 rows), not its 400 queued runs
        "TICK_RUNS": (
            views_q.TICK_RUNS,
            (await pg_pool.fetchval("SELECT min(id) FROM jobs"), early, early + 0.5 * SECOND),
        ),
    }
    read = {name: await rows_read(pg_pool, sql, *args) for name, (sql, args) in statements.items()}
    assert all(n <= 10 for n in read.values()), {k: v for k, v in read.items() if v > 10}


async def test_a_batch_with_known_ticks_reads_only_its_days(pg_pool: asyncpg.Pool, backlog: list[int]) -> None:
    batch = backlog[-BATCH:]
    lo, hi = await pg_pool.fetchrow(
        "SELECT min(scheduled_for), max(scheduled_for) + interval '1 ms' FROM runs WHERE id = ANY($1)", batch
    )
    async with pg_pool.acquire() as conn:
        days = await _partitions(conn)
        for mode in ("force_custom_plan", "force_generic_plan"):
            tx = conn.transaction()
            await tx.start()
            try:
                await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                plans = [
                    await conn.fetchval(
                        "EXPLAIN (ANALYZE, FORMAT JSON) " + runs_q.CLAIM_FREE, batch, "n", 10.0, lo, hi, "running"
                    ),
                    await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + runs_q.CLAIM_FACTS, batch, lo, hi),
                    await conn.fetchval(
                        "EXPLAIN (ANALYZE, FORMAT JSON) " + runs_q.CLAIM_RUNS,
                        batch,
                        [False] * len(batch),
                        "n",
                        10.0,
                        lo,
                        hi,
                    ),
                ]
            finally:
                await tx.rollback()
            for raw in plans:
                plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
                # The batch's own runs (alias runs); CLAIM_FACTS also looks up a running run of each
                # job by id (alias r), in no partition while none runs.
                scanned = {
                    n["Relation Name"]
                    for n in _nodes(plan)
                    if n.get("Relation Name") in days
                    and n["Actual Loops"]
                    and not n.get("Alias", "").startswith("r_")
                    and (n.get("Alias", "").startswith("runs") or n.get("Actual Rows", 0))
                }
                assert len(scanned) == 1, (mode, scanned)


FINISHING = 1000  # runs finished at once: an executor's burst


async def test_a_finish_in_a_day_whose_statistics_say_all_is_finished_reads_in_proportion(
    pg_pool: asyncpg.Pool,
) -> None:
    """The day's statistics were taken while every run of it was finished; a batch is running
    now. With its ticks known, the finish looks in that day only, and still reads the batch once."""
    async with pg_pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO jobs (name, cron_expression)"
            " SELECT 'job-' || g, '* * * * * *' FROM generate_series(1, $1::int) g",
            FINISHING,
        )
        await conn.execute(
            "CREATE TABLE runs_20300101 (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
            " WITH (autovacuum_enabled = false)"
        )
        await conn.execute(
            "ALTER TABLE runs ATTACH PARTITION runs_20300101 FOR VALUES FROM ('2030-01-01') TO ('2030-01-02')"
        )
        for n in range(30):  # 29 batches finished (and analyzed), then one running
            if n == 29:
                await conn.execute("ANALYZE runs_20300101")
            state = "running" if n == 29 else "completed"
            await conn.execute(
                "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at, node_id, finished_at)"
                " SELECT id, timestamptz '2030-01-01' + $1 * interval '1 s', 'schedule', $2, now(), 'n',"
                " CASE WHEN $2 = 'completed' THEN now() END FROM jobs",
                n,
                state,
            )
        batch = [r["id"] for r in await conn.fetch("SELECT id FROM runs WHERE state = 'running' ORDER BY id")]
    lo, hi = datetime(2030, 1, 1, 0, 0, 29, tzinfo=UTC), datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC)
    args = (*_finish_args(batch)[:-2], lo, hi)
    assert await rows_read(pg_pool, runs_q.FINISH_RUNS, *args) <= 8 * FINISHING


async def test_a_jobs_runs_page_reads_its_newest_days_only(pg_pool: asyncpg.Pool) -> None:
    """GET /api/jobs/{id}/runs over 20 days of history (20 runs a day, in day partitions whose
    ids do not follow the ticks): the first window of a page of 25 (a day), first or from a
    cursor, reads the days it spans and no older one, with a custom and a generic plan."""
    async with pg_pool.acquire() as conn:
        job = await conn.fetchval(
            "INSERT INTO jobs (name, cron_expression) VALUES ('history', '* * * * *') RETURNING id"
        )
        for day in range(1, 21):
            name = f"runs_203003{day:02d}"
            await conn.execute(f'CREATE TABLE "{name}" (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)')
            await conn.execute(
                f'ALTER TABLE runs ATTACH PARTITION "{name}"'
                f" FOR VALUES FROM ('2030-03-{day:02d}') TO ('2030-03-{day:02d}'::date + 1)"
            )
        await conn.execute(  # the newest days written first: ids against the tick order
            "INSERT INTO runs (job_id, scheduled_for, trigger, state, due_at)"
            " SELECT $1, timestamptz '2030-03-21' - g * interval '1 hour' - interval '30 min', 'schedule',"
            " 'completed', now() FROM generate_series(0, 399) g ORDER BY g",
            job,
        )
        await conn.execute("ANALYZE runs")
        days = await _partitions(conn)
        cursor = await conn.fetchrow(
            "SELECT scheduled_for, id FROM runs WHERE job_id = $1"
            " ORDER BY scheduled_for DESC, id DESC OFFSET 99 LIMIT 1",
            job,
        )
        windows = [  # the first page's first window (from 2030-03-20 on), a page from a cursor
            (None, None, datetime(2030, 3, 20, tzinfo=UTC)),
            (cursor["scheduled_for"], cursor["id"], cursor["scheduled_for"] - RUN_WINDOWS[0]),
        ]
        for tick, last_id, lo in windows:
            for mode in ("force_custom_plan", "force_generic_plan"):
                tx = conn.transaction()
                await tx.start()
                try:
                    await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                    raw = await conn.fetchval(
                        "EXPLAIN (ANALYZE, FORMAT JSON) " + views_q.RUN_LIST_OF_JOB, job, None, tick, last_id, 25, lo
                    )
                finally:
                    await tx.rollback()
                plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
                scans = [n for n in _nodes(plan) if n.get("Relation Name") in days and n.get("Actual Loops")]
                read = sum(n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0) for n in scans)
                # at most the two days the window touches (a day here is 24 runs, small enough for
                # a sequential scan of it), never the 18 others
                assert len(scans) <= 2 and read <= 2 * 24, (mode, tick, [n["Relation Name"] for n in scans], read)


async def test_a_ticks_window_reads_only_the_revisions_that_touch_it(pg_pool: asyncpg.Pool) -> None:
    """GET /api/jobs/{id}/ticks of a job with 2,000 revisions (a 60 KB payload each, one every 30 s,
    the schedule changed in a few): a one-hour window reads the ~120 revisions within it, the one
    in force at its start and the creation, and the schedule in force from one row per field; not
    the job's whole history (issue 22, item 6), with a custom and a generic plan."""
    async with pg_pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO job_revisions (job_id, number, kind, at, actor, status, fields, changes)"
            " SELECT 7, g, CASE WHEN g = 1 THEN 'created' ELSE 'updated' END,"
            " timestamptz '2030-03-01' + g * interval '30 s', 'test', 'active',"
            " CASE WHEN g % 500 = 1 THEN ARRAY['cron_expression', 'payload', 'timezone'] ELSE ARRAY['payload'] END,"
            " jsonb_build_object('payload', jsonb_build_object('blob', repeat(md5(g::text), 1875)))"
            "   || CASE WHEN g % 500 = 1 THEN jsonb_build_object('cron_expression', '*/' || (g % 7 + 1) || ' * * * *',"
            "      'timezone', 'Europe/Berlin') ELSE '{}'::jsonb END"
            " FROM generate_series(1, 2000) g"
        )
        await conn.execute("ANALYZE job_revisions")
        after = datetime(2030, 3, 1, 8, tzinfo=UTC)  # revision 960's instant; 961..1080 are in the hour after
        statements = {
            "TICK_REVISIONS": (views_q.TICK_REVISIONS, (7, after, after + timedelta(hours=1), 5001)),
            "TICK_SCHEDULE_AT": (views_q.TICK_SCHEDULE_AT, (7, 960)),
        }
        for name, (sql, args) in statements.items():
            for mode in ("force_custom_plan", "force_generic_plan"):
                tx = conn.transaction()
                await tx.start()
                try:
                    await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                    raw = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, *args)
                finally:
                    await tx.rollback()
                plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
                read = sum(
                    (n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)) * n.get("Actual Loops", 1)
                    for n in _nodes(plan)
                    if n.get("Relation Name") == "job_revisions"
                )
                # the window's 120 rows, read once to find them and once to return them, and a few more
                assert read <= 2 * 125 if name == "TICK_REVISIONS" else read <= 4, (name, mode, read)
        rows = await conn.fetch(views_q.TICK_REVISIONS, 7, after, after + timedelta(hours=1), 5001)
        assert [r["number"] for r in rows] == [1, *range(960, 1081)]
        changed = {r["number"]: r["changes"] for r in rows[1:] if r["changes"]}  # schedule fields only, no payload
        assert changed == {1001: {"cron_expression": "*/1 * * * *", "timezone": "Europe/Berlin"}}
        assert rows[0]["changes"] == {"cron_expression": "*/2 * * * *", "timezone": "Europe/Berlin"}
        assert await conn.fetchval(views_q.TICK_SCHEDULE_AT, 7, 960) == {
            "cron_expression": "*/5 * * * *",  # revision 501's
            "timezone": "Europe/Berlin",
        }
