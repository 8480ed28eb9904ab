"""Tests for cronos.schedule: syntax, validation, DST rules and properties.

The property tests check fire times against a brute-force reference written here
(a field-set matcher plus the module docstring's DST rules), never against croniter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronos.errors import InvalidSchedule
from cronos.schedule import Schedule, parse_schedule

PROPERTY = settings(max_examples=50, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def utc(text: str) -> datetime:
    """'2026-03-29 01:00' or '...:30' read as UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fires(expression: str, timezone: str, after: str, until: str) -> str:
    """Fire times in (after, until] as 'day/HH:MM' UTC, space-separated."""
    times = parse_schedule(expression, timezone).fire_times(utc(after), utc(until))
    assert all(t.second == 0 for t in times)
    return " ".join(t.strftime("%d/%H:%M") for t in times)


def nexts(expression: str, after: str, count: int = 3, timezone: str = "UTC") -> list[str]:
    schedule, current, out = parse_schedule(expression, timezone), utc(after), []
    for _ in range(count):
        current = schedule.next_after(current)
        out.append(current.strftime("%Y-%m-%d %H:%M:%S"))
    return out


# -- syntax ---------------------------------------------------------------------------

# 2026-01-02 is a Friday.
SYNTAX = [
    ("*/15 * * * *", "2026-01-02 00:07", ["2026-01-02 00:15:00", "2026-01-02 00:30:00", "2026-01-02 00:45:00"]),
    ("0 9 * * MON-FRI", "2026-01-02 10:00", ["2026-01-05 09:00:00", "2026-01-06 09:00:00", "2026-01-07 09:00:00"]),
    ("0 0 1 jan *", "2026-01-02 00:00", ["2027-01-01 00:00:00", "2028-01-01 00:00:00", "2029-01-01 00:00:00"]),
    ("0 0 13 * 5", "2026-02-01 00:00", ["2026-02-06 00:00:00", "2026-02-13 00:00:00", "2026-02-20 00:00:00"]),
    ("0 0 L 2 *", "2027-01-01 00:00", ["2027-02-28 00:00:00", "2028-02-29 00:00:00", "2029-02-28 00:00:00"]),
    ("0 0 * * 7", "2026-01-02 00:00", ["2026-01-04 00:00:00", "2026-01-11 00:00:00", "2026-01-18 00:00:00"]),
    ("  5 4 * * *  ", "2026-01-02 04:05", ["2026-01-03 04:05:00", "2026-01-04 04:05:00", "2026-01-05 04:05:00"]),
    ("5-5 * * * *", "2026-01-02 00:00", ["2026-01-02 00:05:00", "2026-01-02 01:05:00", "2026-01-02 02:05:00"]),
    ("0 0 * * FRI-MON", "2026-01-04 12:00", ["2026-01-05 00:00:00", "2026-01-09 00:00:00", "2026-01-10 00:00:00"]),
    # a day field covering its whole range is "*": no OR with the other day field
    ("0 0 1 * */1", "2026-01-02 00:00", ["2026-02-01 00:00:00", "2026-03-01 00:00:00", "2026-04-01 00:00:00"]),
    ("0 0 1-31 * MON", "2026-01-02 00:00", ["2026-01-05 00:00:00", "2026-01-12 00:00:00", "2026-01-19 00:00:00"]),
    # 6 fields, seconds first
    ("*/5 * * * * *", "2026-01-02 00:00", ["2026-01-02 00:00:05", "2026-01-02 00:00:10", "2026-01-02 00:00:15"]),
    ("30 * * * * *", "2026-01-02 00:00", ["2026-01-02 00:00:30", "2026-01-02 00:01:30", "2026-01-02 00:02:30"]),
    ("0 30 9 * * 1-5", "2026-01-02 12:00", ["2026-01-05 09:30:00", "2026-01-06 09:30:00", "2026-01-07 09:30:00"]),
    ("15,45 0 0 1 * *", "2026-01-01 00:00:20", ["2026-01-01 00:00:45", "2026-02-01 00:00:15", "2026-02-01 00:00:45"]),
    # macros
    ("@yearly", "2026-06-01 00:00", ["2027-01-01 00:00:00", "2028-01-01 00:00:00", "2029-01-01 00:00:00"]),
    ("@annually", "2026-06-01 00:00", ["2027-01-01 00:00:00", "2028-01-01 00:00:00", "2029-01-01 00:00:00"]),
    ("@monthly", "2026-01-02 00:00", ["2026-02-01 00:00:00", "2026-03-01 00:00:00", "2026-04-01 00:00:00"]),
    ("@weekly", "2026-01-02 00:00", ["2026-01-04 00:00:00", "2026-01-11 00:00:00", "2026-01-18 00:00:00"]),
    ("@daily", "2026-01-02 00:00", ["2026-01-03 00:00:00", "2026-01-04 00:00:00", "2026-01-05 00:00:00"]),
    ("@midnight", "2026-01-02 00:00", ["2026-01-03 00:00:00", "2026-01-04 00:00:00", "2026-01-05 00:00:00"]),
    ("@HOURLY", "2026-01-02 00:00", ["2026-01-02 01:00:00", "2026-01-02 02:00:00", "2026-01-02 03:00:00"]),
]


