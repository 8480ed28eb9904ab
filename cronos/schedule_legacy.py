"""The schedule meaning Cronos had before issue 12, kept for stored jobs the new parser refuses.

A job stored with an expression `cronos.schedule` now refuses keeps running on this meaning
until it is edited (`stored_schedule`), and the API shows why in `schedule_notice`. Do not
extend it: new behaviour belongs in `cronos.schedule`. What follows is the old module text.

Pure: never reads the clock (``after``/``until`` are parameters), no I/O beyond zoneinfo
loading tz data; instants come out as aware UTC datetimes. croniter is imported here and
nowhere else, and only ever sees naive local wall-clock times: this module maps them to
instants itself, because croniter's own DST handling is unreliable.

Syntax: 5 fields ``minute hour day-of-month month day-of-week``, or 6 with **seconds
first** (node-cron / Quartz: ``*/5 * * * * *`` every 5 s, ``0 30 9 * * 1-5`` 09:30:00 on
weekdays); names (``MON-FRI``, ``JAN``), wrapping ranges (``FRI-MON``), ``L``, ``#``, ``W``
as croniter accepts them; macros ``@yearly @annually @monthly @weekly @daily @midnight
@hourly``. A field covering its whole range counts as ``*``; when both day fields are
restricted, either may match (classic cron OR). Rejected: 7 fields, ``@reboot``, ``H``/``R``
(hashed/random: not reproducible), out-of-range values, never-firing dates (``0 0 30 2 *``).

DST rules, on the local wall clock of the job's IANA zone (default UTC):
  * Wall-clock jobs -- the hour field names particular hours (``30 2 * * *``, ``@daily``,
    ``0 9-17 * * 1-5``) -- are appointments. A matching time skipped by a spring-forward
    gap fires once, at the first instant after the gap (Europe/Berlin ``30 2 * * *`` fires
    on 2026-03-29 at 03:00 CEST = 01:00Z); several skipped times collapse into that one
    fire, as cronie runs the skipped interval's jobs right after the change. A matching
    time repeated by a fall-back fires once, at its first occurrence.
  * Every-hour jobs -- the hour field covers all 24 hours (``*/15 * * * *``, ``@hourly``,
    ``*/5 * * * * *``) -- follow elapsed time: they fire at every real instant whose local
    wall clock matches. Both passes of a repeated hour fire, so ``*/15`` keeps its real
    15-minute cadence; times inside a gap never happen and are not replayed (``30 * * * *``
    fires at 00:30Z and 01:30Z across Berlin's gap, not also at 01:00Z), as cronie does
    for wildcard-hour jobs.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, CroniterError, croniter

from cronos.cron_fields import EXPR, MACROS, MAX_LENGTH
from cronos.dst import next_fixed, next_wildcard, require_aware
from cronos.errors import InvalidSchedule
from cronos.schedule import Schedule, ZonedSchedule, load_zone, parse_schedule

_EXPR = EXPR
_TZ = "$.timezone"
_MAX_LENGTH = MAX_LENGTH
_MACROS = MACROS  # unchanged by issue 12
# (name, lowest, highest) in the order users write the fields; seconds go first.
_SECOND = ("second", 0, 59)
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day-of-month", 1, 31), ("month", 1, 12), ("day-of-week", 0, 7))
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_NAMES = {"month": {n: i for i, n in enumerate(_MONTHS, 1)}, "day-of-week": {n: i for i, n in enumerate(_DAYS)}}
_WORD = re.compile(r"[a-z]+", re.ASCII | re.IGNORECASE)
_NUMBERS = re.compile(r"(\d+)(?:-(\d+))?", re.ASCII)
_HASHED = re.compile(r"[hr](?:\(.*\))?(?:/.*)?", re.ASCII | re.IGNORECASE)
# Names whose meaning depends on the host's configuration, not on tzdata.
_HOST_ZONES = frozenset({"localtime", "posixrules"})
_REFERENCE = datetime(2000, 1, 1)  # fixed start for the "does it ever fire" check
_EMPTY = (datetime.max.replace(tzinfo=UTC), datetime.min.replace(tzinfo=UTC))


def _normalize_field(token: str, name: str, low: int, high: int) -> str:
    """Check values with messages that name them; return the token as croniter should see it."""
    parts = []
    if names := _NAMES.get(name):  # numbers from here on, so names get the same checks
        token = _WORD.sub(lambda word: str(names.get(word[0].lower(), word[0])), token)
    for part in token.split(","):
        if not part:
            raise InvalidSchedule(_EXPR, f"{name} field {token!r} has an empty list item")
        if _HASHED.fullmatch(part):
            raise InvalidSchedule(_EXPR, f"{name} field {token!r}: H and R values are not supported")
        span, slash, step = part.partition("/")
        if slash and not (step.isascii() and step.isdigit() and int(step) > 0):
            raise InvalidSchedule(_EXPR, f"{name} step {step!r} must be a positive integer")
        # As Vixie cron: a step may be as large as the field's range (*/60 in minutes fires at :00).
        if slash and int(step) > high - low + 1:
            raise InvalidSchedule(_EXPR, f"{name} step {step} is larger than the field's range {low}-{high}")
        # croniter reads a bare "-" (or a range missing an end) as "*" in some positions.
        if span.startswith("-") or span.endswith("-") or "--" in span:
            raise InvalidSchedule(_EXPR, f"{name} field {token!r}: a range needs a start and an end")
        if match := _NUMBERS.fullmatch(span):
            for number in match.groups():
                if number is not None and not low <= int(number) <= high:
                    raise InvalidSchedule(_EXPR, f"{name} value {int(number)} out of range {low}-{high}")
        first, dash, last = span.partition("-")
        # croniter reads an equal range ("5-5", "sun-0") as the whole cycle; cron means one value.
        parts.append(first if dash and first == last else part)
    return ",".join(parts)


def _compile(expression: str) -> tuple[croniter[datetime], bool]:
    """Validate an expression; return the croniter and whether it has seconds."""
    if not expression:
        raise InvalidSchedule(_EXPR, "expression is empty")
    if len(expression) > _MAX_LENGTH:
        raise InvalidSchedule(_EXPR, f"expression longer than {_MAX_LENGTH} characters")
    if expression.startswith("@"):
        macro = _MACROS.get(expression.lower())
        if macro is None:
            problem = "has no fire time" if expression.lower() == "@reboot" else "is not a macro"
            raise InvalidSchedule(_EXPR, f"{expression!r} {problem}; use {', '.join(_MACROS)}")
        fields = macro.split()
    else:
        fields = expression.split()
    if len(fields) not in (5, 6):
        raise InvalidSchedule(_EXPR, f"expected 5 or 6 fields, got {len(fields)}")
    has_seconds = len(fields) == 6
    specs = ((_SECOND,) if has_seconds else ()) + _FIELDS
    normalized = []
    for index, (token, (name, low, high)) in enumerate(zip(fields, specs, strict=True)):
        normalized.append(_normalize_field(token, name, low, high))
        probe = ["*"] * len(fields)  # this field alone, so croniter's error names it
        probe[index] = normalized[-1]
        try:
            expanded = croniter.expand(" ".join(probe), second_at_beginning=has_seconds)[0]
        except (CroniterError, LookupError, ValueError) as exc:  # croniter can also fail on its own
            raise InvalidSchedule(_EXPR, f"{name} field {token!r} is not valid") from exc
        # A field covering its whole range is "*": croniter would keep "1-31" as a list
        # and switch the day fields to OR; we want "1-31" and "*" to mean the same.
        if expanded[(index - 1) % 6 if has_seconds else index] == ["*"]:
            normalized[-1] = "*"
    try:
        cron = croniter(" ".join(normalized), _REFERENCE, ret_type=datetime, second_at_beginning=has_seconds)
        cron.get_next(datetime, start_time=_REFERENCE, update_current=False)
    except CroniterBadDateError:
        raise InvalidSchedule(_EXPR, "expression never fires (no such date)") from None
    except (CroniterError, LookupError, ValueError) as exc:
        raise InvalidSchedule(_EXPR, f"expression is not valid: {exc}") from exc
    return cron, has_seconds


def _zone(name: object) -> ZoneInfo:
    if not isinstance(name, str) or not name or name in _HOST_ZONES:
        raise InvalidSchedule(_TZ, f"unknown time zone {name!r}")
    return load_zone(name)


@dataclass(frozen=True, slots=True)
class LegacySchedule(ZonedSchedule):
    """A validated cron schedule in one time zone; build it with :func:`parse_schedule`."""

    _cron: croniter[datetime] = field(init=False, repr=False, compare=False)
    _every_hour: bool = field(init=False, repr=False, compare=False)
    # croniter keeps per-call state, so calls are serialised; _memo is the last answer.
    _lock: threading.Lock = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise InvalidSchedule(_EXPR, "expression must be a string")
        cron, has_seconds = _compile(self.expression)
        if has_seconds != self.has_seconds:
            raise ValueError(f"has_seconds={self.has_seconds} contradicts {self.expression!r}")
        hours = cron.expanded[1]  # croniter stores minute, hour, ... even with seconds first
        set_ = object.__setattr__  # frozen: derived fields are set once, here
        set_(self, "_zone", _zone(self.timezone))
        set_(self, "_cron", cron)
        set_(self, "_every_hour", hours == ["*"])
        set_(self, "_lock", threading.Lock())
        set_(self, "_memo", _EMPTY)

    def next_after(self, after: datetime) -> datetime:
        """The first fire instant strictly after ``after`` (aware, any zone), in UTC."""
        require_aware(after, "after")
        low, high = self._memo
        if low <= after < high:  # nothing fires in (low, high), so the answer is unchanged
            return high
        with self._lock:
            result = self._next_elapsed(after) if self._every_hour else self._next_wall_clock(after)
            object.__setattr__(self, "_memo", (after, result))
        return result

    def _next_wall(self, wall: datetime) -> datetime:
        """The first matching naive wall time strictly after ``wall``."""
        return self._cron.get_next(datetime, start_time=wall, update_current=False)

    def _next_wall_clock(self, after: datetime) -> datetime:
        return next_fixed(self._zone, self._next_wall, after)

    def _next_elapsed(self, after: datetime) -> datetime:
        return next_wildcard(self._zone, self._next_wall, after)


@lru_cache(maxsize=4096)
def parse_legacy(expression: str, timezone: str = "UTC") -> LegacySchedule:
    """Validate ``expression`` in IANA zone ``timezone``; raise InvalidSchedule if bad.

    Memoised: many jobs share few distinct schedules, and Schedule is immutable.
    """
    if not isinstance(expression, str):
        raise InvalidSchedule(_EXPR, "expression must be a string")
    text = expression.strip()
    has_seconds = not text.startswith("@") and len(text.split()) == 6
    return LegacySchedule(text, timezone, has_seconds)


StoredSchedule = Schedule | LegacySchedule


def stored_schedule(expression: str, timezone: str) -> tuple[StoredSchedule, str | None]:
    """The schedule of a stored job, and a notice when it runs on its pre-issue-12 meaning.

    A stored row the current parser refuses keeps firing as it did (never a crash, never a
    silent stop) until it is edited; the notice says why and what to write instead. Raises
    InvalidSchedule only when neither meaning accepts the row.
    """
    try:
        return parse_schedule(expression, timezone), None
    except InvalidSchedule as refused:
        legacy = parse_legacy(expression, timezone)  # raises if it never was valid
        notice = (
            f"{refused.field}: {refused.message}. Cronos now refuses this schedule; "
            "the job keeps its previous meaning until its schedule is edited"
        )
        return legacy, notice
