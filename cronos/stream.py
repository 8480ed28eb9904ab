"""The run stream: one Redis Stream with one consumer group of executors.

Tokens are appended in batches by a Lua script (one round trip per batch), read with
XREADGROUP, acknowledged with XACK and reclaimed from dead consumers with XAUTOCLAIM.
Trimming only ever removes entries that every consumer has read and acknowledged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from redis.exceptions import ResponseError

from cronos.keys import Keys
from cronos.messages import TOKEN_FIELD, RunToken, decode_token, encode_token

# KEYS[1] stream; ARGV: field name, then one encoded token per entry. Returns the count.
APPEND_BATCH = """
local field = ARGV[1]
for i = 2, #ARGV do
  redis.call('XADD', KEYS[1], '*', field, ARGV[i])
end
return #ARGV - 1
"""

BATCH_SIZE = 1000


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
    def __init__(self, client: Any, keys: Keys) -> None:
        self._client = client
        self.key = keys.stream
        self.group = keys.group
        self._append = client.register_script(APPEND_BATCH)

    async def ensure_group(self) -> bool:
        """Create the stream and group when missing; True when they had to be created."""
        try:
            await self._client.xgroup_create(self.key, self.group, id="0", mkstream=True)
            return True
        except ResponseError as exc:
            if "BUSYGROUP" in str(exc):
                return False
            raise

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
            pushed += int(await self._append(keys=[self.key], args=[TOKEN_FIELD, *batch]))
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
            if not _is_nogroup(exc):
                raise
            # Redis lost its data (restart without persistence): recreate the group and read
            # again next time; the leader notices the loss through its marker and re-pushes.
            await self.ensure_group()
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
            if not _is_nogroup(exc):
                raise
            await self.ensure_group()
            return []
        entries = reply[1] if len(reply) > 1 else []
        return [_delivery(entry_id, fields) for entry_id, fields in entries if fields]

    async def ack(self, entry_ids: Sequence[bytes | str]) -> int:
        if not entry_ids:
            return 0
        return int(await self._client.xack(self.key, self.group, *entry_ids))

    async def info(self) -> StreamInfo:
        try:
            length = int(await self._client.xlen(self.key))
            groups = await self._client.xinfo_groups(self.key)
        except ResponseError:
            return StreamInfo(0, 0, None, {}, None)
        group = next((g for g in groups if _text(g.get("name")) == self.group), None)
        if group is None:
            return StreamInfo(length, 0, None, {}, None)
        consumers = {
            _text(c.get("name")): int(c.get("pending", 0))
            for c in await self._client.xinfo_consumers(self.key, self.group)
        }
        lag = group.get("lag")
        return StreamInfo(
            length=length,
            pending=int(group.get("pending", 0)),
            lag=int(lag) if lag is not None else None,
            consumers=consumers,
            last_delivered_id=_text(group.get("last-delivered-id")),
        )

    async def trim_acknowledged(self) -> int:
        """Drop entries below both the oldest pending entry and the group's read position."""
        info = await self.info()
        if info.last_delivered_id is None:
            return 0
        floor = info.last_delivered_id
        if info.pending:
            summary = await self._client.xpending(self.key, self.group)
            oldest = _text(summary.get("min"))
            if oldest:
                floor = min(floor, oldest, key=_id_key)
        # MINID keeps entries >= floor: the oldest pending (or first unread) entry survives.
        minid = _bump(floor) if not info.pending else floor
        return int(await self._client.xtrim(self.key, minid=minid, approximate=False))


def _delivery(entry_id: bytes, fields: dict[bytes, bytes]) -> Delivery:
    raw = fields.get(TOKEN_FIELD) if fields else None
    if raw is None:
        return Delivery(entry_id, None)
    try:
        return Delivery(entry_id, decode_token(raw))
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Delivery(entry_id, None)


def _is_nogroup(exc: ResponseError) -> bool:
    return str(exc).startswith("NOGROUP")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _bump(entry_id: str) -> str:
    """The id just after `entry_id`, so MINID also drops the last delivered (and acked) entry."""
    ms, seq = _id_key(entry_id)
    return f"{ms}-{seq + 1}"
