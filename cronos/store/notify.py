"""Notification channels and their outbox of deliveries in PostgreSQL (migration 0027).

The API writes channels (`ChannelStore`; each change audited in its transaction, secrets as
`***`) and queues test deliveries; the leader's notifier
(dispatcher/notifier.py) routes job events into deliveries and sends them (`Outbox`). Every
write the leader makes is fenced by its epoch (cronos.store.epoch.fenced); a delivery leaves
`pending` only once, by a statement guarded by that state.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import msgspec

from cronos import namespaces
from cronos.errors import Conflict, NotFound
from cronos.namespaces import DEFAULT as DEFAULT_NAMESPACE
from cronos.notify import channels as ch
from cronos.notify.rules import EventFacts, Heard, Routed
from cronos.store import audit
from cronos.store.db import to_struct, translate_errors
from cronos.store.epoch import fenced
from cronos.store.ticks import TickStore
from cronos.ticks import account, plan, segments

# --- statements (each named once; $n commented where not obvious) -----------------------------

_CHANNEL_COLUMNS = """id, name, kind, config, secrets, job_ids, queues, events, after_failures, rate_limit_s,
    quiet_hours, enabled, selector, created_at, updated_at, namespace"""
# $1 name, $2 kind, $3 config, $4 secrets, $5 job ids, $6 queues, $7 events, $8 after_failures,
# $9 rate_limit_s, $10 quiet_hours, $11 enabled, $12 selector (0038), $13 its namespace (0068)
CHANNEL_INSERT = f"""
INSERT INTO notification_channels (name, kind, config, secrets, job_ids, queues, events, after_failures,
    rate_limit_s, quiet_hours, enabled, selector, namespace)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
RETURNING {_CHANNEL_COLUMNS}
"""
CHANNEL_UPDATE = f"""
UPDATE notification_channels
SET name = $2, kind = $3, config = $4, secrets = $5, job_ids = $6, queues = $7, events = $8, after_failures = $9,
    rate_limit_s = $10, quiet_hours = $11, enabled = $12, selector = $13, updated_at = now()
WHERE id = $1
RETURNING {_CHANNEL_COLUMNS}
"""
CHANNEL_GET = f"SELECT {_CHANNEL_COLUMNS} FROM notification_channels WHERE id = $1"
CHANNEL_GET_FOR_UPDATE = f"SELECT {_CHANNEL_COLUMNS} FROM notification_channels WHERE id = $1 FOR UPDATE"
CHANNEL_LIST = f"SELECT {_CHANNEL_COLUMNS} FROM notification_channels ORDER BY id"
CHANNEL_DELETE = f"DELETE FROM notification_channels WHERE id = $1 RETURNING {_CHANNEL_COLUMNS}"

_DELIVERY_COLUMNS = """id, channel_id, event_id, job_id, kind, occurred_at, message, state, reason, due_at, attempts,
    last_error, created_at, sent_at"""
# A channel's deliveries, newest first, before the id $2 (NULL: from the newest), $3 at most.
DELIVERIES_OF_CHANNEL = f"""
SELECT {_DELIVERY_COLUMNS}
FROM notification_deliveries
WHERE channel_id = $1 AND ($2::bigint IS NULL OR id < $2)
ORDER BY id DESC
LIMIT $3
"""
# A test notification: $1 channel, $2 message.
DELIVERY_TEST = f"""
INSERT INTO notification_deliveries (channel_id, kind, occurred_at, message)
VALUES ($1, 'test', now(), $2)
RETURNING {_DELIVERY_COLUMNS}
"""

# The router's batch: unrouted events, oldest first, $1 at most, with their job's name, queue and
# labels (a channel's selector)
# and their run's facts (a deleted job's events went with it: ON DELETE CASCADE).
EVENTS_UNROUTED = """
SELECT e.id, e.job_id, e.run_id, e.kind, e.occurred_at, e.detail, j.name AS job_name, j.queue, j.labels, j.namespace,
       r.state AS run_state, r.scheduled_for AS run_scheduled_for, r.attempt AS run_attempt, r.error AS run_error