@pytest.mark.parametrize(("expression", "after", "expected"), SYNTAX)
def test_syntax(expression: str, after: str, expected: list[str]) -> None:
    assert nexts(expression, after) == expected


def test_strictly_after_and_sub_second_inputs() -> None:
    schedule = parse_schedule("0 30 9 * * *")
    at = utc("2026-01-02 09:30:00")
    assert schedule.next_after(at) == utc("2026-01-03 09:30:00")
    assert schedule.next_after(at - timedelta(microseconds=1)) == at
    assert schedule.next_after(at + timedelta(microseconds=1)) == utc("2026-01-03 09:30:00")
    assert parse_schedule("30 9 * * *").next_after(at - timedelta(microseconds=1)) == at


def test_result_is_utc_for_any_input_zone() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    got = parse_schedule("0 9 * * *", "Asia/Tokyo").next_after(datetime(2026, 1, 2, 8, 0, tzinfo=tokyo))
    assert got == utc("2026-01-02 00:00") and got.tzinfo is UTC


def test_fields_and_cache() -> None:
    five, six = parse_schedule(" */5 * * * * "), parse_schedule("*/5 * * * * *", "Europe/Berlin")
    assert (five.expression, five.timezone, five.has_seconds) == ("*/5 * * * *", "UTC", False)
    assert (six.timezone, six.has_seconds) == ("Europe/Berlin", True)
    assert parse_schedule("@daily").has_seconds is False
    assert parse_schedule("*/5 * * * * *", "Europe/Berlin") is six
    twin = Schedule("*/5 * * * * *", "Europe/Berlin", True)
    assert six == twin and hash(six) == hash(twin) and six != five


def test_fire_times_bounds_and_limit() -> None:
    schedule = parse_schedule("0 * * * *")
    assert [t.hour for t in schedule.fire_times(utc("2026-01-02 00:00"), utc("2026-01-02 03:00"))] == [1, 2, 3]
    assert len(schedule.fire_times(utc("2026-01-02 00:00"), utc("2026-01-03 00:00"), limit=2)) == 2
    assert schedule.fire_times(utc("2026-01-02 00:00"), utc("2026-01-02 00:00")) == []
    assert schedule.fire_times(utc("2026-01-02 00:00"), utc("2026-01-03 00:00"), limit=0) == []


def test_misuse_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_schedule("* * * * *").next_after(datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="has_seconds"):
        Schedule("*/5 * * * * *", "UTC", False)


# -- validation -----------------------------------------------------------------------

