"""GET /api/runs reads in proportion to its page, not to the ledger nor to a backlog, for every
combination of its filters, with a custom and a generic plan (the API's pool plans generically),
while the statistics are stale (taken before a backlog of queued runs appeared).

The ledger: 20,000 completed runs over ten day partitions, a few hundred failed and skipped ones
among them, then 20,000 queued runs (the newest ids). Each combination runs under EXPLAIN ANALYZE;
the check counts the rows its plan read from `runs`' partitions (a deterministic cost, not a time)
and names the indexes it read them through (no partition is scanned sequentially).
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from cronos.store import run_views
from cronos.store.run_views import SCAN, STATEMENTS, Path, RunFilter, access_path, statement_args
from tests.integration.test_query_plans import _nodes, _partitions

DAYS = 10
COMPLETED = 20_000
BACKLOG = 20_000
LIMIT = 50
SERVED = ((), ("failed", "skipped"))  # state filters an index answers by itself
FIRST_DAY = datetime(2030, 5, 1, tzinfo=UTC)

# The index each path reads (its partitions' indexes inherit from it).
INDEX = {
    Path.ALL: "runs_pkey",
    Path.JOB: "runs_job_newest",
    Path.UNHAPPY: "runs_unhappy_newest",
    Path.UNHAPPY_JOB: "runs_unhappy_job",
}


@pytest.fixture
async def ledger(pg_pool: asyncpg.Pool) -> dict[str, Any]:
    async with pg_pool.acquire() as conn:
        for day in range(DAYS):
            start = FIRST_DAY + timedelta(days=day)
            name = f"runs_{start:%Y%m%d}"
            await conn.execute(
                f'CREATE TABLE "{name}" (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
                " WITH (autovacuum_enabled = false)"
            )
            await conn.execute(
                f"ALTER TABLE runs ATTACH PARTITION \"{name}\" FOR VALUES FROM ('{start.isoformat()}')"
                f" TO ('{(start + timedelta(days=1)).isoformat()}')"
            )
        await conn.execute(
            "INSERT INTO jobs (name, cron_expression, queue)"
            " SELECT 'job-' || g, '* * * * *', CASE WHEN g = 1 THEN 'gpu' ELSE 'default' END"
            " FROM generate_series(1, 100) g"
        )
        first_job = await conn.fetchval("SELECT min(id) FROM jobs")
        # ticks spread over the days, ids not in tick order; every 97th failed, every 89th skipped,
        # every 500th manual
        await conn.execute(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at, finished_at, error, skip_reason)"
            " SELECT $1 + g % 100, $2::timestamptz + (g * 7919 % $3) * ($4::float8 * interval '1 day' / $3), 1,"
            " CASE WHEN g % 500 = 0 THEN 'manual' ELSE 'schedule' END,"
            " CASE WHEN g % 97 = 0 THEN 'failed' WHEN g % 89 = 0 THEN 'skipped' ELSE 'completed' END,"
            " $2::timestamptz, now(), CASE WHEN g % 97 = 0 THEN 'boom' END,"
            " CASE WHEN g % 97 <> 0 AND g % 89 = 0 THEN 'misfired' END"
            " FROM generate_series(1, $3) g",
            first_job,
            FIRST_DAY,
            COMPLETED,
            float(DAYS),
        )
        await conn.execute("ANALYZE runs")
        # the backlog: queued runs of the last day, the newest ids
        await conn.execute(
            "INSERT INTO runs (job_id, scheduled_for, attempt, trigger, state, due_at)"
            " SELECT $1 + g % 100, $2::timestamptz + g * interval '1 ms', 1, 'schedule', 'queued', $2::timestamptz"
            " FROM generate_series(1, $3) g",
            first_job,
            FIRST_DAY + timedelta(days=DAYS - 1),
            BACKLOG,
        )
        rows = await conn.fetch(
            "SELECT c.relname AS child, p.relname AS parent FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent"
            " WHERE p.relname = ANY($1::text[])",
            list(INDEX.values()),
        )
        # job 8 is in queue `default`; the partitions' indexes by the index of `runs` they belong to
        job, unhappy = first_job + 7, "state IN ('failed', 'skipped', 'cancelled')"
        entries = {  # how many entries each path's index holds (of this job)
            Path.ALL: await conn.fetchval("SELECT count(*) FROM runs"),
            Path.JOB: await conn.fetchval("SELECT count(*) FROM runs WHERE job_id = $1", job),
            Path.UNHAPPY: await conn.fetchval(f"SELECT count(*) FROM runs WHERE {unhappy}"),
            Path.UNHAPPY_JOB: await conn.fetchval(f"SELECT count(*) FROM runs WHERE {unhappy} AND job_id = $1", job),
        }
    return {"job": job, "entries": entries, "parents": {r["child"]: r["parent"] for r in rows}}


def _filters(job: int) -> list[RunFilter]:
    day = FIRST_DAY + timedelta(days=4, hours=6)
    states: list[tuple[str, ...]] = [(), ("failed",), ("failed", "skipped"), ("completed",), ("queued",), ("running",)]
    found = []
    for st, job_id, queue, trigger, since in itertools.product(
        states, (None, job), (None, "gpu"), (None, "manual"), (None, day)
    ):
        until = None if since is None else since + timedelta(days=1)
        found.append(RunFilter(states=st, job_id=job_id, queue=queue, trigger=trigger, since=since, until=until))
    return found


async def _explain(pool: asyncpg.Pool, wanted: RunFilter, mode: str) -> dict[str, Any]:
    args = statement_args(wanted, None, LIMIT)
    path = access_path(wanted)
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
            raw = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + STATEMENTS[path], *args)
        finally:
            await tx.rollback()
    plan: dict[str, Any] = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    return plan


async def test_every_filter_combination_reads_one_index_and_at_most_a_scan(
    pg_pool: asyncpg.Pool, ledger: dict[str, Any]
) -> None:
    async with pg_pool.acquire() as conn:
        days = await _partitions(conn)
    parents = ledger["parents"]
    worst: dict[str, int] = {}
    for wanted in _filters(ledger["job"]):
        path = access_path(wanted)
        for mode in ("force_custom_plan", "force_generic_plan"):
            plan = await _explain(pg_pool, wanted, mode)
            scans = [n for n in _nodes(plan) if n.get("Relation Name") in days and n.get("Actual Loops")]
            seq = [(n["Relation Name"], n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) for n in scans
                   if "Seq Scan" in n["Node Type"]]  # fmt: skip
            # (PostgreSQL may scan an empty partition sequentially: it reads nothing)
            assert not [name for name, rows in seq if rows], (wanted, mode, seq)
            used = {parents.get(n["Index Name"], n["Index Name"]) for n in scans if "Index Name" in n}
            assert used <= {INDEX[path]}, (wanted, mode, used)
            read = sum(
                (n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"] for n in scans
            )
            # a scan of at most SCAN entries, plus the one row each partition's index offers the merge
            assert read <= SCAN + len(days), (wanted, mode, read)
            # served by its index alone: a page and the merge's rows, whatever the ledger holds; an
            # index with fewer entries than a scan may be read whole (a job's 400 runs, of 40,000)
            exact = not (wanted.queue or wanted.trigger or wanted.since) and wanted.states in SERVED
            if exact:
                bound = LIMIT + len(days) if ledger["entries"][path] > SCAN else ledger["entries"][path]
                assert read <= bound, (wanted, mode, read, bound)
            key = f"{path}{' exact' if exact else ''}"
            worst[key] = max(worst.get(key, 0), read)
    print("rows read at most, by path:", worst)  # for the note: the figures behind the bounds


async def test_a_page_of_failures_reads_only_failures(pg_pool: asyncpg.Pool, ledger: dict[str, Any]) -> None:
    """Every failed run of the ledger (206 of 40,000 runs) in pages of 50: each page reads its own
    rows from the partial index, nothing of the completed runs or of the backlog."""
    wanted = RunFilter(states=("failed",))
    failed = await pg_pool.fetchval("SELECT count(*) FROM runs WHERE state = 'failed'")
    seen, before = 0, None
    while True:
        page = await run_views.runs_page(pg_pool, wanted, before, LIMIT)
        seen += len(page.runs)
        assert all(r.state == "failed" for r in page.runs)
        if page.next_before is None:
            break
        before = page.next_before
    assert seen == failed > LIMIT
