"""The run streams: one Redis Stream per queue, each with one consumer group of executors.

A RunStream serves the queues it was given (an executor's `--queue`; every method that names
no queue works on the default one). Entry ids are unique within one stream only, so an entry
is known by (queue, id) wherever streams meet: a delivery carries its queue.

Tokens are appended in batches by a Lua script (one round trip per batch), read with
XREADGROUP (every served queue in one call), settled (tick locks released, then XACK) in one pipeline, kept from being
reclaimed while their run executes (`touch`), and reclaimed from dead consumers with
XAUTOCLAIM. Trimming only ever removes entries that every consumer has read and
acknowledged. A stream or group Redis lost (NOGROUP) is recreated here.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from redis.exceptions import ResponseError

from cronos import redis_client
from cronos.keys import Keys
from cronos.locks import TickLocks
from cronos.messages import TOKEN_FIELD, RunToken, decode_token, encode_token
from cronos.models import DEFAULT_QUEUE
from cronos.scripts import Scripts

BATCH_SIZE = 1000

log = logging.getLogger("cronos.stream")


# An entry's identity across streams: (queue, entry id).
EntryRef = tuple[str, bytes]


@dataclass(frozen=True, slots=True)
class Delivery:
    entry_id: bytes
    token: RunToken | None  # None: the entry could not be decoded (acknowledge and drop it)
    queue: str = DEFAULT_QUEUE

    @property
    def ref(self) -> EntryRef:
        return (self.queue, self.entry_id)


@dataclass(frozen=True, slots=True)
class StreamInfo:
    length: int
    pending: int
    lag: int | None
    consumers: dict[str, int]  # consumer name -> pending count
    last_delivered_id: str | None


class RunStream:
    def __init__(
        self, client: Any, keys: Keys, scripts: Scripts | None = None, queues: Sequence[str] = (DEFAULT_QUEUE,)
    ) -> None:
        self._client = client
        self._keys = keys
        self.queues = tuple(queues)  # those read, reclaimed and created by default
        self.key = keys.stream  # the default queue's stream
        self.group = keys.group
        self._scripts = scripts or Scripts(client)
        self._queue_of = {keys.queue_stream(q).encode(): q for q in self.queues}
        self._turn = 0  # which queues a read too small for all of them asks first

    def stream_key(self, queue: str = DEFAULT_QUEUE) -> str:
        return self._keys.queue_stream(queue)

    async def ensure_group(self, queue: str | None = None) -> bool:
        """Create the stream and group of `queue` (default: of every queue served) when missing;
        True when one had to be created."""
        created = False
        for name in (queue,) if queue is not None else self.queues:
            try:
                await self._client.xgroup_create(self.stream_key(name), self.group, id="0", mkstream=True)
                created = True
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        return created

    async def list_queue(self, queue: str) -> None:
        """Add `queue` to the names the leader pushed to (a Redis set beside the streams)."""
        await self._client.sadd(self._keys.queues, queue)

    async def known_queues(self) -> list[str]:
        """The queues a leader pushed to since Redis last lost its data, the default one first."""
        names = {_text(m) for m in await self._client.smembers(self._keys.queues)}
        return [DEFAULT_QUEUE, *sorted(names - {DEFAULT_QUEUE})]

    async def drop_if_empty(self, queue: str) -> bool:
        """Delete `queue`'s stream and unlist it, if it holds no entry and none is pending (one
        script: a token pushed meanwhile keeps it); True if dropped. The leader's, for a queue no
        job names; the default queue is never dropped."""
        if queue == DEFAULT_QUEUE:
            return False
        keys = [self.stream_key(queue), self._keys.queues]
        return bool(await self._scripts.drop_queue_if_empty(keys=keys, args=[queue, self.group]))

    async def drop_if_stale(self, queue: str, min_age_ms: int) -> int | None:
        """Delete `queue`'s stream and unlist it, entries and all, if its newest entry is at least
        `min_age_ms` old (one script: a token pushed meanwhile keeps it); how many entries went with
        it, None if kept. The leader's, for an orphaned queue (cronos.store.queues.orphaned)."""
        if queue == DEFAULT_QUEUE:
            return None
        keys = [self.stream_key(queue), self._keys.queues]
        dropped = int(await self._scripts.drop_queue_if_stale(keys=keys, args=[queue, min_age_ms]))
        return None if dropped < 0 else dropped

    async def _recreate(self) -> None:
        """Redis lost its data (a restart without persistence): make the streams and groups again
        and read on; the leader notices the loss through its marker and re-pushes queued runs."""
        log.warning("run stream or group missing: recreating it", extra={"event": "stream.group_lost"})
        await self.ensure_group()

    async def group_exists(self, queue: str = DEFAULT_QUEUE) -> bool:
        try:
            groups = await self._client.xinfo_groups(self.stream_key(queue))
        except ResponseError:  # no such key
            return False
        return any(_text(g.get("name")) == self.group for g in groups)

    async def publish(self, tokens: Sequence[RunToken], queue: str = DEFAULT_QUEUE) -> int:
        """Append tokens to `queue`'s stream in batches of BATCH_SIZE, one script call each;
        returns how many."""
        pushed = 0
        key = self.stream_key(queue)
        for start in range(0, len(tokens), BATCH_SIZE):
            batch = [encode_token(t) for t in tokens[start : start + BATCH_SIZE]]
            pushed += int(await self._scripts.append_batch(keys=[key], args=[TOKEN_FIELD, *batch]))
        return pushed

    def _read_plan(self, count: int) -> tuple[list[str], int]:
        """Which queues one read asks, and how many entries of each: never more than `count` in
        all (XREADGROUP's COUNT is per stream), every queue its share, turns taken when `count`
        is below the number of queues."""
        queues = self.queues
        if count >= len(queues):
            return list(queues), count // len(queues)
        start = self._turn % len(queues)
        self._turn += count
        rotated = queues[start:] + queues[:start]
        return list(rotated[:count]), 1

    async def read(self, consumer: str, count: int, block_ms: int | None, *, pending: bool = False) -> list[Delivery]:
        """New entries (`>`), or with `pending=True` this consumer's own unacknowledged ones, of
        every queue served, in one XREADGROUP (the streams share a hash tag)."""
        if count <= 0:
            return []
        queues, each = (list(self.queues), count) if pending else self._read_plan(count)
        try:
            reply = await self._client.xreadgroup(
                self.group,
                consumer,
                {self.stream_key(q): "0" if pending else ">" for q in queues},
                count=each,
                block=None if pending else block_ms,
            )
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise
            await self._recreate()
            return []
        return [
            _delivery(entry_id, fields, self._queue(key))
            for key, entries in reply or []
            for entry_id, fields in entries
        ]

    async def autoclaim(self, consumer: str, min_idle_ms: int, count: int) -> list[Delivery]:
        """Take over entries idle longer than `min_idle_ms` from any consumer (a dead one)."""
        claimed: list[Delivery] = []
        for queue in self.queues:
            if count - len(claimed) <= 0:
                break
            try:
                reply = await self._client.xautoclaim(
                    self.stream_key(queue),
                    self.group,
                    consumer,
                    min_idle_ms,
                    start_id="0-0",
                    count=count - len(claimed),
                )
            except ResponseError as exc:
                if not _stream_lost(exc):
                    raise
                await self._recreate()
                return claimed
            entries = reply[1] if len(reply) > 1 else []
            claimed += [_delivery(entry_id, fields, queue) for entry_id, fields in entries if fields]
        return claimed

    async def ack(self, entry_ids: Sequence[bytes | str], queue: str = DEFAULT_QUEUE) -> int:
        if not entry_ids:
            return 0
        return int(await self._client.xack(self.stream_key(queue), self.group, *entry_ids))

    async def settle(self, entries: Sequence[EntryRef], locks: TickLocks, lock_keys: Sequence[str]) -> None:
        """Release tick locks (those still ours), then acknowledge entries: one pipeline."""
        if not entries and not lock_keys:
            return
        pipe = self._client.pipeline(transaction=False)
        if redis_client.is_cluster(self._client):  # a cluster pipeline cannot carry a script
            await locks.release(lock_keys)
        else:
            await locks.queue_release(pipe, lock_keys)
        for queue, ids in _by_queue(entries).items():
            pipe.xack(self.stream_key(queue), self.group, *ids)
        try:
            await pipe.execute()
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise
            # Redis lost the stream: nothing is left to acknowledge (the locks went first).

    async def hand_over(self, entry: EntryRef, token: RunToken) -> None:
        """Give a token back to its queue's group (executor.routing): re-add it as a new entry and
        acknowledge the old one, atomically (MULTI; on a Redis Cluster, a pipeline in that order:
        cut between the two, the token is there twice, which the tick lock makes harmless). A
        stream Redis lost is not made again here (NOMKSTREAM): the leader re-pushes its runs."""
        queue, entry_id = entry
        key = self.stream_key(queue)
        pipe = self._client.pipeline(transaction=not redis_client.is_cluster(self._client))
        pipe.xadd(key, {TOKEN_FIELD: encode_token(token)}, nomkstream=True)
        pipe.xack(key, self.group, entry_id)
        try:
            await pipe.execute()
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise

    async def touch(self, consumer: str, entries: Sequence[EntryRef]) -> None:
        """Reset the idle time of entries `consumer` still works on, so no other executor's
        XAUTOCLAIM takes a long run's token."""
        for queue, ids in _by_queue(entries).items():
            try:
                await self._client.xclaim(
                    self.stream_key(queue), self.group, consumer, min_idle_time=0, message_ids=ids, justid=True
                )
            except ResponseError as exc:
                if not _stream_lost(exc):
                    raise

    def _queue(self, key: bytes | str) -> str:
        return self._queue_of[key if isinstance(key, bytes) else key.encode()]

    async def info(self, queue: str = DEFAULT_QUEUE) -> StreamInfo:
        key = self.stream_key(queue)
        try:
            length = int(await self._client.xlen(key))
            groups = await self._client.xinfo_groups(key)
        except ResponseError:
            return StreamInfo(0, 0, None, {}, None)
        group = self._group_of(groups)
        if group is None:
            return StreamInfo(length, 0, None, {}, None)
        try:
            replies = await self._client.xinfo_consumers(key, self.group)
        except ResponseError:  # the group went away meanwhile (Redis lost its data)
            replies = []
        return _stream_info(length, group, replies)

    async def infos(self, queues: Sequence[str]) -> dict[str, StreamInfo]:
        """`info` of each of `queues` in two pipelined round trips, not three per queue (/api/cluster)."""
        pipe = self._client.pipeline(transaction=False)
        for queue in queues:
            pipe.xlen(self.stream_key(queue))
            pipe.xinfo_groups(self.stream_key(queue))
        replies = await pipe.execute(raise_on_error=False)
        found: dict[str, tuple[int, dict[str, Any]]] = {}
        infos = {queue: StreamInfo(0, 0, None, {}, None) for queue in queues}
        for queue, length, groups in zip(queues, replies[::2], replies[1::2], strict=True):
            if isinstance(length, ResponseError) or isinstance(groups, ResponseError):
                continue  # no such stream
            if (group := self._group_of(groups)) is None:
                infos[queue] = StreamInfo(int(length), 0, None, {}, None)
            else:
                found[queue] = (int(length), group)
        pipe = self._client.pipeline(transaction=False)
        for queue in found:
            pipe.xinfo_consumers(self.stream_key(queue), self.group)
        consumers = await pipe.execute(raise_on_error=False) if found else []
        for (queue, (length, group)), replies in zip(found.items(), consumers, strict=True):
            infos[queue] = _stream_info(length, group, [] if isinstance(replies, ResponseError) else replies)
        return infos

    def _group_of(self, groups: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
        return next((g for g in groups if _text(g.get("name")) == self.group), None)

    async def trim_acknowledged(self, queue: str = DEFAULT_QUEUE) -> int:
        """Drop entries below both the oldest pending entry and the group's read position.

        A reply that says nothing (no read position, XPENDING empty because the entries were
        acknowledged meanwhile, the stream gone because Redis lost its data) trims nothing
        this time: the next pass sees a settled stream."""
        try:
            key = self.stream_key(queue)
            info = await self.info(queue)
            floor = info.last_delivered_id
            if floor is None:
                return 0
            if info.pending:
                summary = await self._client.xpending(key, self.group)
                oldest = _entry_id(summary.get("min") if isinstance(summary, dict) else None)
                if oldest is not None:
                    floor = min(floor, oldest, key=_id_key)
            # MINID keeps entries >= floor: the oldest pending (or first unread) entry survives.
            minid = _bump(floor) if not info.pending else floor
            return int(await self._client.xtrim(key, minid=minid, approximate=False))
        except ResponseError as exc:
            if not _stream_lost(exc):
                raise
            return 0


def _stream_info(length: int, group: dict[str, Any], consumers: Iterable[dict[str, Any]]) -> StreamInfo:
    lag = group.get("lag")
    return StreamInfo(
        length=length,
        pending=int(group.get("pending", 0)),
        lag=int(lag) if lag is not None else None,
        consumers={_text(c.get("name")): int(c.get("pending", 0)) for c in consumers},
        last_delivered_id=_entry_id(group.get("last-delivered-id")),
    )


def _delivery(entry_id: bytes, fields: dict[bytes, bytes], queue: str) -> Delivery:
    raw = fields.get(TOKEN_FIELD) if fields else None
    if raw is None:
        return Delivery(entry_id, None, queue)
    try:
        return Delivery(entry_id, decode_token(raw), queue)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return Delivery(entry_id, None, queue)


def _by_queue(entries: Iterable[EntryRef]) -> dict[str, list[bytes]]:
    grouped: dict[str, list[bytes]] = defaultdict(list)
    for queue, entry_id in entries:
        grouped[queue].append(entry_id)
    return grouped


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
