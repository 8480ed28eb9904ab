"""Tick accountability (issue 14): every tick a job's schedule had in a window, and what became of it.

Pure: the job's revision history, the window, `now` and the ledger rows are parameters. The
history is cut into segments, one per revision, each with the expression (or interval), time zone and status
that revision left (`segments`); a segment owns the ticks in (its revision's instant, the next
revision's], as the dispatcher's cursor does (creation, a schedule change and a resume move the
cursor to the change's instant, so only ticks strictly after it are due). Ticks are computed per
segment with that segment's schedule (`plan`), then matched with the ledger (`account`): the
run(s) of a tick, the ledger's skip reason, or why there is no row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, Protocol

import msgspec

from cronos import delays
from cronos.errors import InvalidSchedule
from cronos.models import RunState, Trigger
from cronos.schedule_union import ScheduleEntry, as_entries
from cronos.schedule_window import job_schedule

Outcome = Literal["ran", "skipped", "pending", "none"]
SegmentStatus = Literal["absent", "active", "paused", "deleted"]

# Why a tick has no run (stable strings, like the ledger's skip reasons in cronos.models).
BEFORE_CREATED = "before the job existed"
PAUSED = "job paused"
DELETED = "after the job was deleted"
RUNS_DELETED = "its runs were deleted with the job"
NOT_DUE = "not yet due"
NOT_WRITTEN = "not written yet"  # due, but after the job's cursor: the leader has not written it yet
RETENTION = "past the runs' retention"  # its day of the ledger was dropped (CRONOS_RUNS_RETENTION)
CANCELLED = "cancelled"  # its run was cancelled before it started (the run's error says by whom)
UNACCOUNTED = "unaccounted"  # an active job's tick the ledger should hold and does not (G2)

_US = timedelta(microseconds=1)
_STATUSES: dict[str, SegmentStatus] = {"absent": "absent", "active": "active", "paused": "paused", "deleted": "deleted"}
_STARTED: frozenset[str] = frozenset({"running", "completed", "failed"})


class Change(Protocol):
    """A revision as the store reads it (cronos.store.revisions.Revision)."""

    @property
    def number(self) -> int: ...
    @property
    def at(self) -> datetime: ...
    @property
    def status(self) -> str: ...
    @property
    def changes(self) -> Mapping[str, Any]: ...


class Segment(msgspec.Struct, frozen=True, kw_only=True):
    """The ticks in (start, end] follow `revision`'s schedule and status; None: unbounded."""

    start: datetime | None
    end: datetime | None
    revision: int
    status: SegmentStatus
    cron_expression: str
    timezone: str
    every: str | None = None  # an interval (cronos.interval) instead of the expression
    anchor: datetime | None = None
    name: str = ""  # the job's name then: it picks the values of an `H` (cronos.hashed)
    schedules: tuple[ScheduleEntry, ...] = ()  # more schedules: the segment's ticks are the union
    spread: str | None = None  # every tick moved by the offset the name picks (cronos.spread)


class LedgerRow(msgspec.Struct, kw_only=True):
    """A run of a scheduled tick (attempt 1) or of its retries, as the ledger holds it."""

    id: int
    scheduled_for: datetime
    attempt: int
    trigger: Trigger
    revision: int | None  # the job revision that planned it; None before migration 0007
    state: RunState
    started_at: datetime | None
    skip_reason: str | None
    due_at: datetime | None = None  # None: a row read without it
    waiting_for: str | None = None  # the concurrency group it waits (or waited) for


