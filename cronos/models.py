"""msgspec Structs shared by every role: jobs, runs and the payload of each kind of work.

Pure: no I/O. Rows are mapped to these before they leave a store.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

import msgspec

JobKind = Literal["task", "http", "shell"]
JobStatus = Literal["active", "paused"]
ConcurrencyPolicy = Literal["forbid", "allow", "replace"]
MisfirePolicy = Literal["run_once", "run_all", "skip"]
RunState = Literal["queued", "running", "completed", "failed", "skipped"]
Trigger = Literal["schedule", "manual", "retry"]

JOB_STATUSES: tuple[str, ...] = get_args(JobStatus)
RUN_STATES: tuple[str, ...] = get_args(RunState)

# Skip and failure reasons are stable strings: tests, dashboards and operators match them.
SKIP_MISFIRED = "misfired"
SKIP_EXPIRED = "expired"
SKIP_OVERLAP = "previous run still running"
SKIP_JOB_INACTIVE = "job paused or deleted"  # written ahead, then the job stopped before it was due
FAIL_EXECUTOR_LOST = "executor lost"
FAIL_REPLACED = "replaced"


class Job(msgspec.Struct, kw_only=True):
    id: int
    name: str
    cron_expression: str
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
    last_scheduled_for: datetime | None
    created_at: datetime
    updated_at: datetime


class RunSummary(msgspec.Struct, kw_only=True):
    """A run without its lease and its long outputs: what every listing of runs shows."""

    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    trigger: Trigger
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


class Run(RunSummary, kw_only=True):
    """A row of `runs`."""

    lease_until: datetime | None
    traceback: str | None
    result: str | None


class DispatchJob(msgspec.Struct, kw_only=True):
    """A job as the dispatcher's schedule holds it and its planner reads it: mutable, because
    the leader moves `cursor` in memory as its tick writes commit. `cursor` is the one place the
    dispatcher keeps how far the job is written: every tick at or before it is in the ledger."""

    id: int
    cron_expression: str
    timezone: str
    misfire_policy: MisfirePolicy
    misfire_grace_s: float
    jitter_s: float
    concurrency_policy: ConcurrencyPolicy
    status: JobStatus
    cursor: datetime  # last_scheduled_for, or created_at when never dispatched


# --- payloads, one per kind; the API validates a job's payload against its kind ---

Header = Annotated[str, msgspec.Meta(max_length=8192)]


class TaskPayload(msgspec.Struct, kw_only=True):
    """`task` jobs: `action` names a function registered with `@cronos.task`; the rest is its input."""

    action: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]


class HttpPayload(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: Annotated[str, msgspec.Meta(pattern=r"^https?://\S+$", max_length=4096)]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "POST"
    headers: dict[str, Header] = {}
    body: Any = None
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] | None = None
    expect_status: list[Annotated[int, msgspec.Meta(ge=100, le=599)]] | int | None = None
    follow_redirects: bool = False


class ShellPayload(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    argv: Annotated[list[str], msgspec.Meta(min_length=1)]
    env: dict[str, str] = {}
    cwd: str | None = None


PAYLOAD_TYPES: dict[str, type[msgspec.Struct]] = {
    "task": TaskPayload,
    "http": HttpPayload,
    "shell": ShellPayload,
}


def validate_payload(kind: str, payload: dict[str, Any]) -> msgspec.Struct:
    """Decode `payload` as the struct of `kind`; raises msgspec.ValidationError with a `$.` path."""
    return msgspec.convert(payload, PAYLOAD_TYPES[kind])
