"""Cron expression text -> the values each field matches, read as Vixie cron reads it.

Pure and clock-free. Standard syntax follows Vixie cron (cronie): ``*``, numbers, names
(``JAN``, ``MON``; three letters, any case), ``a-b`` (``05-5`` is 5), ``/step`` after ``*``
or a range (a step past the range keeps only the first value: ``*/61`` is minute 0),
lists, 0 and 7 both Sunday. Departures, each deliberate and documented in docs/cron.md:
a range written backwards with numbers (``5-1``, ``7-0``) is refused as Vixie refuses it,
but one with two names wraps (``FRI-MON``, ``NOV-MAR/3`` = Nov, Feb: the step runs on
across the wrap). Extensions: ``n/step`` is ``n-max/step`` (``5/15`` = ``5-59/15``, as
Quartz, croniter, cronsim and robfig/cron read it; Vixie cron refuses it), ``?`` (a whole
day field, same as ``*``), ``L``, ``LW``, ``nW`` in the day of month, ``d#n`` and ``Ld``
in the day of week.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from calendar import monthrange
from dataclasses import dataclass
from functools import lru_cache

from cronos.errors import InvalidSchedule

EXPR = "$.cron_expression"
MAX_LENGTH = 256
MAX_STEP = 999
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
    # No fire time (a job run by hand or after its parents, Dkron's `@manually`): these fields are
    # never read, cronos.schedule answers NEVER for it.
    "@never": "0 0 1 1 *",
}
NEVER = "@never"
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] is the value low + i

    @property
    def cycle(self) -> int:
        """Values a wrapping range runs through (7 for the day of week: 7 is Sunday again)."""
        return 7 if self.name == "day-of-week" else self.high - self.low + 1


SECOND = Field("second", 0, 59)
MINUTE = Field("minute", 0, 59)
HOUR = Field("hour", 0, 23)
DOM = Field("day-of-month", 1, 31)
MONTH = Field("month", 1, 12, _MONTHS)
DOW = Field("day-of-week", 0, 7, _DAYS)

# Only ASCII space and tab separate fields (as in a crontab line); anything else is refused.
_SEPARATORS = re.compile(r"[ \t]+")
_ALLOWED = re.compile(r"[ \t!-~]*", re.ASCII)
_VALUE = re.compile(r"[0-9]+|[A-Za-z]+", re.ASCII)
_HASHED = re.compile(r"[hr](?:\(.*\))?(?:/.*)?", re.ASCII | re.IGNORECASE)
_NEAREST = re.compile(r"([0-9]+)W", re.ASCII | re.IGNORECASE)
_NTH = re.compile(r"([0-9]+|[A-Za-z]+)#([0-9]+)", re.ASCII)
_LAST_DAY = re.compile(r"L([0-9]+|[A-Za-z]+)", re.ASCII | re.IGNORECASE)
_QUARTZ_LAST = re.compile(r"([0-9]+|[A-Za-z]+)L", re.ASCII | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Days:
    """What the two day fields match, and the Vixie rule joining them."""

    dom: frozenset[int]  # plain days of the month
    last: bool = False  # L: the month's last day
    last_weekday: bool = False  # LW: its last Monday-Friday
    nearest: frozenset[int] = frozenset()  # nW: the Monday-Friday nearest day n, same month
    dow: frozenset[int] = frozenset(range(7))  # 0 = Sunday
    nth: frozenset[tuple[int, int]] = frozenset()  # d#n: (weekday, n)
    last_of: frozenset[int] = frozenset()  # Ld: the month's last weekday d
    # Vixie: the fields are ANDed when either one's text starts with "*" (or our "?"), else ORed.
    both: bool = True

    def in_month(self, length: int, first: int) -> tuple[int, ...]:
        """The matching days of a month of ``length`` days whose 1st is weekday ``first``."""
        return _in_month(self, length, first)


# Parsed parts are immutable and few distinct ones exist: memoised, a leader holding 100,000
# schedules holds each once (`*`'s 31 days, a minute's next-value table...), not once per schedule.
_PARTS = 4096


@lru_cache(maxsize=_PARTS)
def _in_month(days: Days, length: int, first: int) -> tuple[int, ...]:
    weekdays = [d for d in range(1, length + 1) if (first + d - 1) % 7 not in (0, 6)]
    near = {min(weekdays, key=lambda w: abs(w - n)) for n in days.nearest if n <= length}
    out = []
    for day in range(1, length + 1):
        weekday = (first + day - 1) % 7
        by_dom = (
            day in days.dom
            or day in near
            or (days.last and day == length)
            or (days.last_weekday and day == weekdays[-1])
        )
        by_dow = (
            weekday in days.dow
            or (weekday, (day - 1) // 7 + 1) in days.nth
            or (weekday in days.last_of and day + 7 > length)
        )
        if (by_dom and by_dow) if days.both else (by_dom or by_dow):
            out.append(day)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CronFields:
    """A parsed expression: per field the values it matches; 5-field forms match second 0."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    days: Days
    has_seconds: bool
    # Vixie's DST class: minute or hour text starting with "*" follows real time.
    wildcard: bool