FROM job_events e
JOIN jobs j ON j.id = e.job_id
LEFT JOIN LATERAL (SELECT state, scheduled_for, attempt, error FROM runs WHERE id = e.run_id LIMIT 1) r ON true
WHERE e.routed_at IS NULL
ORDER BY e.id
LIMIT $1
"""
# What each (channel, job) in $1 x $2 heard (pending or sent: not suppressed, not given up): the
# last notification's event time (the rate limit), and whether its last failed/recovered one is a
# failure (a recovery is news only then). Two index reads a pair (notification_deliveries_job).
LAST_HEARD = """
SELECT c.id AS channel_id, j.id AS job_id, heard.at, coalesce(told.kind = 'failed', false) AS failing
FROM unnest($1::bigint[]) AS c (id)
CROSS JOIN unnest($2::bigint[]) AS j (id)
CROSS JOIN LATERAL (
    SELECT d.occurred_at AS at FROM notification_deliveries d
    WHERE d.channel_id = c.id AND d.job_id = j.id AND d.state <> 'suppressed' AND d.state <> 'failed'
    ORDER BY d.occurred_at DESC LIMIT 1) heard
LEFT JOIN LATERAL (
    SELECT d.kind FROM notification_deliveries d
    WHERE d.channel_id = c.id AND d.job_id = j.id AND d.state <> 'suppressed' AND d.state <> 'failed'
      AND d.kind IN ('failed', 'recovered')
    ORDER BY d.occurred_at DESC, d.id DESC LIMIT 1) told ON true
"""
# Quiet hours' pacing: per channel in $1, the latest due time of its untried deliveries due after $2
# (held by quiet hours; a retry has attempts > 0).
HELD_LATEST = """
SELECT channel_id, max(due_at) AS due_at
FROM notification_deliveries
WHERE state = 'pending' AND due_at > $2 AND attempts = 0 AND channel_id = ANY($1::bigint[])
GROUP BY channel_id
"""
# One delivery per routed (event, channel), then the events marked routed: one transaction, fenced.
DELIVERIES_ROUTE = """
INSERT INTO notification_deliveries (channel_id, event_id, job_id, kind, occurred_at, message, state, reason, due_at)
SELECT u.channel_id, u.event_id, u.job_id, u.kind, u.occurred_at, u.message::jsonb, u.state, u.reason, u.due_at
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[], $6::text[], $7::text[],
            $8::text[], $9::timestamptz[]) AS u (channel_id, event_id, job_id, kind, occurred_at, message, state,
            reason, due_at)
ON CONFLICT (channel_id, event_id) DO NOTHING
"""
EVENTS_MARK_ROUTED = "UPDATE job_events SET routed_at = now() WHERE id = ANY($1::bigint[]) AND routed_at IS NULL"

# The sender's claim: due pending deliveries of enabled channels whose lease (if any) ran out, oldest due first, $1 at
# most, leased for $2 seconds and counted as an attempt, with their channel. Committed before the
# send: a new leader does not send a claimed delivery again while its lease runs.
DELIVERIES_CLAIM = """
WITH due AS (
    SELECT id FROM notification_deliveries
    WHERE state = 'pending' AND due_at <= now() AND (lease_until IS NULL OR lease_until < now())
      AND channel_id IN (SELECT id FROM notification_channels WHERE enabled)  -- a disabled channel's wait
    ORDER BY due_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED)
UPDATE notification_deliveries d
SET lease_until = now() + make_interval(secs => $2), attempts = d.attempts + 1
FROM due
WHERE d.id = due.id
RETURNING d.id, d.attempts, d.message, d.kind AS event_kind, d.channel_id
"""
# pending -> sent (only from pending: a delivery is marked sent once).
DELIVERY_SENT = """
UPDATE notification_deliveries SET state = 'sent', sent_at = now(), lease_until = NULL, last_error = NULL
WHERE id = $1 AND state = 'pending'
"""
# A send failed: $2 the error; $3 when to try again, or NULL: pending -> failed (given up).
DELIVERY_FAILED = """
UPDATE notification_deliveries
SET last_error = $2, lease_until = NULL,
    state = CASE WHEN $3::timestamptz IS NULL THEN 'failed' ELSE 'pending' END,
    due_at = coalesce($3::timestamptz, due_at)
