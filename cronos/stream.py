"""The run stream: one Redis Stream with one consumer group of executors.

Tokens are appended in batches by a Lua script (one round trip per batch), read with
XREADGROUP, settled (tick locks released, then XACK) in one pipeline, kept from being
reclaimed while their run executes (`touch`), and reclaimed from dead consumers with
XAUTOCLAIM. Trimming only ever removes entries that every consumer has read and
acknowledged. A stream or group Redis lost (NOGROUP) is recreated here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from redis.exceptions import ResponseError

from cronos import redis_client
from cronos.keys import Keys
from cronos.locks import TickLocks
from cronos.messages import TOKEN_FIELD, RunToken, decode_token, encode_token
from cronos.scripts import Scripts

BATCH_SIZE = 1000

log = logging.getLogger("cronos.stream")


@dataclass(frozen=True, slots=True)
class Delivery:
    entry_id: bytes
    token: RunToken | None  # None: the entry could not be decoded (acknowledge and drop it)


@dataclass(frozen=True, slots=True)
class StreamInfo:
    length: int
    pending: int
    lag: int | None
    consumers: dict[str, int]  # consumer name -> pending count
    last_delivered_id: str | None


class RunStream:
    def __init__(self, client: Any, keys: Keys, scripts: Scripts | None = None) -> None:
        self._client = client
        self.key = keys.stream
        self.group = keys.group
        self._scripts = scripts or Scripts(client)

    async def ensure_group(self) -> bool:
        """Create the stream and group when missing; True when they had to be created."""
        try:
            await self._client.xgroup_create(self.key, self.group, id="0", mkstream=True)
            return True
        except ResponseError as exc:
            if "BUSYGROUP" in str(exc):
                return False
            raise

    async def _recreate(self) -> None:
        """Redis lost its data (a restart without persistence): make the stream and group again
        and read on; the leader notices the loss through its marker and re-pushes queued runs."""
        log.warning("run stream or group missing: recreating it", extra={"event": "stream.group_lost"})
        await self.ensure_group()

    async def group_exists(self) -> bool:
        try:
            groups = await self._client.xinfo_groups(self.key)
        except ResponseError:  # no such key
            return False
        return any(_text(g.get("name")) == self.group for g in groups)

    async def publish(self, tokens: Sequence[RunToken]) -> int:
        """Append tokens in batches of BATCH_SIZE, one script call each; returns how many."""
        pushed = 0
        for start in range(0, len(tokens), BATCH_SIZE):
            batch = [encode_token(t) for t in tokens[start : start + BATCH_SIZE]]
            pushed += int(await self._scripts.append_batch(keys=[self.key], args=[TOKEN_FIELD, *batch]))
        return pushed

    async def read(self, consumer: str, count: int, block_ms: int | None, *, pending: bool = False) -> list[Delivery]:
        """New entries (`>`), or with `pending=True` this consumer's own unacknowledged ones."""
        if count <= 0:
            return []
        try:
            reply = await self._client.xreadgroup(
                self.group,
                consumer,
                {self.key: "0" if pending else ">"},
                count=count,
                block=None if pending else block_ms,
            )
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise
            await self._recreate()
            return []
        return [_delivery(entry_id, fields) for _stream, entries in reply or [] for entry_id, fields in entries]

    async def autoclaim(self, consumer: str, min_idle_ms: int, count: int) -> list[Delivery]:
        """Take over entries idle longer than `min_idle_ms` from any consumer (a dead one)."""
        if count <= 0:
            return []
        try:
            reply = await self._client.xautoclaim(
                self.key, self.group, consumer, min_idle_ms, start_id="0-0", count=count
            )
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise
            await self._recreate()
            return []
        entries = reply[1] if len(reply) > 1 else []
        return [_delivery(entry_id, fields) for entry_id, fields in entries if fields]

    async def ack(self, entry_ids: Sequence[bytes | str]) -> int:
        if not entry_ids:
            return 0
        return int(await self._client.xack(self.key, self.group, *entry_ids))

    async def settle(self, entry_ids: Sequence[bytes], locks: TickLocks, lock_keys: Sequence[str]) -> None:
        """Release tick locks (those still ours), then acknowledge entries: one pipeline."""
        if not entry_ids and not lock_keys:
            return
        pipe = self._client.pipeline(transaction=False)
        if redis_client.is_cluster(self._client):  # a cluster pipeline cannot carry a script
            await locks.release(lock_keys)
        else:
            await locks.queue_release(pipe, lock_keys)
        if entry_ids:
            pipe.xack(self.key, self.group, *entry_ids)
        try:
            await pipe.execute()
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise
            # Redis lost the stream: nothing is left to acknowledge (the locks went first).

    async def touch(self, consumer: str, entry_ids: Sequence[bytes]) -> None:
        """Reset the idle time of entries `consumer` still works on, so no other executor's
        XAUTOCLAIM takes a long run's token."""
        if not entry_ids:
            return
        try:
            await self._client.xclaim(
                self.key, self.group, consumer, min_idle_time=0, message_ids=list(entry_ids), justid=True
            )
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise

    async def info(self) -> StreamInfo:
        try:
            length = int(await self._client.xlen(self.key))
            groups = await self._client.xinfo_groups(self.key)
        except ResponseError:
            return StreamInfo(0, 0, None, {}, None)
        group = next((g for g in groups if _text(g.get("name")) == self.group), None)
        if group is None:
            return StreamInfo(length, 0, None, {}, None)
        try:
            replies = await self._client.xinfo_consumers(self.key, self.group)
        except ResponseError:  # the group went away meanwhile (Redis lost its data)
            replies = []
        consumers = {_text(c.get("name")): int(c.get("pending", 0)) for c in replies}
        lag = group.get("lag")
        return StreamInfo(
            length=length,
            pending=int(group.get("pending", 0)),
            lag=int(lag) if lag is not None else None,
            consumers=consumers,
            last_delivered_id=_entry_id(group.get("last-delivered-id")),
        )

    async def trim_acknowledged(self) -> int:
        """Drop entries below both the oldest pending entry and the group's read position.

        A reply that says nothing (no read position, XPENDING empty because the entries were
        acknowledged meanwhile, the stream gone because Redis lost its data) trims nothing
        this time: the next pass sees a settled stream."""
        try:
            info = await self.info()
            floor = info.last_delivered_id
            if floor is None:
                return 0
            if info.pending:
                summary = await self._client.xpending(self.key, self.group)
                oldest = _entry_id(summary.get("min") if isinstance(summary, dict) else None)
                if oldest is not None:
                    floor = min(floor, oldest, key=_id_key)
            # MINID keeps entries >= floor: the oldest pending (or first unread) entry survives.
            minid = _bump(floor) if not info.pending else floor
            return int(await self._client.xtrim(self.key, minid=minid, approximate=False))
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise
            return 0


def _delivery(entry_id: bytes, fields: dict[bytes, bytes]) -> Delivery:
    raw = fields.get(TOKEN_FIELD) if fields else None
    if raw is None:
        return Delivery(entry_id, None)
    try:
        return Delivery(entry_id, decode_token(raw))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Delivery(entry_id, None)


def _stream_lost(exc: ResponseError) -> bool:
    """Redis lost the stream or its group (a restart without persistence, or the key deleted
    under a blocked XREADGROUP)."""
    text = str(exc)
    return text.startswith("NOGROUP") or "no longer exists" in text


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _entry_id(value: Any) -> str | None:
    """A stream entry id from a reply, or None when the reply holds none (None, empty, not an
    id): never the text "None"."""
    if value is None:
        return None
    text = _text(value)
    ms, dash, seq = text.partition("-")
    if not ms.isdigit() or (dash and not seq.isdigit()):
        return None
    return text


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _bump(entry_id: str) -> str:
    """The id just after `entry_id`, so MINID also drops the last delivered (and acked) entry."""
    ms, seq = _id_key(entry_id)
    return f"{ms}-{seq + 1}"