EXPR, TZ = "$.cron_expression", "$.timezone"
INVALID = [
    ("", "UTC", EXPR, "expression is empty"),
    ("   ", "UTC", EXPR, "expression is empty"),
    ("* * * *", "UTC", EXPR, "expected 5 or 6 fields, got 4"),
    ("0 0 0 1 1 * 2026", "UTC", EXPR, "expected 5 or 6 fields, got 7"),
    ("@reboot", "UTC", EXPR, "'@reboot' has no fire time"),
    ("@every 5m", "UTC", EXPR, "'@every 5m' is not a macro"),
    ("not a cron at all", "UTC", EXPR, "minute field 'not' is not valid"),
    ("61 * * * *", "UTC", EXPR, "minute value 61 out of range 0-59"),
    ("0 24 * * *", "UTC", EXPR, "hour value 24 out of range 0-23"),
    ("0 0 0 * *", "UTC", EXPR, "day-of-month value 0 out of range 1-31"),
    ("0 0 * 13 *", "UTC", EXPR, "month value 13 out of range 1-12"),
    ("0 0 * * 8", "UTC", EXPR, "day-of-week value 8 out of range 0-7"),
    ("60 * * * * *", "UTC", EXPR, "second value 60 out of range 0-59"),
    ("0 10-70 * * * *", "UTC", EXPR, "minute value 70 out of range 0-59"),
    ("*/0 * * * *", "UTC", EXPR, "minute step '0' must be a positive integer"),
    ("0 */x * * *", "UTC", EXPR, "hour step 'x' must be a positive integer"),
    ("H * * * *", "UTC", EXPR, "minute field 'H': H and R values are not supported"),
    ("0 0 * * R", "UTC", EXPR, "day-of-week field 'R': H and R values are not supported"),
    ("foo * * * *", "UTC", EXPR, "minute field 'foo' is not valid"),
    ("0 0 * * FUNDAY", "UTC", EXPR, "day-of-week field 'FUNDAY' is not valid"),
    ("0 0 * JANUARY *", "UTC", EXPR, "month field 'JANUARY' is not valid"),
    ("0 0 30 2 *", "UTC", EXPR, "never fires"),
    ("x" * 300, "UTC", EXPR, "longer than 256"),
    ("* * * * *", "Mars/Base", TZ, "unknown time zone 'Mars/Base'"),
    ("* * * * *", "", TZ, "unknown time zone ''"),
    ("* * * * *", "europe/berlin", TZ, "unknown time zone 'europe/berlin'"),
    ("* * * * *", "../etc/passwd", TZ, "unknown time zone"),
    ("* * * * *", "Europe", TZ, "unknown time zone 'Europe'"),
    ("* * * * *", "localtime", TZ, "unknown time zone 'localtime'"),
]