WHERE id = $1 AND state = 'pending'
"""
# Retention: settled deliveries created before $1 go, $2 at most a statement (pending ones stay).
DELIVERIES_PURGE = """
DELETE FROM notification_deliveries
WHERE id IN (SELECT id FROM notification_deliveries WHERE created_at < $1 AND state <> 'pending' LIMIT $2)
"""
# Whether a delivery is due now (read before a claim: an idle leader takes no fenced transaction).
DELIVERY_ANY_DUE = """
SELECT EXISTS (SELECT 1 FROM notification_deliveries
               WHERE state = 'pending' AND due_at <= now() AND (lease_until IS NULL OR lease_until < now()))
"""


# The metrics' gauges: how many deliveries are pending, and how long ago the oldest due one fell due.
DELIVERIES_PENDING = """
SELECT count(*) AS pending,
       coalesce(extract(epoch FROM now() - min(due_at) FILTER (WHERE due_at <= now())), 0)::float8 AS oldest_due_s
FROM notification_deliveries WHERE state = 'pending'
"""


# --- rows as Structs ----------------------------------------------------------------------------


class Delivery(msgspec.Struct, kw_only=True):
    id: int
    channel_id: int
    event_id: int | None
    job_id: int | None
    kind: str
    occurred_at: datetime
    message: dict[str, Any]
    state: str
    reason: str | None
    due_at: datetime
    attempts: int
    last_error: str | None
    created_at: datetime
    sent_at: datetime | None


class Claimed(msgspec.Struct, kw_only=True):
    """A delivery leased to this leader to send now, with its channel (secrets included)."""

    id: int
    attempts: int
    message: dict[str, Any]
    event_kind: str
    channel: ch.Channel


class EventRow(msgspec.Struct, kw_only=True):
    id: int
    job_id: int
    run_id: int | None
    kind: str
    occurred_at: datetime
    detail: dict[str, Any]
    job_name: str
    queue: str
    labels: dict[str, str] = {}
    run_state: str | None
    run_scheduled_for: datetime | None
    run_attempt: int | None
    run_error: str | None
    namespace: str = DEFAULT_NAMESPACE  # its job's: only that namespace's channels hear of it

    def facts(self) -> EventFacts:
        return EventFacts(
            self.id, self.job_id, self.queue, self.kind, self.occurred_at, self.detail, self.labels, self.namespace
        )


def _channel(row: asyncpg.Record | dict[str, Any]) -> ch.Channel:
    return to_struct(ch.join(dict(row)), ch.Channel)


def _args(fields: ch.ChannelFields) -> tuple[Any, ...]:
    config, secrets = ch.split(fields)
    quiet = None if fields.quiet_hours is None else msgspec.to_builtins(fields.quiet_hours)
    return (
        fields.name, fields.kind, config, secrets, fields.jobs, fields.queues, list(fields.events),
        fields.after_failures, fields.rate_limit_s, quiet, fields.enabled, fields.selector,
    )  # fmt: skip


def _snapshot(channel: ch.Channel | None) -> dict[str, Any] | None:
    """The channel as the audit keeps it: every secret `***` (a Slack URL too)."""
    return None if channel is None else msgspec.to_builtins(ch.shown(channel, admin=True))  # admins read it


async def _audit(
    conn: asyncpg.Connection, actor: str, action: str, before: ch.Channel | None, after: ch.Channel | None
) -> None:
    """The change's audit entry, in its transaction; the id and name in `detail` (the channel may go)."""
    channel = after if after is not None else before
    assert channel is not None
    detail = {"channel_id": channel.id, "name": channel.name}
    await audit.record(conn, actor, "channel", action, before=_snapshot(before), after=_snapshot(after), detail=detail)


