"""The breaker that applies to a job, on GET /api/jobs/{id} (issue 40 item 4): its own settings, else
its queue's default (CRONOS_BREAKER_DEFAULTS), else the cluster's; a job created through the API alone."""

from __future__ import annotations

import msgspec
import pytest

from cronos.breaker import parse_defaults
from cronos.settings import Settings
from tests.integration.api_client import running_api

pytestmark = pytest.mark.timeout(60)


async def test_get_shows_the_effective_breaker(settings: Settings) -> None:
    tuned = msgspec.structs.replace(settings, breaker_default_failures=9, breaker_defaults=parse_defaults("etl=3:5"))
    async with running_api(tuned) as api:
        in_etl = await api.create(name="in-etl", queue="etl")
        own = await api.create(name="own", queue="etl", expectations={"breaker": {"failures": 7}})
        other = await api.create(name="other")
        shown = [(await api.call("GET", f"/api/jobs/{job['id']}")).body["breaker"] for job in (in_etl, own, other)]
        assert shown == [{"failures": 3, "canary_every": 5}, {"failures": 7, "canary_every": 5},
                         {"failures": 9, "canary_every": 0}]  # fmt: skip
        assert "breaker" not in in_etl  # only on GET