def _fail(message: str) -> InvalidSchedule:
    return InvalidSchedule(EXPR, message)


def _value(text: str, field: Field, token: str) -> tuple[int, bool]:
    """A number or a name of ``field``; returns the value and whether it was a name."""
    if text.isdigit():
        value = int(text)
        if not field.low <= value <= field.high:
            raise _fail(f"{field.name} value {value} out of range {field.low}-{field.high}")
        return value, False
    lowered = text.lower()
    if lowered in field.names:
        return field.low + field.names.index(lowered), True
    raise _fail(f"{field.name} field {token!r} is not valid")


def _step(text: str, field: Field) -> int:
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise _fail(f"{field.name} step {text!r} must be a positive integer")
    if int(text) > MAX_STEP:
        raise _fail(f"{field.name} step {text} is too large (at most {MAX_STEP})")
    return int(text)


def _wrapped(first: int, last: int, step: int, field: Field) -> tuple[set[int], str]:
    """The values of a backwards range read as wrapping, and the forward spelling of them."""
    top = field.low + field.cycle - 1
    values, v = set(), first
    while v <= last + field.cycle:
        values.add(v - field.cycle if v > top else v)
        v += step
    suffix = f"/{step}" if step > 1 else ""
    end_first = first + (top - first) // step * step
    spelled = f"{first}-{top}{suffix}" if end_first > first else str(first)
    resume = end_first + step - field.cycle
    if resume <= last:
        spelled += f",{resume}-{last}{suffix}" if resume < last else f",{resume}"
    return values, spelled


def _item(part: str, field: Field, token: str) -> set[int]:
    """One list item: ``*``, ``v``, ``a-b``, each optionally ``/step``."""
    if _HASHED.fullmatch(part):
        why = "R (random) is not supported, jitter_s is" if part[0] in "Rr" else "H is a job's, hashed from its name"
        raise _fail(f"{field.name} field {token!r}: {why}")
    span, slash, step_text = part.partition("/")
    step = _step(step_text, field) if slash else 1
    if slash and _VALUE.fullmatch(span):  # n/step: from n to the field's end (see from_step)
        span = from_step(span, field)
    if span == "*":
        return set(range(field.low, field.high + 1, step))
    first_text, dash, last_text = span.partition("-")
    if dash and (not first_text or not last_text):
        raise _fail(f"{field.name} field {token!r}: a range needs a start and an end")
    if not _VALUE.fullmatch(first_text) or (dash and not _VALUE.fullmatch(last_text)):
        raise _fail(f"{field.name} field {token!r} is not valid")
    first, first_named = _value(first_text, field, token)
    if not dash:
        return {first}
    last, last_named = _value(last_text, field, token)
    if first <= last:
        return set(range(first, last + 1, step))
    if field.name == "day-of-week" and first == 7:  # 7-0, 7-SUN, 7-3: Sunday is also 0
        values = set(range(0, last + 1, step))
        raise _fail(f"{field.name} range {part!r} runs backwards; write {_spell(values)}")
    values, spelled = _wrapped(first, last, step, field)
    if first_named and last_named:  # FRI-MON, NOV-FEB: a documented wrapping extension
        return values
    raise _fail(f"{field.name} range {part!r} runs backwards (Vixie cron refuses it); write {spelled}")


