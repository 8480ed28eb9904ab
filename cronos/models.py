"""msgspec Structs shared by every role: jobs and runs (each kind's payload: cronos.payloads).

Pure: no I/O. Rows are mapped to these before they leave a store.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

import msgspec

from cronos.errors import InvalidInput
from cronos.namespaces import DEFAULT as DEFAULT_NAMESPACE
from cronos.rules import CalendarRef
from cronos.schedule_union import ScheduleEntry

JobKind = Literal["task", "http", "shell"]
JobStatus = Literal["active", "paused", "completed", "expired"]
# What a client may set; `completed` and `expired` are terminal: the leader (or the API) ends a job.
SettableStatus = Literal["active", "paused"]
TERMINAL_STATUSES = ("completed", "expired")
ConcurrencyPolicy = Literal["forbid", "allow", "replace", "buffer_one", "buffer_all"]
MisfirePolicy = Literal["run_once", "run_all", "skip"]
Trigger = Literal["schedule", "manual", "retry", "chain", "backfill"]  # chain: after a run of a parent job

JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)


class RunState(StrEnum):
    """The states of a run (cronos.lifecycle: the transitions between them)."""

    QUEUED = "queued"  # runs when due; the outbox pushes its token
    WAITING = "waiting"  # due, behind a run of its job; woken by that run's end
    RESERVED = "reserved"  # claimed ahead of its due time by the executor that starts it then
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"  # with its reason
    CANCELLED = "cancelled"  # by someone (its error says who); never retried


RUN_STATES: tuple[str, ...] = tuple(state.value for state in RunState)

# Skip and failure reasons are stable strings: tests, dashboards and operators match them.
SKIP_MISFIRED = "misfired"
SKIP_EXPIRED = "expired"
SKIP_OVERLAP = "previous run still running"
SKIP_BUFFER_FULL = "previous run still running, another run already waits for it"  # buffer_one
SKIP_PENDING = "an earlier run of the job has not started yet"  # run_once + forbid: one pending run per job
SKIP_JOB_INACTIVE = "job paused or deleted"  # written ahead, then the job stopped before it was due
SKIP_SCHEDULE_CHANGED = "schedule changed"  # written ahead, then a new schedule without this tick took over
FAIL_EXECUTOR_LOST = "executor lost"
FAIL_REPLACED = "replaced"

# Concurrency groups: a name jobs share (migration 0036's check says the same).
GROUP_PATTERN = "^[A-Za-z0-9_.-]{1,64}$"

# Queues (one Redis stream each): a short name, so it fits a key, a metric label and a CLI list.
DEFAULT_QUEUE = "default"
QUEUE_PATTERN = "^[A-Za-z0-9_-]{1,64}$"


def parse_queues(text: str) -> tuple[str, ...]:
    """A comma-separated list of queue names (`a,b`), each checked; duplicates dropped."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise InvalidInput("queues", "name at least one queue")
    for name in names:
        if not re.fullmatch(QUEUE_PATTERN, name):
            raise InvalidInput("queues", f"{name!r} is not a queue name (letters, digits, '-', '_'; 64 at most)")
    return tuple(dict.fromkeys(names))


