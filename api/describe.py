"""Plain words for a cron expression: "every 5 minutes", "at 02:30 on Monday".

Pure and text-only: it reads the expression's fields as written and never computes a fire
time (cronos.schedule does that, and validates; call this only on an expression it
accepted). Forms it has no phrase for fall back to a generic wording that quotes the
field ("at minute 1-10/3 past hour 9"), so every valid expression gets a sentence.
"""

from __future__ import annotations

import re

from cronos.cron_fields import DOM, DOW, HOUR, MINUTE, MONTH, SECOND, Field, from_step

# The macros in words (what they stand for: Vixie cron's table).
_MACROS = {
    "@yearly": "at 00:00 on January 1",
    "@annually": "at 00:00 on January 1",
    "@monthly": "at 00:00 on day 1 of the month",
    "@weekly": "at 00:00 on Sunday",
    "@daily": "at 00:00 every day",
    "@midnight": "at 00:00 every day",
    "@hourly": "every hour",
    "@never": "never on its own (by hand, or after its parent jobs)",
}
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_ORDINALS = ("first", "second", "third", "fourth", "fifth")
_NUMBER = re.compile(r"\d{1,2}", re.ASCII)
_STEP = re.compile(r"\*/(\d{1,3})", re.ASCII)
_RANGE = re.compile(r"(\d{1,2})-(\d{1,2})", re.ASCII)
_NTH = re.compile(r"(\d)#([1-5])", re.ASCII)
_LAST_DAY = re.compile(r"(\d)L", re.ASCII | re.IGNORECASE)
_WORD = re.compile(r"[a-z]{3}", re.ASCII | re.IGNORECASE)
_CLOCK = re.compile(r"at \d\d:\d\d", re.ASCII)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _names(field: str, names: tuple[str, ...], base: int) -> str:
    """Three-letter names (MON, jan) to their numbers, so every field reads as digits."""
    lowered = [n[:3].lower() for n in names]
    return _WORD.sub(lambda w: str(lowered.index(w[0].lower()) + base) if w[0].lower() in lowered else w[0], field)


def _values(field: str) -> list[int] | None:
    """A plain list of numbers (`1,15`), or None for anything else."""
    parts = field.split(",")
    return [int(p) for p in parts] if all(_NUMBER.fullmatch(p) for p in parts) else None


def _plural(n: int, unit: str) -> str:
    return f"every {unit}" if n == 1 else f"every {n} {unit}s"


def _clock(hour: int, minute: int, second: int | None = None) -> str:
    return f"{hour:02d}:{minute:02d}" + ("" if not second else f":{second:02d}")


def _time(second: str | None, minute: str, hour: str) -> str:
    """The time-of-day part."""
    sec = 0 if second is None else (int(second) if _NUMBER.fullmatch(second) else None)
    minutes, hours = _values(minute), _values(hour)
    if second is not None and sec is None:
        if minute == hour == "*":
            if second == "*":
                return "every second"
            if step := _STEP.fullmatch(second):
                return _plural(int(step[1]), "second")
        return _generic((("second", second), ("minute", minute), ("hour", hour)))
    if hour == "*":
        if minute == "*":
            return "every minute" if not sec else f"every minute at second {sec}"
        if (step := _STEP.fullmatch(minute)) and not sec:
            return _plural(int(step[1]), "minute")
        if minute == "first":
            return "at minute 0 of every hour"
        if minutes is not None and len(minutes) == 1 and not sec:
            return "every hour" if minutes[0] == 0 else f"every hour at minute {minutes[0]}"
    if minutes is not None and len(minutes) == 1:
        if hours is not None:
            return "at " + _join([_clock(h, minutes[0], sec) for h in hours])
        if (step := _STEP.fullmatch(hour)) and not sec:
            return _plural(int(step[1]), "hour") + (f" at minute {minutes[0]}" if minutes[0] else "")
        if (span := _RANGE.fullmatch(hour)) and not sec:
            start, end = int(span[1]), int(span[2])
            return f"every hour from {_clock(start, minutes[0])} to {_clock(end, minutes[0])}"
    if (step := _STEP.fullmatch(minute)) and not sec and (span := _RANGE.fullmatch(hour)):
        return f"{_plural(int(step[1]), 'minute')} from {_clock(int(span[1]), 0)} to {_clock(int(span[2]), 59)}"
    named = (("second", second or "0"), ("minute", minute), ("hour", hour))
    return _generic(named)


def _generic(fields: tuple[tuple[str, str], ...]) -> str:
    """The fallback: quote the fields that are not `*` (or a zero second)."""
    shown = [f"{name} {value}" for name, value in fields if value != "*" and not (name == "second" and value == "0")]
    return "at " + ", ".join(shown) if shown else "every minute"


