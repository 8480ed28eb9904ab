"""JobStore: the API's reads and writes of jobs and runs.

Every write notifies `cronos_jobs` in the same transaction, so the dispatcher learns of
it at once and never of a change that rolled back, and records its audit entry and its
revision in that transaction too (cronos.store.audit, cronos.store.revisions), where the
job's ticks written ahead are handed over to the new definition. A change that changes
nothing writes nothing. Rows become Structs before they leave.

Writes take the caller's `actor` (a token's name, `local`, `admin-token`, ...) for the
audit trail and an optional `guard`, called with the stored job's kind (read under the row
lock, except by a trigger, which writes no job field) before anything is written: the API
refuses there what the caller's scope does not cover.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from cronos import instants, lifecycle, namespaces
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.models import JOB_WRITABLE, TERMINAL_STATUSES, Job, ManagedBy, Run
from cronos.namespaces import DEFAULT as DEFAULT_NAMESPACE
from cronos.redact import restore_secrets
from cronos.store import chains, pages, revisions
from cronos.store.audit import SYSTEM, record, snapshot
from cronos.store.db import ping, retry_contention, to_struct, translate_errors
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import runs as runs_q
from cronos.store.queries import upkeep as upkeep_q
from cronos.store.queries import views as views_q
from cronos.store.rules import check_calendars, check_group

log = logging.getLogger("cronos.store.jobs")

# The columns a client may set, in JOB_INSERT / JOB_UPDATE parameter order.
WRITABLE = JOB_WRITABLE
# Null unless given: apply's marker (only `cronos apply` sets it), windows and one-offs, the pace.
_NULLABLE = (
    "managed_by",
    "run_at",
    "start_at",
    "end_at",
    "max_runs",
    "catchup_max_per_s",
    "expectations",
    "every",
    "anchor",
    "owner",
    "concurrency_group",
    "hosts",
    "chain",
    "spread",
)

# Recorded in the creation's revision only when not empty (issue 25: calendars).
_EMPTY_UNLESS_SET = ("calendars", "schedules")

# bigint ids: anything larger cannot exist (and would make asyncpg raise).
MAX_ID = 2**63 - 1

Check = Callable[[dict[str, Any]], None]
Guard = Callable[[str], None]  # called with a stored job's kind; raises to refuse the write


def allow(kind: str) -> None:  # the guard of the system's own writes
    return None


def _forget_digest(current: Job, merged: Mapping[str, Any], changes: Mapping[str, Any]) -> ManagedBy | None:
    """A payload changed by anyone but its managing tool no longer matches that tool's digest of
    it: drop the digest, so the next `cronos apply` sends the file's secrets again."""
    managed: ManagedBy | None = merged["managed_by"]
    if "managed_by" in changes or managed is None or merged["payload"] == current.payload:
        return managed
    return msgspec.structs.replace(managed, secrets_digest=None)


def _notice(op: str, job_id: int) -> str:
    return msgspec.json.encode({"op": op, "job_id": job_id}).decode()


def _job(row: asyncpg.Record | None, job_id: int) -> Job:
    if row is None:
        raise NotFound(f"job {job_id} not found")
    return to_struct(row, Job)


async def _locked(conn: asyncpg.Connection, job_id: int, guard: Guard) -> Job:
    """The job, row-locked for this transaction, once `guard` accepted its kind (403 otherwise)."""
    job = _job(await conn.fetchrow(jobs_q.JOB_GET_FOR_UPDATE, job_id), job_id)
    guard(job.kind)
    return job


# The windows a page of a job's runs is looked for in, newest first: the day before the cursor
# (or now), then the week before that, then all older days (see RUN_LIST_OF_JOB).
RUN_WINDOWS = (timedelta(days=1), timedelta(days=7), None)


async def _runs_page(
    conn: asyncpg.Connection, job_id: int, state: str | None, tick: datetime | None, before_id: int | None, limit: int
) -> list[asyncpg.Record]:
    """Window by window until the page is full. The windows only spare reading old days: this
    host's clock (not the one due times are judged by) is good enough to place them."""
    rows: list[asyncpg.Record] = []
    newest, last_id, edge = tick, before_id, tick or datetime.now(UTC)
    for width in RUN_WINDOWS:
        lo = None if width is None else edge - width
        rows += await conn.fetch(views_q.RUN_LIST_OF_JOB, job_id, state, newest, last_id, limit - len(rows), lo)
        if len(rows) == limit or lo is None:
            break
        newest, last_id, edge = lo, 0, lo  # the next window: ticks before this one's oldest
    return rows


