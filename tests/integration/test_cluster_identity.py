"""The leader's share of the cluster identity (cronos.identity): written with the marker on each
election and after each Redis data loss; another cluster's id found there is logged, not overwritten."""

from __future__ import annotations

import logging
import uuid

import pytest
import redis.asyncio as aioredis

from cronos import redis_client as connect_redis
from cronos.keys import Keys
from cronos.settings import Settings
from dispatcher.publisher import Publisher


async def test_the_leader_writes_the_identity_again_and_never_over_another_clusters(
    settings: Settings, redis_client: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    keys = Keys(settings.key_prefix)
    ours, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    client = connect_redis.connect(settings.redis_url)
    try:
        publisher = Publisher(client, keys, cluster_id=ours)
        await publisher.prepare()  # an election
        assert await redis_client.get(keys.cluster) == ours.encode()

        await redis_client.delete(keys.cluster, keys.redis_marker)  # Redis lost its data
        assert await publisher.data_lost() == "marker key missing"
        assert await redis_client.get(keys.cluster) == ours.encode()

        caplog.set_level(logging.ERROR)
        await redis_client.set(keys.cluster, theirs)  # another cluster claimed the prefix meanwhile
        await redis_client.delete(keys.redis_marker)
        assert await publisher.data_lost() == "marker key missing"
        assert await redis_client.get(keys.cluster) == theirs.encode()  # claimed with SET NX: not taken over
        [conflict] = [r for r in caplog.records if getattr(r, "event", None) == "cluster.identity_conflict"]
        assert (conflict.__dict__["cluster_id"], conflict.__dict__["redis_cluster_id"]) == (ours, theirs)
    finally:
        await client.aclose()
