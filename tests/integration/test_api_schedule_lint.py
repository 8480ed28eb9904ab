"""Schedule lint over the API (real PostgreSQL): the preview's warnings and an edit's diff, the
warnings and diff in the answers to POST and PATCH, the herd warning from the fleet's planned starts,
and GET /api/fleet/starts. One API per module's tests (they share it by job names)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import msgspec
import pytest

from api import lint
from api.state import BACKENDS
from cronos.settings import Settings
from tests.integration.api_client import Api, running_api

HERD = 4


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    async with running_api(msgspec.structs.replace(settings, herd_jobs=HERD)) as client:
        yield client


async def _preview(api: Api, **query: str) -> tuple[int, Any]:
    reply = await api.call("GET", "/api/schedule/preview?" + urlencode(query))
    return reply.status, reply.body


def _codes(body: Any) -> list[str]:
    """The schedule's warnings (no executor runs here: every task job is also `unserved_action`)."""
    return [w["code"] for w in body["warnings"] if w["code"] != "unserved_action"]


async def test_preview_warns_and_diffs_an_edit(api: Api) -> None:
    status, body = await _preview(api, cron_expression="*/90 * * * *", count="3")
    assert status == 200, body
    assert body["description"] == "at minute 0 of every hour"
    [warning] = body["warnings"]
    assert warning["code"] == "step_exceeds_field" and "`every: 90m`" in warning["suggestion"]
    assert {t["at"][14:16] for t in body["fire_times"]} == {"00"}  # what the words say
    assert body["diff"] is None

    status, body = await _preview(
        api,
        cron_expression="30 * * * *",
        timezone="Europe/Berlin",
        previous_cron_expression="30 0-23 * * *",
        days="2",
        **{"from": "2026-03-28T12:00:00Z"},
    )
    assert status == 200, body
    assert _codes(body) == []
    diff = body["diff"]
    assert diff["previous_cron_expression"] == "30 0-23 * * *" and diff["previous_timezone"] == "Europe/Berlin"
    # The appointment ran 02:30 at 03:00 (the gap's end); following real time, that run is gone.
    assert [(t["at"], t["dst"]["kind"]) for t in diff["removed"]] == [("2026-03-29T01:00:00Z", "gap")]
    assert diff["added"] == [] and diff["kept"] == 48 and not diff["partial"]

    status, body = await _preview(api, cron_expression="30 0-23 * * *", timezone="Europe/Berlin")
    assert _codes(body) == ["dst_hours_not_star"]


async def test_preview_refuses_a_bad_previous_schedule_or_days(api: Api) -> None:
    for query, field in (
        ({"previous_cron_expression": "61 * * * *"}, "previous_cron_expression"),
        ({"previous_cron_expression": "* * * * *", "previous_timezone": "Mars/Base"}, "previous_timezone"),
        ({"days": "32"}, "days"),
    ):
        status, body = await _preview(api, cron_expression="* * * * *", **query)
        assert status == 422 and body["field"] == field, body


async def test_create_and_patch_answer_with_warnings_and_the_diff(api: Api) -> None:
    job = await api.create(name="month-end", cron_expression="0 3 31 * *")
    assert _codes(job) == ["day_skips_months"] and "schedule_diff" not in job
    assert job["warnings"][-1]["code"] == "unserved_action"  # the schedule's first, then the routing's
    reply = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"cron_expression": "0 3 L * *"})
    assert reply.status == 200, reply.body
    assert _codes(reply.body) == []
    diff = reply.body["schedule_diff"]
    assert diff["previous_cron_expression"] == "0 3 31 * *" and diff["kept"] + len(diff["added"]) >= 0
    now = datetime.now(UTC)
    # Over the next 7 days: whatever the last day of the month is, it is added; a 31st is kept or removed.
    for tick in diff["added"]:
        at = datetime.fromisoformat(tick["at"])
        assert now < at <= now + timedelta(days=7) and (at + timedelta(days=1)).day == 1
    # A change that leaves the schedule alone has warnings but no diff; GET has neither.
    reply = await api.call("PATCH", f"/api/jobs/{job['id']}", json={"timeout_s": 30})
    assert _codes(reply.body) == [] and "schedule_diff" not in reply.body
    got = await api.call("GET", f"/api/jobs/{job['id']}")
    assert "warnings" not in got.body
    one_off = await api.create(name="once", cron_expression=None, run_at="2099-01-01T00:00:00Z")
    assert _codes(one_off) == []


async def test_a_herd_is_warned_of_and_shown_per_minute(api: Api) -> None:
    backends = api.service.app[BACKENDS]
    for n in range(HERD):
        await api.create(name=f"top-of-hour-{n}", cron_expression="0 * * * *")
    await api.create(name="spread", cron_expression="30 * * * *", jitter_s=600)  # :30 to :40
    await api.create(name="paused", cron_expression="0 * * * *", status="paused")
    lint.forget(backends)  # the answers above reused the starts of the first create
    status, body = await _preview(api, cron_expression="0 * * * *")
    assert status == 200, body
    herd = [w for w in body["warnings"] if w["code"] == "herd"]
    assert len(herd) == 1 and f"{HERD + 1} active jobs" in herd[0]["message"], body["warnings"]
    _status, body = await _preview(api, cron_expression="7 * * * *")
    assert _codes(body) == []

    reply = await api.call("GET", "/api/fleet/starts?hours=3")
    assert reply.status == 200, reply.body
    starts = reply.body
    assert len(starts["counts"]) == 180 and starts["jobs"] == HERD + 1 and starts["herd_jobs"] == HERD
    assert starts["schedules"] == 2 and not starts["partial"]
    start = datetime.fromisoformat(starts["start"])
    on_the_hour = [n for i, n in enumerate(starts["counts"]) if (start + timedelta(minutes=i)).minute == 0]
    assert on_the_hour and set(on_the_hour) == {HERD}  # the paused one never starts
    spread = [(start + timedelta(minutes=i)).minute for i, n in enumerate(starts["counts"]) if n == 1]
    assert spread and all(30 <= m < 40 for m in spread)  # the jittered one: its tick plus its jitter
    assert starts["peaks"][0]["starts"] == HERD
    assert (await api.call("GET", "/api/fleet/starts?hours=49")).status == 422