def from_step(start: str, field: Field) -> str:
    """The range ``n/step`` stands for: ``n-max``, max the field's last value (7 in the day of week,
    Sunday again, as in ``1-7/2``). The schedule lint says so beside the expression."""
    return f"{start}-{field.high}"


def item_values(part: str, field: Field) -> set[int]:
    """The values one valid list item matches, as written (7 stays 7 in the day of week)."""
    return _item(part, field, part)


def _spell(values: set[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


@lru_cache(maxsize=_PARTS)
def _plain(token: str, field: Field) -> frozenset[int]:
    values: set[int] = set()
    for part in token.split(","):
        if not part:
            raise _fail(f"{field.name} field {token!r} has an empty list item")
        values |= _item(part, field, token)
    return frozenset(v % 7 for v in values) if field is DOW else frozenset(values)


_DomParts = tuple[frozenset[int], bool, bool, frozenset[int]]  # dom, last, last_weekday, nearest
_DowParts = tuple[frozenset[int], frozenset[tuple[int, int]], frozenset[int]]  # dow, nth, last_of


def _day_of_month(token: str) -> _DomParts:
    if token == "?":
        return frozenset(range(1, 32)), False, False, frozenset()
    plain: list[str] = []
    last = last_weekday = False
    nearest: set[int] = set()
    for part in token.split(","):
        if not part:
            raise _fail(f"{DOM.name} field {token!r} has an empty list item")
        if part.upper() == "L":
            last = True
        elif part.upper() == "LW":
            last_weekday = True
        elif match := _NEAREST.fullmatch(part):
            nearest.add(_value(match[1], DOM, token)[0])
        else:
            plain.append(part)
    dom = _plain(",".join(plain), DOM) if plain else frozenset()
    return dom, last, last_weekday, frozenset(nearest)


def _day_of_week(token: str) -> _DowParts:
    if token == "?":
        return frozenset(range(7)), frozenset(), frozenset()
    plain: list[str] = []
    nth: set[tuple[int, int]] = set()
    last_of: set[int] = set()
    for part in token.split(","):
        if not part:
            raise _fail(f"{DOW.name} field {token!r} has an empty list item")
        if match := _NTH.fullmatch(part):
            day, _ = _value(match[1], DOW, token)
            if not 1 <= int(match[2]) <= 5:
                raise _fail(f"{DOW.name} field {token!r}: the n of d#n must be 1-5")
            nth.add((day % 7, int(match[2])))
        elif part.upper() == "L":
            raise _fail(f"{DOW.name} field {token!r}: L alone is ambiguous; write L<day> (L5: the last Friday)")
        elif match := _LAST_DAY.fullmatch(part):
            last_of.add(_value(match[1], DOW, token)[0] % 7)
        elif (match := _QUARTZ_LAST.fullmatch(part)) and not _VALUE.fullmatch(part):
            why = "Quartz's dL is not supported (its day numbers differ)"
            raise _fail(f"{DOW.name} field {token!r}: {why}; write L{match[1]}")
        else:
            plain.append(part)
    dow = _plain(",".join(plain), DOW) if plain else frozenset()
    return dow, frozenset(nth), frozenset(last_of)


@lru_cache(maxsize=_PARTS)
def _days(dom_token: str, dow_token: str) -> Days:
    dom, last, last_weekday, nearest = _day_of_month(dom_token)
    dow, nth, last_of = _day_of_week(dow_token)
    both = dom_token[0] in "*?" or dow_token[0] in "*?"
    return Days(dom, last, last_weekday, nearest, dow, nth, last_of, both)


def split(expression: str) -> list[str]:
    """The fields of an expression (macros expanded); refuses what is not 5 or 6 fields."""
    text = expression.strip(" \t")
    if not text:
        raise _fail("expression is empty")
    if len(text) > MAX_LENGTH:
        raise _fail(f"expression longer than {MAX_LENGTH} characters")
    if not _ALLOWED.fullmatch(text):
        bad = next(c for c in text if not _ALLOWED.fullmatch(c))
        raise _fail(f"character U+{ord(bad):04X} is not allowed; fields are separated by ASCII spaces or tabs")
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            problem = "has no fire time" if text.lower() == "@reboot" else "is not a macro"
            raise _fail(f"{text!r} {problem}; use {', '.join(MACROS)}")
        return macro.split()
    fields = _SEPARATORS.split(text)
    if len(fields) not in (5, 6):
        raise _fail(f"expected 5 or 6 fields, got {len(fields)}")
    return fields


def parse(expression: str) -> CronFields:
    """Read an expression; raise InvalidSchedule naming the field and what to write instead."""
    fields = split(expression)
    has_seconds = len(fields) == 6
    if not has_seconds:
        fields = ["0", *fields]
    for token, field in zip(fields, (SECOND, MINUTE, HOUR, DOM, MONTH), strict=False):
        if "?" in token and (field is not DOM or token != "?"):
            raise _fail(f"{field.name} field {token!r}: ? stands alone, in the day fields only")
    if "?" in fields[5] and fields[5] != "?":
        raise _fail(f"{DOW.name} field {fields[5]!r}: ? stands alone, in the day fields only")
    parsed = CronFields(
        seconds=_plain(fields[0], SECOND),
        minutes=_plain(fields[1], MINUTE),
        hours=_plain(fields[2], HOUR),
        months=_plain(fields[4], MONTH),
        days=_days(fields[3], fields[5]),
        has_seconds=has_seconds,
        wildcard=fields[1][0] == "*" or fields[2][0] == "*",
    )
    if not _ever_fires(parsed.days, parsed.months):
        raise _fail("expression never fires (no such date)")
    return parsed


_MONTH_SHAPE: dict[tuple[int, int], tuple[int, int]] = {}


def month_shape(year: int, month: int) -> tuple[int, int]:
    """(days in the month, weekday of its 1st with 0 = Sunday), memoised."""
    shape = _MONTH_SHAPE.get((year, month))
    if shape is None:
        first, length = monthrange(year, month)
        if len(_MONTH_SHAPE) > 100_000:  # far more months than real schedules visit
            _MONTH_SHAPE.clear()
        shape = _MONTH_SHAPE[(year, month)] = (length, (first + 1) % 7)
    return shape


@lru_cache(maxsize=_PARTS)
def _ever_fires(days: Days, months: frozenset[int]) -> bool:
    """Every (length, weekday of the 1st) a month can have comes round within 28 years."""
    lengths = {2: (28, 29), 4: (30,), 6: (30,), 9: (30,), 11: (30,)}
    shapes = {(n, first) for m in months for n in lengths.get(m, (31,)) for first in range(7)}
    return any(days.in_month(n, first) for n, first in sorted(shapes, reverse=True))


@lru_cache(maxsize=_PARTS)
def next_table(values: frozenset[int], size: int) -> tuple[int, ...]:
    """t[v] = the smallest value >= v in ``values``, or -1 (carry); len ``size`` + 1."""
    ordered = sorted(values)
    out = []
    for v in range(size + 1):
        i = bisect_left(ordered, v)
        out.append(ordered[i] if i < len(ordered) else -1)
    return tuple(out)