_DELAY = msgspec.Meta(description="started_at - scheduled_for: the start delay (cronos.delays); null until it starts")
_HELD_BACK = msgspec.Meta(
    description="due_at - scheduled_for: held back on purpose (retry backoff, catch-up pace, jitter)"
)
_WAITED = msgspec.Meta(
    description="started_at - due_at: waited once due (behind a predecessor, for an executor); null until it starts"
)
_OUTCOME = msgspec.Meta(
    description="ran: a run started; skipped: the ledger skipped it (`reason`); pending: queued, or not due / "
    "not written yet; none: no run, `reason` says why"
)
_REASON = msgspec.Meta(
    description="why there is no run, or the ledger's skip reason; `unaccounted`: an active job's tick the "
    "ledger does not hold; `waiting for concurrency group NAME`: pending until the group has a free slot; "
    "null when it ran or is queued"
)
_REVISION = msgspec.Meta(
    description="the job revision whose schedule and status the tick belongs to (for a tick only the ledger "
    "knows: the one that planned it)"
)


_GROUP = msgspec.Meta(description="the concurrency group this run waits for (state waiting), or waited for")


class TickRun(msgspec.Struct, kw_only=True):
    """One attempt at a tick (GET /api/runs/{id} has the rest)."""

    id: int
    attempt: int
    state: RunState
    start_delay_s: Annotated[float | None, _DELAY] = None
    held_back_s: Annotated[float | None, _HELD_BACK] = None
    waited_s: Annotated[float | None, _WAITED] = None
    skip_reason: str | None = None
    waiting_for: Annotated[str | None, _GROUP] = None


class Tick(msgspec.Struct, kw_only=True):
    scheduled_for: datetime
    outcome: Annotated[Outcome, _OUTCOME]
    reason: Annotated[str | None, _REASON]
    revision: Annotated[int, _REVISION]
    cron_expression: Annotated[str, msgspec.Meta(description="the schedule's expression; empty for an interval")]
    timezone: str
    runs: list[TickRun]
    every: Annotated[str | None, msgspec.Meta(description="the interval the tick belongs to; null: cron")] = None
    anchor: datetime | None = None


def segments(history: Sequence[Change]) -> list[Segment]:
    """The history, ascending by number, as segments covering all time: before the creation
    (`absent`, with the creation's schedule), then one per revision."""
    out: list[Segment] = []
    fields: dict[str, Any] = {}
    for index, change in enumerate(history):
        fields.update(change.changes)
        if index == 0:
            out.append(_segment(None, change.at, change.number, "absent", fields))
        end = history[index + 1].at if index + 1 < len(history) else None
        out.append(_segment(change.at, end, change.number, change.status, fields))
    return out


def _segment(
    start: datetime | None, end: datetime | None, number: int, status: str, fields: Mapping[str, Any]
) -> Segment:
    every, anchor = fields.get("every"), fields.get("anchor")
    return Segment(
        start=start, end=end, revision=number, status=_STATUSES.get(status, "active"),
        cron_expression=str(fields.get("cron_expression") or ""), timezone=str(fields.get("timezone", "UTC")),
        every=None if every is None else str(every), anchor=_instant(anchor), name=str(fields.get("name") or ""),
        schedules=as_entries(fields.get("schedules")), spread=fields.get("spread") or None,
    )  # fmt: skip


def _instant(value: Any) -> datetime | None:
    """An anchor as a revision keeps it (JSON: RFC 3339 text) or as a Struct holds it."""
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def plan(segs: Iterable[Segment], after: datetime, until: datetime, limit: int) -> list[tuple[datetime, Segment]]:
    """The ticks t with after < t <= until, ascending, at most `limit`, each with its segment. A
    segment whose stored schedule never was valid has none (the dispatcher runs none either)."""
    found: list[tuple[datetime, Segment]] = []
    for seg in segs:
        low = after if seg.start is None else max(after, seg.start)
        high = until if seg.end is None else min(until, seg.end)
        if low >= high or len(found) >= limit:
            continue
        try:  # as the leader reads it (cronos.schedule_window)
            expression = None if seg.every is not None else seg.cron_expression
            schedule, _notice = job_schedule(
                expression, seg.timezone, every=seg.every, anchor=seg.anchor, key=seg.name, schedules=seg.schedules,
                spread=seg.spread,
            )  # fmt: skip
            times = schedule.fire_times(low, high, limit - len(found))
        except (InvalidSchedule, OverflowError):
            continue
        found.extend((t, seg) for t in times)
    return found


