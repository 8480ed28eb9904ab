"""GET /api/jobs/{id}/ticks: every tick the job's schedule had in a window, and what became of it.

The ticks come from the job's revisions (each with the expression, time zone and status it left),
their outcomes from the ledger (cronos.ticks, pure); each is annotated with the schedule
preview's DST note (`dst_note`), so a tick moved by a spring-forward gap or on a repeated wall
time says so. The window is bounded (MAX_WINDOW, MAX_TICKS, MAX_REVISIONS) and paged by the last
tick shown; only the revisions that touch it are read, without payloads, and the ticks are computed
on the API's compute thread (`off_loop`), not on the event loop.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo

import msgspec
from aiohttp import web

from api.backends import Backends
from api.bodies import check_instant, decode_cursor, encode_cursor, path_id, query_limit, respond, utc_now
from api.compute import hand_back, off_loop
from api.routes_schedule import dst_note, query_time
from api.routing import DB_ERRORS, ID, PAGE, Query, Route
from api.schemas_schedule import DstNote
from api.state import BACKENDS
from cronos.errors import InvalidInput, InvalidSchedule, NotFound
from cronos.hashed import hashed
from cronos.rules import NO_RULES, RuleBook, Rules
from cronos.schedule import Schedule
from cronos.schedule_legacy import stored_schedule
from cronos.store.revisions import Revision
from cronos.store.rules import RuleStore
from cronos.store.ticks import TickStore
from cronos.ticks import NOT_WRITTEN, LedgerRow, Segment, Tick, account, plan, segments

DEFAULT_WINDOW = timedelta(hours=1)
MAX_WINDOW = timedelta(days=7)
MAX_TICKS = 10_000
MAX_REVISIONS = 5_000  # changes of the job within one window
_US = timedelta(microseconds=1)
_EPOCH = datetime(1, 1, 1, tzinfo=UTC)  # cursors count microseconds from here: never negative
_UTC_ZONE = ZoneInfo("UTC")


_RULE = msgspec.Meta(
    description="`calendar:<name>` or `blackout:<name>`: what skips or defers this tick under the job's calendars "
    "and the blackouts as they are now (a skipped run's `reason` names the one that skipped it then)"
)


class TickOut(Tick, kw_only=True):
    dst: DstNote | None = None  # a tick moved by a DST gap, or on a wall time that happens twice
    rule: Annotated[str | None, _RULE] = None
    deferred_until: Annotated[datetime | None, msgspec.Meta(description="a deferred tick's release")] = None


class TickList(msgspec.Struct, kw_only=True):
    """A job's ticks in the window, oldest first: each with its run(s), or why it has none."""

    items: list[TickOut]
    next_cursor: str | None


def annotate(tick: Tick, rules: Rules = NO_RULES, name: str = "") -> TickOut:
    """The tick with the DST note the schedule preview gives its instant (none for a legacy row),
    and the calendar or blackout that skips or defers it. A deferred tick the leader holds until
    its release (not written yet) gives the blackout as its reason."""
    note = None
    try:
        schedule, _notice = stored_schedule(hashed(tick.cron_expression, name), tick.timezone)
        at = tick.scheduled_for
        if isinstance(schedule, Schedule) and schedule.next_after(at - _US) == at:  # not a further schedule's tick
            note = dst_note(schedule, ZoneInfo(schedule.timezone), at)
    except (InvalidSchedule, OverflowError):
        pass
    out = TickOut(**msgspec.structs.asdict(tick), dst=note)
    if rules and (verdict := rules.verdict(tick.scheduled_for)) is not None:
        out.rule, out.deferred_until = verdict.reason, verdict.release_at
        if tick.reason == NOT_WRITTEN and verdict.release_at is not None:
            out.reason = verdict.reason
    return out


def window(raw_from: str | None, raw_to: str | None, now: datetime) -> tuple[datetime, datetime]:
    """(after, until]: [from, to] from the query, default the last hour, at most MAX_WINDOW long."""
    until = check_instant(query_time(raw_to, _UTC_ZONE, "to"), "to") if raw_to is not None else now
    start = check_instant(query_time(raw_from, _UTC_ZONE, "from"), "from") if raw_from is not None else None
    try:
        after = (until - DEFAULT_WINDOW if start is None else start) - _US
    except OverflowError:
        raise InvalidInput("from" if start is not None else "to", "too far in the past") from None
    if start is not None and start > until:
        raise InvalidInput("from", "must not be after `to`")
    if until - after > MAX_WINDOW + _US:
        raise InvalidInput("to", f"the window is at most {MAX_WINDOW.days} days long (from `from`)")
    return after, until