class ManagedBy(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Set by a tool that keeps the job in step with a file (`cronos apply`, whose --prune deletes
    only jobs it marked); kept by every other write."""

    tool: Annotated[str, msgspec.Meta(min_length=1, max_length=100, pattern="^[ -~]+$")]
    # The API shows secrets as `***`: apply stores a salted scrypt of the payload it sent, secrets
    # included, to see later whether the file's secrets still are the stored ones (cronos.client.apply).
    secrets_digest: Annotated[str, msgspec.Meta(max_length=300, pattern="^[!-~]+$")] | None = None


_WITHIN = {"gt": 0, "le": 366 * 86_400}


class Hosts(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Runs on every host (cronos.every_host): a run per live executor of the job's queue each tick,
    or on `count` of them, or on those whose CRONOS_EXECUTOR_LABELS hold `label`. Absent: one run
    per tick, on any executor."""

    count: (
        Annotated[int, msgspec.Meta(ge=1, le=10_000, description="on this many of them at most (stable choice)")] | None
    ) = None
    label: (
        Annotated[
            str,
            msgspec.Meta(
                min_length=3,
                max_length=200,
                pattern="^[^=,]+=[^=,]+$",  # and no NUL (api.bodies refuses it: jsonb cannot hold it)
                description="only executors with this key=value",
            ),
        ]
        | None
    ) = None


class Breaker(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """The job's circuit breaker (issue 40, cronos.breaker), over the cluster's default."""

    failures: (
        Annotated[int, msgspec.Meta(ge=0, le=10_000, description="pause after this many failed runs in a row "
                                    "(0: never; null: CRONOS_BREAKER_DEFAULT_FAILURES)")]
        | None
    ) = None  # fmt: skip
    canary_every: (
        Annotated[int, msgspec.Meta(ge=0, le=10_000, description="while paused by the breaker, one run every this "
                                    "many ticks; the job resumes by itself when one succeeds (0: no canary)")]
        | None
    ) = None  # fmt: skip


class Expectations(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a job is expected to do, from its schedule (issue 24: the dead-man's switch); each
    optional. The leader's health evaluator judges every run by those of the revision that planned it."""

    start_within_s: (
        Annotated[float, msgspec.Meta(**_WITHIN, description="a run starts at most this long after its tick (late)")]
        | None
    ) = None
    finish_within_s: (
        Annotated[float, msgspec.Meta(**_WITHIN, description="a run ends at most this long after it started (overran)")]
        | None
    ) = None
    not_faster_than_s: (
        Annotated[float, msgspec.Meta(**_WITHIN, description="a completed run took at least this long (too fast)")]
        | None
    ) = None
    success_every_s: (
        Annotated[float, msgspec.Meta(**_WITHIN, description="at least one completed run this often (no success)")]
        | None
    ) = None
    breaker: Breaker | None = None  # not judged per run: the leader's breaker reads it (cronos.breaker)


ChainOn = Literal["completed", "failed", "ended"]
JoinTimeout = Literal["run", "skip"]


class ChainJoin(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A child of several parents runs once per logical tick, after all of them (cronos.chains)."""

    timeout_s: Annotated[
        float,
        msgspec.Meta(gt=0, le=7 * 86_400, description="how long a join waits after its first parent ended"),
    ] = 3600.0
    on_timeout: Annotated[
        JoinTimeout, msgspec.Meta(description="what a join whose parents did not all end in time does: run or skip")
    ] = "skip"


class Chain(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """When a child job runs after its `parents` (cronos.chains); None on a job: as `{}`."""

    on: Annotated[
        dict[str, ChainOn],
        msgspec.Meta(
            max_length=100,
            description="parent id -> when the child runs after it: `completed` (the default for a parent not named "
            "here), `failed` (its last attempt failed) or `ended` (any end)",
            extra_json_schema={"propertyNames": {"pattern": "^[1-9][0-9]{0,18}$"}},
        ),
    ] = {}
    join: Annotated[
        ChainJoin | None,
        msgspec.Meta(
            description="run once per logical tick (the parents' `scheduled_for`) after every parent fired its "
            "edge; null: a run after each parent run that fires its edge"
        ),
    ] = None


class Job(msgspec.Struct, kw_only=True):
    id: int
    name: str
    cron_expression: str | None  # None: a one-off (run_at) or an interval (every)
    timezone: str
    kind: JobKind
    payload: dict[str, Any]
    timeout_s: float
    max_retries: int
    retry_backoff_s: float
    concurrency_policy: ConcurrencyPolicy
    misfire_policy: MisfirePolicy
    misfire_grace_s: float
    jitter_s: float
    status: JobStatus
    revision: Annotated[int, msgspec.Meta(description="its newest revision: GET /api/jobs/{id}/revisions")]
    last_scheduled_for: datetime | None
    created_at: datetime
    updated_at: datetime
    managed_by: ManagedBy | None = None
    # Chains: the job also runs after each successful run of each of these jobs (cronos.store.chains).
    parents: list[int] = []
    queue: str = DEFAULT_QUEUE
    run_at: datetime | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = None
    catchup_max_per_s: float | None = None
    expectations: Expectations | None = None
    # Intervals (cronos.interval): ticks at anchor + k·every; anchor None: the Unix epoch.
    every: str | None = None
    anchor: datetime | None = None
    # Calendars and the timed pause (issue 25, cronos.rules): set by POST /api/jobs/{id}/pause.
    calendars: list[CalendarRef] = []
    paused_until: Annotated[
        datetime | None, msgspec.Meta(description="a timed pause: the leader resumes the job at this instant")
    ] = None
    pause_note: Annotated[str | None, msgspec.Meta(description="the note its pause was given")] = None
    # Labels (key=value, cronos.selectors) and an owner: found and acted on by selector (issue 25).
    labels: dict[str, str] = {}
    owner: str | None = None
    concurrency_group: str | None = None  # its runs start only with a slot of this group (cronos.store.groups)
    hosts: Hosts | None = None  # runs on every host (cronos.every_host); None: one run per tick
    chain: Chain | None = None  # when it runs after its parents: edges and a join (cronos.chains)
    # More schedules: it fires at the union of its own and these (cronos.schedule_union).
    schedules: list[ScheduleEntry] = []
    # The namespace it belongs to (cronos.namespaces); set at creation, never changed.
    namespace: Annotated[
        str, msgspec.Meta(description="the namespace it lives in: `?namespace=` of its create (docs/namespaces.md)")
    ] = DEFAULT_NAMESPACE
    # Deterministic spread: every tick moved by an offset its name picks in [0, spread) (cronos.spread).
    spread: str | None = None


# A job's columns, as every statement that reads a job names them: Job's fields in their order
# (tests/unit/test_queries.py checks each statement's list against it).
JOB_COLUMNS: tuple[str, ...] = Job.__struct_fields__
# The fields of a job a client sets, in that order; the rest the system keeps.
_JOB_KEPT = frozenset(
    {"id", "revision", "last_scheduled_for", "created_at", "updated_at", "paused_until", "pause_note"}
)
JOB_WRITABLE = tuple(name for name in JOB_COLUMNS if name not in _JOB_KEPT)


class RunSummary(msgspec.Struct, kw_only=True):
    """A run without its lease and its long outputs: what every listing of runs shows."""

    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    trigger: Trigger
    revision: Annotated[int, msgspec.Meta(description="the job revision that planned it")] | None  # None: before 0007
    state: RunState
    due_at: datetime
    node_id: str | None
    epoch: int | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: float | None
    error: str | None
    skip_reason: str | None
    created_at: datetime | None
    parent_run_id: (
        Annotated[int, msgspec.Meta(description="trigger `chain`: the parent job's run it follows")] | None
    ) = None
    waiting_for: (
        Annotated[str, msgspec.Meta(description="the concurrency group it waits (state waiting) or waited for")] | None
    ) = None
    host: (
        Annotated[str, msgspec.Meta(description="a per-host job's run: the executor it runs on (docs/every-host.md)")]
        | None
    ) = None


class Run(RunSummary, kw_only=True):
    """A row of `runs`."""

    lease_until: datetime | None
    traceback: str | None
    result: str | None


class DispatchJob(msgspec.Struct, kw_only=True, gc=False):
    """A job as the dispatcher's schedule holds it and its planner reads it: mutable, because
    the leader moves `cursor` in memory as its tick writes commit. `cursor` is the one place the
    dispatcher keeps how far the job is written: every tick at or before it is in the ledger.
    The leader holds one per active job (a million of them): not tracked by the garbage collector
    (it holds no reference cycle), its calendars a tuple (the empty one is shared)."""

    id: int
    cron_expression: str | None  # None: a one-off at run_at, or an interval
    timezone: str
    misfire_policy: MisfirePolicy
    misfire_grace_s: float
    jitter_s: float
    concurrency_policy: ConcurrencyPolicy
    status: JobStatus
    cursor: datetime  # last_scheduled_for, or created_at when never dispatched
    revision: int = 1  # the job's revision: the ticks written for it record it
    plan_revision: int = 1  # the revision its schedule took effect in: a newer one moves the cursor back to it
    run_at: datetime | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    runs_left: int | None = None  # max_runs less the scheduled runs written; None: no limit
    catchup_max_per_s: float | None = None
    queue: str = DEFAULT_QUEUE  # the stream its tokens go to
    action: str | None = None  # a task job's payload.action: its tokens carry it (executor routing)
    shell: bool = False  # a shell job: its tokens say so (executor routing)
    every: str | None = None  # an interval (cronos.interval), from anchor (None: the epoch)
    anchor: datetime | None = None
    name: str = ""  # blackout selectors name jobs
    calendars: tuple[CalendarRef, ...] = ()
    hosts: dict[str, Any] | None = None  # runs on every host (cronos.every_host); None: once a tick
    schedules: tuple[ScheduleEntry, ...] = ()  # more schedules (cronos.schedule_union); the empty one is shared
    spread: str | None = None  # every tick moved by the offset its name picks (cronos.spread)
