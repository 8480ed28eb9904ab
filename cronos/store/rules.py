"""Calendars, blackouts and timed pauses in PostgreSQL (issue 25; the decisions: cronos.rules).

Every write is audited and notifies `cronos_jobs` {"op": "rules"} in its transaction, so the
leader reloads its rule book at once (and its periodic resync compares a digest as a safety net).
The lifting of a timed pause is the leader's, fenced by its epoch (`resume_due`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from cronos import instants, namespaces
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.models import Job
from cronos.rules import Blackout, Calendar, CalendarRef
from cronos.store import revisions
from cronos.store.audit import record, snapshot
from cronos.store.db import to_struct, translate_errors
from cronos.store.epoch import fenced
from cronos.store.queries import jobs as jobs_q
from cronos.store.queries import notifications as notifications_q
from cronos.store.timestamps import unusable_row

log = logging.getLogger("cronos.store.rules")

RULES_NOTICE = msgspec.json.encode({"op": "rules", "job_id": None}).decode()
LEADER = "dispatcher"  # the actor of a pause the leader lifts
_BLACKOUT_INSTANTS = ("starts_at", "ends_at")


def _calendar(row: asyncpg.Record) -> Calendar:
    return to_struct(row, Calendar)


async def check_calendars(conn: asyncpg.Connection, refs: Sequence[CalendarRef], namespace: str) -> None:
    """Every calendar a job names exists in the job's namespace (locked against a delete until this
    transaction ends)."""
    names = [ref.name for ref in refs]
    if not names:
        return
    found = {row["name"]: row["namespace"] for row in await conn.fetch(jobs_q.CALENDARS_NAMED, names)}
    for index, name in enumerate(names):
        if name not in found:
            raise InvalidInput(f"$.calendars[{index}].name", f"no calendar named {name!r} (POST /api/calendars)")
        if found[name] != namespace:
            raise InvalidInput(f"$.calendars[{index}].name", foreign("calendar", name, found[name], namespace))


async def check_group(conn: asyncpg.Connection, name: str | None, namespace: str) -> None:
    """The concurrency group a job names is in the job's namespace (a missing one: the foreign key's)."""
    if name is None:
        return
    owner = await conn.fetchval(jobs_q.GROUP_NAMESPACE, name)
    if owner is not None and owner != namespace:
        raise InvalidInput("$.concurrency_group", foreign("concurrency group", name, owner, namespace))


def foreign(what: str, name: str, owner: str, namespace: str) -> str:
    return f"{what} {name!r} is in namespace {owner!r}, not {namespace!r}: a job names only its own namespace's"


class RuleStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._reported: set[int] = set()  # jobs whose unusable pause was logged (next_resume)

    # --- the leader's view ---

    async def load(self) -> tuple[list[Calendar], list[Blackout]]:
        """The rules to compute with: a blackout whose window is unusable is skipped (timestamps.unusable_row)."""
        return await self._read(usable_only=True)

    async def _read(self, *, usable_only: bool) -> tuple[list[Calendar], list[Blackout]]:
        with translate_errors():
            async with self._pool.acquire() as conn:
                calendars = [_calendar(row) for row in await conn.fetch(jobs_q.CALENDARS_ALL)]
                rows = await conn.fetch(jobs_q.BLACKOUTS_ALL)
        if usable_only:
            rows = [row for row in rows if not unusable_row(row, _BLACKOUT_INSTANTS, "blackouts")]
        return calendars, [to_struct(row, Blackout) for row in rows]

    # --- calendars ---

    async def calendars(self) -> list[Calendar]:
        return (await self._read(usable_only=False))[0]

    async def calendar(self, name: str) -> Calendar:
        with translate_errors():
            row = await self._pool.fetchrow(jobs_q.CALENDAR_GET, name)
        if row is None:
            raise NotFound(f"calendar {name!r} not found")
        return _calendar(row)

    async def put_calendar(self, calendar: Calendar, *, actor: str, replace: bool = True) -> tuple[Calendar, bool]:
        """Create or replace (`replace=False`: create only, Conflict when the name exists); True when created."""
        c = calendar
        ranges = [msgspec.to_builtins(r) for r in c.ranges]
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                values = (c.name, c.timezone, c.dates, ranges, c.weekdays, c.description, c.namespace)
                try:
                    row = await conn.fetchrow(jobs_q.CALENDAR_PUT if replace else jobs_q.CALENDAR_INSERT, *values)
                except asyncpg.ForeignKeyViolationError as exc:
                    raise namespaces.missing(c.namespace) from exc
                if row is None and replace:
                    raise Conflict(f"calendar {c.name!r} belongs to another namespace than {c.namespace!r}")
                if row is None:
                    raise Conflict(f"a calendar named {c.name!r} exists: PUT /api/calendars/{c.name} replaces it")
                op = "created" if row["created"] else "updated"
                await record(conn, actor, "calendar", op, detail={"calendar": msgspec.to_builtins(c)})
                await conn.execute(notifications_q.NOTIFY, RULES_NOTICE)
        log.info(f"calendar {op}", extra={"event": f"calendar.{op}", "calendar": c.name, "actor": actor})
        return _calendar(row), op == "created"

    async def delete_calendar(self, name: str, *, actor: str) -> None:
        """Conflict while a job names it."""
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                users = [row["id"] for row in await conn.fetch(jobs_q.CALENDAR_USERS, name)]
                if users:
                    raise Conflict(f"calendar {name!r} is attached to job(s) {users}: detach it first")
                if await conn.fetchval(jobs_q.CALENDAR_DELETE, name) is None:
                    raise NotFound(f"calendar {name!r} not found")
                await record(conn, actor, "calendar", "deleted", detail={"calendar": name})
                await conn.execute(notifications_q.NOTIFY, RULES_NOTICE)
        log.info("calendar deleted", extra={"event": "calendar.deleted", "calendar": name, "actor": actor})

    # --- blackouts ---

    async def blackouts(self) -> list[Blackout]:
        """Every blackout, an unusable one too: listed, an operator can see it and delete it."""
        return (await self._read(usable_only=False))[1]

    async def blackout(self, blackout_id: int) -> Blackout:
        with translate_errors():
            row = await self._pool.fetchrow(jobs_q.BLACKOUT_GET, blackout_id)
        if row is None:
            raise NotFound(f"blackout {blackout_id} not found")
        return to_struct(row, Blackout)

    async def create_blackout(self, fields: dict[str, Any], *, actor: str) -> Blackout:
        f = fields
        values = (f["name"], f["action"], f.get("starts_at"), f.get("ends_at"), f.get("cron_expression"),
                  f.get("duration_s"), f["timezone"], msgspec.to_builtins(f["selector"]), f["note"])  # fmt: skip
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                try:
                    row = await conn.fetchrow(jobs_q.BLACKOUT_INSERT, *values)
                except asyncpg.UniqueViolationError as exc:
                    raise Conflict(f"a blackout named {f['name']!r} already exists") from exc
                blackout = to_struct(row, Blackout)
                await record(conn, actor, "blackout", "created", detail={"blackout": msgspec.to_builtins(blackout)})
                await conn.execute(notifications_q.NOTIFY, RULES_NOTICE)
        log.info("blackout created", extra={"event": "blackout.created", "blackout": blackout.name, "actor": actor})
        return blackout

    async def delete_blackout(self, blackout_id: int, *, actor: str) -> None:
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                name = await conn.fetchval(jobs_q.BLACKOUT_DELETE, blackout_id)
                if name is None:
                    raise NotFound(f"blackout {blackout_id} not found")
                await record(conn, actor, "blackout", "deleted", detail={"blackout": name, "id": blackout_id})
                await conn.execute(notifications_q.NOTIFY, RULES_NOTICE)
        log.info("blackout deleted", extra={"event": "blackout.deleted", "blackout": name, "actor": actor})

    # --- timed pauses (the leader's, fenced) ---

    async def next_resume(self) -> datetime | None:
        """The end of the first timed pause to lift. One until an instant outside cronos.instants'
        range is never lifted: skipped, logged and counted once for this store (the leader's term)."""
        span = (instants.EARLIEST, instants.END)
        with translate_errors():
            async with self._pool.acquire() as conn:
                found: datetime | None = await conn.fetchval(jobs_q.PAUSES_NEXT, *span)
                unusable = await conn.fetch(jobs_q.PAUSES_UNUSABLE, *span)
        for row in unusable:
            if row["id"] not in self._reported and unusable_row(row, ("paused_until",), "pauses"):
                self._reported.add(row["id"])
        return found

    async def resume_due(self, epoch: int, limit: int = 100) -> list[Job]:
        """Resume the jobs whose pause ends now or before, as a resume by hand does (the paused time
        is not caught up), each audited and revised as the leader's; NotLeader unless `epoch` is current."""
        resumed: list[Job] = []
        async with fenced(self._pool, epoch) as conn:
            for row in await conn.fetch(jobs_q.PAUSES_DUE, limit, instants.EARLIEST, instants.END):
                current = to_struct(row, Job)
                new = await conn.fetchrow(jobs_q.JOB_SET_STATUS, current.id, "active", current.revision + 1, None, None)
                job = to_struct(new, Job)
                await revisions.record(conn, job, "resumed", LEADER, {"status": "active"})
                await revisions.hand_over(conn, job, schedule_changed=False)
                await record(
                    conn, LEADER, "job", "resumed", job_id=job.id, before=snapshot(current), after=snapshot(job),
                    detail={"paused_until": current.paused_until, "pause_note": current.pause_note},
                )  # fmt: skip
                await conn.execute(
                    notifications_q.NOTIFY, msgspec.json.encode({"op": "resumed", "job_id": job.id}).decode()
                )
                resumed.append(job)
        return resumed
