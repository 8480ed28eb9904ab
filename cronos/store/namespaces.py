"""NamespaceStore: list, create and delete namespaces (cronos.namespaces), audited.

`default` always exists (migration 0067) and cannot be deleted; any namespace can be deleted only
while no job is in it (the jobs' foreign key refuses it otherwise: a 409 naming what holds it).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg
import msgspec

from cronos import namespaces
from cronos.errors import Conflict, NotFound
from cronos.store.audit import record
from cronos.store.db import to_struct, translate_errors
from cronos.store.queries import namespaces as namespaces_q


class Namespace(msgspec.Struct, kw_only=True):
    name: str
    created_at: datetime


class NamespaceStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def list_all(self) -> list[Namespace]:
        with translate_errors():
            return [to_struct(r, Namespace) for r in await self._pool.fetch(namespaces_q.NAMESPACES_ALL)]

    async def get(self, name: str) -> Namespace:
        with translate_errors():
            row = await self._pool.fetchrow(namespaces_q.NAMESPACE_GET, name)
        if row is None:
            raise NotFound(f"no namespace named {name!r}")
        return to_struct(row, Namespace)

    async def create(self, name: str, *, actor: str) -> tuple[Namespace, bool]:
        """The namespace, and whether this call created it (a second create changes nothing)."""
        namespaces.check(name)
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(namespaces_q.NAMESPACE_INSERT, name)
                if row is None:
                    return to_struct(await conn.fetchrow(namespaces_q.NAMESPACE_GET, name), Namespace), False
                await record(conn, actor, "namespace", "created", after={"name": name})
        return to_struct(row, Namespace), True

    async def delete(self, name: str, *, actor: str) -> None:
        if name == namespaces.DEFAULT:
            raise Conflict(f"namespace {namespaces.DEFAULT!r} cannot be deleted")
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                try:
                    gone = await conn.fetchval(namespaces_q.NAMESPACE_DELETE, name)
                except asyncpg.ForeignKeyViolationError as exc:
                    raise Conflict(f"namespace {name!r} still holds jobs: delete them first") from exc
                if gone is None:
                    raise NotFound(f"no namespace named {name!r}")
                await record(conn, actor, "namespace", "deleted", before={"name": name})
