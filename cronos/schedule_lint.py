"""Warnings for cron expressions that do something other than what they seem to say (pure).

Each warning is a fact about the expression read as cronos.schedule reads it (Vixie cron's
rules), with a code, a message and, where one exists, what to write instead. None refuses an
expression: they are shown beside the preview, in `cronos apply --dry-run` and in the answer to a
create or a change. `now` is a parameter (the DST warnings look one year past it); the herd
warning takes the fleet's planned starts per minute (cronos.fleet_starts) as a fact.

Also here: the diff of a schedule edit (`edit_diff`), the ticks one schedule has and the other
has not over a window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

import msgspec

from cronos.cron_fields import (
    DOM,
    DOW,
    HOUR,
    MINUTE,
    MONTH,
    SECOND,
    CronFields,
    Field,
    from_step,
    item_values,
    parse,
    split,
)
from cronos.dst import segment
from cronos.errors import InvalidSchedule
from cronos.hashed import described
from cronos.schedule import NEVER_AT, parse_schedule
from cronos.schedule_window import NextAfter

_US = timedelta(microseconds=1)
_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Etc/GMT", "GMT", "Etc/UCT", "UCT", "Zulu", "Etc/Zulu", "Universal"})
_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_LONGEST = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}  # other months: 31
_UNIT = {"second": "s", "minute": "m", "hour": "h"}
_DST_LOOKAHEAD = timedelta(days=366)
_FIELDS = (SECOND, MINUTE, HOUR, DOM, MONTH, DOW)


class Code(StrEnum):
    STEP_EXCEEDS_FIELD = "step_exceeds_field"  # */90 in minutes: minute 0 only
    STEP_UNEVEN = "step_uneven"  # */7 in minutes: restarts at each hour (56 -> 0 is 4 minutes)
    STEP_FROM = "step_from"  # 5/15: from 5 to the field's end (Quartz's reading), which Vixie cron refuses
    DAY_SKIPS_MONTHS = "day_skips_months"  # 31: no run in 30-day months nor February
    DAYS_ORED = "days_ored"  # both day fields restricted: either matches
    DAYS_ANDED = "days_anded"  # a restricted day field starting with *: both must match
    DST_HOURS_NOT_STAR = "dst_hours_not_star"  # 0-23 is an appointment, * follows real time
    DST_GAP = "dst_gap"  # a named wall time is skipped by spring-forward
    DST_FOLD = "dst_fold"  # a named wall time happens twice at fall-back
    HERD = "herd"  # many active jobs start in the same minute
    HASHED = "hashed"  # H: the values this job's name picks (cronos.hashed)


class LintWarning(msgspec.Struct, frozen=True, kw_only=True):
    """`code`: stable, for scripts; `message`: what the expression really does; `suggestion`: what
    to write instead (null when there is nothing better)."""

    code: str
    message: str
    suggestion: str | None = None


# --- steps ---------------------------------------------------------------------------------


def _span(span: str, field: Field) -> tuple[int, int] | None:
    """The numeric first and last value a stepped span runs through (`*`, `a-b`, `n`), else None."""
    if span == "*":
        return field.low, field.high
    if span.isdigit():  # n/step: n to the end of the field
        span = from_step(span, field)
    first_text, dash, last_text = span.partition("-")
    if dash and first_text.isdigit() and last_text.isdigit() and int(first_text) <= int(last_text):
        return int(first_text), int(last_text)
    return None


def _step_warnings(token: str, field: Field) -> list[LintWarning]:
    out: list[LintWarning] = []
    for part in token.split(","):
        span, slash, step_text = part.partition("/")
        if not slash or not step_text.isdigit() or (bounds := _span(span, field)) is None:
            continue
        step = int(step_text)
        first, last = bounds
        values = range(first, last + 1, step)
        unit = _UNIT.get(field.name)
        every = f"`every: {step}{unit}`" if unit else None
        if len(values) == 1 and step > 1:
            scope = {"second": "minute", "minute": "hour", "hour": "day", "day-of-month": "month"}[field.name]
            out.append(
                LintWarning(
                    code=Code.STEP_EXCEEDS_FIELD,
                    message=f"`{part}` in the {field.name} field matches {field.name} {first} only (a step larger "
                    f"than the field's {first}-{last} keeps only its start): it runs at {field.name} {first} of "
                    f"every {scope}, not every {step} {field.name}s",
                    suggestion=f"for every {step} {field.name}s, use an interval schedule: {every}" if every else None,
                )
            )
        elif unit and last == field.high and (wrap := values[0] + field.cycle - values[-1]) != step:
            out.append(
                LintWarning(
                    code=Code.STEP_UNEVEN,
                    message=f"`{part}` in the {field.name} field restarts at {values[0]} each "
                    f"{'minute' if unit == 's' else 'hour' if unit == 'm' else 'day'}: {field.name}s "
                    f"{', '.join(str(v) for v in values[:3])}, …, {values[-1]}, then {values[0]} again "
                    f"{wrap} {field.name}{'s' if wrap > 1 else ''} later, not every {step}",
                    suggestion=f"for an even {step}-{field.name} cadence, use an interval schedule: {every}",
                )
            )
    return out


def _from_step_warnings(token: str, field: Field) -> list[LintWarning]:
    """`n/step` said in the range cron spells: Vixie cron refuses it, Quartz and croniter read it so."""
    out: list[LintWarning] = []
    for part in token.split(","):
        span, slash, step_text = part.partition("/")
        if not slash or not span or span == "*" or "-" in span or not step_text.isdigit():
            continue
        spelled = f"{from_step(span, field)}/{step_text}"
        values = sorted(item_values(spelled, field))
        shown = ", ".join(str(v) for v in values[:4]) + (f", …, {values[-1]}" if len(values) > 4 else "")
        sunday = " (7 is Sunday again; croniter and robfig/cron stop at 6)" if field is DOW and 7 in values else ""
        out.append(
            LintWarning(
                code=Code.STEP_FROM,
                message=f"`{part}` in the {field.name} field means `{spelled}`: {field.name} {shown}{sunday}, "
                f"from {span} to the field's end by {step_text} (Quartz, croniter, cronsim and robfig/cron "
                "read it so; Vixie cron refuses it)",
                suggestion=f"to say the same in every cron, write `{spelled}`",
            )
        )
    return out


# --- the day fields ------------------------------------------------------------------------


def _names(months: Sequence[int]) -> str:
    words = [_MONTH_NAMES[m - 1] for m in months]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _month_warnings(parsed: CronFields, dom: str, dow: str) -> list[LintWarning]:
    days = parsed.days
    if days.last or days.last_weekday or not (dow in ("*", "?") or (days.both and dow.startswith("*"))):
        return []  # the last day exists in every month; an ORed day of week fires in every month
    plain = days.dom | days.nearest
    if not plain or min(plain) <= 28:
        return []  # day 28 or before exists in every month
    skipped = [m for m in sorted(parsed.months) if min(plain) > _LONGEST.get(m, 31)]
    leap_only = [m for m in sorted(parsed.months) if m == 2 and min(plain) == 29]
    if not skipped and not leap_only:
        return []
    pieces = []
    suggestion = "for the last day of every month, write `L` in the day-of-month field" if skipped else None
    if skipped:
        pieces.append(f"it does not run in {_names(skipped)} (cron skips a month without that day, it does not "
                      "move to the month's last day)")  # fmt: skip
    if leap_only:
        pieces.append("in February it runs only in leap years")
    return [
        LintWarning(
            code=Code.DAY_SKIPS_MONTHS, message=f"day-of-month `{dom}`: {'; '.join(pieces)}", suggestion=suggestion
        )
    ]


def _nth_suggestion(dom: str, dow: str, fields: list[str]) -> str | None:
    """`1-7` with one weekday is almost always "the first Monday": cron's `1#1`."""
    first, dash, last = dom.partition("-")
    if not (dash and first.isdigit() and last.isdigit() and dow.isdigit()):
        return None
    start, end = int(first), int(last)
    if end - start != 6 or (start - 1) % 7 or start > 22:
        return None
    nth = (start - 1) // 7 + 1
    spelled = " ".join([*fields[:-3], "*", fields[-2], f"{int(dow) % 7}#{nth}"])
    return (
        f"for the {('first', 'second', 'third', 'fourth')[nth - 1]} such weekday of the month only, write `{spelled}`"
    )


