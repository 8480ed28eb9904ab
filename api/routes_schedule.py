"""GET /api/schedule/preview: the next fire times of an expression, with DST notes and plain words.

With `every` (and an optional `anchor`) instead of `cron_expression`, the same for an interval
(cronos.interval): its fire times are anchor + k·every in elapsed time, shown in `timezone`; no DST
note, since a DST change moves no tick, and the description says so.

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

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import msgspec
from aiohttp import web

from api import lint
from api.bodies import check_instant, check_schedule, convert, respond, utc_now
from api.compute import hand_back, off_loop
from api.describe import describe
from api.errors import invalid_input
from api.routing import DB_ERRORS, Query, Route
from api.schemas import Every, Expression, Schedules, Timezone
from api.schemas_schedule import DstNote, EditDiff, FireTime, Warnings
from api.state import BACKENDS
from cronos import spread
from cronos.errors import InvalidInput, InvalidSchedule
from cronos.hashed import hashed
from cronos.interval import EPOCH, Interval, every_seconds, interval_of, spell
from cronos.models import DEFAULT_QUEUE
from cronos.rules import NAME_PATTERN, NO_RULES, CalendarRef, RuleBook, Rules
from cronos.schedule import NEVER_AT, Schedule, parse_schedule
from cronos.schedule_legacy import StoredSchedule, stored_schedule
from cronos.schedule_lint import edit_diff
from cronos.schedule_union import NextAfter, ScheduleEntry, Union, check_entries, union_of
from cronos.store.rules import RuleStore

DEFAULT_COUNT = 10
MAX_COUNT = 100
DIFF_DAYS = 7  # an edit's diff looks this many days ahead by default
MAX_DIFF_DAYS = 31
DIFF_CAP = 200  # ticks listed per side of a diff
_US = timedelta(microseconds=1)
_SECOND = timedelta(seconds=1)
_LEAP = re.compile(r"(T\d\d:\d\d:)60")
HORIZON = timedelta(days=36_525)  # a century past `from`: how far a preview looks at most
_UTC = ZoneInfo("UTC")
_SCHEDULES_QUERY = {"type": "string", "format": "cronos-schedules"}  # a job's `schedules`, as JSON


class PreviewQuery(msgspec.Struct, kw_only=True):
    cron_expression: Expression | None = None
    timezone: Timezone = "UTC"
    every: Every | None = None  # `anchor` is read as `from` is (an RFC 3339 time)


class Preview(msgspec.Struct, kw_only=True):
    cron_expression: str | None  # null for an interval
    timezone: str
    description: str
    fire_times: list[FireTime]  # `count` of them, fewer where the horizon or the calendar (year 9999) ends first
    horizon: Annotated[
        datetime,
        msgspec.Meta(description="fire times are looked for up to this instant (`from` plus a century) and no further"),
    ]
    warnings: Warnings = []  # api.lint
    diff: Annotated[
        EditDiff | None,
        msgspec.Meta(description="with `previous_cron_expression`: the ticks this schedule adds and removes"),
    ] = None
    every: str | None = None  # an interval's canonical spelling; null for cron
    anchor: datetime | None = None
    schedules: Annotated[
        list[ScheduleEntry], msgspec.Meta(description="with `schedules`: the further schedules previewed as one")
    ] = []
    spread: Annotated[
        str | None, msgspec.Meta(description="with `spread` (and `job`): the spread, spelled as a job stores it")
    ] = None
    spread_offset_s: Annotated[
        int | None,
        msgspec.Meta(description="with `spread`: the offset (s) the `job` name picks; each fire time moves by it"),
    ] = None


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


def _note(schedule: NextAfter, at: datetime) -> DstNote | None:
    """The DST note of a fire time: that of the cron schedule among a union's parts that fires then."""
    parts = schedule.parts if isinstance(schedule, Union) else (schedule,)
    for part in parts:
        if isinstance(part, Schedule) and (part is schedule or _fires_at(part, at)):
            return dst_note(part, ZoneInfo(part.timezone), at)
    return None


def _fire(schedule: NextAfter, zone: ZoneInfo, at: datetime) -> FireTime:
    return FireTime(at=at, local=at.astimezone(zone).isoformat(), dst=_note(schedule, at))


