"""Every API body field that holds an instant, as a test sends it and reads it back (issue 36).

A field is one async function: it sends `value` in a body through a real API and returns the
reply and, when the API stored the instant, every place it shows it again (the reply, a fresh
GET). The tests hold each to: refused with a 422 naming the field, or given back exactly (the
same instant, with an offset).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from cronos import instants
from tests.integration.api_client import SEED_JOB, Api, Reply

_names = itertools.count()
_US = timedelta(microseconds=1)
TODAY = datetime(2026, 1, 1, tzinfo=UTC)
Sent = tuple[Reply, list[str]]


def _name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


async def _job(api: Api, **fields: object) -> Reply:
    return await api.call("POST", "/api/jobs", json={**SEED_JOB, "name": _name("job"), **fields})


async def _job_field(api: Api, field: str, value: str, **more: object) -> Sent:
    reply = await _job(api, **{field: value}, **more)
    if reply.status != 201:
        return reply, []
    again = (await api.call("GET", f"/api/jobs/{reply.body['id']}")).body
    return reply, [reply.body[field], again[field]]


async def _changed(api: Api, method: str, suffix: str, body: dict[str, str], shown_as: str) -> Sent:
    """A change of an hourly job (`suffix` after its path), the instant read back as `shown_as`."""
    job = (await _job(api, cron_expression="0 * * * *")).body
    reply = await api.call(method, f"/api/jobs/{job['id']}{suffix}", json=body)
    if reply.status != 200:
        return reply, []
    again = (await api.call("GET", f"/api/jobs/{job['id']}")).body
    return reply, [reply.body[shown_as], again[shown_as]]


async def _blackout(api: Api, field: str, value: str) -> Sent:
    """A window of a microsecond: its other end next to `value`, or today when that is no instant."""
    other, step = ("ends_at", _US) if field == "starts_at" else ("starts_at", -_US)
    try:
        pair = datetime.fromisoformat(value) + step
    except OverflowError:
        pair = TODAY
    window = {other: (pair if instants.usable(pair) else TODAY).isoformat(), field: value}
    body = {"name": _name("blackout"), "action": "skip", **window, "selector": {"jobs": ["nobody"]}}
    reply = await api.call("POST", "/api/blackouts", json=body)
    if reply.status != 201:
        return reply, []
    again = (await api.call("GET", f"/api/blackouts/{reply.body['id']}")).body
    return reply, [reply.body[field], again[field]]


async def _token(api: Api, value: str) -> Sent:
    name = _name("token")
    reply = await api.call("POST", "/api/tokens", json={"name": name, "scopes": ["read"], "expires_at": value})
    if reply.status != 201:
        return reply, []
    listed = [t for t in (await api.call("GET", "/api/tokens")).body["items"] if t["name"] == name]
    return reply, [reply.body["expires_at"], listed[0]["expires_at"]]


async def _backfill(api: Api, field: str, value: str) -> Sent:
    job = (await _job(api)).body
    body = {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T01:00:00Z", field: value, "dry_run": True}
    return await api.call("POST", f"/api/jobs/{job['id']}/backfill", json=body), []  # nothing stored


async def _rerun(api: Api, value: str) -> Sent:
    job = (await _job(api)).body
    reply = await api.call("POST", f"/api/jobs/{job['id']}/trigger", json={"scheduled_for": value})
    if reply.status != 202:
        return reply, []
    again = (await api.call("GET", f"/api/runs/{reply.body['id']}")).body
    return reply, [reply.body["scheduled_for"], again["scheduled_for"]]


Field = Callable[[Api, str], Awaitable[Sent]]
# The path a 422 names → how to send it.
FIELDS: dict[str, Field] = {
    "$.start_at": lambda api, v: _job_field(api, "start_at", v),
    "$.end_at": lambda api, v: _job_field(api, "end_at", v),
    "$.run_at": lambda api, v: _job_field(api, "run_at", v, cron_expression=None),
    "$.anchor": lambda api, v: _job_field(api, "anchor", v, cron_expression=None, every="1h"),
    "PATCH $.start_at": lambda api, v: _changed(api, "PATCH", "", {"start_at": v}, "start_at"),
    "PATCH $.end_at": lambda api, v: _changed(api, "PATCH", "", {"end_at": v}, "end_at"),
    "$.until": lambda api, v: _changed(api, "POST", "/pause", {"until": v}, "paused_until"),
    "$.starts_at": lambda api, v: _blackout(api, "starts_at", v),
    "$.ends_at": lambda api, v: _blackout(api, "ends_at", v),
    "$.expires_at": _token,
    "$.from": lambda api, v: _backfill(api, "from", v),
    "$.to": lambda api, v: _backfill(api, "to", v),
    "$.scheduled_for": _rerun,
}


def path_of(key: str) -> str:
    return key.removeprefix("PATCH ")


def same_instant(sent: str, shown: str | None) -> bool:
    """`shown` is `sent`'s instant exactly, with an offset."""
    if shown is None:
        return False
    back = datetime.fromisoformat(shown)
    return back.utcoffset() is not None and back == datetime.fromisoformat(sent)