def account(
    planned: Sequence[tuple[datetime, Segment]],
    rows: Iterable[LedgerRow],
    segs: Sequence[Segment],
    *,
    now: datetime,
    written_until: datetime | None,
    kept_since: datetime | None = None,
) -> list[Tick]:
    """Each planned tick with its outcome, plus the ledger's ticks no segment plans (written ahead
    under an older schedule, then skipped "schedule changed"), ascending. `written_until` is the
    job's cursor (every tick at or before it is in the ledger); None when the job was deleted (its
    runs went with it). Rows of ticks before `kept_since` may have been dropped by retention."""
    by_tick: dict[datetime, list[LedgerRow]] = {}
    for row in rows:
        by_tick.setdefault(row.scheduled_for, []).append(row)
    horizon = (now, written_until, kept_since)
    ticks = [_tick(t, seg, by_tick.pop(t, []), horizon) for t, seg in planned]
    for t, extra in by_tick.items():  # shown with the revision that planned it, else the one in force then
        planner = {row.revision for row in extra}
        seg = next((s for s in segs if s.revision in planner and s.status != "absent"), None)
        seg = seg or next((s for s in segs if _within(s, t)), None)
        if seg is not None:
            ticks.append(_tick(t, seg, extra, horizon))
    return sorted(ticks, key=lambda tick: tick.scheduled_for)


def _within(seg: Segment, t: datetime) -> bool:
    return (seg.start is None or seg.start < t) and (seg.end is None or t <= seg.end)


_Horizon = tuple[datetime, datetime | None, datetime | None]  # now, written_until, kept_since


def _tick(t: datetime, seg: Segment, rows: list[LedgerRow], horizon: _Horizon) -> Tick:
    runs = [_run(row) for row in sorted(rows, key=lambda row: row.attempt)]
    outcome, reason = _outcome(t, seg, rows, horizon)
    return Tick(
        scheduled_for=t, outcome=outcome, reason=reason, revision=seg.revision,
        cron_expression=seg.cron_expression, timezone=seg.timezone, runs=runs, every=seg.every, anchor=seg.anchor,
    )  # fmt: skip


def _run(row: LedgerRow) -> TickRun:
    due, started = row.due_at, row.started_at
    return TickRun(
        id=row.id, attempt=row.attempt, state=row.state, skip_reason=row.skip_reason,
        start_delay_s=delays.start_delay_s(row.scheduled_for, started),
        held_back_s=None if due is None else delays.held_back_s(row.scheduled_for, due),
        waited_s=None if due is None else delays.waited_s(due, started), waiting_for=row.waiting_for,
    )  # fmt: skip


def _outcome(t: datetime, seg: Segment, rows: list[LedgerRow], horizon: _Horizon) -> tuple[Outcome, str | None]:
    now, written_until, kept_since = horizon
    if rows:
        if any(row.state in _STARTED or row.started_at is not None for row in rows):  # cancelled while it ran too
            return "ran", None
        if all(row.state in ("skipped", "cancelled") for row in rows):  # cancelled before it started
            last = max(rows, key=lambda row: row.attempt)
            return "skipped", last.skip_reason or CANCELLED
        group = next((row.waiting_for for row in rows if row.state == "waiting" and row.waiting_for), None)
        if group is not None:
            return "pending", f"waiting for concurrency group {group}"
        return "pending", None  # queued: written, not started yet
    if seg.status == "absent":
        return "none", BEFORE_CREATED
    if seg.status == "deleted":
        return "none", DELETED
    if seg.status == "paused":
        return "none", PAUSED
    if t > now:
        return "pending", NOT_DUE
    if kept_since is not None and t < kept_since:
        return "none", RETENTION
    if written_until is None:
        return "none", RUNS_DELETED
    if t > written_until:
        return "pending", NOT_WRITTEN
    return "none", UNACCOUNTED
