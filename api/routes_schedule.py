"""GET /api/schedule/preview: the next fire times of an expression, with DST notes and plain words.

The console calls it as the user types a schedule. The expression and zone are checked as
job creation checks them (the same 422 problem body); the fire times come from the
scheduler's own Schedule.next_after, so the preview is what the dispatcher will do. The DST
notes are read from the outside: a fire time whose local wall time the expression does not
name, at the end of a spring-forward gap, was moved there by the gap; a wall time that
exists twice fired once (an appointment) or on both passes (a job following elapsed time).

A preview looks at most HORIZON (a century) past `from`, so a rare expression (`0 0 29 2 *`, count
100) costs a bounded walk; the response says where it stopped looking. It is computed on the API's
compute thread (`off_loop`), never on the event loop.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal, TypeVar
from zoneinfo import ZoneInfo

import msgspec
from aiohttp import web

from api.bodies import check_schedule, convert, respond, utc_now
from api.describe import describe
from api.errors import invalid_input
from api.routing import DB_ERRORS, Query, Route
from api.schemas import Expression, Timezone
from api.state import BACKENDS
from cronos.errors import InvalidInput
from cronos.models import DEFAULT_QUEUE
from cronos.rules import NAME_PATTERN, NO_RULES, CalendarRef, RuleBook, Rules
from cronos.schedule import NEVER_AT, Schedule, parse_schedule
from cronos.store.rules import RuleStore

DEFAULT_COUNT = 10
MAX_COUNT = 100
_US = timedelta(microseconds=1)
_SECOND = timedelta(seconds=1)
_LEAP = re.compile(r"(T\d\d:\d\d:)60")
HORIZON = timedelta(days=36_525)  # a century past `from`: how far a preview looks at most
T = TypeVar("T")
# One thread for the API's pure computations (previews, tick pages): bounded, but milliseconds of
# CPU that must not hold the event loop (/health, and in `cronos dev` the dispatcher and executor).
# One, because the GIL lets no second one add throughput, only contention with the loop.
_COMPUTE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="api-compute")

DstKind = Literal["gap", "fold_once", "fold_first", "fold_second"]


class PreviewQuery(msgspec.Struct, kw_only=True):
    cron_expression: Expression
    timezone: Timezone = "UTC"


class DstNote(msgspec.Struct, kw_only=True):
    """`gap`: moved to the end of a spring-forward gap. `fold_once`: a repeated wall time, fired
    once (its first pass). `fold_first` / `fold_second`: a repeated wall time fired on each pass."""

    kind: DstKind
    detail: str


_EXCLUDED = msgspec.Meta(
    description="`calendar:<name>` or `blackout:<name>`: the rule that skips or defers this tick (with `calendars`, "
    "`job` or `queue` in the query); null: it runs"
)


class FireTime(msgspec.Struct, kw_only=True):
    at: datetime  # UTC
    local: str  # wall time with its offset, in the schedule's zone
    dst: DstNote | None = None
    excluded: Annotated[str | None, _EXCLUDED] = None
    deferred_until: Annotated[datetime | None, msgspec.Meta(description="a deferred tick's release")] = None


class Preview(msgspec.Struct, kw_only=True):
    cron_expression: str
    timezone: str
    description: str
    fire_times: list[FireTime]  # `count` of them, fewer where the horizon or the calendar (year 9999) ends first
    horizon: Annotated[
        datetime,
        msgspec.Meta(description="fire times are looked for up to this instant (`from` plus a century) and no further"),
    ]


# --- pure: DST notes from fire instants --------------------------------------------------


def _fires_at(schedule: Schedule, instant: datetime) -> bool:
    return schedule.next_after(instant - _US) == instant


def _wall_named(expression: str, wall: datetime) -> bool:
    """Whether the expression names this wall time (the same schedule, read in UTC)."""
    return _fires_at(parse_schedule(expression, "UTC"), wall.replace(tzinfo=UTC))


def dst_note(schedule: Schedule, zone: ZoneInfo, at: datetime) -> DstNote | None:
    local = at.astimezone(zone)
    before = (at - _SECOND).astimezone(zone)
    if before.utcoffset() != local.utcoffset() and local.utcoffset() > before.utcoffset():  # type: ignore[operator]
        wall = local.replace(tzinfo=None)
        if not _wall_named(schedule.expression, wall):
            jump = f"{(before + _SECOND).strftime('%H:%M')} to {local.strftime('%H:%M')}"
            return DstNote(kind="gap", detail=f"moved: clocks jump from {jump}, the time it names is skipped")
    other = local.replace(fold=1 - local.fold)
    if other.utcoffset() == local.utcoffset():
        return None  # this wall time exists once
    other_at = other.astimezone(UTC)
    clock = local.strftime("%H:%M")
    if _fires_at(schedule, other_at):
        which = "second" if local.fold else "first"
        return DstNote(
            kind=f"fold_{which}",  # type: ignore[arg-type]
            detail=f"{clock} happens twice (clocks fall back); this job follows elapsed time and fires on "
            f"both passes: this is the {which}",
        )
    return DstNote(kind="fold_once", detail=f"{clock} happens twice (clocks fall back); fires once, on the first")


def horizon_of(after: datetime) -> datetime:
    try:
        return (after + HORIZON).astimezone(UTC)
    except OverflowError:  # the calendar ends first
        return NEVER_AT


def preview(schedule: Schedule, after: datetime, count: int, rules: Rules = NO_RULES) -> Preview:
    zone = ZoneInfo(schedule.timezone)
    times: list[FireTime] = []
    current, horizon = after, horizon_of(after)
    for index in range(1, count + 1):
        try:
            current = schedule.next_after(current)
            if current == NEVER_AT or current > horizon:  # @never, or past the horizon
                break
            local = current.astimezone(zone)
            verdict = rules.verdict(current) if rules else None
            times.append(
                FireTime(
                    at=current, local=local.isoformat(), dst=dst_note(schedule, zone, current),
                    excluded=None if verdict is None else verdict.reason,
                    deferred_until=None if verdict is None else verdict.release_at,
                )
            )  # fmt: skip
            if index % 10 == 0:  # ~0.1 ms of work each, more for rare expressions
                hand_back()
        except OverflowError:  # the calendar ends (year 9999): the list is shorter
            break
    return Preview(
        cron_expression=schedule.expression,
        timezone=schedule.timezone,
        description=describe(schedule.expression),
        fire_times=times,
        horizon=horizon,
    )


def hand_back() -> None:
    """Between two steps of a computation on the compute thread: let the event loop's thread take the
    GIL if it waits for it. Otherwise it gets it only when the switch interval (5 ms) forces a
    hand-over, several times per request (/health p99 ~60 ms instead of ~30 ms under 8 clients).
    Called every few steps: each call may give the CPU away too."""
    time.sleep(0)  # releases the GIL


async def off_loop(compute: Callable[..., T], *args: Any) -> T:
    """`compute(*args)` on the API's compute thread, its turn after those already waiting."""
    return await asyncio.get_running_loop().run_in_executor(_COMPUTE, compute, *args)


