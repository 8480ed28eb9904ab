"""Business calendars and blackout windows: which ticks of a job are excluded, and why (issue 25).

Pure: no clock, no I/O. A job's `Rules` (the calendars it names, the blackouts whose selector
matches it) give each tick a `Verdict`: none (it runs as its schedule says), skip (written as a
skipped run whose reason names the calendar or blackout) or defer (held until its window ends,
then released under the job's misfire policy). The leader (dispatcher.planner), the preview
(api.routes_schedule) and the ticks API (api.routes_ticks) all ask the same `Rules`.

Reasons are stable strings: `calendar:<name>` and `blackout:<name>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Annotated, Literal

import msgspec

from cronos.schedule import Schedule, load_zone, parse_schedule

Mode = Literal["exclude", "allow"]
Action = Literal["skip", "defer"]
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
WEEKDAYS: tuple[Weekday, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
NAME_PATTERN = "^[A-Za-z0-9_.-]{1,64}$"
RuleName = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN, description="letters, digits, '.', '-', '_'; 64 at most")]
# A deferred tick is released at the end of its window; windows that touch chain, this many at most.
_CHAIN = 100
_US = timedelta(microseconds=1)


def calendar_reason(name: str) -> str:
    return f"calendar:{name}"


def blackout_reason(name: str) -> str:
    return f"blackout:{name}"


class DateRange(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename={"start": "from", "end": "to"}
):
    """Days `from` to `to`, both included."""

    start: date
    end: date


class CalendarRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A calendar a job names: `exclude` skips its ticks on the calendar's days, `allow` on every other day."""

    name: RuleName
    mode: Mode = "exclude"


class Calendar(msgspec.Struct, frozen=True, kw_only=True):
    """Named days in a time zone: dates, date ranges and weekdays (any of them)."""

    name: str
    timezone: str = "UTC"
    dates: list[date] = []
    ranges: list[DateRange] = []
    weekdays: list[Weekday] = []
    description: str = ""
    namespace: str = "default"  # where it lives: only that namespace's jobs may name it (issue 41)

    def contains(self, instant: datetime) -> bool:
        day = instant.astimezone(load_zone(self.timezone)).date()
        if WEEKDAYS[day.weekday()] in self.weekdays or day in self.dates:
            return True
        return any(r.start <= day <= r.end for r in self.ranges)


class Selector(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which jobs a blackout covers: every list given must name the job (empty: every job)."""

    jobs: list[str] = []
    queues: list[str] = []

    def matches(self, name: str, queue: str) -> bool:
        return (not self.jobs or name in self.jobs) and (not self.queues or queue in self.queues)


class Blackout(msgspec.Struct, frozen=True, kw_only=True):
    """A window in which ticks are skipped or deferred: one-off [starts_at, ends_at), or recurring
    (each fire time of cron_expression in timezone opens a window of duration_s)."""

    id: int
    name: str
    action: Action
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    cron_expression: str | None = None
    duration_s: int | None = None
    timezone: str = "UTC"
    selector: Selector = Selector()
    note: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    reason: str  # calendar:<name> or blackout:<name>
    release_at: datetime | None = None  # set: deferred until then; None: skipped


@dataclass(frozen=True, slots=True)
class Window:
    """A blackout ready to answer: its recurring schedule parsed once."""

    blackout: Blackout
    schedule: Schedule | None

    @classmethod
    def of(cls, blackout: Blackout) -> Window:
        cron = blackout.cron_expression
        return cls(blackout, None if cron is None else parse_schedule(cron, blackout.timezone))

    def end_at(self, instant: datetime) -> datetime | None:
        """The end of this blackout's window holding `instant` (start included, end excluded), or None."""
        b = self.blackout
        if self.schedule is None:
            assert b.starts_at is not None and b.ends_at is not None
            return b.ends_at if b.starts_at <= instant < b.ends_at else None
        assert b.duration_s is not None
        width = timedelta(seconds=b.duration_s)
        opened = self.schedule.next_after(
            instant - width
        )  # a window [s, s + width) holds instant iff s > instant - width
        if opened > instant:
            return None
        # Overlapping windows: the end is the latest opened's. A bisection over next_after (monotone)
        # finds the newest fire time <= instant in ~40 steps, however many windows overlap (an
        # every-second cron with a day's duration would be 86,400 of them).
        low, high = instant - width, instant  # next_after(low) <= instant < next_after(high)
        while high - low > _US:
            middle = low + (high - low) / 2
            if self.schedule.next_after(middle) <= instant:
                low = middle
            else:
                high = middle
        return self.schedule.next_after(low) + width


@dataclass(frozen=True, slots=True)
class Rules:
    """What excludes or defers a job's ticks. Calendars first (a day off is not deferred), then
    blackouts in id order: a skip before a defer when both hold."""

    calendars: tuple[tuple[Calendar, Mode], ...] = ()
    windows: tuple[Window, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.calendars or self.windows)

    @property
    def key(self) -> tuple[object, ...]:
        """Jobs with equal keys have equal rules (the leader groups them)."""
        return (
            tuple((c.name, mode) for c, mode in self.calendars),
            tuple(w.blackout.id for w in self.windows),
        )

    def verdict(self, tick: datetime) -> Verdict | None:
        for calendar, mode in self.calendars:
            if calendar.contains(tick) == (mode == "exclude"):
                return Verdict(calendar_reason(calendar.name))
        deferred: Verdict | None = None
        for window in self.windows:
            end = window.end_at(tick)
            if end is None:
                continue
            if window.blackout.action == "skip":
                return Verdict(blackout_reason(window.blackout.name))
            if deferred is None:
                deferred = Verdict(blackout_reason(window.blackout.name), self._release(end))
        return deferred

    def _release(self, end: datetime) -> datetime:
        """The first instant at or after `end` in no defer window (windows that touch chain)."""
        for _ in range(_CHAIN):
            later = [e for w in self.windows if w.blackout.action == "defer" and (e := w.end_at(end)) is not None]
            if not later:
                break
            end = max(later)
        return end


NO_RULES = Rules()


@dataclass(frozen=True, slots=True)
class RuleBook:
    """Every calendar and blackout, as the leader holds them; `rules` picks a job's."""

    calendars: Mapping[str, Calendar]
    windows: tuple[Window, ...]

    @classmethod
    def of(cls, calendars: Iterable[Calendar], blackouts: Iterable[Blackout]) -> RuleBook:
        ordered = sorted(blackouts, key=lambda b: b.id)
        return cls({c.name: c for c in calendars}, tuple(Window.of(b) for b in ordered))

    def rules(self, name: str, queue: str, refs: Sequence[CalendarRef]) -> Rules:
        """A job's rules. A calendar it names that no longer exists is ignored (the API refuses
        deleting a calendar a job names, so only a race leaves one behind)."""
        if not refs and not self.windows:
            return NO_RULES
        cals = tuple((self.calendars[r.name], r.mode) for r in refs if r.name in self.calendars)
        wins = tuple(w for w in self.windows if w.blackout.selector.matches(name, queue))
        return Rules(cals, wins) if cals or wins else NO_RULES


EMPTY_BOOK = RuleBook({}, ())
