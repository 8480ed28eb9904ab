"""Backfill (issue 25, item 3): which past ticks of a job to queue again, and when each is due. Pure.

The ticks are those the job's schedule had in [from, to) AS IT WAS: planned from its revisions
(cronos.ticks.segments/plan, the ticks API's machinery), ticks before the job existed left out
(cronos.inputs.planned_refusal, the rule a re-run by trigger obeys); ticks while it was paused are
in (that is what a backfill is for). Each is matched with the facts the ledger holds about it and
chosen by mode:

- `missing`: no run of the tick ever started (no run, or only skipped ones: misfired, overlap,
  paused or deleted before it was due);
- `failed`: the tick's last attempt failed;
- `all`: every tick.

A tick with a run that has not ended (queued, waiting, running) is never queued again: its
retries need the next attempts (cronos.inputs.rerun_attempt, as a re-run by trigger). A queued
tick takes its next free attempt and keeps its logical date, hence its idempotency key.

Pacing is the catch-up's: runs are written queued with due times `1/pace` seconds apart from
`now`, and the leader's outbox releases each when due, as it does for a paced catch-up's late
ticks (dispatcher.planner.CatchUpPace). The job's overlap policy then applies at the claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Literal

import msgspec

from cronos.errors import Conflict, InvalidInput
from cronos.inputs import planned_refusal, rerun_attempt
from cronos.models import RunState
from cronos.ticks import Segment, plan

Mode = Literal["missing", "failed", "all"]
MODES: tuple[str, ...] = ("missing", "failed", "all")
MAX_TICKS = 10_000
MAX_PACE_PER_S = 1000.0
MIN_PACE_PER_S = 0.001  # one run in about 17 minutes: slower paces are this (their due times would overflow)
_US = timedelta(microseconds=1)

TickState = Literal["none", "queued", "waiting", "running", "completed", "failed", "skipped", "cancelled"]


class TickFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What the ledger holds about one tick: its highest attempt and that attempt's state, whether
    any run of it ever started, and its runs that have not ended."""

    scheduled_for: datetime
    last_attempt: int
    last_state: RunState
    started: bool
    unfinished: tuple[int, ...] = ()


_STATE = msgspec.Meta(description="the tick now: `none` (no run), else the state of its last attempt")
_ACTION = msgspec.Meta(
    description="`queue`: queued (or, in a dry run, would be); `busy`: left out, a run of it has not ended"
)


class BackfillTick(msgspec.Struct, kw_only=True):
    scheduled_for: datetime
    state: Annotated[TickState, _STATE]
    action: Annotated[Literal["queue", "busy"], _ACTION]
    attempt: Annotated[int, msgspec.Meta(description="the attempt it takes (the tick's next free one)")]
    due_at: Annotated[datetime | None, msgspec.Meta(description="when it is released (paced); null when busy")]
    run_id: Annotated[int | None, msgspec.Meta(description="the run queued; null in a dry run")] = None


def ticks(segs: Sequence[Segment], start: datetime, end: datetime, now: datetime) -> list[datetime]:
    """The job's own ticks t with start <= t < end (and t <= now), as its schedule was then;
    InvalidInput on `to` past MAX_TICKS."""
    until = min(end - _US, now)
    if until < start:
        return []
    own = [seg for seg in segs if seg.status != "absent"]  # ticks before the job existed count for nothing
    found = plan(own, start - _US, until, MAX_TICKS + 1)
    if len(found) > MAX_TICKS:
        raise InvalidInput("$.to", f"the range holds more than {MAX_TICKS} ticks of this job: narrow it")
    return [t for t, seg in found if planned_refusal(seg) is None]


def check_range(start: datetime, end: datetime, now: datetime) -> None:
    """[from, to): from before to, and not in the future (a backfill queues past ticks only)."""
    if start >= end:
        raise InvalidInput("$.to", "must be after `from`")
    if start > now:
        raise InvalidInput("$.from", "must be in the past: a backfill queues past ticks only")


def state_of(facts: TickFacts | None) -> TickState:
    return "none" if facts is None else facts.last_state


def chosen(mode: Mode, facts: TickFacts | None) -> bool:
    """Whether the mode picks a tick with these facts (None: the ledger holds no run of it)."""
    if mode == "all" or facts is None:
        return mode != "failed"
    if mode == "missing":
        return not facts.started
    return facts.last_state == "failed"


def select(
    job_id: int,
    mode: Mode,
    planned: Iterable[datetime],
    facts: Mapping[datetime, TickFacts],
    now: datetime,
    pace: float,
) -> list[BackfillTick]:
    """The ticks the mode picks, oldest first, each with its attempt and its paced due time."""
    step = timedelta(seconds=1 / max(pace, MIN_PACE_PER_S))
    out: list[BackfillTick] = []
    queued = 0
    for tick in planned:
        fact = facts.get(tick)
        if not chosen(mode, fact):
            continue
        last = None if fact is None else fact.last_attempt
        unfinished: Sequence[int] = () if fact is None else fact.unfinished
        try:
            attempt = rerun_attempt(job_id, tick, last, unfinished, None)
        except Conflict:
            out.append(BackfillTick(scheduled_for=tick, state=state_of(fact), action="busy",
                                    attempt=(last or 0) + 1, due_at=None))  # fmt: skip
            continue
        due = now + step * queued
        queued += 1
        out.append(BackfillTick(scheduled_for=tick, state=state_of(fact), action="queue", attempt=attempt, due_at=due))
    return out
