"""Interval jobs (`every`) against a real API, dispatcher, executor, PostgreSQL and Redis.

An `every: 2s` job runs exactly 2 s apart, no tick missed or doubled; an edit to `every: 3s` is a
revision, and the ticks API explains the ticks of both schedules; a leader gap is caught up under
the job's misfire policy. Then validation (422 naming the field), PATCH switching between kinds of
schedule, and the preview describing an interval honestly.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any
from urllib.parse import quote

import asyncpg
import msgspec
import pytest

from cronos.models import SKIP_MISFIRED, SKIP_SCHEDULE_CHANGED
from cronos.settings import Settings
from cronos.ticks import BEFORE_CREATED, UNACCOUNTED
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.roles import running_role
from tests.integration.test_api_ticks import _at, _past, _ran_after, _ticks
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

SECOND = timedelta(seconds=1)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _on(t: datetime, every_s: int) -> bool:
    """t is epoch + k·every (the default anchor)."""
    return (t - EPOCH) % timedelta(seconds=every_s) == timedelta(0)


async def _scheduled(api: Api, job_id: int) -> list[dict[str, Any]]:
    reply = await api.call("GET", f"/api/jobs/{job_id}/runs?limit=200")
    return [r for r in reply.body["items"] if r["trigger"] == "schedule"]


async def test_an_every_2s_job_runs_2s_apart_an_edit_is_a_revision_and_a_leader_gap_misfires(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    other = msgspec.structs.replace(settings, node_id=settings.node_id + "-b")
    async with running_api(settings) as api, running_role(Executor(settings)):
        async with running_role(Dispatcher(settings)):
            job = await api.create(
                name="every-2s", cron_expression=None, every="2s", timezone="America/New_York", misfire_policy="skip",
                misfire_grace_s=1.0, payload={"action": "noop"},
            )  # fmt: skip
            assert (job["every"], job["anchor"], job["cron_expression"]) == ("2s", None, None)
            jid, created = job["id"], datetime.fromisoformat(job["created_at"])
            assert _on(datetime.fromisoformat(job["next_run_at"]), 2)
            await _ran_after(api, jid, created, 4)
            runs = sorted(await _scheduled(api, jid), key=lambda r: r["scheduled_for"])
            ticks = [datetime.fromisoformat(r["scheduled_for"]) for r in runs if r["state"] == "completed"]
            assert len(ticks) >= 4 and all(_on(t, 2) for t in ticks)
            assert all(b - a == 2 * SECOND for a, b in pairwise(ticks)), "exactly 2 s apart, none missed"
            assert len({(r["scheduled_for"], r["attempt"]) for r in runs}) == len(runs), "none doubled"

            reply = await api.call("PATCH", f"/api/jobs/{jid}", json={"every": 3})
            assert reply.status == 200 and reply.body["every"] == "3s" and reply.body["revision"] == 2, reply.body
            changed = await _at(api, jid)
            await _ran_after(api, jid, changed, 2)
            leader_gone = datetime.now(UTC)
        # 6.5 s without a leader: its successor finds the overdue ticks and, beyond the 1 s grace, skips them.
        await wait_for(lambda: _past(leader_gone + 6.5 * SECOND), timeout=15, what="6.5 s without a leader")
        async with running_role(Dispatcher(other)):
            took_over = datetime.now(UTC)
            await _ran_after(api, jid, took_over, 2)
            end = datetime.now(UTC) - SECOND
            start = created - 3 * SECOND

            async def settled() -> list[dict[str, Any]] | None:
                ticks = await _ticks(api, jid, start, end)
                return None if any(t["outcome"] == "pending" or t["reason"] == UNACCOUNTED for t in ticks) else ticks

            window = await wait_for(settled, timeout=30, interval=0.2, what="every tick of the window settled")
            revisions = (await api.call("GET", f"/api/jobs/{jid}/revisions")).body["items"]
            # A window starting after the edit reads the schedule the edit left (TICK_SCHEDULE_AT).
            later = await _ticks(api, jid, changed + 2 * SECOND, end)
            assert later and {t["every"] for t in later if t["reason"] != SKIP_SCHEDULE_CHANGED} == {"3s"}, later

    assert revisions[0]["fields"] == ["every"] and revisions[0]["changes"] == {"every": "3s"}
    misfired = 0
    for tick in window:
        t = datetime.fromisoformat(tick["scheduled_for"])
        if t <= created:
            assert (tick["outcome"], tick["reason"], tick["every"]) == ("none", BEFORE_CREATED, "2s"), tick
        elif t <= changed:  # the old schedule, as it was
            assert (tick["revision"], tick["every"], tick["outcome"]) == (1, "2s", "ran") and _on(t, 2), tick
        elif tick["reason"] == SKIP_SCHEDULE_CHANGED:  # written ahead under 2s, handed over
            assert _on(t, 2) and not _on(t, 3), tick
        else:
            assert (tick["revision"], tick["every"]) == (2, "3s") and _on(t, 3), tick
            if leader_gone + 1.5 * SECOND < t < took_over - 1.5 * SECOND:
                assert (tick["outcome"], tick["reason"]) == ("skipped", SKIP_MISFIRED), tick
                misfired += 1
            else:
                assert tick["outcome"] == "ran", tick
    assert misfired >= 1, "the gap had ticks late beyond their grace"
    new = [datetime.fromisoformat(t["scheduled_for"]) for t in window if t["every"] == "3s"]
    assert new and all(b - a == 3 * SECOND for a, b in pairwise(new)), "no tick of the new schedule missing"


async def test_interval_validation_switching_and_the_preview(settings: Settings) -> None:
    async with running_api(settings) as api:
        base = {"name": "bad", "payload": {}}
        refusals = {
            "$.every": [
                {"every": "0s"}, {"every": -5}, {"every": 0.5}, {"every": "367d"}, {"every": "soon"},
                {"every": "1h", "cron_expression": "* * * * *"}, {"every": "1h", "run_at": "2030-01-01T00:00:00Z"},
            ],
            "$.anchor": [{"cron_expression": "* * * * *", "anchor": "2026-01-01T00:00:00Z"},
                         {"every": "1h", "anchor": "2026-01-01T00:00:00"}],
            "$.cron_expression": [{}],
        }  # fmt: skip
        for field, bodies in refusals.items():
            for body in bodies:
                reply = await api.call("POST", "/api/jobs", json=base | body)
                assert reply.status == 422 and reply.body["field"] == field, (body, reply.body)
        seed = await api.call(
            "POST", "/api/jobs", json={"name": "seed", "cron_expression": "*/5 * * * *", "payload": {"action": "noop"}}
        )
        assert seed.status == 201 and seed.body["every"] is None and seed.body["anchor"] is None

        anchor = "2026-03-08T01:30:00-05:00"
        job = await api.create(
            name="ninety",
            cron_expression=None,
            every="90m",
            anchor=anchor,
            timezone="America/New_York",
            payload={"action": "noop"},
        )
        assert (job["every"], datetime.fromisoformat(job["anchor"])) == ("1h30m", datetime.fromisoformat(anchor))
        jid = job["id"]
        same = await api.call("PATCH", f"/api/jobs/{jid}", json={"every": 5400})
        assert same.body["revision"] == 1, "5400 s is the stored 1h30m: nothing changed"
        to_cron = await api.call("PATCH", f"/api/jobs/{jid}", json={"cron_expression": "0 * * * *"})
        assert to_cron.status == 200, to_cron.body
        assert (to_cron.body["every"], to_cron.body["anchor"], to_cron.body["revision"]) == (None, None, 2)
        back = await api.call("PATCH", f"/api/jobs/{jid}", json={"every": "2d"})
        assert (back.body["every"], back.body["cron_expression"]) == ("2d", None)
        bad = await api.call("PATCH", f"/api/jobs/{jid}", json={"every": "0m"})
        assert bad.status == 422 and bad.body["field"] == "$.every"

        # A re-run of a past tick knows the interval's ticks (cronos.ticks.plan, as the ticks API does).
        second = await api.create(name="rerun", cron_expression=None, every="1s", payload={"action": "noop"})
        tick = datetime.fromisoformat(second["created_at"]).replace(microsecond=0) + SECOND
        await wait_for(lambda: _past(tick + 0.2 * SECOND), timeout=5, what="a tick in the job's past")
        rerun = await api.call("POST", f"/api/jobs/{second['id']}/trigger", json={"scheduled_for": tick.isoformat()})
        assert rerun.status == 202 and rerun.body["scheduled_for"] == tick.isoformat().replace("+00:00", "Z")
        half = (tick + SECOND / 2).isoformat()
        refused = await api.call("POST", f"/api/jobs/{second['id']}/trigger", json={"scheduled_for": half})
        assert refused.status == 422 and refused.body["field"] == "$.scheduled_for", refused.body

        preview = await api.call(
            "GET", f"/api/schedule/preview?every=90m&anchor={quote(anchor)}&timezone=America/New_York"
            f"&from={quote('2026-03-08T00:00:00-05:00')}&count=4",
        )  # fmt: skip
        assert preview.status == 200, preview.body
        at = [datetime.fromisoformat(f["at"]) for f in preview.body["fire_times"]]
        assert [f["local"] for f in preview.body["fire_times"]] == [
            "2026-03-08T01:30:00-05:00", "2026-03-08T04:00:00-04:00", "2026-03-08T05:30:00-04:00",
            "2026-03-08T07:00:00-04:00",
        ], "elapsed time: 90 min apart across the spring-forward, the wall clock jumps"  # fmt: skip
        assert all(b - a == timedelta(minutes=90) for a, b in pairwise(at))
        assert all(f["dst"] is None for f in preview.body["fire_times"])
        assert preview.body["every"] == "1h30m" and preview.body["cron_expression"] is None
        assert "every 1h30m" in preview.body["description"] and "DST" in preview.body["description"]
        for query, field in (("every=0s", "$.every"), ("every=1h&cron_expression=*+*+*+*+*", "$.every"),
                             ("anchor=2026-01-01T00:00:00Z", "anchor"), ("every=1h&anchor=soon", "anchor"),
                             ("every=1h&timezone=Mars/Base", "$.timezone")):  # fmt: skip
            reply = await api.call("GET", f"/api/schedule/preview?{query}")
            assert reply.status == 422 and reply.body["field"] == field, (query, reply.body)
