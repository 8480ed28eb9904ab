"""`n/step` read as `n-max/step` (issue 40): the peers' own cases for it, ported, and the lint's word.

Ported cases, each with its source (the peers' expected values, not their code):
- cronsim: cuu508/cronsim tests/test_cronsim.py @ fd2e617, `test_it_parses_start_with_step`;
- robfig/cron (Kubernetes CronJob's parser): robfig/cron spec_test.go @ bc59245, `TestActivation`
  and `TestNext` (its 6-field form has seconds first, as Cronos's has);
- croniter: kiorky/croniter src/croniter/tests/test_croniter.py @ d813502, `testBug57`;
- Quartz: quartz-scheduler/quartz quartz/src/test/java/org/quartz/CronExpressionTest.java @ bb2505a
  (7-field forms without the optional year; Quartz's day-of-week numbers differ, so none is ported).
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from cronos.cron_fields import parse
from cronos.errors import InvalidSchedule
from cronos.schedule import parse_schedule
from cronos.schedule_lint import Code, lint

NOW = datetime(2026, 1, 10, tzinfo=UTC)
_S = timedelta(seconds=1)


def robfig_time(text: str) -> datetime:
    """robfig's `Mon Jul 9 15:00 2012` / `Mon Jul 9 14:59:59 2012` (its tests run in UTC)."""
    for pattern in ("%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M %Y"):
        try:
            return datetime.strptime(text, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise AssertionError(text)


def test_cronsim_start_with_step() -> None:
    assert parse("5/15 * * * *").minutes == {5, 20, 35, 50}


@pytest.mark.parametrize(
    ("at", "spec", "fires"),
    [  # robfig/cron TestActivation: "Every fifteen minutes", "starting at 5 minutes", "Named months"
        ("Mon Jul 9 15:00 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:45 2012", "0/15 * * * *", True),
        ("Mon Jul 9 15:40 2012", "0/15 * * * *", False),
        ("Mon Jul 9 15:05 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:20 2012", "5/15 * * * *", True),
        ("Mon Jul 9 15:50 2012", "5/15 * * * *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jul *", True),
        ("Sun Jul 15 15:00 2012", "0/15 * * Jun *", False),
    ],
)
def test_robfig_activation(at: str, spec: str, fires: bool) -> None:
    instant = robfig_time(at)
    assert (parse_schedule(spec).next_after(instant - _S) == instant) is fires


@pytest.mark.parametrize(
    ("at", "spec", "expected"),
    [  # robfig/cron TestNext: "Simple cases", "Wrap around hours", "Wrap around days"
        ("Mon Jul 9 14:45 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 14:59:59 2012", "0 0/15 * * * *", "Mon Jul 9 15:00 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * * * *", "Tue Jul 10 00:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 * * *", "Tue Jul 10 01:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 10-12 * * *", "Tue Jul 10 10:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 1/2 */2 * *", "Thu Jul 11 01:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 * *", "Wed Jul 10 00:20:15 2012"),
        ("Mon Jul 9 23:35:51 2012", "15/35 20-35/15 * 9-20 Jul *", "Wed Jul 10 00:20:15 2012"),
    ],
)
def test_robfig_next(at: str, spec: str, expected: str) -> None:
    assert parse_schedule(spec).next_after(robfig_time(at)) == robfig_time(expected)


def test_croniter_bug57() -> None:
    base = datetime(2012, 2, 24, tzinfo=UTC)
    four = parse_schedule("0 4/6 * * *")
    assert four.next_after(base) == datetime(2012, 2, 24, 4, tzinfo=UTC)
    # croniter's get_prev from there: the fire time before 04:00 is 22:00 the day before
    assert four.fire_times(base - timedelta(days=1), base + timedelta(hours=4))[-2] == datetime(
        2012, 2, 23, 22, tzinfo=UTC
    )
    zero = parse_schedule("0 0/6 * * *")
    assert zero.next_after(base) == datetime(2012, 2, 24, 6, tzinfo=UTC)
    assert zero.next_after(base - _S) == base  # croniter's get_prev from 06:00: 00:00


def test_quartz_seconds_steps() -> None:
    every = parse_schedule("0/15 * * * * ?")  # Quartz: the gap between fire times is 15 s
    fires = every.fire_times(NOW, NOW + timedelta(minutes=1))
    assert {(b - a) for a, b in itertools.pairwise(fires)} == {timedelta(seconds=15)}
    twice = parse_schedule("0/30 1 2 * * ?")  # Quartz: 30 s apart, then a day less 30 s
    a, b, c = twice.fire_times(NOW, NOW + timedelta(days=2), limit=3)
    assert (b - a, c - b) == (timedelta(seconds=30), timedelta(days=1) - timedelta(seconds=30))
    assert a == datetime(2026, 1, 10, 2, 1, tzinfo=UTC)


def test_quartz_refusals_cronos_shares_and_the_one_it_does_not() -> None:
    with pytest.raises(InvalidSchedule, match="day-of-month value 32 out of range"):
        parse("0/5 * * 32W 1 ?")  # Quartz: "The 'W' option does not make sense with values larger than"
    # Quartz refuses a step as large as its field ("Increment >= 60 : 120"); Cronos reads it as Vixie
    # reads `0-59/120` (second 0 only) and the lint says so.
    assert parse("0/120 0 8-18 ? * *").seconds == {0}
    assert Code.STEP_EXCEEDS_FIELD in [w.code for w in lint("0/120 0 8-18 ? * *", "UTC", NOW)]


@pytest.mark.parametrize(
    ("short", "long"),
    [
        ("5/10 * * * *", "5-59/10 * * * *"),
        ("0/15 * * * *", "0-59/15 * * * *"),
        ("0 3/8 * * *", "0 3-23/8 * * *"),
        ("0 0 10/7 * *", "0 0 10-31/7 * *"),
        ("0 0 1 FEB/3 *", "0 0 1 2-12/3 *"),
        ("0 0 * * 1/2", "0 0 * * 1-7/2"),  # 7 is Sunday: Monday, Wednesday, Friday, Sunday
        ("0 0 * * 7/3", "0 0 * * 0"),
        ("7/20 * * * * *", "7-59/20 * * * * *"),
        ("0/15,7 * * * *", "0-59/15,7 * * * *"),
    ],
)
def test_n_step_is_n_to_the_end(short: str, long: str) -> None:
    assert parse(short) == parse(long)


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("60/5 * * * *", "minute value 60 out of range 0-59"),
        ("5/0 * * * *", "minute step '0' must be a positive integer"),
        ("MON/2 * * * *", "minute field 'MON/2' is not valid"),
        ("0 0 * * 8/2", "day-of-week value 8 out of range 0-7"),
    ],
)
def test_n_step_still_refuses_what_is_out_of_range(expression: str, says: str) -> None:
    with pytest.raises(InvalidSchedule, match=says):
        parse(expression)


def test_the_lint_says_what_n_step_means() -> None:
    [warning] = lint("5/10 * * * *", "UTC", NOW)
    assert warning.code == Code.STEP_FROM
    assert "`5/10` in the minute field means `5-59/10`: minute 5, 15, 25, 35, …, 55" in warning.message
    assert warning.suggestion == "to say the same in every cron, write `5-59/10`"
    [sunday] = lint("0 0 * * 1/2", "UTC", NOW)
    assert "day-of-week 1, 3, 5, 7 (7 is Sunday again" in sunday.message
    codes = [w.code for w in lint("0/7 * * * *", "UTC", NOW)]
    assert codes == [Code.STEP_UNEVEN, Code.STEP_FROM]  # 56, then 0 four minutes later
    assert [w.code for w in lint("0-59/15 * * * *", "UTC", NOW)] == []
