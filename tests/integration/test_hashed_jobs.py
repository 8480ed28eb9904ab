"""`H` end to end on real PostgreSQL and Redis (issue 40, item 2): a job written `H/4 * * * * *`
runs every 4 s at the offset its name picks, the preview and the answer to its create say which,
its ticks are accounted at those instants, the fleet view counts it as spread, and a rename moves
it (a new schedule: the ticks written ahead for the old name are handed over)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from api import lint
from api.state import BACKENDS
from cronos.cron_fields import SECOND
from cronos.hashed import offset
from cronos.settings import Settings
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.roles import running_role
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

WRITTEN = "H/4 * * * * *"
FIRST, RENAMED = "spread-a", "spread-c"  # offsets 1 and 3 of 4 (cronos.hashed.offset)


async def _scheduled_seconds(api: Api, job_id: int, after: datetime, count: int) -> set[int]:
    async def enough() -> set[int] | None:
        reply = await api.call("GET", f"/api/jobs/{job_id}/runs?state=completed&limit=200")
        runs = [r for r in reply.body["items"] if r["trigger"] == "schedule"]
        times = [datetime.fromisoformat(r["scheduled_for"]) for r in runs]
        later = [t for t in times if t > after]
        return {t.second % 4 for t in later} if len(later) >= count else None

    found: set[int] = await wait_for(enough, timeout=40, interval=0.1, what=f"{count} scheduled runs after {after}")
    return found


async def test_h_runs_at_the_names_offset_and_a_rename_moves_it(settings: Settings) -> None:
    assert (offset(FIRST, SECOND, 4), offset(RENAMED, SECOND, 4)) == (1, 3)
    async with running_api(settings) as api, running_role(Executor(settings)), running_role(Dispatcher(settings)):
        preview = await api.call("GET", "/api/schedule/preview?" + urlencode(
            {"cron_expression": WRITTEN, "job": FIRST, "count": "3"}))  # fmt: skip
        assert preview.status == 200, preview.body
        assert preview.body["cron_expression"] == "1-59/4 * * * * *"
        assert {datetime.fromisoformat(t["at"]).second % 4 for t in preview.body["fire_times"]} == {1}
        assert preview.body["warnings"][0]["code"] == "hashed"
        assert "`H/4` in the second field is `1-59/4`" in preview.body["warnings"][0]["message"]

        job = await api.create(name=FIRST, cron_expression=WRITTEN, payload={"action": "noop"})
        assert job["cron_expression"] == WRITTEN  # stored as written
        assert [w["code"] for w in job["warnings"]][:1] == ["hashed"]
        created = datetime.fromisoformat(job["created_at"])
        assert await _scheduled_seconds(api, job["id"], created, 3) == {1}

        lint.forget(api.service.app[BACKENDS])
        starts = (await api.call("GET", "/api/fleet/starts?hours=1")).body
        assert starts["spread_jobs"] == 1 and starts["unspread_peak"] == 15  # H/4 at 0: 0, 4, … 56 a minute

        renamed = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"name": RENAMED})
        assert renamed.status == 200, renamed.body
        assert renamed.body["schedule_diff"]["added"], renamed.body  # the rename is a change of schedule
        revisions = (await api.call("GET", f"/api/jobs/{job['id']}/revisions?limit=1")).body["items"]
        changed = datetime.fromisoformat(revisions[0]["at"])
        assert await _scheduled_seconds(api, job["id"], changed + timedelta(seconds=1), 3) == {3}

        end = datetime.now(UTC) - timedelta(seconds=1)

        async def settled() -> list[dict[str, Any]] | None:
            path = f"/api/jobs/{job['id']}/ticks?from={quote(created.isoformat())}&to={quote(end.isoformat())}"
            reply = await api.call("GET", path)
            items: list[dict[str, Any]] = reply.body["items"]
            return None if any(t["outcome"] == "pending" for t in items) else items

        ticks = await wait_for(settled, timeout=30, interval=0.2, what="the ticks settled")
        for tick in ticks:
            at = datetime.fromisoformat(tick["scheduled_for"])
            assert at.second % 4 == (1 if at <= changed else 3), tick  # each tick at its name's offset
            assert tick["reason"] != "unaccounted", tick
