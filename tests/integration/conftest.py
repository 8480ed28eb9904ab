"""Fixtures shared by the integration tests that run a real executor."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from cronos.keys import Keys
from cronos.settings import Settings
from cronos.stream import RunStream
from tests.integration.ledger_helpers import Harness


@pytest.fixture
async def harness(pg_pool: Any, redis_client: aioredis.Redis, settings: Settings) -> Harness:
    """The ledger and the default queue's stream (its group created), as an executor sees them."""
    stream = RunStream(redis_client, Keys(settings.key_prefix))
    await stream.ensure_group()
    return Harness(pg_pool, stream)
