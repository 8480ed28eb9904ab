"""The dispatcher's side of the runs ledger: load jobs, write ticks, find queued runs to push.

Every write is fenced: it runs in a transaction that first takes the leader epoch row
FOR SHARE and compares it with the caller's epoch, so a deposed leader (paused past its
ttl, partitioned) writes nothing and gets NotLeader. Rows are columns in, Structs out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
from msgspec import UNSET, UnsetType

from cronos import lifecycle, metrics
from cronos.every_host import SKIP_PER_HOST
from cronos.models import DEFAULT_QUEUE, SKIP_MISFIRED, SKIP_PENDING, DispatchJob
from cronos.store.db import retry_contention, to_struct, translate_errors
from cronos.store.epoch import fenced
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import runs as runs_q
from cronos.store.timestamps import unusable_row

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class QueuedRun(msgspec.Struct, frozen=True, array_like=True):
    """A queued run as the stream needs it (times in UTC epoch ms)."""

    id: int
    job_id: int
    scheduled_for_ms: int
    attempt: int
    trigger: str
    due_ms: int
    queue: str = DEFAULT_QUEUE  # its job's: the stream its token goes to
    action: str | None = None  # its task job's payload.action (executors route on it)
    expires_ms: int | None = None  # its stamped expiry (lifecycle.expiry), which its token carries
    shell: bool = False  # its job is a shell job (executors route on it)
    written_ms: int | UnsetType = UNSET  # when this leader wrote it, stamped only while traces are on
    host: str | None = None  # a per-host run's executor (cronos.every_host)


class TickResult(msgspec.Struct, kw_only=True):
    queued: list[QueuedRun]  # new queued runs, marked pushed by this epoch
    skipped: int  # new skipped runs ("misfired", or SKIP_PENDING: `held` of them)
    ended: list[int] = []  # jobs this write ended (completed, expired)
    held: int = 0  # new runs skipped SKIP_PENDING (lifecycle.one_pending)


# Values many jobs share (their schedule, policies, queue, action; a cursor, until the first tick
# moves it): held once however many jobs a load brings, not once per row (a million rows bring a
# million copies). No two of these fields hold equal values of different types (0 and 0.0).
_SHARED = (
    "cron_expression",
    "timezone",
    "misfire_policy",
    "misfire_grace_s",
    "jitter_s",
    "concurrency_policy",
    "status",
    "queue",
    "action",
    "cursor",
)
# Rows converted at a time by a load: the event loop (the leader's lease renewal) runs in between.
LOAD_CHUNK = 5000
# Queued runs put back in the outbox by one statement of an unmark (election, Redis lost its data).
UNMARK_PAGE = 5000


# A job's instants the leader computes with: one outside cronos.instants' range skips the job.
_INSTANTS = ("cursor", "run_at", "start_at", "end_at", "anchor")


def _job(row: Any, shared: dict[Any, Any] | None = None) -> DispatchJob:
    if shared is None:
        return to_struct(row, DispatchJob)
    fields = dict(row)
    for name in _SHARED:
        if (value := fields[name]) is not None:
            fields[name] = shared.setdefault(value, value)
    return to_struct(fields, DispatchJob)


def _ms(instant: datetime) -> int:
    """Unix ms, the floor, exactly (the same as the ledger's floor(extract(epoch ...) * 1000))."""
    return (instant - _EPOCH) // timedelta(milliseconds=1)


def _expires(row: Any) -> datetime:
    """A taken run's expiry as stamped; one a leader of the release before wrote unstamped (a
    rolling upgrade) gets it from its job's grace, as lifecycle.expiry stamps it."""
    stamped: datetime | None = row["expires_at"]
    return stamped if stamped is not None else lifecycle.expiry(row["due_at"], row["misfire_grace_s"])


def _taken(row: Any, due_anew: datetime | None = None, expires_anew: datetime | None = None) -> QueuedRun:
    tick, due = _ms(row["scheduled_for"]), _ms(due_anew or row["due_at"])
    return QueuedRun(
        row["id"],
        row["job_id"],
        tick,
        row["attempt"],
        row["trigger"],
        due,
        row["queue"],
        row["action"],
        _ms(expires_anew or _expires(row)),
        row["shell"],
        host=row["host"],
    )


def _late_tick(row: Any, now: datetime) -> bool:
    """A scheduled tick past its stamped expiry at `now` (manual runs, retries and chain runs: their
    due time is their own): the misfire rule decides it, and one it keeps is due anew, now."""
    if row["trigger"] != "schedule" or row["attempt"] != 1:
        return False
    return lifecycle.expired(_expires(row), now)


def _stale(row: Any, now: datetime) -> bool:
    """A late tick (`_late_tick`) that its misfire policy does not run any more."""
    if not _late_tick(row, now):
        return False
    newest = row["cursor"] is not None and row["scheduled_for"] >= row["cursor"]
    return not lifecycle.stale_tick_runs(row["misfire_policy"], newest_written=newest)


def _fan_out(
    written: Sequence[Any],
    hosts: Mapping[int, Sequence[str]],
    job_ids: Sequence[int],
    scheduled_for: Sequence[datetime],
    due_at: Sequence[datetime],
    revision: Sequence[int],
    expires_at: Sequence[datetime],
) -> tuple[list[Any], ...]:
    """The columns of the per-host runs (TICKS_FAN_OUT): one per host beside each per-host tick just written."""
    planned = {(j, _ms(t)): i for i, (j, t) in enumerate(zip(job_ids, scheduled_for, strict=True)) if j in hosts}
    cols: tuple[list[Any], ...] = ([], [], [], [], [], [])
    for row in written:
        index = planned.get((row["job_id"], row["scheduled_for_ms"]))
        if index is None or row["skip_reason"] != SKIP_PER_HOST:
            continue
        for host in hosts[row["job_id"]]:
            values = (job_ids[index], scheduled_for[index], due_at[index], revision[index], host, expires_at[index])
            for col, value in zip(cols, values, strict=True):
                col.append(value)
    return cols


class Ledger:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        # Active jobs a load skipped (an unusable instant): the resync's digest counts them as held.
        self.skipped: set[int] = set()

    def _usable(self, rows: Sequence[Any]) -> list[Any]:
        kept = []
        for row in rows:
            if unusable_row(row, _INSTANTS, "jobs"):
                if row["status"] == "active":
                    self.skipped.add(row["id"])
            else:
                self.skipped.discard(row["id"])
                kept.append(row)
        return kept

    async def active_jobs(self, chunk: int = LOAD_CHUNK) -> AsyncGenerator[list[DispatchJob], None]:
        """Every active job, `chunk` at a time, from one snapshot: a million jobs are never all
        held as rows as well as Structs, and no conversion holds the event loop for long."""
        shared: dict[Any, Any] = {}
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
                cursor = await conn.cursor(jobs_q.DISPATCH_JOBS_ACTIVE)
                self.skipped.clear()
                while rows := await cursor.fetch(chunk):
                    yield [_job(r, shared) for r in self._usable(rows)]

    async def jobs(self, ids: Sequence[int]) -> list[DispatchJob]:
        """These jobs as they are now; missing ids were deleted."""
        with translate_errors():
            rows = await self._pool.fetch(jobs_q.DISPATCH_JOBS_BY_ID, list(ids))
        return [_job(r) for r in self._usable(rows)]

    async def changed_since(self, since: datetime) -> list[DispatchJob]:
        """Jobs created, edited, paused or resumed after `since` (as active or paused)."""
        with translate_errors():
            rows = await self._pool.fetch(jobs_q.DISPATCH_JOBS_CHANGED, since)
        shared: dict[Any, Any] = {}
        return [_job(r, shared) for r in self._usable(rows)]

    async def active_digest(self) -> tuple[int, int, datetime]:
        """(count, sum of ids) of the active jobs, and the database's now()."""
        with translate_errors():
            row = await self._pool.fetchrow(jobs_q.DISPATCH_ACTIVE_DIGEST)
        assert row is not None
        return int(row["jobs"]), int(row["id_sum"]), row["now"]

    async def write_ticks(
        self,
        epoch: int,
        job_ids: Sequence[int],
        scheduled_for: Sequence[datetime],
        due_at: Sequence[datetime],
        skip_reason: Sequence[str | None],
        revision: Sequence[int],
        ended: Mapping[int, tuple[str, int]] | None = None,
        *,
        expires_at: Sequence[datetime],
        queues: Mapping[int, str] | None = None,
        actions: Mapping[int, str | None] | None = None,
        counted: Collection[int] = (),
        shells: Collection[int] = (),
        held_at: Sequence[datetime | None] | None = None,
        now: datetime | None = None,
        fan_out: Mapping[int, Sequence[str]] | None = None,
    ) -> TickResult:
        """Insert ticks (queued or skipped), each with the job revision that planned it, and move
        each job's cursor to its newest one, in one fenced transaction. Jobs no longer active, or
        whose schedule changed after the revision that planned their ticks, get nothing. In the
        same transaction: the queued runs of the jobs in `counted` (those with a max_runs) are
        counted, and the jobs in `ended` (id -> terminal status, planning revision) end.
        `expires_at`: each tick's expiry (lifecycle.expiry: stamped on its run, carried by its
        token); `queues`: each job's queue (the stream its tokens go to), default otherwise;
        `actions`: each task job's action (carried by its tokens); `shells`: the shell jobs (their
        tokens say so); `held_at`: for each tick of a job that holds one pending run at most
        (lifecycle.one_pending), the round's instant, at which a run of the job not started, not
        expired and overdue at `now` (None: this clock) holds it back (None: nothing does);
        `fan_out`: each per-host job's hosts (cronos.every_host): a run per host beside each tick of it
        written here, with its tick's expiry."""
        ended_ids: list[int] = []
        held = [None] * len(job_ids) if held_at is None else list(held_at)

        async def attempt() -> list[Any]:
            # Two writers whose batches share a job (a long catch-up spans batches) may lock its
            # row in opposite orders: PostgreSQL rolls one back, and it is written again.
            async with fenced(self._pool, epoch) as conn:
                rows = await conn.fetch(
                    runs_q.TICKS_WRITE,
                    epoch,
                    job_ids,
                    scheduled_for,
                    due_at,
                    skip_reason,
                    revision,
                    held,
                    SKIP_PENDING,
                    lifecycle.overdue_before(now or datetime.now(UTC)),
                    expires_at,
                )
                if fan_out:
                    cols = _fan_out(rows, fan_out, job_ids, scheduled_for, due_at, revision, expires_at)
                    if cols[0]:
                        rows += await conn.fetch(runs_q.TICKS_FAN_OUT, epoch, *cols)
                runs = Counter(r["job_id"] for r in rows if r["state"] == "queued" and r["job_id"] in counted)
                if runs:
                    await conn.execute(jobs_q.JOBS_COUNT_RUNS, list(runs), list(runs.values()))
                if ended:
                    ids = list(ended)
                    done = await conn.fetch(
                        jobs_q.JOBS_END, ids, [ended[i][0] for i in ids], [ended[i][1] for i in ids]
                    )
                    ended_ids[:] = [r["job_id"] for r in done]
            return rows  # type: ignore[no-any-return]

        rows = await retry_contention(attempt, "tick write")
        queue_of = queues or {}
        action_of = actions or {}
        queued = [
            QueuedRun(
                r["id"],
                r["job_id"],
                r["scheduled_for_ms"],
                1,
                "schedule",
                r["due_ms"],
                queue_of.get(r["job_id"], DEFAULT_QUEUE),
                action_of.get(r["job_id"]),
                r["expires_ms"],
                r["job_id"] in shells,
                host=r.get("host"),
            )
            for r in rows
            if r["state"] == "queued"
        ]
        held_back = sum(1 for r in rows if r["skip_reason"] == SKIP_PENDING)
        anchors = sum(1 for r in rows if r["skip_reason"] == SKIP_PER_HOST) if fan_out else 0
        return TickResult(queued=queued, skipped=len(rows) - len(queued) - anchors, ended=ended_ids, held=held_back)

    async def take(
        self, epoch: int, now: datetime, until: datetime | None = None, limit: int = 5000
    ) -> tuple[list[QueuedRun], int]:
        """The outbox: queued runs not pushed in this epoch, due by `until` (default `now`), marked
        pushed by `epoch` (fenced), in due order; but those the misfire rule ends at `now` (skipped
        "misfired": their count)."""

        async def attempt() -> tuple[list[QueuedRun], int]:
            async with fenced(self._pool, epoch) as conn:
                await conn.execute(runs_q.OUTBOX_PLAN)
                rows = await conn.fetch(runs_q.OUTBOX_TAKE, until or now, limit)
                stale = {r["id"] for r in rows if _stale(r, now)}
                if stale:
                    await conn.fetch(runs_q.RUNS_SKIP_QUEUED, sorted(stale), SKIP_MISFIRED)
                push = sorted((r for r in rows if r["id"] not in stale), key=lambda r: (r["due_at"], r["id"]))
                # A kept stale tick is due anew, now, with its grace as stamped (lifecycle.due_anew).
                kept = {r["id"]: lifecycle.due_anew(r["due_at"], _expires(r), now) for r in push if _late_tick(r, now)}
                if push:
                    ids = sorted(kept)
                    await conn.fetch(
                        runs_q.OUTBOX_MARK, epoch, [r["id"] for r in push], ids, now, [kept[i] for i in ids]
                    )
            return [_taken(r, now, kept[r["id"]]) if r["id"] in kept else _taken(r) for r in push], len(stale)

        runs, misfired = await retry_contention(attempt, "outbox")
        metrics.RUNS_SKIPPED.labels(reason=SKIP_MISFIRED).inc(misfired)
        return runs, misfired

    async def next_due(self) -> datetime | None:
        """The due time of the first queued run not pushed (the outbox's next work)."""
        with translate_errors():
            value = await self._pool.fetchval(runs_q.OUTBOX_NEXT_DUE)
        return value  # type: ignore[no-any-return]

    async def unmark(self, epoch: int, page: int = UNMARK_PAGE) -> int:
        """Every queued run back in the outbox (election, Redis lost its data); how many. A page
        a fenced transaction, in id order (runs_q.OUTBOX_UNMARK: short statements, whatever the backlog)."""
        count, after = 0, 0
        while True:
            async with fenced(self._pool, epoch) as conn:
                await conn.execute(runs_q.OUTBOX_PLAN)
                ids = [r["id"] for r in await conn.fetch(runs_q.OUTBOX_UNMARK, after, page)]
            count += len(ids)
            if len(ids) < page:
                return count
            after = max(ids)

    async def unmark_overdue(
        self, epoch: int, late_s: float, leave_out: Sequence[int], limit: int = 1000, queues_out: Sequence[str] = ()
    ) -> list[int]:
        """Queued runs pushed but unclaimed `late_s` past due (by PostgreSQL's clock), oldest first,
        but those in `leave_out` and those of jobs in `queues_out`, back in the outbox (fenced); their ids."""
        async with fenced(self._pool, epoch) as conn:
            await conn.execute(runs_q.OUTBOX_PLAN)
            rows = await conn.fetch(runs_q.OUTBOX_UNMARK_OVERDUE, late_s, list(leave_out), limit, list(queues_out))
        return [r["id"] for r in rows]