def _schema(struct: type[msgspec.Struct], name: str) -> dict[str, Any]:
    """A query parameter's JSON schema: the same field's in the body Struct (one source of limits)."""
    _refs, components = msgspec.json.schema_components([struct])
    return dict(components[struct.__name__]["properties"][name])


# --- the route ------------------------------------------------------------------------------


def _count(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_COUNT
    if not (len(raw) <= 3 and raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_COUNT:
        raise InvalidInput("count", f"must be an integer between 1 and {MAX_COUNT}")
    return int(raw)


def query_time(raw: str | None, zone: ZoneInfo, name: str = "from") -> datetime:
    """Query parameter `name`: an RFC 3339 time; without an offset, a wall time in `zone`."""
    if raw is None:
        return utc_now()
    try:
        if len(raw) > 40:
            raise ValueError(raw)
        # RFC 3339 allows a lower-case t and z, and a leap second (read as the next second).
        text, leap = _LEAP.subn(r"\g<1>59", raw.upper())
        value = datetime.fromisoformat(text) + leap * _SECOND
    except ValueError:
        raise InvalidInput(name, "must be an ISO 8601 / RFC 3339 time, e.g. 2026-03-29T00:00:00Z") from None
    return value.replace(tzinfo=zone) if value.tzinfo is None else value


async def schedule_preview(request: web.Request) -> web.Response:
    fields = {k: request.query[k] for k in ("cron_expression", "timezone") if k in request.query}
    try:
        query = convert(fields, PreviewQuery)
    except msgspec.ValidationError as exc:
        raise invalid_input(exc) from exc
    count = _count(request.query.get("count"))
    schedule = check_schedule(query.cron_expression, query.timezone)
    after = query_time(request.query.get("from"), ZoneInfo(schedule.timezone))
    rules = await _rules(request)
    return respond(await off_loop(preview, schedule, after, count, rules))


def calendar_refs(raw: str) -> list[CalendarRef]:
    """`holidays,weekdays:allow`: calendars as a job names them (mode `exclude` unless given)."""
    refs = []
    for part in filter(None, (p.strip() for p in raw.split(","))):
        name, _, mode = part.partition(":")
        if not re.fullmatch(NAME_PATTERN, name) or mode not in ("", "exclude", "allow"):
            raise InvalidInput("calendars", f"{part[:80]!r}: NAME or NAME:exclude or NAME:allow, comma-separated")
        refs.append(CalendarRef(name=name, mode="allow" if mode == "allow" else "exclude"))
    return refs


async def _rules(request: web.Request) -> Rules:
    """The calendars and blackouts a job with these `calendars`, `job` name and `queue` would be under
    (none unless one of them is given: a bare preview reads no database)."""
    query = request.query
    if not any(name in query for name in ("calendars", "job", "queue")):
        return NO_RULES
    refs = calendar_refs(query.get("calendars", ""))
    book = RuleBook.of(*await RuleStore(await request.app[BACKENDS].pool()).load())
    for index, ref in enumerate(refs):
        if ref.name not in book.calendars:
            raise InvalidInput("calendars", f"no calendar named {ref.name!r} (item {index})")
    return book.rules(query.get("job", ""), query.get("queue", DEFAULT_QUEUE), refs)


ROUTES = (
    Route("GET", "/api/schedule/preview", schedule_preview,
          "The next fire times of a cron expression (UTC and local, DST notes) within a century, and its "
          "description in words; a bad expression or zone is the same 422 as job creation's",
          response=Preview, errors=(InvalidInput, *DB_ERRORS),
          query=(
              Query("cron_expression", "the expression, as a job's `cron_expression`", required=True,
                    schema=_schema(PreviewQuery, "cron_expression")),
              Query("timezone", "IANA time zone (default UTC)", schema=_schema(PreviewQuery, "timezone")),
              Query("count", f"how many fire times, 1..{MAX_COUNT} (default {DEFAULT_COUNT})", maximum=MAX_COUNT),
              Query("from", "fire times strictly after this RFC 3339 time (default now); an ISO 8601 time "
                    "without an offset is a wall time in `timezone`", schema={"type": "string", "format": "date-time"}),
              Query("calendars", "calendars as a job names them: `NAME` (exclude) or `NAME:allow`, comma-separated; "
                    "each fire time then says which calendar or blackout excludes or defers it"),
              Query("job", "a job name, for the blackouts that select it (with `queue`)"),
              Query("queue", "a queue, for the blackouts that select it (default: default)"),
          )),
)  # fmt: skip
