"""The leader's consumer reaper against a real Redis (dispatcher.consumer_reaper): the consumers of
executors gone past the bound are removed, their pending entries handed back to the group first;
present executors are kept however idle; a node that no longer leads retires nothing."""

from __future__ import annotations

from typing import Any

import pytest

from cronos import presence
from cronos.keys import Keys
from cronos.messages import RunToken
from cronos.settings import Settings
from cronos.stream import RunStream
from cronos.stream_members import StreamMembers
from dispatcher.consumer_reaper import ConsumerReaper
from dispatcher.election import LeadershipLost
from tests.waiting import wait_for

BOUND_S = 0.3


def _leading() -> int:
    return 1


def _not_leading() -> int:
    raise LeadershipLost("lease expired before it was renewed")


async def _consumers(redis_client: Any, settings: Settings) -> dict[str, int]:
    found = await StreamMembers(redis_client, Keys(settings.key_prefix)).of(["default"])
    return {m.name: m.pending for m in found}


async def test_gone_executors_consumers_go_present_ones_stay(redis_client: Any, settings: Settings) -> None:
    keys = Keys(settings.key_prefix)
    stream = RunStream(redis_client, keys)
    await stream.ensure_group()
    tokens = [
        RunToken(run_id=i, job_id=1, scheduled_for_ms=1000 * i, attempt=1, trigger="schedule", epoch=1)
        for i in range(1, 4)
    ]
    await stream.publish(tokens)
    for name in ("gone-idle", "gone-pending", "present"):
        (delivery,) = await stream.read(name, 1, None)
        if name != "gone-pending":
            await stream.ack([delivery.entry_id])
    await presence.beat(redis_client, keys, "executor", "present", 60)
    assert await _consumers(redis_client, settings) == {"gone-idle": 0, "gone-pending": 1, "present": 0}

    fenced = ConsumerReaper(redis_client, keys, stream.known_queues, _not_leading, BOUND_S)
    with pytest.raises(LeadershipLost):
        await fenced.once()
    assert len(await _consumers(redis_client, settings)) == 3

    reaper = ConsumerReaper(redis_client, keys, stream.known_queues, _leading, BOUND_S)
    done: list[tuple[str, int, str]] = []

    async def retired() -> bool:
        done.extend((m.name, r.handed_back, r.outcome) for m, r in await reaper.once())
        return await _consumers(redis_client, settings) == {"present": 0}

    await wait_for(retired, timeout=10, interval=0.1, what="the gone executors' consumers to be removed")
    assert ("gone-idle", 0, "removed") in done and ("gone-pending", 1, "removed") in done
    (handed,) = await stream.read("present", 10, None)  # the gone one's token, back in the group
    assert handed.token == tokens[1]