def _unique(exc: asyncpg.UniqueViolationError, name: str) -> Conflict:
    return Conflict(f"a channel named {name!r} already exists")


class ChannelStore:
    """Channels and their deliveries, as the API reads and writes them."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def create(
        self, fields: ch.ChannelFields, *, actor: str = audit.SYSTEM, namespace: str = DEFAULT_NAMESPACE
    ) -> ch.Channel:
        try:
            with translate_errors():
                async with self._pool.acquire() as conn, conn.transaction():
                    try:
                        row = await conn.fetchrow(CHANNEL_INSERT, *_args(fields), namespace)
                    except asyncpg.ForeignKeyViolationError as exc:
                        raise namespaces.missing(namespace) from exc
                    channel = _channel(row)
                    await _audit(conn, actor, "created", None, channel)
        except asyncpg.UniqueViolationError as exc:
            raise _unique(exc, fields.name) from None
        return channel

    async def all(self) -> list[ch.Channel]:
        with translate_errors():
            rows = await self._pool.fetch(CHANNEL_LIST)
        return [_channel(row) for row in rows]

    async def get(self, channel_id: int) -> ch.Channel:
        with translate_errors():
            row = await self._pool.fetchrow(CHANNEL_GET, channel_id)
        if row is None:
            raise NotFound(f"channel {channel_id} not found")
        return _channel(row)

    async def update(self, channel_id: int, change: Any, *, actor: str = audit.SYSTEM) -> ch.Channel:
        """`change(stored) -> ChannelFields` applied under the row's lock (a PATCH's `***` restored
        from what is stored at that moment)."""
        try:
            with translate_errors():
                async with self._pool.acquire() as conn, conn.transaction():
                    row = await conn.fetchrow(CHANNEL_GET_FOR_UPDATE, channel_id)
                    if row is None:
                        raise NotFound(f"channel {channel_id} not found")
                    stored = _channel(row)
                    fields: ch.ChannelFields = change(stored)
                    updated = _channel(await conn.fetchrow(CHANNEL_UPDATE, channel_id, *_args(fields)))
                    await _audit(conn, actor, "updated", stored, updated)
        except asyncpg.UniqueViolationError as exc:
            raise _unique(exc, "that name") from None
        return updated

    async def delete(self, channel_id: int, *, actor: str = audit.SYSTEM) -> None:
        with translate_errors():
            async with self._pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(CHANNEL_DELETE, channel_id)
                if row is None:
                    raise NotFound(f"channel {channel_id} not found")
                await _audit(conn, actor, "deleted", _channel(row), None)

    async def deliveries(self, channel_id: int, before_id: int | None, limit: int) -> list[Delivery]:
        await self.get(channel_id)  # NotFound for an unknown channel
        with translate_errors():
            rows = await self._pool.fetch(DELIVERIES_OF_CHANNEL, channel_id, before_id, limit)
        return [to_struct(row, Delivery) for row in rows]

    async def test(self, channel_id: int, message: dict[str, Any]) -> Delivery:
        """A test notification into the outbox (the leader sends it as any other)."""
        await self.get(channel_id)
        with translate_errors():
            row = await self._pool.fetchrow(DELIVERY_TEST, channel_id, message)
        return to_struct(row, Delivery)


class Outbox:
    """The leader's side: route events into deliveries, claim and settle them; all fenced."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def unrouted(self, limit: int) -> list[EventRow]:
        with translate_errors():
            rows = await self._pool.fetch(EVENTS_UNROUTED, limit)
        return [to_struct(row, EventRow) for row in rows]

    async def pending(self) -> tuple[int, float]:
        """How many deliveries are pending, and the age in seconds of the oldest due one (0: none)."""
        with translate_errors():
            row = await self._pool.fetchrow(DELIVERIES_PENDING)
        return int(row["pending"]), float(row["oldest_due_s"])

    async def channels(self) -> list[ch.Channel]:
        return await ChannelStore(self._pool).all()

    async def heard(self, channel_ids: Sequence[int], job_ids: Sequence[int]) -> dict[tuple[int, int], Heard]:
        with translate_errors():
            rows = await self._pool.fetch(LAST_HEARD, list(channel_ids), list(job_ids))
        return {(row["channel_id"], row["job_id"]): Heard(row["at"], row["failing"]) for row in rows}

    async def held(self, channel_ids: Sequence[int], now: datetime) -> dict[int, datetime]:
        with translate_errors():
            rows = await self._pool.fetch(HELD_LATEST, list(channel_ids), now)
        return {row["channel_id"]: row["due_at"] for row in rows}

    async def explain(self, job_id: int, tick: datetime, now: datetime, kept_since: datetime | None) -> dict[str, Any]:
        """The tick's explanation as GET /api/jobs/{id}/ticks gives it (cronos.ticks, pure)."""
        ticks = TickStore(self._pool)
        after = tick - timedelta(microseconds=1)
        history, cursor = await ticks.history(job_id, after, tick, 100)
        segs = segments(history)
        rows = await ticks.ledger(job_id, after, tick)
        found = account(plan(segs, after, tick, 1), rows, segs, now=now, written_until=cursor, kept_since=kept_since)
        return msgspec.to_builtins(found[0]) if found else {}

    async def route(
        self, epoch: int, events: Sequence[EventRow], routed: Sequence[Routed], messages: dict[int, dict[str, Any]]
    ) -> int:
        """Write a delivery per routed (event, channel) and mark every event of the batch routed, in
        one transaction fenced by `epoch` (NotLeader: nothing written). How many deliveries were new."""
        by_id = {event.id: event for event in events}
        rows = [
            (r.channel_id, r.event_id, by_id[r.event_id].job_id, by_id[r.event_id].kind, by_id[r.event_id].occurred_at,
             msgspec.json.encode(messages[r.event_id]).decode(), str(r.outcome), r.reason, r.due_at)
            for r in routed
        ]  # fmt: skip
        async with fenced(self._pool, epoch) as conn:
            status = "INSERT 0 0"  # no channel hears of these events: they are routed all the same
            if rows:
                status = await conn.execute(DELIVERIES_ROUTE, *(list(col) for col in zip(*rows, strict=True)))
            await conn.execute(EVENTS_MARK_ROUTED, [event.id for event in events])
        return int(status.rsplit(" ", 1)[-1])

    async def claim(self, epoch: int, limit: int, lease_s: float) -> list[Claimed]:
        async with fenced(self._pool, epoch) as conn:
            rows = await conn.fetch(DELIVERIES_CLAIM, limit, lease_s)
            channels = {c.id: c for c in map(_channel, await conn.fetch(CHANNEL_LIST))} if rows else {}
        return [
            Claimed(id=row["id"], attempts=row["attempts"], message=row["message"], event_kind=row["event_kind"],
                    channel=channels[row["channel_id"]])
            for row in rows
        ]  # fmt: skip

    async def sent(self, epoch: int, delivery_id: int) -> bool:
        async with fenced(self._pool, epoch) as conn:
            status: str = await conn.execute(DELIVERY_SENT, delivery_id)
        return status.endswith(" 1")

    async def failed(self, epoch: int, delivery_id: int, error: str, retry_at: datetime | None) -> bool:
        async with fenced(self._pool, epoch) as conn:
            status: str = await conn.execute(DELIVERY_FAILED, delivery_id, error, retry_at)
        return status.endswith(" 1")

    async def purge(self, epoch: int, before: datetime, limit: int) -> int:
        async with fenced(self._pool, epoch) as conn:
            status: str = await conn.execute(DELIVERIES_PURGE, before, limit)
        return int(status.rsplit(" ", 1)[-1])

    async def any_due(self) -> bool:
        with translate_errors():
            return bool(await self._pool.fetchval(DELIVERY_ANY_DUE))