def _day_field_warnings(fields: list[str]) -> list[LintWarning]:
    dom, dow = fields[-3], fields[-1]
    dom_free, dow_free = dom in ("*", "?"), dow in ("*", "?")
    if dom_free or dow_free:
        return []
    if dom[0] in "*?" or dow[0] in "*?":
        starred = dom if dom[0] == "*" else dow
        return [
            LintWarning(
                code=Code.DAYS_ANDED,
                message=f"day-of-month `{dom}` and day-of-week `{dow}` are both restricted, but `{starred}` starts "
                "with `*`, so cron requires both to match (Vixie cron's rule), not either",
            )
        ]
    suggestion = _nth_suggestion(dom, dow, fields) or (
        "to run on those days of the month only, write `*` in the day-of-week field (or the other way round)"
    )
    return [
        LintWarning(
            code=Code.DAYS_ORED,
            message=f"day-of-month `{dom}` and day-of-week `{dow}` are both restricted, so cron runs on either: "
            f"every day-of-month {dom} and every day-of-week {dow}, not only when both match",
            suggestion=suggestion,
        )
    ]


# --- daylight saving time --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    at: datetime  # the instant the offset changes (UTC)
    old: timedelta
    new: timedelta

    @property
    def walls(self) -> tuple[datetime, datetime]:
        """The wall times [start, end) skipped (spring forward) or repeated (fall back), naive."""
        low, high = sorted((self.at + self.old, self.at + self.new))
        return low.replace(tzinfo=None), high.replace(tzinfo=None)


