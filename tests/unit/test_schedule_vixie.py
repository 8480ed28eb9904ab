"""`Schedule.next_after` against a brute-force cron written here from Vixie cron's rules.

Nothing here reads cronos's parser: each random field is built together with the values
it means (Vixie's get_range: ``a-b/n`` is a, a+n, ... <= b; ``*`` is the whole field,
0-7 for the day of week; 7 is Sunday), and the fire times come from a re-enactment of
Vixie cron's main loop (cron.c): each real minute (second, for 6 fields) it compares the
wall clock with its "virtual time" and runs wildcard and fixed-time jobs as its four
cases do. The extensions (``?``, ``L``, ``LW``, ``nW``, ``d#n``, ``Ld``) are brute-forced
from the definitions in docs/cron.md.

CI runs the `vixie-ci` profile (1000 examples for the DST walk, 500 for the calendar).
A million: ``CRONOS_VIXIE_PROFILE=vixie-million .venv/bin/python -m pytest -o timeout=0
tests/unit/test_schedule_vixie.py`` (docs/cron.md).
"""

from __future__ import annotations

import calendar
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronos.schedule import Schedule, parse_schedule

settings.register_profile(
    "vixie-ci", max_examples=1000, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile("vixie-million", settings.get_profile("vixie-ci"), max_examples=1_000_000)
PROFILE = settings.get_profile(os.environ.get("CRONOS_VIXIE_PROFILE", "vixie-ci"))
CALENDAR = settings(PROFILE, max_examples=max(1, (PROFILE.max_examples or 1) // 2))
# CI: ~13 s and ~25 s on a loaded 2-core box, so 300 s is ample; a longer profile runs unbounded.
LIMIT_S = 300 if PROFILE.max_examples <= 1000 else 0
# CPU-bound under a time limit: with other tests on the same cores it took 120-310 s (docs/development.md).
pytestmark = pytest.mark.serial

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (low, high, names) as Vixie's FIRST_/LAST_ constants; the day of week runs 0-7.
BOUNDS = {
    "second": (0, 59, ()),
    "minute": (0, 59, ()),
    "hour": (0, 23, ()),
    "dom": (1, 31, ()),
    "month": (1, 12, MONTHS),
    "dow": (0, 7, DAYS),
}
DayTest = Callable[[date], bool]


def spell(name: str, v: int, named: bool, zeros: int) -> str:
    low, _, names = BOUNDS[name]
    if named and names and v - low < len(names):
        return names[v - low].lower() if v % 2 else names[v - low]
    return "0" * zeros + str(v)


@st.composite
def item(draw: st.DrawFn, name: str) -> tuple[str, set[int]]:
    """One list item and the values Vixie's get_range sets for it."""
    low, high, names = BOUNDS[name]
    kind = draw(st.sampled_from(["star", "star_step", "one", "range", "range_step", "wrap"]))
    named = bool(names) and draw(st.booleans())
    zeros = draw(st.sampled_from([0, 0, 0, 1]))
    step = draw(st.one_of(st.integers(1, 4), st.integers(1, high - low + 8)))
    if kind == "star":
        return "*", set(range(low, high + 1))
    if kind == "star_step":
        return f"*/{step}", set(range(low, high + 1, step))
    a = draw(st.integers(low, high))
    if name == "hour" and draw(st.booleans()):
        a = draw(st.sampled_from([1, 2, 3]))  # the hours DST changes skip or repeat
    if kind == "one":
        return spell(name, a, named, zeros), {a}
    if kind == "wrap" and names:  # two names written backwards: walk the cycle from a to b
        top = 6 if name == "dow" else high
        b = draw(st.integers(low, top))
        a = min(a, top)
        if a <= b:
            b, a = a, b
        if a == b:
            return spell(name, a, True, 0), {a}
        walk = list(range(a, top + 1)) + list(range(low, b + 1))
        text = f"{spell(name, a, True, 0)}-{spell(name, b, True, 0)}"
        return (f"{text}/{step}", set(walk[::step])) if draw(st.booleans()) else (text, set(walk))
    b = draw(st.integers(a, high))
    text = f"{spell(name, a, named, zeros)}-{spell(name, b, named, 0)}"
    if kind == "range_step":
        return f"{text}/{step}", set(range(a, b + 1, step))
    return text, set(range(a, b + 1))


@st.composite
def plain_field(draw: st.DrawFn, name: str) -> tuple[str, frozenset[int]]:
    items = draw(st.lists(item(name), min_size=1, max_size=3))
    values = set().union(*(v for _, v in items))
    if name == "dow":
        values = {v % 7 for v in values}  # Vixie: bit 7 and bit 0 are both Sunday
    return ",".join(t for t, _ in items), frozenset(values)


def nearest_weekday(day: date, n: int) -> bool:
    length = calendar.monthrange(day.year, day.month)[1]
    weekdays = [d for d in range(1, length + 1) if date(day.year, day.month, d).weekday() < 5]
    return n <= length and day.day == min(weekdays, key=lambda d: abs(d - n))


@st.composite
def day_field(draw: st.DrawFn, name: str) -> tuple[str, DayTest]:
    """A day-of-month or day-of-week field, extensions included, and its test on a date."""
    text, values = draw(plain_field(name))
    plain: DayTest = (lambda d: d.day in values) if name == "dom" else (lambda d: cron_dow(d) in values)
    parts, tests = [text], [plain]
    for _ in range(draw(st.integers(0, 2))):
        if name == "dom":
            n = draw(st.integers(1, 31))
            text, test = draw(
                st.sampled_from(
                    [
                        ("L", lambda d: d.day == calendar.monthrange(d.year, d.month)[1]),
                        ("LW", lambda d: d == last_weekday(d)),
                        (f"{n}W", lambda d, n=n: nearest_weekday(d, n)),
                    ]
                )
            )
        else:
            wd, n = draw(st.integers(0, 7)), draw(st.integers(1, 5))
            text, test = draw(
                st.sampled_from(
                    [
                        (f"{wd}#{n}", lambda d, wd=wd, n=n: cron_dow(d) == wd % 7 and (d.day - 1) // 7 + 1 == n),
                        (f"L{wd}", lambda d, wd=wd: cron_dow(d) == wd % 7 and d.month != (d + timedelta(7)).month),
                    ]
                )
            )
        parts.append(text)
        tests.append(test)
    if draw(st.integers(0, 9)) == 0:
        return "?", lambda d: True
    if draw(st.booleans()):  # extensions only
        parts, tests = parts[1:] or parts, tests[1:] or tests
    return ",".join(parts), lambda d: any(t(d) for t in tests)


def cron_dow(d: date) -> int:
    return d.isoweekday() % 7


def last_weekday(d: date) -> date:
    last = date(d.year, d.month, calendar.monthrange(d.year, d.month)[1])
    while last.weekday() > 4:
        last -= timedelta(1)
    return last


@dataclass(frozen=True)
class Cron:
    text: str
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    dom: DayTest
    dow: DayTest
    both: bool  # Vixie: DOM_STAR or DOW_STAR -> AND, else OR
    wildcard: bool  # Vixie: MIN_STAR or HR_STAR
    unit: timedelta

    def day_matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        return (self.dom(d) and self.dow(d)) if self.both else (self.dom(d) or self.dow(d))

    def matches(self, wall: datetime) -> bool:
        return (
            wall.second in self.seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and self.day_matches(wall.date())
        )


@st.composite
def crons(draw: st.DrawFn, six: bool | None = None) -> Cron:
    has_seconds = draw(st.booleans()) if six is None else six
    seconds_text, seconds = draw(plain_field("second")) if has_seconds else ("", frozenset({0}))
    minute_text, minutes = draw(plain_field("minute"))
    hour_text, hours = draw(plain_field("hour"))
    dom_text, dom = draw(day_field("dom"))
    month_text, months = draw(plain_field("month"))
    dow_text, dow = draw(day_field("dow"))
    fields = [minute_text, hour_text, dom_text, month_text, dow_text]
    text = " ".join(([seconds_text] if has_seconds else []) + fields)
    return Cron(
        text=draw(st.sampled_from([text, text.replace(" ", "\t", 1), f" {text} "])),
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        months=months,
        dom=dom,
        dow=dow,
        both=dom_text[0] in "*?" or dow_text[0] in "*?",
        wildcard=minute_text[0] == "*" or hour_text[0] == "*",
        unit=timedelta(seconds=1 if has_seconds else 60),
    )


def ever_fires(cron: Cron) -> bool:
    """28 years hold every shape a month can have."""
    start = date(2000, 1, 1)
    return any(cron.day_matches(start + timedelta(k)) for k in range(28 * 366))


# -- the calendar: zones without DST in 2026-2027, first fire by walking days then minutes --


def brute_next(cron: Cron, zone: ZoneInfo, after: datetime) -> datetime:
    wall = after.astimezone(zone).replace(tzinfo=None)
    day = wall.date()
    while True:
        if cron.day_matches(day):
            x = datetime.combine(day, datetime.min.time())
            for _ in range(1440):
                if x.minute in cron.minutes and x.hour in cron.hours:
                    for s in sorted(cron.seconds):
                        if (candidate := x.replace(second=s)) > wall:
                            return candidate.replace(tzinfo=zone).astimezone(UTC)
                x += timedelta(minutes=1)
        day += timedelta(1)


@pytest.mark.timeout(LIMIT_S)
@CALENDAR
@given(
    cron=crons(),
    zone=st.sampled_from(["UTC", "Asia/Kolkata", "Etc/GMT+5"]),
    start=st.integers(0, 2 * 365 * 86400 * 1000),
)
def test_next_fire_matches_vixie_calendar(cron: Cron, zone: str, start: int) -> None:
    after = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=start)
    if not ever_fires(cron):
        return  # test_schedule_input covers "never fires"; here the refusal is the expected answer
    schedule = parse_schedule(cron.text, zone)
    first = schedule.next_after(after)
    assert first == brute_next(cron, ZoneInfo(zone), after), cron.text
    assert schedule.next_after(first) == brute_next(cron, ZoneInfo(zone), first), cron.text


# -- the clock: Vixie's main loop, one real minute (second) at a time, across DST changes --

TRANSITIONS = [  # (zone, UTC instant of an offset change), 2026-2027
    ("Europe/Berlin", "2026-03-29 01:00"),
    ("Europe/Berlin", "2026-10-25 01:00"),
    ("America/New_York", "2026-03-08 07:00"),
    ("America/New_York", "2026-11-01 06:00"),
    ("Australia/Lord_Howe", "2026-04-04 15:00"),  # 02:00 -> 01:30: 30-minute DST
    ("Australia/Lord_Howe", "2026-10-03 15:30"),
    ("Pacific/Chatham", "2026-04-04 14:00"),  # 03:45 +13:45 -> 02:45 +12:45
    ("Pacific/Chatham", "2026-09-26 14:00"),
    ("Europe/Berlin", "2027-03-28 01:00"),
    ("America/New_York", "2027-11-07 06:00"),
]
ZONES = sorted({z for z, _ in TRANSITIONS} | {"Asia/Kolkata"})
EPOCH = datetime(1970, 1, 1)
MINUTES = 60  # Vixie counts minutes; for 6 fields the same loop counts seconds


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def vixie_fires(cron: Cron, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """cron.c's loop: timeRunning is the wall clock, virtualTime the latest wall time handled."""
    unit = cron.unit
    per_minute = int(timedelta(minutes=1) / unit)

    def wall(x: datetime) -> int:
        return (x.astimezone(zone).replace(tzinfo=None) - EPOCH) // unit

    def match(v: int) -> bool:
        return cron.matches(EPOCH + v * unit)

    x = after.replace(microsecond=0) if unit.total_seconds() == 1 else after.replace(second=0, microsecond=0)
    # Virtual time never goes back: the latest wall time of the last three hours.
    lookback = [x - k * timedelta(minutes=1) for k in range(181)]
    virtual = max(max(wall(t), wall(t - unit)) for t in lookback)
    fires = []
    while (x := x + unit) <= until:
        running = wall(x)
        diff = running - virtual
        if diff == 1:  # the normal case: every job of this minute
            virtual, hit = running, match(running)
        elif 0 < diff <= 5 * per_minute:  # woke up late: every job of each minute missed
            hit = any(match(v) for v in range(virtual + 1, running + 1))
            virtual = running
        elif 0 < diff <= 3 * MINUTES * per_minute:  # DST began: wildcard now, fixed for each skipped minute
            skipped = any(match(v) for v in range(virtual + 1, running + 1))
            hit = match(running) if cron.wildcard else skipped
            virtual = running
        elif -3 * MINUTES * per_minute < diff <= 0:  # DST ended: wildcard jobs only, virtual time waits
            hit = cron.wildcard and match(running)
        else:  # the clock jumped a lot: start again from here
            virtual, hit = running, match(running)
        if hit and x > after:
            fires.append(x)
    return fires


@st.composite
def windows(draw: st.DrawFn, length: timedelta) -> tuple[str, datetime]:
    """A zone and a window start: usually one that holds an offset change."""
    if draw(st.integers(0, 4)):
        zone, at = draw(st.sampled_from(TRANSITIONS))
        offset = draw(st.integers(0, int(length.total_seconds()) * 1000))
        return zone, utc(at) - length + timedelta(milliseconds=offset)
    start = utc("2026-01-01") + timedelta(seconds=draw(st.integers(0, 2 * 365 * 86400)))
    return draw(st.sampled_from(ZONES)), start


@st.composite
def cron_near(draw: st.DrawFn) -> tuple[Cron, str, datetime, datetime]:
    """A cron, zone and window; the hour field is often the changed hour itself."""
    cron = draw(crons())
    length = timedelta(minutes=40) if cron.unit.total_seconds() == 1 else timedelta(hours=30)
    zone, after = draw(windows(length))
    return cron, zone, after, after + length


@pytest.mark.timeout(LIMIT_S)
@settings(PROFILE)
@given(case=cron_near(), share=st.floats(0, 1, exclude_max=True))
def test_fire_times_match_vixie_across_dst(case: tuple[Cron, str, datetime, datetime], share: float) -> None:
    cron, zone, after, until = case
    if not ever_fires(cron):
        return
    schedule = parse_schedule(cron.text, zone)
    expected = vixie_fires(cron, ZoneInfo(zone), after, until)
    assert schedule.fire_times(after, until) == expected, cron.text
    # From any instant before a fire, a fresh schedule (no memo, no cached stretch) agrees.
    if expected:
        between = min(after + (expected[0] - after) * share, expected[0] - timedelta(microseconds=1))  # rounding
        fresh = Schedule(schedule.expression, zone, schedule.has_seconds)
        assert fresh.next_after(between) == expected[0] == schedule.next_after(between), cron.text


def test_transition_table_is_real() -> None:
    for zone, at in TRANSITIONS:
        instant = utc(at)
        before = (instant - timedelta(seconds=1)).astimezone(ZoneInfo(zone)).utcoffset()
        assert instant.astimezone(ZoneInfo(zone)).utcoffset() != before