def _day_names(field: str) -> str | None:
    """Day-of-week words: `1-5` Monday through Friday, `1,3` Monday and Wednesday, `5L`, `1#2`."""
    if nth := _NTH.fullmatch(field):
        return f"on the {_ORDINALS[int(nth[2]) - 1]} {_DAYS[int(nth[1]) % 7]} of the month"
    if last := _LAST_DAY.fullmatch(field):
        return f"on the last {_DAYS[int(last[1]) % 7]} of the month"
    items = []
    for part in field.split(","):
        if span := _RANGE.fullmatch(part):
            items.append(f"{_DAYS[int(span[1]) % 7]} through {_DAYS[int(span[2]) % 7]}")
        elif _NUMBER.fullmatch(part) and int(part) <= 7:
            items.append(_DAYS[int(part) % 7])
        else:
            return None
    return "on " + _join(items)


def _month_days(field: str) -> str | None:
    if field.upper() == "L":
        return "on the last day of the month"
    if span := _RANGE.fullmatch(field):
        return f"on days {span[1]} through {span[2]} of the month"
    days = _values(field)
    if days is None:
        return None
    return (
        f"on day {days[0]} of the month" if len(days) == 1 else f"on days {_join([str(d) for d in days])} of the month"
    )


def _months(field: str) -> str | None:
    if span := _RANGE.fullmatch(field):
        return f"from {_MONTHS[int(span[1]) - 1]} through {_MONTHS[int(span[2]) - 1]}"
    months = _values(field)
    if months is None or not all(1 <= m <= 12 for m in months):
        return None
    return "in " + _join([_MONTHS[m - 1] for m in months])


def _stepped(field: str, cycle: int) -> str:
    """A `*/n` the words would misread, spelled as the values it matches: a step past the field
    (`*/90` in minutes) keeps only its start, one that does not divide the field (`*/7`) restarts
    at each wrap. Anything else as written."""
    step = _STEP.fullmatch(field)
    if step is None or cycle % int(step[1]) == 0:
        return field
    return ",".join(str(v) for v in range(0, cycle, int(step[1])))


_FROM_STEP = re.compile(r"(\d{1,2}|[a-z]{3})/(\d{1,3})", re.ASCII | re.IGNORECASE)


def _ranged(token: str, field: Field) -> str:
    """`n/step` as the range it stands for (`5/10`: `5-59/10`; from the field's start: `*/10`, but
    not in a day field, where a leading `*` changes Vixie's AND/OR rule)."""
    parts = []
    for part in token.split(","):
        if (match := _FROM_STEP.fullmatch(part)) is not None:
            start, step = match[1], match[2]
            whole = start.isdigit() and int(start) == field.low and field not in (DOM, DOW)
            part = f"*/{step}" if whole else f"{from_step(start, field)}/{step}"
        parts.append(part)
    return ",".join(parts)


def describe(expression: str) -> str:
    """A sentence for a valid expression: the time of day, then which days, then which months."""
    text = expression.strip()
    if text.lower() in _MACROS:
        return _MACROS[text.lower()]
    fields = text.split()
    if len(fields) not in (5, 6):
        return f"on the schedule {text!r}"
    named = (SECOND, MINUTE, HOUR, DOM, MONTH, DOW)[-len(fields) :]
    fields = [_ranged(token, field) for token, field in zip(fields, named, strict=True)]
    second = fields[0] if len(fields) == 6 else None
    minute, hour, dom, month, dow = fields[-5:]
    if second is not None:
        second = _stepped(second, 60)
    if minute != (minute := _stepped(minute, 60)) and minute == "0" and hour == "*" and not second:
        minute = "first"  # `*/90`: "at minute 0 of every hour", said so (not "every hour")
    hour = _stepped(hour, 24)
    month = _names(month, _MONTHS, 1)
    dow = _names(dow, _DAYS, 0)
    words = [_time(second, minute, hour)]
    days = [] if dom in ("*", "?") else [_month_days(dom) or f"on day-of-month {dom}"]
    if dow not in ("*", "?"):
        weekdays = _day_names(dow) or f"on day-of-week {dow}"
        # Vixie cron: both day fields restricted means either day matches (unless one starts with *).
        joint = "and" if dom.startswith("*") or dow.startswith("*") else "or"
        days = [f"{days[0]} {joint} {weekdays.removeprefix('on ')}"] if days else [weekdays]
    if not days and _CLOCK.match(words[0]):
        days = ["every day"]
    words += days
    if month != "*":
        words.append(_months(month) or f"in month {month}")
    return " ".join(words)