def changes(zone: ZoneInfo, after: datetime, until: datetime) -> list[Change]:
    """The zone's offset changes in (after, until]."""
    out: list[Change] = []
    at = after
    while at < until:
        seg = segment(zone, at)
        if seg.end >= until or seg.end <= at:
            break
        before = seg.offset
        after_offset = segment(zone, seg.end).offset
        if after_offset != before:
            out.append(Change(seg.end, before, after_offset))
        at = seg.end
    return out


def _names_wall(expression: str, start: datetime, end: datetime) -> datetime | None:
    """The first wall time in [start, end) the expression names (read on a UTC clock), if any."""
    found = parse_schedule(expression, "UTC").next_after(start.replace(tzinfo=UTC) - _US)
    return found.replace(tzinfo=None) if found < end.replace(tzinfo=UTC) else None


def _clock(wall: datetime) -> str:
    return wall.strftime("%H:%M:%S") if wall.second else wall.strftime("%H:%M")


def _dst_warnings(
    expression: str, parsed: CronFields, fields: list[str], timezone: str, now: datetime
) -> list[LintWarning]:
    if timezone in _UTC_NAMES:
        return []
    zone = ZoneInfo(timezone)
    found = changes(zone, now, now + _DST_LOOKAHEAD)
    if not found:
        return []
    minute, hour = fields[-5], fields[-4]
    out: list[LintWarning] = []
    if hour.startswith("*"):
        return out  # follows real time hour by hour: its cadence is the same across a change
    if not parsed.wildcard and parsed.hours == frozenset(range(24)):
        real = " ".join([*fields[:-4], "*", *fields[-3:]])
        out.append(
            LintWarning(
                code=Code.DST_HOURS_NOT_STAR,
                message=f"hour `{hour}` names every hour but is not `*`, so cron keeps this job as a wall-clock "
                f"appointment in {timezone}: when clocks spring forward the missing hour's times run once, at the "
                "end of the gap, and when they fall back the repeated hour runs once; with `*` it would follow "
                "real time (the missing hour is skipped, the repeated one runs twice)",
                suggestion=f"to follow real time, write `*` in the hour field: `{real}`",
            )
        )
        return out
    gap = fold = False
    for change in found:
        start, end = change.walls
        named = _names_wall(expression, start, end)
        if named is None:
            continue
        day = named.date().isoformat()
        if change.new > change.old and not gap:
            gap = True
            then = (change.at + change.new).replace(tzinfo=None)
            what = (
                f"runs once at {_clock(then)} instead (the wall times it names there collapse into one run)"
                if not parsed.wildcard
                else "does not run then (that hour does not happen; it follows real time)"
            )
            out.append(
                LintWarning(
                    code=Code.DST_GAP,
                    message=f"on {day} in {timezone} clocks jump from {_clock(start)} to {_clock(end)}: "
                    f"{_clock(named)}, which this schedule names, does not exist, and the job {what}",
                    suggestion="to avoid the change, pick a time outside "
                    f"{_clock(start)}-{_clock(end)} or use timezone UTC",
                )
            )
        elif change.new < change.old and not fold:
            fold = True
            what = (
                "runs once, on the first pass (a wall-clock appointment)"
                if not parsed.wildcard
                else f"runs on both passes (`{minute} {hour}` follows real time)"
            )
            out.append(
                LintWarning(
                    code=Code.DST_FOLD,
                    message=f"on {day} in {timezone} clocks fall back from {_clock(end)} to {_clock(start)}: "
                    f"{_clock(named)} happens twice and the job {what}",
                    suggestion="to avoid the change, pick a time outside "
                    f"{_clock(start)}-{_clock(end)} or use timezone UTC",
                )
            )
    return out


