"""Request and response bodies, as msgspec Structs (also the source of the OpenAPI schemas).

Requests forbid unknown fields and carry their constraints in `Meta`, so a decode error
names the field (`$.timeout_s`) and nothing invalid gets further than the handler.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from api.names import PATTERN as NAME_PATTERN
from api.schemas_schedule import EditDiff, Warnings
from cronos import __version__
from cronos.interval import MAX_S as INTERVAL_MAX_S
from cronos.interval import MIN_S as INTERVAL_MIN_S
from cronos.models import (
    DEFAULT_QUEUE,
    GROUP_PATTERN,
    QUEUE_PATTERN,
    Breaker,
    Chain,
    ConcurrencyPolicy,
    Expectations,
    Hosts,
    Job,
    JobKind,
    ManagedBy,
    MisfirePolicy,
    RunSummary,
    SettableStatus,
)
from cronos.rules import CalendarRef
from cronos.run_usage import Usage
from cronos.schedule_union import MAX_ENTRIES, ScheduleEntry
from cronos.selectors import KEY_PATTERN, MAX_LABELS, VALUE_PATTERN
from cronos.store.revisions import Revision

# Formats the schema cannot check (a cron expression, a time zone) are named for tools; no text
# may hold NUL (PostgreSQL cannot store it).
_NO_NUL = {"pattern": "^[^\\x00]*$"}
Name = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=200,
        description="unique job name (stored NFC-normalised); not blank, no control or bidirectional characters",
        extra_json_schema={"pattern": NAME_PATTERN},
    ),
]
Expression = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=256,
        description="5-field cron, 6-field cron with seconds first, @hourly/@daily/@weekly/@monthly/@yearly,"
        " or @never (no fire time: a job run only by hand or after its parents). `n/step` is `n-max/step`;"
        " in a job's schedule `H`, `H(a-b)`, `H/n` stand for values its name picks, spreading jobs that"
        " share an expression (docs/spread.md)",
        examples=["*/5 * * * *"],
        extra_json_schema={"format": "cron", **_NO_NUL},
    ),
]
Timezone = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=64,
        description="IANA time zone",
        examples=["UTC"],
        extra_json_schema={"format": "iana-time-zone", **_NO_NUL},
    ),
]
Payload = Annotated[dict[str, Any], Meta(description="input of the job; its shape depends on `kind`")]
TimeoutS = Annotated[float, Meta(gt=0, le=86_400, description="run timeout in seconds")]
MaxRetries = Annotated[int, Meta(ge=0, le=100)]
BackoffS = Annotated[float, Meta(ge=0, le=86_400, description="base delay before a retry, doubled per attempt")]
GraceS = Annotated[float, Meta(ge=0, le=7 * 86_400, description="how late a tick may still start")]
JitterS = Annotated[float, Meta(ge=0, le=3600, description="random delay added to each tick, up to this")]
Parents = Annotated[
    list[Annotated[int, Meta(ge=1, le=2**63 - 1)]],
    Meta(
        max_length=100,
        description="ids of parent jobs: the job also runs after each successful run of each of them "
        "(trigger `chain`; `chain` says otherwise: on failure, on any end, a join); no cycles. With "
        "cron_expression `@never` it runs only after them",
    ),
]
Queue = Annotated[
    str,
    Meta(
        pattern=QUEUE_PATTERN,
        description="the queue whose executors run it (`cronos executor --queue NAME`)",
        examples=[DEFAULT_QUEUE],
    ),
]
GroupName = Annotated[
    str,
    Meta(
        pattern=GROUP_PATTERN,
        description="a concurrency group (GET /api/concurrency-groups): its runs start only while the "
        "group has a free slot, shared with every job that names it; null: none",
        examples=["warehouse"],
    ),
]
# Windows and one-offs (issue 14): instants with their offset (RFC 3339), as every time the API shows.
RunAt = Annotated[
    datetime,
    Meta(tz=True, description="a one-off: the instant it runs once (instead of cron_expression; exactly one of them)"),
]
StartAt = Annotated[datetime, Meta(tz=True, description="no tick before this instant")]
EndAt = Annotated[datetime, Meta(tz=True, description="no tick after this instant; then the job is completed")]
MaxRuns = Annotated[int, Meta(ge=1, le=2**31 - 1, description="after this many scheduled runs the job is completed")]
# Intervals (issue 25, cronos.interval): a duration, stored in its canonical spelling.
Every = Annotated[
    Annotated[int, Meta(ge=INTERVAL_MIN_S, le=INTERVAL_MAX_S)]
    | Annotated[str, Meta(min_length=1, max_length=40, extra_json_schema={"format": "cronos-duration"})],
    Meta(
        description="an interval instead of cron_expression: ticks at anchor + k·every in elapsed time (DST "
        "moves none); `90s`, `90m`, `1h30m`, `2d` or a number of seconds, 1 s to 366 days; shown as `1h30m`",
        examples=["90m"],
    ),
]
Anchor = Annotated[
    datetime, Meta(tz=True, description="an interval's ticks are anchor + k·every (null: 1970-01-01T00:00:00Z)")
]
# Deterministic spread (issue 40, cronos.spread): a duration as `every` takes it, stored canonically.
Spread = Annotated[
    Annotated[int, Meta(ge=INTERVAL_MIN_S, le=INTERVAL_MAX_S)]
    | Annotated[str, Meta(min_length=1, max_length=40, extra_json_schema={"format": "cronos-duration"})],
    Meta(
        description="every tick of the schedule moved by an offset in [0, spread) whole seconds that the job's name "
        "picks (stable across restarts and other jobs; docs/spread.md); shorter than the schedule's shortest gap "
        "between two ticks; `10m`, `1h` or a number of seconds; null: none",
        examples=["10m"],
    ),
]
Calendars = Annotated[
    list[CalendarRef],
    Meta(max_length=20, description="calendars (GET /api/calendars) whose days this job's ticks skip (`exclude`) "
         "or are limited to (`allow`); a skipped tick's reason is `calendar:<name>`"),
]  # fmt: skip
# Exactly one of cron and every; a zone only with cron, an anchor only with every (cronos.schedule_union).
_ENTRY = {"oneOf": [
    {"required": ["cron"], "properties": {"cron": {"type": "string"}, "every": {"type": "null"},
                                          "anchor": {"type": "null"}}},
    {"required": ["every"], "properties": {"every": {"type": "string"}, "cron": {"type": "null"},
                                           "timezone": {"type": "null"}}},
]}  # fmt: skip
Schedules = Annotated[
    list[Annotated[ScheduleEntry, Meta(extra_json_schema=_ENTRY)]],
    Meta(max_length=MAX_ENTRIES, description="more schedules: the job fires at the union of its cron_expression (or "
         "every) and each of these, `{cron, timezone?}` (zone default: the job's) or `{every, anchor?}`; an instant "
         "two of them share is one tick (docs/schedules.md)"),
]  # fmt: skip
CatchupPerS = Annotated[
    float,
    Meta(gt=0, le=1_000_000, description="late runs of this job's catch-up at most this many a second (null: global)"),
]


# Labels and owner (issue 25; cronos.selectors checks each label, 422 naming it: api.bodies.check_job).
Labels = Annotated[
    dict[str, Annotated[str, Meta(extra_json_schema={"pattern": VALUE_PATTERN})]],
    Meta(description="key=value labels (Kubernetes' syntax: [prefix/]name, 63 characters at most), found and "
         "acted on by selector (`GET /api/jobs?selector=team=data`, `POST /api/jobs/bulk`)",
         # described here, checked by cronos.selectors.check_labels (its 422 names the label)
         extra_json_schema={"maxProperties": MAX_LABELS, "propertyNames": {"pattern": KEY_PATTERN}}),
]  # fmt: skip
Owner = Annotated[str, Meta(min_length=1, max_length=253, pattern="^[ -~]+$", description="who owns the job")]


class JobCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The seed body `{name, cron_expression, payload}`; every other field has a default."""

    name: Name
    cron_expression: Expression | None = None  # required unless run_at or every is given
    payload: Payload
    timezone: Timezone = "UTC"
    kind: JobKind = "task"
    timeout_s: TimeoutS = 300.0
    max_retries: MaxRetries = 0
    retry_backoff_s: BackoffS = 10.0
    concurrency_policy: ConcurrencyPolicy = "forbid"
    misfire_policy: MisfirePolicy = "run_once"
    misfire_grace_s: GraceS = 60.0
    jitter_s: JitterS = 0.0
    status: SettableStatus = "active"
    managed_by: ManagedBy | None = None  # set by `cronos apply`; not a field of a jobs file
    parents: Parents = []
    queue: Queue = DEFAULT_QUEUE
    run_at: RunAt | None = None
    start_at: StartAt | None = None
    end_at: EndAt | None = None
    max_runs: MaxRuns | None = None
    catchup_max_per_s: CatchupPerS | None = None
    expectations: Expectations | None = None
    every: Every | None = None
    anchor: Anchor | None = None
    calendars: Calendars = []
    labels: Labels = {}
    owner: Owner | None = None
    concurrency_group: GroupName | None = None
    hosts: Hosts | None = None
    chain: Chain | None = None
    schedules: Schedules = []
    spread: Spread | None = None


