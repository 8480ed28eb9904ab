"""Pages of jobs at any number of jobs (issue 27, item 4): a filtered page (a selector, a name
search, a status) reads a slice by id, then the filter's index; no statement reads every job for a
filter that matches few, with PostgreSQL's generic plan (a prepared statement's, after five runs)
as with a custom one; and the pages hold every match, in id order, across the slice and the index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from cronos import selectors
from cronos.store import pages
from cronos.store.jobs import JobStore
from cronos.store.overview import RATE_OVER, RECENT, OverviewStore, name_pattern
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import views as views_q

JOBS = 20_000
SLICE = 1000  # the statements' slice here (the store's is pages.SLICE)
BOUND = 2 * SLICE  # rows a page may read from jobs: its slice, its page, its matches
NS = "default"  # the namespace every job here is in (each statement's last parameter)


@pytest.fixture
async def fleet(pg_pool: asyncpg.Pool) -> asyncpg.Pool:
    """20,000 jobs; 30 of them labelled team=rare and named rare-*, among the last thousand; none paused."""
    await pg_pool.execute(
        "INSERT INTO jobs (name, cron_expression, kind, payload, labels)"
        " SELECT CASE WHEN g % 37 = 0 AND g > $1 - 1110 THEN 'rare-' ELSE 'job-' END || g, '@daily', 'task',"
        ' \'{"action": "noop"}\','
        " jsonb_build_object('team', CASE WHEN g % 37 = 0 AND g > $1 - 1110 THEN 'rare' ELSE 'web-' || g % 7 END)"
        " FROM generate_series(1, $1) g",
        JOBS,
    )
    await pg_pool.execute("ANALYZE jobs")
    return pg_pool


async def jobs_read(pool: asyncpg.Pool, sql: str, *args: Any, prelude: str = "") -> int:
    """The most rows a statement read from jobs and its indexes, over a custom and a generic plan
    (after `prelude`, the statement its caller sends first in the same transaction)."""
    read = []
    for mode in ("force_custom_plan", "force_generic_plan"):
        async with pool.acquire() as conn:
            await conn.execute(f"SET plan_cache_mode = {mode}")
            if prelude:
                await conn.execute(prelude.replace("SET LOCAL", "SET"))
            await conn.execute(f"PREPARE page AS {sql}")
            try:
                raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE page({_literals(args)})")
            finally:
                await conn.execute("DEALLOCATE page")
                await conn.execute("RESET plan_cache_mode")
        plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
        read.append(
            sum(
                (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * node.get("Actual Loops", 1)
                for node in _nodes(plan)
                if node.get("Relation Name") == "jobs" or str(node.get("Index Name", "")).startswith("jobs")
            )
        )
    return max(read)


def _literals(args: tuple[Any, ...]) -> str:
    """EXECUTE's arguments as SQL literals (EXECUTE takes no bind parameters)."""
    quoted = ["NULL" if a is None else str(a) if isinstance(a, int) else "'" + a.replace("'", "''") + "'" for a in args]
    return ", ".join(quoted)


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _path(text: str) -> str:
    return selectors.jsonpath(selectors.parse(text))


