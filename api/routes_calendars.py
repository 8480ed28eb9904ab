"""/api/calendars and /api/blackouts (issue 25): the business calendars jobs name and the blackout
windows that skip or defer ticks (their meaning: cronos.rules). Reads need scope read, writes
scope write; each write is audited and reaches the leader through its notification.
"""

from __future__ import annotations

import re
from datetime import timedelta

import msgspec
from aiohttp import web

from api.auth import principal_of
from api.bodies import check_schedule, decode, path_id, respond
from api.namespace_query import NAMESPACE, query_namespace
from api.routing import BODY_ERRORS, DB_ERRORS, ID, Route
from api.schemas_rules import BlackoutCreate, BlackoutList, CalendarCreate, CalendarIn, CalendarList
from api.state import BACKENDS
from cronos import namespaces
from cronos.errors import Conflict, InvalidInput, NotFound
from cronos.rules import NAME_PATTERN, Blackout, Calendar
from cronos.store.rules import RuleStore

_MAX_WINDOW = timedelta(days=366)  # a one-off blackout longer than this is a pause: use one


async def _store(request: web.Request) -> RuleStore:
    return RuleStore(await request.app[BACKENDS].pool())


def _name(request: web.Request) -> str:
    name = request.match_info["name"]
    if not re.fullmatch(NAME_PATTERN, name):
        raise NotFound(f"calendar {name[:80]!r} not found")
    return name


def check_calendar(name: str, body: CalendarIn, namespace: str = namespaces.DEFAULT) -> Calendar:
    check_schedule("* * * * *", body.timezone)  # 422 on $.timezone
    for index, days in enumerate(body.ranges):
        if days.end < days.start:
            raise InvalidInput(f"$.ranges[{index}].to", "must not be before `from`")
    fields = msgspec.structs.asdict(body)
    fields.pop("name", None)
    return Calendar(name=name, **fields, namespace=namespace)


def check_blackout(body: BlackoutCreate) -> dict[str, object]:
    one_off = body.starts_at is not None or body.ends_at is not None
    recurring = body.cron_expression is not None or body.duration_s is not None
    if one_off == recurring:
        raise InvalidInput("$.starts_at", "give starts_at and ends_at (one-off) or cron_expression and duration_s")
    if one_off:
        if body.starts_at is None or body.ends_at is None:
            raise InvalidInput(
                "$.ends_at" if body.ends_at is None else "$.starts_at", "give both starts_at and ends_at"
            )
        if body.ends_at <= body.starts_at:
            raise InvalidInput("$.ends_at", "must be after starts_at")
        if body.ends_at - body.starts_at > _MAX_WINDOW:
            raise InvalidInput("$.ends_at", f"a one-off window lasts at most {_MAX_WINDOW.days} days")
        check_schedule("* * * * *", body.timezone)
    else:
        if body.cron_expression is None or body.duration_s is None:
            missing = "$.duration_s" if body.duration_s is None else "$.cron_expression"
            raise InvalidInput(missing, "give both cron_expression and duration_s")
        check_schedule(body.cron_expression, body.timezone)
    for index, job in enumerate(body.selector.jobs):
        if not job or "\x00" in job:
            raise InvalidInput(f"$.selector.jobs[{index}]", "a job name, not empty, no NUL")
    return msgspec.structs.asdict(body)


async def list_calendars(request: web.Request) -> web.Response:
    namespace = query_namespace(request)
    found = await (await _store(request)).calendars()
    return respond(CalendarList(items=[c for c in found if c.namespace == namespace]))


async def get_calendar(request: web.Request) -> web.Response:
    return respond(await (await _store(request)).calendar(_name(request)))


async def create_calendar(request: web.Request) -> web.Response:
    body = await decode(request, CalendarCreate)
    store = await _store(request)
    actor = principal_of(request).name
    wanted = check_calendar(body.name, body, query_namespace(request))
    calendar, _created = await store.put_calendar(wanted, actor=actor, replace=False)
    return respond(calendar, status=201)


async def put_calendar(request: web.Request) -> web.Response:
    name = _name(request)
    body = await decode(request, CalendarIn)
    store = await _store(request)
    wanted = check_calendar(name, body, query_namespace(request))
    calendar, created = await store.put_calendar(wanted, actor=principal_of(request).name)
    return respond(calendar, status=201 if created else 200)


async def delete_calendar(request: web.Request) -> web.Response:
    await (await _store(request)).delete_calendar(_name(request), actor=principal_of(request).name)
    return web.Response(status=204)


async def list_blackouts(request: web.Request) -> web.Response:
    return respond(BlackoutList(items=await (await _store(request)).blackouts()))


async def get_blackout(request: web.Request) -> web.Response:
    return respond(await (await _store(request)).blackout(path_id(request)))


async def create_blackout(request: web.Request) -> web.Response:
    fields = check_blackout(await decode(request, BlackoutCreate))
    blackout = await (await _store(request)).create_blackout(fields, actor=principal_of(request).name)
    return respond(blackout, status=201)


async def delete_blackout(request: web.Request) -> web.Response:
    await (await _store(request)).delete_blackout(path_id(request), actor=principal_of(request).name)
    return web.Response(status=204)


_CAL = "/api/calendars/{name}"
_BLACKOUT = f"/api/blackouts/{ID}"
ROUTES = (
    Route("GET", "/api/calendars", list_calendars, "Business calendars, by name", response=CalendarList,
          errors=(InvalidInput, *DB_ERRORS), query=(NAMESPACE,)),
    Route("POST", "/api/calendars", create_calendar,
          "Create a calendar (409 if the name exists); jobs name it in `calendars` to exclude or allow its days",
          status=201, body=CalendarCreate, response=Calendar, errors=(*BODY_ERRORS, NotFound, Conflict, *DB_ERRORS),
          query=(NAMESPACE,)),
    Route("GET", _CAL, get_calendar, "A calendar", response=Calendar, errors=(NotFound, *DB_ERRORS)),
    Route("PUT", _CAL, put_calendar, "Create or replace a calendar (201 when created); the leader applies it at once",
          body=CalendarIn, response=Calendar, errors=(*BODY_ERRORS, NotFound, Conflict, *DB_ERRORS),
          also=((201, "created", Calendar),), query=(NAMESPACE,)),
    Route("DELETE", _CAL, delete_calendar, "Delete a calendar (409 while a job names it)", status=204,
          errors=(NotFound, Conflict, *DB_ERRORS)),
    Route("GET", "/api/blackouts", list_blackouts, "Blackout windows, by id", response=BlackoutList,
          errors=DB_ERRORS),
    Route("POST", "/api/blackouts", create_blackout,
          "Create a blackout window: one-off or recurring, for every job or a selector's, skip or defer",
          status=201, body=BlackoutCreate, response=Blackout, errors=(*BODY_ERRORS, Conflict, *DB_ERRORS)),
    Route("GET", _BLACKOUT, get_blackout, "A blackout window", response=Blackout, errors=(NotFound, *DB_ERRORS)),
    Route("DELETE", _BLACKOUT, delete_blackout, "Delete a blackout window; deferred ticks are released at once",
          status=204, errors=(NotFound, *DB_ERRORS)),
)  # fmt: skip