def diff(
    previous: StoredSchedule,
    new: StoredSchedule,
    after: datetime,
    days: int,
    unions: tuple[NextAfter, NextAfter] | None = None,
    previous_schedules: Sequence[ScheduleEntry] = (),
) -> EditDiff:
    """The ticks an edit from `previous` to `new` adds and removes over `days` after `after`, each with
    its DST note (a tick a clock change moves, or doubles). `unions`: the previous and the new
    schedule with their further schedules (cronos.schedule_union), compared instead."""
    until = after + timedelta(days=days)
    old, now = unions or (previous, new)
    found = edit_diff(old, now, after, until, DIFF_CAP)
    return EditDiff(
        previous_cron_expression=previous.expression,
        previous_timezone=previous.timezone,
        previous_schedules=list(previous_schedules),
        until=until,
        added=[_fire(now, ZoneInfo(new.timezone), t) for t in found.added],
        removed=[_fire(old, ZoneInfo(previous.timezone), t) for t in found.removed],
        kept=found.kept,
        partial=found.more,
    )


def horizon_of(after: datetime) -> datetime:
    try:
        return (after + HORIZON).astimezone(UTC)
    except OverflowError:  # the calendar ends first
        return NEVER_AT


def fire_list(schedule: NextAfter, zone: ZoneInfo, after: datetime, count: int, rules: Rules) -> list[FireTime]:
    """The next `count` fire times of any schedule (a union's too) within the horizon, with their notes."""
    times: list[FireTime] = []
    current, horizon = after, horizon_of(after)
    for index in range(1, count + 1):
        try:
            current = schedule.next_after(current)
            if current == NEVER_AT or current > horizon:  # @never, or past the horizon
                break
            verdict = rules.verdict(current) if rules else None
            fire = _fire(schedule, zone, current)
            if verdict is not None:
                fire.excluded, fire.deferred_until = verdict.reason, verdict.release_at
            times.append(fire)
            if index % 10 == 0:  # ~0.1 ms of work each, more for rare expressions
                hand_back()
        except OverflowError:  # the calendar ends (year 9999): the list is shorter
            break
    return times


def preview(schedule: Schedule, after: datetime, count: int, rules: Rules = NO_RULES) -> Preview:
    return Preview(
        cron_expression=schedule.expression,
        timezone=schedule.timezone,
        description=describe(schedule.expression),
        fire_times=fire_list(schedule, ZoneInfo(schedule.timezone), after, count, rules),
        horizon=horizon_of(after),
    )


def with_entries(
    found: Preview,
    base: NextAfter,
    entries: Sequence[ScheduleEntry],
    name: str,
    after: datetime,
    count: int,
    rules: Rules,
) -> Preview:
    """`found`, the preview of a job's own schedule `base`, as that of its union with `entries`."""
    if not entries:
        return found
    union = union_of(base, entries, found.timezone, name, _parse)
    found.fire_times = fire_list(union, ZoneInfo(found.timezone), after, count, rules)
    found.description = "; and ".join([found.description, *(entry_words(e, found.timezone) for e in entries)])
    found.schedules = list(entries)
    return found


def with_spread(
    found: Preview,
    base: NextAfter,
    entries: Sequence[ScheduleEntry],
    name: str,
    raw: str | None,
    after: datetime,
    count: int,
    rules: Rules,
) -> Preview:
    """`found` as the preview of the job named `name` with the spread `raw` (query `spread`): its fire
    times each moved by the offset the name picks, refused as job creation refuses the spread."""
    if raw is None:
        return found
    union = union_of(base, entries, found.timezone, name, _parse)
    found.spread = spread.check(raw, union, after)
    found.spread_offset_s = spread.offset_s(name, found.spread)
    moved = spread.shifted(union, name, found.spread)
    found.fire_times = fire_list(moved, ZoneInfo(found.timezone), after, count, rules)
    found.description += f", each tick {spell(found.spread_offset_s)} later (spread {found.spread})"
    return found


def entry_words(entry: ScheduleEntry, timezone: str) -> str:
    """An entry in words (its zone named when it is not the job's `timezone`)."""
    if entry.every is not None:
        return interval_of(entry.every, entry.anchor).describe()
    assert entry.cron is not None
    zone = entry.timezone or timezone
    return describe(entry.cron) + ("" if zone == timezone else f" ({zone})")


def _parse(expression: str, zone: str) -> tuple[Schedule, None]:
    return parse_schedule(expression, zone), None


