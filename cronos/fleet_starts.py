"""Planned starts per minute across the fleet's active jobs over a window (pure).

The API reads the active jobs grouped by (expression, zone, jitter, spread) (cronos.store.fleet)
and hands the groups here (a group with an `H` or a spread is split by the values and offsets its
jobs' names pick, cronos.hashed and cronos.spread): each distinct schedule's fire times are walked
once, whatever the number of jobs sharing it, as the leader's schedule book does. A job with
jitter starts at its tick plus its jitter (cronos.lifecycle.jitter_s, the same deterministic delay
the leader adds), so those are counted job by job. The walk is bounded: past `budget` steps it
stops and says the counts are partial.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronos.cron_fields import parse
from cronos.errors import InvalidInput, InvalidSchedule
from cronos.hashed import hashed
from cronos.lifecycle import jitter_s
from cronos.schedule import NEVER_AT
from cronos.schedule_legacy import stored_schedule
from cronos.spread import offset_s

MINUTE = timedelta(minutes=1)
DEFAULT_BUDGET = 400_000  # fire times walked at most (~1 s of CPU on the compute thread)


@dataclass(frozen=True, slots=True)
class Group:
    """Active jobs sharing an expression, a zone, a jitter and a spread; `ids` when jitter_s > 0, the
    expression has an `H` or the jobs a spread; then also `names` (in the order of `ids`), which pick
    its values and offsets. `offset_s`: once resolved, the spread's offset of each of its ticks."""

    expression: str
    timezone: str
    jitter_s: float
    jobs: int
    ids: tuple[int, ...] = ()
    names: tuple[str, ...] = ()
    spread: str | None = None  # cronos.spread
    offset_s: int = 0


@dataclass(frozen=True, slots=True)
class Starts:
    start: datetime  # the first minute (UTC, whole minute)
    counts: list[int]  # planned starts in each minute from `start`
    jobs: int  # active cron jobs counted
    schedules: int  # distinct (expression, zone) walked
    partial: bool  # the budget ran out: later groups are missing
    spread_jobs: int = 0  # jobs whose `H` or spread spreads them (cronos.hashed, cronos.spread)
    unspread_peak: int = 0  # with spread jobs: the busiest minute's starts had each `H` been its range's start
    # and each spread's offset 0


def spread(groups: Sequence[Group], key: bool = True) -> list[Group]:
    """The groups with each `H` and spread resolved: one group per expression and offset its jobs'
    names pick (`key` False: each `H` at the start of its range and no offset, as if nothing spread
    them)."""
    out: list[Group] = []
    for group in groups:
        if not group.names:
            out.append(group)
            continue
        by: dict[tuple[str, int], list[int]] = {}
        for job_id, name in zip(group.ids, group.names, strict=True):
            try:
                shift = offset_s(name, group.spread) if key else 0
                by.setdefault((hashed(group.expression, name if key else None), shift), []).append(job_id)
            except (InvalidSchedule, InvalidInput):
                continue  # never valid: the leader does not run it either
        for (expression, shift), ids in by.items():
            kept = tuple(ids) if group.jitter_s > 0 else ()
            out.append(Group(expression, group.timezone, group.jitter_s, len(ids), kept, offset_s=shift))
    return out


def _seconds_in(expression: str) -> list[int] | None:
    """For a 6-field expression, the seconds it fires at in a matching minute (sorted)."""
    try:
        fields = parse(expression)
    except InvalidSchedule:
        return None
    return sorted(fields.seconds) if fields.has_seconds else None


def starts_per_minute(groups: Sequence[Group], start: datetime, minutes: int, budget: int = DEFAULT_BUDGET) -> Starts:
    """Planned starts in each of `minutes` minutes from `start` (floored to its minute); with jobs an
    `H` spreads, also the busiest minute they would have made without it."""
    found = _starts(spread(groups), start, minutes, budget)
    spread_jobs = sum(g.jobs for g in groups if g.names)
    if not spread_jobs:
        return found
    herd = _starts(spread(groups, key=False), start, minutes, budget)
    return Starts(
        found.start, found.counts, found.jobs, found.schedules, found.partial or herd.partial,
        spread_jobs=spread_jobs, unspread_peak=max(herd.counts, default=0),
    )  # fmt: skip


def _starts(groups: Sequence[Group], start: datetime, minutes: int, budget: int) -> Starts:
    start = start.replace(second=0, microsecond=0)
    end = start + minutes * MINUTE
    counts = [0] * minutes
    steps, partial, walked = 0, False, set()
    for group in groups:
        if steps >= budget:
            partial = True
            break
        try:
            schedule, _notice = stored_schedule(group.expression, group.timezone)
        except InvalidSchedule:
            continue  # never valid: the leader does not run it either
        walked.add((group.expression, group.timezone))
        seconds = _seconds_in(group.expression) if group.jitter_s <= 0 and not group.offset_s else None
        shift = timedelta(seconds=group.offset_s)  # a spread's offset: its ticks are this much later
        current = start - shift - timedelta(microseconds=1)
        while steps < budget:
            steps += 1
            try:
                current = schedule.next_after(current)
            except OverflowError:
                break
            if current >= NEVER_AT or current + shift >= end:
                break
            if group.jitter_s <= 0:
                index = int((current + shift - start) / MINUTE)
                if seconds is not None:  # every second it fires in this minute, in one step
                    here = sum(1 for s in seconds if s >= current.second)
                    counts[index] += here * group.jobs
                    current = current.replace(second=59)
                else:
                    counts[index] += group.jobs
                continue
            ms = int(current.timestamp() * 1000)
            for job_id in group.ids:
                steps += 1
                at = current + shift + timedelta(seconds=jitter_s(job_id, ms + group.offset_s * 1000, group.jitter_s))
                if at < end:
                    counts[int((at - start) / MINUTE)] += 1
        else:
            partial = True
    return Starts(start, counts, sum(g.jobs for g in groups), len(walked), partial)


def peaks(starts: Starts, top: int = 5) -> list[tuple[datetime, int]]:
    """The `top` busiest minutes, busiest first (earlier first among equals), none empty."""
    ranked = sorted(range(len(starts.counts)), key=lambda i: (-starts.counts[i], i))[:top]
    return [(starts.start + i * MINUTE, starts.counts[i]) for i in ranked if starts.counts[i] > 0]