# --- the herd ------------------------------------------------------------------------------


def herd_warning(
    fires: Sequence[datetime], starts: Mapping[datetime, int], threshold: int, *, counted: bool = False
) -> LintWarning | None:
    """A warning when one of `fires` (the job's ticks over the fleet's window, UTC) falls in a minute
    where `threshold` or more active jobs start (`starts`: per minute, the fleet's planned starts).
    `counted`: the job itself is among `starts` (a stored active job), so do not add it again."""
    busiest, at = 0, None
    for fire in fires:
        minute = fire.replace(second=0, microsecond=0)
        n = starts.get(minute, 0) + (0 if counted else 1)
        if n > busiest:
            busiest, at = n, minute
    if at is None or busiest < threshold:
        return None
    return LintWarning(
        code=Code.HERD,
        message=f"{busiest} active jobs (this one included) start in the minute of {at.strftime('%Y-%m-%d %H:%M')} "
        "UTC: they all hit the executors and their targets at once",
        suggestion="spread them: give the job a `jitter_s` (e.g. 30) or another minute (e.g. `7` instead of `0`); "
        "the console's Fleet page shows the busy minutes",
    )


# --- H -----------------------------------------------------------------------------------


def hash_note(written: str, name: str) -> LintWarning | None:
    """What each `H` of the expression as `written` is for the job `name` (None without one)."""
    said = described(written, name) if written else None
    if said is None:
        return None
    return LintWarning(
        code=Code.HASHED,
        message=said,
        suggestion="to spread jobs that share this expression, let each keep its own `H`; renaming the job moves it",
    )


# --- everything ----------------------------------------------------------------------------


def lint(expression: str, timezone: str, now: datetime) -> list[LintWarning]:
    """The warnings of a valid expression in a zone (the herd aside: `herd_warning`). An expression
    the parser refuses (a stored legacy one) gets none: its notice says enough."""
    try:
        parsed = parse(expression)
        fields = split(expression)
    except InvalidSchedule:
        return []
    if expression.strip().lower() == "@never":
        return []
    out: list[LintWarning] = []
    named = (SECOND, MINUTE, HOUR) if len(fields) == 6 else (MINUTE, HOUR)
    for token, field in zip(fields, named, strict=False):
        out += _step_warnings(token, field)
    out += _step_warnings(fields[-3], DOM)
    for token, field in zip(fields, _FIELDS[-len(fields) :], strict=True):
        out += _from_step_warnings(token, field)
    out += _month_warnings(parsed, fields[-3], fields[-1])
    out += _day_field_warnings(fields)
    out += _dst_warnings(expression, parsed, fields, timezone, now)
    return out


# --- the diff of an edit -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Diff:
    added: list[datetime]  # ticks the new schedule has and the old one not, ascending, at most `cap`
    removed: list[datetime]  # the other way round
    kept: int  # ticks both have
    more: bool  # a list was cut at `cap`


def _ticks(schedule: NextAfter, after: datetime, until: datetime, budget: int) -> list[datetime]:
    out: list[datetime] = []
    current = after
    while len(out) < budget:
        try:
            current = schedule.next_after(current)
        except OverflowError:
            break
        if current > until or current >= NEVER_AT:
            break
        out.append(current)
    return out


def edit_diff(old: NextAfter, new: NextAfter, after: datetime, until: datetime, cap: int) -> Diff:
    """The ticks in (after, until] an edit from `old` to `new` adds and removes. Bounded: each side
    is walked for at most 10 * cap ticks (`more` then says the lists are partial)."""
    budget = cap * 10
    before, now = _ticks(old, after, until, budget), _ticks(new, after, until, budget)
    old_set, new_set = set(before), set(now)
    added = [t for t in now if t not in old_set]
    removed = [t for t in before if t not in new_set]
    more = len(added) > cap or len(removed) > cap or len(before) == budget or len(now) == budget
    return Diff(added[:cap], removed[:cap], len(old_set & new_set), more)