def entries_query(request: web.Request, name: str, timezone: str, job: str) -> list[ScheduleEntry]:
    """Query parameter `name`: a job's `schedules` as JSON, checked as job creation checks them."""
    raw = request.query.get(name)
    if raw is None:
        return []
    try:
        entries = msgspec.json.decode(raw, type=Schedules)
    except msgspec.ValidationError as exc:
        raise invalid_input(exc, base=name) from exc
    except msgspec.DecodeError:
        raise InvalidInput(name, 'must be a JSON list, e.g. [{"cron": "0 10 * * 6"}]') from None
    return check_entries(entries, timezone, job, parse_schedule)


def preview_interval(
    interval: Interval, timezone: str, after: datetime, count: int, rules: Rules = NO_RULES
) -> Preview:
    """An interval's next fire times: elapsed time, so no DST notes (a DST change moves no tick)."""
    zone = ZoneInfo(timezone)
    times: list[FireTime] = []
    current, horizon = after, horizon_of(after)
    for _ in range(count):
        try:
            current = interval.next_after(current)
        except OverflowError:  # the calendar ends (year 9999)
            break
        if current > horizon:
            break
        verdict = rules.verdict(current) if rules else None
        times.append(
            FireTime(
                at=current, local=current.astimezone(zone).isoformat(),
                excluded=None if verdict is None else verdict.reason,
                deferred_until=None if verdict is None else verdict.release_at,
            )
        )  # fmt: skip
    return Preview(
        cron_expression=None, timezone=timezone, description=interval.describe(), fire_times=times,
        horizon=horizon, every=spell(interval.every_s), anchor=interval.anchor,
    )  # fmt: skip


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
    fields: dict[str, Any] = {
        k: request.query[k] for k in ("cron_expression", "timezone", "every") if k in request.query
    }
    try:
        query = convert(fields, PreviewQuery)
    except msgspec.ValidationError as exc:
        raise invalid_input(exc) from exc
    count = _count(request.query.get("count"))
    if query.every is not None or "anchor" in request.query:
        if query.cron_expression is not None:
            raise InvalidInput("$.every", "give exactly one of cron_expression and every")
        if query.every is None:
            raise InvalidInput("anchor", "only an interval (every) has an anchor")
        interval = Interval(every_seconds(query.every), EPOCH)
        if "anchor" in request.query:
            anchor = check_instant(query_time(request.query["anchor"], _UTC, "anchor"), "anchor")
            interval = Interval(interval.every_s, anchor.astimezone(UTC))
        check_schedule("* * * * *", query.timezone)  # the zone, checked as job creation checks it
        after = query_time(request.query.get("from"), ZoneInfo(query.timezone))
        entries = entries_query(request, "schedules", query.timezone, request.query.get("job", ""))
        rules = await _rules(request)
        found = preview_interval(interval, query.timezone, after, count, rules)
        name = request.query.get("job", "")
        found = with_entries(found, interval, entries, name, after, count, rules)
        raw = request.query.get("spread")
        return respond(with_spread(found, interval, entries, name, raw, after, count, rules))
    if query.cron_expression is None:
        raise InvalidInput("$.cron_expression", "give a cron_expression or an interval (every)")
    name = request.query.get("job", "")  # the job's name picks the values of an `H` (cronos.hashed)
    schedule = check_schedule(query.cron_expression, query.timezone, name)
    after = query_time(request.query.get("from"), ZoneInfo(schedule.timezone))
    previous, days = _previous(request, schedule.timezone, name)
    entries = entries_query(request, "schedules", schedule.timezone, name)
    rules = await _rules(request)
    backends = request.app[BACKENDS]
    starts = await lint.fleet_starts_or_none(backends)
    found = await off_loop(preview, schedule, after, count, rules)
    found = await off_loop(with_entries, found, schedule, entries, name, after, count, rules)
    raw = request.query.get("spread")
    found = await off_loop(with_spread, found, schedule, entries, name, raw, after, count, rules)
    found.warnings = await off_loop(
        lint.warnings, schedule, utc_now(), starts, backends.settings.herd_jobs, False, query.cron_expression, name
    )
    if previous is not None:
        old_name = request.query.get("previous_job", name)
        before = entries_query(request, "previous_schedules", previous.timezone, old_name)
        unions = None
        if entries or before:
            unions = (union_of(previous, before, previous.timezone, old_name, stored_schedule),
                      union_of(schedule, entries, schedule.timezone, name, _parse))  # fmt: skip
        found.diff = await off_loop(diff, previous, schedule, after, days, unions, before)
    return respond(found)


