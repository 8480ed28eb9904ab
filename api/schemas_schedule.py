"""What the API shows about a schedule's ticks: fire times with DST notes, warnings and the diff of
an edit. Its own module (no api imports) so the job answers (api.schemas) and the preview
(api.routes_schedule) share it."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from cronos.schedule_lint import LintWarning
from cronos.schedule_union import ScheduleEntry

DstKind = Literal["gap", "fold_once", "fold_first", "fold_second"]


class DstNote(msgspec.Struct, kw_only=True):
    """`gap`: moved to the end of a spring-forward gap. `fold_once`: a repeated wall time, fired
    once (its first pass). `fold_first` / `fold_second`: a repeated wall time fired on each pass."""

    kind: DstKind
    detail: str


_EXCLUDED = Meta(
    description="`calendar:<name>` or `blackout:<name>`: the rule that skips or defers this tick (with `calendars`, "
    "`job` or `queue` in the query); null: it runs"
)


class FireTime(msgspec.Struct, kw_only=True):
    at: datetime  # UTC
    local: str  # wall time with its offset, in the schedule's zone
    dst: DstNote | None = None
    excluded: Annotated[str | None, _EXCLUDED] = None
    deferred_until: Annotated[datetime | None, Meta(description="a deferred tick's release")] = None


WARNINGS = Meta(
    description="what the schedule really does where it may surprise (`*/90` is hourly, day 31 skips months, "
    "both day fields ORed, DST, many jobs in one minute; on a job's create or change also `unserved_action`: no live "
    "executor of its queue serves its task action, or for a shell job allows shell): code, message and what to do "
    "instead; none refuse the job"
)
Warnings = Annotated[list[LintWarning], WARNINGS]


class EditDiff(msgspec.Struct, kw_only=True):
    """The ticks a schedule edit adds and removes between `from` and `until` (a DST note on each
    tick that a clock change moves or doubles)."""

    previous_cron_expression: str
    previous_timezone: str
    previous_schedules: Annotated[
        list[ScheduleEntry], Meta(description="the previous further schedules, when the edit compared unions")
    ] = []
    until: datetime
    added: Annotated[list[FireTime], Meta(description="ticks the new schedule has and the previous one not")]
    removed: Annotated[list[FireTime], Meta(description="ticks the previous schedule has and the new one not")]
    kept: Annotated[int, Meta(description="ticks both have")]
    partial: Annotated[bool, Meta(description="a list was cut (at most 200 each): there are more")]
