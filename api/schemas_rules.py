"""Bodies of /api/calendars and /api/blackouts (issue 25; the rules themselves: cronos.rules)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

import msgspec
from msgspec import Meta

from api.schemas import Expression, Timezone
from cronos.rules import Action, Blackout, Calendar, DateRange, RuleName, Selector, Weekday

MAX_DATES = 5000
Description = Annotated[str, Meta(max_length=500, pattern="^[^\\x00]*$")]
DurationS = Annotated[int, Meta(ge=1, le=31 * 86_400, description="how long each window lasts, seconds")]


class CalendarIn(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A calendar's days in its time zone: any of dates, date ranges (inclusive) and weekdays."""

    timezone: Timezone = "UTC"
    dates: Annotated[list[date], Meta(max_length=MAX_DATES)] = []
    ranges: Annotated[list[DateRange], Meta(max_length=MAX_DATES)] = []
    weekdays: list[Weekday] = []
    description: Description = ""


class CalendarCreate(CalendarIn, kw_only=True, forbid_unknown_fields=True):
    name: RuleName


class CalendarList(msgspec.Struct, kw_only=True):
    items: list[Calendar]


class BlackoutCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One-off (`starts_at`, `ends_at`) or recurring (`cron_expression` + `duration_s` in `timezone`);
    `skip` writes the ticks inside as skipped runs, `defer` holds them until the window ends and
    releases them under each job's misfire policy. `selector` empty: every job."""

    name: RuleName
    action: Action = "skip"
    starts_at: Annotated[datetime, Meta(tz=True)] | None = None
    ends_at: Annotated[datetime, Meta(tz=True)] | None = None
    cron_expression: Expression | None = None
    duration_s: DurationS | None = None
    timezone: Timezone = "UTC"
    selector: Selector = Selector()
    note: Description = ""


class BlackoutList(msgspec.Struct, kw_only=True):
    items: list[Blackout]


class PauseBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A timed pause: the leader resumes the job at `until` (null: paused until resumed by hand)."""

    until: Annotated[datetime, Meta(tz=True, description="resume the job at this instant")] | None = None
    note: Description | None = None
