"""The description beside the preview agrees with the fire times the scheduler computes.

For random expressions built from steps, single values and `*` in the second, minute and hour
fields, each claim the words make ("every 7 minutes", "at minute 0 of every hour", "at 00:00,
05:00 … every day") is checked against the next fire times of cronos.schedule.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from api.describe import describe
from cronos.schedule import parse_schedule

START = datetime(2026, 5, 4, 22, 13, 7, tzinfo=UTC)
_EVERY = re.compile(r"every (\d+) (second|minute|hour)s")
_UNIT_S = {"second": 1, "minute": 60, "hour": 3600}
_CLOCKS = re.compile(r"(\d\d):(\d\d)")


def _field(high: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just("*"),
        st.integers(1, 130).map(lambda n: f"*/{n}"),
        st.integers(0, high).map(str),
    )


def _fires(expression: str, count: int) -> list[datetime]:
    schedule = parse_schedule(expression)
    out, current = [], START
    for _ in range(count):
        current = schedule.next_after(current)
        out.append(current)
    return out


def _gaps(fires: list[datetime]) -> set[float]:
    return {(b - a).total_seconds() for a, b in itertools.pairwise(fires)}


def check(expression: str) -> None:
    words = describe(expression)
    fires = _fires(expression, 60)
    if (every := _EVERY.fullmatch(words)) is not None:
        assert _gaps(fires) == {int(every[1]) * _UNIT_S[every[2]]}, (expression, words)
    elif words in ("every second", "every minute", "every hour"):
        assert _gaps(fires) == {_UNIT_S[words.split()[1]]}, (expression, words)
    elif words == "at minute 0 of every hour":
        assert _gaps(fires) == {3600} and {f.minute for f in fires} == {0}, (expression, words)
    elif (at := re.fullmatch(r"every hour at minute (\d+)", words)) is not None:
        assert _gaps(fires) == {3600} and {f.minute for f in fires} == {int(at[1])}, (expression, words)
    elif (step := re.fullmatch(r"every (\d+) hours(?: at minute (\d+))?", words)) is not None:
        assert _gaps(fires) == {int(step[1]) * 3600} and {f.minute for f in fires} == {int(step[2] or 0)}
    elif words.startswith("at ") and words.endswith(" every day") and _CLOCKS.search(words):
        named = {(int(h), int(m)) for h, m in _CLOCKS.findall(words)}
        assert {(f.hour, f.minute) for f in fires} == named, (expression, words)
    # Whatever the words, no false cadence: a step is only claimed when the gaps are all equal.
    if "every" in words and re.search(r"every \d+", words):
        assert len(_gaps(fires)) == 1 or " from " in words, (expression, words)


@settings(max_examples=300, deadline=None)
@given(minute=_field(59), hour=_field(23))
def test_five_field_descriptions_match_fire_times(minute: str, hour: str) -> None:
    check(f"{minute} {hour} * * *")


@settings(max_examples=200, deadline=None)
@given(second=_field(59), minute=_field(59))
def test_six_field_descriptions_match_fire_times(second: str, minute: str) -> None:
    check(f"{second} {minute} * * * *")


def test_a_step_past_its_field_says_what_it_does() -> None:
    assert describe("*/90 * * * *") == "at minute 0 of every hour"
    assert describe("0 */30 * * *") == "at 00:00 every day"
    assert describe("*/90 * * * * *") == "every minute"
    assert describe("0 */5 * * *") == "at 00:00, 05:00, 10:00, 15:00 and 20:00 every day"
    assert "every 7" not in describe("*/7 * * * *")
