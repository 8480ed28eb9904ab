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

Bounded (issue 36): one backfill queues at most `Limits.max_runs` runs at most `max_per_s` a
second, and is *active* until its last run is released (`until`); a job has at most
`max_active_per_job` active backfills, a caller (token) `max_active_per_caller` over all jobs, so
what one token releases is at most their product a second.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Literal

import msgspec

from cronos.errors import Conflict, InvalidInput, TooManyRequests
from cronos.inputs import planned_refusal, rerun_attempt
from cronos.models import RunState
from cronos.ticks import Segment, plan

Mode = Literal["missing", "failed", "all"]
MODES: tuple[str, ...] = ("missing", "failed", "all")
MAX_TICKS = 10_000
MAX_PACE_PER_S = 1000.0
MIN_PACE_PER_S = 0.001  # one run in about 17 minutes: slower paces are this (their due times would overflow)
_US = timedelta(microseconds=1)

# "none", then RunState's values (tests/unit/test_backfill.py): a str-like union msgspec can decode.
TickState = Literal["none", "queued", "waiting", "reserved", "running", "completed", "failed", "skipped", "cancelled"]


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


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """CRONOS_BACKFILL_MAX_RUNS, _MAX_PER_S, _MAX_ACTIVE_PER_JOB and _MAX_ACTIVE_PER_TOKEN."""

    max_runs: int
    max_per_s: float
    max_active_per_job: int
    max_active_per_caller: int


def pace_of(asked: float | None, job_pace: float | None, default: float, limits: Limits) -> float:
    """Runs released a second: the one asked for (refused past max_per_s), else the job's
    catch-up pace or the cluster's, held to max_per_s."""
    if asked is not None and asked > limits.max_per_s:
        raise InvalidInput("$.pace", f"at most {limits.max_per_s:g} runs a second (CRONOS_BACKFILL_MAX_PER_S)")
    return max(min(asked or job_pace or default, limits.max_per_s), MIN_PACE_PER_S)


def check_crowding(of_job: int, of_caller: int, limits: Limits) -> None:
    """Refuse a backfill while the job, or the caller, has as many active (releasing) as allowed."""
    if of_job >= limits.max_active_per_job:
        raise Conflict(f"{of_job} backfill(s) of this job still releasing runs, at most "
                       f"{limits.max_active_per_job} (CRONOS_BACKFILL_MAX_ACTIVE_PER_JOB): wait for it")  # fmt: skip
    if of_caller >= limits.max_active_per_caller:
        raise TooManyRequests(f"{of_caller} of your backfills still releasing runs, at most "
                              f"{limits.max_active_per_caller} (CRONOS_BACKFILL_MAX_ACTIVE_PER_TOKEN)")  # fmt: skip


def check_runs(chosen: Sequence[BackfillTick], limits: Limits) -> None:
    """Refuse a backfill that would queue more than max_runs runs."""
    queued = sum(t.action == "queue" for t in chosen)
    if queued > limits.max_runs:
        raise InvalidInput("$.to", f"the range would queue {queued} runs, at most {limits.max_runs} "
                           "(CRONOS_BACKFILL_MAX_RUNS): narrow it")  # fmt: skip


# The policies under which a backfilled run claimed while another of its job runs waits for it
# (cronos.lifecycle.overlap: forbid waits for a predecessor that started late, as a past tick's run
# always did; buffer_all always). buffer_one would skip all but one; replace would skip the older.
WAITING_POLICIES = frozenset({"forbid", "buffer_all"})


def to_wait(policy: str, queued: Sequence[int]) -> list[int]:
    """The runs (ids, in tick order) a backfill queues straight to `waiting` behind its first: a
    job that runs one at a time wakes each when the one before it ends, where released at the
    pace each would be claimed, parked waiting, woken and claimed again (issue 36: ~37
    transactions a run instead of a few)."""
    return list(queued[1:]) if policy in WAITING_POLICIES else []


def until(chosen: Sequence[BackfillTick]) -> datetime | None:
    """When the backfill releases its last run: it is active until then."""
    return max((t.due_at for t in chosen if t.due_at is not None), default=None)


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
    return "none" if facts is None else RunState(facts.last_state).value


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