async def test_no_page_statement_reads_every_job_for_a_filter_that_matches_few(fleet: asyncpg.Pool) -> None:
    rare, none, search = _path("team=rare"), _path("team=nobody"), name_pattern("rare-")
    statements: dict[str, tuple[str, tuple[Any, ...]]] = {
        "JOB_LIST": (jobs_q.JOB_LIST, (JOBS // 2, 50, 2**40, NS)),
        "JOB_LIST_STATUS": (jobs_q.JOB_LIST_STATUS, ("paused", 0, 50, 2**40, NS)),
        "JOB_LIST_SELECTED": (jobs_q.JOB_LIST_SELECTED, (None, 0, 50, 2**40, none, SLICE, NS)),
        "JOB_LIST_SELECTED_INDEXED": (jobs_q.JOB_LIST_SELECTED_INDEXED, (None, SLICE, 50, 2**40, rare, NS)),
        "JOB_OVERVIEW": (views_q.JOB_OVERVIEW, (JOBS // 2, 25, RATE_OVER, RECENT, NS)),
        "JOB_OVERVIEW_STATUS": (views_q.JOB_OVERVIEW_STATUS, ("paused", 0, 25, RATE_OVER, RECENT, NS)),
        "JOB_OVERVIEW_FILTERED": (
            views_q.JOB_OVERVIEW_FILTERED,
            ("paused", search, 0, 25, RATE_OVER, RECENT, none, SLICE, NS),
        ),
        "JOB_OVERVIEW_SEARCHED": (
            views_q.JOB_OVERVIEW_SEARCHED,
            (None, search, SLICE, 25, RATE_OVER, RECENT, None, NS),
        ),
        "JOB_OVERVIEW_SELECTED": (views_q.JOB_OVERVIEW_SELECTED, (None, SLICE, 25, RATE_OVER, RECENT, rare, NS)),
    }
    preludes = dict.fromkeys(("JOB_LIST_STATUS", "JOB_OVERVIEW_STATUS", "JOB_OVERVIEW_SEARCHED"), views_q.PAGE_PLAN)
    read = {
        name: await jobs_read(fleet, sql, *args, prelude=preludes.get(name, ""))
        for name, (sql, args) in statements.items()
    }
    # A name search's matches: at 20,000 jobs PostgreSQL rightly reads the table once (cheaper than
    # the trigram index at that size); at a million, the index (`cronos bench million`).
    bounds = {"JOB_OVERVIEW_SEARCHED": JOBS + BOUND}
    over = {k: v for k, v in read.items() if v > bounds.get(k, BOUND)}
    assert over == {}, read


async def test_a_narrow_selector_page_goes_on_through_the_index_in_id_order(
    fleet: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "SLICE", SLICE)
    store = JobStore(fleet)
    expected = [r["id"] for r in await fleet.fetch("SELECT id FROM jobs WHERE labels->>'team' = 'rare' ORDER BY id")]
    assert len(expected) == 30
    found: list[int] = []
    after, more = 0, True
    while more:
        page, more = await store.list_jobs(None, after, 12, 2**40, _path("team=rare"))
        assert len(page) == 12 or not more, "a narrow filter's pages are full, not a few found in a slice"
        found += [job.id for job in page]
        after = page[-1].id if page else after
    assert found == expected
    broad, more = await store.list_jobs("active", 0, 50, 2**40, _path("team=web-3"))
    assert len(broad) == 50 and more and all(job.labels["team"] == "web-3" for job in broad)
    assert await store.list_jobs(None, 0, 50, 2**40, _path("team=nobody")) == ([], False)


async def test_the_consoles_search_selector_and_status_pages(
    fleet: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "SLICE", SLICE)
    store = OverviewStore(fleet)
    rare = [r["id"] for r in await fleet.fetch("SELECT id FROM jobs WHERE name LIKE 'rare-%' ORDER BY id")]
    assert [row.id for row in await store.jobs(None, "RARE-", 0, 50)] == rare  # any case
    first = await store.jobs(None, "rare-", 0, 20)
    rest = await store.jobs(None, "rare-", first[-1].id, 20)
    assert [row.id for row in first + rest] == rare
    assert [row.id for row in await store.jobs("active", None, 0, 50, _path("team=rare"))] == rare
    assert await store.jobs("paused", None, 0, 25) == []
    assert await store.jobs(None, "rare-", 0, 25, _path("team=nobody")) == []
    plain = await store.jobs(None, None, 100, 25)
    assert [row.id for row in plain] == list(range(plain[0].id, plain[0].id + 25))
    assert len(await store.jobs("active", None, 0, 25)) == 25