def cursor_of(tick: datetime) -> str:
    """The cursor of a page that ends with `tick`: the next page starts after it."""
    return encode_cursor((tick - _EPOCH) // _US)


def cursor_after(raw: str | None) -> datetime | None:
    """The instant a `cursor_of` cursor names; None without a cursor."""
    micros = decode_cursor(raw)
    if micros is None:
        return None
    try:
        return _EPOCH + timedelta(microseconds=micros)
    except OverflowError:  # past the calendar: after every tick (an empty page)
        return datetime.max.replace(tzinfo=UTC)


Planned = list[tuple[datetime, Segment]]


def plan_page(
    history: list[Revision], after: datetime, until: datetime, seen: datetime | None, limit: int
) -> tuple[list[Segment], Planned]:
    """The segments of the history and the page's planned ticks (after the cursor's `seen`)."""
    segs = segments(history)
    hand_back()
    if len(plan(segs, after, until, MAX_TICKS + 1)) > MAX_TICKS:
        raise InvalidInput("to", f"the window holds more than {MAX_TICKS} ticks of this job: narrow it")
    hand_back()
    return segs, plan(segs, after if seen is None else max(after, seen), until, limit)


def tick_page(
    planned: Planned,
    rows: list[LedgerRow],
    segs: list[Segment],
    limit: int,
    horizon: tuple[datetime, datetime | None, datetime | None],
    rules: Rules = NO_RULES,
) -> TickList:
    """The page: the planned ticks with their ledger rows; `horizon` is (now, the job's cursor, kept since)."""
    now, cursor, kept_since = horizon
    ticks = account(planned, rows, segs, now=now, written_until=cursor, kept_since=kept_since)
    page = ticks[:limit]
    more = len(ticks) > limit or len(planned) == limit
    next_cursor = cursor_of(page[-1].scheduled_for) if more and page else None
    items = []
    names = {seg.revision: seg.name for seg in segs}  # the job's name in each revision picks its `H`
    for index, tick in enumerate(page, 1):
        items.append(annotate(tick, rules, names.get(tick.revision, "")))
        if index % 20 == 0:  # ~10 us each
            hand_back()
    return TickList(items=items, next_cursor=next_cursor)


async def job_ticks(request: web.Request) -> web.Response:
    job_id = path_id(request)
    limit = query_limit(request)
    now = utc_now()
    after, until = window(request.query.get("from"), request.query.get("to"), now)
    seen = cursor_after(request.query.get("cursor"))
    backends = request.app[BACKENDS]
    store = TickStore(await backends.pool())
    history, cursor = await store.history(job_id, after, until, MAX_REVISIONS + 1)
    if sum(revision.at > after for revision in history) > MAX_REVISIONS:
        raise InvalidInput("to", f"the window holds more than {MAX_REVISIONS} changes of this job: narrow it")
    segs, planned = await off_loop(plan_page, history, after, until, seen, limit)
    upto = planned[-1][0] if len(planned) == limit else until
    rows = await store.ledger(job_id, after if seen is None else max(after, seen), upto)
    retention = backends.settings.runs_retention_s
    kept_since = now - timedelta(seconds=retention) if retention else None
    rules = await _rules(backends, job_id) if cursor is not None else NO_RULES
    page = await off_loop(tick_page, planned, rows, segs, limit, (now, cursor, kept_since), rules)
    return respond(page)


async def _rules(backends: Backends, job_id: int) -> Rules:
    """The job's calendars and blackouts as they are now (cronos.rules); none once it is deleted."""
    try:
        job = await (await backends.jobs()).get(job_id)
    except NotFound:
        return NO_RULES
    return RuleBook.of(*await RuleStore(await backends.pool()).load()).rules(job.name, job.queue, job.calendars)


ROUTES = (
    Route("GET", f"/api/jobs/{ID}/ticks", job_ticks,
          "Every tick the job's schedule had in a window (oldest first), computed from its revisions: each "
          "with its run(s) (state, attempt, start delay) or why there is none (paused, before the job existed, "
          "deleted, the ledger's skip reason, not yet due, unaccounted), and DST notes",
          response=TickList, errors=(NotFound, InvalidInput, *DB_ERRORS),
          query=(
              Query("from", "ticks at or after this RFC 3339 time (default: an hour before `to`); without an "
                    "offset, UTC", schema={"type": "string", "format": "date-time"}),
              Query("to", f"ticks at or before this time (default now); at most {MAX_WINDOW.days} days after "
                    f"`from`, {MAX_TICKS} ticks and {MAX_REVISIONS} changes of the job",
                    schema={"type": "string", "format": "date-time"}),
              *PAGE,
          )),
)  # fmt: skip
