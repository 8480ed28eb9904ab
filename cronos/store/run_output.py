"""Run output in PostgreSQL (migration 0042): written by executors a flush at a time, read a page
at a time by the API. See cronos/run_output.py for what a run's output holds."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import msgspec

from cronos.errors import NotFound
from cronos.run_output import Pending, Stream
from cronos.store.db import connect_one, translate_errors
from cronos.store.queries import notifications as notifications_q
from cronos.store.queries import output as output_q
from cronos.store.queries import views as views_q

NOTIFY_BYTES = 7900  # a NOTIFY payload is at most 8000 bytes: past it, followers hear "*" (every run)


class Written(msgspec.Struct, frozen=True):
    """One run's pending output, as a flush writes it."""

    run_id: int
    scheduled_for: datetime
    pending: Pending


class OutputLine(msgspec.Struct, frozen=True):
    seq: int
    at: datetime
    stream: Stream
    line: str


class OutputPage(msgspec.Struct, frozen=True):
    state: str  # the run's, read with the lines: a follower stops once it ended and read them all
    lines: list[OutputLine]


async def write(pool: asyncpg.Pool, flushes: list[Written]) -> None:
    """Every run's pending lines in one statement, the lines that left tail windows in one more,
    and one NOTIFY naming the runs, in one transaction."""
    ids, ticks, seqs, ats, streams, texts = [], [], [], [], [], []
    for item in flushes:
        for line in item.pending.lines:
            ids.append(item.run_id)
            ticks.append(item.scheduled_for)
            seqs.append(line.seq)
            ats.append(datetime.fromtimestamp(line.at, UTC))
            streams.append(line.stream)
            texts.append(line.text)
    trims = [(i.run_id, i.scheduled_for, *i.pending.trim) for i in flushes if i.pending.trim is not None]
    names = ",".join(dict.fromkeys(str(i.run_id) for i in flushes))
    with translate_errors():
        async with pool.acquire() as conn, conn.transaction():
            if ids:
                await conn.execute(output_q.OUTPUT_WRITE, ids, ticks, seqs, ats, streams, texts)
            if trims:
                await conn.execute(output_q.OUTPUT_TRIM, *(list(column) for column in zip(*trims, strict=True)))
            await conn.execute(notifications_q.OUTPUT_NOTIFY, names if len(names) <= NOTIFY_BYTES else "*")


async def page(pool: asyncpg.Pool, run_id: int, offset: int, limit: int) -> OutputPage:
    """Run `run_id`'s state and its lines numbered `offset` on, `limit` at most."""
    with translate_errors():
        rows = await pool.fetch(views_q.OUTPUT_PAGE, run_id, offset, limit)
    if not rows:
        raise NotFound(f"run {run_id} not found")
    lines = [OutputLine(r["seq"], r["at"], r["stream"], r["line"]) for r in rows if r["seq"] is not None]
    return OutputPage(rows[0]["state"], lines)


async def listen(dsn: str, heard: Callable[[int | None], None]) -> asyncpg.Connection:
    """A connection listening on `cronos_output`: `heard` gets each run id that wrote (None: every
    run may have). The caller owns it (closes it; `is_closed()` once it was lost)."""

    def notified(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
        if payload == "*":
            heard(None)
            return
        for part in payload.split(","):
            if part.isdigit():
                heard(int(part))

    with translate_errors():
        conn = await connect_one(dsn)
        await conn.add_listener(notifications_q.OUTPUT_CHANNEL, notified)
    return conn
