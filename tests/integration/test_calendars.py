"""Calendars, blackouts and the timed pause (issue 25) against a real API, leader, executor,
PostgreSQL and Redis: the API's validation, a blackout that skips and one that defers an
every-second job's ticks (named in the ticks API), and a timed pause the leader lifts itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import asyncpg
import pytest

from cronos.settings import Settings
from dispatcher.service import Dispatcher
from executor.service import Executor
from tests.integration.api_client import Api, running_api
from tests.integration.roles import running_role
from tests.waiting import wait_for

pytestmark = pytest.mark.timeout(120)
SECOND = timedelta(seconds=1)


def _iso(instant: datetime) -> str:
    return quote(instant.isoformat())


async def _problem(api: Api, method: str, path: str, body: Any, status: int = 422) -> str:
    reply = await api.call(method, path, json=body)
    assert reply.status == status, reply.body
    return str(reply.body.get("field") or reply.body.get("detail"))


async def test_calendars_and_blackouts_are_validated_audited_and_previewed(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(settings) as api:
        cal = {"name": "holidays", "timezone": "Europe/Berlin", "dates": ["2030-01-01"],
               "ranges": [{"from": "2030-12-24", "to": "2030-12-26"}]}  # fmt: skip
        reply = await api.call("POST", "/api/calendars", json=cal)
        assert reply.status == 201, reply.body
        assert reply.body["ranges"] == [{"from": "2030-12-24", "to": "2030-12-26"}]
        assert (await api.call("POST", "/api/calendars", json=cal)).status == 409
        put = await api.call("PUT", "/api/calendars/weekdays", json={"weekdays": ["mon", "tue", "wed", "thu", "fri"]})
        assert put.status == 201, put.body
        assert [c["name"] for c in (await api.call("GET", "/api/calendars")).body["items"]] == ["holidays", "weekdays"]
        # Bad input: 422 naming the field, nothing written.
        assert await _problem(api, "PUT", "/api/calendars/x", {"weekdays": ["monday"]}) == "$.weekdays[0]"
        assert await _problem(api, "PUT", "/api/calendars/x", {"timezone": "Mars/Base"}) == "$.timezone"
        bad_range = {"ranges": [{"from": "2030-02-02", "to": "2030-02-01"}]}
        assert await _problem(api, "PUT", "/api/calendars/x", bad_range) == "$.ranges[0].to"
        assert (await api.call("GET", "/api/calendars/x")).status == 404
        now = datetime.now(UTC)
        both = {"name": "b", "starts_at": now.isoformat(), "ends_at": (now + SECOND).isoformat(),
                "cron_expression": "0 2 * * 0", "duration_s": 60}  # fmt: skip
        assert await _problem(api, "POST", "/api/blackouts", both) == "$.starts_at"
        backwards = {"name": "b", "starts_at": now.isoformat(), "ends_at": (now - SECOND).isoformat()}
        assert await _problem(api, "POST", "/api/blackouts", backwards) == "$.ends_at"
        no_duration = {"name": "b", "cron_expression": "0 2 * * 0"}
        assert await _problem(api, "POST", "/api/blackouts", no_duration) == "$.duration_s"
        bad_cron = {"name": "b", "cron_expression": "0 25 * * *", "duration_s": 60}
        assert (await _problem(api, "POST", "/api/blackouts", bad_cron)).startswith("$.cron_expression")
        assert await _problem(api, "POST", "/api/blackouts", {"name": "b", "action": "pause"}) == "$.action"
        # A job names only calendars that exist; a calendar a job names cannot be deleted.
        unknown = {"name": "j0", "cron_expression": "0 9 * * *", "payload": {"action": "noop"},
                   "calendars": [{"name": "nope"}]}  # fmt: skip
        assert await _problem(api, "POST", "/api/jobs", unknown) == "$.calendars[0].name"
        bad_mode = {**unknown, "calendars": [{"name": "weekdays", "mode": "only"}]}
        assert await _problem(api, "POST", "/api/jobs", bad_mode) == "$.calendars[0].mode"
        job = await api.create(name="j1", cron_expression="0 9 * * *", payload={"action": "noop"},
                               calendars=[{"name": "weekdays", "mode": "allow"}, {"name": "holidays"}])  # fmt: skip
        assert job["calendars"] == [{"name": "weekdays", "mode": "allow"}, {"name": "holidays", "mode": "exclude"}]
        assert (await api.call("DELETE", "/api/calendars/weekdays")).status == 409
        # The preview labels excluded ticks with the rule, in the calendar's time zone.
        path = "/api/schedule/preview?cron_expression=0+9+*+*+*&timezone=Europe/Berlin&count=4"
        reply = await api.call("GET", f"{path}&from=2029-12-30T12:00:00Z&calendars=weekdays:allow,holidays")
        assert reply.status == 200, reply.body
        assert [(f["at"][:10], f["excluded"]) for f in reply.body["fire_times"]] == [
            ("2029-12-31", None), ("2030-01-01", "calendar:holidays"), ("2030-01-02", None), ("2030-01-03", None),
        ]  # fmt: skip
        assert (await api.call("GET", f"{path}&calendars=nope")).status == 422
        # An interval is filtered the same way (the rules wrap whatever schedule a job has).
        daily = "/api/schedule/preview?every=1d&anchor=2029-01-01T08:00:00Z&timezone=Europe/Berlin&count=4"
        reply = await api.call("GET", f"{daily}&from=2029-12-30T12:00:00Z&calendars=weekdays:allow,holidays")
        assert reply.status == 200, reply.body
        assert [(f["at"][:10], f["excluded"]) for f in reply.body["fire_times"]] == [
            ("2029-12-31", None), ("2030-01-01", "calendar:holidays"), ("2030-01-02", None), ("2030-01-03", None),
        ]  # fmt: skip
        bare = await api.call("GET", f"{path}&from=2029-12-30T12:00:00Z")
        assert [f["excluded"] for f in bare.body["fire_times"]] == [None] * 4
        # A recurring blackout, and the audit trail of these changes.
        weekly = {"name": "sunday-maint", "action": "defer", "cron_expression": "0 8 * * 0", "duration_s": 7200,
                  "timezone": "Europe/Berlin", "selector": {"jobs": ["j1"]}}  # fmt: skip
        created = await api.call("POST", "/api/blackouts", json=weekly)
        assert created.status == 201, created.body
        assert (await api.call("POST", "/api/blackouts", json=weekly)).status == 409
        listed = (await api.call("GET", "/api/blackouts")).body["items"]
        assert [b["name"] for b in listed] == ["sunday-maint"] and listed[0]["selector"]["jobs"] == ["j1"]
        sunday = await api.call("GET", f"{path}&from=2030-01-04T12:00:00Z&job=j1&calendars=")
        assert sunday.body["fire_times"][1]["excluded"] == "blackout:sunday-maint"  # Sunday 6 Jan, 09:00 Berlin
        assert sunday.body["fire_times"][1]["deferred_until"] == "2030-01-06T09:00:00Z"  # 10:00 Berlin
        assert (await api.call("DELETE", f"/api/blackouts/{created.body['id']}")).status == 204
        assert (await api.call("DELETE", f"/api/blackouts/{created.body['id']}")).status == 404
        audited = await pg_pool.fetch("SELECT subject, action FROM audit_log WHERE subject <> 'job' ORDER BY id")
        assert [(r["subject"], r["action"]) for r in audited] == [
            ("calendar", "created"), ("calendar", "created"), ("blackout", "created"), ("blackout", "deleted"),
        ]  # fmt: skip
        # The timed pause: the seed's toggle without a body is unchanged; a pause in the past is refused.
        jid = job["id"]
        assert await _problem(api, "POST", f"/api/jobs/{jid}/pause", {"until": "2020-01-01T00:00:00Z"}) == "$.until"
        assert await _problem(api, "POST", f"/api/jobs/{jid}/pause", {"until": "soon"}) == "$.until"
        assert (await api.call("PATCH", f"/api/jobs/{jid}/toggle")).body["status"] == "paused"
        assert (await api.call("PATCH", f"/api/jobs/{jid}/toggle")).body["status"] == "active"


def _by_tick(ticks: list[dict[str, Any]]) -> dict[datetime, dict[str, Any]]:
    return {datetime.fromisoformat(t["scheduled_for"]): t for t in ticks}


async def test_a_real_leader_skips_and_defers_blackout_ticks_and_lifts_a_timed_pause(
    settings: Settings, pg_pool: asyncpg.Pool
) -> None:
    async with running_api(settings) as api, running_role(Executor(settings)), running_role(Dispatcher(settings)):
        every = {"cron_expression": "* * * * * *", "payload": {"action": "noop"}, "misfire_grace_s": 0}
        skip_job = await api.create(name="skipper", **every)
        defer_job = await api.create(name="deferrer", misfire_policy="run_once", **every)
        paused_job = await api.create(name="napper", **every)
        start = datetime.now(UTC).replace(microsecond=0) + 2 * SECOND
        end = start + 2.5 * SECOND  # not on a tick: under run_once a tick at the release would be the lot's run
        window = {"starts_at": start.isoformat(), "ends_at": end.isoformat()}
        for name, action, job in (("deploy", "skip", "skipper"), ("freeze", "defer", "deferrer")):
            reply = await api.call("POST", "/api/blackouts", json={"name": name, "action": action, **window,
                                                                    "selector": {"jobs": [job]}})  # fmt: skip
            assert reply.status == 201, reply.body
        until = start + 2 * SECOND
        body = {"until": until.isoformat(), "note": "vendor maintenance"}
        pause = await api.call("POST", f"/api/jobs/{paused_job['id']}/pause", json=body)
        assert pause.status == 200, pause.body
        assert (pause.body["status"], pause.body["pause_note"]) == ("paused", "vendor maintenance")
        assert datetime.fromisoformat(pause.body["paused_until"]) == until

        async def lifted() -> dict[str, Any] | None:
            job = (await api.call("GET", f"/api/jobs/{paused_job['id']}")).body
            return job if job["status"] == "active" else None

        resumed = await wait_for(lifted, timeout=15, interval=0.1, what="the timed pause lifted by the leader")
        assert resumed["paused_until"] is None and resumed["pause_note"] is None
        revision = (await api.call("GET", f"/api/jobs/{paused_job['id']}/revisions?limit=1")).body["items"][0]
        assert (revision["kind"], revision["actor"]) == ("resumed", "dispatcher")
        assert datetime.fromisoformat(revision["at"]) >= until
        history = (await api.call("GET", f"/api/jobs/{paused_job['id']}/history?limit=1")).body["items"][0]
        assert (history["action"], history["actor"]) == ("resumed", "dispatcher")

        later = end + 2 * SECOND
        path = lambda jid: f"/api/jobs/{jid}/ticks?from={_iso(start - SECOND)}&to={_iso(later)}"  # noqa: E731

        async def settled(jid: int) -> dict[datetime, dict[str, Any]] | None:
            if datetime.now(UTC) < later + SECOND:
                return None
            ticks = _by_tick((await api.call("GET", path(jid))).body["items"])
            return None if any(t["outcome"] == "pending" for t in ticks.values()) else ticks

        skipped = await wait_for(lambda: settled(skip_job["id"]), timeout=20, interval=0.2, what="skipper settled")
        deferred = await wait_for(lambda: settled(defer_job["id"]), timeout=20, interval=0.2, what="deferrer settled")

    inside = [start + n * SECOND for n in range(3)]
    for t in inside:
        assert (skipped[t]["outcome"], skipped[t]["reason"], skipped[t]["rule"]) == (
            "skipped", "blackout:deploy", "blackout:deploy"), skipped[t]  # fmt: skip
    after = start + 3 * SECOND
    assert skipped[start - SECOND]["outcome"] == "ran" and skipped[after]["outcome"] == "ran"
    # Deferred under run_once: the window's newest tick ran once released (at the end or after),
    # the others are skipped naming the blackout; nothing ran inside the window.
    assert [deferred[t]["outcome"] for t in inside] == ["skipped", "skipped", "ran"], [deferred[t] for t in inside]
    assert {deferred[t]["reason"] for t in inside[:2]} == {"blackout:freeze"}
    assert all(deferred[t]["rule"] == "blackout:freeze" for t in inside)
    released = deferred[inside[-1]]["runs"][0]
    assert released["held_back_s"] >= (end - inside[-1]).total_seconds() - 0.01, released
    assert released["start_delay_s"] >= (end - inside[-1]).total_seconds() - 0.01, released
    assert deferred[after]["outcome"] == "ran" and deferred[start - SECOND]["outcome"] == "ran"