@pytest.mark.parametrize(("expression", "timezone", "field", "message"), INVALID)
def test_invalid(expression: str, timezone: str, field: str, message: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(expression, timezone)
    assert caught.value.field == field
    assert message in caught.value.message


def test_non_string_inputs_are_invalid() -> None:
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule(5)
    assert caught.value.field == EXPR
    with pytest.raises(InvalidSchedule) as caught:
        parse_schedule("* * * * *", 5)
    assert caught.value.field == TZ


# -- DST --------------------------------------------------------------------------------

# Berlin: 2026-03-29 02:00 CET -> 03:00 CEST at 01:00Z; 2026-10-25 03:00 CEST -> 02:00 CET at 01:00Z.
# New York: 2026-03-08 02:00 EST -> 03:00 EDT at 07:00Z; 2026-11-01 02:00 EDT -> 01:00 EST at 06:00Z.
DST = [
    # "day/HH:MM" UTC.
    # Wall-clock jobs: a skipped time fires once when the gap ends; a repeated time fires once, first.
    ("30 2 * * *", "Europe/Berlin", "2026-03-28", "2026-03-31", "28/01:30 29/01:00 30/00:30"),
    ("30 2 * * *", "Europe/Berlin", "2026-10-24", "2026-10-27", "24/00:30 25/00:30 26/01:30"),
    ("0,30 2 * * *", "Europe/Berlin", "2026-03-29", "2026-03-29 12:00", "29/01:00"),
    ("*/20 2 * * *", "Europe/Berlin", "2026-10-24 23:00", "2026-10-25 12:00", "25/00:00 25/00:20 25/00:40"),
    ("30 2 * * *", "America/New_York", "2026-03-07", "2026-03-10", "07/07:30 08/07:00 09/06:30"),
    ("30 2 * * *", "America/New_York", "2026-10-31", "2026-11-03", "31/06:30 01/07:30 02/07:30"),
    ("30 1 * * *", "America/New_York", "2026-10-31", "2026-11-03", "31/05:30 01/05:30 02/06:30"),
    ("0 0 * * *", "America/Santiago", "2026-09-05", "2026-09-08", "05/04:00 06/04:00 07/03:00"),
    ("0 2 * * *", "Australia/Lord_Howe", "2026-10-02", "2026-10-05", "02/15:30 03/15:30 04/15:00"),
    # Every-hour jobs: real cadence; both passes of a repeated hour fire, gap times do not exist.
    ("0 * * * *", "Europe/Berlin", "2026-03-28 23:00", "2026-03-29 03:00", "29/00:00 29/01:00 29/02:00 29/03:00"),
    ("30 * * * *", "Europe/Berlin", "2026-03-29 00:00", "2026-03-29 03:00", "29/00:30 29/01:30 29/02:30"),
    ("*/30 * * * *", "Europe/Berlin", "2026-03-29 00:00", "2026-03-29 02:00", "29/00:30 29/01:00 29/01:30 29/02:00"),
    ("0 * * * *", "Europe/Berlin", "2026-10-24 23:30", "2026-10-25 03:00", "25/00:00 25/01:00 25/02:00 25/03:00"),
    ("*/30 * * * *", "Europe/Berlin", "2026-10-24 23:45", "2026-10-25 01:30", "25/00:00 25/00:30 25/01:00 25/01:30"),
    ("0 * * * *", "America/New_York", "2026-03-08 05:30", "2026-03-08 09:00", "08/06:00 08/07:00 08/08:00 08/09:00"),
    ("*/30 * * * *", "America/New_York", "2026-03-08 06:15", "2026-03-08 08:00", "08/06:30 08/07:00 08/07:30 08/08:00"),
    ("0 * * * *", "America/New_York", "2026-11-01 04:30", "2026-11-01 08:00", "01/05:00 01/06:00 01/07:00 01/08:00"),
    ("*/30 * * * *", "America/New_York", "2026-11-01 05:15", "2026-11-01 07:00", "01/05:30 01/06:00 01/06:30 01/07:00"),
    ("0 * * * * *", "Europe/Berlin", "2026-03-29 00:58", "2026-03-29 01:01", "29/00:59 29/01:00 29/01:01"),
]


@pytest.mark.parametrize(("expression", "timezone", "after", "until", "expected"), DST)
def test_dst(expression: str, timezone: str, after: str, until: str, expected: str) -> None:
    assert fires(expression, timezone, after, until) == expected


def test_dst_next_after_from_inside_the_repeated_hour() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    second_pass = datetime(2026, 10, 25, 2, 15, fold=1, tzinfo=berlin)  # 01:15Z
    first_pass = datetime(2026, 10, 25, 2, 45, fold=0, tzinfo=berlin)  # 00:45Z
    assert parse_schedule("30 2 * * *", "Europe/Berlin").next_after(second_pass) == utc("2026-10-26 01:30")
    assert parse_schedule("30 2 * * *", "Europe/Berlin").next_after(first_pass) == utc("2026-10-26 01:30")
    assert parse_schedule("0 * * * *", "Europe/Berlin").next_after(first_pass) == utc("2026-10-25 01:00")
    assert parse_schedule("30 * * * *", "Europe/Berlin").next_after(second_pass) == utc("2026-10-25 01:30")


# -- properties ---------------------------------------------------------------------------

ALL = {"second": range(60), "minute": range(60), "hour": range(24), "dom": range(1, 32), "month": range(1, 13)}
ALL["dow"] = range(8)
NAMES = {
    "month": ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
    "dow": ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"),
}
FULL = {name: {v % 7 if name == "dow" else v for v in values} for name, values in ALL.items()}
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata"]
TRANSITIONS = [  # (zone, UTC instant of an offset change)
    ("Europe/Berlin", "2026-03-29 01:00"),
    ("Europe/Berlin", "2026-10-25 01:00"),
    ("America/New_York", "2026-03-08 07:00"),
    ("America/New_York", "2026-11-01 06:00"),
    ("Australia/Lord_Howe", "2026-04-04 15:00"),
    ("Australia/Lord_Howe", "2026-10-03 15:30"),
    ("America/Santiago", "2026-04-05 03:00"),
    ("America/Santiago", "2026-09-06 04:00"),
]


@dataclass(frozen=True)
class Expr:
    text: str
    sets: dict[str, frozenset[int]]  # per field, the values it matches (dow: 0 = Sunday)
    has_seconds: bool

    def matches(self, wall: datetime) -> bool:
        s = self.sets
        if wall.second not in s["second"] or wall.minute not in s["minute"] or wall.hour not in s["hour"]:
            return False
        if wall.month not in s["month"]:
            return False
        in_dom, in_dow = wall.day in s["dom"], wall.isoweekday() % 7 in s["dow"]
        dom_limited, dow_limited = s["dom"] != FULL["dom"], s["dow"] != FULL["dow"]
        if dom_limited and dow_limited:  # classic cron: either day field may match
            return in_dom or in_dow
        return (in_dom or not dom_limited) and (in_dow or not dow_limited)

    @property
    def every_hour(self) -> bool:
        return self.sets["hour"] == FULL["hour"]


@st.composite
def field_token(draw: st.DrawFn, name: str) -> tuple[str, set[int]]:
    values = ALL[name]
    low, high = values[0], values[-1]

    def show(v: int) -> str:
        use_name = name in NAMES and v - low < len(NAMES[name]) and draw(st.booleans())
        return NAMES[name][v - low] if use_name else str(v)

    kind = draw(st.sampled_from(["star", "step", "one", "range", "range_step", "list"]))
    if kind == "star":
        return "*", set(values)
    if kind == "step":
        step = draw(st.integers(1, high - low))
        return f"*/{step}", set(range(low, high + 1, step))
    if kind == "one":
        v = draw(st.integers(low, high))
        return show(v), {v}
    if kind == "list":
        picked = draw(st.lists(st.integers(low, high), min_size=2, max_size=4, unique=True))
        return ",".join(str(v) for v in picked), set(picked)
    a = draw(st.integers(low, high))
    b = draw(st.integers(a, high))
    if kind == "range":
        return f"{show(a)}-{show(b)}", set(range(a, b + 1))
    step = draw(st.integers(1, max(1, b - a)))
    return f"{a}-{b}/{step}", set(range(a, b + 1, step))


@st.composite
def expressions(draw: st.DrawFn, has_seconds: bool) -> Expr:
    names = (["second"] if has_seconds else []) + ["minute", "hour", "dom", "month", "dow"]
    tokens, sets = [], {"second": frozenset({0})}
    for name in names:
        token, values = draw(field_token(name))
        tokens.append(token)
        sets[name] = frozenset(v % 7 if name == "dow" else v for v in values)
    return Expr(" ".join(tokens), sets, has_seconds)


@st.composite
def windows(draw: st.DrawFn, length: timedelta) -> tuple[str, datetime]:
    """A zone and a window start: usually close to one of its offset changes."""
    if draw(st.integers(0, 3)):
        zone, at = draw(st.sampled_from(TRANSITIONS))
        start = utc(at) - length + draw(st.integers(0, int(length.total_seconds()))) * timedelta(seconds=1)
        return zone, start
    start = utc("2025-01-01") + draw(st.integers(0, 3 * 365 * 86400)) * timedelta(seconds=1)
    return draw(st.sampled_from(ZONES)), start


def reference_fires(expr: Expr, zone: ZoneInfo, after: datetime, until: datetime) -> list[datetime]:
    """Brute force over every minute (or second) of (after, until], applying the documented rules."""
    tick = timedelta(seconds=1) if expr.has_seconds else timedelta(minutes=1)
    x = after.replace(second=0, microsecond=0) if not expr.has_seconds else after.replace(microsecond=0)
    out = []
    while (x := x + tick) <= until:
        local = x.astimezone(zone)
        wall = local.replace(tzinfo=None, fold=0)
        if expr.matches(wall) and (expr.every_hour or local.fold == 0):
            out.append(x)
            continue
        jump = local.utcoffset() - (x - timedelta(seconds=1)).astimezone(zone).utcoffset()  # type: ignore[operator]
        if not expr.every_hour and jump > timedelta(0):  # x ends a gap: did the gap skip a fire?
            skipped = (wall - jump + k * tick for k in range(int(jump / tick)))
            if any(expr.matches(w) for w in skipped):
                out.append(x)
    return out


@PROPERTY
@given(expr=expressions(False), window=windows(timedelta(hours=12)))
def test_five_fields_match_brute_force(expr: Expr, window: tuple[str, datetime]) -> None:
    zone, after = window
    until = after + timedelta(hours=12)
    try:
        schedule = parse_schedule(expr.text, zone)
    except InvalidSchedule as exc:  # e.g. "0 0 31 2 *"
        assert "never fires" in exc.message
        return
    assert schedule.fire_times(after, until) == reference_fires(expr, ZoneInfo(zone), after, until)


@PROPERTY
@given(expr=expressions(True), window=windows(timedelta(minutes=20)))
def test_six_fields_match_brute_force(expr: Expr, window: tuple[str, datetime]) -> None:
    zone, after = window
    until = after + timedelta(minutes=20)
    try:
        schedule = parse_schedule(expr.text, zone)
    except InvalidSchedule as exc:
        assert "never fires" in exc.message
        return
    assert schedule.has_seconds
    assert schedule.fire_times(after, until) == reference_fires(expr, ZoneInfo(zone), after, until)


@PROPERTY
@given(expr=expressions(False), window=windows(timedelta(days=2)), seconds=st.booleans(), data=st.data())
def test_fire_times_increase_match_and_agree_with_next_after(
    expr: Expr, window: tuple[str, datetime], seconds: bool, data: st.DataObject
) -> None:
    zone_name, after = window
    text = ("0 " if seconds else "") + expr.text  # same schedule, 6-field spelling
    try:
        schedule = parse_schedule(text, zone_name)
    except InvalidSchedule:
        return
    zone = ZoneInfo(zone_name)
    times = schedule.fire_times(after, after + timedelta(days=3650), limit=8)
    assert times and all(a < b for a, b in pairwise(times))
    assert all(t.tzinfo is UTC for t in times)
    for t in times:
        wall = t.astimezone(zone).replace(tzinfo=None, fold=0)
        jump = t.astimezone(zone).utcoffset() - (t - timedelta(seconds=1)).astimezone(zone).utcoffset()  # type: ignore[operator]
        ends_gap = jump > timedelta(0) and not expr.every_hour
        assert expr.matches(wall) or ends_gap
    # Iterating next_after from fresh objects, and from any instant between two fires, agrees.
    current, fresh = after, Schedule(schedule.expression, schedule.timezone, schedule.has_seconds)
    for t in times:
        assert fresh.next_after(current) == t
        gap = int((t - current).total_seconds() * 1_000_000)
        between = current + timedelta(microseconds=data.draw(st.integers(0, gap - 1)))
        assert schedule.next_after(between) == t
        current = t


def test_transition_table_is_real() -> None:
    for zone, at in TRANSITIONS:
        instant = utc(at)
        before = (instant - timedelta(seconds=1)).astimezone(ZoneInfo(zone)).utcoffset()
        assert instant.astimezone(ZoneInfo(zone)).utcoffset() != before
