"""Expected ticks, computed independently of cronos/schedule.py (and of croniter).

A deliberately naive matcher for the simple UTC expressions the chaos tests use: parse
each field into the set of values it allows, then walk the window one second at a time.
Slow and obvious on purpose: it is the reference the product's schedule is judged by.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# (low, high) of each field of a 6-field, seconds-first expression.
_RANGES = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def _field(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"bad step in {text!r}")
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, last = base.split("-")
            start, end = int(first), int(last)
        else:
            start = int(base)
            end = high if step_text else start
        if not low <= start <= end <= high:
            raise ValueError(f"{part!r} outside {low}-{high}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


class Matcher:
    """Does a UTC instant (whole second) match a 5- or 6-field (seconds-first) expression?"""

    def __init__(self, expression: str) -> None:
        fields = expression.split()
        if len(fields) == 5:
            fields = ["0", *fields]
        if len(fields) != 6:
            raise ValueError(f"unsupported expression {expression!r}")
        fields[5] = fields[5].replace("7", "0")
        sets = [_field(text, low, high) for text, (low, high) in zip(fields, _RANGES, strict=True)]
        self.second, self.minute, self.hour, self.day, self.month, self.weekday = sets
        # Vixie cron: when both day fields are restricted, either may match.
        self._days_or = fields[3] != "*" and fields[5] != "*"

    def matches(self, t: datetime) -> bool:
        if t.second not in self.second or t.minute not in self.minute or t.hour not in self.hour:
            return False
        if t.month not in self.month:
            return False
        day_ok, weekday_ok = t.day in self.day, (t.isoweekday() % 7) in self.weekday
        return (day_ok or weekday_ok) if self._days_or else (day_ok and weekday_ok)


def expected_ticks(expression: str, timezone: str, after: datetime, until: datetime) -> list[datetime]:
    """Every instant t with after < t <= until that the expression matches (UTC only)."""
    if timezone != "UTC":
        raise ValueError(f"the reference matcher handles UTC only, not {timezone!r}")
    matcher = Matcher(expression)
    t = after.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
    end = until.astimezone(UTC)
    found: list[datetime] = []
    while t <= end:
        if matcher.matches(t):
            found.append(t)
        t += timedelta(seconds=1)
    return found