def _previous(request: web.Request, timezone: str, name: str) -> tuple[StoredSchedule | None, int]:
    """The schedule an edit replaces (`previous_cron_expression`, `previous_timezone`: a stored
    job's, so a legacy expression is read as the job runs it) and the diff's `days`."""
    raw_days = request.query.get("days")
    if raw_days is None:
        days = DIFF_DAYS
    elif raw_days.isascii() and raw_days.isdigit() and len(raw_days) <= 2 and 1 <= int(raw_days) <= MAX_DIFF_DAYS:
        days = int(raw_days)
    else:
        raise InvalidInput("days", f"must be an integer between 1 and {MAX_DIFF_DAYS}")
    expression = request.query.get("previous_cron_expression")
    if expression is None:
        return None, days
    zone = request.query.get("previous_timezone", timezone)
    try:
        return stored_schedule(hashed(expression, request.query.get("previous_job", name)), zone)[0], days
    except InvalidSchedule as exc:
        name = "previous_timezone" if exc.field == "$.timezone" else "previous_cron_expression"
        raise InvalidInput(name, exc.message) from None


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
          "description in words, its warnings (docs/schedule-lint.md) and, for an edit, the ticks it adds and "
          "removes; a bad expression or zone is the same 422 as job creation's",
          response=Preview, errors=(InvalidInput, *DB_ERRORS),
          query=(
              Query("cron_expression", "the expression, as a job's `cron_expression`; exactly one of it and `every`",
                    schema=msgspec.json.schema(Expression)),
              Query("every", "an interval instead, as a job's `every` (`90m`, `1h30m`, or seconds)",
                    schema={"type": "string", "minLength": 1, "maxLength": 40, "format": "cronos-duration"}),
              Query("anchor", "an interval's anchor, RFC 3339 (default 1970-01-01T00:00:00Z)",
                    schema={"type": "string", "format": "date-time"}),
              Query("timezone", "IANA time zone (default UTC)", schema=_schema(PreviewQuery, "timezone")),
              Query("count", f"how many fire times, 1..{MAX_COUNT} (default {DEFAULT_COUNT})", maximum=MAX_COUNT),
              Query("from", "fire times strictly after this RFC 3339 time (default now); an ISO 8601 time "
                    "without an offset is a wall time in `timezone`", schema={"type": "string", "format": "date-time"}),
              Query("calendars", "calendars as a job names them: `NAME` (exclude) or `NAME:allow`, comma-separated; "
                    "each fire time then says which calendar or blackout excludes or defers it"),
              Query("job", "a job name, for the blackouts that select it (with `queue`), and whose hash picks "
                    "the values of an `H` in the expression (docs/spread.md)"),
              Query("queue", "a queue, for the blackouts that select it (default: default)"),
              Query("previous_cron_expression", "an edit's previous expression: `diff` lists the ticks the edit "
                    "adds and removes", schema=_schema(PreviewQuery, "cron_expression")),
              Query("previous_timezone", "the previous zone (default `timezone`)",
                    schema=_schema(PreviewQuery, "timezone")),
              Query("schedules", "a job's further schedules as JSON (`[{\"cron\": \"0 10 * * 6\"}]`): the fire "
                    "times are the union of the expression (or interval) and these, each once (docs/schedules.md)",
                    schema=_SCHEDULES_QUERY),
              Query("spread", "a job's spread (`10m`, as a job's `spread`): each fire time moved by the offset the "
                    "`job` name picks in [0, spread) (docs/spread.md)",
                    schema={"type": "string", "minLength": 1, "maxLength": 40, "format": "cronos-duration"}),
              Query("previous_schedules", "an edit's previous further schedules, as JSON (with "
                    "`previous_cron_expression`)", schema=_SCHEDULES_QUERY),
              Query("previous_job", "the job's previous name, for a rename: it picked the previous `H` values "
                    "(default `job`)"),
              Query("days", f"how far the diff looks, 1..{MAX_DIFF_DAYS} days (default {DIFF_DAYS})",
                    maximum=MAX_DIFF_DAYS),
          )),
)  # fmt: skip