class JobPatch(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A partial update: only the fields present change; the result is validated like a create."""

    name: Name | UnsetType = UNSET
    cron_expression: Expression | UnsetType | None = UNSET
    payload: Payload | UnsetType = UNSET
    timezone: Timezone | UnsetType = UNSET
    kind: JobKind | UnsetType = UNSET
    timeout_s: TimeoutS | UnsetType = UNSET
    max_retries: MaxRetries | UnsetType = UNSET
    retry_backoff_s: BackoffS | UnsetType = UNSET
    concurrency_policy: ConcurrencyPolicy | UnsetType = UNSET
    misfire_policy: MisfirePolicy | UnsetType = UNSET
    misfire_grace_s: GraceS | UnsetType = UNSET
    jitter_s: JitterS | UnsetType = UNSET
    status: SettableStatus | UnsetType = UNSET
    managed_by: ManagedBy | UnsetType | None = UNSET
    parents: Parents | UnsetType = UNSET
    queue: Queue | UnsetType = UNSET
    run_at: RunAt | UnsetType | None = UNSET
    start_at: StartAt | UnsetType | None = UNSET
    end_at: EndAt | UnsetType | None = UNSET
    max_runs: MaxRuns | UnsetType | None = UNSET
    catchup_max_per_s: CatchupPerS | UnsetType | None = UNSET
    expectations: Expectations | UnsetType | None = UNSET
    every: Every | UnsetType | None = UNSET
    anchor: Anchor | UnsetType | None = UNSET
    calendars: Calendars | UnsetType = UNSET
    labels: Labels | UnsetType = UNSET
    owner: Owner | UnsetType | None = UNSET
    concurrency_group: GroupName | UnsetType | None = UNSET
    hosts: Hosts | UnsetType | None = UNSET
    chain: Chain | UnsetType | None = UNSET
    schedules: Schedules | UnsetType = UNSET
    spread: Spread | UnsetType | None = UNSET

    def changes(self) -> dict[str, Any]:
        changed = {f: v for f in self.__struct_fields__ if (v := getattr(self, f)) is not UNSET}
        # One of cron_expression, run_at and every replaces the others: one field switches the job
        # (an interval's anchor goes with it).
        for given in WHEN_FIELDS:
            if changed.get(given) is not None:
                for other in WHEN_FIELDS:
                    if other != given:
                        changed.setdefault(other, None)
                if given != "every":
                    changed.setdefault("anchor", None)
        return changed


# A job's schedule is exactly one of these.
WHEN_FIELDS = ("cron_expression", "run_at", "every")


# One start delay everywhere (cronos.delays): from the scheduled tick, with its two parts beside it.
START_DELAY_MS = Meta(description="started_at - scheduled_for (the tick), ms: the start delay; null until it starts")
HELD_BACK_MS = Meta(
    description="due_at - scheduled_for, ms: held back on purpose (retry backoff, catch-up pace, jitter)"
)
WAITED_MS = Meta(
    description="started_at - due_at, ms: waited once due (behind a predecessor, for an executor); null until it starts"
)


INPUTS = Meta(
    description="the payload overrides this run was triggered with (POST /api/jobs/{id}/trigger; its retries "
    "keep them), secrets shown as ***; null: the job's payload as it is. Only on GET /api/runs/{id} and the "
    "trigger's answer"
)


USAGE = Meta(
    description="what the run's work used (docs/run-usage.md): wall_ms, and cpu_ms for shell and task runs, "
    "cpu_user_ms, cpu_sys_ms and max_rss_bytes for shell runs; null: not measured (not ended yet, or ended by "
    "the leader's reaper). Only on GET /api/runs/{id}"
)


class RunOut(RunSummary, kw_only=True):
    """A run; `traceback` and `result` (they can be long) only on GET /api/runs/{id}."""

    start_delay_ms: Annotated[float | None, START_DELAY_MS]
    held_back_ms: Annotated[float, HELD_BACK_MS]
    waited_ms: Annotated[float | None, WAITED_MS]
    traceback: str | UnsetType | None = UNSET
    result: str | UnsetType | None = UNSET
    inputs: Annotated[dict[str, Any] | UnsetType | None, INPUTS] = UNSET  # api.routes_trigger
    usage: Annotated[Usage | UnsetType | None, USAGE] = UNSET
    # Only on GET /api/runs/{id}, for a queued run (api.task_routing).
    unserved: Annotated[
        str | UnsetType | None,
        Meta(description="a queued run no live executor can run (its task action, shell jobs): why it waits"),
    ] = UNSET


class JobOut(Job, kw_only=True):
    """The stored job (cronos.models.Job) plus what the API derives for it."""

    next_run_at: datetime | None
    # Set when the stored cron_expression/timezone is one the parser now refuses (issue 12): the
    # job keeps its previous meaning until edited; this says why and what to write instead.
    schedule_notice: Annotated[
        str | None,
        Meta(description="why the stored schedule is refused now and what to write instead; null when valid"),
    ] = None
    # Only when it is created or rotated: the Standard Webhooks secret (`whsec_...`) that signs
    # the requests of an http job. Never shown again.
    webhook_secret: str | UnsetType = UNSET
    # Only on GET /api/jobs/{id}.
    last_run: RunOut | UnsetType | None = UNSET
    breaker: Annotated[
        Breaker | UnsetType,
        Meta(description="only on GET /api/jobs/{id}: the circuit breaker that applies, each setting the job's own "
             "(expectations.breaker), else its queue's (CRONOS_BREAKER_DEFAULTS), else the cluster's "
             "(CRONOS_BREAKER_DEFAULT_FAILURES; canary_every 0: none); failures 0: no breaker (docs/breaker.md)"),
    ] = UNSET  # fmt: skip
    # Only in the answer to a create or a change (api.job_lint, docs/schedule-lint.md).
    warnings: Warnings | UnsetType = UNSET
    schedule_diff: Annotated[
        EditDiff | UnsetType,
        Meta(description="on a change of schedule only: the ticks of the next 7 days it adds and removes"),
    ] = UNSET


class JobList(msgspec.Struct, kw_only=True):
    items: list[JobOut]
    next_cursor: str | None


class RunList(msgspec.Struct, kw_only=True):
    items: list[RunOut]
    next_cursor: str | None


class RevisionList(msgspec.Struct, kw_only=True):
    """A job's revisions, newest first: number (1 = creation), kind, when, who, the status after
    it, and the fields it set with their new values (secrets as ***)."""

    items: list[Revision]
    next_cursor: str | None


class Health(msgspec.Struct, kw_only=True):
    status: str = msgspec.field(default="ok")
    service: str = "Cronos Distributed Scheduler"
    database: str = "PostgreSQL Connected"
    cache: str = "Redis Connected"
    version: str = __version__  # the running release (the image's org.opencontainers.image.version)


class LeaderOut(msgspec.Struct, kw_only=True):
    node_id: str | None = msgspec.field(default=None)
    epoch: int | None = None
    epoch_holder: str | None = None


class LeaderHealthOut(msgspec.Struct, kw_only=True):
    """From the leader's presence (issue 16): its last PostgreSQL round trip and tick write, their
    ages, and whether it can write now (a leader cut from PostgreSQL is not shown healthy)."""

    node_id: str | None = None
    healthy: bool = False
    db_ok_at: datetime | None = None
    db_ok_age_s: float | None = None
    wrote_at: datetime | None = None
    write_age_s: float | None = None


class RunShareOut(msgspec.Struct, kw_only=True):
    """An executor's share of the work, from its presence (executor.tally)."""

    window_s: Annotated[float, Meta(description="the window the counts cover: 5 minutes, or the node's age")]
    started: Annotated[int, Meta(description="runs it started in the window")]
    share_pct: Annotated[
        float | None,
        Meta(description="its runs a second over the window, in % of all executors' (null: none started any)"),
    ]
    started_total: Annotated[int, Meta(description="runs it started since it started")]
    last_claimed_at: Annotated[datetime | None, Meta(description="when it last started a run (null: never)")] = None
    last_claimed_age_s: float | None = None


class NodeOut(msgspec.Struct, kw_only=True):
    role: str
    node_id: str
    last_heartbeat: datetime | None
    age_s: float | None
    info: dict[str, str]
    queues: Annotated[list[str], Meta(description="an executor's queues (empty for other roles)")] = []
    actions: Annotated[
        list[str] | None,
        Meta(description="the task actions an executor runs (null: another role, or an executor that does not say)"),
    ] = None
    shell: Annotated[
        bool | None,
        Meta(description="whether an executor runs shell jobs (null: another role, or an executor that does not say)"),
    ] = None
    runs: Annotated[
        RunShareOut | None, Meta(description="an executor's runs and share of the work (null: another role)")
    ] = None


class UnservedOut(msgspec.Struct, kw_only=True):
    queue: str
    action: Annotated[str | None, Meta(description="the task action no executor runs; null for shell jobs")]
    shell: Annotated[bool, Meta(description="shell jobs: no live executor of the queue allows them")] = False
    message: str
    reported_by: Annotated[list[str], Meta(description="the executors that declined its runs lately")]


class StreamOut(msgspec.Struct, kw_only=True):
    length: int
    pending: int
    lag: int | None
    consumers: dict[str, int] = msgspec.field(default_factory=dict)


class ClusterOut(msgspec.Struct, kw_only=True):
    cluster_id: Annotated[
        str | None,
        Meta(description="this cluster's identity (made in PostgreSQL by `cronos migrate`); null while it is down"),
    ] = None
    leader: LeaderOut
    nodes: list[NodeOut]
    stream: Annotated[StreamOut | None, Meta(description="the default queue's stream (as `queues.default`)")]
    database: str
    cache: str
    leader_health: LeaderHealthOut | None = None  # None: no lock holder (or Redis unreachable)
    queues: Annotated[
        dict[str, StreamOut],
        Meta(description="each queue's stream: length, pending, lag (tokens no executor read yet), consumers"),
    ] = msgspec.field(default_factory=dict)
    unserved: Annotated[
        list[UnservedOut],
        Meta(description="task actions whose runs no live executor of their queue serves: they wait queued"),
    ] = msgspec.field(default_factory=list)
