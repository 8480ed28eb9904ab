"""Concurrency groups as the API and the CLI see them: list, show (holders and waiters), set a
limit, delete. Raising a limit hands the new slots out at once (cronos.store.groups.hand_out,
under the group's lock, in the same transaction), so runs waiting for the group start now.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from cronos.errors import Conflict, NotFound
from cronos.namespaces import DEFAULT as DEFAULT_NAMESPACE
from cronos.namespaces import missing as no_namespace
from cronos.store import groups
from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import groups as groups_q

log = logging.getLogger("cronos.store.groups")

SHOWN = 100  # waiting runs and jobs a group's view lists (the counts say how many in all)


class Group(msgspec.Struct, kw_only=True):
    name: str
    limit: int
    holding: int = 0  # slots held: runs running, or woken with a slot and starting
    waiting: int = 0  # runs waiting for a slot
    jobs: int = 0  # jobs naming the group
    created_at: datetime
    updated_at: datetime
    namespace: str = DEFAULT_NAMESPACE  # where it lives: only that namespace's jobs may name it


class Holder(msgspec.Struct, kw_only=True):
    run_id: int
    job_id: int
    job_name: str
    scheduled_for: datetime
    state: str  # running, or queued: woken with its slot, about to start
    started_at: datetime | None
    node_id: str | None
    granted_at: datetime


class Waiter(msgspec.Struct, kw_only=True):
    run_id: int
    job_id: int
    job_name: str
    scheduled_for: datetime
    due_at: datetime


class JobRef(msgspec.Struct, kw_only=True):
    id: int
    name: str


class GroupView(Group, kw_only=True):
    holders: list[Holder]
    waiters: list[Waiter]  # in the order they get slots (tick order), the first SHOWN
    members: list[JobRef]  # the jobs naming it, the first SHOWN


def _fields(row: asyncpg.Record) -> dict[str, Any]:
    fields = {k: v for k, v in dict(row).items() if k not in ("run_limit", "created")}
    fields["limit"] = row["run_limit"]
    return fields


class GroupStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def list_groups(self, namespace: str = DEFAULT_NAMESPACE) -> list[Group]:
        with translate_errors():
            rows = await self._pool.fetch(groups_q.GROUPS_LIST, None, namespace)
        return [Group(**_fields(r)) for r in rows]

    async def get(self, name: str) -> GroupView:
        with translate_errors():
            async with self._pool.acquire() as conn:
                row = await conn.fetchrow(groups_q.GROUPS_LIST, name, None)
                if row is None:
                    raise NotFound(f"concurrency group {name!r} not found")
                holders = [to_struct(r, Holder) for r in await conn.fetch(groups_q.GROUP_HOLDERS, name)]
                waiters = [to_struct(r, Waiter) for r in await conn.fetch(groups_q.GROUP_WAITERS, name, SHOWN)]
                members = [to_struct(r, JobRef) for r in await conn.fetch(groups_q.GROUP_JOBS, name, SHOWN)]
        return GroupView(**_fields(row), holders=holders, waiters=waiters, members=members)

    async def put(self, name: str, limit: int, *, actor: str, namespace: str = DEFAULT_NAMESPACE) -> tuple[Group, bool]:
        """Create the group in `namespace` or set its limit there; the slots a raise frees go to its
        waiting runs now. Returns the group and whether it was created. 409: it is another namespace's."""
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                try:
                    row = await conn.fetchrow(groups_q.GROUP_PUT, name, limit, namespace)
                except asyncpg.ForeignKeyViolationError as exc:
                    raise no_namespace(namespace) from exc
                if row is None:
                    raise Conflict(f"concurrency group {name!r} belongs to another namespace than {namespace!r}")
                await conn.fetch(groups_q.GROUPS_LOCK, [name])
                woken = await groups.hand_out(conn, {name: limit})
                after = await conn.fetchrow(groups_q.GROUPS_LIST, name, None)
        log.info(
            "concurrency group set",
            extra={"event": "group.set", "group": name, "limit": limit, "new_group": row["created"],
                   "actor": actor, "woken_jobs": woken[:50]},
        )  # fmt: skip
        return Group(**_fields(after)), bool(row["created"])

    async def delete(self, name: str, *, actor: str) -> None:
        with translate_errors():
            try:
                deleted = await self._pool.fetchval(groups_q.GROUP_DELETE, name)
            except asyncpg.ForeignKeyViolationError as exc:
                raise Conflict(f"concurrency group {name!r} is named by jobs: take it out of them first") from exc
        if deleted is None:
            raise NotFound(f"concurrency group {name!r} not found")
        log.info("concurrency group deleted", extra={"event": "group.deleted", "group": name, "actor": actor})
