"""The leader's fencing epoch: a one-row counter in PostgreSQL, and the log of elections.

Not a Redis counter: Redis may restart empty, PostgreSQL is the source of truth. Every
fenced write compares its epoch with this row in its own transaction (cronos.store.ledger).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg
import msgspec

from cronos.errors import NotLeader
from cronos.store.db import translate_errors
from cronos.store.queries import upkeep as upkeep_q

log = logging.getLogger("cronos.store.epoch")


class EpochInfo(msgspec.Struct, frozen=True, kw_only=True):
    epoch: int
    holder: str | None
    elected_at: datetime | None


@contextlib.asynccontextmanager
async def fenced(pool: asyncpg.Pool, epoch: int) -> AsyncIterator[Any]:
    """A transaction in which `epoch` is the current one, held FOR SHARE until it commits (an
    election waits for it); raises NotLeader, having written nothing, when it is not. Every
    write a leader makes goes through here."""
    with translate_errors():
        async with pool.acquire() as conn, conn.transaction():
            current = await conn.fetchval(upkeep_q.EPOCH_GUARD)
            if current != epoch:
                raise NotLeader(f"epoch {epoch} is not current (now {current})")
            yield conn


class EpochStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def take(self, holder: str) -> EpochInfo:
        """Bump the epoch for a new leader and log it, in one transaction."""
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(upkeep_q.EPOCH_TAKE, holder)
                assert row is not None  # the row is created by the first migration
                await conn.execute(upkeep_q.EPOCH_LOG, row["epoch"], holder, row["elected_at"])
        info = EpochInfo(epoch=row["epoch"], holder=holder, elected_at=row["elected_at"])
        log.info(
            "leader epoch taken",
            extra={"event": "epoch.taken", "epoch": info.epoch, "holder": holder, "elected_at": info.elected_at},
        )
        return info

    async def current(self) -> EpochInfo:
        with translate_errors():
            row = await self._pool.fetchrow(upkeep_q.EPOCH_CURRENT)
        assert row is not None
        return EpochInfo(epoch=row["epoch"], holder=row["holder"], elected_at=row["elected_at"])
