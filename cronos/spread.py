"""Deterministic spread as a window (issue 40 item 2): `spread: 10m` on a job moves every tick of its
schedule (cron, interval, the union of its `schedules`) by one offset in [0, 10m), whole seconds,
that the job's **name** picks (cronos.hashed.stable, as an `H` is picked). Pure: no clock, no I/O.

The offset is the same on every host, after every restart and in every environment a jobs file is
applied to, and no other job moves it. The shifted schedule is one NextAfter (`Shifted`) wrapped by
cronos.schedule_window.job_schedule, so the planner, the schedule book, the auditor, tick
accounting and the preview read it as any schedule: a run's `scheduled_for` is tick + offset.

A spread at least the schedule's shortest gap between two fire times is refused: ticks would pass
each other. `jitter_s` stays what it is, a random delay of each run's start.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from cronos.dst import fire_times
from cronos.errors import InvalidInput
from cronos.hashed import stable
from cronos.interval import canonical, every_seconds, spell
from cronos.schedule import NEVER_AT

FIELD = "$.spread"
LABEL = "spread"  # what the name is hashed with (an `H` uses its field's name)
GAP_SAMPLES = 400  # fire times a spread is checked against (a year of a daily job)


class NextAfter(Protocol):
    def next_after(self, after: datetime) -> datetime: ...


def offset_s(key: str, spread: str | None) -> int:
    """The job's offset in whole seconds in [0, spread) (0 without a spread)."""
    if not spread:
        return 0
    return stable(key, LABEL, every_seconds(spread, FIELD))


@dataclass(frozen=True, slots=True)
class Shifted:
    """`base`'s fire times, each `offset` later."""

    base: NextAfter
    offset: timedelta

    def next_after(self, after: datetime) -> datetime:
        found = self.base.next_after(after - self.offset)
        return found if found >= NEVER_AT - self.offset else found + self.offset

    def fire_times(self, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
        """Fire instants ``t`` with ``after < t <= until``, ascending, at most ``limit``."""
        return fire_times(self.next_after, after, until, limit)


def shifted(base: NextAfter, key: str, spread: str | None) -> NextAfter:
    """`base` moved by the offset `key` picks within `spread` (itself without one: the common case)."""
    seconds = offset_s(key, spread)
    return base if seconds == 0 else Shifted(base, timedelta(seconds=seconds))


def shortest_gap(base: NextAfter, after: datetime, samples: int = GAP_SAMPLES) -> timedelta | None:
    """The shortest time between two of `base`'s next `samples` fire times after `after` (None:
    fewer than two)."""
    gap: timedelta | None = None
    try:
        previous = base.next_after(after)
        for _ in range(samples):
            if previous >= NEVER_AT:
                break
            current = base.next_after(previous)
            if current >= NEVER_AT:
                break
            gap = current - previous if gap is None else min(gap, current - previous)
            previous = current
    except OverflowError:  # the calendar ends: what was seen is what there is
        pass
    return gap


def check(spread: str | None, base: NextAfter | None, after: datetime) -> str | None:
    """`spread` as it is stored (spelled canonically), or InvalidInput naming $.spread: a one-off
    (`base` None) has none, and a spread at least the schedule's shortest gap is refused."""
    if spread is None:
        return None
    text = canonical(spread, FIELD)
    if base is None:
        raise InvalidInput(FIELD, "a one-off (run_at) has no spread: it runs at its run_at")
    gap = shortest_gap(base, after)
    if gap is not None and timedelta(seconds=every_seconds(text, FIELD)) >= gap:
        shortest = spell(int(gap.total_seconds()))
        raise InvalidInput(
            FIELD,
            f"{text} is not shorter than the schedule's shortest gap between two ticks ({shortest}): "
            "spread runs would pass each other",
        )
    return text


def described(key: str, spread: str | None) -> str | None:
    """The offset in words (None without a spread)."""
    if not spread:
        return None
    seconds = offset_s(key, spread)
    return (
        f"spread {spread}: each tick {spell(seconds)} later for the job named {key!r} "
        "(from its name: stable across restarts and other jobs)"
    )
