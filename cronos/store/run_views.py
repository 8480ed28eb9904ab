"""All runs, one view (GET /api/runs): filtered by state, job, queue, trigger and tick range, newest
first, a page at a time.

Newest first is by id: the order runs entered the ledger (a retry or a manual run sits where it was
queued, not at its tick). A page is read from one index, chosen by `access_path` (pure), walking at
most SCAN entries of it below the cursor; the other filters are tested on what it read. A filter
that matches rarely makes a short page (even an empty one) with a cursor to go on from, never a
read of the whole ledger or of a backlog. The runs an operator looks for most, failed, skipped or
cancelled ones, have partial indexes of their own (migration 0030), so their pages come full.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import asyncpg
import msgspec

from cronos.models import Run
from cronos.namespaces import DEFAULT as DEFAULT_NAMESPACE
from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import views as views_q

# The states of runs_unhappy_newest and runs_unhappy_job (migration 0030; RUNS_PAGE_UNHAPPY*).
UNHAPPY = frozenset({"failed", "skipped", "cancelled"})
SCAN = 2000  # index entries a page reads at most
MAX_ID = 2**63 - 1
_DAY = timedelta(days=1)
_EPOCH_DAY = datetime(1970, 1, 1, tzinfo=UTC)
_LAST_DAY = datetime(9999, 12, 31, tzinfo=UTC)


class RunFilter(msgspec.Struct, frozen=True, kw_only=True):
    """What GET /api/runs asks for (each field empty or None: any)."""

    states: tuple[str, ...] = ()
    job_id: int | None = None
    queue: str | None = None
    trigger: str | None = None
    since: datetime | None = None  # scheduled_for >= since
    until: datetime | None = None  # scheduled_for < until
    namespace: str = DEFAULT_NAMESPACE  # the runs of this namespace's jobs only


class RunPage(msgspec.Struct, kw_only=True):
    runs: list[Run]
    next_before: int | None  # the cursor: ids below this one come next; None: nothing more


class Path(StrEnum):
    ALL = "all"  # the primary key (id)
    JOB = "job"  # runs_job_newest (job_id, id DESC)
    UNHAPPY = "unhappy"  # runs_unhappy_newest
    UNHAPPY_JOB = "unhappy_job"  # runs_unhappy_job


STATEMENTS = {
    Path.ALL: views_q.RUNS_PAGE,
    Path.JOB: views_q.RUNS_PAGE_OF_JOB,
    Path.UNHAPPY: views_q.RUNS_PAGE_UNHAPPY,
    Path.UNHAPPY_JOB: views_q.RUNS_PAGE_UNHAPPY_OF_JOB,
}


def access_path(wanted: RunFilter) -> Path:
    """The index a page is read from: the partial one when only failed, skipped or cancelled runs
    are asked for, the job's own when a job is."""
    unhappy = bool(wanted.states) and set(wanted.states) <= UNHAPPY
    if wanted.job_id is not None:
        return Path.UNHAPPY_JOB if unhappy else Path.JOB
    return Path.UNHAPPY if unhappy else Path.ALL


def day_bounds(since: datetime | None, until: datetime | None) -> tuple[datetime | None, datetime | None]:
    """The whole UTC days holding [since, until): the runs table's day partitions outside them are
    pruned, and no row of those inside is cut (so a page's scan counts only rows it may return)."""
    lo = None if since is None else _EPOCH_DAY + (since - _EPOCH_DAY) // _DAY * _DAY
    hi = None
    if until is not None and until < _LAST_DAY:  # past it, the next midnight is beyond datetime: open
        hi = _EPOCH_DAY + -((_EPOCH_DAY - until) // _DAY) * _DAY
    return lo, hi


def next_before(page: list[Run], limit: int, scan_end: tuple[int, int] | None) -> int | None:
    """Where the next page starts: after a full page, below its last run; after a scan that stopped
    at SCAN entries (`scan_end`: how many it read, the id of the last), below the last one it read;
    None once the index had nothing more."""
    if len(page) == limit:
        return page[-1].id
    if scan_end is not None and scan_end[0] >= SCAN:
        return scan_end[1]
    return None


def statement_args(wanted: RunFilter, before: int | None, limit: int) -> list[Any]:
    """The arguments of `wanted`'s statement (STATEMENTS[access_path(wanted)]), in its order."""
    lo, hi = day_bounds(wanted.since, wanted.until)
    args = [
        MAX_ID if before is None else before, lo, hi, SCAN, list(wanted.states) or None, wanted.trigger,
        wanted.since, wanted.until, wanted.queue, limit,
    ]  # fmt: skip
    if access_path(wanted) in (Path.JOB, Path.UNHAPPY_JOB):
        args.append(wanted.job_id)
    args.append(wanted.namespace)
    return args


async def runs_page(pool: asyncpg.Pool, wanted: RunFilter, before: int | None, limit: int) -> RunPage:
    """A page of runs, newest first, with ids below `before` (None: from the newest)."""
    path = access_path(wanted)
    with translate_errors():
        rows = await pool.fetch(STATEMENTS[path], *statement_args(wanted, before, limit))
    hits = [r for r in rows if not r["scan_end"]]
    runs = sorted((to_struct({**r, "traceback": None, "result": None}, Run) for r in hits), key=lambda r: -r.id)
    end = next(((r["scanned"], r["id"]) for r in rows if r["scan_end"]), None)
    return RunPage(runs=runs, next_before=next_before(runs, limit, end))
