"""A spread window through the API on real PostgreSQL (issue 40, item 2): the preview moves each fire
time by the offset the job's name picks, a spread not shorter than the schedule's shortest gap is a
422 naming $.spread on create and on change, a change of spread is a change of schedule (a diff, a
revision), GET shows the next run at its offset, and the fleet view counts spread jobs at their
offsets beside the herd they flatten."""

from __future__ import annotations

from datetime import datetime, timedelta
from urllib.parse import urlencode

import pytest

from api import lint
from api.state import BACKENDS
from cronos.settings import Settings
from cronos.spread import offset_s
from tests.integration.api_client import running_api

pytestmark = pytest.mark.timeout(120)

NAME = "cache-warm"  # offset 57 s of 10m (cronos.spread.offset_s)


async def test_preview_create_change_and_fleet_view_of_a_spread(settings: Settings) -> None:
    assert offset_s(NAME, "10m") == 57
    async with running_api(settings) as api:
        query = {"cron_expression": "0 * * * *", "job": NAME, "spread": "600", "count": "3"}
        preview = await api.call("GET", "/api/schedule/preview?" + urlencode(query))
        assert preview.status == 200, preview.body
        assert preview.body["spread"] == "10m" and preview.body["spread_offset_s"] == 57
        assert [datetime.fromisoformat(t["at"]).strftime("%M:%S") for t in preview.body["fire_times"]] == ["00:57"] * 3
        assert "each tick 57s later (spread 10m)" in preview.body["description"]
        query = {"every": "1h", "job": NAME, "spread": "10m", "count": "2"}
        interval = await api.call("GET", "/api/schedule/preview?" + urlencode(query))
        assert [datetime.fromisoformat(t["at"]).strftime("%M:%S") for t in interval.body["fire_times"]] == ["00:57"] * 2
        wide = await api.call("GET", "/api/schedule/preview?" + urlencode({**query, "spread": "1h"}))
        assert wide.status == 422 and wide.body["field"] == "$.spread", wide.body

        refused = await api.call(
            "POST", "/api/jobs", json={"name": "x", "cron_expression": "*/5 * * * *", "spread": "5m",
                                       "payload": {"action": "noop"}})  # fmt: skip
        assert refused.status == 422 and refused.body["field"] == "$.spread", refused.body
        assert "shortest gap between two ticks (5m)" in refused.body["detail"]
        once = await api.call(
            "POST", "/api/jobs", json={"name": "x", "run_at": "2030-01-01T00:00:00Z", "spread": "5m",
                                       "payload": {"action": "noop"}})  # fmt: skip
        assert once.status == 422 and once.body["field"] == "$.spread", once.body

        job = await api.create(name=NAME, cron_expression="0 * * * *", spread="10m")
        assert job["spread"] == "10m"
        assert datetime.fromisoformat(job["next_run_at"]).strftime("%M:%S") == "00:57"
        got = (await api.call("GET", f"/api/jobs/{job['id']}")).body
        assert got["spread"] == "10m" and got["next_run_at"] == job["next_run_at"]

        too_wide = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"cron_expression": "*/10 * * * *"})
        assert too_wide.status == 422 and too_wide.body["field"] == "$.spread", too_wide.body
        changed = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"spread": "20m"})
        assert changed.status == 200, changed.body
        shift, added = timedelta(seconds=offset_s(NAME, "20m")), changed.body["schedule_diff"]["added"]
        assert added and all((datetime.fromisoformat(t["at"]) - shift).strftime("%M:%S") == "00:00" for t in added)
        revision = (await api.call("GET", f"/api/jobs/{job['id']}/revisions?limit=1")).body["items"][0]
        assert revision["fields"] == ["spread"] and revision["changes"]["spread"] == "20m"
        cleared = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"spread": None})
        assert cleared.status == 200 and cleared.body["spread"] is None
        assert datetime.fromisoformat(cleared.body["next_run_at"]).strftime("%M:%S") == "00:00"

        for index in range(4):
            await api.create(name=f"sync-{index}", cron_expression="0 * * * *", spread="30m")
        lint.forget(api.service.app[BACKENDS])
        starts = (await api.call("GET", "/api/fleet/starts?hours=2")).body
        assert starts["spread_jobs"] == 4 and starts["unspread_peak"] == 5  # 4 spread jobs and cache-warm at :00
        first = datetime.fromisoformat(starts["start"])
        hour = (first + timedelta(hours=1)).replace(minute=0)
        for index in range(4):
            at = hour + timedelta(seconds=offset_s(f"sync-{index}", "30m"))
            assert starts["counts"][int((at - first).total_seconds() // 60)] >= 1
