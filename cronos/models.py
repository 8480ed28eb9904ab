"""msgspec Structs shared by every role: jobs, runs and the payload of each kind of work.

Pure: no I/O. Rows are mapped to these before they leave a store.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

JobKind = Literal["task", "http", "shell"]
JobStatus = Literal["active", "paused"]
ConcurrencyPolicy = Literal["forbid", "allow", "replace"]
MisfirePolicy = Literal["run_once", "run_all", "skip"]
RunState = Literal["queued", "running", "completed", "failed", "skipped"]
Trigger = Literal["schedule", "manual", "retry"]

TERMINAL_STATES: frozenset[str] = frozenset({"completed", "failed", "skipped"})

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


class Run(msgspec.Struct, kw_only=True):
    id: int
    job_id: int
    scheduled_for: datetime
    attempt: int
    trigger: Trigger
    state: RunState
    due_at: datetime
    node_id: str | None = None
    epoch: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    lease_until: datetime | None = None
    duration_ms: float | None = None
    error: str | None = None
    traceback: str | None = None
    result: str | None = None
    skip_reason: str | None = None
    created_at: datetime | None = None


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
