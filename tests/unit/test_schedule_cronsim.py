"""A second, independent oracle: cronsim (Debian cron's rules, DST included) on plain syntax.

Only forms both read alike: cronsim 2.8 reads an equal range with a step (`3-3/4`) as
`3/4` (3, 7, 11), Vixie cron and Cronos as 3; and it has none of the extensions. Started in
the second pass of a repeated hour it can yield a time before its start: those are dropped.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronos.schedule import parse_schedule

cronsim = pytest.importorskip("cronsim", reason="cronsim comes with the test extra")

CHANGES = [  # (zone, UTC instant of a DST change)
    ("Europe/Berlin", datetime(2026, 3, 29, 1, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 10, 25, 1, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 3, 8, 7, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 11, 1, 6, tzinfo=UTC)),
]


@st.composite
def field(draw: st.DrawFn, low: int, high: int, near: tuple[int, ...] = ()) -> str:
    a = draw(st.integers(low, high))
    if draw(st.booleans()) and near:
        a = draw(st.sampled_from(near))  # the hours DST changes skip or repeat
    b = draw(st.integers(a, high))
    step = draw(st.integers(1, high - low + 2))
    return draw(st.sampled_from(["*", f"*/{step}", str(a), f"{a}-{b}", f"{a}-{b + 1}/{step}" if b < high else str(b)]))


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    minute=field(0, 59),
    hour=field(0, 23, near=(1, 2, 3)),
    change=st.sampled_from(CHANGES),
    seconds=st.integers(0, 6 * 3600),
)
def test_dst_windows_agree_with_cronsim(minute: str, hour: str, change: tuple[str, datetime], seconds: int) -> None:
    zone, at = change
    expression = f"{minute} {hour} * * *"
    start = at - timedelta(seconds=seconds)
    until = start + timedelta(hours=8)
    theirs = []
    for fire in cronsim.CronSim(expression, start.astimezone(ZoneInfo(zone))):
        if fire > until:
            break
        if fire > start:
            theirs.append(fire.astimezone(UTC))
    assert parse_schedule(expression, zone).fire_times(start, until) == theirs, expression