def _no_group(name: str | None) -> InvalidInput:
    """A job naming a concurrency group that does not exist (jobs.concurrency_group's foreign key)."""
    return InvalidInput(
        "$.concurrency_group",
        f"no concurrency group named {name!r}: create it first (PUT /api/concurrency-groups/{name}, "
        f"`cronos groups set {name} --limit N`, or `concurrency_groups:` in a jobs file)",
    )


def _taken(name: str, namespace: str) -> Conflict:
    return Conflict(f"a job named {name!r} already exists in namespace {namespace!r}")


def _missing(exc: asyncpg.ForeignKeyViolationError, fields: Mapping[str, Any]) -> NotFound | InvalidInput:
    """What a foreign key refused: the job's namespace (jobs_namespace_fkey) or its concurrency group."""
    if exc.constraint_name == "jobs_namespace_fkey":
        return namespaces.missing(fields["namespace"])
    return _no_group(fields.get("concurrency_group"))


class _DryRun(Exception):  # not an error: it ends a dry run's transaction
    """Raised in a dry run's transaction once the write and every check in it passed: it rolls
    the write back, so a dry run refuses exactly what the write would, by the same statements."""

    def __init__(self, job: Job) -> None:
        self.job = job


class JobStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(self, fields: Mapping[str, Any], *, actor: str = SYSTEM, dry_run: bool = False) -> tuple[Job, str]:
        """Insert a validated job; its cursor starts now, so no tick before creation is due.
        Returns the job and its webhook signing secret (for the API to show this once).
        `dry_run`: every check, the insert too, then rolled back (no secret)."""
        try:
            return await self._create(fields, actor, dry_run)
        except _DryRun as done:
            return done.job, ""

    async def _create(self, fields: Mapping[str, Any], actor: str, dry_run: bool) -> tuple[Job, str]:
        namespace = fields.get("namespace", DEFAULT_NAMESPACE)
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                if fields.get("parents"):
                    await chains.take_turn(conn)
                    await chains.check_parents(conn, None, fields["parents"], namespace)
                await check_calendars(conn, fields.get("calendars", []), namespace)
                await check_group(conn, fields.get("concurrency_group"), namespace)
                try:
                    # a caller may omit them
                    left_out: dict[str, Any] = {
                        "parents": [], "calendars": [], "labels": {}, "schedules": [], "namespace": namespace
                    }  # fmt: skip
                    values = dict.fromkeys(_NULLABLE) | left_out | dict(fields)
                    row = await conn.fetchrow(
                        jobs_q.JOB_INSERT, *(values[name] for name in WRITABLE), instants.EARLIEST
                    )
                except asyncpg.UniqueViolationError as exc:
                    raise _taken(fields["name"], namespace) from exc
                except asyncpg.ForeignKeyViolationError as exc:
                    raise _missing(exc, fields) from exc
                job = to_struct(row, Job)
                if dry_run:
                    raise _DryRun(job)
                secret: str = await conn.fetchval(jobs_q.JOB_WEBHOOK_SECRET, job.id)
                # Every field the job was created with (apply's marker, a window... only when set).
                defined = {
                    name: value
                    for name in WRITABLE
                    if ((value := getattr(job, name)) is not None or name not in _NULLABLE)
                    and (value or name not in _EMPTY_UNLESS_SET)
                }
                await revisions.record(conn, job, "created", actor, defined)
                await record(conn, actor, "job", "created", job_id=job.id, after=snapshot(job))
                await conn.execute(notifications_q.NOTIFY, _notice("created", job.id))
        log.info("job created", extra={"event": "job.created", "job_id": job.id, "actor": actor})
        return job, secret

    async def get(self, job_id: int) -> Job:
        if job_id > MAX_ID:
            raise NotFound(f"job {job_id} not found")
        with translate_errors():
            return _job(await self._pool.fetchrow(jobs_q.JOB_GET, job_id), job_id)

    async def list_jobs(
        self,
        status: str | None,
        after_id: int,
        limit: int,
        max_bytes: int,
        selector: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
    ) -> tuple[list[Job], bool]:
        """Jobs of `namespace` after `after_id` by id: at most `limit`, cut once their payloads reach `max_bytes`
        of JSON (at least one); with a selector (cronos.selectors.jsonpath) only those it selects.
        The flag says whether a next page may hold more."""
        with translate_errors():
            if selector is None and status is None:
                rows = await self._pool.fetch(jobs_q.JOB_LIST, after_id, limit, max_bytes, namespace)
            elif selector is None:
                async with self._pool.acquire() as conn, conn.transaction():
                    await conn.execute(views_q.PAGE_PLAN)
                    rows = await conn.fetch(jobs_q.JOB_LIST_STATUS, status, after_id, limit, max_bytes, namespace)
            else:
                return await self._list_selected(status, after_id, limit, max_bytes, selector, namespace)
        more = bool(rows) and (len(rows) == limit or len(rows) < rows[0]["fetched"])
        return [to_struct(row, Job) for row in rows], more

    async def _list_selected(
        self, status: str | None, after_id: int, limit: int, max_bytes: int, selector: str, namespace: str
    ) -> tuple[list[Job], bool]:
        """A selector's page: a slice by id, then, when it ends short, the labels index (cronos.store.pages)."""
        head = await self._pool.fetch(
            jobs_q.JOB_LIST_SELECTED, status, after_id, limit, max_bytes, selector, pages.SLICE, namespace
        )
        found = [row for row in head if row["id"] is not None]
        fetched, scanned = head[0]["fetched"], head[0]["scanned"]
        jobs = [to_struct(row, Job) for row in found]
        if len(found) < fetched:  # cut by the payload bytes
            return jobs, True
        spent = found[-1]["before"] + found[-1]["size"] if found else 0
        if not pages.goes_on(len(found), limit, scanned) or spent >= max_bytes:
            return jobs, len(found) == limit or scanned >= pages.SLICE
        after = head[0]["scanned_to"]
        rest = await self._pool.fetch(
            jobs_q.JOB_LIST_SELECTED_INDEXED, status, after, limit - len(found), max_bytes - spent, selector, namespace
        )
        more = bool(rest) and (len(rest) == limit - len(found) or len(rest) < rest[0]["fetched"])
        return jobs + [to_struct(row, Job) for row in rest], more

    async def update(
        self,
        job_id: int,
        changes: Mapping[str, Any],
        check: Check,
        *,
        actor: str = SYSTEM,
        guard: Guard = allow,
        dry_run: bool = False,
    ) -> Job:
        """Apply a partial update; `check` validates the merged job before anything is written.

        A payload that sends `***` back where the stored one holds a secret keeps that
        secret (cronos.redact.restore_secrets), so a GET-edit-PATCH round trip loses nothing;
        not across a change of kind or target (422: the caller sends the secret itself).
        A change that leaves every field as it is writes nothing: no revision, no timestamp,
        no notification.

        A new schedule moves the cursor to the change instant: ticks of the old schedule are
        not caught up under the new one, the old schedule's ticks written ahead are handed over
        (cronos.store.revisions) and the new one's are planned from that instant. A resume
        moves it to greatest(cursor, now()): the time the job was paused is not caught up.

        `dry_run`: every check, the update too, then rolled back.
        """
        try:
            # A deadlock with the leader's or an executor's writes to the job's runs rolls the whole
            # transaction back, so it is simply run again (it was a 503 to the caller).
            return await retry_contention(
                lambda: self._update(job_id, changes, check, actor, guard, dry_run), "job update"
            )
        except _DryRun as done:
            return done.job

    async def _update(
        self, job_id: int, changes: Mapping[str, Any], check: Check, actor: str, guard: Guard, dry_run: bool
    ) -> Job:
        if job_id > MAX_ID:
            raise NotFound(f"job {job_id} not found")
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                if "parents" in changes:
                    await chains.take_turn(conn)  # before any row lock: the order every chain write takes
                current = await _locked(conn, job_id, guard)
                merged = {name: getattr(current, name) for name in WRITABLE} | dict(changes)
                if "payload" in changes:
                    merged["payload"] = restore_secrets(
                        merged["kind"], merged["payload"], current.payload, stored_kind=current.kind
                    )
                    merged["managed_by"] = _forget_digest(current, merged, changes)
                check(merged)  # raises InvalidInput: the transaction rolls back, nothing written
                changed = revisions.changed_fields(current, merged)
                if not changed:
                    return current
                if "parents" in changed:
                    await chains.check_parents(conn, job_id, merged["parents"], current.namespace)
                if "calendars" in changed:
                    await check_calendars(conn, merged["calendars"], current.namespace)
                if "concurrency_group" in changed:
                    await check_group(conn, merged["concurrency_group"], current.namespace)
                new_schedule = revisions.new_schedule(changed, merged)
                resumed = changed.get("status") == "active"
                values = (merged[n] for n in WRITABLE)
                try:
                    row = await conn.fetchrow(
                        jobs_q.JOB_UPDATE, job_id, *values, current.revision + 1, new_schedule, resumed
                    )
                except asyncpg.UniqueViolationError as exc:
                    raise _taken(merged["name"], current.namespace) from exc
                except asyncpg.ForeignKeyViolationError as exc:
                    raise _missing(exc, merged) from exc
                job = _job(row, job_id)
                if dry_run:
                    raise _DryRun(job)
                await revisions.record(conn, job, revisions.kind_of(changed), actor, changed)
                await revisions.hand_over(conn, job, schedule_changed=new_schedule)
                await record(
                    conn, actor, "job", "updated", job_id=job_id, before=snapshot(current), after=snapshot(job),
                    detail={"fields": sorted(changes)},
                )  # fmt: skip
                await conn.execute(notifications_q.NOTIFY, _notice("updated", job_id))
        log.info(
            "job updated",
            extra={"event": "job.updated", "job_id": job_id, "fields": sorted(changed), "revision": job.revision,
                   "actor": actor},
        )  # fmt: skip
        return job

    async def set_status(
        self,
        job_id: int,
        status: str | None,
        *,
        actor: str = SYSTEM,
        guard: Guard = allow,
        until: datetime | None = None,
        note: str | None = None,
        dry_run: bool = False,
    ) -> Job:
        """Pause ('paused'), resume ('active') or toggle (None); resuming skips the paused time.
        A pause may carry `until` (the leader resumes the job then: dispatcher.pauses) and a
        note; a resume clears both. A job already in that status is left as it is (nothing
        written), unless a pause changes its `until` or note. `dry_run`: the checks only."""
        return await retry_contention(  # after a deadlock, run again (as `update`)
            lambda: self._set_status(job_id, status, actor, guard, until, note, dry_run), "job pause or resume"
        )

    async def _set_status(
        self,
        job_id: int,
        status: str | None,
        actor: str,
        guard: Guard,
        until: datetime | None,
        note: str | None,
        dry_run: bool,
    ) -> Job:
        if job_id > MAX_ID:
            raise NotFound(f"job {job_id} not found")
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                current = await _locked(conn, job_id, guard)
                if current.status in TERMINAL_STATUSES:
                    raise Conflict(
                        f"job {job_id} is {current.status}: it cannot be paused or resumed; "
                        "PATCH its window (start_at, end_at, max_runs, run_at) and status to run it again"
                    )
                target = status or ("paused" if current.status == "active" else "active")
                if target != "paused":
                    until, note = None, None
                if target == current.status and (until, note) == (current.paused_until, current.pause_note):
                    return current
                if dry_run:
                    return msgspec.structs.replace(current, status=target, paused_until=until, pause_note=note)
                row = await conn.fetchrow(jobs_q.JOB_SET_STATUS, job_id, target, current.revision + 1, until, note)
                job = _job(row, job_id)
                op: revisions.RevisionKind = "paused" if job.status == "paused" else "resumed"
                timed = {"paused_until": until, "pause_note": note} if until is not None or note is not None else {}
                await revisions.record(conn, job, op, actor, {"status": job.status, **timed})
                await revisions.hand_over(conn, job, schedule_changed=False)
                await record(conn, actor, "job", op, job_id=job_id, before=snapshot(current), after=snapshot(job))
                await conn.execute(notifications_q.NOTIFY, _notice(op, job_id))
        log.info(f"job {op}", extra={"event": f"job.{op}", "job_id": job_id, "actor": actor})
        return job

    async def delete(self, job_id: int, *, actor: str = SYSTEM, guard: Guard = allow, dry_run: bool = False) -> None:
        """Delete a job and its runs (ticks written ahead included: none can start); Conflict while
        other jobs name it as a parent (cronos.store.chains). Its audit entries and revisions stay
        (they name the job by id; a new job never reuses an id). `dry_run`: the checks only."""
        if job_id > MAX_ID:
            raise NotFound(f"job {job_id} not found")
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                current = await _locked(conn, job_id, guard)
                await chains.refuse_delete_of_parent(conn, job_id)
                if dry_run:
                    return
                gone = msgspec.structs.replace(current, revision=current.revision + 1)
                await revisions.record(conn, gone, "deleted", actor, {}, status="deleted")
                await conn.execute(jobs_q.JOB_DELETE, job_id)
                await record(conn, actor, "job", "deleted", job_id=job_id, before=snapshot(current))
                await conn.execute(notifications_q.NOTIFY, _notice("deleted", job_id))
        log.info("job deleted", extra={"event": "job.deleted", "job_id": job_id, "actor": actor})

    async def rotate_secret(self, job_id: int, *, actor: str = SYSTEM, guard: Guard = allow) -> tuple[Job, str]:
        """Draw a new webhook signing secret; executors read it with each claim (no notify)."""
        if job_id > MAX_ID:
            raise NotFound(f"job {job_id} not found")
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                await _locked(conn, job_id, guard)
                secret: str = await conn.fetchval(jobs_q.JOB_ROTATE_WEBHOOK_SECRET, job_id)
                job = _job(await conn.fetchrow(jobs_q.JOB_GET, job_id), job_id)
                await record(conn, actor, "job", "secret_rotated", job_id=job_id)
        log.info("webhook secret rotated", extra={"event": "job.secret_rotated", "job_id": job_id, "actor": actor})
        return job, secret

    async def trigger(self, job_id: int, *, actor: str = SYSTEM, guard: Guard = allow) -> Run:
        """Queue one manual run due now (the leader pushes its token); works for paused jobs too."""
        if job_id > MAX_ID:
            raise NotFound(f"job {job_id} not found")
        with translate_errors():
            for _attempt in range(3):
                async with self._pool.acquire() as conn, conn.transaction():
                    job = _job(await conn.fetchrow(jobs_q.JOB_GET, job_id), job_id)
                    guard(job.kind)
                    row = await conn.fetchrow(runs_q.RUN_INSERT_MANUAL, job_id, lifecycle.grace(job.misfire_grace_s))
                    if row is None:
                        if not await conn.fetchval(jobs_q.JOB_EXISTS, job_id):
                            raise NotFound(f"job {job_id} not found")
                        continue  # same tick identity already taken: a new transaction, a new now()
                    run = to_struct(row, Run)
                    await record(conn, actor, "job", "triggered", job_id=job_id, detail={"run_id": run.id})
                    await conn.execute(notifications_q.NOTIFY, _notice("triggered", job_id))
                log.info(
                    "job triggered",
                    extra={"event": "job.triggered", "job_id": job_id, "run_id": run.id, "actor": actor},
                )
                return run
        raise Conflict(f"job {job_id}: could not queue a manual run, try again")

    async def last_run(self, job_id: int) -> Run | None:
        with translate_errors():
            row = await self._pool.fetchrow(views_q.RUN_LAST_OF_JOB, job_id)
        return None if row is None else to_struct(row, Run)

    async def runs(
        self, job_id: int, state: str | None, before: tuple[datetime | None, int] | None, limit: int
    ) -> list[Run]:
        """A job's runs, newest tick first, after `before` (the last run seen: its tick, or None
        when only its id is known, and its id); NotFound when the job does not exist."""
        if job_id > MAX_ID:
            raise NotFound(f"job {job_id} not found")
        with translate_errors():
            async with self._pool.acquire() as conn:
                tick, before_id = before if before is not None else (None, None)
                if before is not None and tick is None:
                    tick = await conn.fetchval(views_q.RUN_TICK_OF_JOB, before_id, job_id)
                rows = (
                    []
                    if before is not None and tick is None
                    else (await _runs_page(conn, job_id, state, tick, before_id, limit))
                )
                if not rows and not await conn.fetchval(jobs_q.JOB_EXISTS, job_id):
                    raise NotFound(f"job {job_id} not found")
        return [to_struct(row, Run) for row in rows]

    async def run(self, run_id: int) -> Run:
        if run_id > MAX_ID:
            raise NotFound(f"run {run_id} not found")
        with translate_errors():
            row = await self._pool.fetchrow(views_q.RUN_GET, run_id)
        if row is None:
            raise NotFound(f"run {run_id} not found")
        return to_struct(row, Run)

    async def ping(self, timeout_s: float) -> None:
        """Raise BackendUnavailable unless PostgreSQL answers a trivial query within `timeout_s`."""
        await ping(self._pool, timeout_s)

    async def count_by_status(self) -> dict[str, int]:
        with translate_errors():
            rows = await self._pool.fetch(jobs_q.JOB_COUNT_BY_STATUS)
        return {row["status"]: int(row["n"]) for row in rows}

    async def leader_epoch(self) -> tuple[int, str | None]:
        """The current fencing epoch and the node it was issued to (cluster view)."""
        with translate_errors():
            row = await self._pool.fetchrow(upkeep_q.EPOCH_CURRENT)
        return (0, None) if row is None else (int(row["epoch"]), row["holder"])
