"""Retiring a stream-group consumer against a real Redis (cronos.stream_members): its pending entries
go back to the group before XGROUP DELCONSUMER, never with it; a consumer active again is kept; and a
consumer removed under a live executor is made again by the next delivery (XREADGROUP creates it)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from cronos import redis_client as redis_client_module
from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.settings import Settings
from cronos.stream import Delivery, RunStream
from cronos.stream_members import StreamMembers
from tests.waiting import wait_for


def _tokens(n: int) -> list[RunToken]:
    return [
        RunToken(run_id=i, job_id=1, scheduled_for_ms=1000 * i, attempt=1, trigger="schedule", epoch=1)
        for i in range(1, n + 1)
    ]


@pytest.fixture
async def stream(redis_client: Any, settings: Settings) -> RunStream:
    found = RunStream(redis_client, Keys(settings.key_prefix))
    await found.ensure_group()
    return found


@pytest.fixture
def members(redis_client: Any, settings: Settings) -> StreamMembers:
    return StreamMembers(redis_client, Keys(settings.key_prefix))


async def _names(members: StreamMembers) -> dict[str, int]:
    return {m.name: m.pending for m in await members.of(["default"])}


async def test_pending_entries_are_handed_back_then_the_consumer_goes(
    stream: RunStream, members: StreamMembers
) -> None:
    tokens = _tokens(3)
    await stream.publish(tokens)
    await stream.read("gone", 3, None)  # delivered, never acknowledged: pending for "gone"
    assert await _names(members) == {"gone": 3}

    retired = await members.retire("default", "gone", idle_ms=0, entry_idle_ms=0, limit=100)
    assert (retired.handed_back, retired.outcome, retired.removed) == (3, "removed", True)
    assert await _names(members) == {}
    info = await stream.info()
    assert (info.pending, info.lag) == (0, 3)  # the group's next reader gets them, as new entries
    again = await stream.read("next", 10, None)
    assert [d.token for d in again] == tokens
    assert await _names(members) == {"next": 3}


async def test_a_consumer_is_removed_only_once_nothing_is_pending_for_it(
    stream: RunStream, members: StreamMembers
) -> None:
    await stream.publish(_tokens(4))
    await stream.read("busy", 4, None)
    # Entries pending for less than the bound stay (a live executor's, touched as its runs go on):
    kept = await members.retire("default", "busy", idle_ms=0, entry_idle_ms=3_600_000, limit=100)
    assert (kept.handed_back, kept.outcome) == (0, "pending")
    # More pending than one pass hands back: the rest at the next one, then it goes.
    first = await members.retire("default", "busy", idle_ms=0, entry_idle_ms=0, limit=3)
    assert (first.handed_back, first.outcome) == (3, "pending")
    assert await _names(members) == {"busy": 1}
    second = await members.retire("default", "busy", idle_ms=0, entry_idle_ms=0, limit=3)
    assert (second.handed_back, second.outcome) == (1, "removed")
    assert (await stream.info()).length == 8  # four delivered (acknowledged), four handed back


async def test_a_consumer_active_within_the_bound_is_kept(stream: RunStream, members: StreamMembers) -> None:
    await stream.publish(_tokens(1))
    (delivery,) = await stream.read("live", 1, None)
    await stream.ack([delivery.entry_id])
    retired = await members.retire("default", "live", idle_ms=3_600_000, entry_idle_ms=0, limit=100)
    assert retired.outcome == "active" and await _names(members) == {"live": 0}


async def test_retiring_what_is_not_there_does_nothing(
    stream: RunStream, members: StreamMembers, settings: Settings, redis_client: Any
) -> None:
    assert (await members.retire("default", "nobody", idle_ms=0, entry_idle_ms=0, limit=10)).outcome == "absent"
    assert (await members.retire("no-such-queue", "x", idle_ms=0, entry_idle_ms=0, limit=10)).outcome == "absent"
    assert await members.of(["default", "no-such-queue"]) == []
    assert not await redis_client.exists(Keys(settings.key_prefix).queue_stream("no-such-queue"))


async def test_a_consumer_removed_while_it_waits_in_xreadgroup_is_made_again_by_the_next_delivery(
    stream: RunStream, members: StreamMembers, redis_client: Any, settings: Settings
) -> None:
    """A live executor removed anyway (its presence lapsed) loses nothing and needs to do nothing:
    the delivery that wakes its blocked read creates its consumer again, the entry pending for it."""
    await stream.publish(_tokens(1))
    (first,) = await stream.read("live", 1, None)
    await stream.ack([first.entry_id])
    name = f"reader-{uuid.uuid4().hex[:8]}"
    reader = redis_client_module.connect(settings.redis_url, client_name=name)
    try:
        blocked = asyncio.create_task(RunStream(reader, Keys(settings.key_prefix)).read("live", 10, block_ms=4_000))

        async def waiting() -> bool:
            return any(c.get("name") == name and "b" in c.get("flags", "") for c in await redis_client.client_list())

        await wait_for(waiting, what="the read to block")
        await _removed_and_made_again(stream, members, blocked)
    finally:
        await reader.aclose()


async def _removed_and_made_again(
    stream: RunStream, members: StreamMembers, blocked: asyncio.Task[list[Delivery]]
) -> None:
    assert (await members.retire("default", "live", idle_ms=0, entry_idle_ms=0, limit=10)).removed
    assert await _names(members) == {}
    (token,) = _tokens(1)
    await stream.publish([token])
    (delivery,) = await asyncio.wait_for(blocked, 5)
    assert delivery.token == token
    assert await _names(members) == {"live": 1}  # made again, the entry pending for it
